package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/offsetd/offsetd/coordinator"
)

// pebbleSystem is Pebble with its default options. Each commit is one
// batch committed with pebble.Sync: Pebble acknowledges it once its WAL
// record is fdatasynced, and concurrent Sync commits share one sync (Pebble's
// own group commit).
var pebbleSystem = system{
	name:    "pebble",
	durable: true,
	reads:   true,
	open: func(dir string, _ int) (committer, error) {
		return openPebble(dir, pebble.Sync)
	},
	load: func(dir string, ks *keySpace, rounds int) error {
		s, err := openPebble(dir, pebble.NoSync)
		if err != nil {
			return err
		}
		err = loadParallel(ks, rounds, 4, func(group string, offsets []coordinator.OffsetCommit) error {
			return s.Commit(context.Background(), group, offsets)
		})
		return errors.Join(err, s.Close())
	},
}

type pebbleStore struct {
	db    *pebble.DB
	write *pebble.WriteOptions
	// scratch holds *[]byte buffers for keys and values: Batch.Set and Get
	// copy them or are done with them when they return.
	scratch sync.Pool
}

func openPebble(dir string, write *pebble.WriteOptions) (*pebbleStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{}})
	if err != nil {
		return nil, err
	}
	return &pebbleStore{
		db:      db,
		write:   write,
		scratch: sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }},
	}, nil
}

func (s *pebbleStore) Commit(_ context.Context, group string, offsets []coordinator.OffsetCommit) error {
	now := time.Now().UnixMilli()
	buf := s.scratch.Get().(*[]byte)
	defer s.scratch.Put(buf)
	b := s.db.NewBatch()
	defer b.Close()
	for i := range offsets {
		o := &offsets[i]
		key := appendKey((*buf)[:0], group, o.Topic, o.Partition)
		kv := appendValue(key, o, now)
		if err := b.Set(kv[:len(key)], kv[len(key):], nil); err != nil {
			return err
		}
		*buf = kv
	}
	return b.Commit(s.write)
}

func (s *pebbleStore) Fetch(group, topic string, partition int32) (coordinator.Offset, bool, error) {
	buf := s.scratch.Get().(*[]byte)
	*buf = appendKey((*buf)[:0], group, topic, partition)
	v, closer, err := s.db.Get(*buf)
	s.scratch.Put(buf)
	if errors.Is(err, pebble.ErrNotFound) {
		return coordinator.Offset{}, false, nil
	}
	if err != nil {
		return coordinator.Offset{}, false, err
	}
	o, err := decodeValue(v)
	return o, err == nil, errors.Join(err, closer.Close())
}

func (s *pebbleStore) FetchGroup(group string) ([]coordinator.PartitionOffset, error) {
	lower, upper := groupRange(nil, group)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	out := make([]coordinator.PartitionOffset, 0, partitionsPerTopic)
	for valid := it.First(); valid; valid = it.Next() {
		topic, partition, err := decodeKey(it.Key(), group)
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		o, err := decodeValue(v)
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		out = append(out, coordinator.PartitionOffset{Topic: topic, Partition: partition, Offset: o})
	}
	return out, errors.Join(it.Error(), it.Close())
}

func (s *pebbleStore) Close() error { return s.db.Close() }

// offHeapBytes returns the memory Pebble allocates outside the Go heap when
// built with cgo: its block cache and memtables.
func (s *pebbleStore) offHeapBytes() uint64 {
	if !cgoEnabled {
		return 0
	}
	m := s.db.Metrics()
	return uint64(m.BlockCache.Size) + m.MemTable.Size
}

// pebbleLogger keeps Pebble's informational chatter out of the benchmark
// output, which the report parses.
type pebbleLogger struct{}

func (pebbleLogger) Infof(string, ...any) {}

func (pebbleLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}

func (pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
