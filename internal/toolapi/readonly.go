package toolapi

import (
	"maps"
	"slices"
)

// readOnly is the one statement of which built-in tools only read: the
// tools a plan-mode session may call. agentctl's registry marks its tool
// definitions from it (and so shows a plan session only these), and the
// orchestrator's dispatcher refuses every other built-in tool to a plan
// session from it, whatever agentctl showed or forwarded. A catalog
// (external) tool's read-only flag is its catalog record's, the same one
// agentctl is sent.
var readOnly = map[string]bool{
	"task_info":    true,
	"session_info": true,
	"task_inbox":   true,

	GitHubPRStatus:     true,
	GitHubPRComments:   true,
	GitHubPRAutomation: true,

	GitLabMRStatus:      true,
	GitLabMRDiscussions: true,
	GitLabMRAutomation:  true,
}

// ReadOnly reports whether the built-in tool name only reads, and so may
// be called by a plan-mode session. Unknown names are not read-only.
func ReadOnly(name string) bool { return readOnly[name] }

// ReadOnlyTools returns the read-only built-in tools, sorted.
func ReadOnlyTools() []string { return slices.Sorted(maps.Keys(readOnly)) }
