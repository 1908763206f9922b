package cluster

// freeze stops the node's Raft clock: a leader then never notices that it
// lost its quorum, nor a follower that its leader is gone.
func (n *Node) freeze(on bool) { n.frozen.Store(on) }
