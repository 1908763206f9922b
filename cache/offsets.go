package cache

import (
	"cmp"
	"slices"
	"sync"
)

// TopicPartition names one partition of one topic within a group.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Offset is the latest committed position of one group on one topic partition.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	// CommitTime is the commit's time in Unix milliseconds.
	CommitTime int64
}

// Entry is one key and value of a group's view.
type Entry struct {
	TopicPartition
	Offset
}

// GroupInfo describes a group as a whole.
type GroupInfo struct {
	// Version is the log index of the group's last change.
	Version uint64
	// LastCommit is the time of the group's newest commit, in Unix milliseconds.
	LastCommit int64
	// Generation is the highest consumer-group generation a commit carried,
	// or -1 when no commit carried one.
	Generation int32
	// Offsets counts the group's live keys.
	Offsets int
}

type group struct {
	name    string
	info    GroupInfo
	offsets map[TopicPartition]Offset
}

// Offsets is one internal partition's table of group offsets. Reads are safe
// from any goroutine; writes happen only through Update.
type Offsets struct {
	mu      sync.RWMutex
	groups  map[string]*group // guarded by mu
	keys    int               // guarded by mu
	applied uint64            // guarded by mu; the log index the table is at
}

// NewOffsets returns an empty table.
func NewOffsets() *Offsets {
	return &Offsets{groups: make(map[string]*group)}
}

// Get returns the latest offset of group on topic and partition.
func (t *Offsets) Get(groupName, topic string, partition int32) (Offset, bool) {
	t.mu.RLock()
	g := t.groups[groupName]
	var v Offset
	ok := false
	if g != nil {
		v, ok = g.offsets[TopicPartition{topic, partition}]
	}
	t.mu.RUnlock()
	return v, ok
}

// Group appends the group's offsets to dst, sorted by topic then partition,
// and returns them with the group's description. ok is false when the group
// has no offsets.
func (t *Offsets) Group(groupName string, dst []Entry) (entries []Entry, info GroupInfo, ok bool) {
	start := len(dst)
	dst, info, ok = t.GroupEntries(groupName, dst)
	slices.SortFunc(dst[start:], func(a, b Entry) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return dst, info, ok
}

// GroupEntries is Group without the sorting, for readers that do not need
// an order (snapshots).
func (t *Offsets) GroupEntries(groupName string, dst []Entry) (entries []Entry, info GroupInfo, ok bool) {
	dst, info, _, ok = t.GroupAt(groupName, dst)
	return dst, info, ok
}

// GroupAt is GroupEntries that also returns the log index the table was at
// when the group was read (SetApplied), so that a snapshot can record the
// exact point each group was captured at.
func (t *Offsets) GroupAt(groupName string, dst []Entry) (entries []Entry, info GroupInfo, applied uint64, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g := t.groups[groupName]
	if g == nil {
		return dst, GroupInfo{}, t.applied, false
	}
	dst = slices.Grow(dst, len(g.offsets))
	for k, v := range g.offsets {
		dst = append(dst, Entry{k, v})
	}
	return dst, g.info, t.applied, true
}

// Info returns the group's description; ok is false when it has no offsets.
func (t *Offsets) Info(groupName string) (info GroupInfo, ok bool) {
	t.mu.RLock()
	g := t.groups[groupName]
	if g != nil {
		info = g.info
	}
	t.mu.RUnlock()
	return info, g != nil
}

// Groups appends the names of every group with at least one offset to dst.
func (t *Offsets) Groups(dst []string) []string {
	t.mu.RLock()
	for name := range t.groups {
		dst = append(dst, name)
	}
	t.mu.RUnlock()
	return dst
}

// GroupOffset is one group's offset on one partition of a topic.
type GroupOffset struct {
	Group     string
	Partition int32
	Offset    int64
}

// Topic appends to dst the offset of every group on every partition of
// topic. It visits every key of the table: it serves operators' views and
// checks, not the hot path.
func (t *Offsets) Topic(topic string, dst []GroupOffset) []GroupOffset {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for name, g := range t.groups {
		for k, v := range g.offsets {
			if k.Topic == topic {
				dst = append(dst, GroupOffset{Group: name, Partition: k.Partition, Offset: v.Offset})
			}
		}
	}
	return dst
}

// Len returns the number of live keys and of groups.
func (t *Offsets) Len() (keys, groups int) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.keys, len(t.groups)
}

// IdleGroups appends to dst, up to limit, the names of groups whose newest
// commit is older than before (Unix milliseconds).
func (t *Offsets) IdleGroups(before int64, limit int, dst []string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for name, g := range t.groups {
		if len(dst) >= limit {
			break
		}
		if g.info.LastCommit < before {
			dst = append(dst, name)
		}
	}
	return dst
}

// Update runs fn with the table locked for writing, so that a whole batch
// becomes visible to readers at once.
func (t *Offsets) Update(fn func(w OffsetsWriter)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(OffsetsWriter{t})
}

// SetApplied records that the table now holds every log entry up to index.
func (w OffsetsWriter) SetApplied(index uint64) { w.t.applied = index }

// OffsetsWriter changes a table; it is valid only inside Update.
type OffsetsWriter struct {
	t *Offsets
}

// Put stores v as the latest offset of key in group, overwriting any older
// value, and records version as the group's last change.
func (w OffsetsWriter) Put(groupName string, version uint64, key TopicPartition, v Offset) {
	g := w.t.groups[groupName]
	if g == nil {
		g = &group{name: groupName, offsets: make(map[TopicPartition]Offset), info: GroupInfo{Generation: -1}}
		w.t.groups[groupName] = g
	}
	n := len(g.offsets)
	g.offsets[key] = v // one map operation: Put is most of replay's time
	if len(g.offsets) > n {
		w.t.keys++
		g.info.Offsets++
	}
	g.info.Version = version
	g.info.LastCommit = max(g.info.LastCommit, v.CommitTime)
}

// Reserve makes room for n offsets in a group about to receive them (a
// snapshot says how many), so that loading does not grow its map step by
// step.
func (w OffsetsWriter) Reserve(groupName string, n int) {
	if w.t.groups[groupName] == nil {
		w.t.groups[groupName] = &group{name: groupName, offsets: make(map[TopicPartition]Offset, n), info: GroupInfo{Generation: -1}}
	}
}

// SetInfo sets the version, last commit time and generation of a group that
// has offsets, as a snapshot recorded them.
func (w OffsetsWriter) SetInfo(groupName string, version uint64, lastCommit int64, gen int32) {
	if g := w.t.groups[groupName]; g != nil {
		g.info.Version = version
		g.info.LastCommit = max(g.info.LastCommit, lastCommit)
		g.info.Generation = max(g.info.Generation, gen)
	}
}

// SetGeneration raises the group's highest generation to gen. It applies only
// to a group that has offsets: a generation alone keeps no group alive.
func (w OffsetsWriter) SetGeneration(groupName string, gen int32) {
	if g := w.t.groups[groupName]; g != nil && gen > g.info.Generation {
		g.info.Generation = gen
	}
}

// Delete removes one key of group; a group left without keys disappears.
func (w OffsetsWriter) Delete(groupName string, version uint64, key TopicPartition) {
	g := w.t.groups[groupName]
	if g == nil {
		return
	}
	if _, ok := g.offsets[key]; !ok {
		return
	}
	delete(g.offsets, key)
	w.t.keys--
	g.info.Offsets--
	g.info.Version = version
	if len(g.offsets) == 0 {
		delete(w.t.groups, groupName)
	}
}

// DeleteGroup removes every key of group.
func (w OffsetsWriter) DeleteGroup(groupName string) {
	if g := w.t.groups[groupName]; g != nil {
		w.t.keys -= len(g.offsets)
		delete(w.t.groups, groupName)
	}
}

// Has reports whether group holds key, seen from inside the batch.
func (w OffsetsWriter) Has(groupName string, key TopicPartition) bool {
	g := w.t.groups[groupName]
	if g == nil {
		return false
	}
	_, ok := g.offsets[key]
	return ok
}

// GroupName returns the table's own string for the group named b, so that a
// replayed record does not allocate a copy of a name the table already holds.
func (w OffsetsWriter) GroupName(b []byte) string {
	if g := w.t.groups[string(b)]; g != nil {
		return g.name
	}
	return string(b)
}
