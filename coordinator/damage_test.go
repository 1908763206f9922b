package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/internal/dirhash"
	"github.com/offsetd/offsetd/log"
)

// damageDir is a data directory of 4 partitions, closed cleanly, whose
// journal has several segments and whose partitions each have two
// snapshots, and the state it serves.
type damageDir struct {
	dir   string
	state string
	// oldJournal is a copy of the journal, closed cleanly, from before
	// the second snapshots.
	oldJournal string
}

// damageOptions are the options the damage tests open directories with.
func damageOptions() Options {
	opts := testOptions()
	opts.Partitions = 4
	opts.SegmentSize = 4096
	opts.SnapshotBytes = -1 // only when asked
	return opts
}

// newDamageDir writes rounds of commits of 24 groups, snapshotting after
// the first third and the second, so that the journal holds every record
// since the first snapshots over several segments. skew commits one more
// group first, so that every later index is one higher than in a
// directory made without it.
func newDamageDir(t *testing.T, skew bool) damageDir {
	t.Helper()
	dir := t.TempDir()
	c := mustOpen(t, dir, damageOptions())
	ctx := context.Background()
	oldJournal := filepath.Join(t.TempDir(), "journal")
	if skew {
		if err := c.Commit(ctx, "skew", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 30 {
		for g := range 24 {
			if err := c.Commit(ctx, fmt.Sprintf("g%02d", g), []OffsetCommit{{Topic: "t", Partition: int32(round), Offset: int64(round*100 + g)}}); err != nil {
				t.Fatal(err)
			}
		}
		if round == 9 || round == 19 {
			if err := c.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if round == 14 {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(oldJournal, os.DirFS(JournalDir(dir))); err != nil {
				t.Fatal(err)
			}
			c = mustOpen(t, dir, damageOptions())
		}
	}
	d := damageDir{dir: dir, state: dumpState(t, c), oldJournal: oldJournal}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Open makes no lock file, so the refusals' unchanged trees show that
	// they make none either.
	if _, err := os.Stat(filepath.Join(dir, legacyLockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open made %s: %v", legacyLockFile, err)
	}
	if n := len(journalSegments(t, dir)); n < 5 {
		t.Fatalf("the journal has %d segments; the tests want 5 or more", n)
	}
	return d
}

// journalSegments returns the paths of the journal's segment files, oldest
// first.
func journalSegments(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(JournalDir(dir), strings.Repeat("[0-9]", 20)))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(segs)
	return segs
}

// nextSegmentName is the name wal would give the segment after the last:
// the last one's first wal index plus its entries.
func nextSegmentName(t *testing.T, dir string) string {
	t.Helper()
	segs := journalSegments(t, dir)
	last := segs[len(segs)-1]
	var first uint64
	fmt.Sscanf(filepath.Base(last), "%d", &first)
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(0)
	for pos := 0; pos < len(b); n++ {
		size, w := uvarint(b[pos:])
		pos += w + int(size)
	}
	return fmt.Sprintf("%020d", first+n)
}

// newestSnapshot returns the path of partition i's newest snapshot.
func newestSnapshot(t *testing.T, dir string, i int) string {
	t.Helper()
	list, err := log.ListSnapshots(SnapshotDir(dir, i))
	if err != nil || len(list) == 0 {
		t.Fatalf("partition %d has no snapshot: %v", i, err)
	}
	return log.SnapshotPath(SnapshotDir(dir, i), list[0])
}

// hashTree describes every file and directory under dir (dirhash.Tree).
func hashTree(t testing.TB, dir string) string {
	t.Helper()
	h, err := dirhash.Tree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// TestDamageMatrix damages a data directory in every way the layout can
// be damaged, closed cleanly and after a crash (no clean-close marker,
// nothing in the sync ring). For each, Open either refuses, naming the
// file, and leaves every byte, name and directory as it found them, or
// opens serving every acknowledged commit; Check (what offsetd verify
// runs) gives the same verdict, the same error, and writes nothing.
func TestDamageMatrix(t *testing.T) {
	base := newDamageDir(t, false)
	other := newDamageDir(t, true)
	type damage struct {
		name string
		// do damages dir and returns what the refusal must name; "" if
		// Open must open it.
		do func(t *testing.T, dir string) string
		// cleanOnly: tried closed cleanly only.
		cleanOnly bool
		// opensAfterCrash: refused when closed cleanly, a torn end that
		// Open cuts after a crash.
		opensAfterCrash bool
	}
	damages := []damage{
		{name: "middle segment duplicated as the next one", do: func(t *testing.T, dir string) string {
			segs := journalSegments(t, dir)
			next := filepath.Join(JournalDir(dir), nextSegmentName(t, dir))
			copyFile(t, segs[1], next)
			return filepath.Base(next)
		}},
		{name: "middle segments reordered", do: func(t *testing.T, dir string) string {
			segs := journalSegments(t, dir)
			a, _ := os.ReadFile(segs[1])
			b, _ := os.ReadFile(segs[2])
			os.WriteFile(segs[1], b, 0o640)
			os.WriteFile(segs[2], a, 0o640)
			return filepath.Base(segs[1])
		}},
		{name: "middle segment renamed", do: func(t *testing.T, dir string) string {
			segs := journalSegments(t, dir)
			var index uint64
			fmt.Sscanf(filepath.Base(segs[1]), "%d", &index)
			to := filepath.Join(JournalDir(dir), fmt.Sprintf("%020d", index+1))
			if err := os.Rename(segs[1], to); err != nil {
				t.Fatal(err)
			}
			return filepath.Base(to)
		}},
		{name: "middle segment missing", do: func(t *testing.T, dir string) string {
			segs := journalSegments(t, dir)
			if err := os.Remove(segs[1]); err != nil {
				t.Fatal(err)
			}
			return filepath.Base(segs[2])
		}},
		{name: "segment of another data directory as the next one", do: func(t *testing.T, dir string) string {
			theirs := journalSegments(t, other.dir)
			next := filepath.Join(JournalDir(dir), nextSegmentName(t, dir))
			copyFile(t, theirs[len(theirs)-2], next)
			return filepath.Base(next)
		}},
		{name: "segment of another data directory in place of one", do: func(t *testing.T, dir string) string {
			segs := journalSegments(t, dir)
			theirs := journalSegments(t, other.dir)
			copyFile(t, theirs[2], segs[2])
			return filepath.Base(segs[2])
		}},
		{name: "snapshot moved to another partition", do: func(t *testing.T, dir string) string {
			from, to := 0, 1
			if a, b := newestSnapshot(t, dir, 0), newestSnapshot(t, dir, 1); filepath.Base(a) < filepath.Base(b) {
				from, to = 1, 0
			}
			dst := filepath.Join(SnapshotDir(dir, to), filepath.Base(newestSnapshot(t, dir, from)))
			copyFile(t, newestSnapshot(t, dir, from), dst)
			return dst
		}},
		{name: "snapshot of another data directory", do: func(t *testing.T, dir string) string {
			src := newestSnapshot(t, other.dir, 2)
			dst := filepath.Join(SnapshotDir(dir, 2), filepath.Base(src))
			copyFile(t, src, dst)
			return dst
		}},
		{name: "bit flipped in an older segment", do: func(t *testing.T, dir string) string {
			seg := journalSegments(t, dir)[1]
			damageFile(t, seg, func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b })
			return filepath.Base(seg)
		}},
		{name: "last batch of a middle segment torn", do: func(t *testing.T, dir string) string {
			seg := journalSegments(t, dir)[2]
			damageFile(t, seg, func(b []byte) []byte { return b[:len(b)-3] })
			return filepath.Base(seg)
		}},
		// After a crash an older journal, whole, cannot be told from one
		// whose end a lost device write took: the snapshots ahead of it
		// are removed (see loadSnapshot). After a clean close they are
		// refused.
		{name: "journal replaced by an older copy of itself", cleanOnly: true, do: func(t *testing.T, dir string) string {
			if err := os.RemoveAll(JournalDir(dir)); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(JournalDir(dir), os.DirFS(base.oldJournal)); err != nil {
				t.Fatal(err)
			}
			return newestSnapshot(t, dir, 0)
		}},
		{name: "bytes after the last batch", opensAfterCrash: true, do: func(t *testing.T, dir string) string {
			segs := journalSegments(t, dir)
			damageFile(t, segs[len(segs)-1], func(b []byte) []byte { return append(b, 0x55, 1, 2, 3, 4, 5, 6) })
			return filepath.Base(segs[len(segs)-1])
		}},
		{name: "newest snapshot damaged", do: func(t *testing.T, dir string) string {
			damageFile(t, newestSnapshot(t, dir, 3), func(b []byte) []byte { b[len(b)-20] ^= 0x01; return b })
			return "" // the partition falls back to the one before it
		}},
		{name: "every snapshot of a partition damaged", do: func(t *testing.T, dir string) string {
			list, _ := log.ListSnapshots(SnapshotDir(dir, 3))
			for _, index := range list {
				damageFile(t, log.SnapshotPath(SnapshotDir(dir, 3), index), func(b []byte) []byte { return b[:len(b)-3] })
			}
			return log.SnapshotPath(SnapshotDir(dir, 3), list[len(list)-1])
		}},
		{name: "journal removed", do: func(t *testing.T, dir string) string {
			if err := os.RemoveAll(JournalDir(dir)); err != nil {
				t.Fatal(err)
			}
			return "no journal"
		}},
		{name: "journal emptied", do: func(t *testing.T, dir string) string {
			des, err := os.ReadDir(JournalDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, de := range des {
				if err := os.Remove(filepath.Join(JournalDir(dir), de.Name())); err != nil {
					t.Fatal(err)
				}
			}
			return "no journal"
		}},
		{name: "meta file removed", do: func(t *testing.T, dir string) string {
			if err := os.Remove(filepath.Join(dir, metaFile)); err != nil {
				t.Fatal(err)
			}
			return metaFile
		}},
	}
	for _, clean := range []bool{true, false} {
		state := "closed cleanly"
		if !clean {
			state = "after a crash"
		}
		for _, d := range damages {
			if d.cleanOnly && !clean {
				continue
			}
			t.Run(state+"/"+d.name, func(t *testing.T) {
				dir := t.TempDir()
				if err := os.CopyFS(dir, os.DirFS(base.dir)); err != nil {
					t.Fatal(err)
				}
				if !clean {
					crashJournal(t, dir)
				}
				names := d.do(t, dir)
				if d.opensAfterCrash && !clean {
					names = ""
				}
				before := hashTree(t, dir)
				_, checkErr := Check(dir, damageOptions())
				if after := hashTree(t, dir); after != before {
					t.Fatalf("Check changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
				}
				c, err := Open(dir, damageOptions())
				switch {
				case names == "" && err != nil:
					t.Fatalf("Open refused: %v", err)
				case names == "":
					defer c.Close()
					if got := dumpState(t, c); got != base.state {
						t.Fatalf("state after Open:\n%s\nwant every acknowledged commit:\n%s", got, base.state)
					}
					if checkErr != nil {
						t.Fatalf("Open opened, Check refused: %v", checkErr)
					}
					return
				case err == nil:
					c.Close()
					t.Fatalf("Open opened the directory; want a refusal naming %s", names)
				}
				if !strings.Contains(err.Error(), names) {
					t.Fatalf("Open refused without naming %s: %v", names, err)
				}
				if after := hashTree(t, dir); after != before {
					t.Fatalf("a refused Open changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
				}
				// offsetd serve loads in the background: the partitions
				// that load must not open the directory (and write to it)
				// beside one that fails.
				bg := damageOptions()
				bg.LoadInBackground = true
				if c, err := Open(dir, bg); err == nil {
					if err := c.WaitReady(context.Background()); err == nil || !strings.Contains(err.Error(), names) {
						t.Errorf("WaitReady after Open with LoadInBackground = %v, want a refusal naming %s", err, names)
					}
					c.Close()
				}
				if after := hashTree(t, dir); after != before {
					t.Fatalf("a refused Open with LoadInBackground changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
				}
				if checkErr == nil || checkErr.Error() != err.Error() {
					t.Fatalf("Check's verdict differs from Open's:\n Open: %v\nCheck: %v", err, checkErr)
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open = %v, want ErrCorrupt", err)
				}
			})
		}
	}
}
