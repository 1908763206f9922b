package statictopic

import (
	"fmt"
	"math"
)

// LogicBlockSize is the block size of logic offsets: a new leader's
// logicOffset is a multiple of it.
const LogicBlockSize = 10000

// Remap returns a copy of m with every move applied; m itself is not changed.
//
// For each move the logic queue's leader is sealed: EndOffset becomes
// OldLeaderMaxOffset and TimeOfEnd nowMillis (an already sealed leader must
// have been sealed at that same offset, and keeps its TimeOfEnd). An undecided
// leader is decided first, as its own move would have decided it: 0 if it is
// the queue's first item, else the block after the previous item's logic end.
// Then a new open item is appended on ToBroker with Gen one above the old
// leader's, a fresh physical queue id (one above the highest the broker uses
// anywhere in the mapping), StartOffset 0 and a LogicOffset on the next block
// boundary after the old leader's logic end (see nextBlockStart). An
// undecided leader whose previous item is still open (its end unknown) cannot
// be decided, and its move is ErrInvalid.
//
// Errors: no moves, a queue moved twice, an empty or reserved ToBroker, a move
// to the leader's own broker, an OldLeaderMaxOffset below the leader's
// StartOffset are ErrInvalid; an unknown queue is ErrNotFound; an epoch not
// above m.Epoch is ErrStaleEpoch or ErrEpochConflict.
func Remap(m Mapping, moves []QueueMove, epoch, nowMillis int64) (Mapping, error) {
	if err := m.Validate(); err != nil {
		return Mapping{}, err
	}
	if len(moves) == 0 {
		return Mapping{}, fmt.Errorf("%w: topic %q scope %q: remap without moves", ErrInvalid, m.Topic, m.Scope)
	}
	if err := requireNewerEpoch(m, epoch); err != nil {
		return Mapping{}, err
	}
	out := m.Clone()
	out.Epoch = epoch
	ids := nextPhysicalIDs(out)
	moved := make(map[int32]bool, len(moves))
	for _, mv := range moves {
		if err := applyMove(out, mv, moved, ids, nowMillis); err != nil {
			return Mapping{}, fmt.Errorf("topic %q scope %q queue %d: %w", m.Topic, m.Scope, mv.QueueID, err)
		}
	}
	if err := out.Validate(); err != nil {
		return Mapping{}, err
	}
	return out, nil
}

// applyMove applies one move to out, a private copy, in place.
func applyMove(out Mapping, mv QueueMove, moved map[int32]bool, ids map[string]int64, nowMillis int64) error {
	if moved[mv.QueueID] {
		return fmt.Errorf("%w: queue moved twice in one remap", ErrInvalid)
	}
	moved[mv.QueueID] = true
	items, ok := out.Queues[mv.QueueID]
	if !ok {
		return fmt.Errorf("%w: no such logic queue", ErrNotFound)
	}
	if err := checkBrokerName(mv.ToBroker); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	n := len(items)
	leader := items[n-1]
	if leader.Broker == mv.ToBroker {
		return fmt.Errorf("%w: already led by broker %q", ErrInvalid, mv.ToBroker)
	}
	if mv.OldLeaderMaxOffset < leader.StartOffset {
		return fmt.Errorf("%w: oldLeaderMaxOffset %d below the leader's startOffset %d", ErrInvalid, mv.OldLeaderMaxOffset, leader.StartOffset)
	}
	if leader.IsSealed() && leader.EndOffset != mv.OldLeaderMaxOffset {
		return fmt.Errorf("%w: leader already sealed at %d, move says %d", ErrInvalid, leader.EndOffset, mv.OldLeaderMaxOffset)
	}
	if leader.Gen == math.MaxInt32 {
		return fmt.Errorf("%w: gen exhausted", ErrInvalid)
	}
	if !leader.IsDecided() {
		leader.LogicOffset = 0
		if n > 1 {
			prevEnd, ok := items[n-2].LogicEnd()
			if !ok {
				// An open old leader, as RocketMQ leaves it mid-remap: where
				// this leader's logic range may start is not known yet.
				return fmt.Errorf("%w: undecided leader after an old leader (gen %d) whose end is unknown: seal the old leader first",
					ErrInvalid, items[n-2].Gen)
			}
			next, err := nextBlockStart(prevEnd)
			if err != nil {
				return err
			}
			leader.LogicOffset = next
		}
	}
	if !leader.IsSealed() {
		leader.EndOffset = mv.OldLeaderMaxOffset
		leader.TimeOfEnd = nowMillis
	}
	end, ok := leader.LogicEnd()
	if !ok {
		return fmt.Errorf("%w: old leader's logic range overflows int64", ErrInvalid)
	}
	start, err := nextBlockStart(end)
	if err != nil {
		return err
	}
	id, err := takePhysicalID(ids, mv.ToBroker)
	if err != nil {
		return err
	}
	items[n-1] = leader
	out.Queues[mv.QueueID] = append(items, MappingItem{
		Gen:         leader.Gen + 1,
		QueueID:     id,
		Broker:      mv.ToBroker,
		LogicOffset: start,
		StartOffset: 0,
		EndOffset:   -1,
		TimeOfStart: nowMillis,
		TimeOfEnd:   -1,
	})
	return nil
}

// nextBlockStart returns the logicOffset of the item that follows an item
// whose logic range ends (exclusively) at logicEnd, RocketMQ's block round-up:
// the next multiple of LogicBlockSize if at least half a block is left before
// it, else the one after. So 0 → 10,000, 12,345 → 20,000, 14,999 → 20,000,
// 15,000 → 30,000, 17,000 → 30,000: the gap is always more than half a block,
// and a new item never touches the old one's range.
func nextBlockStart(logicEnd int64) (int64, error) {
	if logicEnd < 0 || logicEnd > maxInt64-2*LogicBlockSize {
		return 0, fmt.Errorf("%w: logic end %d leaves no room for another block", ErrInvalid, logicEnd)
	}
	blocks := logicEnd / LogicBlockSize
	if logicEnd%LogicBlockSize < LogicBlockSize/2 {
		return (blocks + 1) * LogicBlockSize, nil
	}
	return (blocks + 2) * LogicBlockSize, nil
}
