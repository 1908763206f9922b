package powercut

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mount mounts a powercut filesystem over a fresh backing directory and
// returns it with the backing directory and the mountpoint.
func mount(t *testing.T) (*FS, string, string) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	backing, mnt := t.TempDir(), t.TempDir()
	f, err := Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Unmount() }) // a no-op if the test unmounted it
	return f, backing, mnt
}

func cut(t *testing.T, f *FS, m Mode) Cut {
	t.Helper()
	c, err := f.CutPower(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func create(t *testing.T, path string) *os.File {
	t.Helper()
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	return fh
}

func write(t *testing.T, fh *os.File, b []byte, off int64) {
	t.Helper()
	if _, err := fh.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func fsync(t *testing.T, fh *os.File) {
	t.Helper()
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pages returns n pages, page i filled with byte i+1.
func pages(n int) []byte {
	b := make([]byte, n*pageSize)
	for i := range b {
		b[i] = byte(i/pageSize + 1)
	}
	return b
}

func TestDropAllLosesUnsyncedWrites(t *testing.T) {
	f, backing, mnt := mount(t)
	synced := bytes.Repeat([]byte("s"), 5000)
	fh := create(t, filepath.Join(mnt, "a"))
	write(t, fh, synced, 0)
	fsync(t, fh)
	write(t, fh, []byte("unsynced"), 4990) // over synced bytes and past the end
	fb := create(t, filepath.Join(mnt, "b"))
	write(t, fb, []byte("never synced"), 0)
	syncDir(t, mnt) // both names are durable, b's data is not

	c := cut(t, f, DropAll())
	if c.Files != 2 || c.Written != 0 {
		t.Errorf("cut = %+v, want 2 files, nothing written", c)
	}
	if _, err := fh.Write([]byte("late")); !errors.Is(err, syscall.EIO) {
		t.Errorf("write after the cut: %v, want EIO", err)
	}
	if _, err := os.Create(filepath.Join(mnt, "c")); !errors.Is(err, syscall.EIO) {
		t.Errorf("create after the cut: %v, want EIO", err)
	}
	fh.Close()
	fb.Close()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(backing, "a")); !bytes.Equal(got, synced) {
		t.Errorf("a after the cut: %d bytes, want its %d synced bytes", len(got), len(synced))
	}
	// Its directory entry was synced: the file is there, empty.
	if got := readFile(t, filepath.Join(backing, "b")); len(got) != 0 {
		t.Errorf("b after the cut: %q, want empty", got)
	}
}

func TestSyncedWritesSurvive(t *testing.T) {
	f, backing, mnt := mount(t)
	data := pages(3)[:3*pageSize-100]
	fh := create(t, filepath.Join(mnt, "a"))
	write(t, fh, data, 0)
	fsync(t, fh)
	syncDir(t, mnt)
	if c := cut(t, f, DropAll()); c.Pages != 0 {
		t.Errorf("cut met %d dirty pages after fsync", c.Pages)
	}
	if got := readFile(t, filepath.Join(backing, "a")); !bytes.Equal(got, data) {
		t.Errorf("backing file: %d bytes, want the %d synced", len(got), len(data))
	}
}

func TestCleanUnmountWritesEverything(t *testing.T) {
	f, backing, mnt := mount(t)
	fh := create(t, filepath.Join(mnt, "a"))
	write(t, fh, []byte("unsynced"), 0)
	fh.Close()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(backing, "a")); string(got) != "unsynced" {
		t.Errorf("backing file after a clean unmount: %q, want %q", got, "unsynced")
	}
}

func TestReadsSeeUnsyncedWrites(t *testing.T) {
	_, backing, mnt := mount(t)
	fh := create(t, filepath.Join(mnt, "a"))
	write(t, fh, pages(2), 0)
	fsync(t, fh)
	write(t, fh, []byte("xyz"), pageSize-1) // straddles two synced pages
	write(t, fh, []byte("tail"), 5*pageSize)

	want := pages(2)
	copy(want[pageSize-1:], "xyz")
	want = append(want, make([]byte, 3*pageSize)...)
	want = append(want, "tail"...)
	if got := readFile(t, filepath.Join(mnt, "a")); !bytes.Equal(got, want) {
		t.Errorf("read through the mount: %d bytes, differs from the %d written", len(got), len(want))
	}
	if st, err := os.Stat(filepath.Join(mnt, "a")); err != nil || st.Size() != int64(len(want)) {
		t.Errorf("stat through the mount: %v %v, want size %d", st.Size(), err, len(want))
	}
	if st, err := os.Stat(filepath.Join(backing, "a")); err != nil || st.Size() != 2*pageSize {
		t.Errorf("backing file: size %v %v, want only the synced %d", st.Size(), err, 2*pageSize)
	}
}

func TestTornPagesKeepsALaterPageAndLosesAnEarlier(t *testing.T) {
	f, backing, mnt := mount(t)
	const n = 16
	write(t, create(t, filepath.Join(mnt, "a")), pages(n), 0) // one multi-page write, never synced
	syncDir(t, mnt)                                           // but its name is

	c := cut(t, f, TornPages(rand.New(rand.NewPCG(1, 2))))
	if c.Pages != n || c.Written == 0 || c.Written == n {
		t.Fatalf("cut = %+v, want some but not all of %d pages written", c, n)
	}
	got := readFile(t, filepath.Join(backing, "a"))
	if len(got)%pageSize != 0 || len(got) > n*pageSize {
		t.Fatalf("backing file has %d bytes, want whole pages, at most %d", len(got), n)
	}
	written, lostBeforeWritten := 0, false
	for i := range len(got) / pageSize {
		page := got[i*pageSize : (i+1)*pageSize]
		switch {
		case bytes.Equal(page, pages(n)[i*pageSize:(i+1)*pageSize]):
			written++
		case bytes.Equal(page, make([]byte, pageSize)):
			lostBeforeWritten = true // a hole: a later page is on disk
		default:
			t.Fatalf("page %d is neither written nor zeros", i)
		}
	}
	if written != c.Written || !lostBeforeWritten {
		t.Errorf("%d pages on disk (cut wrote %d), a lost page before a written one: %v; want a torn write", written, c.Written, lostBeforeWritten)
	}
}

func TestRenameKeepsUnsyncedWrites(t *testing.T) {
	_, backing, mnt := mount(t)
	fh := create(t, filepath.Join(mnt, "a.tmp"))
	write(t, fh, []byte("data"), 0)
	if err := os.Rename(filepath.Join(mnt, "a.tmp"), filepath.Join(mnt, "a")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(mnt, "a")); string(got) != "data" {
		t.Errorf("renamed file reads %q before fsync, want %q", got, "data")
	}
	if got := readFile(t, filepath.Join(backing, "a")); len(got) != 0 {
		t.Errorf("backing file has %q before fsync, want nothing", got)
	}
	fsync(t, fh)
	if got := readFile(t, filepath.Join(backing, "a")); string(got) != "data" {
		t.Errorf("backing file has %q after fsync, want %q", got, "data")
	}
}

func TestTruncateDropsDirtyPagesPastTheSize(t *testing.T) {
	_, backing, mnt := mount(t)
	fh := create(t, filepath.Join(mnt, "a"))
	write(t, fh, pages(3), 0)
	const size = pageSize + 100
	if err := fh.Truncate(size); err != nil {
		t.Fatal(err)
	}
	write(t, fh, []byte("end"), 4*pageSize) // grows again: the cut part reads as zeros
	want := append(pages(2)[:size], make([]byte, 4*pageSize-size)...)
	want = append(want, "end"...)
	if got := readFile(t, filepath.Join(mnt, "a")); !bytes.Equal(got, want) {
		t.Errorf("after truncate and write: %d bytes read, differ from the %d expected", len(got), len(want))
	}
	fsync(t, fh)
	if got := readFile(t, filepath.Join(backing, "a")); !bytes.Equal(got, want) {
		t.Errorf("backing file after fsync: %d bytes, differ from the %d expected", len(got), len(want))
	}
}

// TestNamesNeedTheirDirectorySynced: a file created, renamed or removed,
// or a directory made, since its directory's last fsync is undone by the
// cut, even when the file itself was synced; once the directory is synced
// the change stays.
func TestNamesNeedTheirDirectorySynced(t *testing.T) {
	f, backing, mnt := mount(t)
	at := func(name string) string { return filepath.Join(mnt, name) }
	// Synced names: kept, old, gone (removed) and sub/inner.
	for _, name := range []string{"kept", "old", "gone"} {
		fh := create(t, at(name))
		write(t, fh, []byte(name), 0)
		fsync(t, fh)
	}
	if err := os.Mkdir(at("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	fi := create(t, at("sub/inner"))
	fsync(t, fi)
	syncDir(t, at("sub"))
	// Unsynced changes of names, their data synced.
	fn := create(t, at("new"))
	write(t, fn, []byte("new"), 0)
	fsync(t, fn)
	ft := create(t, at("tmp"))
	write(t, ft, []byte("replacement"), 0)
	fsync(t, ft)
	if err := os.Rename(at("tmp"), at("old")); err != nil { // replaces old
		t.Fatal(err)
	}
	if err := os.Remove(at("gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(at("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A change in sub, whose own directory is synced: it stays.
	fsub := create(t, at("sub/synced"))
	fsync(t, fsub)
	syncDir(t, at("sub"))

	if c := cut(t, f, DropAll()); c.Names != 5 {
		t.Errorf("cut undid %d changes of names, want 5 (new, tmp, the rename, the removal, dir)", c.Names)
	}
	for name, want := range map[string]bool{"kept": true, "old": true, "gone": true, "sub/inner": true, "sub/synced": true, "new": false, "tmp": false, "dir": false} {
		if got := exists(t, filepath.Join(backing, name)); got != want {
			t.Errorf("%s exists after the cut: %v, want %v", name, got, want)
		}
	}
	if got := readFile(t, filepath.Join(backing, "old")); string(got) != "old" {
		t.Errorf("old after the cut reads %q, want the file the rename replaced", got)
	}
	if got := readFile(t, filepath.Join(backing, "gone")); string(got) != "gone" {
		t.Errorf("gone after the cut reads %q, want the removed file back", got)
	}
}

// TestSyncedDirectoryKeepsItsChanges: the same changes, followed by a
// fsync of their directory, all survive the cut.
func TestSyncedDirectoryKeepsItsChanges(t *testing.T) {
	f, backing, mnt := mount(t)
	at := func(name string) string { return filepath.Join(mnt, name) }
	for _, name := range []string{"old", "gone"} {
		fsync(t, create(t, at(name)))
	}
	syncDir(t, mnt)
	ft := create(t, at("tmp"))
	write(t, ft, []byte("replacement"), 0)
	fsync(t, ft)
	if err := os.Rename(at("tmp"), at("old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(at("gone")); err != nil {
		t.Fatal(err)
	}
	fsync(t, create(t, at("new")))
	syncDir(t, mnt)
	if c := cut(t, f, DropAll()); c.Names != 0 {
		t.Errorf("cut undid %d changes of names after the directory was synced", c.Names)
	}
	for name, want := range map[string]bool{"old": true, "new": true, "tmp": false, "gone": false} {
		if got := exists(t, filepath.Join(backing, name)); got != want {
			t.Errorf("%s exists after the cut: %v, want %v", name, got, want)
		}
	}
	if got := readFile(t, filepath.Join(backing, "old")); string(got) != "replacement" {
		t.Errorf("old reads %q, want the renamed file", got)
	}
}

// TestRemovedTreeComesBack: a directory emptied and removed (as
// os.RemoveAll does) without a sync of its parent is back after the cut,
// with its files.
func TestRemovedTreeComesBack(t *testing.T) {
	f, backing, mnt := mount(t)
	d := filepath.Join(mnt, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	fx := create(t, filepath.Join(d, "x"))
	write(t, fx, []byte("x"), 0)
	fsync(t, fx)
	syncDir(t, d)
	if err := os.RemoveAll(d); err != nil {
		t.Fatal(err)
	}
	if c := cut(t, f, DropAll()); c.Names != 2 {
		t.Errorf("cut undid %d changes of names, want 2 (the unlink, the rmdir)", c.Names)
	}
	if got := readFile(t, filepath.Join(backing, "d", "x")); string(got) != "x" {
		t.Errorf("d/x after the cut reads %q, want it back", got)
	}
}
