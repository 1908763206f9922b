package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// maxExpirePerRecord bounds the groups one expiry record deletes, so a huge
// expiry is many modest writes rather than one oversized one.
const maxExpirePerRecord = 1000

// ExpireGroups deletes every group whose newest commit is older than
// Options.Retention, all of its offsets at once: a group that commits to any
// partition keeps all of them. Deletions are tombstone records of at most
// 1000 groups each. In a cluster, it expires the groups of the partitions
// this node leads. It returns how many groups expired. The coordinator runs
// it every Options.RetentionCheckInterval; it does nothing when Retention
// is KeepForever.
func (c *Coordinator) ExpireGroups(ctx context.Context) (int, error) {
	if c.opts.Retention <= 0 {
		return 0, nil
	}
	total := 0
	for _, p := range c.parts {
		if p.state.Load() != stateReady {
			continue
		}
		for {
			n, err := c.expireSome(ctx, p)
			total += n
			if errors.Is(err, errNoChange) || errors.Is(err, ErrNotLeader) {
				break // in a cluster, each partition's leader expires its groups
			}
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// expireSome writes one record expiring up to maxExpirePerRecord of p's
// groups; errNoChange means none was idle. The idle check runs where the
// partition's writer owns its state, with every earlier write applied, so
// a group that commits meanwhile is never expired.
func (c *Coordinator) expireSome(ctx context.Context, p *partition) (int, error) {
	res, err := c.submit(ctx, p, &request{
		typ:        recExpireGroups,
		readsState: true,
		build: func(p *partition, dst []byte) ([]byte, any, error) {
			cutoff := c.opts.Now().Add(-c.opts.Retention).UnixMilli()
			idle := p.offsets.IdleGroups(cutoff, maxExpirePerRecord, nil)
			if len(idle) == 0 {
				return nil, nil, errNoChange
			}
			return encodeExpireGroups(dst, idle), idle, nil
		},
	})
	if err != nil {
		return 0, err
	}
	idle := res.out.([]string)
	n := len(idle)
	slices.Sort(idle)
	c.opts.Logger.Info("expired idle groups", "partition", p.id, "groups", n, "names", firstNames(idle, maxLoggedNames), "retention", c.opts.Retention)
	if mo, ok := c.opts.Observer.(MaintenanceObserver); ok {
		mo.ObserveExpire(p.id, n)
	}
	return n, nil
}

// maxLoggedNames bounds the names a log line lists: an expiry of 1000
// groups logs the first ones and how many more.
const maxLoggedNames = 10

// firstNames lists at most limit of names, and how many it left out.
func firstNames(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ",")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:limit], ","), len(names)-limit)
}

// sweep expires groups every RetentionCheckInterval until Close.
func (c *Coordinator) sweep() {
	t := time.NewTicker(c.opts.RetentionCheckInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.stop
		cancel()
	}()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if _, err := c.ExpireGroups(ctx); err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
				c.opts.Logger.Error("retention sweep failed", "err", err)
			}
		}
	}
}
