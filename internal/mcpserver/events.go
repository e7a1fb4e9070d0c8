package mcpserver

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of the event store's bounds (Limits.EventBytes, EventAge).
const (
	DefaultEventBytes = 64 << 10 // 64 KiB per MCP session: the largest tools/list result is 23 KB
	DefaultEventAge   = time.Minute
)

// eventStore keeps what a stateful (2025-11-25) session's streams sent, so
// that a client whose stream broke can resume it with Last-Event-ID. The
// SDK's MemoryEventStore bounds all sessions together at 10 MiB and keeps
// an entry for every stream a session ever opened (one per request); a
// client listing in a loop grew one session's heap by megabytes. This one
// bounds each MCP session on its own:
//
//   - by bytes: past maxBytes, the session's oldest request streams are
//     dropped whole (resuming one is then refused), and its notification
//     stream (the GET stream, id "") is trimmed from its oldest event;
//   - by age: a request stream opened more than maxAge ago is dropped. Its
//     response was long delivered or never will be; a client resumes a
//     broken stream within seconds.
//
// A dropped stream that is written again (a long tool call still running)
// keeps its place in the SDK's numbering: After refuses to replay it rather
// than replay from the wrong index.
type eventStore struct {
	maxBytes int
	maxAge   time.Duration
	now      func() time.Time

	mu       sync.Mutex
	sessions map[string]*sessionEvents
}

type sessionEvents struct {
	bytes   int
	streams map[string]*streamEvents
	order   []*streamEvents // request streams, oldest first
}

// streamOverhead is what a stream costs before any event, counted in the
// session's bytes: a client that makes many requests with small responses
// is bounded too.
const streamOverhead = 128

type streamEvents struct {
	id     string
	opened time.Time
	first  int      // the stream index of data[0]
	data   [][]byte // retained events
	bytes  int
	gap    bool // events were dropped and the index of data[0] is unknown
	gone   bool // dropped from its session
}

func newEventStore(maxBytes int, maxAge time.Duration) *eventStore {
	return &eventStore{maxBytes: maxBytes, maxAge: maxAge, now: time.Now, sessions: map[string]*sessionEvents{}}
}

var _ mcp.EventStore = (*eventStore)(nil)

// Open implements mcp.EventStore.
func (s *eventStore) Open(_ context.Context, sessionID, streamID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stream(sessionID, streamID, false)
	return nil
}

// stream returns the named stream, making it if needed; gap marks a stream
// made by a write rather than opened (one dropped earlier).
func (s *eventStore) stream(sessionID, streamID string, gap bool) (*sessionEvents, *streamEvents) {
	se := s.sessions[sessionID]
	if se == nil {
		se = &sessionEvents{streams: map[string]*streamEvents{}}
		s.sessions[sessionID] = se
	}
	st := se.streams[streamID]
	if st == nil {
		st = &streamEvents{id: streamID, opened: s.now(), gap: gap, bytes: streamOverhead}
		se.streams[streamID] = st
		se.bytes += streamOverhead
		if streamID != "" {
			se.order = append(se.order, st)
		}
	}
	return se, st
}

// Append implements mcp.EventStore.
func (s *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, st := s.stream(sessionID, streamID, true)
	st.data = append(st.data, data)
	st.bytes += len(data)
	se.bytes += len(data)
	s.bound(se, st)
	return nil
}

// bound drops what is past the session's bounds, never the event just
// written to current.
func (s *eventStore) bound(se *sessionEvents, current *streamEvents) {
	old := s.now().Add(-s.maxAge)
	for i := 0; i < len(se.order); {
		st := se.order[i]
		switch {
		case st.gone:
		case !st.opened.Before(old) && se.bytes <= s.maxBytes:
			i = len(se.order) // the rest is newer, and within bounds
			continue
		case st == current:
			i++
			continue
		default:
			se.drop(st)
		}
		se.order = slices.Delete(se.order, i, i+1)
	}
	// Still over: the notification stream, then the current one, lose
	// their oldest events (the last written is kept).
	for _, st := range []*streamEvents{se.streams[""], current} {
		for st != nil && se.bytes > s.maxBytes && len(st.data) > 1 {
			n := len(st.data[0])
			st.data[0] = nil
			st.data = st.data[1:]
			st.first++
			st.bytes -= n
			se.bytes -= n
		}
	}
}

func (se *sessionEvents) drop(st *streamEvents) {
	se.bytes -= st.bytes
	st.gone, st.data, st.bytes = true, nil, 0 // st.bytes included streamOverhead
	delete(se.streams, st.id)
}

// After implements mcp.EventStore.
func (s *eventStore) After(_ context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	var (
		out [][]byte
		err error
	)
	se := s.sessions[sessionID]
	switch st := se.get(streamID); {
	case st == nil:
		err = fmt.Errorf("events of stream %q of session %q: %w", streamID, sessionID, mcp.ErrEventsPurged)
	case st.gap || index+1 < st.first:
		err = fmt.Errorf("events after %d of stream %q of session %q: %w", index, streamID, sessionID, mcp.ErrEventsPurged)
	case index+1-st.first < len(st.data):
		out = slices.Clone(st.data[index+1-st.first:])
	}
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range out {
			if !yield(d, nil) {
				return
			}
		}
	}
}

func (se *sessionEvents) get(streamID string) *streamEvents {
	if se == nil {
		return nil
	}
	return se.streams[streamID]
}

// SessionClosed implements mcp.EventStore.
func (s *eventStore) SessionClosed(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sessionID)
	return nil
}

// retained returns the bytes and streams the store holds, for tests.
func (s *eventStore) retained() (bytes, streams int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, se := range s.sessions {
		bytes += se.bytes
		streams += len(se.streams)
	}
	return bytes, streams
}
