package standin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/toolscope/toolscope/internal/gittest"
)

// GitLab is a fake GitLab REST API (v4).
type GitLab struct {
	URL   string // API base URL, .../api/v4, for a connection's api_base_url
	Token string
	User  GitLabUser

	mu       sync.Mutex
	projects map[string]*glProject
	users    map[string]GitLabUser
	requests []string
	failures []failure
	nextID   int64
	PageSize int
	// OmitReviewers leaves "reviewers" out of merge request answers, as
	// some GitLab versions and endpoints do.
	OmitReviewers bool
	echo          bool     // see EchoCredentials
	echoed        []string // the bodies that echoed a credential
	srv           *httptest.Server
	git           *gittest.Host
}

// GitLabUser is a user of the fake.
type GitLabUser struct {
	ID       int64
	Username string
}

type glProject struct {
	id            int64
	defaultBranch string
	branches      map[string]bool
	mrs           map[int64]*GitLabMR
	next          int64
}

// GitLabMR is a merge request of the fake.
type GitLabMR struct {
	IID         int64
	Title       string
	Description string
	Source      string
	Target      string
	SHA         string
	Draft       bool
	State       string
	MergeStatus string
	Pipeline    string // head pipeline status, "" for none
	Reviewers   []int64
	ApprovedBy  []string
	Discussions []*glDiscussion
}

type glDiscussion struct {
	ID    string
	Notes []*glNote
}

type glNote struct {
	ID         int64
	Author     string
	Body       string
	Path       string
	Line       int
	Resolvable bool
	Resolved   bool
	System     bool
}

// NewGitLab starts a stand-in GitLab on loopback whose token
// authenticates username. Close stops it.
func NewGitLab(token, username string) *GitLab {
	g := &GitLab{Token: token, User: GitLabUser{ID: 1, Username: username}, projects: map[string]*glProject{},
		users: map[string]GitLabUser{username: {ID: 1, Username: username}}, nextID: 5000, PageSize: 2}
	g.git = gittest.New(token, func(path string, branches []string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if p := g.projects[path]; p != nil {
			for _, b := range branches {
				p.branches[b] = true
			}
		}
	})
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.URL = g.srv.URL + "/api/v4"
	return g
}

// Close stops the server and removes its git repositories.
func (g *GitLab) Close() { g.srv.Close(); g.git.Close() }

// SeedProject creates group/name as AddProject does, and also as a git
// repository served at GitURL, with one commit holding files on every
// branch; it returns that commit.
func (g *GitLab) SeedProject(path string, files map[string]string, branches ...string) (string, error) {
	g.AddProject(path, branches...)
	return g.git.Seed(path, files, branches...)
}

// GitURL is the clone URL of a seeded project (git's smart HTTP; basic
// authentication, user oauth2, with the token as password).
func (g *GitLab) GitURL(path string) string { return g.srv.URL + "/" + path + ".git" }

// Head returns the commit a branch of a seeded project points at.
func (g *GitLab) Head(path, branch string) (string, bool) { return g.git.Head(path, branch) }

// EchoCredentials makes every error answer (status 400 or more) echo the
// request's PRIVATE-TOKEN header in its message, as some proxies and
// self-managed instances do.
func (g *GitLab) EchoCredentials(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.echo = on
}

// Echoed returns every error body that echoed a credential.
func (g *GitLab) Echoed() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.echoed...)
}

// AddProject creates a project (group/.../name) with branches; the first
// is the default.
func (g *GitLab) AddProject(path string, branches ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := &glProject{id: int64(len(g.projects) + 10), defaultBranch: branches[0], branches: map[string]bool{}, mrs: map[int64]*GitLabMR{}, next: 1}
	for _, b := range branches {
		p.branches[b] = true
	}
	g.projects[path] = p
}

// AddUser makes a user known to the fake.
func (g *GitLab) AddUser(username string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	g.users[username] = GitLabUser{ID: g.nextID, Username: username}
}

// MergeRequest returns a copy of a merge request.
func (g *GitLab) MergeRequest(path string, iid int64) (GitLabMR, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.projects[path]
	if p == nil || p.mrs[iid] == nil {
		return GitLabMR{}, false
	}
	return *p.mrs[iid], true
}

// Update changes a merge request in place.
func (g *GitLab) Update(path string, iid int64, fn func(mr *GitLabMR)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.projects[path].mrs[iid])
}

// AddDiscussion starts a resolvable diff discussion and returns its id.
func (g *GitLab) AddDiscussion(path string, iid int64, author, body, file string, line int) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	d := &glDiscussion{ID: fmt.Sprintf("%040x", g.nextID), Notes: []*glNote{{ID: g.nextID, Author: author, Body: body, Path: file,
		Line: line, Resolvable: true}}}
	mr := g.projects[path].mrs[iid]
	mr.Discussions = append(mr.Discussions, d)
	return d.ID
}

// UserID returns the id of a known user.
func (g *GitLab) UserID(username string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.users[username].ID
}

// RenameUser renames a user, keeping its id.
func (g *GitLab) RenameUser(from, to string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.users[from]
	delete(g.users, from)
	u.Username = to
	g.users[to] = u
	if g.User.Username == from {
		g.User.Username = to
	}
}

// FailNext makes the next matching request fail with status.
func (g *GitLab) FailNext(method, contains string, status, retryAfter int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failures = append(g.failures, failure{method, contains, status, retryAfter})
}

// Requests returns "METHOD path" of every request received.
func (g *GitLab) Requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.requests...)
}

var glProjectPath = regexp.MustCompile(`^/api/v4/projects/([^/]+)(/.*)?$`)

func (g *GitLab) serve(w http.ResponseWriter, r *http.Request) {
	if g.git.Handles(r) {
		g.mu.Lock()
		g.requests = append(g.requests, r.Method+" "+r.URL.EscapedPath())
		g.mu.Unlock()
		g.git.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w = echo(g.echo, w, r, "PRIVATE-TOKEN", func(body string) { g.echoed = append(g.echoed, body) })
	path := r.URL.EscapedPath()
	g.requests = append(g.requests, r.Method+" "+path)
	if r.Header.Get("PRIVATE-TOKEN") != g.Token {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "401 Unauthorized"})
		return
	}
	for i, f := range g.failures {
		if f.method == r.Method && strings.Contains(path, f.contains) {
			g.failures = append(g.failures[:i], g.failures[i+1:]...)
			if f.retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
			}
			writeJSON(w, f.status, map[string]string{"message": http.StatusText(f.status)})
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && path == "/api/v4/user":
		writeJSON(w, 200, map[string]any{"id": g.User.ID, "username": g.User.Username})
	case r.Method == http.MethodGet && path == "/api/v4/users":
		out := []map[string]any{}
		if u, ok := g.users[r.URL.Query().Get("username")]; ok {
			out = append(out, map[string]any{"id": u.ID, "username": u.Username})
		}
		writeJSON(w, 200, out)
	case glProjectPath.MatchString(path):
		m := glProjectPath.FindStringSubmatch(path)
		name, _ := url.PathUnescape(m[1])
		p := g.projects[name]
		if p == nil {
			writeJSON(w, 404, map[string]string{"message": "404 Project Not Found"})
			return
		}
		g.project(w, r, name, p, m[2])
	default:
		writeJSON(w, 404, map[string]string{"message": "404 Not Found"})
	}
}

var (
	glMRPath    = regexp.MustCompile(`^/merge_requests/(\d+)(/.*)?$`)
	glNotesPath = regexp.MustCompile(`^/discussions/([^/]+)/notes$`)
)

func (g *GitLab) project(w http.ResponseWriter, r *http.Request, name string, p *glProject, sub string) {
	switch {
	case sub == "" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"id": p.id, "path_with_namespace": name, "default_branch": p.defaultBranch})
	case sub == "/merge_requests" && r.Method == http.MethodPost:
		var in struct {
			Title        string `json:"title"`
			Description  string `json:"description"`
			SourceBranch string `json:"source_branch"`
			TargetBranch string `json:"target_branch"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if !p.branches[in.SourceBranch] {
			writeJSON(w, 422, map[string]any{"message": []string{"Source branch does not exist"}})
			return
		}
		mr := &GitLabMR{IID: p.next, Title: in.Title, Description: in.Description, Source: in.SourceBranch, Target: in.TargetBranch,
			Draft: strings.HasPrefix(in.Title, "Draft:"), State: "opened", MergeStatus: "mergeable", SHA: fmt.Sprintf("%040d", p.next)}
		p.mrs[mr.IID] = mr
		p.next++
		writeJSON(w, 201, g.mrJSON(name, mr))
	case glMRPath.MatchString(sub):
		m := glMRPath.FindStringSubmatch(sub)
		iid, _ := strconv.ParseInt(m[1], 10, 64)
		mr := p.mrs[iid]
		if mr == nil {
			writeJSON(w, 404, map[string]string{"message": "404 Not found"})
			return
		}
		g.mergeRequest(w, r, name, mr, m[2])
	default:
		writeJSON(w, 404, map[string]string{"message": "404 Not Found"})
	}
}

func (g *GitLab) userByID(id int64) map[string]any {
	for _, u := range g.users {
		if u.ID == id {
			return map[string]any{"id": u.ID, "username": u.Username}
		}
	}
	return map[string]any{"id": id, "username": fmt.Sprintf("user%d", id)}
}

func (g *GitLab) mrJSON(name string, mr *GitLabMR) map[string]any {
	reviewers := []map[string]any{}
	for _, id := range mr.Reviewers {
		reviewers = append(reviewers, g.userByID(id))
	}
	out := map[string]any{
		"iid": mr.IID, "title": mr.Title, "description": mr.Description, "state": mr.State, "draft": mr.Draft,
		"source_branch": mr.Source, "target_branch": mr.Target, "sha": mr.SHA, "detailed_merge_status": mr.MergeStatus,
		"web_url": fmt.Sprintf("https://gitlab.example/%s/-/merge_requests/%d", name, mr.IID), "reviewers": reviewers,
	}
	if g.OmitReviewers {
		delete(out, "reviewers")
	}
	if mr.Pipeline != "" {
		out["head_pipeline"] = map[string]any{"id": 700 + mr.IID, "status": mr.Pipeline}
	}
	return out
}

func (g *GitLab) mergeRequest(w http.ResponseWriter, r *http.Request, name string, mr *GitLabMR, sub string) {
	switch {
	case sub == "" && r.Method == http.MethodGet:
		writeJSON(w, 200, g.mrJSON(name, mr))
	case sub == "" && r.Method == http.MethodPut:
		var in struct {
			ReviewerIDs *[]int64 `json:"reviewer_ids"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if in.ReviewerIDs != nil {
			mr.Reviewers = *in.ReviewerIDs
		}
		writeJSON(w, 200, g.mrJSON(name, mr))
	case sub == "/reviewers" && r.Method == http.MethodGet:
		out := []map[string]any{}
		for _, id := range mr.Reviewers {
			out = append(out, map[string]any{"user": g.userByID(id), "state": "unreviewed"})
		}
		writeJSON(w, 200, out)
	case sub == "/merge" && r.Method == http.MethodPut:
		if mr.State != "opened" || mr.MergeStatus != "mergeable" {
			writeJSON(w, 405, map[string]string{"message": "405 Method Not Allowed"})
			return
		}
		mr.State = "merged"
		writeJSON(w, 200, g.mrJSON(name, mr))
	case sub == "/approvals" && r.Method == http.MethodGet:
		approvers := []map[string]any{}
		for _, u := range mr.ApprovedBy {
			approvers = append(approvers, map[string]any{"user": map[string]any{"username": u}})
		}
		writeJSON(w, 200, map[string]any{"approved": len(mr.ApprovedBy) > 0, "approved_by": approvers})
	case sub == "/discussions" && r.Method == http.MethodGet:
		size := g.PageSize
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page < 1 {
			page = 1
		}
		from, to := min((page-1)*size, len(mr.Discussions)), min(page*size, len(mr.Discussions))
		if to < len(mr.Discussions) {
			w.Header().Set("X-Next-Page", strconv.Itoa(page+1))
		}
		w.Header().Set("X-Page", strconv.Itoa(page))
		out := []map[string]any{}
		for _, d := range mr.Discussions[from:to] {
			out = append(out, g.discussionJSON(d))
		}
		writeJSON(w, 200, out)
	case glNotesPath.MatchString(sub) && r.Method == http.MethodPost:
		id := glNotesPath.FindStringSubmatch(sub)[1]
		var in struct {
			Body string `json:"body"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		for _, d := range mr.Discussions {
			if d.ID == id {
				g.nextID++
				n := &glNote{ID: g.nextID, Author: g.User.Username, Body: in.Body, Resolvable: d.Notes[0].Resolvable}
				d.Notes = append(d.Notes, n)
				writeJSON(w, 201, noteJSON(n))
				return
			}
		}
		writeJSON(w, 404, map[string]string{"message": "404 Discussion Not Found"})
	default:
		writeJSON(w, 404, map[string]string{"message": "404 Not Found"})
	}
}

func noteJSON(n *glNote) map[string]any {
	out := map[string]any{"id": n.ID, "body": n.Body, "author": map[string]any{"username": n.Author}, "system": n.System,
		"resolvable": n.Resolvable, "resolved": n.Resolved}
	if n.Path != "" {
		out["position"] = map[string]any{"new_path": n.Path, "new_line": n.Line}
	}
	return out
}

func (g *GitLab) discussionJSON(d *glDiscussion) map[string]any {
	notes := []map[string]any{}
	for _, n := range d.Notes {
		notes = append(notes, noteJSON(n))
	}
	return map[string]any{"id": d.ID, "individual_note": false, "notes": notes}
}

// ResolveDiscussion marks every note of a discussion resolved.
func (g *GitLab) ResolveDiscussion(path string, iid int64, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range g.projects[path].mrs[iid].Discussions {
		if d.ID == id {
			for _, n := range d.Notes {
				n.Resolved = true
			}
		}
	}
}
