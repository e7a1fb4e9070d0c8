package mcpserver

import (
	"time"

	"github.com/toolscope/toolscope/internal/registry"
)

// SetBetweenSDKCalls installs f to run between two SDK calls of every
// later application, as a scheduler that deschedules the publisher there
// would.
func (p *Publisher) SetBetweenSDKCalls(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.betweenSDKCalls = f
}

// Tracked returns how many sessions the publisher keeps peers for.
func (p *Publisher) Tracked() int {
	p.notifiedMu.Lock()
	defer p.notifiedMu.Unlock()
	return len(p.peers)
}

// ToMCP is the whole MCP definition of t.
var ToMCP = toMCP

// ApplyNow publishes r and applies it at once, past the throttle.
func ApplyNow(p *Publisher, r *registry.Registry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.desired = r
	p.applyLocked()
}

// ForgetDefinitions empties the process-wide cache of built-in
// definitions, as a process that just started has it.
func ForgetDefinitions() {
	builtinDefinitions.Lock()
	defer builtinDefinitions.Unlock()
	clear(builtinDefinitions.m)
}

// SetRefusalClock makes the bound on p's refusal reports read now.
func SetRefusalClock(p *Publisher, now func() time.Time) {
	p.refusals.mu.Lock()
	defer p.refusals.mu.Unlock()
	p.refusals.now = now
}

// SetAdoptWait changes p's AdoptWait for the calls that start later.
func SetAdoptWait(p *Publisher, wait time.Duration) {
	p.notifiedMu.Lock()
	defer p.notifiedMu.Unlock()
	p.adoptWait = wait
}
