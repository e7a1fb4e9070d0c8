// Package eventkind is the one table between the kinds of task event the
// orchestrator records (model.EventKind, "providers.pushed") and their
// values on the API (pb.TaskEventKind). The API's handlers convert with it
// and the CLI names kinds with it; it is apart from package api so that
// the CLI links none of the server (ADR 0035).
package eventkind

import (
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

var kinds = map[model.EventKind]pb.TaskEventKind{
	model.EventTaskCreated:             pb.TaskEventKind_TASK_EVENT_KIND_TASK_CREATED,
	model.EventSourcesAdded:            pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_ADDED,
	model.EventSessionStarted:          pb.TaskEventKind_TASK_EVENT_KIND_SESSION_STARTED,
	model.EventSessionEnded:            pb.TaskEventKind_TASK_EVENT_KIND_SESSION_ENDED,
	model.EventAgentExited:             pb.TaskEventKind_TASK_EVENT_KIND_AGENT_EXITED,
	model.EventProvidersPushed:         pb.TaskEventKind_TASK_EVENT_KIND_PROVIDERS_PUSHED,
	model.EventProvidersPushFailed:     pb.TaskEventKind_TASK_EVENT_KIND_PROVIDERS_PUSH_FAILED,
	model.EventProvidersRecomputed:     pb.TaskEventKind_TASK_EVENT_KIND_PROVIDERS_RECOMPUTED,
	model.EventExternalToolsPushed:     pb.TaskEventKind_TASK_EVENT_KIND_EXTERNAL_TOOLS_PUSHED,
	model.EventExternalToolsPushFailed: pb.TaskEventKind_TASK_EVENT_KIND_EXTERNAL_TOOLS_PUSH_FAILED,
	model.EventToolCalled:              pb.TaskEventKind_TASK_EVENT_KIND_TOOL_CALLED,
	model.EventSourcesRequested:        pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_REQUESTED,
	model.EventSourceRequestDecided:    pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_REQUEST_DECIDED,
}

// ToProto is kind on the API; TASK_EVENT_KIND_UNSPECIFIED for a kind it
// does not carry.
func ToProto(kind model.EventKind) pb.TaskEventKind { return kinds[kind] }

// Name is kind as the orchestrator records it ("providers.pushed"), for
// output that shows kinds by name; "" for a kind it does not record.
func Name(kind pb.TaskEventKind) string {
	for name, k := range kinds {
		if k == kind {
			return string(name)
		}
	}
	return ""
}
