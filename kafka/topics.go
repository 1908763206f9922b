package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// describeTopic fills a Metadata answer for the topic named name from
// Options.Topics: its ID and its partitions, each led by leader (offsetd
// holds no records: the partitions are there for the consumer protocol's
// assignments, which clients resolve through Metadata). It reports whether
// Topics knows the topic; a topic it does not know is left as Server answers
// any topic, with no partitions.
func (h *Handler) describeTopic(rt *kmsg.MetadataResponseTopic, name string, leader int32) bool {
	if h.opts.Topics == nil {
		return false
	}
	id, n, ok := h.opts.Topics.Topic(name)
	if !ok {
		return false
	}
	rt.TopicID = id
	for p := range n {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition, rp.Leader, rp.LeaderEpoch = p, leader, 0
		rp.Replicas, rp.ISR = []int32{leader}, []int32{leader}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return true
}

// topicByID returns the name of the topic of Options.Topics whose ID is id.
// It looks at every topic: clients ask by ID only to resolve a
// consumer-protocol assignment, once per change of it.
func (h *Handler) topicByID(id [16]byte) (string, bool) {
	if h.opts.Topics == nil || id == ([16]byte{}) {
		return "", false
	}
	for _, name := range h.opts.Topics.Names() {
		if tid, _, ok := h.opts.Topics.Topic(name); ok && tid == id {
			return name, true
		}
	}
	return "", false
}
