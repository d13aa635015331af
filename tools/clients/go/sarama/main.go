// One scripted run of sarama (github.com/IBM/sarama, formerly github.com/Shopify/sarama), for
// tools/record_clients.py; the install script rewrites the import path for the Shopify releases.
//
//	driver BOOTSTRAP PREFIX TOPIC COUNT [PIN]
//
// Steps, each bounded and printed as "STEP <label> ok|FAILED <why>": produce COUNT records,
// consume them in a group and commit, an admin call (ClusterAdmin: list and create topics),
// produce once more under the default client.id. PIN (a Kafka version, e.g. 0.10.2.0) is
// Config.Version; without it the release's default Config.Version is used.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/IBM/sarama"
)

const stepTime = 15 * time.Second

func step(label string, body func() error) int {
	started := time.Now()
	done := make(chan error, 1)
	go func() { done <- body() }()
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

type handler struct {
	want, seen int
	done       chan struct{}
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		session.MarkMessage(message, "")
		h.seen++
		if h.seen >= h.want {
			session.Commit()
			close(h.done)
			return nil
		}
	}
	return nil
}

func main() {
	bootstrap, prefix, topic := os.Args[1], os.Args[2], os.Args[3]
	count, _ := strconv.Atoi(os.Args[4])
	brokers := []string{bootstrap}
	config := func(clientID string) *sarama.Config {
		c := sarama.NewConfig()
		if clientID != "" {
			c.ClientID = clientID
		}
		if len(os.Args) > 5 {
			version, err := sarama.ParseKafkaVersion(os.Args[5])
			if err != nil {
				fmt.Println("bad pin:", err)
				os.Exit(2)
			}
			c.Version = version
		}
		c.Net.DialTimeout, c.Net.ReadTimeout, c.Net.WriteTimeout = 10*time.Second, 10*time.Second, 10*time.Second
		c.Metadata.Retry.Max = 2
		c.Producer.Return.Successes = true
		c.Producer.Retry.Max = 2
		c.Consumer.Offsets.Initial = sarama.OffsetOldest
		c.Consumer.Offsets.AutoCommit.Enable = false
		c.Consumer.Return.Errors = true // a commit the broker refuses is reported here, not by Commit()
		c.Consumer.MaxWaitTime = 50 * time.Millisecond
		return c
	}
	produce := func(clientID string) func() error {
		return func() error {
			producer, err := sarama.NewSyncProducer(brokers, config(clientID))
			if err != nil {
				return err
			}
			defer producer.Close()
			var messages []*sarama.ProducerMessage
			for i := 0; i < count; i++ {
				messages = append(messages, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"),
					Value: sarama.StringEncoder(fmt.Sprintf(`{"n":%d}`, i))})
			}
			return producer.SendMessages(messages)
		}
	}
	group := func() error {
		consumers, err := sarama.NewConsumerGroup(brokers, prefix+"-readers", config(prefix+"-group"))
		if err != nil {
			return err
		}
		defer consumers.Close()
		ctx, cancel := context.WithTimeout(context.Background(), stepTime)
		defer cancel()
		h := &handler{want: count, done: make(chan struct{})}
		errs := make(chan error, 1)
		go func() {
			for ctx.Err() == nil {
				if err := consumers.Consume(ctx, []string{topic}, h); err != nil {
					errs <- err
					return
				}
			}
		}()
		select {
		case <-h.done:
			// Commit() returns nothing: its failure arrives on Errors(), if at all.
			select {
			case err := <-consumers.Errors():
				return fmt.Errorf("commit: %v", err)
			case <-time.After(2 * time.Second):
				return nil
			}
		case err := <-consumers.Errors():
			return err
		case err := <-errs:
			return err
		case <-ctx.Done():
			return fmt.Errorf("consumed %d of %d records", h.seen, count)
		}
	}
	admin := func() error {
		cluster, err := sarama.NewClusterAdmin(brokers, config(prefix+"-admin"))
		if err != nil {
			return err
		}
		defer cluster.Close()
		if _, err := cluster.ListTopics(); err != nil {
			return err
		}
		return cluster.CreateTopic(prefix+"-created", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
	}
	failed := step("producer", produce(prefix+"-producer"))
	failed += step("group", group)
	failed += step("admin", admin)
	failed += step("default-id-producer", produce(""))
	os.Exit(failed)
}
