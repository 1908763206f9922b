package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/offsetd/offsetd/cluster"
)

// raftCollector exports a cluster node's Raft state (cluster.Node.Stats)
// at scrape time: every series is there from the first scrape, at zero
// until something happens.
type raftCollector struct {
	n ClusterStats
}

var (
	descRaftLeader = prometheus.NewDesc("offsetd_raft_leader",
		"1 where this node leads the internal partition's Raft group, 0 elsewhere.", []string{"partition"}, nil)
	descRaftTerm = prometheus.NewDesc("offsetd_raft_term",
		"The internal partition's Raft term as this node knows it.", []string{"partition"}, nil)
	descRaftLeaderChanges = prometheus.NewDesc("offsetd_raft_leader_changes_total",
		"Times this node learnt of a new leader (another node, or a new term) of any partition, since it started.", nil, nil)
	descRaftCommit = prometheus.NewDesc("offsetd_raft_commit_index",
		"The internal partition's Raft commit index as this node knows it.", []string{"partition"}, nil)
	descRaftApplied = prometheus.NewDesc("offsetd_raft_applied_index",
		"The last index of the internal partition's Raft log that this node's tables took in.", []string{"partition"}, nil)
	descRaftPending = prometheus.NewDesc("offsetd_raft_proposals_pending",
		"Entries the groups this node leads have appended and not yet committed.", nil, nil)
	descRaftReachable = prometheus.NewDesc("offsetd_raft_peer_reachable",
		"1 while this node's Raft messages reach the peer, 0 once they fail to.", []string{"peer"}, nil)
	descRaftSent = prometheus.NewDesc("offsetd_raft_messages_sent_total",
		"Raft messages delivered to the peer.", []string{"peer"}, nil)
	descRaftDropped = prometheus.NewDesc("offsetd_raft_messages_dropped_total",
		"Raft messages to the peer lost on the way (a full queue, a failed delivery); Raft sends again what matters.", []string{"peer"}, nil)
	descRaftSnapsSent = prometheus.NewDesc("offsetd_raft_snapshots_sent_total",
		"Leader's snapshots this node sent to followers that lagged behind its compacted log.", nil, nil)
	descRaftSnapsReceived = prometheus.NewDesc("offsetd_raft_snapshots_received_total",
		"Leader's snapshots this node received in place of log entries.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftLeader, descRaftTerm, descRaftLeaderChanges, descRaftCommit, descRaftApplied,
		descRaftPending, descRaftReachable, descRaftSent, descRaftDropped, descRaftSnapsSent, descRaftSnapsReceived} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Stats call per scrape.
func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter(descRaftLeaderChanges, st.LeaderChanges)
	counter(descRaftSnapsSent, st.SnapshotsSent)
	counter(descRaftSnapsReceived, st.SnapshotsReceived)
	gauge(descRaftPending, st.ProposalsPending)
	for _, p := range st.Partitions {
		part := strconv.Itoa(p.Partition)
		var leads uint64
		if p.Leader != 0 && p.Leader == c.n.ID() {
			leads = 1
		}
		gauge(descRaftLeader, leads, part)
		gauge(descRaftTerm, p.Term, part)
		gauge(descRaftCommit, p.Commit, part)
		gauge(descRaftApplied, p.Applied, part)
	}
	for _, p := range st.Peers {
		peer := strconv.FormatUint(p.ID, 10)
		var reachable uint64
		if p.Reachable {
			reachable = 1
		}
		gauge(descRaftReachable, reachable, peer)
		counter(descRaftSent, p.Sent, peer)
		counter(descRaftDropped, p.Dropped, peer)
	}
}

var _ ClusterStats = (*cluster.Node)(nil)
