package kafka

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestTrace keeps one line per group request a test's clients sent
// (member, generation, offsets, answer), logged if the test fails: a
// rebalance that went wrong is read from it.
type requestTrace struct {
	mu    sync.Mutex
	lines []string // guarded by mu
}

func (tr *requestTrace) add(start time.Time, h *Handler, req kmsg.Request, resp kmsg.Response) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s +%s handler %p %s", start.Format("15:04:05.000"), time.Since(start).Round(time.Microsecond), h, kmsg.NameForKey(req.Key()))
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		fmt.Fprintf(&b, " member=%s", shortID(r.MemberID))
		if rr, ok := resp.(*kmsg.JoinGroupResponse); ok {
			fmt.Fprintf(&b, " -> %d member=%s gen=%d leader=%s", rr.ErrorCode, shortID(rr.MemberID), rr.Generation, shortID(rr.LeaderID))
		}
	case *kmsg.SyncGroupRequest:
		fmt.Fprintf(&b, " member=%s gen=%d", shortID(r.MemberID), r.Generation)
		for _, a := range r.GroupAssignment {
			fmt.Fprintf(&b, " %s:%s", shortID(a.MemberID), assignedTopics(a.MemberAssignment))
		}
		if rr, ok := resp.(*kmsg.SyncGroupResponse); ok {
			fmt.Fprintf(&b, " -> %d %s", rr.ErrorCode, assignedTopics(rr.MemberAssignment))
		}
	case *kmsg.HeartbeatRequest:
		fmt.Fprintf(&b, " member=%s gen=%d", shortID(r.MemberID), r.Generation)
		if rr, ok := resp.(*kmsg.HeartbeatResponse); ok {
			fmt.Fprintf(&b, " -> %d", rr.ErrorCode)
		}
	case *kmsg.LeaveGroupRequest:
		fmt.Fprintf(&b, " member=%s", shortID(r.MemberID))
		for _, m := range r.Members {
			fmt.Fprintf(&b, " member=%s", shortID(m.MemberID))
		}
	case *kmsg.OffsetCommitRequest:
		fmt.Fprintf(&b, " member=%s gen=%d", shortID(r.MemberID), r.Generation)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, " %d=%d", p.Partition, p.Offset)
			}
		}
		fmt.Fprintf(&b, " -> %d", errorCode(resp))
	case *kmsg.OffsetFetchRequest:
		if rr, ok := resp.(*kmsg.OffsetFetchResponse); ok {
			for _, g := range rr.Groups {
				for _, t := range g.Topics {
					for _, p := range t.Partitions {
						fmt.Fprintf(&b, " %d=%d", p.Partition, p.Offset)
					}
				}
			}
		}
	}
	tr.mu.Lock()
	tr.lines = append(tr.lines, b.String())
	tr.mu.Unlock()
}

// logIfFailed logs the trace of a failed test.
func (tr *requestTrace) logIfFailed(t *testing.T) {
	if !t.Failed() {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t.Logf("group requests:\n%s", strings.Join(tr.lines, "\n"))
}

// shortID is the end of a member id, enough to tell members apart.
func shortID(id string) string {
	return id[max(0, len(id)-6):]
}

func assignedTopics(b []byte) string {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return "?"
	}
	var parts []string
	for _, t := range a.Topics {
		parts = append(parts, fmt.Sprintf("%s%v", t.Topic, t.Partitions))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
