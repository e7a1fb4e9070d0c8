// Package standin holds local stand-ins for the GitHub and GitLab APIs:
// in-memory HTTP servers that answer the REST paths and JSON shapes
// go-github and the GitLab client use (written from the providers' API
// references) — a handful of endpoints around pull and merge requests, with
// token checks, pagination (GitHub Link headers, GitLab X-Next-Page),
// injectable errors, and a log of every request. The tests use them to prove
// what reached an API; `toolscope demo` uses them where a real provider
// would be needed, and says so.
package standin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolscope/toolscope/internal/gittest"
)

// GitHub is a fake GitHub REST (and GraphQL review-thread) API.
type GitHub struct {
	URL   string // base URL, for a connection's api_base_url
	Token string
	Login string

	mu       sync.Mutex
	repos    map[string]*ghRepo
	requests []string
	failures []failure
	nextID   int64
	// PageSize is the page size the server imposes, to exercise pagination.
	PageSize int
	echo     bool     // see EchoCredentials
	echoed   []string // the bodies that echoed a credential
	srv      *httptest.Server
	git      *gittest.Host

	// held, while set, makes requests wait before they are handled; see
	// Hold. inFlight and peak count the requests received and not yet
	// answered.
	held           chan struct{}
	inFlight, peak int
	heldMu         sync.Mutex
}

type failure struct {
	method, contains string
	status           int
	retryAfter       int
}

type ghRepo struct {
	defaultBranch string
	branches      map[string]bool
	pulls         map[int]*GitHubPull
	next          int
}

// GitHubPull is a pull request of the fake.
type GitHubPull struct {
	Number    int
	Title     string
	Body      string
	Head      string
	Base      string
	SHA       string
	Draft     bool
	State     string
	Merged    bool
	Mergeable string
	Requested []string
	Reviews   [][2]string // user, state
	Checks    [][3]string // name, status, conclusion
	Comments  []*ghComment
}

type ghComment struct {
	ID        int64
	InReplyTo int64
	User      string
	Body      string
	Path      string
	Line      int
	Resolved  bool
}

// NewGitHub starts a stand-in GitHub on loopback serving token for login.
// Close stops it.
func NewGitHub(token, login string) *GitHub {
	g := &GitHub{Token: token, Login: login, repos: map[string]*ghRepo{}, nextID: 1000, PageSize: 2}
	g.git = gittest.New(token, func(path string, branches []string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if r := g.repos[path]; r != nil {
			for _, b := range branches {
				r.branches[b] = true
			}
		}
	})
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.URL = g.srv.URL
	return g
}

// Close stops the server and removes its git repositories.
func (g *GitHub) Close() { g.srv.Close(); g.git.Close() }

// SeedRepo creates owner/name as AddRepo does, and also as a git
// repository served at GitURL, with one commit holding files on every
// branch; it returns that commit.
func (g *GitHub) SeedRepo(path string, files map[string]string, branches ...string) (string, error) {
	g.AddRepo(path, branches...)
	return g.git.Seed(path, files, branches...)
}

// GitURL is the clone URL of a seeded repository (git's smart HTTP; basic
// authentication with the token as password).
func (g *GitHub) GitURL(path string) string { return g.URL + "/" + path + ".git" }

// Head returns the commit a branch of a seeded repository points at.
func (g *GitHub) Head(path, branch string) (string, bool) { return g.git.Head(path, branch) }

// EchoCredentials makes every error answer (status 400 or more) echo the
// request's Authorization header in its message, as some proxies and
// self-managed instances do.
func (g *GitHub) EchoCredentials(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.echo = on
}

// Echoed returns every error body that echoed a credential.
func (g *GitHub) Echoed() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.echoed...)
}

// AddRepo creates owner/name with its branches (the first is the default).
func (g *GitHub) AddRepo(path string, branches ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := &ghRepo{defaultBranch: branches[0], branches: map[string]bool{}, pulls: map[int]*GitHubPull{}, next: 1}
	for _, b := range branches {
		r.branches[b] = true
	}
	g.repos[path] = r
}

// PullRequest returns a copy of a pull request, for assertions.
func (g *GitHub) PullRequest(path string, number int) (GitHubPull, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.repos[path]
	if r == nil || r.pulls[number] == nil {
		return GitHubPull{}, false
	}
	return *r.pulls[number], true
}

// Update changes a pull request in place (checks, reviews, state...).
func (g *GitHub) Update(path string, number int, fn func(p *GitHubPull)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.repos[path].pulls[number])
}

// AddComment adds a review comment by user and returns its id.
func (g *GitHub) AddComment(path string, number int, user, body, file string, line int) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	p := g.repos[path].pulls[number]
	p.Comments = append(p.Comments, &ghComment{ID: g.nextID, User: user, Body: body, Path: file, Line: line})
	return g.nextID
}

// FailNext makes the next request whose method matches and whose path
// contains contains fail with status (and a Retry-After in seconds).
func (g *GitHub) FailNext(method, contains string, status, retryAfter int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failures = append(g.failures, failure{method, contains, status, retryAfter})
}

// Requests returns "METHOD path" of every request received.
func (g *GitHub) Requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.requests...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var (
	ghPullPath     = regexp.MustCompile(`^/repos/([^/]+/[^/]+)/pulls(?:/(\d+))?(/.*)?$`)
	ghRepoPath     = regexp.MustCompile(`^/repos/([^/]+/[^/]+)$`)
	ghChecksPath   = regexp.MustCompile(`^/repos/([^/]+/[^/]+)/commits/([^/]+)/check-runs$`)
	ghRepliesPath  = regexp.MustCompile(`^/comments/(\d+)/replies$`)
	ghReviewerPath = regexp.MustCompile(`^/requested_reviewers$`)
)

// Hold makes every request wait, before it is handled, until the returned
// release is called: a slow provider.
func (g *GitHub) Hold() (release func()) {
	ch := make(chan struct{})
	g.heldMu.Lock()
	g.held = ch
	g.heldMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.heldMu.Lock()
			g.held = nil
			g.heldMu.Unlock()
			close(ch)
		})
	}
}

// InFlight returns the requests received and not yet answered, and the
// most there ever were at once.
func (g *GitHub) InFlight() (now, peak int) {
	g.heldMu.Lock()
	defer g.heldMu.Unlock()
	return g.inFlight, g.peak
}

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	if g.git.Handles(r) {
		g.mu.Lock()
		g.requests = append(g.requests, r.Method+" "+r.URL.Path)
		g.mu.Unlock()
		g.git.ServeHTTP(w, r)
		return
	}
	g.heldMu.Lock()
	g.inFlight++
	g.peak = max(g.peak, g.inFlight)
	held := g.held
	g.heldMu.Unlock()
	defer func() {
		g.heldMu.Lock()
		g.inFlight--
		g.heldMu.Unlock()
	}()
	if held != nil {
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w = echo(g.echo, w, r, "Authorization", func(body string) { g.echoed = append(g.echoed, body) })
	g.requests = append(g.requests, r.Method+" "+r.URL.Path)
	auth := r.Header.Get("Authorization")
	if auth != "Bearer "+g.Token && auth != "token "+g.Token {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	for i, f := range g.failures {
		if f.method == r.Method && strings.Contains(r.URL.Path, f.contains) {
			g.failures = append(g.failures[:i], g.failures[i+1:]...)
			if f.retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
			}
			writeJSON(w, f.status, map[string]string{"message": http.StatusText(f.status)})
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/user":
		writeJSON(w, 200, map[string]any{"login": g.Login, "id": 1})
	case r.Method == http.MethodPost && r.URL.Path == "/graphql":
		g.graphql(w, r)
	case ghRepoPath.MatchString(r.URL.Path) && r.Method == http.MethodGet:
		repo := g.repos[ghRepoPath.FindStringSubmatch(r.URL.Path)[1]]
		if repo == nil {
			writeJSON(w, 404, map[string]string{"message": "Not Found"})
			return
		}
		writeJSON(w, 200, map[string]any{"default_branch": repo.defaultBranch})
	case ghChecksPath.MatchString(r.URL.Path):
		m := ghChecksPath.FindStringSubmatch(r.URL.Path)
		var runs []map[string]any
		if repo := g.repos[m[1]]; repo != nil {
			for _, p := range repo.pulls {
				if p.SHA == m[2] {
					for _, c := range p.Checks {
						runs = append(runs, map[string]any{"name": c[0], "status": c[1], "conclusion": c[2]})
					}
				}
			}
		}
		page := g.page(w, r, len(runs))
		writeJSON(w, 200, map[string]any{"total_count": len(runs), "check_runs": slice(runs, page)})
	case ghPullPath.MatchString(r.URL.Path):
		g.pulls(w, r, ghPullPath.FindStringSubmatch(r.URL.Path))
	default:
		writeJSON(w, 404, map[string]string{"message": "Not Found"})
	}
}

// page sets the Link header for a list of n items and returns the
// requested page's [from, to).
func (g *GitHub) page(w http.ResponseWriter, r *http.Request, n int) [2]int {
	size := g.PageSize
	if pp, _ := strconv.Atoi(r.URL.Query().Get("per_page")); pp > 0 && pp < size {
		size = pp
	}
	p, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if p < 1 {
		p = 1
	}
	from, to := min((p-1)*size, n), min(p*size, n)
	if to < n {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(p+1))
		u.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, u.RequestURI()))
	}
	return [2]int{from, to}
}

func slice[T any](items []T, p [2]int) []T {
	if items == nil {
		return []T{}
	}
	return items[p[0]:p[1]]
}

func (g *GitHub) pullJSON(repo string, p *GitHubPull) map[string]any {
	reviewers := []map[string]any{}
	for _, u := range p.Requested {
		reviewers = append(reviewers, map[string]any{"login": u})
	}
	return map[string]any{
		"number": p.Number, "title": p.Title, "body": p.Body, "state": p.State, "draft": p.Draft, "merged": p.Merged,
		"html_url":        fmt.Sprintf("%s/%s/pull/%d", "https://github.example", repo, p.Number),
		"head":            map[string]any{"ref": p.Head, "sha": p.SHA},
		"base":            map[string]any{"ref": p.Base},
		"mergeable_state": p.Mergeable, "requested_reviewers": reviewers,
	}
}

func (g *GitHub) pulls(w http.ResponseWriter, r *http.Request, m []string) {
	repo := g.repos[m[1]]
	if repo == nil {
		writeJSON(w, 404, map[string]string{"message": "Not Found"})
		return
	}
	if m[2] == "" && r.Method == http.MethodPost {
		var in struct {
			Title, Head, Base, Body string
			Draft                   bool
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if !repo.branches[in.Head] {
			writeJSON(w, 422, map[string]any{"message": "Validation Failed",
				"errors": []map[string]string{{"resource": "PullRequest", "field": "head", "code": "invalid"}}})
			return
		}
		p := &GitHubPull{Number: repo.next, Title: in.Title, Body: in.Body, Head: in.Head, Base: in.Base, Draft: in.Draft,
			State: "open", SHA: fmt.Sprintf("%040d", repo.next), Mergeable: "clean"}
		repo.pulls[p.Number] = p
		repo.next++
		writeJSON(w, 201, g.pullJSON(m[1], p))
		return
	}
	n, _ := strconv.Atoi(m[2])
	p := repo.pulls[n]
	if p == nil {
		writeJSON(w, 404, map[string]string{"message": "Not Found"})
		return
	}
	sub := m[3]
	switch {
	case sub == "" && r.Method == http.MethodGet:
		writeJSON(w, 200, g.pullJSON(m[1], p))
	case sub == "/reviews" && r.Method == http.MethodGet:
		var out []map[string]any
		for _, rv := range p.Reviews {
			out = append(out, map[string]any{"user": map[string]any{"login": rv[0]}, "state": rv[1]})
		}
		writeJSON(w, 200, slice(out, g.page(w, r, len(out))))
	case sub == "/comments" && r.Method == http.MethodGet:
		var out []map[string]any
		for _, c := range p.Comments {
			out = append(out, g.commentJSON(c))
		}
		writeJSON(w, 200, slice(out, g.page(w, r, len(out))))
	case (ghRepliesPath.MatchString(sub) || sub == "/comments") && r.Method == http.MethodPost:
		// A reply: POST .../comments/{id}/replies, or POST .../comments
		// with in_reply_to (what go-github sends).
		var in struct {
			Body      string
			InReplyTo int64 `json:"in_reply_to"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		id := in.InReplyTo
		if m := ghRepliesPath.FindStringSubmatch(sub); m != nil {
			id, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if id == 0 {
			writeJSON(w, 422, map[string]string{"message": "only replies are supported by this fake"})
			return
		}
		var parent *ghComment
		for _, c := range p.Comments {
			if c.ID == id {
				parent = c
			}
		}
		if parent == nil {
			writeJSON(w, 404, map[string]string{"message": "Not Found"})
			return
		}
		g.nextID++
		c := &ghComment{ID: g.nextID, InReplyTo: id, User: g.Login, Body: in.Body, Path: parent.Path, Line: parent.Line}
		p.Comments = append(p.Comments, c)
		writeJSON(w, 201, g.commentJSON(c))
	case sub == "/requested_reviewers" && r.Method == http.MethodGet:
		users := []map[string]any{}
		for _, u := range p.Requested {
			users = append(users, map[string]any{"login": u})
		}
		writeJSON(w, 200, map[string]any{"users": users, "teams": []any{}})
	case sub == "/merge" && r.Method == http.MethodPut:
		if p.State != "open" || p.Mergeable != "clean" {
			writeJSON(w, 405, map[string]string{"message": "Pull Request is not mergeable"})
			return
		}
		p.State, p.Merged = "closed", true
		writeJSON(w, 200, map[string]any{"merged": true, "sha": p.SHA})
	case ghReviewerPath.MatchString(sub) && r.Method == http.MethodPost:
		var in struct{ Reviewers []string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		for _, u := range in.Reviewers {
			if u == g.Login {
				writeJSON(w, 422, map[string]string{"message": "Review cannot be requested from pull request author."})
				return
			}
		}
		for _, u := range in.Reviewers {
			if !contains(p.Requested, u) {
				p.Requested = append(p.Requested, u)
			}
		}
		writeJSON(w, 201, g.pullJSON(m[1], p))
	default:
		writeJSON(w, 404, map[string]string{"message": "Not Found"})
	}
}

func (g *GitHub) commentJSON(c *ghComment) map[string]any {
	out := map[string]any{"id": c.ID, "user": map[string]any{"login": c.User}, "body": c.Body, "path": c.Path, "line": c.Line,
		"created_at": time.Unix(c.ID, 0).UTC().Format(time.RFC3339)}
	if c.InReplyTo != 0 {
		out["in_reply_to_id"] = c.InReplyTo
	}
	return out
}

// graphql answers the review-thread query: a thread per top-level comment.
func (g *GitHub) graphql(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Variables struct {
			Owner, Name string
			Number      int
		}
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	repo := g.repos[in.Variables.Owner+"/"+in.Variables.Name]
	nodes := []map[string]any{}
	if repo != nil && repo.pulls[in.Variables.Number] != nil {
		for _, c := range repo.pulls[in.Variables.Number].Comments {
			if c.InReplyTo == 0 {
				nodes = append(nodes, map[string]any{"isResolved": c.Resolved})
			}
		}
	}
	writeJSON(w, 200, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": map[string]any{
		"reviewThreads": map[string]any{"nodes": nodes, "pageInfo": map[string]any{"hasNextPage": false, "endCursor": ""}},
	}}}})
}

// Resolve marks the thread of a top-level comment resolved.
func (g *GitHub) Resolve(path string, number int, commentID int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.repos[path].pulls[number].Comments {
		if c.ID == commentID {
			c.Resolved = true
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
