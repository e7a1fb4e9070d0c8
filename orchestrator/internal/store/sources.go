package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// ErrSourceAdditionDenied is an agent's batch refused by its workspace's
// deny policy. It matches errdefs.ErrPermissionDenied.
var ErrSourceAdditionDenied = fmt.Errorf("source addition denied: %w", errdefs.ErrPermissionDenied)

// AgentSources is what became of an agent's batch under its workspace's
// policy: attached (Task is set) or held for approval (Request is set).
type AgentSources struct {
	Policy  model.SourcePolicy
	Task    model.Task
	Request *model.SourceRequest
}

// AgentAddSources applies the task's workspace policy to a batch an agent
// asked for through session sessionID, in one transaction, so that a
// policy change is either wholly before or wholly after it. The batch is
// checked as AddSources checks it first (the same errors, whatever the
// policy). Under allow it is attached with the session as its actor; under
// deny nothing changes and the error wraps ErrSourceAdditionDenied; under
// approve a pending request is recorded with a sources.requested event (the
// same batch asked again while pending gives the same request, unchanged).
func (s *Store) AgentAddSources(ctx context.Context, taskID, sessionID string, repoIDs []string) (AgentSources, error) {
	by := model.Actor{Kind: model.ActorSession, Name: sessionID}
	var out AgentSources
	err := s.write(ctx, func(t *tx) error {
		var workspaceID string
		err := t.QueryRowContext(ctx, `
			SELECT w.id, w.agent_sources FROM tasks t JOIN workspaces w ON w.id = t.workspace_id WHERE t.id = ?`,
			taskID).Scan(&workspaceID, &out.Policy)
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFound("task", taskID)
		} else if err != nil {
			return err
		}
		if err := requestable(ctx, t, taskID, workspaceID, repoIDs); err != nil {
			return err
		}
		switch out.Policy {
		case model.SourcePolicyAllow:
			out.Task, err = attach(ctx, t, taskID, repoIDs, model.Event{Actor: by, SessionID: sessionID})
			return err
		case model.SourcePolicyApprove:
			ids, _ := json.Marshal(repoIDs)
			// The same batch asked again while pending is the same request.
			var existing string
			err := t.QueryRowContext(ctx, `
				SELECT id FROM source_requests WHERE task_id = ? AND state = 'pending' AND repository_ids = ?`,
				taskID, string(ids)).Scan(&existing)
			if err == nil {
				req, err := loadSourceRequest(ctx, t, existing)
				out.Request = &req
				return err
			} else if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			req := model.SourceRequest{
				ID: newID("sreq"), TaskID: taskID, WorkspaceID: workspaceID, SessionID: sessionID,
				RepositoryIDs: repoIDs, State: model.SourceRequestPending, RequestedBy: by, AttachedIDs: []string{},
				CreatedAt: t.now,
			}
			if _, err := t.ExecContext(ctx, `
				INSERT INTO source_requests (id, task_id, session_id, repository_ids, state, requested_by, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, req.ID, taskID, sessionID, string(ids), string(req.State), by.String(),
				formatTime(t.now)); err != nil {
				return err
			}
			out.Request = &req
			return t.emit(ctx, model.Event{
				TaskID: taskID, Kind: model.EventSourcesRequested, SessionID: sessionID, RepositoryIDs: repoIDs, Actor: by,
				Message: fmt.Sprintf("source request %s: %s asks to attach %d repositories; awaiting a person's decision",
					req.ID, by, len(repoIDs)),
			})
		default: // deny, and anything the schema's CHECK would not let in
			names, err := describeRepos(ctx, t, repoIDs)
			if err != nil {
				return err
			}
			return fmt.Errorf("the workspace's policy does not let agents attach repositories; ask a person to attach %s to task %q (toolscope source add): %w",
				names, taskID, ErrSourceAdditionDenied)
		}
	})
	return out, err
}

// requestable checks an agent's batch as attach would, without writing:
// every repository exists, belongs to the task's workspace and is not
// attached yet.
func requestable(ctx context.Context, q queryer, taskID, workspaceID string, repoIDs []string) error {
	attached, err := attachedIDs(ctx, q, taskID)
	if err != nil {
		return err
	}
	for i, repoID := range repoIDs {
		field := fmt.Sprintf("repository_ids[%d]", i)
		if err := attachable(ctx, q, workspaceID, repoID, field); err != nil {
			return err
		}
		if slices.Contains(attached, repoID) {
			return errdefs.AlreadyExists("repository %q (%s) is already attached to task %q", repoID, field, taskID)
		}
	}
	return nil
}

func attachedIDs(ctx context.Context, q queryer, taskID string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT repository_id FROM task_repositories WHERE task_id = ?`, taskID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// describeRepos names repositories for a message a person or an agent
// reads: `repo_x (github.com/acme/api)`, or the id alone if it is unknown.
func describeRepos(ctx context.Context, q queryer, ids []string) (string, error) {
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		var host, path string
		err := q.QueryRowContext(ctx, `SELECT host, path FROM repositories WHERE id = ?`, id).Scan(&host, &path)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			parts = append(parts, id)
		case err != nil:
			return "", err
		default:
			parts = append(parts, fmt.Sprintf("%s (%s)", id, describeRepo(model.Repository{Host: host, Path: path})))
		}
	}
	return strings.Join(parts, ", "), nil
}

// ErrAlreadyDecided is a decision on a request that is no longer pending.
// It matches errdefs.ErrFailedPrecondition.
var ErrAlreadyDecided = fmt.Errorf("source request already decided: %w", errdefs.ErrFailedPrecondition)

// Decision is a person's answer to a pending source request.
type Decision struct {
	Approve bool
	By      model.Actor
	Reason  string // for a rejection
}

// Decided is a decision's outcome: the request as decided, the prompt
// that tells the agent, and, when an approval attached something, the
// task after the batch.
type Decided struct {
	Request  model.SourceRequest
	Prompt   model.Prompt
	Task     model.Task
	Attached bool
}

// DecideSourceRequest approves or rejects a pending request in one
// transaction, with its sources.request_decided event and a prompt in the
// task's inbox. An approval attaches, as one batch with d.By as its actor,
// the request's repositories that are not attached by now; if one of them
// no longer exists or is no longer the workspace's, nothing changes and
// the error says to reject the request. A request already decided is
// ErrAlreadyDecided.
func (s *Store) DecideSourceRequest(ctx context.Context, id string, d Decision) (Decided, error) {
	var out Decided
	err := s.write(ctx, func(t *tx) error {
		req, err := loadSourceRequest(ctx, t, id)
		if err != nil {
			return err
		}
		if req.State != model.SourceRequestPending {
			return fmt.Errorf("source request %q was %s by %s at %s: %w", id, req.State, describeActor(req.DecidedBy),
				formatTime(req.DecidedAt), ErrAlreadyDecided)
		}
		if d.Approve {
			req.State = model.SourceRequestApproved
			attached, err := attachedIDs(ctx, t, req.TaskID)
			if err != nil {
				return err
			}
			for i, repoID := range req.RepositoryIDs {
				if err := attachable(ctx, t, req.WorkspaceID, repoID, fmt.Sprintf("repository_ids[%d]", i)); err != nil {
					return errdefs.FailedPrecondition("source request %q cannot be approved: %v; reject it instead", id, err)
				}
				if !slices.Contains(attached, repoID) {
					req.AttachedIDs = append(req.AttachedIDs, repoID)
				}
			}
			if len(req.AttachedIDs) > 0 {
				out.Task, err = attach(ctx, t, req.TaskID, req.AttachedIDs, model.Event{
					Actor: d.By, SessionID: req.SessionID,
					Message: fmt.Sprintf("(source request %s of %s)", req.ID, describeActor(req.RequestedBy)),
				})
				if err != nil {
					return err
				}
				out.Attached = true
			}
		} else {
			req.State, req.Reason = model.SourceRequestRejected, d.Reason
		}
		req.DecidedBy, req.DecidedAt = d.By, t.now
		out.Prompt, err = decide(ctx, t, req)
		out.Request = req
		return err
	})
	return out, err
}

// decide records req's decision (state, decider, reason, attached
// repositories), its event, and the prompt that tells the agent.
func decide(ctx context.Context, t *tx, req model.SourceRequest) (model.Prompt, error) {
	if req.AttachedIDs == nil {
		req.AttachedIDs = []string{}
	}
	attachedJSON, _ := json.Marshal(req.AttachedIDs)
	if _, err := t.ExecContext(ctx, `
		UPDATE source_requests SET state = ?, decided_by = ?, reason = ?, attached_ids = ?, decided_at = ? WHERE id = ?`,
		string(req.State), req.DecidedBy.String(), req.Reason, string(attachedJSON), formatTime(req.DecidedAt), req.ID); err != nil {
		return model.Prompt{}, err
	}
	names, err := describeRepos(ctx, t, req.RepositoryIDs)
	if err != nil {
		return model.Prompt{}, err
	}
	var event, prompt string
	if req.State == model.SourceRequestApproved {
		event = fmt.Sprintf("source request %s approved by %s", req.ID, describeActor(req.DecidedBy))
		prompt = fmt.Sprintf("Source request %s (%s) was approved by %s.", req.ID, names, describeActor(req.DecidedBy))
		if len(req.AttachedIDs) < len(req.RepositoryIDs) {
			prompt += fmt.Sprintf(" %d of them were already attached.", len(req.RepositoryIDs)-len(req.AttachedIDs))
		}
		if len(req.AttachedIDs) > 0 {
			prompt += " They are attached now; your tool list shows their providers' tools."
		}
	} else {
		event = fmt.Sprintf("source request %s rejected by %s", req.ID, describeActor(req.DecidedBy))
		prompt = fmt.Sprintf("Source request %s (%s) was rejected by %s", req.ID, names, describeActor(req.DecidedBy))
		if req.Reason != "" {
			event += ": " + req.Reason
			prompt += ": " + req.Reason
		}
		prompt += ". Do not ask again for these repositories; ask a person if you still need them."
	}
	if err := t.emit(ctx, model.Event{
		TaskID: req.TaskID, Kind: model.EventSourceRequestDecided, SessionID: req.SessionID,
		RepositoryIDs: req.RepositoryIDs, Actor: req.DecidedBy, Message: event,
	}); err != nil {
		return model.Prompt{}, err
	}
	p := model.Prompt{Text: prompt}
	err = t.prompt(ctx, req.TaskID, &p)
	return p, err
}

// PolicyChange is a workspace's new source policy and the requests the
// change rejected, with the prompts that tell their agents.
type PolicyChange struct {
	Workspace model.Workspace
	Rejected  []Decided
}

// SetSourcePolicy sets a workspace's policy for agent-initiated additions.
// Switching to deny rejects the workspace's pending requests in the same
// transaction (by is their decider, and the reason says why); switching to
// allow or approve leaves them for a person to decide.
func (s *Store) SetSourcePolicy(ctx context.Context, workspaceID string, p model.SourcePolicy, by model.Actor) (PolicyChange, error) {
	var out PolicyChange
	err := s.write(ctx, func(t *tx) error {
		res, err := t.ExecContext(ctx, `UPDATE workspaces SET agent_sources = ? WHERE id = ?`, string(p), workspaceID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("workspace", workspaceID)
		}
		if p == model.SourcePolicyDeny {
			pending, err := querySourceRequests(ctx, t, SourceRequestFilter{WorkspaceID: workspaceID, State: model.SourceRequestPending})
			if err != nil {
				return err
			}
			for _, req := range pending {
				req.State, req.DecidedBy, req.DecidedAt = model.SourceRequestRejected, by, t.now
				req.Reason = "the workspace's policy for agent source additions changed to deny"
				prompt, err := decide(ctx, t, req)
				if err != nil {
					return err
				}
				out.Rejected = append(out.Rejected, Decided{Request: req, Prompt: prompt})
			}
		}
		out.Workspace, err = scanWorkspace(t.QueryRowContext(ctx,
			`SELECT id, name, agent_sources, created_at FROM workspaces WHERE id = ?`, workspaceID))
		if err != nil {
			return err
		}
		conns, err := connections(ctx, t, workspaceID)
		out.Workspace.Connections = conns[workspaceID]
		return err
	})
	return out, err
}

// SourceRequestFilter selects source requests; empty fields select all.
type SourceRequestFilter struct {
	TaskID      string
	WorkspaceID string
	State       model.SourceRequestState
}

// ListSourceRequests returns the requests f selects, oldest first. A task
// or workspace it names must exist.
func (s *Store) ListSourceRequests(ctx context.Context, f SourceRequestFilter) (out []model.SourceRequest, err error) {
	err = s.read(ctx, func(q queryer) error {
		if f.TaskID != "" {
			if err := taskExists(ctx, q, f.TaskID); err != nil {
				return err
			}
		}
		if f.WorkspaceID != "" {
			if err := workspaceExists(ctx, q, f.WorkspaceID); err != nil {
				return err
			}
		}
		out, err = querySourceRequests(ctx, q, f)
		return err
	})
	return out, err
}

// GetSourceRequest returns one request.
func (s *Store) GetSourceRequest(ctx context.Context, id string) (req model.SourceRequest, err error) {
	err = s.read(ctx, func(q queryer) error {
		req, err = loadSourceRequest(ctx, q, id)
		return err
	})
	return req, err
}

const sourceRequestColumns = `r.id, r.task_id, t.workspace_id, r.session_id, r.repository_ids, r.state, r.requested_by,
	r.decided_by, r.reason, r.attached_ids, r.created_at, r.decided_at`

func loadSourceRequest(ctx context.Context, q queryer, id string) (model.SourceRequest, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+sourceRequestColumns+`
		FROM source_requests r JOIN tasks t ON t.id = r.task_id WHERE r.id = ?`, id)
	if err != nil {
		return model.SourceRequest{}, err
	}
	reqs, err := scanSourceRequests(rows)
	if err != nil {
		return model.SourceRequest{}, err
	}
	if len(reqs) == 0 {
		return model.SourceRequest{}, errdefs.NotFound("source request", id)
	}
	return reqs[0], nil
}

func querySourceRequests(ctx context.Context, q queryer, f SourceRequestFilter) ([]model.SourceRequest, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+sourceRequestColumns+`
		FROM source_requests r JOIN tasks t ON t.id = r.task_id
		WHERE (CAST(? AS TEXT) = '' OR r.task_id = ?) AND (CAST(? AS TEXT) = '' OR t.workspace_id = ?) AND (CAST(? AS TEXT) = '' OR r.state = ?)
		ORDER BY r.created_at, r.id`,
		f.TaskID, f.TaskID, f.WorkspaceID, f.WorkspaceID, string(f.State), string(f.State))
	if err != nil {
		return nil, err
	}
	return scanSourceRequests(rows)
}

func scanSourceRequests(rows *sql.Rows) ([]model.SourceRequest, error) {
	defer rows.Close()
	var out []model.SourceRequest
	for rows.Next() {
		var (
			r                                      model.SourceRequest
			ids, attached, by, decider, c, dAt, st string
		)
		if err := rows.Scan(&r.ID, &r.TaskID, &r.WorkspaceID, &r.SessionID, &ids, &st, &by, &decider, &r.Reason,
			&attached, &c, &dAt); err != nil {
			return nil, err
		}
		r.State, r.RequestedBy, r.DecidedBy = model.SourceRequestState(st), model.ParseActor(by), model.ParseActor(decider)
		if err := json.Unmarshal([]byte(ids), &r.RepositoryIDs); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(attached), &r.AttachedIDs); err != nil {
			return nil, err
		}
		var err error
		if r.CreatedAt, err = parseTime(c); err != nil {
			return nil, err
		}
		if r.DecidedAt, err = parseTime(dAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
