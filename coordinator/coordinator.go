package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
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

// Coordinator stores consumer-group offsets and static-topic mappings in
// internal partitions that share one journal (package log), or that Raft
// replicates (Options.Replication), and serves them from memory. It is safe
// for concurrent use.
type Coordinator struct {
	dir       string
	opts      Options
	part      partitioner.Partitioner
	parts     []*partition
	snapshots []*log.Snapshots // per partition
	switched  *signal.Signal   // fires when any global-read switch changes
	lock      dirLock

	// plan is what opening the journal will do, made before loading; once
	// every partition has loaded, carryOut opens journal by it and drops
	// it (nil from then on). Only the loading goroutine uses it. journal is
	// the log every partition commits to; committer, its owner once
	// loading is done, makes each batch durable with one sync (an
	// fdatasync of the journal's sync ring; see package log).
	plan       *log.Plan
	journal    *log.Log       // nil until loaded, and if opening was refused
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

	meta      meta // the data directory's meta file, as Open leaves it
	writeMeta bool // meta is new, or of an older version: carryOut writes it
	// txnFormat says the meta file is at formatTxn; formatMu serializes
	// the one rewrite that puts it there (useTxnFormat).
	txnFormat atomic.Bool
	formatMu  sync.Mutex
	check     bool       // Check's: loads, and never carries out
	loads     []snapLoad // per partition, what loading its snapshots found; set by loadAll
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
	if _, _, err := readMeta(dir); errors.Is(err, ErrNotDataDir) {
		return nil, err // before locking someone else's directory
	}
	lock, err := lockDir(dir, true)
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

func open(dir string, opts Options, lock dirLock) (*Coordinator, error) {
	c, err := plan(dir, opts, false)
	if err != nil {
		return nil, err
	}
	c.lock = lock
	c.loadAll()
	if opts.Retention > 0 {
		c.background.Add(1)
		go func() {
			defer c.background.Done()
			c.sweep()
		}()
	}
	if !opts.LoadInBackground {
		if err := c.loadErrors(); err != nil {
			c.closeAll()
			return nil, err
		}
	}
	return c, nil
}

// plan reads the data directory as Open does and returns a coordinator
// ready to load, having written nothing but a format-1 directory's
// conversion (which check refuses instead): what it finds is judged, and
// written to, only once every partition has loaded (carryOut).
func plan(dir string, opts Options, check bool) (*Coordinator, error) {
	m, writeM, err := planMeta(dir, opts.Partitions)
	if err != nil {
		return nil, err
	}
	opts.Partitions = m.Partitions
	if m.Format == format1 {
		if check {
			return nil, fmt.Errorf("%w: %s is of format %d, which Open converts", errFormat1, dir, format1)
		}
		if err := upgradeFormat1(dir, opts, m); err != nil {
			return nil, fmt.Errorf("coordinator: converting %s to format %d: %w", dir, dataFormat, err)
		}
		m.Format, writeM = dataFormat, false
	}
	part, _ := partitioner.New(opts.Partitions)
	c := &Coordinator{
		dir:       dir,
		opts:      opts,
		part:      part,
		switched:  signal.New(),
		stop:      make(chan struct{}),
		loaded:    make(chan struct{}),
		meta:      m,
		writeMeta: writeM,
		check:     check,
	}
	c.txnFormat.Store(m.Format == formatTxn)
	c.plan, err = log.PlanOpen(filepath.Join(dir, journalDir), c.journalOptions())
	if err != nil {
		return nil, err
	}
	if err := journalMissing(dir, opts.Partitions, c.plan.Report().Segments); err != nil {
		return nil, err
	}
	for i := range opts.Partitions {
		snaps, err := log.NewSnapshots(SnapshotDir(dir, i), snapshotOwner(m, i))
		if err != nil {
			return nil, err
		}
		p := newPartition(i, opts, c.switched, snaps)
		p.onSnapshot = c.truncateJournal
		p.useTxnFormat = c.useTxnFormat
		c.snapshots = append(c.snapshots, snaps)
		c.parts = append(c.parts, p)
	}
	return c, nil
}

// journalMissing returns an error if dir has snapshots but no journal, or
// a journal directory without a segment file (segments, as the plan
// counted them): the snapshots cover records a journal held, and an empty
// journal in its place would take them for ones a crash left ahead and
// remove them. A journal always keeps a segment once created: wal makes
// the first when it creates the directory, and the journal removes only
// segments before its last.
func journalMissing(dir string, partitions, segments int) error {
	if segments > 0 {
		return nil
	}
	what := "no journal " + JournalDir(dir)
	if _, err := os.Stat(JournalDir(dir)); err == nil {
		what = "no journal segment in " + JournalDir(dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for i := range partitions {
		if list, _ := log.ListSnapshots(SnapshotDir(dir, i)); len(list) > 0 {
			return fmt.Errorf("%w: %s holds snapshots (%s) but %s",
				ErrCorrupt, dir, log.SnapshotPath(SnapshotDir(dir, i), list[0]), what)
		}
	}
	return nil
}

// snapshotOwner is what the snapshots of partition i of the data
// directory of m name in their headers.
func snapshotOwner(m meta, i int) log.SnapshotOwner {
	return log.SnapshotOwner{Partition: i, Partitions: m.Partitions, Hash: m.Hash, Dir: m.ID}
}

// loadErrors waits until loading is over and returns why the partitions
// that failed did.
func (c *Coordinator) loadErrors() error {
	<-c.loaded
	var errs []error
	for _, p := range c.parts {
		if p.state.Load() == stateFailed && !errors.Is(p.loadErr, errNotOpened) {
			errs = append(errs, p.loadErr)
		}
	}
	return errors.Join(errs...)
}

// journalOptions are the options of the journal.
func (c *Coordinator) journalOptions() log.Options {
	o := log.DefaultOptions()
	o.SegmentSize = c.opts.SegmentSize
	o.UnsafeNoSync = c.opts.UnsafeNoSync
	o.Logger = c.opts.Logger
	o.JournalID = c.meta.ID
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
	var notOpened error // reported only if no partition says why
	for _, p := range c.parts {
		if err := p.ready(); errors.Is(err, errNotOpened) {
			notOpened = cmp.Or(notOpened, err)
		} else if err != nil {
			return err
		}
	}
	return notOpened
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
	var errs []error
	if c.journal != nil {
		errs = append(errs, c.journal.Close())
	}
	if c.lock != nil {
		errs = append(errs, c.lock.Close())
	}
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
	if err := c.readable(p); err != nil {
		return pending{}, err
	}
	return p.w.start(ctx, r)
}

// readable reports whether reads may be served from partition p, and
// requests started on it: the coordinator is open and p loaded.
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
