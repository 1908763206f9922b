package log

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Committer owns a Log and appends to it, for many goroutines, everything
// they hand it, as few batches as it can: one goroutine takes whatever has
// queued, appends it as one batch with one fsync, and answers each caller.
// While that fsync runs, the next batch forms in the queue, so under load
// every fsync carries everything that arrived meanwhile. This is where a
// commit becomes durable.
//
// Each caller's entries stay contiguous and in order in the batch, and
// callers that queue one after the other get increasing indexes. Results
// travel in the call's own Ticket: the committer never writes memory the
// caller owns.
//
// A caller that finds the committer idle can append its batch on its own
// goroutine instead (StartOwn, Flush): a lone commit then costs one append
// and fsync, without handing its batch to the committer's goroutine and
// being woken back.
type Committer struct {
	log      *Log
	maxBytes int
	onBatch  func(BatchInfo)

	mu     sync.Mutex
	queue  []*Ticket // guarded by mu
	closed bool      // guarded by mu
	// busy is set, under mu, while a goroutine (the loop, or a caller in
	// Flush) takes batches from the queue and appends them; only that
	// goroutine touches the Log, entries and partitions. Whoever clears it
	// wakes the loop if the queue is not empty.
	busy bool

	// wake holds a token when the loop must look at the queue: it is sent
	// when a call queues while nobody is busy (but by StartOwn's lone
	// caller, who flushes itself) and when busy is cleared with calls
	// queued.
	wake chan struct{}
	done chan struct{} // closed when the loop has returned

	entries    []Entry   // the batch being appended; busy's own
	partitions []int     // scratch for BatchInfo.Partitions
	spare      []*Ticket // guarded by mu
}

// Ticket is one call's place in the committer's queue: its entries, and
// then their result. Start fills it; its owner may reuse it once Done is
// closed and Result read.
type Ticket struct {
	entries     []Entry
	bytes       int
	sync        bool
	taken       bool // in a batch being appended; guarded by Committer.mu
	first, last uint64
	err         error
	done        chan struct{}
}

// BatchInfo describes one batch the Committer appended.
type BatchInfo struct {
	Calls      int           // Commit calls it carried
	Records    int           // their records
	Partitions int           // distinct partitions among them
	Bytes      int           // payload bytes
	Took       time.Duration // the append with its fsync
	Err        error
}

// ErrCommitterClosed is returned by calls made after Close.
var ErrCommitterClosed = errors.New("log: committer closed")

// maxCommitBytes bounds the payload bytes of one batch that the committer
// forms out of several calls (one call's entries are never split).
const maxCommitBytes = 16 << 20

// NewCommitter starts the goroutine that appends to l, which from now on
// must be used only through the Committer, but for the methods Log allows
// on any goroutine (TruncateFront, SegmentsBefore, FirstIndex, LastIndex).
// onBatch, if not nil, is told about every batch, one at a time, on the
// goroutine that appended it (the committer's, or Flush's caller), before
// the callers are answered: it must be quick.
func NewCommitter(l *Log, onBatch func(BatchInfo)) *Committer {
	c := &Committer{log: l, maxBytes: maxCommitBytes, onBatch: onBatch, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.run()
	return c
}

// Commit appends entries as part of the next batch and returns, once the
// batch is durable (synced, unless the log is UnsafeNoSync), the record
// indexes of the first and the last of them. entries must not change until
// Commit returns. An error fails every call of the batch, which is then
// absent from the log (see Log.Append).
func (c *Committer) Commit(entries []Entry) (first, last uint64, err error) {
	var t Ticket
	if err := c.Start(&t, entries); err != nil {
		return 0, 0, err
	}
	return t.Result()
}

// Start queues entries for the next batch in t and returns at once; t's
// Done channel is closed once they are durable or failed. A caller may
// start more batches before its first is done: they are appended in the
// order they were started, so a caller that applies its tickets in that
// order applies its records in index order. Neither t nor entries may
// change until Done is closed.
func (c *Committer) Start(t *Ticket, entries []Entry) error {
	_, err := c.start(t, entries, false)
	return err
}

// StartOwn is Start for a caller that waits for t itself. When nothing is
// queued and no batch is being appended, it queues t without waking the
// committer's goroutine and reports lone: the caller must then call Flush,
// once it holds no lock another caller of the committer may wait for, and
// the batch is appended on its goroutine. Any call queued or extended
// meanwhile wakes the committer's goroutine as usual, so a lone ticket
// delays nobody but its caller. A caller that no longer waits for t (it
// gave up) calls Wake instead of Flush.
func (c *Committer) StartOwn(t *Ticket, entries []Entry) (lone bool, err error) {
	return c.start(t, entries, true)
}

func (c *Committer) start(t *Ticket, entries []Entry, own bool) (lone bool, err error) {
	if len(entries) == 0 {
		return false, ErrInvalid
	}
	*t = Ticket{entries: entries, done: make(chan struct{})}
	for _, e := range entries {
		t.bytes += len(e.Payload)
	}
	return c.enqueue(t, own)
}

// Extend replaces the entries of t, a ticket Start queued, with entries,
// which begin with the ones t holds, if the committer has not yet taken t
// into a batch, and reports whether it did. So a caller whose last batch
// still waits adds to it instead of queueing another. entries must not
// change until t's Done is closed.
func (c *Committer) Extend(t *Ticket, entries []Entry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.done == nil || t.taken || c.closed {
		return false // never started, or taken
	}
	t.entries = entries
	t.bytes = 0
	for _, e := range entries {
		t.bytes += len(e.Payload)
	}
	if !c.busy {
		c.nudge() // t may be a lone ticket whose caller has not flushed yet
	}
	return true
}

// Flush takes the calls queued, as one batch, and appends it on the
// caller's goroutine, unless another goroutine is appending already (it
// then takes them in its turn). StartOwn's lone caller calls it; others
// may. It returns once that batch is answered.
func (c *Committer) Flush() {
	c.mu.Lock()
	if c.busy {
		c.mu.Unlock()
		return
	}
	c.busy = true
	batch := c.take()
	c.mu.Unlock()
	if len(batch) > 0 {
		c.append(batch)
		c.recycle(batch)
	}
	c.mu.Lock()
	c.idle()
	c.mu.Unlock()
}

// Wake has the committer's goroutine append the calls queued, a lone
// ticket among them, unless a goroutine is appending already (it looks at
// the queue again before it stops): StartOwn's lone caller calls it
// instead of Flush when it will not wait for its ticket.
func (c *Committer) Wake() {
	c.mu.Lock()
	if !c.busy && len(c.queue) > 0 {
		c.nudge()
	}
	c.mu.Unlock()
}

// Done is closed once the ticket's entries are durable, or failed.
func (t *Ticket) Done() <-chan struct{} { return t.done }

// Result waits until Done is closed, then returns the record indexes of
// the first and the last of the ticket's entries, or why they are not in
// the log.
func (t *Ticket) Result() (first, last uint64, err error) {
	<-t.done
	return t.first, t.last, t.err
}

// Sync returns once everything committed before it is durable, even with
// UnsafeNoSync: snapshots call it before they are committed, so that no
// snapshot covers records a machine crash could take back.
func (c *Committer) Sync() error {
	w := &Ticket{sync: true, done: make(chan struct{})}
	if _, err := c.enqueue(w, false); err != nil {
		return err
	}
	<-w.done
	return w.err
}

// enqueue queues w and wakes the loop unless someone is busy (who looks at
// the queue again before it stops) or own and w is alone (its caller
// flushes, and so reports lone).
func (c *Committer) enqueue(w *Ticket, own bool) (lone bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, ErrCommitterClosed
	}
	c.queue = append(c.queue, w)
	if c.busy {
		return false, nil
	}
	if own && len(c.queue) == 1 {
		return true, nil
	}
	c.nudge()
	return false, nil
}

// nudge makes sure the loop will look at the queue.
func (c *Committer) nudge() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take takes the calls at the head of the queue that fit in one batch;
// called under mu by the goroutine that is busy.
func (c *Committer) take() []*Ticket {
	n, bytes := 0, 0
	for n < len(c.queue) && (n == 0 || bytes+c.queue[n].bytes <= c.maxBytes) {
		bytes += c.queue[n].bytes
		n++
	}
	batch := append(c.spare[:0], c.queue[:n]...)
	c.spare = nil
	for _, t := range batch {
		t.taken = true
	}
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return batch
}

// recycle keeps batch's array for the next take.
func (c *Committer) recycle(batch []*Ticket) {
	clear(batch)
	c.mu.Lock()
	c.spare = batch[:0]
	c.mu.Unlock()
}

// idle clears busy, under mu, and wakes the loop if calls are queued or
// the committer is closing.
func (c *Committer) idle() {
	c.busy = false
	if len(c.queue) > 0 || c.closed {
		c.nudge()
	}
}

// LastIndex returns the log's last durable record index.
func (c *Committer) LastIndex() uint64 { return c.log.LastIndex() }

// Close answers every call already queued, then stops. It does not close
// the Log.
func (c *Committer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.nudge()
	}
	c.mu.Unlock()
	<-c.done
}

func (c *Committer) run() {
	defer close(c.done)
	for range c.wake {
		c.mu.Lock()
		if c.busy {
			c.mu.Unlock() // a caller flushes; it wakes the loop when it is done
			continue
		}
		c.busy = true
		c.mu.Unlock()
		for {
			c.gather()
			c.mu.Lock()
			batch := c.take()
			if len(batch) == 0 {
				c.busy = false
				closed := c.closed
				c.mu.Unlock()
				if closed {
					return
				}
				break
			}
			c.mu.Unlock()
			c.append(batch)
			c.recycle(batch)
		}
	}
}

// gather yields while the queue keeps growing, a few times at most, before
// a batch is taken: the callers answered by the last batch apply it and
// queue their next within microseconds, and those that are runnable then
// join this fsync instead of waiting a whole one more. A call that finds
// the loop asleep and nothing queued never comes here (StartOwn): it
// appends its batch itself.
func (c *Committer) gather() {
	c.mu.Lock()
	n := len(c.queue)
	c.mu.Unlock()
	for range maxGatherYields {
		runtime.Gosched()
		c.mu.Lock()
		grew := len(c.queue) > n
		n = len(c.queue)
		c.mu.Unlock()
		if !grew {
			return
		}
	}
}

// maxGatherYields bounds gather's yields. With 64 committers in 64 groups
// (coordinator's BenchmarkCommit, which reports commits/fsync), no yield
// gave about 30 commits per fsync and up to eight about 44, as partitions
// hand over their next batches while the last one syncs.
const maxGatherYields = 8

// append writes the entries of every ticket in batch as one batch, syncs if
// one of them asked for it, and answers them all.
func (c *Committer) append(batch []*Ticket) {
	c.entries = c.entries[:0]
	sync := false
	for _, w := range batch {
		c.entries = append(c.entries, w.entries...)
		sync = sync || w.sync
	}
	var first uint64
	var err error
	start := time.Now()
	if len(c.entries) > 0 {
		first, _, err = c.log.Append(c.entries)
	}
	if err == nil && sync && c.log.opts.UnsafeNoSync {
		err = c.log.Sync()
	}
	if c.onBatch != nil && len(c.entries) > 0 {
		info := BatchInfo{Records: len(c.entries), Took: time.Since(start), Err: err}
		c.partitions = c.partitions[:0]
		for _, w := range batch {
			if len(w.entries) > 0 {
				info.Calls++
				info.Bytes += w.bytes
			}
			for _, e := range w.entries {
				if !slices.Contains(c.partitions, e.Partition) {
					c.partitions = append(c.partitions, e.Partition)
				}
			}
		}
		info.Partitions = len(c.partitions)
		c.onBatch(info)
	}
	clear(c.entries) // drop the payloads
	next := first
	for _, w := range batch {
		if n := uint64(len(w.entries)); n > 0 && err == nil {
			w.first, w.last = next, next+n-1
			next += n
		}
		w.err = err
		close(w.done)
	}
}
