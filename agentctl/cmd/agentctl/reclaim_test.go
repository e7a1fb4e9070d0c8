package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReclaimAfterABurstOnly: memory is returned once per burst, on the
// first quiet interval after it, never while work goes on, and for what an
// idle daemon allocates at most once per reclaimBurst of it.
func TestReclaimAfterABurstOnly(t *testing.T) {
	r := &reclaimer{}
	var allocs uint64
	step := func(n uint64) bool { allocs += n; return r.sample(allocs) }
	assert.False(t, step(reclaimQuiet/2), "idle, no burst")
	assert.False(t, step(reclaimBurst), "busy")
	assert.False(t, step(reclaimBurst), "still busy")
	assert.True(t, step(0), "the first quiet interval after the burst")
	assert.False(t, step(0), "once per burst")
	returned := 0
	for range 100 { // 12.5 MiB in quiet steps
		if step(reclaimQuiet / 2) {
			returned++
		}
	}
	assert.Equal(t, 1, returned, "a trickle returns once per reclaimBurst allocated")
	assert.False(t, step(reclaimBurst), "busy again")
	assert.True(t, step(reclaimQuiet/2), "quiet again")
}
