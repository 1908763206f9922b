package coordinator

import (
	"errors"
	"fmt"
	"time"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/log"
)

var errStopped = errors.New("coordinator: stopped while loading")

// load opens the partition's log and rebuilds the tables from the newest
// snapshot that reads back whole, plus the log after it. A damaged snapshot
// falls back to the one before it, whose log tail is kept for that; if no
// snapshot is usable and the log no longer starts at its first entry, load
// fails rather than serve a silently shorter state.
func (p *partition) load(dir string, opts log.Options, stop <-chan struct{}) error {
	start := time.Now()
	l, err := log.Open(dir, opts)
	if err != nil {
		return err
	}
	if err := p.loadFrom(l, stop); err != nil {
		l.Close()
		return err
	}
	p.log = l
	p.loadTime = time.Since(start)
	if p.observer != nil {
		p.observer.ObserveLoad(p.id, p.loadRecords, p.loadTime)
	}
	return nil
}

func (p *partition) loadFrom(l *log.Log, stop <-chan struct{}) error {
	snaps, err := l.Snapshots()
	if err != nil {
		return fmt.Errorf("coordinator: partition %d: %w", p.id, err)
	}
	from := uint64(1)
	p.lastSnapshot = 0
	for _, index := range snaps {
		p.resetTables()
		if index > l.LastIndex() {
			// Possible only without fsync (UnsafeNoSync): the snapshot was
			// synced, the log entries it covers were lost. Loading it would
			// hand out indexes it already covers.
			p.logger.Warn("snapshot is ahead of the log; falling back to the one before it",
				"partition", p.id, "snapshot", index, "lastIndex", l.LastIndex())
			continue
		}
		if index+1 < l.FirstIndex() {
			p.logger.Warn("snapshot is older than the log it needs; trying an older one is no use",
				"partition", p.id, "snapshot", index, "firstIndex", l.FirstIndex())
			break
		}
		var err error
		p.offsets.Update(func(w cache.OffsetsWriter) {
			err = l.ReadSnapshot(index, func(typ byte, payload []byte) error {
				return p.apply(w, index, typ, payload)
			})
		})
		if err != nil {
			p.logger.Warn("snapshot unreadable; falling back to the one before it and a longer log tail",
				"partition", p.id, "snapshot", index, "err", err)
			continue
		}
		p.lastSnapshot = index
		from = index + 1
		break
	}
	if p.lastSnapshot == 0 {
		p.resetTables()
		if first := l.FirstIndex(); first > 1 {
			return fmt.Errorf("%w: partition %d: no usable snapshot (of %d) and the log starts at index %d",
				ErrCorrupt, p.id, len(snaps), first)
		}
		if len(snaps) > 0 {
			p.logger.Warn("no usable snapshot; replaying the whole log", "partition", p.id)
		}
	}

	n := 0
	var bytes int64
	p.offsets.Update(func(w cache.OffsetsWriter) {
		err = l.Replay(from, func(index uint64, typ byte, payload []byte) error {
			if n++; n&0xffff == 0 {
				select {
				case <-stop:
					return errStopped
				default:
				}
			}
			bytes += int64(len(payload))
			if err := p.apply(w, index, typ, payload); err != nil {
				return fmt.Errorf("partition %d index %d: %w", p.id, index, err)
			}
			return nil
		})
		w.SetApplied(max(l.LastIndex(), p.lastSnapshot))
	})
	p.capturedAt = nil
	if err != nil {
		return err
	}
	p.loadRecords = n
	p.sinceSnapshot = bytes
	return nil
}

// resetTables gives the partition empty tables, before it serves anything.
func (p *partition) resetTables() {
	p.capturedAt = make(map[string]uint64)
	p.offsets = cache.NewOffsets()
	p.mappings = cache.NewMappings()
	p.switches = cache.NewSwitches()
}
