package cluster

import (
	"fmt"
	"math"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// A group's configuration (its voters, learners and, during a joint
// change, its outgoing voters) is not a record of its own in the journal:
// it is the snapshot's configuration, then every configuration change
// entry of the log after it, in order, as raft applies them. Those
// entries are journal records like any other, and a snapshot record
// carries the configuration as of its index, so the configuration
// survives restarts and compactions, and data directories written before
// membership changes existed read the same way (their only changes are
// the bootstrap's).
//
// raft restores a restarted group's configuration from InitialState and
// hands back the committed entries after Config.Applied, configuration
// changes among them, which the group applies again; so InitialState must
// give the configuration as of Applied, not as of the snapshot, nor the
// newest one (see confStateAt).

// confStateAt returns the configuration of the log in s as of index: its
// snapshot's, changed by every configuration change entry after the
// snapshot up to index, which must be in s.
func confStateAt(s *raft.MemoryStorage, index uint64) (*pb.ConfState, error) {
	snap, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	cs := snap.GetMetadata().GetConfState()
	from := snap.GetMetadata().GetIndex()
	if index <= from {
		if index < from {
			return nil, fmt.Errorf("cluster: configuration at %d, below the snapshot at %d", index, from)
		}
		return proto.CloneOf(cs), nil
	}
	if last, _ := s.LastIndex(); index > last {
		return nil, fmt.Errorf("cluster: configuration at %d, past the log's last index %d", index, last)
	}
	ents, err := s.Entries(from+1, index+1, math.MaxUint64)
	if err != nil {
		return nil, err
	}
	var changes []pb.ConfChangeI
	for _, e := range ents {
		cc, err := confChangeOf(e)
		if err != nil {
			return nil, err
		}
		if cc != nil {
			changes = append(changes, cc)
		}
	}
	if len(changes) == 0 {
		if cs == nil {
			return &pb.ConfState{}, nil
		}
		return proto.CloneOf(cs), nil
	}
	return applyConfChanges(cs, changes)
}

// confChangeOf decodes e if it is a configuration change, nil otherwise.
func confChangeOf(e *pb.Entry) (pb.ConfChangeI, error) {
	switch e.GetType() {
	case pb.EntryConfChange:
		cc := new(pb.ConfChange)
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return nil, fmt.Errorf("cluster: conf change %d: %w", e.GetIndex(), err)
		}
		return cc, nil
	case pb.EntryConfChangeV2:
		cc := new(pb.ConfChangeV2)
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return nil, fmt.Errorf("cluster: conf change %d: %w", e.GetIndex(), err)
		}
		return cc, nil
	}
	return nil, nil
}

// applyConfChanges returns cs with changes applied in order, as raft
// applies them (raft.applyConfChange).
func applyConfChanges(cs *pb.ConfState, changes []pb.ConfChangeI) (*pb.ConfState, error) {
	trk := tracker.MakeProgressTracker(1, 0)
	chg := confchange.Changer{Tracker: trk}
	if cs != nil {
		cfg, prs, err := confchange.Restore(chg, cs)
		if err != nil {
			return nil, err
		}
		trk.Config, trk.Progress = cfg, prs
	}
	for _, c := range changes {
		cc := c.AsV2()
		chg := confchange.Changer{Tracker: trk}
		var cfg tracker.Config
		var prs tracker.ProgressMap
		var err error
		if cc.LeaveJoint() {
			cfg, prs, err = chg.LeaveJoint()
		} else if autoLeave, ok := cc.EnterJoint(); ok {
			cfg, prs, err = chg.EnterJoint(autoLeave, cc.GetChanges()...)
		} else {
			cfg, prs, err = chg.Simple(cc.GetChanges()...)
		}
		if err != nil {
			return nil, err
		}
		trk.Config, trk.Progress = cfg, prs
	}
	return trk.ConfState(), nil
}
