package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/log"
)

// partitionState renders everything a partition's snapshot holds: every
// group with its offsets, version and the index it was captured at, the
// static topics, the scopes read globally and the pending transactional
// offsets.
func partitionState(p *partition) string {
	var b strings.Builder
	groups := p.offsets.Groups(nil)
	slices.Sort(groups)
	for _, g := range groups {
		entries, info, at, _ := p.offsets.GroupAt(g, nil)
		fmt.Fprintf(&b, "%s %+v at %d: %+v\n", g, info, at, entries)
	}
	for _, m := range p.mappings.All(nil) {
		fmt.Fprintf(&b, "mapping %s %s %d\n", m.Topic, m.Scope, m.Epoch)
	}
	scopes := p.switches.Scopes(nil)
	slices.Sort(scopes)
	fmt.Fprintf(&b, "global read %v\n", scopes)
	txns := p.txns.copyAll()
	slices.SortFunc(txns, func(a, b txnSnapEntry) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	fmt.Fprintf(&b, "txns %+v\n", txns)
	return b.String()
}

// TestSnapshotIsAStateMachineSeam: a partition writes its snapshot's
// content to any io.Writer and restores it from any io.Reader; its host
// alone deals with files. The content a live partition writes to a plain
// buffer restores, in a partition that never saw a file, to the same
// state; one byte changed in it is refused as damage.
func TestSnapshotIsAStateMachineSeam(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	opts.Partitions = 1
	opts.SnapshotBytes = NoSnapshots
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	commitN(t, c, 30, 3, 0)
	if err := c.DeleteGroup(ctx, "g007"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStaticTopic(ctx, "T", "clusterA", 4, []string{"b1", "b2"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ForceSetGlobalRead(ctx, "clusterA", true); err != nil {
		t.Fatal(err)
	}
	if err := c.TxnCommit(ctx, "g001", 42, 3, -1, []OffsetCommit{{Topic: "t", Partition: 1, Offset: 99}}); err != nil {
		t.Fatal(err)
	}
	src := c.parts[0]
	index := c.d.journal.LastIndex()
	var content bytes.Buffer
	if err := src.writeSnapshot(&content, src.txns.copyAll(), nil); err != nil {
		t.Fatal(err)
	}

	restore := func(b []byte) (*partition, error) {
		p := newPartition(0, opts, signal.New())
		p.resetTables()
		return p, p.restoreSnapshot(index, bytes.NewReader(b))
	}
	dst, err := restore(content.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want, got := partitionState(src), partitionState(dst)
	if !strings.Contains(want, "g001") || !strings.Contains(want, "mapping T") || !strings.Contains(want, "42") {
		t.Fatalf("the source partition lacks what the test wrote:\n%s", want)
	}
	if got != want {
		t.Fatalf("restored partition differs:\n got %s\nwant %s", got, want)
	}

	for _, at := range []int{0, content.Len() / 2, content.Len() - 1} {
		bad := bytes.Clone(content.Bytes())
		bad[at] ^= 0x10
		if _, err := restore(bad); !errors.Is(err, log.ErrCorrupt) {
			t.Fatalf("content with byte %d of %d changed restored: %v", at, len(bad), err)
		}
	}
	if _, err := restore(content.Bytes()[:content.Len()-1]); !errors.Is(err, log.ErrCorrupt) {
		t.Fatalf("content cut short restored: %v", err)
	}
}
