package cache

import (
	"slices"
	"strings"
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

// groupTopic is the key of the table's one lookup: a fetch finds a group's
// offsets on a topic, then the partition by its number.
type groupTopic struct {
	group, topic string
}

// topicRef is the value of the table's one lookup. It carries the dense
// slots beside their partitions, so that a fetch goes from the map
// straight to the slot: all of their array, to its capacity (slots past
// the length were never written, so they are not live), and the writer
// stores it again only when the slots move to a new array.
type topicRef struct {
	dense []slot
	ps    *partitions
	g     *group // the group, for a writer that finds its topic here
}

type group struct {
	name   string
	info   GroupInfo
	topics []*partitions // sorted by topic name; each has live offsets
}

// find returns the position of topic in g.topics, or where it would go.
func (g *group) find(topic string) (int, bool) {
	return slices.BinarySearchFunc(g.topics, topic, func(ps *partitions, t string) int { return strings.Compare(ps.topic, t) })
}

// Offsets is one internal partition's table of group offsets. Reads are safe
// from any goroutine; writes happen only through Update.
//
// The offsets of a group on a topic sit in one slice indexed by partition
// number, under one map keyed by group and topic; group and topic names
// are held once (interned), so a key costs its offset and little else.
type Offsets struct {
	mu      sync.RWMutex
	groups  map[string]*group       // guarded by mu
	topics  map[groupTopic]topicRef // guarded by mu
	names   map[string]string       // guarded by mu; interned topic names
	keys    int                     // guarded by mu
	applied uint64                  // guarded by mu; the log index the table is at
	last    string                  // guarded by mu; the topic name interned last
	md      metadataTable           // guarded by mu
	// Writer state, guarded by mu: the group written last, and the blocks
	// new objects are cut from (see carve).
	lastGroup *group
	slab      []slot
	spare     []partitions
}

// NewOffsets returns an empty table.
func NewOffsets() *Offsets {
	return &Offsets{groups: make(map[string]*group), topics: make(map[groupTopic]topicRef), names: make(map[string]string), md: newMetadataTable()}
}

// Get returns the latest offset of group on topic and partition.
func (t *Offsets) Get(groupName, topic string, partition int32) (Offset, bool) {
	t.mu.RLock()
	r, found := t.topics[groupTopic{groupName, topic}]
	var (
		s  slot
		v  Offset
		ok bool
	)
	if uint32(partition) < uint32(len(r.dense)) {
		s = r.dense[partition]
		ok = s.live
	}
	if !ok && found {
		s, ok = r.ps.get(partition) // past the dense slots (or not there)
	}
	if ok {
		v = t.offset(s)
	}
	t.mu.RUnlock()
	return v, ok
}

// offset returns the value a slot holds; t.mu must be held.
func (t *Offsets) offset(s slot) Offset {
	return Offset{Offset: s.offset, LeaderEpoch: s.epoch, Metadata: t.md.strs[s.metadata], CommitTime: s.commitTime}
}

// appendEntries appends the offsets of ps to dst; t.mu must be held.
func (t *Offsets) appendEntries(dst []Entry, ps *partitions) []Entry {
	ps.each(func(p int32, s slot) {
		dst = append(dst, Entry{TopicPartition{ps.topic, p}, t.offset(s)})
	})
	return dst
}

// Group appends the group's offsets to dst, sorted by topic then partition,
// and returns them with the group's description. ok is false when the group
// has no offsets.
func (t *Offsets) Group(groupName string, dst []Entry) (entries []Entry, info GroupInfo, ok bool) {
	dst, info, _, ok = t.GroupAt(groupName, dst)
	return dst, info, ok
}

// GroupAt is Group that also returns the log index the table was at
// when the group was read (SetApplied), so that a snapshot can record the
// exact point each group was captured at.
func (t *Offsets) GroupAt(groupName string, dst []Entry) (entries []Entry, info GroupInfo, applied uint64, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g := t.groups[groupName]
	if g == nil {
		return dst, GroupInfo{}, t.applied, false
	}
	dst = slices.Grow(dst, g.info.Offsets)
	for _, ps := range g.topics {
		dst = t.appendEntries(dst, ps)
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
// topic. It visits every group of the table: it serves operators' views
// and checks, not the hot path.
func (t *Offsets) Topic(topic string, dst []GroupOffset) []GroupOffset {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for name, g := range t.groups {
		if i, ok := g.find(topic); ok {
			g.topics[i].each(func(p int32, s slot) {
				dst = append(dst, GroupOffset{Group: name, Partition: p, Offset: s.offset})
			})
		}
	}
	return dst
}

// Sizes returns the number of live keys, of groups and of group and topic
// pairs.
func (t *Offsets) Sizes() (keys, groups, topics int) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.keys, len(t.groups), len(t.topics)
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
