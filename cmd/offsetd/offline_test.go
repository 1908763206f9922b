package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/partitioner"
)

// fillDataDir serves a fresh data directory, writes three commits of
// group g, a static topic and a switch into it, and stops the server.
func fillDataDir(t *testing.T) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	s := startServe(t, []string{"serve", "-data", data, "-listen", "127.0.0.1:0", "-partitions", "4"}, nil)
	env := map[string]string{"OFFSETD_ADDR": s.url}
	for _, off := range []string{"1", "2", "3"} {
		mustRun(t, 0, env, "commit", "g", "t", "0", off)
	}
	mustRun(t, 0, env, "static", "create", "-scope", "c1", "-queues", "2", "-brokers", "b1", "T")
	mustRun(t, 0, env, "global-read", "c1", "on")
	if out := mustRun(t, 0, nil, "verify", data); !strings.Contains(out, "a server has") {
		t.Fatalf("verify of a directory in use says nothing of it:\n%s", out)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.stderr)
	}
	return data
}

// firstSegment returns the journal's first segment file.
func firstSegment(data string) string {
	return filepath.Join(coordinator.JournalDir(data), "00000000000000000001")
}

func TestVerifyAndDump(t *testing.T) {
	data := fillDataDir(t)
	out := mustRun(t, 0, nil, "verify", data)
	for _, want := range []string{"format 2, 4 partitions", "5 batches, 5 records (indexes 1-5)", "closed cleanly", "commit 3", "mapping 1", "global_read 1", "verify: ok"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify lacks %q:\n%s", want, out)
		}
	}

	out = mustRun(t, 0, nil, "dump", data)
	types := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var line struct {
			Partition int               `json:"partition"`
			Index     uint64            `json:"index"`
			Type      string            `json:"type"`
			Bytes     int               `json:"bytes"`
			Group     string            `json:"group"`
			Offsets   []json.RawMessage `json:"offsets"`
			Scope     string            `json:"scope"`
			Enabled   *bool             `json:"enabled"`
			Mapping   json.RawMessage   `json:"mapping"`
			Error     string            `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("dump line %q: %v", sc.Text(), err)
		}
		types[line.Type]++
		switch {
		case line.Error != "" || line.Bytes == 0:
			t.Fatalf("line %s: not decoded", sc.Text())
		case line.Type == "mapping" && !strings.Contains(string(line.Mapping), `"topic":"T"`):
			t.Fatalf("mapping line %s", sc.Text())
		case line.Type == "commit" && (line.Group != "g" || len(line.Offsets) != 1):
			t.Fatalf("commit line %s", sc.Text())
		case line.Type == "global_read" && (line.Scope != "c1" || line.Enabled == nil || !*line.Enabled):
			t.Fatalf("global read line %s", sc.Text())
		}
	}
	if types["commit"] != 3 || types["mapping"] != 1 || types["global_read"] != 1 || len(types) != 3 {
		t.Fatalf("dump types %v", types)
	}
	p, _ := partitioner.New(4)
	only := mustRun(t, 0, nil, "dump", "-partition", strconv.Itoa(p.Group("g")), data)
	if n := strings.Count(only, "\n"); n != 3 {
		t.Fatalf("dump of g's partition has %d lines:\n%s", n, only)
	}
	mustRun(t, 2, nil, "dump", "-partition", "4", data)
	mustRun(t, 2, nil, "verify")
	mustRun(t, 1, nil, "verify", t.TempDir())
}

// After a clean close, bytes past the end are damage; after a crash they
// are a torn tail, reported but no damage (offsetd cuts it on open); a
// flipped byte in batches the sync ring holds is what a crash can leave
// (offsetd restores them on open); before what it holds it is damage,
// named by segment and index.
func TestVerifyFindsDamage(t *testing.T) {
	data := fillDataDir(t)
	seg := firstSegment(data)
	f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 20)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := mustRun(t, 1, nil, "verify", data)
	if !strings.Contains(out, "DAMAGED") || !strings.Contains(out, "closed cleanly") {
		t.Fatalf("verify of bytes past the end of a cleanly closed journal:\n%s", out)
	}
	// What a crash leaves: no clean-close marker.
	if err := os.Remove(filepath.Join(coordinator.JournalDir(data), "CLEAN")); err != nil {
		t.Fatal(err)
	}
	out = mustRun(t, 0, nil, "verify", data)
	if !strings.Contains(out, "torn tail: 20 bytes") {
		t.Fatalf("verify of a torn tail:\n%s", out)
	}

	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[5] ^= 0xff // inside the first entry's payload
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The sync ring still holds every batch since the segment was last
	// synced: after a crash the damage may be pages the segment lost.
	out = mustRun(t, 0, nil, "verify", data)
	if !strings.Contains(out, "the sync ring holds 5 batches") {
		t.Fatalf("verify of damage the sync ring covers:\n%s", out)
	}
	// Without the ring's copies, it is damage.
	ring, err := os.OpenFile(filepath.Join(coordinator.JournalDir(data), "RING"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.WriteAt(make([]byte, 64), 0); err != nil {
		t.Fatal(err)
	}
	ring.Close()
	out = mustRun(t, 1, nil, "verify", data)
	for _, want := range []string{"DAMAGED", "00000000000000000001", "batch 1", "offsetd refuses to open this directory, and changes nothing in it"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify of a damaged segment lacks %q:\n%s", want, out)
		}
	}
	mustRun(t, 1, nil, "dump", data)
}

// Snapshot files are checked and dumped too; a damaged one that serve
// passes over is reported, and the verdict is serve's.
func TestVerifySnapshots(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	opts := coordinator.DefaultOptions()
	opts.Partitions = 1
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := coordinator.Open(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	commit := func(off int64) {
		if err := c.Commit(ctx, "g", []coordinator.OffsetCommit{{Topic: "t", Offset: off, LeaderEpoch: -1}}); err != nil {
			t.Fatal(err)
		}
	}
	commit(1)
	commit(2)
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	commit(3)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	out := mustRun(t, 0, nil, "verify", data)
	snap := "snap." + strings.Repeat("0", 19) + "2"
	for _, want := range []string{"commit 3", "snapshot " + snap + ": state as of index 2, 2 records", "snapshot_groups 1, snapshot_sizes 1", "verify: ok"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, 0, nil, "dump", "-snapshots", data)
	if !strings.Contains(out, `"snapshot":2,"typeCode":8,`) || !strings.Contains(out, `"type":"snapshot_groups","group":"g"`) ||
		!strings.Contains(out, `"type":"snapshot_sizes"`) || strings.Count(out, "\n") != 5 {
		t.Fatalf("dump -snapshots:\n%s", out)
	}

	path := filepath.Join(coordinator.SnapshotDir(data, 0), snap)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The journal still holds every record: serve passes the snapshot
	// over and opens, and verify says so.
	out = mustRun(t, 0, nil, "verify", data)
	if !strings.Contains(out, "DAMAGED") || !strings.Contains(out, snap) || !strings.Contains(out, "opens this directory, passing over 1 damaged snapshot") {
		t.Fatalf("verify of a damaged snapshot:\n%s", out)
	}
}

// A meta file that is missing, damaged or of another hash is named for what
// it is; verify exits 1 (as serve refuses the directory) and still checks
// the partitions it finds on disk.
func TestVerifyChecksMeta(t *testing.T) {
	data := fillDataDir(t)
	meta := filepath.Join(data, "offsetd.meta")
	good, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		content []byte // nil removes the file
		says    []string
	}{
		{"missing", nil, []string{"META", "missing", "4 partitions found on disk", "verify: 1 problem found"}},
		{"a digit flipped", []byte(strings.Replace(string(good), `"partitions":4`, `"partitions":6`, 1)), []string{"META", "checksum", "4 partitions found on disk"}},
		{"another hash", []byte(`{"format":1,"partitions":4,"hash":"fnv1a"}` + "\n"), []string{"META", "hash mismatch", "fnv1a"}},
		{"another format", []byte(`{"format":9,"partitions":4,"hash":"x"}` + "\n"), []string{"META", "unsupported data format", "format 9"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.content == nil {
				os.Remove(meta)
			} else if err := os.WriteFile(meta, tc.content, 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(meta, good, 0o644)
			out := mustRun(t, 1, nil, "verify", data)
			for _, want := range tc.says {
				if !strings.Contains(out, want) {
					t.Fatalf("verify lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "partition count mismatch") {
				t.Fatalf("verify calls it a partition count mismatch:\n%s", out)
			}
			mustRun(t, 1, nil, "serve", "-data", data, "-listen", "127.0.0.1:0")
		})
	}
	mustRun(t, 0, nil, "verify", data)
}

// verifyDataDir writes a data directory of 4 partitions whose journal has
// several segments and whose partitions have snapshots, closed cleanly.
func verifyDataDir(t *testing.T) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	opts := coordinator.DefaultOptions()
	opts.Partitions = 4
	opts.SegmentSize = 4096
	opts.SnapshotBytes = -1
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := coordinator.Open(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		for g := range 24 {
			if err := c.Commit(t.Context(), "g"+strconv.Itoa(g), []coordinator.OffsetCommit{{Topic: "t", Offset: int64(round), LeaderEpoch: -1}}); err != nil {
				t.Fatal(err)
			}
		}
		if round == 5 {
			if err := c.Snapshot(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestVerifyAgreesWithOpen: over damaged directories, closed cleanly and
// after a crash, verify exits 0 exactly when serve's Open opens the
// directory, and when Open refuses, verify prints Open's own error.
func TestVerifyAgreesWithOpen(t *testing.T) {
	base := verifyDataDir(t)
	segments := func(data string) []string {
		segs, _ := filepath.Glob(filepath.Join(coordinator.JournalDir(data), strings.Repeat("[0-9]", 20)))
		return segs
	}
	damages := map[string]func(t *testing.T, data string){
		"none": func(*testing.T, string) {},
		"middle segment renamed": func(t *testing.T, data string) {
			s := segments(data)[1]
			if err := os.Rename(s, s[:len(s)-1]+"9"); err != nil {
				t.Fatal(err)
			}
		},
		"middle segment duplicated": func(t *testing.T, data string) {
			s := segments(data)
			b, _ := os.ReadFile(s[1])
			if err := os.WriteFile(filepath.Join(coordinator.JournalDir(data), "00000000000000999999"), b, 0o640); err != nil {
				t.Fatal(err)
			}
		},
		"bytes after the end": func(t *testing.T, data string) {
			s := segments(data)
			f, err := os.OpenFile(s[len(s)-1], os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{9, 9, 9})
			f.Close()
		},
		"snapshot moved to another partition": func(t *testing.T, data string) {
			for i := range 4 {
				list, _ := os.ReadDir(coordinator.SnapshotDir(data, i))
				if len(list) == 0 {
					continue
				}
				b, _ := os.ReadFile(filepath.Join(coordinator.SnapshotDir(data, i), list[0].Name()))
				to := coordinator.SnapshotDir(data, (i+1)%4)
				if err := os.WriteFile(filepath.Join(to, list[0].Name()), b, 0o640); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Fatal("no snapshot")
		},
	}
	for name, damage := range damages {
		for _, crashed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/crashed=%v", name, crashed), func(t *testing.T) {
				data := filepath.Join(t.TempDir(), "data")
				if err := os.CopyFS(data, os.DirFS(base)); err != nil {
					t.Fatal(err)
				}
				if crashed {
					if err := os.Remove(filepath.Join(coordinator.JournalDir(data), "CLEAN")); err != nil {
						t.Fatal(err)
					}
				}
				damage(t, data)
				code, out, _ := runCmd(t, nil, "verify", data)
				opts := coordinator.DefaultOptions()
				opts.Partitions = 0
				opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
				c, err := coordinator.Open(data, opts)
				if err == nil {
					c.Close()
				}
				switch {
				case err == nil && code != 0:
					t.Fatalf("Open opened the directory; verify exited %d:\n%s", code, out)
				case err != nil && code != 1:
					t.Fatalf("Open refused (%v); verify exited %d:\n%s", err, code, out)
				case err != nil && !strings.Contains(out, err.Error()):
					t.Fatalf("verify does not print Open's refusal %q:\n%s", err, out)
				}
			})
		}
	}
}

// TestVerifyNotADataDirectory: a directory of other files is named for
// what it is, without a listing of its files or advice to restore one.
func TestVerifyNotADataDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"notes.txt", "photo.jpg", "src"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{"verify", "dump"} {
		code, out, errs := runCmd(t, nil, cmd, dir)
		all := out + errs
		if code == 0 || !strings.Contains(all, "not an offsetd data directory") || strings.Contains(all, "notes.txt") || strings.Contains(all, "restore") {
			t.Fatalf("offsetd %s of a directory of other files: exit %d:\n%s", cmd, code, all)
		}
	}
	if _, err := coordinator.Open(dir, coordinator.DefaultOptions()); !errors.Is(err, coordinator.ErrNotDataDir) {
		t.Fatalf("Open of a directory of other files = %v, want ErrNotDataDir", err)
	}
	for _, name := range []string{"offsetd.meta", "LOCK", "journal", "snapshots"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Open wrote %s into a directory of other files: %v", name, err)
		}
	}
}

// A directory with transactional offsets (format 3) verifies, and dump
// shows its records, the snapshot's pending offsets too.
func TestVerifyTxnRecords(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	opts := coordinator.DefaultOptions()
	opts.Partitions = 1
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := coordinator.Open(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	at := []coordinator.OffsetCommit{{Topic: "t", Offset: 4, LeaderEpoch: -1}}
	if err := c.TxnCommit(ctx, "g", 9, 2, coordinator.NoGeneration, at); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.EndTxn(ctx, "g", 9, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, 0, nil, "verify", data)
	for _, want := range []string{"format 3", "txn_end 1", "snapshot_txn 1", "verify: ok"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, 0, nil, "dump", "-snapshots", data)
	for _, want := range []string{`"type":"txn_commit","group":"g"`, `"producerId":9,"producerEpoch":2`, `"type":"txn_end"`, `"committed":true`, `"type":"snapshot_txn"`, `"txnCommit":1`} {
		if !strings.Contains(out, want) {
			t.Fatalf("dump lacks %s:\n%s", want, out)
		}
	}
}
