package kafka

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/internal/powercut"
)

// Heartbeats of a group keep their pace while the same group commits at
// full speed on a slow disk: no heartbeat waits for a sync. Each round
// heartbeats the busy group and an idle one from the same client, in
// turn, so that both see the same machine; the busy group's p99 must stay
// within twice the idle group's. Before group state came off the durable
// path, a heartbeat waited behind every commit of its group that held the
// group's lock across its sync.
func TestHeartbeatPaceOnSlowDisk(t *testing.T) {
	if err := powercut.Available(); err != nil {
		t.Skip(err)
	}
	const (
		syncDelay  = 10 * time.Millisecond
		committers = 8
		rounds     = 2000
	)
	backing, mnt := filepath.Join(t.TempDir(), "backing"), filepath.Join(t.TempDir(), "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := powercut.Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fs.Unmount(); err != nil {
			t.Error(err)
		}
	})
	c := openCoordinator(t, mnt)
	h := newHandler(t, c, testHandlerOptions())
	addr := listen(t, h, ServerOptions{})
	gc := groupClient{t, h}
	type joined struct {
		member     string
		generation int32
	}
	join := func(group string) joined {
		j := gc.join(group, time.Minute, time.Minute)
		wantCode(t, "join "+group, j.ErrorCode, nil)
		wantCode(t, "sync "+group, gc.sync(group, j.MemberID, j.Generation, nil).ErrorCode, nil)
		return joined{j.MemberID, j.Generation}
	}
	busy, idle := join("busy"), join("idle")
	fs.SetSyncDelay(syncDelay)

	ctx := testContext(t)
	client := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	stop := make(chan struct{})
	var commits atomic.Int64
	var slowest atomic.Int64 // the slowest commit, in nanoseconds
	var wg sync.WaitGroup
	for i := range committers {
		cl := client() // its own connection: a server answers a connection's requests in turn
		wg.Add(1)
		go func() {
			defer wg.Done()
			for offset := int64(1); ; offset++ {
				select {
				case <-stop:
					return
				default:
				}
				req := commitRequest("busy")
				req.Version = 9
				req.MemberID, req.Generation = busy.member, busy.generation
				req.Topics[0].Partitions[0].Partition = int32(i)
				req.Topics[0].Partitions[0].Offset = offset
				start := time.Now()
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					t.Errorf("commit: %v", err)
					return
				}
				if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
					t.Errorf("commit: code %d", c)
					return
				}
				took := int64(time.Since(start))
				for s := slowest.Load(); took > s && !slowest.CompareAndSwap(s, took); s = slowest.Load() {
				}
				commits.Add(1)
			}
		}()
	}

	hb := client()
	beat := func(group string, j joined) time.Duration {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = group, j.member, j.generation
		start := time.Now()
		resp, err := req.RequestWith(ctx, hb)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("heartbeat %s: %v", group, err)
		}
		wantCode(t, "heartbeat "+group, resp.ErrorCode, nil)
		return took
	}
	beat("idle", idle) // the connection and the coordinator's address, outside the figures
	before := commits.Load()
	var busyTook, idleTook []time.Duration
	for i := range rounds {
		if i%2 == 0 {
			busyTook = append(busyTook, beat("busy", busy))
			idleTook = append(idleTook, beat("idle", idle))
		} else {
			idleTook = append(idleTook, beat("idle", idle))
			busyTook = append(busyTook, beat("busy", busy))
		}
	}
	during := commits.Load() - before
	close(stop)
	wg.Wait()

	p99 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)*99/100]
	}
	busyP99, idleP99 := p99(busyTook), p99(idleTook)
	t.Logf("heartbeat p99: busy group %v, idle group %v (%.2fx); %d commits of the busy group meanwhile, slowest %v; sync delay %v",
		busyP99, idleP99, float64(busyP99)/float64(idleP99), during, time.Duration(slowest.Load()), syncDelay)
	if during < committers {
		t.Fatalf("only %d commits while heartbeats were measured: the group was not busy", during)
	}
	if time.Duration(slowest.Load()) < syncDelay {
		t.Fatalf("the slowest commit took %v, below the sync delay %v: the disk was not slow", time.Duration(slowest.Load()), syncDelay)
	}
	if busyP99 > 2*idleP99 {
		t.Errorf("heartbeat p99 of the committing group %v is above twice the idle group's %v", busyP99, idleP99)
	}
}
