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
	hs, err := proto.Marshal(&pb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(1000))})
	if err != nil {
		t.Fatal(err)
	}
	err = openDamaged(t, log.Entry{Partition: 0, Type: 33, Payload: hs})
	if !errors.Is(err, log.ErrCorrupt) || !strings.Contains(err.Error(), "partition 0") || !strings.Contains(err.Error(), "commits 1000") {
		t.Fatalf("Open: %v, want log.ErrCorrupt naming partition 0 and its commit index", err)
	}
}

// TestOpenRefusesRecordOfUnknownPartition damages a node's journal with a
// raft hard state of partition 5 in a directory of 2: the node refuses it
// as it replays the journal, before anything is written.
func TestOpenRefusesRecordOfUnknownPartition(t *testing.T) {
	hs, err := proto.Marshal(&pb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(0))})
	if err != nil {
		t.Fatal(err)
	}
	err = openDamaged(t, log.Entry{Partition: 5, Type: 33, Payload: hs})
	if !errors.Is(err, log.ErrCorrupt) || !strings.Contains(err.Error(), "partition 5, there are 2") {
		t.Fatalf("Open: %v, want log.ErrCorrupt naming partition 5 of 2", err)
	}
}

// openDamaged runs a one-node cluster of two partitions, commits, stops
// it, appends damage to its journal by hand, and opens it again: Open must
// fail and leave the journal as it was, and Check, which verify runs,
// must refuse it with Open's error (and find the directory sound before
// the damage). It returns Open's error.
func openDamaged(t *testing.T, damage log.Entry) error {
	t.Helper()
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
	copts := coordinator.Options{Partitions: 2, Logger: quiet}
	if _, err := cluster.Check(dir, copts); err != nil {
		t.Fatalf("Check before the damage: %v", err)
	}
	opts := log.DefaultOptions()
	opts.JournalID = id.ID
	l, err := log.Open(journal, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append([]log.Entry{damage}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before := journalFiles(t, journal)
	_, checkErr := cluster.Check(dir, copts)
	n, err := cluster.Open(dir, copts, cluster.Options{ID: 1, Peers: []uint64{1}, Transport: tc.nw.Transport(1), Logger: quiet})
	if err == nil {
		n.Close()
		t.Fatal("Open succeeded on a damaged journal")
	}
	if checkErr == nil || checkErr.Error() != err.Error() {
		t.Fatalf("Check: %v\nOpen:  %v\nwant Open's refusal", checkErr, err)
	}
	if after := journalFiles(t, journal); !slices.Equal(before, after) {
		t.Fatalf("the refused open changed the journal:\nbefore %v\nafter  %v", before, after)
	}
	return err
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
