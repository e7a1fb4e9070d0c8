// Package periodic is the one loop that does something every interval
// until its context ends: the orchestrator's lease renewal, log pruning and
// PR/MR polling, agentctl's memory reclaim and the MCP endpoint's idle
// sweep all run on it.
package periodic

import (
	"context"
	"time"
)

// Run calls fn every interval, the first time one interval from now, until
// ctx ends (it returns nil) or fn returns an error (it returns that error).
// fn is never called once ctx has ended. A call that outlasts the interval
// delays the next one; ticks are not queued up behind it.
func Run(ctx context.Context, interval time.Duration, fn func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if ctx.Err() != nil {
			return nil // both were ready, and select chose the tick
		}
		if err := fn(ctx); err != nil {
			return err
		}
	}
}
