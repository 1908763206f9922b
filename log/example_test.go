package log_test

import (
	"fmt"
	"os"

	"github.com/offsetd/offsetd/log"
)

func Example() {
	dir, err := os.MkdirTemp("", "offsetd-log-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	l, err := log.Open(dir, log.Options{})
	if err != nil {
		panic(err)
	}
	// Many goroutines commit through one Committer: what queues while an
	// fsync runs goes out together, as one batch with one fsync.
	c := log.NewCommitter(l, nil)
	first, last, err := c.Commit([]log.Entry{
		{Partition: 3, Type: 1, Payload: []byte("group-a orders/0 = 42")},
		{Partition: 5, Type: 1, Payload: []byte("group-b orders/1 = 7")},
	})
	if err != nil {
		panic(err) // the batch is not in the log; the next one repairs it first
	}
	fmt.Println("durable", first, "to", last)
	c.Close()
	if err := l.Close(); err != nil { // leaves the clean-close marker
		panic(err)
	}

	// After a restart, rebuild state from the log.
	l, err = log.Open(dir, log.Options{})
	if err != nil {
		panic(err) // errors.Is(err, log.ErrCorrupt): damage before the tail
	}
	defer l.Close()
	err = l.Replay(l.FirstIndex(), func(index uint64, e log.Entry) error {
		fmt.Printf("%d: partition %d type %d %s\n", index, e.Partition, e.Type, e.Payload)
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// durable 1 to 2
	// 1: partition 3 type 1 group-a orders/0 = 42
	// 2: partition 5 type 1 group-b orders/1 = 7
}
