package kafka

// A deletion of a group's offsets is written outside the group's lock, as
// every write is. What the group decided before it (that no member
// subscribes to the topic, that the group is empty) must still hold when
// the tombstone lands, so the group keeps the deletion in flight and the
// requests it would reorder wait for it: a commit of the topic (or of any
// topic, for the whole group), a join while the group is deleted, and
// another deletion of the same offsets. Heartbeats and the rest do not
// wait. The deletion itself first waits for the commits of the topic (or
// of the group) fenced before it was decided (awaitCommits), so that it
// removes them, as Kafka's tombstones follow the commits accepted before
// them; new ones wait for the deletion, so the wait ends.

// startDeletion notes a deletion of the group's offsets on topic, or of
// the whole group when topic is "". g.mu is held.
func (g *group) startDeletion(topic string) {
	if g.deleting == nil {
		g.deleting = map[string]chan struct{}{}
	}
	g.deleting[topic] = make(chan struct{})
}

// endDeletion wakes whoever waits for the deletion of topic. g.mu is held.
func (g *group) endDeletion(topic string) {
	close(g.deleting[topic])
	delete(g.deleting, topic)
	if len(g.deleting) == 0 {
		g.forgetIfUnused()
	}
}

// deletionOf returns the deletion in flight that a request on topics must
// follow, or nil: one of the whole group, or of one of topics. g.mu is
// held.
func (g *group) deletionOf(topics ...string) <-chan struct{} {
	if ch := g.deleting[""]; ch != nil {
		return ch
	}
	for _, t := range topics {
		if ch := g.deleting[t]; ch != nil {
			return ch
		}
	}
	return nil
}

// anyDeletion returns one of the deletions in flight, or nil. g.mu is
// held.
func (g *group) anyDeletion() <-chan struct{} {
	for _, ch := range g.deleting {
		return ch
	}
	return nil
}
