package coordinator

// MaxMetadataBytes returns the largest offset metadata Commit accepts
// (Options.MaxMetadataBytes, after defaults), so that a protocol front end
// can refuse a larger one with its own error code before submitting it.
func (c *Coordinator) MaxMetadataBytes() int { return c.opts.MaxMetadataBytes }
