package statictopic

import "fmt"

// EpochStep is the least amount NextEpoch adds to the previous epoch.
const EpochStep = 1000

// NextEpoch returns the epoch for a new version of a mapping whose epoch is
// old: max(old+EpochStep, nowMillis). Near the top of int64 it saturates
// rather than wrapping around.
func NextEpoch(old, nowMillis int64) int64 {
	next := maxInt64
	if old <= maxInt64-EpochStep {
		next = old + EpochStep
	}
	return max(next, nowMillis)
}

// CheckEpoch fences incoming against the stored mapping of the same topic and
// scope. A lower epoch is ErrStaleEpoch. An equal epoch with identical content
// (Mapping.Equal) is an idempotent repeat: replace is false and err nil. An
// equal epoch with other content is ErrEpochConflict. A higher epoch replaces.
// Mappings of another topic or scope are ErrInvalid. CheckEpoch does not
// validate incoming; call Validate first.
func CheckEpoch(stored, incoming Mapping) (replace bool, err error) {
	if stored.Topic != incoming.Topic || stored.Scope != incoming.Scope {
		return false, fmt.Errorf("%w: epoch check across mappings: topic %q scope %q against topic %q scope %q",
			ErrInvalid, incoming.Topic, incoming.Scope, stored.Topic, stored.Scope)
	}
	switch {
	case incoming.Epoch < stored.Epoch:
		return false, fmt.Errorf("%w: topic %q scope %q: epoch %d below stored %d",
			ErrStaleEpoch, incoming.Topic, incoming.Scope, incoming.Epoch, stored.Epoch)
	case incoming.Epoch > stored.Epoch:
		return true, nil
	case incoming.Equal(stored):
		return false, nil
	default:
		return false, fmt.Errorf("%w: topic %q scope %q: epoch %d already stored with other content",
			ErrEpochConflict, incoming.Topic, incoming.Scope, incoming.Epoch)
	}
}

// requireNewerEpoch is the fence Create and Remap apply to the epoch they are
// given, so that what they return could be stored over old.
func requireNewerEpoch(m Mapping, epoch int64) error {
	switch {
	case epoch < m.Epoch:
		return fmt.Errorf("%w: topic %q scope %q: epoch %d below current %d", ErrStaleEpoch, m.Topic, m.Scope, epoch, m.Epoch)
	case epoch == m.Epoch:
		return fmt.Errorf("%w: topic %q scope %q: a changed mapping needs an epoch above %d", ErrEpochConflict, m.Topic, m.Scope, m.Epoch)
	}
	return nil
}
