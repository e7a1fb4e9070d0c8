package toolcalls

import (
	"context"
	"encoding/json"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// result is res as it leaves for agentctl: the encoding bounded made of
// it in Handle, or, for a result that did not come through Handle, its
// encoding now.
func (d *Dispatcher) result(res Result) executors.ToolResult {
	if res.wire != nil {
		return *res.wire
	}
	out, err := d.encode(res)
	if err != nil {
		return executors.ToolResult{IsError: true, Code: toolapi.CodeInternal, Text: unencodable}
	}
	return out
}

const unencodable = "the answer could not be encoded"

// encode encodes res for agentctl, with its text and structured result
// scrubbed of every credential the connections have resolved (a provider
// call resolves its credential before the provider can echo it) and of
// token-shaped strings. The code is one of ours and is kept.
func (d *Dispatcher) encode(res Result) (executors.ToolResult, error) {
	s := d.conns.Secrets().Scrubber()
	out := executors.ToolResult{IsError: res.IsError, Code: res.Code, Text: s.String(res.Text)}
	if res.Structured != nil {
		b, err := json.Marshal(res.Structured)
		if err != nil {
			return executors.ToolResult{}, err
		}
		out.Structured = s.JSON(b)
	}
	return out, nil
}

// bounded encodes res as it will be sent, and keeps that encoding with
// it for CallHandler. A result over toolapi.MaxResultBytes, counted as
// sent (its scrubbed text plus its encoded structured content), is
// replaced by a result_too_large refusal that names the tool, the size
// and the limit: the agentctl link never carries it (a message over the
// link's limit ends the link's stream, and every call in flight on it),
// and the call is audited as what the agent got. Every result, a built-in
// tool's or a catalog tool's, goes through here.
func (d *Dispatcher) bounded(ctx context.Context, c Call, res Result) Result {
	out, err := d.encode(res)
	switch n := len(out.Text) + len(out.Structured); {
	case err != nil:
		d.log.ErrorContext(ctx, "tool result could not be encoded", "tool", shown(c.Tool), "error", err.Error())
		res = Result{IsError: true, Code: toolapi.CodeInternal, Text: unencodable, repository: res.repository}
	case n > toolapi.MaxResultBytes:
		d.log.InfoContext(ctx, "tool result over the bound", "session_id", shown(c.SessionID), "tool", shown(c.Tool),
			"bytes", n, "limit", toolapi.MaxResultBytes)
		res = Result{IsError: true, Code: toolapi.CodeResultTooLarge, Text: toolapi.ResultTooLarge(c.Tool, int64(n), false),
			repository: res.repository}
	default:
		res.wire = &out
		return res
	}
	if out, err = d.encode(res); err == nil {
		res.wire = &out
	}
	return res
}
