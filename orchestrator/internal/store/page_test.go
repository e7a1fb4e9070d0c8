package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// pages reads a listing page by page, limit items each, and returns the
// ids in order and the pages it took.
func pages[T any](t *testing.T, limit int, list func(store.Page) ([]T, error), cursor func(T) store.Cursor, id func(T) string) ([]string, [][]T) {
	t.Helper()
	var (
		ids []string
		all [][]T
		p   = store.Page{Limit: limit}
	)
	for {
		page, err := list(p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), limit)
		if len(page) == 0 {
			return ids, all
		}
		all = append(all, page)
		for _, item := range page {
			ids = append(ids, id(item))
		}
		p.After = cursor(page[len(page)-1])
		require.Less(t, len(all), 1000, "the pages end")
	}
}

func idsOf[T any](items []T, id func(T) string) []string {
	var out []string
	for _, item := range items {
		out = append(out, id(item))
	}
	return out
}

// TestListingsPageInTheirOrder: every listing the API pages (workspaces,
// repositories, tasks, sessions; of one parent and of every one) read
// page by page from each page's last item is the whole listing, each item
// once, in the listing's order, each task with its own repositories;
// also when every record has the same creation time (a coarse clock),
// where the id alone orders them.
func TestListingsPageInTheirOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		for _, clock := range []string{"real", "frozen"} {
			t.Run(clock, func(t *testing.T) {
				ctx := context.Background()
				opts := b.options(t)
				if clock == "frozen" {
					at := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
					opts.Clock = func() time.Time { return at }
				}
				s := openOptions(t, t.TempDir(), nil, opts)
				acme, globex := newFixture(t, s, "acme"), newFixture(t, s, "globex")
				for i := range 5 {
					_, err := s.CreateWorkspace(ctx, fmt.Sprintf("extra-%d", i))
					require.NoError(t, err)
				}
				for i, f := range []fixture{acme, globex, acme, acme, globex, acme, globex} {
					task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: fmt.Sprintf("t%d", i)}, f.github.ID)
					require.NoError(t, err)
					if i%2 == 0 {
						_, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID, f.local.ID}, testActor)
						require.NoError(t, err)
					}
					for range i % 3 {
						_, err := s.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending})
						require.NoError(t, err)
					}
				}

				taskID := func(x model.Task) string { return x.ID }
				taskAt := func(x model.Task) store.Cursor { return store.Cursor{Created: x.CreatedAt, ID: x.ID} }
				for _, parent := range []string{model.Every, acme.ws.ID, globex.ws.ID} {
					whole, err := s.ListTasks(ctx, parent)
					require.NoError(t, err)
					for _, limit := range []int{1, 2, 3, 100} {
						got, paged := pages(t, limit, func(p store.Page) ([]model.Task, error) { return s.ListTasksPage(ctx, parent, p) }, taskAt, taskID)
						assert.Equal(t, idsOf(whole, taskID), got, "tasks of %s by %d", parent, limit)
						byID := map[string]model.Task{}
						for _, x := range whole {
							byID[x.ID] = x
						}
						for _, page := range paged {
							for _, x := range page {
								assert.Equal(t, byID[x.ID].Repositories, x.Repositories, "task %s with its own repositories", x.ID)
								assert.Equal(t, byID[x.ID].Providers, x.Providers)
							}
						}
					}
				}

				sessID := func(x model.Session) string { return x.ID }
				sessAt := func(x model.Session) store.Cursor { return store.Cursor{Created: x.CreatedAt, ID: x.ID} }
				whole, err := s.ListSessions(ctx, model.Every)
				require.NoError(t, err)
				require.NotEmpty(t, whole)
				for _, limit := range []int{1, 2, 5} {
					got, _ := pages(t, limit, func(p store.Page) ([]model.Session, error) { return s.ListSessionsPage(ctx, model.Every, p) }, sessAt, sessID)
					assert.Equal(t, idsOf(whole, sessID), got, "sessions by %d", limit)
				}
				own, err := s.ListSessions(ctx, whole[0].TaskID)
				require.NoError(t, err)
				got, _ := pages(t, 1, func(p store.Page) ([]model.Session, error) { return s.ListSessionsPage(ctx, whole[0].TaskID, p) }, sessAt, sessID)
				assert.Equal(t, idsOf(own, sessID), got, "a task's own sessions")

				repoID := func(x model.Repository) string { return x.ID }
				repoAt := func(x model.Repository) store.Cursor { return store.Cursor{Created: x.CreatedAt, ID: x.ID} }
				for _, parent := range []string{model.Every, globex.ws.ID} {
					whole, err := s.ListRepositories(ctx, parent)
					require.NoError(t, err)
					got, _ := pages(t, 3, func(p store.Page) ([]model.Repository, error) { return s.ListRepositoriesPage(ctx, parent, p) }, repoAt, repoID)
					assert.Equal(t, idsOf(whole, repoID), got, "repositories of %s", parent)
				}

				wsID := func(x model.Workspace) string { return x.ID }
				wsAt := func(x model.Workspace) store.Cursor { return store.Cursor{Created: x.CreatedAt, ID: x.ID} }
				all, err := s.ListWorkspaces(ctx)
				require.NoError(t, err)
				require.Len(t, all, 7)
				got, paged := pages(t, 2, func(p store.Page) ([]model.Workspace, error) { return s.ListWorkspacesPage(ctx, p) }, wsAt, wsID)
				assert.Equal(t, idsOf(all, wsID), got, "workspaces")
				assert.Len(t, paged, 4)
				for _, page := range paged {
					for _, ws := range page {
						for _, w := range all {
							if w.ID == ws.ID {
								assert.Equal(t, w.Connections, ws.Connections, "workspace %s with its own connections", ws.ID)
							}
						}
					}
				}
			})
		}
	})
}

// TestWhatOthersReportIsBounded: text the orchestrator writes from what
// other components report (an event's message, a session's status and
// its checkouts' errors) is cut to its bound, on a character boundary,
// and marked; shorter text is kept as it is.
func TestWhatOthersReportIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &recorder{}
	s := open(t, t.TempDir(), rec)
	f := newFixture(t, s, "acme")
	task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
	require.NoError(t, err)
	huge := "a" + strings.Repeat("𝕏", store.MaxMessageBytes) // not on a boundary at the bound
	require.NoError(t, s.AppendEvents(ctx, model.Event{TaskID: task.ID, Kind: model.EventAgentExited, Message: huge}))
	events, err := s.Events(ctx, task.ID, 0, 100)
	require.NoError(t, err)
	last := events[len(events)-1].Message
	assert.LessOrEqual(t, len(last), store.MaxMessageBytes)
	assert.Greater(t, len(last), store.MaxMessageBytes-8)
	assert.True(t, utf8.ValidString(last), "cut on a character boundary")
	assert.True(t, strings.HasPrefix(huge, strings.TrimSuffix(last, " … (cut)")))
	assert.True(t, strings.HasSuffix(last, " … (cut)"))

	sess, err := s.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending})
	require.NoError(t, err)
	sess, err = s.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
		m.State, m.StatusMessage = model.SessionFailed, huge
		m.Checkouts.Repositories = []model.Checkout{{RepositoryID: f.github.ID, Key: "github.com/acme/api", Error: huge,
			Work: &model.Work{Error: huge}}, {RepositoryID: f.gitlab.ID, Error: "short"}}
		return nil, nil
	})
	require.NoError(t, err)
	got, err := s.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(got.StatusMessage), store.MaxMessageBytes)
	assert.True(t, utf8.ValidString(got.StatusMessage))
	require.Len(t, got.Checkouts.Repositories, 2)
	assert.LessOrEqual(t, len(got.Checkouts.Repositories[0].Error), 4<<10)
	assert.LessOrEqual(t, len(got.Checkouts.Repositories[0].Work.Error), 4<<10)
	assert.Equal(t, "short", got.Checkouts.Repositories[1].Error)
	assert.Equal(t, sess.StatusMessage, got.StatusMessage, "the caller gets what was stored")
}
