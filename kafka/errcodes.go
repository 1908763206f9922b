package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/offsetd/offsetd/coordinator"
)

// Errors returned by Handle and Server, checkable with errors.Is.
var (
	// ErrUnsupported reports a request key or version the handler does not
	// serve. A server closes the connection that sent it.
	ErrUnsupported = errors.New("kafka: unsupported request")
)

// code returns the Kafka error code of a coordinator error.
func code(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, coordinator.ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, coordinator.ErrClosed):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, coordinator.ErrWriteFailed):
		// Retriable: the partition repairs its log and the client
		// finds the coordinator again.
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, coordinator.ErrNotLeader), errors.Is(err, coordinator.ErrNotCommitted),
		errors.Is(err, coordinator.ErrLeadershipLost):
		// The group's coordinator moved: the client finds the new one
		// and retries there (a commit written twice does no harm).
		return kerr.NotCoordinator.Code
	case errors.Is(err, coordinator.ErrStaleGeneration):
		return kerr.IllegalGeneration.Code
	case errors.Is(err, coordinator.ErrNotFound):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, coordinator.ErrInvalid):
		return kerr.InvalidRequest.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}
