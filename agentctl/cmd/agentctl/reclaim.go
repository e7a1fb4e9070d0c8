package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/toolscope/toolscope/internal/periodic"
)

// DefaultIdleReclaim is how often agentctl checks whether a burst of work
// (clients listing, pushes) is over (--idle-reclaim): the burst's garbage
// is then collected and its memory returned to the system, instead of
// staying in agentctl's RSS until the runtime's next collection, which an
// idle process runs only every 2 minutes (ADR 0034).
const DefaultIdleReclaim = time.Second

const (
	// reclaimBurst is what the heap must have allocated since the last
	// return for a quiet interval to end a burst.
	reclaimBurst = 8 << 20
	// reclaimQuiet is the most an interval may allocate and be quiet.
	reclaimQuiet = 256 << 10
)

// reclaimer decides, from the heap's cumulative allocations sampled every
// interval, when a burst has ended.
type reclaimer struct {
	since uint64 // allocations at the last return
	last  uint64 // allocations at the last sample
}

// sample takes the cumulative allocations now and reports whether to
// return memory: a burst since the last return, then a quiet interval.
func (r *reclaimer) sample(allocs uint64) bool {
	quiet := allocs-r.last < reclaimQuiet
	r.last = allocs
	if quiet && allocs-r.since >= reclaimBurst {
		r.since = allocs
		return true
	}
	return false
}

// reclaimWhenIdle returns a burst's memory every interval that ends one,
// until ctx ends.
func reclaimWhenIdle(ctx context.Context, interval time.Duration) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	read := func() uint64 { metrics.Read(s); return s[0].Value.Uint64() }
	r := &reclaimer{}
	r.since = read()
	r.last = r.since
	_ = periodic.Run(ctx, interval, func(context.Context) error {
		if r.sample(read()) {
			debug.FreeOSMemory()
		}
		return nil
	})
}
