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
		var model []record
		first := uint64(1) // index of model[0]
		last := func() uint64 { return first + uint64(len(model)) - 1 }
		segments := func(rt *rapid.T) []segmentFile {
			st, err := readDirState(dir)
			if err != nil {
				rt.Fatal(err)
			}
			return st.segments
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
						Type:    rapid.ByteRange(1, 255).Draw(rt, "type"),
						Payload: rapid.SliceOfN(rapid.Byte(), 0, 150).Draw(rt, "payload"),
					}
				}), 1, 6).Draw(rt, "entries")
				a, b, err := l.Append(entries)
				if err != nil || a != last()+1 || b != last()+uint64(len(entries)) {
					rt.Fatalf("Append = %d, %d, %v; want %d-%d", a, b, err, last()+1, last()+uint64(len(entries)))
				}
				model = append(model, records(a, entries)...)
			},
			"truncate front": func(rt *rapid.T) {
				// Only whole segments go: the model keeps what the
				// segment files before the call say stays.
				index := rapid.Uint64Range(first, last()+1).Draw(rt, "index")
				front := segmentHolding(segments(rt), index)
				if err := l.TruncateFront(index); err != nil {
					rt.Fatalf("TruncateFront(%d): %v", index, err)
				}
				if l.FirstIndex() != front {
					rt.Fatalf("TruncateFront(%d): FirstIndex %d, want %d, where the segment holding %d starts", index, l.FirstIndex(), front, index)
				}
				model = model[front-first:]
				first = front
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
				segs := segments(rt)
				if len(segs) < 2 {
					rt.Skip("one segment")
				}
				n := rapid.IntRange(1, len(segs)-1).Draw(rt, "removed")
				if err := l.Close(); err != nil {
					rt.Fatalf("Close: %v", err)
				}
				for _, s := range segs[:n] {
					if err := os.Remove(s.path); err != nil {
						rt.Fatal(err)
					}
				}
				if l, err = Open(dir, opts); err != nil {
					rt.Fatalf("Open after removing %d of %d segments: %v", n, len(segs), err)
				}
				model = model[segs[n].index-first:]
				first = segs[n].index
			},
			"replay": func(rt *rapid.T) {
				from := rapid.Uint64Range(0, last()+2).Draw(rt, "from")
				want := model[min(max(from, first)-first, uint64(len(model))):]
				if got := replay(from); !slices.Equal(got, want) {
					rt.Fatalf("Replay(%d) = %v, want %v", from, clip(got), clip(want))
				}
			},
			"": func(rt *rapid.T) {
				if l.FirstIndex() != first || l.LastIndex() != last() {
					rt.Fatalf("FirstIndex %d LastIndex %d, want %d %d", l.FirstIndex(), l.LastIndex(), first, last())
				}
				segs := segments(rt)
				if segs[0].index != first {
					rt.Fatalf("oldest segment starts at %d, FirstIndex is %d", segs[0].index, first)
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
