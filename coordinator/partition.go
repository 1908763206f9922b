package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/statictopic"
)

// Bounds on one group commit: the writer stops draining its queue when either
// is reached, so one batch never becomes an oversized write.
const (
	maxBatchRequests = 1024
	maxBatchBytes    = 8 << 20
)

const (
	stateLoading int32 = iota
	stateReady
	stateFailed
)

// partition is one internal partition: its log, its tables, and the writer
// goroutine that alone appends to the log and changes the tables.
type partition struct {
	id       int
	logger   *slog.Logger
	observer Observer
	reqs     chan *request
	offsets  *cache.Offsets
	mappings *cache.Mappings
	switches *cache.Switches // shared by all partitions

	state       atomic.Int32
	loadErr     error         // set before state becomes stateFailed
	loadTime    time.Duration // set before state becomes stateReady
	loadRecords int           // log entries replayed; set before stateReady

	log *log.Log // owned by the loader, then by the writer goroutine

	// Writer-goroutine state for the batch being built.
	pending  []pendingEntry
	buf      *bytebufferpool.ByteBuffer
	batchGen map[string]int32  // highest generation in the pending batch, per group
	topics   map[string]string // interned topic names

	notifyMu sync.Mutex
	changed  chan struct{} // guarded by notifyMu; closed and replaced on every applied batch
}

// request is one call waiting for the writer goroutine.
type request struct {
	ctx context.Context
	typ byte
	// readsState marks requests whose build reads the tables (deletes,
	// mapping changes): the writer flushes the pending batch before building
	// them, so they see every earlier request applied.
	readsState bool
	// build validates the request against the partition's state and appends
	// the record's payload to dst. An error fails the request, writing nothing.
	build func(p *partition, dst []byte) ([]byte, error)
	done  chan result
}

type result struct {
	index uint64
	err   error
}

type pendingEntry struct {
	req        *request
	start, end int
}

func newPartition(id int, opts Options, switches *cache.Switches) *partition {
	return &partition{
		id:       id,
		logger:   opts.Logger,
		observer: opts.Observer,
		reqs:     make(chan *request, maxBatchRequests),
		offsets:  cache.NewOffsets(),
		mappings: cache.NewMappings(),
		switches: switches,
		batchGen: make(map[string]int32),
		topics:   make(map[string]string),
		changed:  make(chan struct{}),
	}
}

// ready returns nil when the partition serves requests, or why it does not.
func (p *partition) ready() error {
	switch p.state.Load() {
	case stateReady:
		return nil
	case stateLoading:
		return fmt.Errorf("%w: partition %d", ErrLoading, p.id)
	default:
		return fmt.Errorf("coordinator: partition %d failed to load: %w", p.id, p.loadErr)
	}
}

// load opens the partition's log and replays it into the tables.
func (p *partition) load(dir string, opts log.Options, stop <-chan struct{}) error {
	start := time.Now()
	l, err := log.Open(dir, opts)
	if err != nil {
		return err
	}
	errStopped := errors.New("stopped")
	n := 0
	p.offsets.Update(func(w cache.OffsetsWriter) {
		err = l.Replay(0, func(index uint64, typ byte, payload []byte) error {
			if n++; n&0xffff == 0 {
				select {
				case <-stop:
					return errStopped
				default:
				}
			}
			if err := p.apply(w, index, typ, payload); err != nil {
				return fmt.Errorf("partition %d index %d: %w", p.id, index, err)
			}
			return nil
		})
	})
	if err != nil {
		l.Close()
		return err
	}
	p.log = l
	p.loadTime = time.Since(start)
	p.loadRecords = n
	if p.observer != nil {
		p.observer.ObserveLoad(p.id, n, p.loadTime)
	}
	return nil
}

// run is the writer goroutine: it drains every queued request into one batch,
// appends it with one fsync, applies it to the tables, then answers every
// waiter. It returns when reqs is closed and drained.
func (p *partition) run() {
	p.buf = bytebufferpool.Get()
	defer bytebufferpool.Put(p.buf)
	for r := range p.reqs {
		p.add(r)
		open := true
	drain:
		for len(p.pending) < maxBatchRequests && p.buf.Len() < maxBatchBytes {
			select {
			case r, ok := <-p.reqs:
				if !ok {
					open = false
					break drain
				}
				p.add(r)
			default:
				break drain
			}
		}
		p.flush()
		if !open {
			return
		}
	}
}

// add builds r's record into the pending batch, or answers r with its error.
func (p *partition) add(r *request) {
	if err := r.ctx.Err(); err != nil {
		r.done <- result{err: err}
		return
	}
	if r.readsState && len(p.pending) > 0 {
		p.flush()
	}
	start := p.buf.Len()
	b, err := r.build(p, p.buf.B)
	if err != nil {
		p.buf.B = p.buf.B[:start]
		r.done <- result{err: err}
		return
	}
	p.buf.B = b
	p.pending = append(p.pending, pendingEntry{req: r, start: start, end: len(b)})
}

// flush writes the pending batch as one log append (one fsync), applies it
// to the tables, and acknowledges every request in it.
func (p *partition) flush() {
	if len(p.pending) == 0 {
		return
	}
	defer func() {
		clear(p.pending)
		p.pending = p.pending[:0]
		p.buf.Reset()
		clear(p.batchGen)
	}()
	entries := make([]log.Entry, len(p.pending))
	for i, e := range p.pending {
		entries[i] = log.Entry{Type: e.req.typ, Payload: p.buf.B[e.start:e.end]}
	}
	start := time.Now()
	first, _, err := p.log.Append(entries)
	if p.observer != nil {
		p.observer.ObserveAppend(p.id, len(entries), p.buf.Len(), time.Since(start), err)
	}
	if err != nil {
		err = fmt.Errorf("%w: partition %d: %w", ErrWriteFailed, p.id, err)
		p.logger.Error("log append failed; repairing the partition's log", "partition", p.id, "err", err)
		for _, e := range p.pending {
			e.req.done <- result{err: err}
		}
		if rerr := p.log.Recover(); rerr != nil {
			p.logger.Error("log repair failed; will retry before the next write", "partition", p.id, "err", rerr)
		}
		return
	}
	p.offsets.Update(func(w cache.OffsetsWriter) {
		for i, e := range entries {
			if err := p.apply(w, first+uint64(i), e.Type, e.Payload); err != nil {
				// The writer encoded this record itself a moment ago.
				panic(fmt.Sprintf("coordinator: partition %d cannot apply its own record: %v", p.id, err))
			}
		}
	})
	p.notify()
	for i, e := range p.pending {
		e.req.done <- result{index: first + uint64(i)}
	}
}

// apply changes the tables by one durable record. Replay and the live path
// share it, so what a restart rebuilds is exactly what was served.
func (p *partition) apply(w cache.OffsetsWriter, index uint64, typ byte, payload []byte) error {
	d := decoder{b: payload}
	switch typ {
	case recCommit:
		group := w.GroupName(d.bytes())
		gen := d.int32()
		commitTime := d.int()
		n := d.int()
		if n < 0 || n > MaxOffsetsPerCommit {
			d.bad = true
		}
		for i := int64(0); i < n && !d.bad; i++ {
			topic := p.topic(d.bytes())
			part := d.int32()
			off := d.int()
			epoch := d.int32()
			md := d.bytes()
			if d.bad {
				break
			}
			w.Put(group, index, cache.TopicPartition{Topic: topic, Partition: part},
				cache.Offset{Offset: off, LeaderEpoch: epoch, Metadata: string(md), CommitTime: commitTime})
		}
		if gen >= 0 {
			w.SetGeneration(group, gen)
		}
	case recDeleteOffsets:
		group := d.bytes()
		n := d.int()
		for i := int64(0); i < n && !d.bad; i++ {
			topic := d.bytes()
			part := d.int32()
			if !d.bad {
				w.Delete(string(group), index, cache.TopicPartition{Topic: string(topic), Partition: part})
			}
		}
	case recDeleteGroup:
		w.DeleteGroup(string(d.bytes()))
	case recMapping:
		var m statictopic.Mapping
		if err := json.Unmarshal(payload, &m); err != nil {
			return fmt.Errorf("%w: mapping record: %v", ErrCorrupt, err)
		}
		p.mappings.Put(m)
		return nil
	case recGlobalRead:
		scope := d.bytes()
		on := d.int()
		if !d.bad {
			p.switches.SetGlobalRead(string(scope), on == 1)
		}
	default:
		return fmt.Errorf("%w: unknown record type %d", ErrCorrupt, typ)
	}
	return d.err(typ)
}

// topic interns a topic name: groups share a few topics, so each name is
// held once.
func (p *partition) topic(b []byte) string {
	if s, ok := p.topics[string(b)]; ok {
		return s
	}
	s := string(b)
	p.topics[s] = s
	return s
}

// notify wakes everyone waiting for a change in this partition.
func (p *partition) notify() {
	p.notifyMu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.notifyMu.Unlock()
}

// watch returns a channel closed at the partition's next change.
func (p *partition) watch() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	return p.changed
}
