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
