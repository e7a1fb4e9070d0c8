package toolcalls

import (
	"encoding/json"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// result encodes res for agentctl, with its text and structured result
// scrubbed of every credential the connections have resolved (a provider
// call resolves its credential before the provider can echo it) and of
// token-shaped strings. The code is one of ours and is kept.
func (d *Dispatcher) result(res Result) executors.ToolResult {
	s := d.conns.Secrets().Scrubber()
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
