package toolapi

// Transport says where a session's MCP surface is served from, relative
// to the task's files. It is one input to assembling the surface (like
// the mode and the provider set), never a branch in a tool's handler.
//
// Colocated surfaces are served by agentctl next to the agent and its
// checkout. Hosted surfaces are served by the orchestrator to an agent
// that runs elsewhere (an IDE on a laptop, a hosted agent that can only
// reach a URL); they omit every field that only makes sense next to the
// files (local paths, state directories, stdio commands), in the schemas
// as well as in the values.
type Transport string

// Transports.
const (
	TransportColocated Transport = "colocated"
	TransportHosted    Transport = "hosted"
)

// Valid reports whether t is a transport.
func (t Transport) Valid() bool { return t == TransportColocated || t == TransportHosted }
