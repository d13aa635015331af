// One scripted run of segmentio kafka-go (github.com/segmentio/kafka-go), for tools/record_clients.py.
//
//	driver BOOTSTRAP PREFIX TOPIC COUNT
//
// Steps, each bounded and printed as "STEP <label> ok|FAILED <why>": produce COUNT records,
// consume them in a group and commit, an admin call (a Conn: partitions, create a topic),
// produce once more under the default client.id. Written against the WriterConfig / ReaderConfig /
// Dialer API that old and new releases share. kafka-go has no version setting: no pin.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

const stepTime = 15 * time.Second

func step(label string, body func(context.Context) error) int {
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), stepTime)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- body(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Printf("STEP %s FAILED %v\n", label, err)
			return 1
		}
	case <-time.After(stepTime + 5*time.Second):
		fmt.Printf("STEP %s FAILED timed out\n", label)
		return 1
	}
	fmt.Printf("STEP %s ok %.1fs\n", label, time.Since(started).Seconds())
	return 0
}

func dialer(clientID string) *kafka.Dialer {
	d := &kafka.Dialer{Timeout: 10 * time.Second, DualStack: false}
	if clientID != "" {
		d.ClientID = clientID
	} else {
		d.ClientID = kafka.DefaultDialer.ClientID
	}
	return d
}

func main() {
	bootstrap, prefix, topic := os.Args[1], os.Args[2], os.Args[3]
	count, _ := strconv.Atoi(os.Args[4])
	produce := func(clientID string) func(context.Context) error {
		return func(ctx context.Context) error {
			w := kafka.NewWriter(kafka.WriterConfig{Brokers: []string{bootstrap}, Topic: topic,
				Dialer: dialer(clientID), BatchTimeout: 5 * time.Millisecond})
			defer w.Close()
			var messages []kafka.Message
			for i := 0; i < count; i++ {
				messages = append(messages, kafka.Message{Key: []byte("k"), Value: []byte(fmt.Sprintf(`{"n":%d}`, i))})
			}
			return w.WriteMessages(ctx, messages...)
		}
	}
	group := func(ctx context.Context) error {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{bootstrap}, GroupID: prefix + "-readers",
			Topic: topic, Dialer: dialer(prefix + "-group"), MaxWait: 50 * time.Millisecond}) // a new group starts at the first offset
		defer r.Close()
		for seen := 0; seen < count; seen++ {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				return fmt.Errorf("consumed %d of %d records: %v", seen, count, err)
			}
			if err := r.CommitMessages(ctx, m); err != nil {
				return err
			}
		}
		return nil
	}
	admin := func(ctx context.Context) error {
		conn, err := dialer(prefix+"-admin").DialContext(ctx, "tcp", bootstrap)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ReadPartitions(topic); err != nil {
			return err
		}
		return conn.CreateTopics(kafka.TopicConfig{Topic: prefix + "-created", NumPartitions: 1, ReplicationFactor: 1})
	}
	failed := step("producer", produce(prefix+"-producer"))
	failed += step("group", group)
	failed += step("admin", admin)
	failed += step("default-id-producer", produce(""))
	os.Exit(failed)
}
