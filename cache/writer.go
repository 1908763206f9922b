package cache

import "slices"

// OffsetsWriter changes a table; it is valid only inside Update.
type OffsetsWriter struct {
	t *Offsets
}

// SetApplied records that the table now holds every log entry up to index.
func (w OffsetsWriter) SetApplied(index uint64) { w.t.applied = index }

// Reserve makes room for groups more groups and topics more group and
// topic pairs (a snapshot says how many), so that loading does not grow
// the table's maps step by step.
func (w OffsetsWriter) Reserve(groups, topics int) {
	t := w.t
	if len(t.groups) == 0 && groups > 0 {
		t.groups = make(map[string]*group, groups)
	}
	if len(t.topics) == 0 && topics > 0 {
		t.topics = make(map[groupTopic]topicRef, topics)
	}
}

// Put stores v as the latest offset of key in group, overwriting any older
// value, and records version as the group's last change.
func (w OffsetsWriter) Put(groupName string, version uint64, key TopicPartition, v Offset) {
	tw := w.Topic(groupName, key.Topic, version)
	tw.Put(key.Partition, v)
}

// Topic returns a writer of the offsets of group on topic at version: a
// record's offsets mostly come in runs of one topic, and each run then
// costs one lookup rather than one per offset.
func (w OffsetsWriter) Topic(groupName, topic string, version uint64) TopicWriter {
	return TopicWriter{t: w.t, group: groupName, topic: topic, version: version}
}

// RecordTopic is Topic for the group named b, a record's bytes: when the
// group has offsets on topic already, as most commits find, one lookup of
// the table finds both the group and its topic (GroupName and Topic would
// take two, and a search of the group's topics), allocating nothing.
func (w OffsetsWriter) RecordTopic(b []byte, topic string, version uint64) TopicWriter {
	t := w.t
	if r, ok := t.topics[groupTopic{string(b), topic}]; ok {
		t.lastGroup = r.g // the record's other changes go to it next
		return TopicWriter{t: t, group: r.g.name, topic: r.ps.topic, version: version, g: r.g, ps: r.ps}
	}
	return w.Topic(w.GroupName(b), topic, version)
}

// TopicWriter puts offsets of one group on one topic; it is valid only
// inside the Update that made it.
type TopicWriter struct {
	t            *Offsets
	group, topic string
	version      uint64
	g            *group
	ps           *partitions
}

// Reserve makes room for count offsets of partition numbers below n (a
// snapshot says so), if they are dense enough to sit in a slice. It makes
// the group and topic if they are new, so call it only before Put: a
// group without offsets must not stay in the table.
func (tw *TopicWriter) Reserve(n, count int) {
	tw.find()
	ps := tw.ps
	was := cap(ps.dense)
	switch {
	case n >= max(minDense, 2*(ps.live+count)+2):
	case cap(ps.dense) == 0 && ps.sparse == nil && n <= slabSlots/16:
		ps.dense = tw.t.carve(n)
	default:
		ps.grow(n, n)
	}
	tw.moved(was)
}

// moved stores the topic's slots in the table's lookup again if their
// capacity changed from was: they moved to a new array.
func (tw *TopicWriter) moved(was int) {
	if cap(tw.ps.dense) != was {
		tw.t.topics[groupTopic{tw.g.name, tw.ps.topic}] = topicRef{tw.ps.dense[:cap(tw.ps.dense)], tw.ps, tw.g}
	}
}

// Loading a snapshot makes hundreds of thousands of small objects that live
// as long as the table. They are cut from larger blocks, which the loader
// fills one after the other: one allocation per block, not per object.
const (
	slabSlots      = 4096 // slots per block
	slabPartitions = 128  // partitions per block
)

// carve returns a dense slice of n slots cut from the current block. Its
// capacity is n, so growing it later moves it out of the block.
func (t *Offsets) carve(n int) []slot {
	if cap(t.slab)-len(t.slab) < n {
		t.slab = make([]slot, 0, slabSlots)
	}
	k := len(t.slab)
	t.slab = t.slab[:k+n]
	return t.slab[k : k+n : k+n]
}

// newPartitions returns a new, empty partitions from the current block.
func (t *Offsets) newPartitions() *partitions {
	if len(t.spare) == 0 {
		t.spare = make([]partitions, slabPartitions)
	}
	ps := &t.spare[0]
	t.spare = t.spare[1:]
	return ps
}

// find finds or makes the group and its topic.
func (tw *TopicWriter) find() {
	if tw.ps != nil {
		return
	}
	t := tw.t
	g := t.lastGroup
	if g == nil || g.name != tw.group {
		if g = t.groups[tw.group]; g == nil {
			g = &group{name: tw.group, info: GroupInfo{Generation: -1}, topics: make([]*partitions, 0, 4)}
			t.groups[g.name] = g
		}
		t.lastGroup = g
	}
	i, ok := g.find(tw.topic)
	if ok {
		tw.g, tw.ps = g, g.topics[i]
		return
	}
	ps := t.newPartitions()
	ps.topic = t.intern(tw.topic)
	g.topics = slices.Insert(g.topics, i, ps)
	t.topics[groupTopic{g.name, ps.topic}] = topicRef{ps: ps, g: g}
	tw.g, tw.ps = g, ps
}

// Put stores v as the latest offset of the topic's partition.
func (tw *TopicWriter) Put(partition int32, v Offset) {
	tw.find()
	md := &tw.t.md
	was := cap(tw.ps.dense)
	old := tw.ps.put(partition, slot{offset: v.Offset, commitTime: v.CommitTime, metadata: md.ref(v.Metadata), epoch: v.LeaderEpoch, live: true})
	tw.moved(was)
	if old.live {
		md.unref(old.metadata)
	} else {
		tw.t.keys++
		tw.g.info.Offsets++
	}
	tw.g.info.Version = tw.version
	tw.g.info.LastCommit = max(tw.g.info.LastCommit, v.CommitTime)
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
	t := w.t
	g := t.groups[groupName]
	if g == nil {
		return
	}
	i, ok := g.find(key.Topic)
	if !ok {
		return
	}
	old := g.topics[i].delete(key.Partition)
	if !old.live {
		return
	}
	t.md.unref(old.metadata)
	t.keys--
	g.info.Offsets--
	g.info.Version = version
	if ps := g.topics[i]; ps.live == 0 {
		delete(t.topics, groupTopic{g.name, ps.topic})
		g.topics = slices.Delete(g.topics, i, i+1)
		*ps = partitions{} // its block may outlive it
	}
	if len(g.topics) == 0 {
		t.forget(g)
	}
}

// DeleteGroup removes every key of group.
func (w OffsetsWriter) DeleteGroup(groupName string) {
	t := w.t
	g := t.groups[groupName]
	if g == nil {
		return
	}
	for _, ps := range g.topics {
		delete(t.topics, groupTopic{g.name, ps.topic})
		ps.each(func(_ int32, s slot) { t.md.unref(s.metadata) })
		*ps = partitions{} // its block may outlive it
	}
	t.keys -= g.info.Offsets
	t.forget(g)
}

// forget removes group g from the table.
func (t *Offsets) forget(g *group) {
	delete(t.groups, g.name)
	if t.lastGroup == g {
		t.lastGroup = nil
	}
}

// Has reports whether group holds key, seen from inside the batch.
func (w OffsetsWriter) Has(groupName string, key TopicPartition) bool {
	r, found := w.t.topics[groupTopic{groupName, key.Topic}]
	if !found {
		return false
	}
	_, ok := r.ps.get(key.Partition)
	return ok
}

// GroupName returns the table's own string for the group named b, so that a
// replayed record does not allocate a copy of a name the table already holds.
func (w OffsetsWriter) GroupName(b []byte) string {
	if g := w.t.lastGroup; g != nil && g.name == string(b) {
		return g.name
	}
	if g := w.t.groups[string(b)]; g != nil {
		w.t.lastGroup = g // the record's offsets go to it next
		return g.name
	}
	return string(b)
}

// TopicName returns the table's own string for the topic named b: groups
// share a few topics, so each name is held once however many groups
// commit to it.
func (w OffsetsWriter) TopicName(b []byte) string {
	t := w.t
	if string(b) == t.last {
		return t.last
	}
	s, ok := t.names[string(b)]
	if !ok {
		s = string(b)
		t.names[s] = s
	}
	t.last = s
	return s
}

// intern returns the table's own string for topic.
func (t *Offsets) intern(topic string) string {
	if topic == t.last {
		return t.last
	}
	s, ok := t.names[topic]
	if !ok {
		s = topic
		t.names[s] = s
	}
	t.last = s
	return s
}
