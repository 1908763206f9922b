// Package cache holds offsetd's in-memory tables: the latest committed offset
// of every group, topic and partition, and the static-topic mappings.
//
// These tables are the state of record between restarts, rebuilt from the
// journal on open; they are plain Go maps, each owned by one internal
// partition. Whoever applies the partition's durable records (package
// coordinator decides who) changes a table only inside Update, a whole
// batch under one write lock, while any number of readers look values up
// concurrently:
//
//	t := cache.NewOffsets()
//	t.Update(func(w cache.OffsetsWriter) {
//		w.Put("payments", 42, cache.TopicPartition{Topic: "orders", Partition: 0},
//			cache.Offset{Offset: 100, LeaderEpoch: -1})
//	})
//	v, ok := t.Get("payments", "orders", 0)
//
// Nothing here is lossy: a bounded, lossy cache (ristretto) may only hold
// values derived from these tables at a known version.
package cache
