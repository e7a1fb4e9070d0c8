package console

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// maxListed bounds the tasks a list page walks, per workspace.
const maxListed = 200

// sessionRow is a session with its task, as the sessions page lists it.
type sessionRow struct {
	model.Session
	Task model.Task
}

// Behind reports whether the session has not applied its task's current
// provider set.
func (s sessionRow) Behind() bool { return s.Applied.Generation < s.Task.Providers.Generation }

func (c *Console) taskTree(ctx context.Context) ([]model.Workspace, map[string][]model.Task, error) {
	wss, err := c.svc.ListWorkspaces(ctx)
	if err != nil {
		return nil, nil, err
	}
	tasks := map[string][]model.Task{}
	for _, ws := range wss {
		list, err := c.svc.ListTasks(ctx, ws.ID)
		if err != nil {
			return nil, nil, err
		}
		if len(list) > maxListed {
			list = list[len(list)-maxListed:]
		}
		tasks[ws.ID] = list
	}
	return wss, tasks, nil
}

func (c *Console) sessionsPage(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	wss, tasks, err := c.taskTree(ctx)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	var rows []sessionRow
	for _, ws := range wss {
		for _, t := range tasks[ws.ID] {
			list, err := c.svc.ListSessions(ctx, t.ID)
			if err != nil {
				c.failErr(w, r, me, err)
				return
			}
			for _, s := range list {
				rows = append(rows, sessionRow{Session: s, Task: t})
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].CreatedAt.After(rows[j].CreatedAt) })
	c.render(w, r, http.StatusOK, "sessions", me, map[string]any{"Title": "Sessions", "Sessions": rows, "Workspaces": len(wss)})
}

func (c *Console) session(ctx context.Context, id string) (sessionRow, error) {
	s, err := c.svc.GetSession(ctx, id)
	if err != nil {
		return sessionRow{}, err
	}
	t, err := c.svc.GetTask(ctx, s.TaskID)
	return sessionRow{Session: s, Task: t}, err
}

func (c *Console) sessionPage(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	c.renderSession(ctx, w, r, me, http.StatusOK, "", false)
}

// renderSession answers with a session's page; refused is why a clean of
// its workspace was just refused ("": none was), discarded whether that
// clean discarded the work. The page shows the work as the session's
// record has it (GetSession): the stop's measure, not a new one.
func (c *Console) renderSession(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me, status int, refused string, discarded bool) {
	s, err := c.session(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	ws := s.Checkouts
	// The service removes a stopped session's kept workspace only
	// (Service.CleanSession); it refuses one whose record says a checkout
	// may hold work its provider lacks, unless the work is discarded.
	cleanable := s.State == model.SessionStopped && ws.Dir != "" && ws.Removed.IsZero()
	c.render(w, r, status, "session", me, map[string]any{"Title": "Session " + s.ID, "S": s,
		"Since": c.opts.Now().UnixNano(), "Running": s.State == model.SessionRunning,
		"Cleanable": cleanable, "CleanRefused": refused,
		"OfferDiscard": refused != "" && !discarded && cleanable && ws.Undelivered() != ""})
}

func (c *Console) resumeSession(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	if _, err := c.svc.ResumeSession(ctx, r.PathValue("id")); err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "/sessions/%s", r.PathValue("id"))
}

func (c *Console) stopSession(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	if _, err := c.svc.StopSession(ctx, r.PathValue("id"), false); err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "/sessions/%s", r.PathValue("id"))
}

// cleanSession removes a stopped session's workspace: CleanSession's role
// (member), with discard when the form says so. A refusal (the session
// runs, its executor removes no workspace, or its work may be
// undelivered) is shown on the session's page, which then offers to
// discard the work when that was the reason.
func (c *Console) cleanSession(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	discard := r.PostFormValue("discard") == "true"
	_, err := c.svc.CleanSession(ctx, r.PathValue("id"), discard)
	switch {
	case err == nil:
		c.see(w, r, "/sessions/%s", r.PathValue("id"))
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		c.renderSession(ctx, w, r, me, http.StatusConflict, c.explain(r, err), discard)
	default:
		c.failErr(w, r, me, err)
	}
}

// showSessionMCP answers the explicit "show" with the session's MCP
// configuration, bearer token included: GetSessionMCP's role (member).
func (c *Console) showSessionMCP(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	m, err := c.svc.GetSessionMCP(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.fragment(w, "mcp-config", me, map[string]any{"MCP": m, "Shown": true, "ID": r.PathValue("id")})
}

// maxLogShown bounds the agent log a page shows: the service sends the
// last 1 MiB; the page keeps the last 256 KiB of it.
const maxLogShown = 256 << 10

func (c *Console) sessionLog(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	var b strings.Builder
	err := c.svc.ReadSessionLog(ctx, r.PathValue("id"), service.LogAgent, false, func(s string) error {
		b.WriteString(s)
		return nil
	})
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	text := b.String()
	if len(text) > maxLogShown {
		text = text[len(text)-maxLogShown:]
	}
	c.fragment(w, "log", me, map[string]any{"Log": text})
}

func (c *Console) tasksPage(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	wss, tasks, err := c.taskTree(ctx)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.render(w, r, http.StatusOK, "tasks", me, map[string]any{"Title": "Tasks", "Workspaces": wss, "Tasks": tasks})
}

func (c *Console) taskPage(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	t, err := c.svc.GetTask(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	ws, err := c.svc.GetWorkspace(ctx, t.WorkspaceID)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	repos, err := c.svc.ListRepositories(ctx, t.WorkspaceID)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	names := map[string]string{}
	for _, repo := range repos {
		names[repo.ID] = repo.Host + "/" + repo.Path
	}
	attached := map[string]bool{}
	for _, tr := range t.Repositories {
		attached[tr.ID] = true
	}
	var addable []model.Repository
	for _, repo := range repos {
		if !attached[repo.ID] {
			addable = append(addable, repo)
		}
	}
	sessions, err := c.svc.ListSessions(ctx, t.ID)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	var pending []model.SourceRequest
	if me.Can(string(ViewRequests)) {
		if pending, err = c.svc.ListSourceRequests(ctx, store.SourceRequestFilter{TaskID: t.ID, State: model.SourceRequestPending}); err != nil {
			c.failErr(w, r, me, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "task", me, map[string]any{"Title": "Task " + t.Title, "T": t, "W": ws,
		"Addable": addable, "Sessions": sessions, "Pending": pending, "Policies": model.SourcePolicies, "RepoNames": names})
}

func (c *Console) addSources(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	ids := r.PostForm["repository"]
	if _, err := c.svc.AddSources(ctx, r.PathValue("id"), ids); err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "/tasks/%s", r.PathValue("id"))
}

func (c *Console) setPolicy(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	if _, err := c.svc.SetSourcePolicy(ctx, r.PathValue("id"), model.SourcePolicy(r.PostFormValue("policy"))); err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "%s", safeNext(r.PostFormValue("back")))
}

func (c *Console) approveRequest(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	d, err := c.svc.ApproveSourceRequest(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "/tasks/%s", d.Request.TaskID)
}

func (c *Console) rejectRequest(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	d, err := c.svc.RejectSourceRequest(ctx, r.PathValue("id"), r.PostFormValue("reason"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.see(w, r, "/tasks/%s", d.Request.TaskID)
}

func (c *Console) eventsPage(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	t, err := c.svc.GetTask(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	c.render(w, r, http.StatusOK, "events", me, map[string]any{"Title": "Events of " + t.Title, "T": t})
}

func (c *Console) workspacesPage(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	c.renderWorkspaces(ctx, w, r, me, nil)
}

func (c *Console) renderWorkspaces(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me, result map[string]any) {
	wss, err := c.svc.ListWorkspaces(ctx)
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	// A connection a provider asked to leave alone says for how long.
	waits := map[string]string{}
	for _, ws := range wss {
		for _, conn := range ws.Connections {
			if wait := c.svc.RateLimitWait(ws.ID, conn.Provider); wait > 0 {
				waits[ws.ID+"/"+string(conn.Provider)] = wait.Round(time.Second).String()
			}
		}
	}
	c.render(w, r, http.StatusOK, "workspaces", me, map[string]any{"Title": "Workspaces", "Workspaces": wss,
		"Result": result, "Policies": model.SourcePolicies, "Waits": waits})
}

// testConnection checks a connection again as 'workspace connect' does:
// the provider is asked who the credential authenticates as, and the
// answer is recorded (SetConnection with the connection's own values).
func (c *Console) testConnection(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me) {
	ws, err := c.svc.GetWorkspace(ctx, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, me, err)
		return
	}
	for _, conn := range ws.Connections {
		if string(conn.Provider) != r.PathValue("provider") {
			continue
		}
		res := map[string]any{"Workspace": ws.ID, "Provider": conn.Provider}
		updated, err := c.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: ws.ID, Provider: string(conn.Provider),
			APIBaseURL: conn.APIBaseURL, Credential: conn.Credential})
		if err != nil {
			res["Error"] = c.explain(r, err)
		} else {
			res["User"] = updated.Username
		}
		c.renderWorkspaces(ctx, w, r, me, res)
		return
	}
	c.fail(w, r, me, http.StatusNotFound, "This workspace has no such connection.")
}
