package executors

import (
	"strconv"
	"time"
)

// AgentctlFlags are the bounds an executor passes to every agentctl it
// starts, as `agentctl serve` flags: the orchestrator's flags of the same
// names (toolscope serve --mcp-max-sessions ...) set them. A zero field
// passes nothing: agentctl's default applies (docs/operations.md,
// Limits). A remote host's daemon is started by its operator, who sets
// them on its command line.
type AgentctlFlags struct {
	// The MCP endpoints' bounds (agentctl serve --mcp-*).
	MCPHeaderTimeout, MCPBodyTimeout, MCPIdleTimeout, MCPSessionIdle, MCPEventAge time.Duration
	MCPMaxConns, MCPMaxSessions, MCPEventBytes                                    int
	// ExitTailLines and ExitTailBytes bound the output an agent_exited
	// event carries; LogBacklog what a log read sends before following;
	// AgentLogMax a running agent's log.
	ExitTailLines, ExitTailBytes int
	LogBacklog, AgentLogMax      int64
	// WorkspacesMax bounds the disk a host's workspaces and mirrors use.
	WorkspacesMax int64
}

// Args returns the flags of the fields set, in a fixed order.
func (f AgentctlFlags) Args() []string {
	var args []string
	dur := func(name string, d time.Duration) {
		if d > 0 {
			args = append(args, "--"+name, d.String())
		}
	}
	num := func(name string, n int64) {
		if n > 0 {
			args = append(args, "--"+name, strconv.FormatInt(n, 10))
		}
	}
	dur("mcp-header-timeout", f.MCPHeaderTimeout)
	dur("mcp-body-timeout", f.MCPBodyTimeout)
	dur("mcp-idle-timeout", f.MCPIdleTimeout)
	dur("mcp-session-idle", f.MCPSessionIdle)
	num("mcp-max-conns", int64(f.MCPMaxConns))
	num("mcp-max-sessions", int64(f.MCPMaxSessions))
	num("mcp-event-bytes", int64(f.MCPEventBytes))
	dur("mcp-event-age", f.MCPEventAge)
	num("exit-tail-lines", int64(f.ExitTailLines))
	num("exit-tail-bytes", int64(f.ExitTailBytes))
	num("log-backlog", f.LogBacklog)
	num("agent-log-max-bytes", f.AgentLogMax)
	num("workspaces-max-bytes", f.WorkspacesMax)
	return args
}
