package cache

// metadataTable holds each distinct metadata string of a table once and
// numbers it, so that an offset holds a number instead of a string: the
// offsets of a group mostly carry the same few strings (a consumer's id),
// and offsets without pointers are never scanned by the garbage collector.
// Number 0 is the empty string. A number whose last offset goes is freed
// and reused.
type metadataTable struct {
	strs  []string          // by number
	refs  []int             // offsets holding each number
	index map[string]uint32 // string → number, for numbers in use
	free  []uint32          // numbers not in use
	// The string numbered last, which the next offset most often carries.
	last  string
	lastN uint32
}

func newMetadataTable() metadataTable {
	return metadataTable{strs: []string{""}, refs: []int{0}, index: make(map[string]uint32)}
}

// ref returns the number of s, counting one more offset that holds it.
func (m *metadataTable) ref(s string) uint32 {
	if s == "" {
		return 0
	}
	if m.lastN != 0 && s == m.last {
		m.refs[m.lastN]++
		return m.lastN
	}
	n, ok := m.index[s]
	if !ok {
		if k := len(m.free); k > 0 {
			n = m.free[k-1]
			m.free = m.free[:k-1]
			m.strs[n] = s
		} else {
			n = uint32(len(m.strs))
			m.strs = append(m.strs, s)
			m.refs = append(m.refs, 0)
		}
		m.index[s] = n
	}
	m.refs[n]++
	m.last, m.lastN = s, n
	return n
}

// unref counts one offset fewer holding number n, and frees n when none
// is left.
func (m *metadataTable) unref(n uint32) {
	if n == 0 {
		return
	}
	if m.refs[n]--; m.refs[n] > 0 {
		return
	}
	delete(m.index, m.strs[n])
	m.strs[n] = ""
	m.free = append(m.free, n)
	if n == m.lastN {
		m.last, m.lastN = "", 0
	}
}

// len returns how many numbers are in use, the empty string's aside.
func (m *metadataTable) len() int { return len(m.index) }
