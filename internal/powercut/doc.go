// Package powercut is a FUSE filesystem for tests that can lose power.
//
// It mounts a loopback view of a backing directory. Data written to a file
// is held in memory, as 4 KiB dirty pages plus the size the file would
// have, until the file is fsynced (or fdatasynced): then that file's dirty
// pages are written to the backing file and the backing file is fsynced.
// Reads and stat through the mount see the written state, synced or not,
// as they would through a page cache.
//
// CutPower is the power failure. With DropAll every unsynced page is lost:
// each backing file keeps exactly its synced content and size. With
// TornPages a random subset of each file's dirty pages reaches the backing
// file and the rest do not, so a write of several pages can leave a later
// page on disk and an earlier one missing (zeros, where the file grew).
// After the cut the mount refuses every change with EIO, so a writer still
// running cannot add anything; Unmount, then inspect the backing directory:
// it is the disk after the power came back.
//
//	fs, err := powercut.Mount(backing, mountpoint)
//	... run the program under test on mountpoint, kill it ...
//	fs.CutPower(powercut.TornPages(rng))
//	fs.Unmount()
//	... reopen from backing and check what was acknowledged ...
//
// What it models, and what it does not:
//   - Lost and torn data pages, the common case of a power cut.
//   - Lost changes of names: a file created, renamed or unlinked, or a
//     directory made or removed, is undone by the cut unless its
//     directory was fsynced after the change, as POSIX allows; fsyncing
//     the file itself does not keep its name. A file that a rename
//     replaced, or that was unlinked, comes back (kept meanwhile as a hard
//     link in a directory beside the backing one, which must be on the
//     same filesystem).
//   - Its limits there: a rename counts as durable once the directory of
//     the new name is synced, whatever became of the old one's; changes
//     are noted by path, so a directory renamed afterwards makes the cut
//     fail rather than undo them; renames with flags, link, symlink, mknod
//     and truncate go straight to the backing directory and survive the
//     cut. It does not model a file whose size grew on disk while its data
//     did not.
//   - Pages are all or nothing: no torn sectors inside a page, no bit rot.
//
// It needs /dev/fuse and the right to mount (root): Available says whether
// this machine has both, so tests can skip with its reason. It is test
// support only; nothing outside tests imports it.
package powercut
