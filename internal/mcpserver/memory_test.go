package mcpserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/mcptest"
)

// A stateless (2026-07-28 over HTTP) client makes a session per request.
// The publisher recorded each listing one, holding it and all it pinned
// until the next pruning (every 256 records): 64 sessions listing in a
// loop grew agentctl by ~90 MB (BenchmarkListingMemory).
func TestStatelessListingsAreNotTracked(t *testing.T) {
	p := newPublisher(t, build("github"))
	c := mcptest.Connect(t, transports["http"](t, p), "")
	require.Equal(t, "2026-07-28", c.Negotiated())
	for range 100 {
		_, err := c.Session.ListTools(context.Background(), nil)
		require.NoError(t, err)
	}
	assert.Less(t, p.Tracked(), 10, "sessions tracked after 100 stateless listings")
}
