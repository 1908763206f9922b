package powercut

import (
	"errors"
	"io"
	"maps"
	"os"
	"slices"
)

const pageSize = 4096

// dirtyFile is what was written to one file since its last fsync. It holds
// its own descriptor of the backing file, so it follows the file through
// renames and outlives the writer's handles (the power may be cut after the
// writer died).
type dirtyFile struct {
	f     *os.File
	size  int64            // the size readers see
	pages map[int64][]byte // page number → its content, pageSize bytes
}

func newDirtyFile(f *os.File) (*dirtyFile, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dirtyFile{f: f, size: st.Size(), pages: make(map[int64][]byte)}, nil
}

func (d *dirtyFile) write(data []byte, off int64) error {
	for len(data) > 0 {
		p := off / pageSize
		page, err := d.page(p)
		if err != nil {
			return err
		}
		n := copy(page[off-p*pageSize:], data)
		data, off = data[n:], off+int64(n)
		d.size = max(d.size, off)
	}
	return nil
}

// page returns page p, dirty from now on, starting from its synced content.
func (d *dirtyFile) page(p int64) ([]byte, error) {
	if page, ok := d.pages[p]; ok {
		return page, nil
	}
	page := make([]byte, pageSize)
	if _, err := d.f.ReadAt(page, p*pageSize); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	d.pages[p] = page
	return page, nil
}

// read reads what a reader sees: the backing file under the dirty pages.
func (d *dirtyFile) read(buf []byte, off int64) (int, error) {
	if off >= d.size {
		return 0, nil
	}
	buf = buf[:min(int64(len(buf)), d.size-off)]
	n, err := d.f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	clear(buf[n:]) // past the backing file's end, before a dirty page
	end := off + int64(len(buf))
	for p := off / pageSize; p*pageSize < end; p++ {
		if page, ok := d.pages[p]; ok {
			from, to := max(off, p*pageSize), min(end, (p+1)*pageSize)
			copy(buf[from-off:to-off], page[from-p*pageSize:])
		}
	}
	return len(buf), nil
}

// truncate follows a truncation of the backing file to size: pages past it
// go, and the tail of the page it cuts reads as zeros if the file grows again.
func (d *dirtyFile) truncate(size int64) {
	for p, page := range d.pages {
		switch {
		case p*pageSize >= size:
			delete(d.pages, p)
		case (p+1)*pageSize > size:
			clear(page[size-p*pageSize:])
		}
	}
	d.size = size
}

func (d *dirtyFile) pageIndexes() []int64 { return slices.Sorted(maps.Keys(d.pages)) }

// writePages writes the pages ps to the backing file, the last one only up
// to the file's size.
func (d *dirtyFile) writePages(ps []int64) error {
	for _, p := range ps {
		n := min(pageSize, d.size-p*pageSize)
		if _, err := d.f.WriteAt(d.pages[p][:n], p*pageSize); err != nil {
			return err
		}
	}
	return nil
}

// sync writes every dirty page and fsyncs the backing file.
func (d *dirtyFile) sync() error {
	if err := d.writePages(d.pageIndexes()); err != nil {
		return err
	}
	return d.f.Sync()
}

func (d *dirtyFile) close() error { return d.f.Close() }
