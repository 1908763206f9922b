package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/cluster/clustertest"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/log"
)

// TestVerifyClusterNodeAgreesWithOpen: verify runs a cluster node's own
// opening (cluster.Check) on its data directory. It finds a sound one
// sound, and refuses, with cluster.Open's own error, one whose frames are
// all sound but whose journal holds a hard state committing past the
// group's log.
func TestVerifyClusterNodeAgreesWithOpen(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	nw := clustertest.NewNetwork(1)
	defer nw.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() (*cluster.Node, error) {
		return cluster.Open(data, coordinator.Options{Partitions: 2, Logger: quiet},
			cluster.Options{ID: 1, Peers: []uint64{1}, Transport: nw.Transport(1), Logger: quiet})
	}
	n, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := range 2 {
		if _, err := n.AwaitLeader(ctx, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Coordinator().Commit(ctx, "g", []coordinator.OffsetCommit{{Topic: "t", Partition: 0, Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCmd(t, nil, "verify", data); code != 0 || !strings.Contains(out, "verify: ok") {
		t.Fatalf("verify of a sound cluster node exited %d:\n%s", code, out)
	}

	// The damage: a hard state of partition 0 that commits index 1000.
	meta, err := os.ReadFile(filepath.Join(data, "offsetd.meta"))
	if err != nil {
		t.Fatal(err)
	}
	var id struct{ ID string }
	if err := json.Unmarshal(meta, &id); err != nil || id.ID == "" {
		t.Fatalf("meta file %s: id %q, %v", meta, id.ID, err)
	}
	lopts := log.DefaultOptions()
	lopts.JournalID = id.ID
	l, err := log.Open(coordinator.JournalDir(data), lopts)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := proto.Marshal(&pb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(1000))})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append([]log.Entry{{Partition: 0, Type: 33, Payload: hs}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCmd(t, nil, "verify", data)
	if n, err := open(); err == nil {
		n.Close()
		t.Fatalf("cluster.Open opened the damaged directory; verify exited %d:\n%s", code, out)
	} else if code != 1 || !strings.Contains(out, "refuses to open") || !strings.Contains(out, err.Error()) {
		t.Fatalf("cluster.Open refused (%v); verify exited %d:\n%s", err, code, out)
	}
}
