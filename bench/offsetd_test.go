package bench

import (
	"context"
	"errors"
	"log/slog"

	"github.com/offsetd/offsetd/coordinator"
)

// offsetdSystem is offsetd embedded, with its default options: every commit
// is fsynced before it is acknowledged, and whatever else the defaults turn
// on (snapshots, once they exist) is on here too.
var offsetdSystem = system{
	name:    "offsetd",
	durable: true,
	reads:   true,
	open: func(dir string, _ int) (committer, error) {
		o := offsetdOptions()
		stats := &journalStats{}
		o.Observer = stats
		c, err := coordinator.Open(dir, o)
		if err != nil {
			return nil, err
		}
		return offsetdStore{c, stats}, nil
	},
	load: loadOffsetd,
}

// offsetdOptions are coordinator.DefaultOptions with a quiet logger.
func offsetdOptions() coordinator.Options {
	o := coordinator.DefaultOptions()
	o.Logger = slog.New(slog.DiscardHandler)
	return o
}

// offsetdStore is a Coordinator: its Commit, Fetch, FetchGroup and Close
// are the benchmarks' interfaces as they are.
type offsetdStore struct {
	*coordinator.Coordinator
	journal *journalStats
}

func (s offsetdStore) syncStats() *syncStats { return &s.journal.syncStats }

// replayed returns how many log entries the partitions replayed when they
// opened: every commit ever written until snapshots exist, then only the
// tail after the newest snapshot.
func (s offsetdStore) replayed() int {
	n := 0
	for _, p := range s.Stats() {
		n += p.LoadRecords
	}
	return n
}

// loadOffsetd writes through the normal commit path with UnsafeNoSync: the
// log it leaves is the one durable commits leave (one entry per commit).
func loadOffsetd(dir string, ks *keySpace, rounds int) error {
	o := offsetdOptions()
	o.UnsafeNoSync = true
	c, err := coordinator.Open(dir, o)
	if err != nil {
		return err
	}
	ctx := context.Background()
	err = loadParallel(ks, rounds, 16, func(group string, offsets []coordinator.OffsetCommit) error {
		return c.Commit(ctx, group, offsets)
	})
	return errors.Join(err, c.Close())
}
