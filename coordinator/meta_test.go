package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/partitioner"
)

// metaDataDir returns a data directory of 4 partitions holding 40 groups.
func metaDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 4
	c := mustOpen(t, dir, opts)
	for i := range 40 {
		if err := c.Commit(context.Background(), fmt.Sprintf("g%d", i), []OffsetCommit{{Topic: "t", Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMetaDamage damages the meta file of a directory that holds data in
// every way a disk or a person can: Open refuses, naming the problem, with
// any partition count, and ReadPartitions (which tools use) agrees.
func TestMetaDamage(t *testing.T) {
	valid := func(m meta) func([]byte) []byte {
		return func([]byte) []byte { return m.encode() }
	}
	good := meta{Version: metaVersion, Format: dataFormat, Partitions: 4, Hash: partitioner.Hash}
	otherHash, otherFormat, newer := good, good, good
	otherHash.Hash = "fnv1a"
	otherFormat.Format = formatTxn + 1
	newer.Version = metaVersion + 1
	cases := []struct {
		name   string
		damage func(b []byte) []byte // nil removes the file
		want   error
		says   string
	}{
		{"missing", nil, ErrCorrupt, "missing"},
		{"a digit flipped", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"partitions":4`, `"partitions":6`, 1))
		}, ErrCorrupt, "checksum"},
		{"checksum flipped", func(b []byte) []byte {
			var m meta
			if err := json.Unmarshal(b, &m); err != nil {
				panic(err)
			}
			m.Checksum ^= 1
			out, _ := json.Marshal(m)
			return out
		}, ErrCorrupt, "checksum"},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, ErrCorrupt, "does not parse"},
		{"empty", func([]byte) []byte { return nil }, ErrCorrupt, "does not parse"},
		{"unknown field", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `{`, `{"x":1,`, 1))
		}, ErrCorrupt, "does not parse"},
		{"another hash", valid(otherHash), ErrHashMismatch, "fnv1a"},
		{"another data format", valid(otherFormat), ErrFormat, "format"},
		{"a newer meta version", valid(newer), ErrFormat, "version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := metaDataDir(t)
			path := filepath.Join(dir, metaFile)
			if tc.damage == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, tc.damage(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.ReadFile(path)
			for _, n := range []int{0, 4, 16} {
				opts := testOptions()
				opts.Partitions = n
				c, err := Open(dir, opts)
				if err == nil {
					c.Close()
				}
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Open with %d partitions = %v, want %v saying %q", n, err, tc.want, tc.says)
				}
			}
			if _, err := ReadPartitions(dir); !errors.Is(err, tc.want) {
				t.Fatalf("ReadPartitions = %v, want %v", err, tc.want)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Fatalf("a refused Open changed the meta file to %q", after)
			}
		})
	}
}

// TestMetaVersion1 opens a directory of the previous release, whose meta
// file has the version 1 encoding (no version, no checksum): it opens with
// its own partition count and serves everything, and the file is
// rewritten in the current version. A version 1 file that claims fewer
// partitions than there are directories refuses to open; one over a
// directory that holds a journal and no partition logs too (converting it
// would drop the journal).
func TestMetaVersion1(t *testing.T) {
	fixture := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS("testdata/format1/data")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := fixture(t)
	path := filepath.Join(dir, metaFile)
	opts := testOptions()
	opts.Partitions = 0 // the directory's own
	c := mustOpen(t, dir, opts)
	if c.Partitions() != 4 {
		t.Fatalf("opened with %d partitions, want 4", c.Partitions())
	}
	if o, ok, err := c.Fetch("group-00", "late", 0); err != nil || !ok || o.Offset != 0 {
		t.Fatalf("group-00 after the upgrade: %+v %v %v", o, ok, err)
	}
	c.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, legacy, err := decodeMeta(path, b)
	if err != nil || legacy || m.Version != metaVersion || m.Partitions != 4 || m.Format != dataFormat {
		t.Fatalf("meta file after Open: %s (%+v legacy=%v %v)", b, m, legacy, err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary meta file left: %v", err)
	}

	t.Run("over more partitions", func(t *testing.T) {
		dir := fixture(t)
		if err := os.WriteFile(filepath.Join(dir, metaFile), fmt.Appendf(nil, `{"format":1,"partitions":2,"hash":%q}`+"\n", partitioner.Hash), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, testOptions()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "p0003 exists") {
			t.Fatalf("Open = %v, want ErrCorrupt saying p0003 exists", err)
		}
	})
	t.Run("over a journal", func(t *testing.T) {
		dir := metaDataDir(t)
		if err := os.WriteFile(filepath.Join(dir, metaFile), fmt.Appendf(nil, `{"format":1,"partitions":4,"hash":%q}`+"\n", partitioner.Hash), 0o644); err != nil {
			t.Fatal(err)
		}
		opts := testOptions()
		opts.Partitions = 0
		if _, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want ErrCorrupt", err)
		}
		if _, err := os.Stat(JournalDir(dir)); err != nil {
			t.Fatalf("the refused Open touched the journal: %v", err)
		}
	})
}

// TestMetaOfNewDirectory: a directory that holds nothing but a lock (Open
// stopped before writing the meta file) is new, not damaged.
func TestMetaOfNewDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "LOCK"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPartitions(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadPartitions of a new directory = %v, want ErrNotExist", err)
	}
	opts := testOptions()
	opts.Partitions = 0
	c := mustOpen(t, dir, opts)
	defer c.Close()
	if c.Partitions() != DefaultOptions().Partitions {
		t.Fatalf("new directory opened with %d partitions, want the default", c.Partitions())
	}
}
