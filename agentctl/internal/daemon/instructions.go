package daemon

import (
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// instructions are the session's server instructions, built at each
// initialize from its surface as served then and the orchestrator's
// orientation as of its last push (toolapi.Instructions, which the
// orchestrator's hosted endpoint builds its own with).
func (s *session) instructions() string {
	s.mu.Lock()
	o := toolapi.Orienting{TaskID: s.taskID, Mode: s.mode, Transport: toolapi.TransportColocated, Providers: s.providers,
		Orientation: s.orientation, Known: s.oriented}
	s.mu.Unlock()
	o.Tools = s.pub.Published().Names() // what the SDK serves, outside the session's lock
	return toolapi.Instructions(o)
}

// orientationOf converts an orientation from the wire.
func orientationOf(set *agentctlv1.OrientationSet) []toolapi.Orientation {
	var out []toolapi.Orientation
	for _, e := range set.GetEntries() {
		out = append(out, toolapi.Orientation{State: e.GetState(), Provider: e.GetProvider(), Tool: e.GetTool(), Message: e.GetMessage()})
	}
	return out
}
