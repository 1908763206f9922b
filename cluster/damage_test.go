package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/log"
)

// TestOpenRefusesHardStateAheadOfLog damages a node's journal so that a
// group's hard state commits an index past the end of its log (a record of
// type 33 appended by hand): Open fails, naming the partition and what is
// wrong, and leaves the journal as it was.
func TestOpenRefusesHardStateAheadOfLog(t *testing.T) {
	tc := newTestCluster(t, 1, 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for p := range 2 {
		if _, err := tc.node(1).AwaitLeader(ctx, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.commit(ctx, "g", 7); err != nil {
		t.Fatal(err)
	}
	tc.stop(1)
	dir := filepath.Join(tc.dir, "1")
	journal := coordinator.JournalDir(dir)
	// The journal's batches carry the data directory's id (its meta file's).
	meta, err := os.ReadFile(filepath.Join(dir, "offsetd.meta"))
	if err != nil {
		t.Fatal(err)
	}
	var id struct{ ID string }
	if err := json.Unmarshal(meta, &id); err != nil || id.ID == "" {
		t.Fatalf("meta file %s: id %q, %v", meta, id.ID, err)
	}
	opts := log.DefaultOptions()
	opts.JournalID = id.ID
	l, err := log.Open(journal, opts)
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
	before := journalFiles(t, journal)
	_, err = cluster.Open(dir, coordinator.Options{Partitions: 2, Logger: quiet},
		cluster.Options{ID: 1, Peers: []uint64{1}, Transport: tc.nw.Transport(1), Logger: quiet})
	if err == nil {
		t.Fatal("Open succeeded on a journal whose hard state commits past its log")
	}
	if !errors.Is(err, log.ErrCorrupt) || !strings.Contains(err.Error(), "partition 0") || !strings.Contains(err.Error(), "commits 1000") {
		t.Fatalf("Open: %v, want log.ErrCorrupt naming partition 0 and its commit index", err)
	}
	if after := journalFiles(t, journal); !slices.Equal(before, after) {
		t.Fatalf("the refused open changed the journal:\nbefore %v\nafter  %v", before, after)
	}
}

// journalFiles lists a journal's files with their sizes.
func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d", e.Name(), info.Size()))
	}
	return out
}
