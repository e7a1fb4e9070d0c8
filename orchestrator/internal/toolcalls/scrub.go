package toolcalls

import (
	"encoding/json"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
)

// SetCredentials installs the resolver of the workspaces' credentials. Its
// scrub.Set is what every result is scrubbed with, so the orchestrator's
// other resolvers (and its logs and events) should share it.
func (d *Dispatcher) SetCredentials(r credentials.Resolver) { d.creds = r }

// result encodes res for agentctl, with its text and structured result
// scrubbed of every credential the resolver has resolved (a provider
// call resolves its credential before the provider can echo it) and of
// token-shaped strings. The code is one of ours and is kept.
func (d *Dispatcher) result(res Result) executors.ToolResult {
	s := d.creds.Secrets.Scrubber()
	out := executors.ToolResult{IsError: res.IsError, Code: res.Code, Text: s.String(res.Text)}
	if res.Structured != nil {
		b, err := json.Marshal(res.Structured)
		if err != nil {
			return executors.ToolResult{IsError: true, Code: toolapi.CodeInternal, Text: "the answer could not be encoded"}
		}
		out.Structured = s.JSON(b)
	}
	return out
}
