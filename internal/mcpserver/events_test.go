package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
)

func replay(t *testing.T, s *eventStore, session, stream string, index int) ([]string, error) {
	t.Helper()
	var out []string
	for d, err := range s.After(context.Background(), session, stream, index) {
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
	return out, nil
}

// A session's request streams are dropped oldest first past the byte
// bound, whole; the notification stream loses its oldest events and keeps
// its numbering; what is left replays from the right index.
func TestEventStoreBoundsEachSessionByBytes(t *testing.T) {
	ctx := context.Background()
	s := newEventStore(10<<10, time.Hour)
	event := strings.Repeat("x", 1000)
	require.NoError(t, s.Open(ctx, "a", ""))
	require.NoError(t, s.Open(ctx, "b", "1"))
	for i := range 100 {
		stream := fmt.Sprint(i + 1)
		require.NoError(t, s.Append(ctx, "a", "", []byte(fmt.Sprintf("note %d %s", i, strings.Repeat("n", 300)))))
		require.NoError(t, s.Open(ctx, "a", stream))
		require.NoError(t, s.Append(ctx, "a", stream, nil)) // the SDK's priming event
		require.NoError(t, s.Append(ctx, "a", stream, []byte(event)))
		require.NoError(t, s.Append(ctx, "b", "1", []byte("small")))
	}
	assert.LessOrEqual(t, s.sessions["a"].bytes, 10<<10)
	_, streams := s.retained()
	assert.Less(t, streams, 12, "streams kept")

	got, err := replay(t, s, "a", "100", 0)
	require.NoError(t, err)
	assert.Equal(t, []string{event}, got, "the newest stream replays after its priming event")
	_, err = replay(t, s, "a", "1", 0)
	assert.ErrorIs(t, err, mcp.ErrEventsPurged, "the oldest stream was dropped")

	// The notification stream kept its latest events at their indexes.
	got, err = replay(t, s, "a", "", 98)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.True(t, strings.HasPrefix(got[0], "note 99 "))
	_, err = replay(t, s, "a", "", 0)
	assert.ErrorIs(t, err, mcp.ErrEventsPurged, "its oldest events were dropped")
	got, err = replay(t, s, "b", "1", 97)
	require.NoError(t, err)
	assert.Equal(t, []string{"small", "small"}, got, "session b is bounded apart from a")

	require.NoError(t, s.SessionClosed(ctx, "a"))
	_, err = replay(t, s, "a", "", 98)
	assert.ErrorIs(t, err, mcp.ErrEventsPurged)
}

// A request stream is dropped maxAge after it opened, and one written
// after it was dropped (a long call answering late) refuses to replay
// rather than replay from a wrong index.
func TestEventStoreDropsStreamsByAge(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(0, 0)
	s := newEventStore(1<<20, time.Minute)
	s.now = func() time.Time { return now }
	require.NoError(t, s.Open(ctx, "a", "1"))
	require.NoError(t, s.Append(ctx, "a", "1", []byte("one")))
	now = now.Add(2 * time.Minute)
	require.NoError(t, s.Open(ctx, "a", "2"))
	require.NoError(t, s.Append(ctx, "a", "2", []byte("two")))
	_, streams := s.retained()
	assert.Equal(t, 1, streams)
	_, err := replay(t, s, "a", "1", -1)
	assert.ErrorIs(t, err, mcp.ErrEventsPurged)

	require.NoError(t, s.Append(ctx, "a", "1", []byte("late")))
	_, err = replay(t, s, "a", "1", 0)
	assert.ErrorIs(t, err, mcp.ErrEventsPurged, "written after it was dropped: its numbering is unknown")
	got, err := replay(t, s, "a", "2", -1)
	require.NoError(t, err)
	assert.Equal(t, []string{"two"}, got)
}

// A 2025-11-25 client listing in a loop holds a bounded event store: the
// SDK's MemoryEventStore kept every response up to 10 MiB and a stream
// entry for each request (issue 23: 0.8 → 7.6 MB of heap after 3,000
// lists).
func TestStatefulClientListingInALoopHoldsBoundedEvents(t *testing.T) {
	p := New(registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")}),
		Options{Name: "test", Handler: func(registry.Tool) mcp.ToolHandler { return nil }})
	t.Cleanup(p.Close)
	store := newEventStore(64<<10, time.Hour)
	srv := httptest.NewServer(p.handlerWith(store))
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	for range 300 {
		_, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err)
	}
	bytes, streams := store.retained()
	assert.LessOrEqual(t, bytes, 64<<10+32<<10, "within the bound, plus the last response")
	assert.Less(t, streams, 10)
	assert.Positive(t, bytes, "responses are kept for resuming")
	require.NoError(t, cs.Close())
	require.Eventually(t, func() bool { bytes, _ := store.retained(); return bytes == 0 }, 5*time.Second, 10*time.Millisecond,
		"a closed session's events are dropped")
}

// TestIdleTimeoutOutlastsGoClients: the endpoint keeps an idle connection
// longer than Go's default client transport does, so that Go clients
// (the go-sdk's default) close idle connections themselves and never send
// a POST on one the endpoint is closing (Go retries no POST).
func TestIdleTimeoutOutlastsGoClients(t *testing.T) {
	client := http.DefaultTransport.(*http.Transport).IdleConnTimeout
	require.NotZero(t, client)
	assert.Greater(t, DefaultIdleTimeout, client)
	assert.Equal(t, DefaultIdleTimeout, Limits{}.WithDefaults().IdleTimeout)
}
