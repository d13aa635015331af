// Prints Kafka's error table from the kafka-clients jar on the class path, one error a line:
// code, name, and "retriable" when its Java exception is a RetriableException ("-" otherwise).
// Run by tools/gen_schema.py as `java -cp <clients jars> tools/KafkaErrors.java` (source launch).
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;

public class KafkaErrors {
    public static void main(String[] args) {
        for (Errors error : Errors.values()) {
            boolean retriable = error.exception() instanceof RetriableException;
            System.out.println(error.code() + "\t" + error.name() + "\t" + (retriable ? "retriable" : "-"));
        }
    }
}
