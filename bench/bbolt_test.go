package bench

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/offsetd/offsetd/coordinator"
)

// boltSystem is bbolt with its default options: every read-write
// transaction fdatasyncs its pages, then its meta page, before Commit
// returns. One committer uses one db.Update per commit; concurrent
// committers use db.Batch, which merges the calls that arrive together into
// one transaction (with its defaults: up to 1000 calls, a batch waiting at
// most 10 ms to fill).
var boltSystem = system{
	name:    "bbolt",
	durable: true,
	reads:   true,
	open: func(dir string, writers int) (committer, error) {
		return openBolt(dir, writers > 1, false)
	},
	load: loadBolt,
}

var boltBucket = []byte("offsets")

type boltStore struct {
	db    *bolt.DB
	batch bool
}

func openBolt(dir string, batch, noSync bool) (*boltStore, error) {
	db, err := bolt.Open(filepath.Join(dir, "offsets.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: noSync})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	})
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &boltStore{db: db, batch: batch}, nil
}

func (s *boltStore) Commit(_ context.Context, group string, offsets []coordinator.OffsetCommit) error {
	// Keys and values must stay untouched until the transaction commits,
	// and a batched function may run twice: build them all first, in one
	// buffer that never grows.
	now := time.Now().UnixMilli()
	size := 0
	for i := range offsets {
		size += len(group) + len(offsets[i].Topic) + 6 + valueHeaderSize + len(offsets[i].Metadata)
	}
	buf := make([]byte, 0, size)
	kvs := make([][2][]byte, len(offsets))
	for i := range offsets {
		o := &offsets[i]
		start := len(buf)
		buf = appendKey(buf, group, o.Topic, o.Partition)
		mid := len(buf)
		buf = appendValue(buf, o, now)
		kvs[i] = [2][]byte{buf[start:mid:mid], buf[mid:len(buf):len(buf)]}
	}
	put := func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for _, kv := range kvs {
			if err := b.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	}
	if s.batch {
		return s.db.Batch(put)
	}
	return s.db.Update(put)
}

func (s *boltStore) Fetch(group, topic string, partition int32) (o coordinator.Offset, ok bool, err error) {
	var scratch [64]byte
	key := appendKey(scratch[:0], group, topic, partition)
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(boltBucket).Get(key)
		if v == nil {
			return nil
		}
		ok = true
		var err error
		o, err = decodeValue(v)
		return err
	})
	return o, ok && err == nil, err
}

func (s *boltStore) FetchGroup(group string) ([]coordinator.PartitionOffset, error) {
	lower, upper := groupRange(nil, group)
	out := make([]coordinator.PartitionOffset, 0, partitionsPerTopic)
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(boltBucket).Cursor()
		for k, v := c.Seek(lower); k != nil && bytes.Compare(k, upper) < 0; k, v = c.Next() {
			topic, partition, err := decodeKey(k, group)
			if err != nil {
				return err
			}
			o, err := decodeValue(v)
			if err != nil {
				return err
			}
			out = append(out, coordinator.PartitionOffset{Topic: topic, Partition: partition, Offset: o})
		}
		return nil
	})
	return out, err
}

func (s *boltStore) Close() error { return s.db.Close() }

// loadBolt writes 1000 commits per transaction without syncing each, then
// syncs once. Fewer, larger transactions than the durable path makes pack
// pages a little differently, so the file may come out slightly smaller.
func loadBolt(dir string, ks *keySpace, rounds int) (err error) {
	s, err := openBolt(dir, false, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	const commitsPerTx = 1000
	dst := make([]coordinator.OffsetCommit, partitionsPerTopic)
	now := time.Now().UnixMilli()
	var tx *bolt.Tx
	n := 0
	for r := range rounds {
		for g := range ks.groups {
			for t := range topicsPerGroup {
				if tx == nil {
					if tx, err = s.db.Begin(true); err != nil {
						return err
					}
				}
				b := tx.Bucket(boltBucket)
				group := ks.fill(dst, g, t, r)
				for i := range dst {
					// Put keeps its arguments until the commit: fresh ones each time.
					key := appendKey(nil, group, dst[i].Topic, dst[i].Partition)
					if err := b.Put(key, appendValue(nil, &dst[i], now)); err != nil {
						return errors.Join(err, tx.Rollback())
					}
				}
				if n++; n%commitsPerTx == 0 {
					if err := tx.Commit(); err != nil {
						return err
					}
					tx = nil
				}
			}
		}
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return s.db.Sync()
}
