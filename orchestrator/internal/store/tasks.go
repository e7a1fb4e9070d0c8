package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// MaxTaskRepositories is the most repositories one task may have
// attached: a task is listed, and pushed to its sessions, with every one
// of them, so this bounds the bytes of one task in a listing (each
// repository's text is bounded by package textlimit).
const MaxTaskRepositories = 128

// CreateTask records a task in its workspace with primaryRepoID as its
// primary repository (position 0), at provider generation 1.
func (s *Store) CreateTask(ctx context.Context, task model.Task, primaryRepoID string) (model.Task, error) {
	id := newID("task")
	err := s.write(ctx, func(t *tx) error {
		if err := workspaceExists(ctx, t, task.WorkspaceID); err != nil {
			return err
		}
		if err := attachable(ctx, t, task.WorkspaceID, primaryRepoID, "repository_id"); err != nil {
			return err
		}
		now := formatTime(t.now)
		if _, err := t.ExecContext(ctx, `
			INSERT INTO tasks (id, workspace_id, title, description, provider_generation, created_at, updated_at)
			VALUES (?, ?, ?, ?, 1, ?, ?)`, id, task.WorkspaceID, task.Title, task.Description, now, now); err != nil {
			return err
		}
		if _, err := t.ExecContext(ctx, `
			INSERT INTO task_repositories (task_id, repository_id, position, is_primary) VALUES (?, ?, 0, 1)`,
			id, primaryRepoID); err != nil {
			return err
		}
		var err error
		if task, err = loadTask(ctx, t, id); err != nil {
			return err
		}
		return t.emit(ctx, model.Event{
			TaskID: id, Kind: model.EventTaskCreated, RepositoryIDs: []string{primaryRepoID}, Providers: task.Providers,
			Message: fmt.Sprintf("task created on %s", describeRepo(task.Repositories[0].Repository)),
		})
	})
	return task, err
}

// AddSources attaches repoIDs to a task as one batch, after the task's
// current repositories and in the given order, and moves the task to the
// next provider generation. Either every repository is attached or none
// is. by made the change; the sources.added event records it. The
// returned task carries the provider set recomputed after the batch.
func (s *Store) AddSources(ctx context.Context, taskID string, repoIDs []string, by model.Actor) (model.Task, error) {
	var task model.Task
	err := s.write(ctx, func(t *tx) (err error) {
		task, err = attach(ctx, t, taskID, repoIDs, model.Event{Actor: by})
		return err
	})
	return task, err
}

// attach is AddSources inside t. The sources.added event starts from e
// (its actor, session and a note to append to the message).
func attach(ctx context.Context, t *tx, taskID string, repoIDs []string, e model.Event) (model.Task, error) {
	var workspaceID string
	var next int
	err := t.QueryRowContext(ctx, `
		SELECT t.workspace_id, coalesce(max(tr.position) + 1, 0)
		FROM tasks t LEFT JOIN task_repositories tr ON tr.task_id = t.id
		WHERE t.id = ? GROUP BY t.id`, taskID).Scan(&workspaceID, &next)
	if errors.Is(err, sql.ErrNoRows) {
		return model.Task{}, errdefs.NotFound("task", taskID)
	} else if err != nil {
		return model.Task{}, err
	}
	if next+len(repoIDs) > MaxTaskRepositories {
		return model.Task{}, errdefs.InvalidField("repository_ids", "task %q has %d repositories; %d more would make %d, and the limit is %d",
			taskID, next, len(repoIDs), next+len(repoIDs), MaxTaskRepositories)
	}
	for i, repoID := range repoIDs {
		field := fmt.Sprintf("repository_ids[%d]", i)
		if err := attachable(ctx, t, workspaceID, repoID, field); err != nil {
			return model.Task{}, err
		}
		_, err := t.ExecContext(ctx, `
			INSERT INTO task_repositories (task_id, repository_id, position, is_primary) VALUES (?, ?, ?, 0)`,
			taskID, repoID, next+i)
		if isUnique(err) {
			return model.Task{}, errdefs.AlreadyExists("repository %q (%s) is already attached to task %q", repoID, field, taskID)
		} else if err != nil {
			return model.Task{}, err
		}
	}
	if _, err := t.ExecContext(ctx, `
		UPDATE tasks SET provider_generation = provider_generation + 1, updated_at = ? WHERE id = ?`,
		formatTime(t.now), taskID); err != nil {
		return model.Task{}, err
	}
	// The batch's one recompute: the task as it now is, its provider set
	// derived from its repositories in the batch's transaction. The event
	// and the caller (task.Providers) get this one value.
	task, err := loadTask(ctx, t, taskID)
	if err != nil {
		return model.Task{}, err
	}
	set := task.Providers
	e.TaskID, e.Kind, e.RepositoryIDs, e.Providers = taskID, model.EventSourcesAdded, repoIDs, set
	e.Message = strings.TrimSpace(fmt.Sprintf("%d repositories attached by %s; providers now %s %s",
		len(repoIDs), describeActor(e.Actor), describeSet(set.Set), e.Message))
	if err := t.emit(ctx, e); err != nil {
		return model.Task{}, err
	}
	return task, nil
}

// describeActor renders who made a change for a message; the zero actor
// (a change recorded before actors were) is "unknown".
func describeActor(a model.Actor) string {
	if a.Kind == "" {
		return "unknown"
	}
	return a.String()
}

// attachable checks that repoID exists and belongs to workspaceID; field
// names the request field that carried repoID.
func attachable(ctx context.Context, q queryer, workspaceID, repoID, field string) error {
	var repoWorkspace string
	err := q.QueryRowContext(ctx, `SELECT workspace_id FROM repositories WHERE id = ?`, repoID).Scan(&repoWorkspace)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", field, errdefs.NotFound("repository", repoID))
	} else if err != nil {
		return err
	}
	if repoWorkspace != workspaceID {
		return errdefs.InvalidField(field, "repository %q belongs to workspace %q, not %q", repoID, repoWorkspace, workspaceID)
	}
	return nil
}

// TaskProviders computes a task's provider set with one joined query: the
// union, through the allowlist, of the providers of every repository
// attached to the task, with the task's current generation.
func (s *Store) TaskProviders(ctx context.Context, taskID string) (model.ProviderSet, error) {
	return taskProviders(ctx, s.r, taskID)
}

// taskExists checks a task exists, without deriving anything from it.
func taskExists(ctx context.Context, q queryer, id string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return errdefs.NotFound("task", id)
	}
	return err
}

func taskProviders(ctx context.Context, q queryer, taskID string) (model.ProviderSet, error) {
	rows, err := q.QueryContext(ctx, `
		SELECT t.provider_generation, r.provider
		FROM tasks t
		LEFT JOIN task_repositories tr ON tr.task_id = t.id
		LEFT JOIN repositories r ON r.id = tr.repository_id
		WHERE t.id = ?`, taskID)
	if err != nil {
		return model.ProviderSet{}, err
	}
	defer rows.Close()
	var (
		set   model.ProviderSet
		found bool
	)
	for rows.Next() {
		var provider sql.NullString
		if err := rows.Scan(&set.Generation, &provider); err != nil {
			return model.ProviderSet{}, err
		}
		found = true
		set.Set = set.Set.Union(providers.Of(provider.String))
	}
	if err := rows.Err(); err != nil {
		return model.ProviderSet{}, err
	}
	if !found {
		return model.ProviderSet{}, errdefs.NotFound("task", taskID)
	}
	return set, nil
}

// GetTask returns a task with its repositories and provider set.
func (s *Store) GetTask(ctx context.Context, id string) (task model.Task, err error) {
	err = s.read(ctx, func(q queryer) error {
		task, err = loadTask(ctx, q, id)
		return err
	})
	return task, err
}

// ListTasks returns a workspace's tasks, oldest first; with model.Every,
// every workspace's.
func (s *Store) ListTasks(ctx context.Context, workspaceID string) ([]model.Task, error) {
	return s.ListTasksPage(ctx, workspaceID, Page{})
}

// ListTasksPage returns the page p of ListTasks: the workspace's tasks
// after p.After, at most p.Limit of them, each with its repositories.
func (s *Store) ListTasksPage(ctx context.Context, workspaceID string, p Page) (tasks []model.Task, err error) {
	err = s.read(ctx, func(q queryer) error {
		owner, args := `t.workspace_id = ?`, []any{workspaceID}
		if workspaceID == model.Every {
			owner, args = ``, nil
		} else if err := workspaceExists(ctx, q, workspaceID); err != nil {
			return err
		}
		after, afterArgs := p.where(`t.`)
		args = append(args, afterArgs...)
		where := and(owner, after)
		if tasks, err = queryTasks(ctx, q, where+` ORDER BY t.created_at, t.id`+p.limit(), args...); err != nil {
			return err
		}
		if p.Limit > 0 {
			// The page's tasks' repositories only.
			where = ` WHERE t.id IN (SELECT t.id FROM tasks t` + where + ` ORDER BY t.created_at, t.id` + p.limit() + `)`
		}
		links, err := queryLinks(ctx, q, where, args...)
		for i := range tasks {
			withRepositories(&tasks[i], links[tasks[i].ID])
		}
		return err
	})
	return tasks, err
}

func loadTask(ctx context.Context, q queryer, id string) (model.Task, error) {
	tasks, err := queryTasks(ctx, q, `WHERE t.id = ?`, id)
	if err != nil {
		return model.Task{}, err
	}
	if len(tasks) == 0 {
		return model.Task{}, errdefs.NotFound("task", id)
	}
	links, err := queryLinks(ctx, q, `WHERE t.id = ?`, id)
	if err != nil {
		return model.Task{}, err
	}
	withRepositories(&tasks[0], links[id])
	return tasks[0], nil
}

// withRepositories attaches repos to task and derives its provider set
// from them, through the same allowlist as TaskProviders.
func withRepositories(task *model.Task, repos []model.TaskRepository) {
	task.Repositories = repos
	task.Providers.Set = providers.Set{}
	for _, r := range repos {
		task.Providers.Set = task.Providers.Set.Union(providers.Of(r.Provider))
	}
}

func queryTasks(ctx context.Context, q queryer, where string, args ...any) ([]model.Task, error) {
	rows, err := q.QueryContext(ctx, `
		SELECT t.id, t.workspace_id, t.title, t.description, t.provider_generation, t.created_at, t.updated_at
		FROM tasks t `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.Task
	for rows.Next() {
		var (
			task             model.Task
			created, updated string
		)
		if err := rows.Scan(&task.ID, &task.WorkspaceID, &task.Title, &task.Description,
			&task.Providers.Generation, &created, &updated); err != nil {
			return nil, err
		}
		if task.CreatedAt, err = parseTime(created); err != nil {
			return nil, err
		}
		if task.UpdatedAt, err = parseTime(updated); err != nil {
			return nil, err
		}
		out = append(out, task)
	}
	return out, rows.Err()
}

// queryLinks returns attached repositories keyed by task id, in position
// order.
func queryLinks(ctx context.Context, q queryer, where string, args ...any) (map[string][]model.TaskRepository, error) {
	rows, err := q.QueryContext(ctx, `
		SELECT `+repoColumns+`, tr.task_id, tr.position, tr.is_primary
		FROM task_repositories tr
		JOIN tasks t ON t.id = tr.task_id
		JOIN repositories r ON r.id = tr.repository_id `+where+`
		ORDER BY tr.task_id, tr.position`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]model.TaskRepository{}
	for rows.Next() {
		var (
			link   model.TaskRepository
			taskID string
		)
		if link.Repository, err = scanRepository(rows, &taskID, &link.Position, &link.Primary); err != nil {
			return nil, err
		}
		out[taskID] = append(out[taskID], link)
	}
	return out, rows.Err()
}

func describeRepo(r model.Repository) string {
	if r.Host == "" {
		return r.Path
	}
	return r.Host + "/" + r.Path
}

func describeSet(s providers.Set) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
