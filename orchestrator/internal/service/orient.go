package service

import (
	"context"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// Orienter returns task_info's orientation of a session (the
// dispatcher's): why its tools are missing or would fail, with what only
// the orchestrator knows (connections, credentials, catalog states).
type Orienter func(ctx context.Context, sessionID string) ([]toolapi.Orientation, error)

// SetOrienter makes launches and pushes carry the orientation of their
// session, for agentctl's server instructions (issue 19). Call it before
// the service launches or re-attaches a session; without it they carry
// none and agentctl says what the surface alone shows.
func (s *Service) SetOrienter(o Orienter) { s.orient = o }

// orientation is what a launch or a push carries: the session's
// orientation now, or nothing when it cannot be read (the push still
// goes; the instructions keep the last one).
func (s *Service) orientation(ctx context.Context, sessionID string) *executors.Orientation {
	if s.orient == nil {
		return nil
	}
	entries, err := s.orient(ctx, sessionID)
	if err != nil {
		s.log.WarnContext(ctx, "read a session's orientation for its instructions", "session_id", sessionID, "error", err.Error())
		return nil
	}
	return &executors.Orientation{Entries: entries}
}
