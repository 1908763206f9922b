package log

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// TestModel runs random appends, front truncations, crashes in them,
// reopens and replays against a plain slice, over tiny segments: the log
// must always agree.
func TestModel(t *testing.T) {
	root := t.TempDir()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		dir := filepath.Join(root, strconv.Itoa(runs))
		defer os.RemoveAll(dir)
		opts := Options{
			SegmentSize:  rapid.IntRange(40, 600).Draw(rt, "segmentSize"),
			UnsafeNoSync: true, // durability is the crash tests' business
			Partition:    1,
			Logger:       discardLogger,
		}
		l, err := Open(dir, opts)
		if err != nil {
			rt.Fatalf("Open: %v", err)
		}
		defer func() { l.Close() }()
		// model is every record held, in order; indexes may jump (SkipTo).
		// The log holds every record from first to last: first is where
		// its oldest batch starts, a batch of records or of none.
		var model []record
		first, last := uint64(1), uint64(0)
		held := false // the log holds a batch
		segments := func(rt *rapid.T) []segmentFile {
			st, err := readDirState(dir)
			if err != nil {
				rt.Fatal(err)
			}
			return st.segments
		}
		// firstOf is the first record index of a segment, or for an empty
		// one (only the tail) the index the next record will get.
		firstOf := func(rt *rapid.T, s segmentFile) uint64 {
			f, err := segmentFirstIndex(s)
			if err != nil {
				rt.Fatal(err)
			}
			if f == 0 {
				return last + 1
			}
			return f
		}
		dropBefore := func(front uint64) {
			i := 0
			for i < len(model) && model[i].Index < front {
				i++
			}
			model = model[i:]
			first = front
		}
		replay := func(from uint64) []record {
			var got []record
			if err := l.Replay(from, collect(&got)); err != nil {
				rt.Fatalf("Replay(%d): %v", from, err)
			}
			return got
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				entries := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) Entry {
					return Entry{
						Partition: rapid.IntRange(0, 300).Draw(rt, "partition"),
						Type:      rapid.ByteRange(1, 255).Draw(rt, "type"),
						Payload:   rapid.SliceOfN(rapid.Byte(), 0, 150).Draw(rt, "payload"),
					}
				}), 1, 6).Draw(rt, "entries")
				a, b, err := l.Append(entries)
				if err != nil || a != last+1 || b != last+uint64(len(entries)) {
					rt.Fatalf("Append = %d, %d, %v; want %d-%d", a, b, err, last+1, last+uint64(len(entries)))
				}
				model = append(model, records(a, entries)...)
				if !held {
					first, held = a, true
				}
				last = b
			},
			"skip": func(rt *rapid.T) {
				next := last + 1 + rapid.Uint64Range(0, 1000).Draw(rt, "skip")
				if err := l.SkipTo(next); err != nil {
					rt.Fatalf("SkipTo(%d): %v", next, err)
				}
				if next == last+1 {
					return // already there: SkipTo writes nothing
				}
				if !held {
					first, held = next, true
				}
				last = next - 1
			},
			"truncate front": func(rt *rapid.T) {
				// Only whole segments go: the model keeps what the
				// segment files before the call say stays.
				index := rapid.Uint64Range(first, last+1).Draw(rt, "index")
				segs := segments(rt)
				front := firstOf(rt, segs[0])
				for _, s := range segs[1:] {
					f, err := segmentFirstIndex(s)
					if err != nil {
						rt.Fatal(err)
					}
					if f == 0 || f > index {
						break // the empty tail is never left alone
					}
					front = f
				}
				if err := l.TruncateFront(index); err != nil {
					rt.Fatalf("TruncateFront(%d): %v", index, err)
				}
				if l.FirstIndex() != front {
					rt.Fatalf("TruncateFront(%d): FirstIndex %d, want %d, where the segment holding %d starts", index, l.FirstIndex(), front, index)
				}
				dropBefore(front)
			},
			"reopen": func(rt *rapid.T) {
				if err := l.Close(); err != nil {
					rt.Fatalf("Close: %v", err)
				}
				if l, err = Open(dir, opts); err != nil {
					rt.Fatalf("Open: %v", err)
				}
			},
			"crash in truncate front": func(rt *rapid.T) {
				// The oldest segments removed, the rest not: what a crash
				// part way through TruncateFront leaves.
				// TruncateFront keeps the last segment that holds a batch.
				segs := segments(rt)
				keep := len(segs) - 1
				if f, _ := segmentFirstIndex(segs[keep]); f == 0 {
					keep--
				}
				if keep < 1 {
					rt.Skip("nothing TruncateFront could remove")
				}
				n := rapid.IntRange(1, keep).Draw(rt, "removed")
				front := firstOf(rt, segs[n])
				if err := l.Close(); err != nil {
					rt.Fatalf("Close: %v", err)
				}
				crash(rt, dir)
				for _, s := range segs[:n] {
					if err := os.Remove(s.path); err != nil {
						rt.Fatal(err)
					}
				}
				if l, err = Open(dir, opts); err != nil {
					rt.Fatalf("Open after removing %d of %d segments: %v", n, len(segs), err)
				}
				dropBefore(front)
			},
			"replay": func(rt *rapid.T) {
				from := rapid.Uint64Range(0, last+2).Draw(rt, "from")
				var want []record
				for _, r := range model {
					if r.Index >= from {
						want = append(want, r)
					}
				}
				if got := replay(from); !slices.Equal(got, want) {
					rt.Fatalf("Replay(%d) = %v, want %v", from, clip(got), clip(want))
				}
			},
			"": func(rt *rapid.T) {
				if l.FirstIndex() != first || l.LastIndex() != last {
					rt.Fatalf("FirstIndex %d LastIndex %d, want %d %d", l.FirstIndex(), l.LastIndex(), first, last)
				}
				segs := segments(rt)
				if f := firstOf(rt, segs[0]); f != first {
					rt.Fatalf("oldest segment starts at record %d, FirstIndex is %d", f, first)
				}
				tail := segs[len(segs)-1]
				if fi, err := os.Stat(tail.path); err != nil || tail.index != l.tailStart.Load() || fi.Size() != l.tailSize {
					rt.Fatalf("tail %s (%v), Log thinks %d with %d bytes", tail.name(), err, l.tailStart.Load(), l.tailSize)
				}
			},
		})
		if got := replay(0); !slices.Equal(got, model) {
			rt.Fatalf("final Replay = %v, want %v", clip(got), clip(model))
		}
	})
}
