package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

// syncStats counts the batches a system's one log appended, each with its
// fsync: how many commits they carried and how long their appends took.
// The commit benchmark reads it around the measured run of a system that
// keeps one (syncCounter) and reports, per batch, the commits it carried,
// its append and fsync, and the time the log sat idle between two batches:
// a system with as many commits per fsync as the floor but a longer cycle
// loses its time in one of the two.
type syncStats struct {
	batches, commits atomic.Int64
	busy             atomic.Int64 // nanoseconds spent appending and syncing
}

// syncCounter is a system that counts its log's batches.
type syncCounter interface {
	syncStats() *syncStats
}

// add counts one batch of commits whose append and fsync took took.
func (s *syncStats) add(commits int, took time.Duration) {
	s.batches.Add(1)
	s.commits.Add(int64(commits))
	s.busy.Add(int64(took))
}

// syncCounts are syncStats' counters at one moment.
type syncCounts struct{ batches, commits, busy int64 }

func (s *syncStats) load() syncCounts {
	return syncCounts{s.batches.Load(), s.commits.Load(), s.busy.Load()}
}

// store sets the counters to c: those of a log in another process, as
// last read from it.
func (s *syncStats) store(c syncCounts) {
	s.batches.Store(c.batches)
	s.commits.Store(c.commits)
	s.busy.Store(c.busy)
}

// report reports what the log did between before and now, over elapsed:
// commits/fsync, fsync-ns (one append with its fsync) and gap-ns (the log
// idle between the end of one batch and the start of the next).
func (s *syncStats) report(b *testing.B, before syncCounts, elapsed time.Duration) {
	now := s.load()
	batches := now.batches - before.batches
	if batches == 0 {
		return
	}
	busy := now.busy - before.busy
	b.ReportMetric(float64(now.commits-before.commits)/float64(batches), "commits/fsync")
	b.ReportMetric(float64(busy)/float64(batches), "fsync-ns")
	b.ReportMetric(float64(max(0, int64(elapsed)-busy))/float64(batches), "gap-ns")
}

// journalStats is offsetd's Observer: it counts the journal's batches. In
// the commit benchmark every commit is one record.
type journalStats struct{ syncStats }

func (j *journalStats) ObserveAppend(int, int, int, time.Duration, error) {}
func (j *journalStats) ObserveLoad(int, int, time.Duration)               {}

func (j *journalStats) ObserveJournalBatch(_, _, records, _ int, took time.Duration, err error) {
	if err == nil {
		j.add(records, took)
	}
}

var _ coordinator.JournalObserver = (*journalStats)(nil)
