package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// versionRange is the versions of one API that offsetd serves.
type versionRange struct{ min, max int16 }

// handlerVersions is what Handler serves: the requests a group coordinator
// answers. OffsetCommit and OffsetFetch stop at v9: v10 names topics by ID,
// which offsetd does not store.
var handlerVersions = map[int16]versionRange{
	int16(kmsg.OffsetCommit):    {0, 9},
	int16(kmsg.OffsetFetch):     {0, 9},
	int16(kmsg.FindCoordinator): {0, 6},
	int16(kmsg.JoinGroup):       {0, 9},
	int16(kmsg.Heartbeat):       {0, 4},
	int16(kmsg.LeaveGroup):      {0, 5},
	int16(kmsg.SyncGroup):       {0, 5},
	int16(kmsg.DescribeGroups):  {0, 6},
	int16(kmsg.ListGroups):      {0, 5},
	int16(kmsg.DeleteGroups):    {0, 3},
	int16(kmsg.OffsetDelete):    {0, 0},
	// TxnOffsetCommit stops at v5 for the reason OffsetCommit stops at v9.
	int16(kmsg.TxnOffsetCommit): {0, 5},
	int16(kmsg.WriteTxnMarkers): {0, 2},

	int16(kmsg.ConsumerGroupHeartbeat): {0, 1},
	int16(kmsg.ConsumerGroupDescribe):  {0, 1},
}

// serverVersions is what Server answers itself, beside handlerVersions.
// SaslHandshake starts at v1: v0 sends the SASL tokens unframed.
var serverVersions = map[int16]versionRange{
	int16(kmsg.ApiVersions):      {0, 4},
	int16(kmsg.Metadata):         {0, 12},
	int16(kmsg.SASLHandshake):    {1, 1},
	int16(kmsg.SASLAuthenticate): {0, 2},
}

// consumerProtocol is the consumer group protocol's requests (KIP-848),
// served only by a Handler that knows the topics (Options.Topics): without
// them its assignors would assign nothing, and a client that is not told
// of the protocol uses the classic one.
var consumerProtocol = []int16{int16(kmsg.ConsumerGroupHeartbeat), int16(kmsg.ConsumerGroupDescribe)}

// served is what h serves: handlerVersions, without the consumer protocol
// when h knows no topics.
func (h *Handler) served() map[int16]versionRange {
	if h.opts.Topics != nil {
		return handlerVersions
	}
	return h.classicOnly
}

// Supported returns the request keys Handler serves with their lowest and
// highest versions, for a broker that embeds it to advertise in its own
// ApiVersions response. ConsumerGroupHeartbeat and ConsumerGroupDescribe
// are served only by a Handler given Options.Topics: leave them out
// otherwise.
func Supported() map[int16][2]int16 {
	out := make(map[int16][2]int16, len(handlerVersions))
	for k, v := range handlerVersions {
		out[k] = [2]int16{v.min, v.max}
	}
	return out
}

// supports reports whether vs serves req's key at req's version.
func supports(vs map[int16]versionRange, req kmsg.Request) bool {
	v, ok := vs[req.Key()]
	return ok && req.GetVersion() >= v.min && req.GetVersion() <= v.max
}
