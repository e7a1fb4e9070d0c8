package toolapi

import (
	"fmt"
	"strings"

	"github.com/toolscope/toolscope/internal/providers"
)

// Orienting is what a session's server instructions are built from: its
// surface as served now and what the orchestrator knows of why tools are
// missing or would fail.
type Orienting struct {
	TaskID    string
	Mode      Mode
	Transport Transport
	// Providers is the session's provider set.
	Providers providers.Set
	// Tools are the names of the tools shown now.
	Tools []string
	// Orientation is the orchestrator's, as of its last push; Known is
	// false when none was received (Instructions then states what the
	// surface alone shows: providers without tools, plan mode).
	Orientation []Orientation
	Known       bool
}

// Instructions are the MCP server instructions of a session: sent in the
// initialize (and server/discover) result, so a client that initializes
// again after a change reads the change. Both the colocated surface
// (agentctl) and the hosted one (the orchestrator) build them here.
// task_info's orientation stays the current word: it is computed at each
// call, and most clients read instructions once per connection.
func Instructions(o Orienting) string {
	var b strings.Builder
	mode := "plan mode: read-only tools only"
	if o.Mode == ModeTask {
		mode = "task mode"
	}
	where := "served next to your files"
	if o.Transport != TransportColocated {
		where = "hosted: no tool names a path on your machine"
	}
	fmt.Fprintf(&b, "toolscope tools for task %s (%s; %s). Call task_info first: it names the repositories and "+
		"the review providers whose tools you have.\n", o.TaskID, mode, where)
	providersNow := "none"
	if !o.Providers.IsEmpty() {
		providersNow = strings.Join(o.Providers.Strings(), ", ")
	}
	fmt.Fprintf(&b, "Review providers: %s. Tools shown now (%d): %s.\n", providersNow, len(o.Tools), strings.Join(o.Tools, ", "))
	entries := o.Orientation
	if !o.Known {
		entries = SurfaceOrientation(o.Mode, o.Providers)
	}
	if len(entries) > 0 {
		b.WriteString("Why some tools are missing or would fail, as of the last change:\n")
		for _, e := range entries {
			fmt.Fprintf(&b, "- [%s] %s\n", e.State, e.Message)
		}
	}
	b.WriteString("When a tool you expect is missing or a call fails, call task_info again: its orientation is current " +
		"(no repository of that provider, workspace not connected, credential unresolved, plan mode, catalog tool " +
		"disabled or unavailable) and says what to do.")
	return b.String()
}

// SurfaceOrientation is the part of the orientation a surface shows by
// itself: each provider of the allowlist not in set has no tools (the
// task has no repository of it), and plan mode hides the tools that
// change things. task_info's orientation says the same through
// NoRepository and PlanMode.
func SurfaceOrientation(mode Mode, set providers.Set) []Orientation {
	var out []Orientation
	for _, p := range providers.All() {
		if !set.Has(p) {
			out = append(out, NoRepository(p))
		}
	}
	if mode != ModeTask {
		out = append(out, PlanMode(set))
	}
	return out
}

// NoRepository is the orientation of a provider the task has no
// repository of.
func NoRepository(p providers.Provider) Orientation {
	return Orientation{State: OrientNoRepository, Provider: string(p),
		Message: fmt.Sprintf("The task has no %s repository, so the %s tools (%s_*) are not shown. Attach one listed under available "+
			"with task_add_sources, or ask the operator to add one to the workspace.", p, p, p)}
}

// PlanMode is the orientation of a plan-mode session whose task has the
// provider set: it names the tools that change things, which it neither
// shows nor may call.
func PlanMode(set providers.Set) Orientation {
	var refused []string
	for _, t := range table {
		if !t.ReadOnly && t.Shown(set, false) {
			refused = append(refused, t.Name)
		}
	}
	return Orientation{State: OrientPlanMode,
		Message: fmt.Sprintf("This session is in plan mode: only read-only tools are shown, and tools that change things (%v) are refused. "+
			"Launch a task-mode session to use them.", refused)}
}
