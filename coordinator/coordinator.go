package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/partitioner"
)

// Coordinator stores consumer-group offsets and static-topic mappings in a
// partitioned, append-only log and serves them from memory. It is safe for
// concurrent use.
type Coordinator struct {
	dir       string
	opts      Options
	part      partitioner.Partitioner
	parts     []*partition
	snapshots []*log.Snapshots // per partition
	switched  *signal.Signal   // fires when any global-read switch changes
	lock      *os.File

	// journal is the log every partition commits to; committer, its owner
	// once loading is done, makes each batch durable with one fsync.
	journal    *log.Log
	committer  *log.Committer // set before any writer starts
	truncating sync.Mutex     // one journal truncation at a time

	mu         sync.RWMutex
	closed     bool        // guarded by mu
	isClosed   atomic.Bool // mirrors closed for the read path, which takes no lock
	stop       chan struct{}
	writers    sync.WaitGroup
	background sync.WaitGroup // the retention sweeper
	loaded     chan struct{}  // closed when every partition has loaded or failed
	forced     atomic.Uint64  // static-topic changes stored with force
}

// Open opens the data directory dir, creating it if needed, and loads every
// partition (snapshots in parallel, then the journal once) before
// returning, unless opts.LoadInBackground is set. A data directory of the
// previous format (a log per partition) is converted first; see
// upgradeFormat1.
func Open(dir string, opts Options) (*Coordinator, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := log.MakeDir(dir, opts.syncDir); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	c, err := open(dir, opts, lock)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return c, nil
}

func open(dir string, opts Options, lock *os.File) (*Coordinator, error) {
	var format int
	var err error
	if opts.Partitions, format, err = loadOrCreateMeta(dir, opts.Partitions); err != nil {
		return nil, err
	}
	if format == format1 {
		if err := upgradeFormat1(dir, opts); err != nil {
			return nil, fmt.Errorf("coordinator: converting %s to format %d: %w", dir, dataFormat, err)
		}
	}
	part, _ := partitioner.New(opts.Partitions)
	c := &Coordinator{
		dir:      dir,
		opts:     opts,
		part:     part,
		switched: signal.New(),
		lock:     lock,
		stop:     make(chan struct{}),
		loaded:   make(chan struct{}),
	}
	c.journal, err = log.Open(filepath.Join(dir, journalDir), c.logOptions(0))
	if err != nil {
		return nil, err
	}
	for i := range opts.Partitions {
		snaps, err := log.OpenSnapshots(SnapshotDir(dir, i), i)
		if err != nil {
			c.journal.Close()
			return nil, err
		}
		p := newPartition(i, opts, c.switched, snaps)
		p.onSnapshot = c.truncateJournal
		c.snapshots = append(c.snapshots, snaps)
		c.parts = append(c.parts, p)
	}
	c.loadAll()
	if opts.Retention > 0 {
		c.background.Add(1)
		go func() {
			defer c.background.Done()
			c.sweep()
		}()
	}
	if !opts.LoadInBackground {
		<-c.loaded
		var errs []error
		for _, p := range c.parts {
			if p.state.Load() == stateFailed {
				errs = append(errs, p.loadErr)
			}
		}
		if len(errs) > 0 {
			c.closeAll()
			return nil, errors.Join(errs...)
		}
	}
	return c, nil
}

// logOptions are the options of the journal (partition 0) or of a
// partition's log of format 1.
func (c *Coordinator) logOptions(partition int) log.Options {
	o := log.DefaultOptions()
	o.SegmentSize = c.opts.SegmentSize
	o.UnsafeNoSync = c.opts.UnsafeNoSync
	o.Logger = c.opts.Logger
	o.Partition = partition
	return o
}

// journalDir is where, in a data directory, the journal's segments are.
const journalDir = "journal"

// JournalDir returns where the data directory dir keeps its journal, for
// tools that read a data directory.
func JournalDir(dir string) string { return filepath.Join(dir, journalDir) }

// SnapshotDir returns where partition i of data directory dir keeps its
// snapshots, for tools that read a data directory.
func SnapshotDir(dir string, i int) string {
	return filepath.Join(dir, "snapshots", fmt.Sprintf("p%04d", i))
}

// maxLoaders bounds the partitions that load their snapshots at once.
func maxLoaders() int { return runtime.GOMAXPROCS(0) }

// Ready reports whether every partition has loaded.
func (c *Coordinator) Ready() bool {
	for _, p := range c.parts {
		if p.state.Load() != stateReady {
			return false
		}
	}
	return true
}

// WaitReady blocks until every partition has loaded, one has failed, or ctx
// ends.
func (c *Coordinator) WaitReady(ctx context.Context) error {
	select {
	case <-c.loaded:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, p := range c.parts {
		if err := p.ready(); err != nil {
			return err
		}
	}
	return nil
}

// Partitions returns the number of internal partitions.
func (c *Coordinator) Partitions() int { return c.part.N() }

// Close stops taking requests, lets every partition finish the requests it
// has already queued, and closes the journal, which leaves its clean-close
// marker.
func (c *Coordinator) Close() error { return c.closeAll() }

func (c *Coordinator) closeAll() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.isClosed.Store(true)
	close(c.stop)
	c.mu.Unlock()

	<-c.loaded
	c.background.Wait()
	for _, p := range c.parts {
		if p.w != nil { // loaded
			p.w.close()
		}
	}
	c.writers.Wait() // and so the snapshots, and the truncations they started
	if c.committer != nil {
		c.committer.Close()
	}
	errs := []error{c.journal.Close(), c.lock.Close()}
	return errors.Join(errs...)
}

// submit runs a request on partition p and waits for its result. A
// request whose ctx ends while it waits is answered with ctx's error; it may
// still be written. The request's output travels only in the result, so a
// caller that gave up shares no memory with the writer.
func (c *Coordinator) submit(ctx context.Context, p *partition, r *request) (result, error) {
	pend, err := c.start(ctx, p, r)
	if err != nil {
		return result{}, err
	}
	res, ok := p.w.wait(ctx, r, pend)
	if !ok {
		return result{}, ctx.Err()
	}
	return res, res.err
}

// start starts a request on partition p; p.w.wait waits for its result.
func (c *Coordinator) start(ctx context.Context, p *partition, r *request) (pending, error) {
	if c.isClosed.Load() {
		return pending{}, ErrClosed
	}
	if err := p.ready(); err != nil {
		return pending{}, err
	}
	return p.w.start(ctx, r)
}

// readable reports whether reads may be served from partition p.
func (c *Coordinator) readable(p *partition) error {
	if c.isClosed.Load() {
		return ErrClosed
	}
	return p.ready()
}

// groupPartition returns the partition that owns group.
func (c *Coordinator) groupPartition(group string) *partition {
	return c.parts[c.part.Group(group)]
}

// topicPartition returns the partition that owns a static topic.
func (c *Coordinator) topicPartition(topic string) *partition {
	return c.parts[c.part.Topic(topic)]
}

// sortedGroups lists every group with offsets, sorted.
func (c *Coordinator) sortedGroups() []string {
	var out []string
	for _, p := range c.parts {
		if p.state.Load() == stateReady {
			out = p.offsets.Groups(out)
		}
	}
	slices.Sort(out)
	return out
}

// PartitionStats describes one internal partition.
type PartitionStats struct {
	Partition int
	// Ready is false while the partition loads or after it failed to.
	Ready bool
	// Err is why the partition failed to load; nil while it loads or once
	// it serves.
	Err error
	// Keys and Groups count live offsets and groups; Mappings counts static
	// topic mappings.
	Keys, Groups, Mappings int
	// LoadTime is how long loading took at open (snapshots, then the
	// journal once for every partition), and LoadRecords how many journal
	// records this partition replayed.
	LoadTime    time.Duration
	LoadRecords int
	// LoadBytes is what loading read for this partition: its snapshot
	// file and the payloads of the journal records it replayed.
	LoadBytes int64
	// SnapshotIndex is the journal index the partition's newest snapshot
	// covers (the one it loaded at open, or one written since), and
	// SnapshotBytes its size; 0 while it has none.
	SnapshotIndex uint64
	SnapshotBytes int64
}

// Stats describes every partition, for metrics and operators.
func (c *Coordinator) Stats() []PartitionStats {
	out := make([]PartitionStats, len(c.parts))
	for i, p := range c.parts {
		s := PartitionStats{Partition: i}
		if p.state.Load() == stateFailed {
			s.Err = p.loadErr
		}
		if p.state.Load() == stateReady {
			s.Ready = true
			s.Keys, s.Groups = p.offsets.Len()
			s.Mappings = p.mappings.Len()
			s.LoadTime = p.loadTime
			s.LoadRecords = p.loadRecords
			s.LoadBytes = p.loadBytes
			s.SnapshotIndex = p.snapshotIndex.Load()
			s.SnapshotBytes = p.snapshotSize.Load()
		}
		out[i] = s
	}
	return out
}
