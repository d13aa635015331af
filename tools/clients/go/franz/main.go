// One scripted run of franz-go (github.com/twmb/franz-go), for tools/record_clients.py.
//
//	driver BOOTSTRAP PREFIX TOPIC COUNT [PIN]
//
// Steps, each bounded and printed as "STEP <label> ok|FAILED <why>": produce COUNT records,
// consume them in a group and commit, an admin call (CreateTopics through kmsg), produce once
// more under the default client.id. PIN (e.g. 0.10.1) caps the versions with kgo.MaxVersions.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

const stepTime = 15 * time.Second

func step(label string, body func(context.Context) error) int {
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), stepTime)
	defer cancel()
	if err := body(ctx); err != nil {
		fmt.Printf("STEP %s FAILED %v\n", label, err)
		return 1
	}
	fmt.Printf("STEP %s ok %.1fs\n", label, time.Since(started).Seconds())
	return 0
}

func main() {
	bootstrap, prefix, topic := os.Args[1], os.Args[2], os.Args[3]
	count, _ := strconv.Atoi(os.Args[4])
	options := []kgo.Opt{kgo.SeedBrokers(bootstrap)}
	if len(os.Args) > 5 && os.Args[5] == "0.10.1" {
		options = append(options, kgo.MaxVersions(kversion.V0_10_1()))
	}
	client := func(extra ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append(append([]kgo.Opt{}, options...), extra...)...)
	}
	produce := func(ids ...kgo.Opt) func(context.Context) error {
		return func(ctx context.Context) error {
			cl, err := client(ids...)
			if err != nil {
				return err
			}
			defer cl.Close()
			errs := make(chan error, count)
			for i := 0; i < count; i++ {
				record := &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(fmt.Sprintf(`{"n":%d}`, i))}
				cl.Produce(ctx, record, func(_ *kgo.Record, err error) { errs <- err })
			}
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			for i := 0; i < count; i++ {
				if err := <-errs; err != nil {
					return err
				}
			}
			return nil
		}
	}
	group := func(ctx context.Context) error {
		cl, err := client(kgo.ClientID(prefix+"-group"), kgo.ConsumerGroup(prefix+"-readers"),
			kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
		if err != nil {
			return err
		}
		defer cl.Close()
		seen := 0
		for seen < count {
			fetches := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return fmt.Errorf("consumed %d of %d records: %v", seen, count, fetches.Errors())
			}
			seen += fetches.NumRecords()
		}
		return cl.CommitUncommittedOffsets(ctx)
	}
	admin := func(ctx context.Context) error {
		cl, err := client(kgo.ClientID(prefix + "-admin"))
		if err != nil {
			return err
		}
		defer cl.Close()
		req := kmsg.NewPtrCreateTopicsRequest()
		created := kmsg.NewCreateTopicsRequestTopic()
		created.Topic, created.NumPartitions, created.ReplicationFactor = prefix+"-created", 1, 1
		req.Topics, req.TimeoutMillis = append(req.Topics, created), 10000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 {
				return errors.New("CreateTopics error code " + strconv.Itoa(int(t.ErrorCode)))
			}
		}
		return nil
	}
	failed := step("producer", produce(kgo.ClientID(prefix+"-producer")))
	failed += step("group", group)
	failed += step("admin", admin)
	failed += step("default-id-producer", produce())
	os.Exit(failed)
}
