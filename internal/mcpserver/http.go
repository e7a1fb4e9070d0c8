package mcpserver

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// modernProtocol is the first MCP version served statelessly over HTTP
// (server/discover plus a subscriptions/listen stream).
const modernProtocol = "2026-07-28"

// MaxRequestBytes bounds the body of one MCP request over HTTP: a tool
// call's largest arguments (toolapi.MaxArgumentBytes) plus room for the
// JSON-RPC envelope. A larger body is refused before it is parsed, so no
// client can make the daemon buffer an unbounded request.
const MaxRequestBytes = toolapi.MaxArgumentBytes + 64<<10

// HTTPHandler serves the publisher's server over streamable HTTP to
// clients of every supported protocol version. Requests are routed by their
// MCP-Protocol-Version header:
//
//   - 2026-07-28 and later go to a stateless handler: the go-sdk serves that
//     version only statelessly, and notifications reach the client on its
//     subscriptions/listen stream;
//   - older versions (and initialize, which carries no header) go to a
//     stateful handler with an event store, so every client holding a GET
//     stream gets list_changed — the TypeScript SDK receives none from a
//     stateless handler — and a reconnecting stream misses nothing.
//
// It has no bounds of its own beyond MaxRequestBytes: agentctl serves it
// through an Endpoint (Serve), which authenticates, bounds connections and
// bodies, and counts and reaps stateful sessions.
//
// Its stateful sessions' event stores are bounded by the default Limits.
func (p *Publisher) HTTPHandler() http.Handler { return p.httpHandler(Limits{}.WithDefaults()) }

func (p *Publisher) httpHandler(limits Limits) http.Handler {
	return p.handlerWith(newEventStore(limits.EventBytes, limits.EventAge))
}

func (p *Publisher) handlerWith(events mcp.EventStore) http.Handler {
	getServer := func(*http.Request) *mcp.Server { return p.server }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{EventStore: events})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		if isModern(r) {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
}

// isModern reports whether r is of a protocol version served statelessly.
func isModern(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= modernProtocol
}
