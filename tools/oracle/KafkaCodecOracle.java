// Kafka's own message codec as a differential oracle for kproto (issue 36).
//
// Compiled and run by tools/java_oracle.py against an Apache Kafka release's jars; one JVM
// answers any number of requests, one line in, one line of JSON out:
//
//   list                       every API the jar knows: key, name, version range
//   describe <class>           the version range of a generated class (RequestHeaderData,
//                              ConsumerProtocolAssignment, ...)
//   parse  <message> <version> <hex>
//          reads the bytes with Kafka's generated message class, checks every byte was read,
//          writes it back, and answers {"ok":true,"hex":<written>,"json":<Kafka's JSON form>}
//   encode <message> <version> <json on one line>
//          reads Kafka's JSON form with the generated JsonConverter and writes the bytes:
//          {"ok":true,"hex":<written>}
//
// <message> is "<api_key>:request" or "<api_key>:response" for an API's body, or the simple
// name of a generated class in org.apache.kafka.common.message for a header or data type.
//
// Anything that fails answers {"ok":false,"stage":...,"error":...}; the loop never stops on
// bad input. The JSON form is the JsonConverter's with records written as their size
// (<field>SizeInBytes), since with records "serialized" it writes them empty.
// NaN and infinities are read and written as bare JSON tokens, as Python's json module does.

import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

public final class KafkaCodecOracle {
    private static final JsonMapper MAPPER = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .disable(JsonWriteFeature.WRITE_NAN_AS_STRINGS)
            .build();
    private static final char[] HEX = "0123456789abcdef".toCharArray();
    // The generated JsonConverter's read and write, per message class, found once.
    private static final Map<Class<?>, Method[]> CONVERTERS = new HashMap<>();

    /** A failure at a named stage, answered as an error line. */
    private static final class Failure extends Exception {
        final String stage;

        Failure(String stage, String message) {
            super(message);
            this.stage = stage;
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                answer = MAPPER.writeValueAsString(handle(line));
            } catch (Failure f) {
                answer = error(f.stage, f.getMessage());
            } catch (Throwable t) {  // a bug or a hostile input: say so and go on
                answer = error("oracle", t.toString());
            }
            out.write(answer);
            out.write('\n');
            if (!in.ready()) {  // flush once the batch in the pipe is answered
                out.flush();
            }
        }
        out.flush();
    }

    private static JsonNode handle(String line) throws Exception {
        if (line.equals("list")) {
            return list();
        }
        String[] parts = line.split(" ", 4);
        if (parts[0].equals("describe") && parts.length == 2) {
            return describe(parts[1]);
        }
        if (parts.length != 4) {
            throw new Failure("request", "expected 'list', 'describe <class>' or '<parse|encode> <message> <version> <payload>'");
        }
        short version = Short.parseShort(parts[2]);
        ApiMessage message = newMessage(parts[1], version);
        switch (parts[0]) {
            case "parse":
                return parse(message, version, unhex(parts[3]));
            case "encode":
                return encode(message, version, parts[3]);
            default:
                throw new Failure("request", "unknown command " + parts[0]);
        }
    }

    private static JsonNode list() {
        ArrayNode apis = JsonNodeFactory.instance.arrayNode();
        for (ApiMessageType type : ApiMessageType.values()) {
            ObjectNode api = apis.addObject();
            api.put("api_key", type.apiKey());
            api.put("name", type.name());
            try {
                api.put("request", type.newRequest().getClass().getSimpleName());
                api.put("response", type.newResponse().getClass().getSimpleName());
            } catch (RuntimeException e) {  // an API the release keeps only as a name
                api.put("unusable", e.toString());
                continue;
            }
            api.put("lowest", type.lowestSupportedVersion());
            api.put("highest", type.highestSupportedVersion(true));
            api.put("highest_stable", type.highestSupportedVersion(false));
        }
        ObjectNode answer = JsonNodeFactory.instance.objectNode();
        answer.put("ok", true);
        answer.set("apis", apis);
        return answer;
    }

    /** A new message: "API_KEY:request" or "API_KEY:response", or a generated class's simple name. */
    private static ApiMessage newMessage(String name, short version) throws Failure {
        ApiMessage message;
        int colon = name.indexOf(':');
        if (colon >= 0) {
            message = newApiMessage(Short.parseShort(name.substring(0, colon)), name.substring(colon + 1));
        } else {
            message = newDataMessage(name);
        }
        if (version < message.lowestSupportedVersion() || version > message.highestSupportedVersion()) {
            throw new Failure("request", name + " has no version " + version);
        }
        return message;
    }

    private static ApiMessage newApiMessage(short apiKey, String direction) throws Failure {
        ApiMessageType type;
        try {
            type = ApiMessageType.fromApiKey(apiKey);
        } catch (RuntimeException e) {
            throw new Failure("request", "unknown api_key " + apiKey);
        }
        switch (direction) {
            case "request":
                return type.newRequest();
            case "response":
                return type.newResponse();
            default:
                throw new Failure("request", "direction must be request or response, not " + direction);
        }
    }

    private static ApiMessage newDataMessage(String simpleName) throws Failure {
        try {
            Class<?> cls = Class.forName("org.apache.kafka.common.message." + simpleName);
            return (ApiMessage) cls.getConstructor().newInstance();
        } catch (ReflectiveOperationException | ClassCastException e) {
            throw new Failure("request", "no generated message class " + simpleName + ": " + e);
        }
    }

    private static JsonNode describe(String simpleName) throws Failure {
        ApiMessage message = newDataMessage(simpleName);
        ObjectNode answer = JsonNodeFactory.instance.objectNode();
        answer.put("ok", true);
        answer.put("lowest", message.lowestSupportedVersion());
        answer.put("highest", message.highestSupportedVersion());
        return answer;
    }

    private static JsonNode parse(ApiMessage message, short version, byte[] body) throws Exception {
        ByteBuffer buffer = ByteBuffer.wrap(body);
        try {
            message.read(new ByteBufferAccessor(buffer), version);
        } catch (RuntimeException e) {
            throw new Failure("read", e.toString());
        }
        if (buffer.remaining() != 0) {
            throw new Failure("read", buffer.remaining() + " of " + body.length + " bytes left unread");
        }
        ObjectNode answer = JsonNodeFactory.instance.objectNode();
        answer.put("ok", true);
        answer.put("hex", hex(write(message, version)));
        try {
            answer.set("json", (JsonNode) converter(message)[1].invoke(null, message, version, false));
        } catch (ReflectiveOperationException e) {
            throw new Failure("json", String.valueOf(e.getCause() != null ? e.getCause() : e));
        }
        return answer;
    }

    private static JsonNode encode(ApiMessage template, short version, String json) throws Exception {
        ApiMessage message;
        try {
            JsonNode node = MAPPER.readTree(json);
            message = (ApiMessage) converter(template)[0].invoke(null, node, version);
        } catch (ReflectiveOperationException e) {
            throw new Failure("json", String.valueOf(e.getCause() != null ? e.getCause() : e));
        } catch (RuntimeException e) {
            throw new Failure("json", e.toString());
        }
        ObjectNode answer = JsonNodeFactory.instance.objectNode();
        answer.put("ok", true);
        answer.put("hex", hex(write(message, version)));
        return answer;
    }

    private static byte[] write(ApiMessage message, short version) throws Failure {
        try {
            ObjectSerializationCache cache = new ObjectSerializationCache();
            int size = message.size(cache, version);
            ByteBuffer out = ByteBuffer.allocate(size);
            message.write(new ByteBufferAccessor(out), cache, version);
            if (out.remaining() != 0) {
                throw new Failure("write", "size() said " + size + " bytes, write() left " + out.remaining());
            }
            return out.array();
        } catch (RuntimeException e) {
            throw new Failure("write", e.toString());
        }
    }

    private static Method[] converter(ApiMessage message) throws ReflectiveOperationException {
        Class<?> cls = message.getClass();
        Method[] found = CONVERTERS.get(cls);
        if (found == null) {
            Class<?> conv = Class.forName(cls.getName() + "JsonConverter");
            found = new Method[] {
                conv.getMethod("read", JsonNode.class, short.class),
                conv.getMethod("write", cls, short.class, boolean.class),
            };
            CONVERTERS.put(cls, found);
        }
        return found;
    }

    private static String error(String stage, String message) {
        ObjectNode answer = JsonNodeFactory.instance.objectNode();
        answer.put("ok", false);
        answer.put("stage", stage);
        answer.put("error", message);
        try {
            return MAPPER.writeValueAsString(answer);
        } catch (Exception e) {
            return "{\"ok\":false,\"stage\":\"oracle\",\"error\":\"unprintable error\"}";
        }
    }

    private static String hex(byte[] bytes) {
        char[] out = new char[bytes.length * 2];
        for (int i = 0; i < bytes.length; i++) {
            out[2 * i] = HEX[(bytes[i] >> 4) & 0xf];
            out[2 * i + 1] = HEX[bytes[i] & 0xf];
        }
        return new String(out);
    }

    private static byte[] unhex(String text) throws Failure {
        if (text.length() % 2 != 0) {
            throw new Failure("request", "odd number of hex digits");
        }
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            int hi = Character.digit(text.charAt(2 * i), 16);
            int lo = Character.digit(text.charAt(2 * i + 1), 16);
            if (hi < 0 || lo < 0) {
                throw new Failure("request", "not a hex digit near position " + 2 * i);
            }
            out[i] = (byte) (hi << 4 | lo);
        }
        return out;
    }
}
