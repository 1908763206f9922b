package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/offsetd/offsetd/statictopic"
)

// mustHave fails t unless the log matches pattern.
func (b *lockedBuffer) mustHave(t *testing.T, pattern string) {
	t.Helper()
	if !regexp.MustCompile(pattern).MatchString(b.String()) {
		t.Fatalf("the log lacks %q:\n%s", pattern, b)
	}
}

func loggedOptions(o Options) (Options, *lockedBuffer) {
	b := &lockedBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(b, nil))
	return o, b
}

// An expiry names the groups it expired, the first ten and a count of
// the rest.
func TestExpiryLogsGroupNames(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	opts, logs := loggedOptions(retentionOptions(clock))
	opts.Partitions = 1
	c := mustOpen(t, t.TempDir(), opts)
	ctx := context.Background()
	for i := range 12 {
		if err := c.Commit(ctx, fmt.Sprintf("g%02d", i), []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(25 * time.Hour)
	if n, err := c.ExpireGroups(ctx); err != nil || n != 12 {
		t.Fatalf("ExpireGroups = %d %v, want 12", n, err)
	}
	logs.mustHave(t, `msg="expired idle groups" partition=0 groups=12 names="g00,g01,g02,g03,g04,g05,g06,g07,g08,g09 and 2 more"`)
}

// A global-read switch of a scope without a static topic is ErrNotFound
// and writes nothing, unless forced; a switch that is on can be turned
// off. Every switch is logged.
func TestGlobalReadOfScopeWithoutTopic(t *testing.T) {
	opts, logs := loggedOptions(testOptions())
	c := mustOpen(t, t.TempDir(), opts)
	ctx := context.Background()
	if err := c.SetGlobalRead(ctx, "nosuch", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetGlobalRead(nosuch) = %v, want ErrNotFound", err)
	}
	if len(c.Scopes()) != 0 {
		t.Fatalf("a refused switch left scopes %+v", c.Scopes())
	}
	if err := c.ForceSetGlobalRead(ctx, "nosuch", true); err != nil {
		t.Fatal(err)
	}
	if s := c.Scopes(); len(s) != 1 || !s[0].GlobalRead {
		t.Fatalf("after the forced switch: %+v", s)
	}
	if err := c.SetGlobalRead(ctx, "nosuch", false); err != nil {
		t.Fatalf("turning off a switch that is on: %v", err)
	}
	logs.mustHave(t, `level=WARN msg="static topic global read switched" scope=nosuch enabled=true forced=true`)
	logs.mustHave(t, `level=INFO msg="static topic global read switched" scope=nosuch enabled=false forced=false`)
	if _, err := c.CreateStaticTopic(ctx, "T", "clusterA", 2, []string{"b1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetGlobalRead(ctx, "clusterA", true); err != nil {
		t.Fatal(err)
	}
}

// Remaps and trims say what they changed in the log.
func TestRemapAndTrimLogged(t *testing.T) {
	opts, logs := loggedOptions(testOptions())
	c := mustOpen(t, t.TempDir(), opts)
	ctx := context.Background()
	if _, err := c.CreateStaticTopic(ctx, "T", "clusterA", 2, []string{"b1"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.RemapStaticTopic(ctx, "T", "clusterA", []statictopic.QueueMove{{QueueID: 0, ToBroker: "b2", OldLeaderMaxOffset: 100}})
	if err != nil {
		t.Fatal(err)
	}
	logs.mustHave(t, fmt.Sprintf(`msg="static topic remapped" topic=T scope=clusterA epoch=%d previous_epoch=\d+ moves=1 queues=0->b2`, m.Epoch))
	if _, err := c.RemapStaticTopicToBrokers(ctx, "T", "clusterA", []string{"b1", "b3"}, map[int32]int64{0: 30}, 0); err != nil {
		t.Fatal(err)
	}
	logs.mustHave(t, `msg="static topic remapped" topic=T scope=clusterA .* moves=1 queues=0->b3`)
	m, err = c.TrimStaticTopic(ctx, "T", "clusterA", nil, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	logs.mustHave(t, fmt.Sprintf(`msg="static topic trimmed" topic=T scope=clusterA epoch=%d below=100 items_dropped=1 forced=false`, m.Epoch))
}
