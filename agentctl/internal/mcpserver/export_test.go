package mcpserver

// SetBetweenSDKCalls installs f to run between two SDK calls of every
// later application, as a scheduler that deschedules the publisher there
// would.
func (p *Publisher) SetBetweenSDKCalls(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.betweenSDKCalls = f
}
