// Package partitioner maps consumer groups and static topics to the internal
// partitions of the offsetd log.
//
// The mapping is part of the on-disk format: a group's offsets are found only
// in the partition its name hashes to, so the hash and the partition count
// must never change for an existing data directory. The hash is XXH64 (a
// fixed specification) with seed 0, taken modulo the partition count.
//
//	p, _ := partitioner.New(16)
//	p.Group("payments") // the partition holding every offset of "payments"
//	p.Topic("orders")   // the partition holding every mapping of "orders"
package partitioner

import (
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Hash names the hash function; it is written into a data directory's meta
// file so that a directory is never read with another function.
const Hash = "xxhash64"

// MaxPartitions bounds the partition count: each partition has a writer
// goroutine, tables and a snapshot directory of its own, and in a cluster a
// Raft group (the journal is shared by all).
const MaxPartitions = 1024

// ErrInvalid reports a partition count outside 1..MaxPartitions.
var ErrInvalid = errors.New("partitioner: invalid partition count")

// Partitioner assigns names to one of N partitions. The zero value is not
// usable; construct it with New.
type Partitioner struct {
	n uint64
}

// New returns a Partitioner over n partitions.
func New(n int) (Partitioner, error) {
	if n < 1 || n > MaxPartitions {
		return Partitioner{}, fmt.Errorf("%w: %d (want 1..%d)", ErrInvalid, n, MaxPartitions)
	}
	return Partitioner{n: uint64(n)}, nil
}

// N returns the partition count.
func (p Partitioner) N() int { return int(p.n) }

// Group returns the partition that holds every offset of group. The group
// alone is hashed, so a group's progress stays in one partition whatever
// topics it consumes and however its members are rebalanced.
func (p Partitioner) Group(group string) int {
	return int(xxhash.Sum64String(group) % p.n)
}

// Topic returns the partition that holds every static-topic mapping of topic,
// in every scope.
func (p Partitioner) Topic(topic string) int {
	return int(xxhash.Sum64String(topic) % p.n)
}
