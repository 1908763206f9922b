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

	l, err := log.Open(dir, log.Options{Partition: 3})
	if err != nil {
		panic(err)
	}
	// One batch, one fsync.
	first, last, err := l.Append([]log.Entry{
		{Type: 1, Payload: []byte("group-a orders/0 = 42")},
		{Type: 1, Payload: []byte("group-b orders/1 = 7")},
	})
	if err != nil {
		panic(err) // the handle is poisoned; the next Append recovers first
	}
	fmt.Println("appended", first, "to", last)
	if err := l.Close(); err != nil {
		panic(err)
	}

	// After a restart, rebuild state from the log.
	l, err = log.Open(dir, log.Options{Partition: 3})
	if err != nil {
		panic(err) // errors.Is(err, log.ErrCorrupt): damage before the tail
	}
	defer l.Close()
	err = l.Replay(l.FirstIndex(), func(index uint64, typ byte, payload []byte) error {
		fmt.Printf("%d: type %d %s\n", index, typ, payload) // payload is only valid here
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// appended 1 to 2
	// 1: type 1 group-a orders/0 = 42
	// 2: type 1 group-b orders/1 = 7
}
