package client

// QueuedCommits returns the commits waiting in c for a request to carry
// them.
func QueuedCommits(c *Client) int {
	c.batch.mu.Lock()
	defer c.batch.mu.Unlock()
	return len(c.batch.queue)
}
