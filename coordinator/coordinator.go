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

	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/partitioner"
)

// Coordinator stores consumer-group offsets and static-topic mappings in a
// partitioned, append-only log and serves them from memory. It is safe for
// concurrent use.
type Coordinator struct {
	dir      string
	opts     Options
	part     partitioner.Partitioner
	parts    []*partition
	switched *signal // fires when any global-read switch changes
	lock     *os.File

	mu         sync.RWMutex
	closed     bool        // guarded by mu
	isClosed   atomic.Bool // mirrors closed for the read path, which takes no lock
	stop       chan struct{}
	loaders    sync.WaitGroup
	writers    sync.WaitGroup
	background sync.WaitGroup // the retention sweeper
	loaded     chan struct{}  // closed when every partition has loaded or failed
}

// Open opens the data directory dir, creating it if needed, and replays every
// partition's log (in parallel) before returning, unless
// opts.LoadInBackground is set.
func Open(dir string, opts Options) (*Coordinator, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := makeDir(dir, opts.syncDir); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if opts.Partitions, err = loadOrCreateMeta(dir, opts.Partitions); err != nil {
		lock.Close()
		return nil, err
	}
	part, _ := partitioner.New(opts.Partitions)
	c := &Coordinator{
		dir:      dir,
		opts:     opts,
		part:     part,
		switched: newSignal(),
		lock:     lock,
		stop:     make(chan struct{}),
		loaded:   make(chan struct{}),
	}
	for i := range opts.Partitions {
		c.parts = append(c.parts, newPartition(i, opts, c.switched))
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
			c.Close()
			return nil, errors.Join(errs...)
		}
	}
	return c, nil
}

// loadAll replays the partitions, as many at once as there are CPUs, and
// starts each partition's writer as soon as it is loaded.
func (c *Coordinator) loadAll() {
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	logOpts := log.DefaultOptions()
	logOpts.SegmentSize = c.opts.SegmentSize
	logOpts.UnsafeNoSync = c.opts.UnsafeNoSync
	logOpts.Logger = c.opts.Logger
	for _, p := range c.parts {
		c.loaders.Add(1)
		go func() {
			defer c.loaders.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			o := logOpts
			o.Partition = p.id
			err := errStopped
			select {
			case <-c.stop: // closed before this partition's turn came
			default:
				err = p.load(c.partitionDir(p.id), o, c.stop)
			}
			if err != nil {
				p.loadErr = err
				p.state.Store(stateFailed)
				if !errors.Is(err, errStopped) {
					c.opts.Logger.Error("partition failed to load", "partition", p.id, "err", err)
				}
				return
			}
			keys, groups := p.offsets.Len()
			c.opts.Logger.Debug("partition loaded", "partition", p.id, "keys", keys, "groups", groups,
				"mappings", p.mappings.Len(), "took", time.Since(start))
			c.writers.Add(1)
			go func() {
				defer c.writers.Done()
				p.run(c.stop)
			}()
			p.state.Store(stateReady)
		}()
	}
	go func() {
		c.loaders.Wait()
		close(c.loaded)
	}()
}

func (c *Coordinator) partitionDir(id int) string { return PartitionDir(c.dir, id) }

// PartitionDir returns where partition i of data directory dir keeps its
// log and snapshots, for tools that read a data directory.
func PartitionDir(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("p%04d", i))
}

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
// has already queued, and closes the logs.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.isClosed.Store(true)
	close(c.stop)
	c.mu.Unlock()

	c.loaders.Wait()
	c.background.Wait()
	for _, p := range c.parts {
		close(p.reqs)
	}
	c.writers.Wait()
	var errs []error
	for _, p := range c.parts {
		if p.log != nil {
			if err := p.log.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, c.lock.Close())
	return errors.Join(errs...)
}

// submit queues a request on partition p and waits for its result. A
// request whose ctx ends while it waits is answered with ctx's error; it may
// still be written. The request's output travels only in the result, so a
// caller that gave up shares no memory with the writer.
func (c *Coordinator) submit(ctx context.Context, p *partition, r *request) (result, error) {
	if err := p.ready(); err != nil {
		return result{}, err
	}
	r.ctx = ctx
	r.done = make(chan result, 1)
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return result{}, ErrClosed
	}
	select {
	case p.reqs <- r:
	case <-ctx.Done():
		c.mu.RUnlock()
		return result{}, ctx.Err()
	}
	c.mu.RUnlock()
	select {
	case res := <-r.done:
		return res, res.err
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
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
	// LoadTime is how long the partition took to replay at open, and
	// LoadRecords how many log entries it replayed.
	LoadTime    time.Duration
	LoadRecords int
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
		}
		out[i] = s
	}
	return out
}
