package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// External tools reach sessions like provider sets do: a session's set is
// what store.ExternalTools selects for its workspace (assigned, provider
// enabled, tool enabled, available), ordered by the catalog generation. It
// is given at launch, pushed to every live session after each catalog
// change, and caught up after a restart or a failed push.

// externalSet is a workspace's external tool set as executors take it,
// with the catalog generation it reflects.
type externalSet struct {
	tools []executors.ExternalTool
	gen   uint64
}

// externalSetOf reads the external tool set of a session's workspace.
func (s *Service) externalSetOf(ctx context.Context, sess model.Session) (externalSet, error) {
	task, err := s.store.GetTask(ctx, sess.TaskID)
	if err != nil {
		return externalSet{}, err
	}
	tools, gen, err := s.externalTools(ctx, task.WorkspaceID)
	return externalSet{tools, gen}, err
}

// externalTools returns a workspace's external tool set as executors take
// it, with the catalog generation it reflects.
func (s *Service) externalTools(ctx context.Context, workspaceID string) ([]executors.ExternalTool, uint64, error) {
	tools, gen, err := s.store.ExternalTools(ctx, workspaceID)
	if err != nil {
		return nil, 0, err
	}
	out := make([]executors.ExternalTool, 0, len(tools))
	for _, t := range tools {
		// agentctl refuses a whole set holding a tool it cannot serve; such
		// a tool stays in the catalog but is left out of every set.
		if err := usable(t); err != nil {
			s.log.WarnContext(ctx, "a catalog tool cannot be exposed", "tool", t.ExposedName, "reason", err.Error())
			continue
		}
		out = append(out, executors.ExternalTool{Name: t.ExposedName, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, ReadOnly: t.ReadOnly})
	}
	return out, gen, nil
}

// usable reports why agentctl could not serve a catalog tool, or nil.
func usable(t model.CatalogTool) error {
	if err := toolapi.CheckExternalName(t.ExposedName); err != nil {
		return fmt.Errorf("name %v", err)
	}
	if err := toolapi.CheckExternalSchema(t.InputSchema); err != nil {
		return fmt.Errorf("input schema %v", err)
	}
	if len(t.OutputSchema) > 0 {
		if err := toolapi.CheckExternalSchema(t.OutputSchema); err != nil {
			return fmt.Errorf("output schema %v", err)
		}
	}
	return nil
}

// pushExternalToLive pushes, after a catalog change, each running
// session's external tool set, in parallel, each push bounded by the push
// timeout. Each workspace's set is read once, however many sessions it
// has. A session whose set did not change gets the new generation and no
// notification (agentctl diffs what it serves).
func (s *Service) pushExternalToLive(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	active, err := s.store.ActiveSessions(ctx)
	if err != nil {
		s.log.ErrorContext(ctx, "list sessions for a catalog push", "error", err.Error())
		return
	}
	workspaceOf := map[string]string{} // task id → workspace id
	sets := map[string]externalSet{}   // workspace id → its set
	var wg sync.WaitGroup
	for _, sess := range active {
		if sess.State != model.SessionRunning {
			continue
		}
		ws, ok := workspaceOf[sess.TaskID]
		if !ok {
			task, err := s.store.GetTask(ctx, sess.TaskID)
			if err != nil {
				s.log.ErrorContext(ctx, "read a session's task for a catalog push", "session_id", sess.ID, "error", err.Error())
				continue
			}
			ws, workspaceOf[sess.TaskID] = task.WorkspaceID, task.WorkspaceID
		}
		set, ok := sets[ws]
		if !ok {
			if set.tools, set.gen, err = s.externalTools(ctx, ws); err != nil {
				s.log.ErrorContext(ctx, "read the external tools of a workspace", "workspace_id", ws, "error", err.Error())
				continue
			}
			sets[ws] = set
		}
		wg.Go(func() { s.pushExternal(ctx, sess, set) })
	}
	wg.Wait()
}

// pushExternal sends a session its workspace's current external tool set
// and records the generation applied (never moving backwards when pushes
// race), or the failure and the repair mark.
func (s *Service) pushExternal(ctx context.Context, sess model.Session, set externalSet) {
	tools, gen := set.tools, set.gen
	pushCtx, cancel := context.WithTimeout(ctx, s.pushTimeout)
	res, err := s.ctl.ApplySurface(pushCtx, handleOf(sess), executors.Surface{External: tools, ExternalGeneration: gen})
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("the session did not answer within %s", s.pushTimeout)
	}
	if err != nil {
		s.log.WarnContext(ctx, "external tools push failed", "session_id", sess.ID, "generation", gen, "error", err.Error())
		_, uerr := s.store.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
			if m.State != model.SessionRunning {
				return nil, errStateChanged // it ended meanwhile: nothing to repair
			}
			m.NeedsRepair, m.StatusMessage = true, "external tools push failed: "+err.Error()
			return []model.Event{{Kind: model.EventExternalToolsPushFailed,
				Message: fmt.Sprintf("generation %d: %v", gen, err)}}, nil
		})
		if uerr != nil && !errors.Is(uerr, errStateChanged) {
			s.log.ErrorContext(ctx, "record a failed push", "session_id", sess.ID, "error", uerr.Error())
		}
		return
	}
	// The repair mark goes only when both pushed sets are current; the
	// provider set is read only for a session that has the mark.
	var providerGen uint64
	providerErr := errStateChanged
	if sess.NeedsRepair {
		var ps model.ProviderSet
		ps, providerErr = s.store.TaskProviders(ctx, sess.TaskID)
		providerGen = ps.Generation
	}
	_, err = s.store.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
		if res.ExternalGeneration > m.ExternalGeneration {
			m.ExternalGeneration = res.ExternalGeneration
		}
		if providerErr == nil && m.Repaired(providerGen, gen) {
			m.NeedsRepair, m.StatusMessage = false, ""
		}
		if !res.ToolsChanged {
			return nil, nil // every catalog change reaches every session; only real changes are events
		}
		return []model.Event{{Kind: model.EventExternalToolsPushed, Message: describeExternal(tools, res.ExternalGeneration)}}, nil
	})
	if err != nil {
		s.log.ErrorContext(ctx, "record an external tools push", "session_id", sess.ID, "error", err.Error())
	}
	if res.ToolsChanged {
		s.log.InfoContext(ctx, "external tools pushed", "session_id", sess.ID, "generation", res.ExternalGeneration, "tools", len(tools))
	}
}

// describeExternal says which external tools a session now exposes.
func describeExternal(tools []executors.ExternalTool, gen uint64) string {
	if len(tools) == 0 {
		return fmt.Sprintf("no external tools (catalog generation %d)", gen)
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return fmt.Sprintf("external tools %s (catalog generation %d)", strings.Join(names, ", "), gen)
}

// catchUpExternal pushes a running session its external tool set when it
// is behind the catalog (a change while it was starting, a failed push, a
// restart between a change and its push).
func (s *Service) catchUpExternal(ctx context.Context, sess model.Session) {
	if sess.State != model.SessionRunning {
		return
	}
	set, err := s.externalSetOf(ctx, sess)
	if err != nil || (sess.ExternalGeneration >= set.gen && !sess.NeedsRepair) {
		return
	}
	s.pushExternal(ctx, sess, set)
}
