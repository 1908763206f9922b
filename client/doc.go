// Package client is a Go client for offsetd's HTTP API.
//
// Every method takes a context, which bounds the whole call, retries
// included. Errors from the server are *Error values that match the
// package's sentinels with errors.Is (ErrNotFound, ErrConflict, …). A 503
// (partitions loading, a partition repairing its log, a cluster electing a
// leader) is retried, waiting as long as its Retry-After says, up to
// Options.Retries times. A 503 does not always mean nothing was written:
// outcome_unknown is a cluster write whose node lost the lead, which may
// be committed. Retrying a commit is safe all the same, since writing the
// same offsets twice leaves them as once.
//
// One Client serves every goroutine of a process: its transport (for an
// http:// server on Unix, a lean HTTP/1.1 client of the package's own;
// elsewhere net/http's; see Options.HTTPClient) keeps
// Options.MaxIdleConns (default 64) idle connections to the server, so
// that as many concurrent callers never wait for a dial, and the commits
// of concurrent callers share requests (POST /v1/commits, at most
// Options.MaxCommitRequests in flight), each still its own atomic write
// with its own answer.
//
//	c, err := client.New("http://127.0.0.1:7070", client.Options{})
//	if err != nil { ... }
//	v, err := c.Commit(ctx, "payments", -1, []client.OffsetCommit{
//		{Topic: "orders", Partition: 0, Offset: 42, LeaderEpoch: -1},
//	})
//	g, err := c.GroupOffsets(ctx, "payments", "")
//	// Wait up to 30s for the group to move past what we have seen:
//	g, changed, err := c.PollGroupOffsets(ctx, "payments", "", g.Version, 30*time.Second)
package client
