package mcpserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// A call the MCP endpoint refuses itself never reaches the orchestrator's
// checks, so without a report the orchestrator's audit would not know an
// agent tried it: a tool its session does not list (the SDK's "unknown
// tool", or call_tool naming one), arguments that are not a JSON object
// the tool's schema accepts. The publisher reports each such refusal
// through Options.OnRefused, at most Options.RefusalReports a second per
// session; the ones over the bound, and the ones OnRefused could not
// deliver, are counted in the next report.

// DefaultRefusalReports is how many refusals a second one session reports
// when Options.RefusalReports is zero; bursts of twice as many pass.
const DefaultRefusalReports = 10

// Refusal is a call the endpoint refused before it reached the
// orchestrator.
type Refusal struct {
	// Tool is the name the client called, its own text: call_tool's
	// target for a call through call_tool.
	Tool string
	// Code is the refusal code the client was answered with.
	Code string
	// Suppressed counts the refusals of this session not reported since
	// the previous report.
	Suppressed int
}

// refusals bounds one publisher's reports.
type refusals struct {
	report  func(context.Context, Refusal) bool
	limiter *rate.Limiter
	now     func() time.Time // time.Now; tests set a clock

	mu         sync.Mutex
	suppressed int
}

func newRefusals(report func(context.Context, Refusal) bool, perSecond int) *refusals {
	if report == nil {
		return nil
	}
	if perSecond <= 0 {
		perSecond = DefaultRefusalReports
	}
	return &refusals{report: report, limiter: rate.NewLimiter(rate.Limit(perSecond), 2*perSecond), now: time.Now}
}

// maxReportedTool bounds the tool name a report carries, the longest a
// tool's name may be (toolapi: 64 bytes): a client naming a megabyte costs
// nothing downstream. A longer name is cut and marked with "…", so it
// stays one the orchestrator records as malformed. The report's protobuf
// string must be UTF-8, so a cut rune is dropped.
const maxReportedTool = 64

// add reports r, or counts it for the next report.
func (rs *refusals) add(ctx context.Context, tool, code string) {
	if len(tool) > maxReportedTool {
		tool = tool[:maxReportedTool] + "…"
	}
	tool = strings.ToValidUTF8(tool, "")
	rs.mu.Lock()
	if !rs.limiter.AllowN(rs.now(), 1) {
		rs.suppressed++
		rs.mu.Unlock()
		return
	}
	r := Refusal{Tool: tool, Code: code, Suppressed: rs.suppressed}
	rs.suppressed = 0
	rs.mu.Unlock()
	if !rs.report(ctx, r) {
		rs.mu.Lock()
		rs.suppressed += 1 + r.Suppressed
		rs.mu.Unlock()
	}
}

// refusalSlot is where a local refusal of one tools/call request is noted
// (markRefused), for the reporting middleware to read once the call is
// answered.
type refusalSlot struct{ tool, code string }

type refusalKey struct{}

// markRefused notes that the call being answered with ctx is refused here,
// with code, naming tool ("" for the tool the request names).
func markRefused(ctx context.Context, tool, code string) {
	if slot, ok := ctx.Value(refusalKey{}).(*refusalSlot); ok {
		slot.tool, slot.code = tool, code
	}
}

// reportRefusals reports the tools/call requests refused here.
func (p *Publisher) reportRefusals(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || p.refusals == nil || call.Params == nil {
			return next(ctx, method, req)
		}
		slot := &refusalSlot{}
		res, err := next(context.WithValue(ctx, refusalKey{}, slot), method, req)
		if wire := (*jsonrpc.Error)(nil); errors.As(err, &wire) && wire.Code == jsonrpc.CodeInvalidParams &&
			strings.HasPrefix(wire.Message, "unknown tool") {
			slot.code = toolapi.CodeUnknownTool
		}
		if slot.code != "" {
			tool := slot.tool
			if tool == "" {
				tool = call.Params.Name
			}
			// The report outlives the request: a client that hangs up
			// once answered does not erase it.
			p.refusals.add(context.WithoutCancel(ctx), tool, slot.code)
		}
		return res, err
	}
}
