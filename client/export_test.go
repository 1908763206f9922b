package client

// WatchQueue returns a channel that receives how many commits wait in c
// for a request, each time one more does.
func WatchQueue(c *Client) <-chan int {
	ch := make(chan int, 1<<12)
	c.batch.mu.Lock()
	defer c.batch.mu.Unlock()
	c.batch.onQueue = func(n int) {
		select {
		case ch <- n:
		default:
		}
	}
	return ch
}
