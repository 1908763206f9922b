package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/log"
)

// Options configures a Node.
type Options struct {
	// ID is this node's id, one of Peers; ids are not 0.
	ID uint64
	// Peers lists the id of every node of the cluster, this one's
	// included: a new cluster's partitions are replicated on all of them
	// (ChangeReplicas changes that later). Three tolerate the loss of one,
	// five of two.
	Peers []uint64
	// Transport carries messages to the other nodes. Required. If it has
	// a method AddPeer(id uint64, addr string), the node calls it when a
	// configuration change adds a node at a Raft address (see
	// ReplicaChange).
	Transport Transport
	// Join makes a node whose data directory is empty join a running
	// cluster instead of founding one: its groups start with no
	// configuration and wait for a leader to add this node (ChangeReplicas),
	// then catch up from the leader's snapshot and log. Without it, an
	// empty node bootstraps every group with Peers as voters, which only
	// the founding nodes of a cluster may do. It changes nothing for a
	// data directory that holds a group's log. It sticks to the data
	// directory: a node once started with it never founds a cluster.
	Join bool
	// Address is where the other nodes reach this node's Raft listener
	// (host:port), if known: a joining node names it in the command it
	// says to run to add it.
	Address string
	// TickInterval is Raft's clock tick. Zero means 100ms.
	TickInterval time.Duration
	// ElectionTicks is how many ticks without a word from a leader make a
	// follower campaign (raft randomizes it up to twice that). Zero means
	// 10.
	ElectionTicks int
	// HeartbeatTicks is how many ticks apart a leader sends heartbeats.
	// Zero means 1.
	HeartbeatTicks int
	// Logger receives raft's warnings and errors. Nil means slog.Default().
	Logger *slog.Logger

	// ticks, when set, is the Raft clock in place of a ticker of
	// TickInterval: tests stop and start it.
	ticks <-chan time.Time
}

// DefaultOptions returns the options a Node uses for zero fields.
func DefaultOptions() Options {
	return Options{TickInterval: 100 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1}
}

func (o *Options) ensureDefaults() {
	d := DefaultOptions()
	if o.TickInterval == 0 {
		o.TickInterval = d.TickInterval
	}
	if o.ElectionTicks == 0 {
		o.ElectionTicks = d.ElectionTicks
	}
	if o.HeartbeatTicks == 0 {
		o.HeartbeatTicks = d.HeartbeatTicks
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Peers = slices.Clone(o.Peers)
}

// ErrInvalid reports bad options or arguments. errors.Is also matches it
// with coordinator.ErrInvalid, which servers know.
var ErrInvalid error = invalidError{}

type invalidError struct{}

func (invalidError) Error() string        { return "cluster: invalid argument" }
func (invalidError) Is(target error) bool { return target == coordinator.ErrInvalid }

func (o *Options) validate() error {
	if o.ID == 0 {
		return fmt.Errorf("%w: Options.ID is 0", ErrInvalid)
	}
	if !slices.Contains(o.Peers, o.ID) {
		return fmt.Errorf("%w: Options.Peers %v do not include Options.ID %d", ErrInvalid, o.Peers, o.ID)
	}
	seen := map[uint64]bool{}
	for _, id := range o.Peers {
		if id == 0 || seen[id] {
			return fmt.Errorf("%w: Options.Peers %v: ids must be distinct and not 0", ErrInvalid, o.Peers)
		}
		seen[id] = true
	}
	if o.Transport == nil {
		return fmt.Errorf("%w: Options.Transport is nil", ErrInvalid)
	}
	if o.TickInterval < 0 || o.ElectionTicks <= o.HeartbeatTicks || o.HeartbeatTicks < 0 {
		return fmt.Errorf("%w: Options.TickInterval %v, ElectionTicks %d, HeartbeatTicks %d (want ElectionTicks > HeartbeatTicks > 0)",
			ErrInvalid, o.TickInterval, o.ElectionTicks, o.HeartbeatTicks)
	}
	return nil
}

// Node is one member of a cluster: the Raft groups of a coordinator's
// partitions on this node. It owns the node's data directory: the journal
// that holds every group's log, its committer, and the partitions'
// snapshot files; the coordinator's partitions are state machines its
// groups drive.
type Node struct {
	opts      Options
	data      *coordinator.DataDir // the data directory, whose journal the node writes
	observer  coordinator.Observer // the coordinator's, told of journal batches and truncations
	coord     *coordinator.Coordinator
	groups    []*group
	committer *log.Committer // the journal's, once the directory is open
	persister *persister     // the one writer of the journal, once started
	started   atomic.Bool
	stop      chan struct{}
	leaders   *signal.Signal // fires when a group's leader changes
	progress  *signal.Signal // fires on every tick and configuration change
	// truncating allows one drop of the journal's front at a time.
	truncating sync.Mutex

	// Counted for Stats.
	leaderChanges     atomic.Uint64
	snapshotsSent     atomic.Uint64
	snapshotsReceived atomic.Uint64

	memberMu    sync.Mutex
	membership  Membership   // guarded by memberMu: as last logged
	memberKnown bool         // guarded by memberMu: membership was logged once
	memberSet   bool         // guarded by memberMu: membership was stored once
	member      atomic.Int32 // membership, for Ready without a lock

	unreachable map[uint64]bool // owned by ticker: peers last seen unreachable, for the log

	addrMu    sync.Mutex
	addrs     map[uint64]string // guarded by addrMu: where each node serves clients
	wg        sync.WaitGroup
	closeOnce sync.Once
	dataOnce  sync.Once // closes the committer and the data directory
}

// notMemberListener is a Transport that hears the leaders that say this
// node is no member of their partitions (the HTTP transport does).
type notMemberListener interface {
	onNotMember(fn func(partitions []int))
}

// Open opens the data directory dir as a member of a cluster, whose
// partitions are Raft groups over opts.Peers. It opens the directory as a
// coordinator's Open would (coordinator.OpenDataDir: the lock, the meta
// file, the journal's plan; copts configures it), replays the journal
// into its groups' storage, and has the coordinator load its partitions
// as the groups' state machines (coordinator.OpenReplicated); a
// directory refused changes nothing. Then it carries the directory's plan
// out (DataDir.CarryOut: the meta file, the journal's repairs), writes the
// journal itself, through a committer of its own, and starts the groups. It returns once
// the partitions have loaded; they serve writes once their groups have
// elected a leader.
func Open(dir string, copts coordinator.Options, opts Options) (*Node, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if !opts.Join {
		joined, err := joinedBefore(dir)
		if err != nil {
			return nil, err
		}
		opts.Join = joined
	}
	n := &Node{opts: opts, observer: copts.Observer, stop: make(chan struct{}), leaders: signal.New(), progress: signal.New()}
	if nm, ok := opts.Transport.(notMemberListener); ok {
		nm.onNotMember(n.toldNotMember)
	}
	d, err := coordinator.OpenDataDir(dir, copts)
	if err != nil {
		n.shutdown()
		return nil, err
	}
	n.data = d
	// The journal holds the groups' records: their logs come back first,
	// and say which snapshots the partitions need.
	if err := d.Replay(1, n.replay); err != nil {
		n.Close()
		return nil, err
	}
	c, err := coordinator.OpenReplicated(d, n.load)
	if err != nil {
		n.Close()
		return nil, err
	}
	n.coord = c
	if err := d.CarryOut(); err != nil {
		n.Close()
		return nil, err
	}
	var onBatch func(log.BatchInfo)
	if jo, ok := copts.Observer.(coordinator.JournalObserver); ok {
		onBatch = func(b log.BatchInfo) {
			jo.ObserveJournalBatch(b.Calls, b.Partitions, b.Records, b.Bytes, b.Took, b.Err)
		}
	}
	n.committer = log.NewCommitter(d.Journal(), onBatch)
	replicas, err := n.start()
	if err == nil {
		err = c.Start(replicas)
	}
	if err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Check reads the data directory dir of a cluster node as Open does and
// reports what Open would do, changing nothing: it takes no lock and
// writes no file. It replays the journal into the groups' storage as Open
// does, and runs the coordinator's own planning and loading
// (coordinator.CheckReplicated), so its error is Open's. copts.Partitions
// 0 takes the directory's own.
func Check(dir string, copts coordinator.Options) (coordinator.CheckReport, error) {
	n := &Node{stop: make(chan struct{})}
	return coordinator.CheckReplicated(dir, copts, func(d *coordinator.DataDir) (coordinator.LoadFunc, error) {
		n.data = d
		return n.load, d.Replay(1, n.replay)
	})
}

// Coordinator returns the node's coordinator: writes go to the leader of
// their partition (others answer a *coordinator.NotLeaderError), reads
// are linearizable after Coordinator.Barrier.
func (n *Node) Coordinator() *coordinator.Coordinator { return n.coord }

// ID returns the node's id.
func (n *Node) ID() uint64 { return n.opts.ID }

// replay puts a journal record back into its group's storage, while the
// node opens.
func (n *Node) replay(index uint64, e log.Entry) error {
	if parts := n.data.Partitions(); e.Partition >= parts {
		return fmt.Errorf("%w: journal record %d is of partition %d, there are %d", log.ErrCorrupt, index, e.Partition, parts)
	}
	g := n.group(e.Partition)
	at, err := g.replayed.add(index, e)
	if err != nil {
		return err
	}
	g.keeper.add(index, at)
	return nil
}

// group returns partition's group, making the groups up to it.
func (n *Node) group(partition int) *group {
	for len(n.groups) <= partition {
		n.groups = append(n.groups, newGroup(n, len(n.groups)))
	}
	return n.groups[partition]
}

// load has restore restore partition's newest snapshot file that its
// group's log, as replayed, allows, falling back to an older one when one
// is damaged (coordinator.DataDir.LoadSnapshot): the log's first index
// and the last index known committed bound it. The coordinator's loaders
// call it, partitions in parallel, once the journal is replayed; it
// writes nothing.
func (n *Node) load(partition int, restore func(index uint64, content io.Reader) error) (coordinator.SnapshotLoad, error) {
	first, committed, err := n.bounds(partition)
	if err != nil {
		return coordinator.SnapshotLoad{}, err
	}
	return n.data.LoadSnapshot(partition, first, committed, false, restore)
}

// bounds returns what the journal holds of partition's log once
// replayed: the first index of its entries (one past its snapshot) and
// the last index it knew committed, or why the records do not make a log.
// The partitions' loaders call it at once, after replay: it only reads.
func (n *Node) bounds(partition int) (first, committed uint64, err error) {
	if partition >= len(n.groups) {
		return 1, 0, nil // nothing in the journal
	}
	g := n.groups[partition]
	if err := g.replayed.build(g.storage.MemoryStorage, partition); err != nil {
		return 0, 0, err
	}
	first, _ = g.storage.FirstIndex()
	hs, _, _ := g.storage.InitialState()
	return first, hs.GetCommit(), nil
}

// start starts every group, once the coordinator has loaded its
// partitions, and returns their replicas.
func (n *Node) start() ([]coordinator.Replica, error) {
	parts := n.data.Partitions()
	for len(n.groups) < parts {
		n.groups = append(n.groups, newGroup(n, len(n.groups)))
	}
	n.persister = newPersister(n)
	if n.opts.Join {
		if err := markJoined(n.data.Dir()); err != nil {
			return nil, err
		}
	}
	replicas := make([]coordinator.Replica, parts)
	for i, g := range n.groups {
		if err := g.replayed.build(g.storage.MemoryStorage, i); err != nil {
			return nil, err
		}
		g.storage.snaps, g.storage.partition = n.data.Snapshots(i), i
		if err := g.start(n.coord.AppliedIndex(i)); err != nil {
			return nil, err
		}
		replicas[i] = replica{g}
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.persister.run(n.stop)
	}()
	for _, g := range n.groups {
		n.wg.Add(2)
		go func() {
			defer n.wg.Done()
			g.run(n.stop)
		}()
		go func() {
			defer n.wg.Done()
			g.forward(n.stop)
		}()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.ticker()
	}()
	n.checkMembership()
	n.started.Store(true)
	return replicas, nil
}

// Receive hands messages from other nodes to their groups. It never
// blocks: what a group has no room for is dropped, which Raft survives.
func (n *Node) Receive(msgs []Message) {
	if !n.started.Load() {
		return
	}
	for _, m := range msgs {
		if m.Partition < 0 || m.Partition >= len(n.groups) || m.Raft == nil {
			continue
		}
		select {
		case n.groups[m.Partition].inbox <- m.Raft:
		default:
		}
	}
}

// SetAddress records where node id serves clients (host:port); the HTTP
// transport's Handler learns the other nodes' addresses by itself.
func (n *Node) SetAddress(id uint64, addr string) {
	n.addrMu.Lock()
	defer n.addrMu.Unlock()
	if n.addrs == nil {
		n.addrs = make(map[uint64]string)
	}
	n.addrs[id] = addr
}

// Address returns where node id serves clients, if this node knows it.
func (n *Node) Address(id uint64) (string, bool) {
	n.addrMu.Lock()
	defer n.addrMu.Unlock()
	addr, ok := n.addrs[id]
	return addr, ok
}

// Leader returns the node that leads partition as this node knows it, 0
// if none (an election, or a node cut off).
func (n *Node) Leader(partition int) uint64 {
	if !n.started.Load() || partition < 0 || partition >= len(n.groups) {
		return 0
	}
	leader, _ := replica{n.groups[partition]}.Lead()
	return leader
}

// AwaitLeader waits until this node knows a leader of partition other than
// not (0 for any), and returns it.
func (n *Node) AwaitLeader(ctx context.Context, partition int, not uint64) (uint64, error) {
	for {
		changed := n.leaders.Wait()
		if leader := n.Leader(partition); leader != 0 && leader != not {
			return leader, nil
		}
		select {
		case <-changed:
		case <-n.stop:
			return 0, ErrStopped
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// ticker ticks every group's clock.
func (n *Node) ticker() {
	ticks := n.opts.ticks
	if ticks == nil {
		t := time.NewTicker(n.opts.TickInterval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-n.stop:
			return
		case <-ticks:
			n.checkPeers()
			for _, g := range n.groups {
				select {
				case g.tick <- struct{}{}:
				default:
				}
			}
			n.progress.Fire()
		}
	}
}

// Close hands the lead of every group this node leads to another node
// that is up (waiting two election timeouts at most), so that the group
// goes on serving without waiting for an election; then it stops the
// groups, closes the coordinator (which answers what is still waiting
// with coordinator.ErrClosed), and last the journal and the data
// directory.
func (n *Node) Close() error {
	if n.started.Load() {
		n.handOff()
	}
	n.shutdown()
	var errs []error
	if n.coord != nil {
		errs = append(errs, n.coord.Close())
	}
	n.dataOnce.Do(func() {
		if n.committer != nil {
			n.committer.Close()
		}
		if n.data != nil {
			errs = append(errs, n.data.Close())
		}
	})
	return errors.Join(errs...)
}

// handOff asks every group this node leads to hand its lead off, and
// waits until this node knows another leader of each, or for two election
// timeouts.
func (n *Node) handOff() {
	var led []int
	for i, g := range n.groups {
		if n.Leader(i) == n.opts.ID {
			led = append(led, i)
			select {
			case g.handoff <- struct{}{}:
			default:
			}
		}
	}
	timeout := 2 * time.Duration(n.opts.ElectionTicks) * n.opts.TickInterval
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, i := range led {
		if _, err := n.AwaitLeader(ctx, i, n.opts.ID); err != nil {
			return
		}
	}
}

func (n *Node) shutdown() {
	n.closeOnce.Do(func() { close(n.stop) })
	n.wg.Wait()
}

// raftLogger sends raft's messages to slog: its debug and info chatter at
// debug level.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (r raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
