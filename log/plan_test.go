package log

import (
	"math"
	"os"
	"testing"
)

// TestPlanReplay: a plan replays, from any index, exactly the records the
// log holds once the plan is carried out, writing nothing: after a clean
// close, with a torn end to cut, and with batches to restore from the
// sync ring that the last segment lost.
func TestPlanReplay(t *testing.T) {
	opts := testOptions(t, 1000)
	base := t.TempDir()
	l := mustOpen(t, base, opts)
	var want []record
	// Batches of 3 records, until the last segment holds 3 or more.
	for i := 0; i < 40 || tailBatches(t, base) < 3; i++ {
		want = append(want, mustAppendBatch(t, l, testEntries(i*3, 3))...)
	}
	// A copy of the open journal is what a crash that kept the page cache
	// leaves: no clean-close marker, the ring's lap over the last segment.
	crashed := t.TempDir()
	copyDir(t, base, crashed)
	mustClose(t, l)
	if len(segmentFiles(t, base)) < 3 {
		t.Fatalf("%d segments; the test wants 3 or more", len(segmentFiles(t, base)))
	}

	torn := t.TempDir()
	copyDir(t, base, torn)
	crash(t, torn)
	segs := segmentFiles(t, torn)
	last := segs[len(segs)-1].path
	if err := os.WriteFile(last, append(mustReadFile(t, last), 9, 9, 9), 0o640); err != nil {
		t.Fatal(err)
	}

	lost := t.TempDir()
	copyDir(t, crashed, lost)
	segs = segmentFiles(t, lost)
	last = segs[len(segs)-1].path
	b := mustReadFile(t, last)
	end, _ := scanEntries(b, segs[len(segs)-1].index, -1, 0, 0, 0, segs[len(segs)-1].index, nil)
	if err := os.WriteFile(last, b[:end.end], 0o640); err != nil { // it keeps its first batch
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		dir     string
		restore bool
	}{{"closed cleanly", base, false}, {"torn end", torn, false}, {"batches the ring restores", lost, true}} {
		t.Run(tc.name, func(t *testing.T) {
			before := hashDir(t, tc.dir)
			p, err := PlanOpen(tc.dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Report().RingBatches > 0; got != tc.restore {
				t.Fatalf("plan restores from the ring: %v, want %v", got, tc.restore)
			}
			n := uint64(len(want))
			for _, from := range []uint64{1, 50, 61, n - 4, n - 1, n, n + 1} {
				var got []record
				if err := p.Replay(from, collect(&got)); err != nil {
					t.Fatal(err)
				}
				checkRecords(t, "Plan.Replay", got, want[min(from, n+1)-1:])
			}
			if hashDir(t, tc.dir) != before {
				t.Fatal("planning and replaying a plan changed the directory")
			}
			l, err := p.Open()
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, "Replay after Open", replayAll(t, l, 1), want)
			mustClose(t, l)
		})
	}
}

// tailBatches counts the batches of dir's last segment.
func tailBatches(t *testing.T, dir string) int {
	t.Helper()
	segs := segmentFiles(t, dir)
	s := segs[len(segs)-1]
	res, _ := scanEntries(mustReadFile(t, s.path), s.index, -1, 0, 0, 0, math.MaxUint64, nil)
	return res.entries
}
