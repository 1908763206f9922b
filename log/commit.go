package log

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Committer is the commit pipeline: it makes the records of every
// partition durable in the one journal they share, as few batches as it
// can, and tells each partition when its records may be applied. This is
// where a commit becomes durable.
//
// Three invariants hold, the first two kept by the partitions that use it:
//
//  1. A partition's records are built, queued and applied in one order,
//     under the partition's lock: its waiting Ticket grows by Ticket.Add,
//     and another is queued behind it only once the committer took it (or
//     it is full).
//  2. Nothing is applied before it is durable: a record is applied, and
//     its caller answered, only once its Ticket's Done is closed without
//     error; an error means the whole batch is absent from the log.
//  3. Journal order is index order: tickets are appended in the order they
//     were queued, each one's entries contiguous, so a partition's
//     records take increasing indexes in the order it queued them.
//
// A call goes through these steps; the partition does the first two and
// the last, the Committer the third:
//
//	lock the partition; apply its tickets that are Done, oldest first
//	build the record into the partition's waiting ticket (Add), or, when
//	    the committer has taken that one, into a new one (Start); unlock
//	Wait: until the ticket is Done (or, for a caller whose record joined
//	    a ticket another caller queued, until the partition applied it):
//	    if nobody appends and something is queued, be the appender:
//	        take the queue, append it as one batch with one sync, answer
//	        every ticket of it, pass the turn on if more queued meanwhile
//	    else sleep until then, or until the turn is passed to you
//	lock the partition; apply its tickets that are Done (yours, unless a
//	    holder of the lock since did); unlock
//
// Whoever waits while nobody appends does the append: a commit that
// finds the journal idle costs one append and one sync on its own
// goroutine, and under load each sync carries everything that queued
// while the last one ran. No goroutine is woken just to hand work on, as
// none is dedicated to appending: the turn goes to a caller that waits
// anyway. A goroutine dedicated to appending cost a commit made alone two
// hand-offs; a caller appending while it held its partition's lock let one
// batch per sync through a busy partition.
//
// Lock rule, by construction: waiting for the journal never waits for
// another goroutine to take the turn, since the waiter takes it when
// nobody has; and appending takes no partition's lock. So a caller may
// wait while it holds its partition's lock (to settle before a request
// that reads the tables) without deadlocking with one that queued a
// ticket and then waits for that lock.
//
// What the Committer writes of its callers' memory: a Ticket's taken mark
// (under the ticket's lock), its first and last index and its error, all
// before it closes the ticket's Done; nothing else. It reads the ticket's
// entries, and their payloads, from when it takes the ticket until Done
// is closed: they must not change meanwhile.
type Committer struct {
	env      commitEnv
	maxBytes int
	onBatch  func(BatchInfo)

	mu     sync.Mutex
	queue  []*Ticket // guarded by mu
	closed bool      // guarded by mu
	// writing is set, under mu, while somebody appends (the appender); a
	// waiter that finds it set sleeps without taking mu.
	writing atomic.Bool
	// lastEntries is how many entries the last batch carried; guarded by
	// mu.
	lastEntries int
	// arrivals counts the tickets started and grown, for gather.
	arrivals atomic.Uint64
	// turn holds a token when a waiter must look at the queue: the
	// appender puts one there when it stops while tickets are queued or
	// the committer is closing.
	turn chan struct{}

	entries    []Entry   // the batch being appended; the appender's
	partitions []int     // scratch for BatchInfo.Partitions; the appender's
	spare      []*Ticket // the array of the last batch taken; the appender's
}

// commitEnv is what the Committer does with the journal: the seam that
// lets its tests pace and fail appends without a Log.
type commitEnv struct {
	// append writes entries as one batch, durable once it returns (and
	// synced even under UnsafeNoSync when sync), and returns the index of
	// the first; with no entries it only syncs, if sync.
	append    func(entries []Entry, sync bool) (first uint64, err error)
	lastIndex func() uint64
}

// logEnv is the commitEnv of a Log.
func logEnv(l *Log) commitEnv {
	return commitEnv{
		append: func(entries []Entry, sync bool) (first uint64, err error) {
			if len(entries) > 0 {
				first, _, err = l.Append(entries)
			}
			if err == nil && sync && l.opts.UnsafeNoSync {
				err = l.Sync()
			}
			return first, err
		},
		lastIndex: l.LastIndex,
	}
}

// Ticket is one queued batch of a partition's entries, then its result.
// Its owner fills it with Start, may grow it with Add until the committer
// takes it, and reads its result once Done is closed; it may then reuse
// it.
type Ticket struct {
	c       *Committer // set by Start
	mu      sync.Mutex
	entries []Entry // guarded by mu until taken
	bytes   int     // guarded by mu until taken
	taken   bool    // guarded by mu
	sync    bool
	// The result, written by the appender before done is closed.
	first, last uint64
	err         error
	done        chan struct{}
}

// BatchInfo describes one batch the Committer appended.
type BatchInfo struct {
	Calls      int           // tickets it carried
	Records    int           // their records
	Partitions int           // distinct partitions among them
	Bytes      int           // payload bytes
	Took       time.Duration // the append with its sync
	Err        error
}

// ErrCommitterClosed is returned by calls made after Close.
var ErrCommitterClosed = errors.New("log: committer closed")

// maxCommitBytes bounds the payload bytes of one batch that the appender
// forms out of several tickets (one ticket's entries are never split).
const maxCommitBytes = 16 << 20

// NewCommitter makes the pipeline of l, which from now on must be used
// only through the Committer, but for the methods Log allows on any
// goroutine (TruncateFront, SegmentsBefore, FirstIndex, LastIndex).
// onBatch, if not nil, is told about every batch, one at a time, on the
// goroutine that appended it, before its tickets are answered: it must be
// quick.
func NewCommitter(l *Log, onBatch func(BatchInfo)) *Committer {
	return newCommitter(logEnv(l), onBatch)
}

func newCommitter(env commitEnv, onBatch func(BatchInfo)) *Committer {
	return &Committer{env: env, maxBytes: maxCommitBytes, onBatch: onBatch, turn: make(chan struct{}, 1)}
}

// Commit appends entries as part of the next batch and returns, once the
// batch is durable (synced, unless the log is UnsafeNoSync), the record
// indexes of the first and the last of them. entries must not change until
// Commit returns. An error fails every ticket of the batch, which is then
// absent from the log (see Log.Append).
func (c *Committer) Commit(entries []Entry) (first, last uint64, err error) {
	var t Ticket
	if err := c.Start(&t, entries); err != nil {
		return 0, 0, err
	}
	_ = c.Wait(context.Background(), t.done)
	return t.Result()
}

// Start fills t with entries and queues it behind every ticket queued
// before; it returns at once, and nothing is appended until somebody
// waits (Wait). Neither t nor entries may change until Done is closed,
// but through Add.
func (c *Committer) Start(t *Ticket, entries []Entry) error {
	if len(entries) == 0 {
		return ErrInvalid
	}
	*t = Ticket{c: c, entries: entries, bytes: payloadBytes(entries), done: make(chan struct{})}
	return c.enqueue(t)
}

// Add calls add with t's entries and keeps what it returns as t's entries
// (add appends to them), if t waits in the queue, and reports whether it
// did; add is not called once the committer has taken t, or before Start.
// The committer does not take t while add runs. So a partition whose
// ticket still waits grows it instead of queueing another.
func (t *Ticket) Add(add func(entries []Entry) []Entry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done == nil || t.taken {
		return false
	}
	n := len(t.entries)
	t.entries = add(t.entries)
	t.bytes += payloadBytes(t.entries[n:])
	t.c.arrivals.Add(1)
	return true
}

// Wait returns once done is closed (a started Ticket's Done, or what
// follows from it), or ctx ends (with ctx's error). While it waits and
// nobody appends, it appends what is queued itself, on the caller's
// goroutine, unless ctx has ended; an append under way is not interrupted
// by ctx. A ticket whose callers all gave up is appended by the next
// caller of Wait, Sync or Close. The ticket's owner, or anyone else, may
// wait for it; the result is read from the ticket (Result).
func (c *Committer) Wait(ctx context.Context, done <-chan struct{}) error {
	turn := false // holds the token from c.turn
	for {
		select {
		case <-done:
			if turn {
				c.passTurn() // tickets may be queued behind ours
			}
			return nil
		default:
		}
		if err := ctx.Err(); err != nil {
			if turn {
				c.passTurn()
			}
			return err
		}
		if !c.writing.Load() {
			c.mu.Lock()
			if !c.writing.Load() && len(c.queue) > 0 {
				c.appendQueued(turn || len(c.queue) > 1 || c.lastEntries > 1)
				c.mu.Unlock()
				turn = false
				continue
			}
			c.mu.Unlock()
		}
		turn = false // the appender passes the turn on when it stops
		select {
		case <-done:
			return nil
		case <-c.turn:
			turn = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Done is closed once the ticket's entries are durable, or failed.
func (t *Ticket) Done() <-chan struct{} { return t.done }

// Result waits until Done is closed, then returns the record indexes of
// the first and the last of the ticket's entries, or why they are not in
// the log. It does not append: whoever waits for it must, through Wait.
func (t *Ticket) Result() (first, last uint64, err error) {
	<-t.done
	return t.first, t.last, t.err
}

// Sync returns once everything committed before it is durable, even with
// UnsafeNoSync: snapshots call it before they are committed, so that no
// snapshot covers records a machine crash could take back.
func (c *Committer) Sync() error {
	t := &Ticket{sync: true, done: make(chan struct{})}
	if err := c.enqueue(t); err != nil {
		return err
	}
	_ = c.Wait(context.Background(), t.done)
	return t.err
}

func (c *Committer) enqueue(t *Ticket) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrCommitterClosed
	}
	c.queue = append(c.queue, t)
	c.arrivals.Add(1)
	return nil
}

// appendQueued makes the caller the appender: it appends what is queued,
// as one batch, and passes the turn on if more queued meanwhile or the
// committer is closing. It is called, and returns, with mu held, when
// nobody appends and the queue is not empty. busy says that other callers
// are about (the turn was passed, others queued, or the last batch carried
// several entries): it gathers first. A caller alone does not: a yield can
// hand its goroutine to another thread, which a busy machine may not run
// for a long while.
func (c *Committer) appendQueued(busy bool) {
	c.writing.Store(true)
	if busy {
		c.mu.Unlock()
		c.gather()
		c.mu.Lock()
	}
	batch := c.take()
	c.mu.Unlock()
	entries := c.append(batch)
	clear(batch)
	c.spare = batch[:0]
	c.mu.Lock()
	c.writing.Store(false)
	c.lastEntries = entries
	if len(c.queue) > 0 || c.closed {
		c.passTurn()
	}
}

// passTurn puts the token in c.turn, unless it is there already.
func (c *Committer) passTurn() {
	select {
	case c.turn <- struct{}{}:
	default:
	}
}

// take takes the tickets at the head of the queue that fit in one batch,
// under mu, for the appender.
func (c *Committer) take() []*Ticket {
	n, bytes := 0, 0
	for n < len(c.queue) {
		t := c.queue[n]
		t.mu.Lock()
		if n > 0 && bytes+t.bytes > c.maxBytes {
			t.mu.Unlock()
			break
		}
		t.taken = true
		bytes += t.bytes
		t.mu.Unlock()
		n++
	}
	batch := append(c.spare[:0], c.queue[:n]...)
	c.spare = nil
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return batch
}

// gather yields while tickets keep arriving (started, or grown: a
// partition whose ticket waits grows it), a few times at most, before the
// appender takes a batch: the callers answered by the last batch apply it
// and queue their next within microseconds, and those that are runnable
// then join this sync instead of waiting a whole one more.
func (c *Committer) gather() {
	n := c.arrivals.Load()
	for range maxGatherYields {
		runtime.Gosched()
		m := c.arrivals.Load()
		if m == n {
			return
		}
		n = m
	}
}

// maxGatherYields bounds gather's yields. With 64 committers in 64 groups
// (coordinator's BenchmarkCommit, which reports commits/fsync), no yield
// gave about 30 commits per fsync and up to eight about 44, as partitions
// hand over their next batches while the last one syncs.
const maxGatherYields = 8

// append writes the entries of every ticket in batch as one batch, syncs if
// one of them asked for it, answers them all, and returns how many entries
// it appended.
func (c *Committer) append(batch []*Ticket) int {
	c.entries = c.entries[:0]
	sync := false
	for _, t := range batch {
		c.entries = append(c.entries, t.entries...)
		sync = sync || t.sync
	}
	start := time.Now()
	first, err := c.env.append(c.entries, sync)
	if c.onBatch != nil && len(c.entries) > 0 {
		info := BatchInfo{Records: len(c.entries), Took: time.Since(start), Err: err}
		c.partitions = c.partitions[:0]
		for _, t := range batch {
			if len(t.entries) > 0 {
				info.Calls++
				info.Bytes += t.bytes
			}
			for _, e := range t.entries {
				if !slices.Contains(c.partitions, e.Partition) {
					c.partitions = append(c.partitions, e.Partition)
				}
			}
		}
		info.Partitions = len(c.partitions)
		c.onBatch(info)
	}
	n := len(c.entries)
	clear(c.entries) // drop the payloads
	next := first
	for _, t := range batch {
		if n := uint64(len(t.entries)); n > 0 && err == nil {
			t.first, t.last = next, next+n-1
			next += n
		}
		t.err = err
		close(t.done)
	}
	return n
}

// LastIndex returns the log's last durable record index.
func (c *Committer) LastIndex() uint64 { return c.env.lastIndex() }

// Close refuses new tickets, appends every ticket queued, and returns once
// they are answered. It does not close the Log.
func (c *Committer) Close() {
	c.mu.Lock()
	c.closed = true
	for c.writing.Load() || len(c.queue) > 0 {
		if !c.writing.Load() {
			c.appendQueued(false)
			continue
		}
		c.mu.Unlock()
		<-c.turn // the appender passes the turn as it stops
		c.mu.Lock()
	}
	c.mu.Unlock()
}

func payloadBytes(entries []Entry) int {
	n := 0
	for _, e := range entries {
		n += len(e.Payload)
	}
	return n
}
