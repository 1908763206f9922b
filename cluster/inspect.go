package cluster

import (
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/offsetd/offsetd/coordinator"
)

// RecordTypeName names the journal record types a cluster node writes
// ("raft_entry", "raft_hard_state", "raft_snapshot"), or returns "" for
// another type.
func RecordTypeName(typ byte) string {
	switch typ {
	case recEntry:
		return "raft_entry"
	case recHardState:
		return "raft_hard_state"
	case recSnapshot:
		return "raft_snapshot"
	}
	return ""
}

// Record is a cluster node's journal record decoded for tools that show a
// data directory (offsetd verify and dump). Fields a type does not have
// are left empty.
type Record struct {
	Type string `json:"type"`
	// Index and Term are a Raft entry's, or those a snapshot covers.
	Index uint64 `json:"raftIndex,omitempty"`
	Term  uint64 `json:"raftTerm,omitempty"`
	// Kind is an entry's ("normal", "conf_change", "conf_change_v2") or a
	// snapshot record's ("compacted": the group compacted its own log;
	// "received": a leader's snapshot replaced it).
	Kind string `json:"kind,omitempty"`
	// Vote and Commit are a hard state's.
	Vote   uint64 `json:"vote,omitempty"`
	Commit uint64 `json:"commit,omitempty"`
	// Voters, Learners and VotersOutgoing are a snapshot's configuration.
	Voters         []uint64 `json:"voters,omitempty"`
	Learners       []uint64 `json:"learners,omitempty"`
	VotersOutgoing []uint64 `json:"votersOutgoing,omitempty"`
	// Change is a configuration change entry, as raft prints it.
	Change string `json:"change,omitempty"`
	// Record is the coordinator record a normal entry carries (none for
	// the empty entry a new leader appends).
	Record *coordinator.Record `json:"record,omitempty"`
}

// DecodeRecord decodes one of a cluster node's journal records, checking
// it as a node replaying it would, and the coordinator record a normal
// entry carries as the coordinator would.
func DecodeRecord(typ byte, payload []byte) (Record, error) {
	r := Record{Type: RecordTypeName(typ)}
	switch typ {
	case recEntry:
		var e pb.Entry
		if err := proto.Unmarshal(payload, &e); err != nil {
			return r, fmt.Errorf("raft entry: %v", err)
		}
		r.Index, r.Term = e.GetIndex(), e.GetTerm()
		if r.Index == 0 {
			return r, fmt.Errorf("raft entry of index 0")
		}
		switch e.GetType() {
		case pb.EntryNormal:
			r.Kind = "normal"
			if d := e.GetData(); len(d) > 0 {
				rec, err := coordinator.DecodeRecord(d[0], d[1:])
				if err != nil {
					return r, fmt.Errorf("raft entry %d: %v", r.Index, err)
				}
				r.Record = &rec
			}
		case pb.EntryConfChange:
			r.Kind = "conf_change"
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return r, fmt.Errorf("raft entry %d: configuration change: %v", r.Index, err)
			}
			r.Change = pb.ConfChangesToString(cc.AsV2().Changes)
		case pb.EntryConfChangeV2:
			r.Kind = "conf_change_v2"
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return r, fmt.Errorf("raft entry %d: configuration change: %v", r.Index, err)
			}
			r.Change = pb.ConfChangesToString(cc.Changes)
		default:
			return r, fmt.Errorf("raft entry %d of unknown type %d", r.Index, e.GetType())
		}
	case recHardState:
		var hs pb.HardState
		if err := proto.Unmarshal(payload, &hs); err != nil {
			return r, fmt.Errorf("raft hard state: %v", err)
		}
		r.Term, r.Vote, r.Commit = hs.GetTerm(), hs.GetVote(), hs.GetCommit()
	case recSnapshot:
		if len(payload) == 0 || payload[0] != snapCompacted && payload[0] != snapReceived {
			return r, fmt.Errorf("raft snapshot of no known kind")
		}
		r.Kind = "compacted"
		if payload[0] == snapReceived {
			r.Kind = "received"
		}
		var meta pb.SnapshotMetadata
		if err := proto.Unmarshal(payload[1:], &meta); err != nil {
			return r, fmt.Errorf("raft snapshot: %v", err)
		}
		r.Index, r.Term = meta.GetIndex(), meta.GetTerm()
		cs := meta.GetConfState()
		r.Voters, r.Learners, r.VotersOutgoing = cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing()
	default:
		return r, fmt.Errorf("type %d is not a cluster node's", typ)
	}
	return r, nil
}
