package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

// The floors: what the disk allows a log at all, with no index, no cache and
// nothing to read back. Each commit is framed as a record (appendRecord)
// and is on stable storage before Commit returns.

// floorSyncSystem appends each commit to a file and fdatasyncs it before the
// next: one sync per commit, committers taking turns. It is the plain
// append + fdatasync a log without group commit pays.
var floorSyncSystem = system{
	name:    "floor-sync",
	durable: true,
	open: func(dir string, _ int) (committer, error) {
		return openAppendFile(filepath.Join(dir, "floor.log"))
	},
}

// floorGroupSystem is the batch floor: group commit with nothing else. One
// flusher goroutine appends everything that is waiting with one write and
// one fdatasync, then acknowledges it all. It is what an append-only log
// with one flusher can do on this disk.
var floorGroupSystem = system{
	name:    "floor-group",
	durable: true,
	open: func(dir string, _ int) (committer, error) {
		return openGroupFile(filepath.Join(dir, "floor.log"), 0)
	},
}

// floorPreallocSystem is floor-group writing into space written and synced
// in advance (a ring file, as Pebble recycles its WAL files) instead of
// appending, so an fdatasync flushes data only, never the file's size or
// block map: the most any log with one flusher can do on this disk.
var floorPreallocSystem = system{
	name:    "floor-prealloc",
	durable: true,
	open: func(dir string, _ int) (committer, error) {
		return openGroupFile(filepath.Join(dir, "floor.log"), floorRingSize)
	},
}

// floorRingSize is the preallocated file floor-prealloc writes round and
// round. It only has to be much larger than one batch.
const floorRingSize = 8 << 20

// appendFile is the floor-sync store.
type appendFile struct {
	mu  sync.Mutex
	f   *os.File // guarded by mu
	buf []byte   // guarded by mu
}

func openAppendFile(path string) (*appendFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &appendFile{f: f}, nil
}

func (a *appendFile) Commit(_ context.Context, group string, offsets []coordinator.OffsetCommit) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buf = appendRecord(a.buf[:0], group, offsets, time.Now().UnixMilli())
	if _, err := a.f.Write(a.buf); err != nil {
		return err
	}
	return fdatasync(a.f)
}

func (a *appendFile) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Close()
}

// groupFile is the floor-group and floor-prealloc store.
type groupFile struct {
	f *os.File
	// ring is the size of the preallocated file written round and round,
	// or 0 to append.
	ring int64

	mu     sync.Mutex
	queue  []*floorWaiter // guarded by mu
	closed bool           // guarded by mu

	wake    chan struct{} // one pending wake-up for the flusher
	stop    chan struct{}
	stopped chan struct{}
	waiters sync.Pool

	stats syncStats

	// Owned by the flusher goroutine.
	pos   int64
	buf   []byte
	spare []*floorWaiter
}

// floorWaiter is one commit waiting for the flusher.
type floorWaiter struct {
	record []byte
	done   chan error
}

var errFloorClosed = errors.New("bench: floor closed")

// openGroupFile opens a group-commit floor on path: appending to it when
// ring is 0, else overwriting ring bytes preallocated up front.
func openGroupFile(path string, ring int64) (*groupFile, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if ring == 0 {
		flags |= os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, err
	}
	if ring > 0 {
		if err := preallocate(f, ring); err != nil {
			return nil, errors.Join(err, f.Close())
		}
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	g := &groupFile{
		f:       f,
		ring:    ring,
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		waiters: sync.Pool{New: func() any { return &floorWaiter{done: make(chan error, 1)} }},
	}
	go g.flusher()
	return g, nil
}

// preallocate writes size zero bytes to f and syncs them, so that later
// writes overwrite allocated, written blocks.
func preallocate(f *os.File, size int64) error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			return err
		}
	}
	return f.Sync()
}

func (g *groupFile) Commit(_ context.Context, group string, offsets []coordinator.OffsetCommit) error {
	w := g.waiters.Get().(*floorWaiter)
	w.record = appendRecord(w.record[:0], group, offsets, time.Now().UnixMilli())
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return errFloorClosed
	}
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default: // a wake-up is already pending; it will find w queued
	}
	err := <-w.done
	g.waiters.Put(w)
	return err
}

func (g *groupFile) syncStats() *syncStats { return &g.stats }

// flusher writes and syncs whatever is queued, then acknowledges it, until
// Close; then it flushes what is left and returns.
func (g *groupFile) flusher() {
	defer close(g.stopped)
	for {
		select {
		case <-g.wake:
			g.flush()
		case <-g.stop:
			g.flush()
			return
		}
	}
}

func (g *groupFile) flush() {
	g.mu.Lock()
	batch := g.queue
	g.queue = g.spare[:0]
	g.mu.Unlock()
	if len(batch) == 0 {
		g.spare = batch
		return
	}
	g.buf = g.buf[:0]
	for _, w := range batch {
		g.buf = append(g.buf, w.record...)
	}
	start := time.Now()
	err := g.write(g.buf)
	if err == nil {
		g.stats.add(len(batch), time.Since(start))
	}
	for _, w := range batch {
		w.done <- err
	}
	clear(batch)
	g.spare = batch
}

// write appends b, or writes it at the ring position (starting over at the
// front when b would not fit before the end), and syncs it.
func (g *groupFile) write(b []byte) error {
	if g.ring == 0 {
		if _, err := g.f.Write(b); err != nil {
			return err
		}
		return fdatasync(g.f)
	}
	if int64(len(b)) > g.ring {
		return fmt.Errorf("bench: batch of %d bytes is larger than the floor's %d-byte file", len(b), g.ring)
	}
	if g.pos+int64(len(b)) > g.ring {
		g.pos = 0
	}
	if _, err := g.f.WriteAt(b, g.pos); err != nil {
		return err
	}
	g.pos += int64(len(b))
	return fdatasync(g.f)
}

func (g *groupFile) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return errFloorClosed
	}
	g.closed = true
	g.mu.Unlock()
	close(g.stop)
	<-g.stopped
	return g.f.Close()
}

// syncDir fsyncs a directory, making the files created in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// countRecords counts the whole, checksummed records at the front of a
// floor's file; it stops at the first that is not (zeros, or the end).
func countRecords(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for len(b) >= 8 {
		size := int(binary.BigEndian.Uint32(b))
		if size == 0 || len(b) < 8+size || binary.BigEndian.Uint32(b[4:]) != crc32.Checksum(b[8:8+size], castagnoli) {
			break
		}
		b = b[8+size:]
		n++
	}
	return n, nil
}
