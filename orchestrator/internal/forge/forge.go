// Package forge talks to the review providers' REST APIs — GitHub through
// github.com/google/go-github, GitLab through
// gitlab.com/gitlab-org/api/client-go — behind one small interface, so the
// tool handlers treat pull requests and merge requests alike.
//
// A Client is built per call from a connection's base URL and a token
// resolved at call time; the token lives only in the client's transport,
// and error answers are scrubbed of it (and of anything token-shaped) as
// they arrive, so a provider that echoes the credential cannot put it in
// an Error.
// Provider failures become *Error values with a stable code and a message
// an agent can act on; a Limiter keeps a rate-limited connection from
// being called again before the provider allows it.
package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// Repo is a repository on a provider: owner/name or group/project.
type Repo struct {
	Path string
}

// CreateInput opens a change request.
type CreateInput struct {
	Branch, Base, Title, Body string
	Draft                     bool
}

// Change is a pull request or merge request.
type Change struct {
	Number         int64
	URL, Title     string
	State          string // open, closed, merged (normalized)
	Draft          bool
	Source, Target string
	HeadSHA        string
}

// Status is a change request with its checks, reviews and threads.
type Status struct {
	Change
	Checks             string // passing, failing, pending, none
	CheckRuns          []toolapi.Check
	Reviews            []toolapi.Review
	Approved           bool
	Mergeable          string
	RequestedReviewers []string
	UnresolvedThreads  int
}

// Observation is what one poll of a change request sees, with one status
// call. Reviewers is valid only when that call reported them.
type Observation struct {
	State     string // open, closed, merged
	HeadSHA   string
	Checks    string // passing, failing, pending, none
	Green     bool   // the provider says it can be merged now: checks and approvals satisfied
	URL       string
	Reviewers ObservedReviewers
}

// ObservedReviewers carries the reviewers a status call returned, with an
// explicit validity marker.
type ObservedReviewers struct {
	Valid     bool
	Usernames []string
}

// Client is one provider's API, for one credential.
type Client interface {
	// Observe polls a change request with one status call.
	Observe(ctx context.Context, repo Repo, number int64) (Observation, error)
	// Reviewers asks for the requested reviewers alone: the strict
	// fallback when an observation carries none.
	Reviewers(ctx context.Context, repo Repo, number int64) ([]string, error)
	// Merge merges a change request.
	Merge(ctx context.Context, repo Repo, number int64) error
	// CurrentUser returns the username the credential authenticates as.
	CurrentUser(ctx context.Context) (string, error)
	Create(ctx context.Context, repo Repo, in CreateInput) (Change, error)
	Status(ctx context.Context, repo Repo, number int64) (Status, error)
	Comments(ctx context.Context, repo Repo, number int64) ([]toolapi.Comment, error)
	Reply(ctx context.Context, repo Repo, number int64, threadID, body string) (toolapi.Comment, error)
	// RequestReviewers adds reviewers and returns everyone now requested.
	RequestReviewers(ctx context.Context, repo Repo, number int64, usernames []string) ([]string, error)
}

// DefaultHTTPTimeout bounds one provider request of a client built
// without an HTTP client of its own.
const DefaultHTTPTimeout = 30 * time.Second

// New returns a client of provider at baseURL (the REST API root, for
// example https://api.github.com or https://gitlab.example.com/api/v4)
// authenticating with token. httpClient may be nil.
func New(p providers.Provider, baseURL, token string, httpClient *http.Client) (Client, error) {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	httpClient = withScrubbedErrors(traced(httpClient, p), token)
	switch p {
	case providers.GitHub:
		return newGitHub(baseURL, token, httpClient)
	case providers.GitLab:
		return newGitLab(baseURL, token, httpClient)
	}
	return nil, fmt.Errorf("no API client for provider %q", p)
}

// Stable codes of provider failures: the provider tools' refusals for
// the provider's answers, stated in toolapi's table.
const (
	CodeUnauthorized = toolapi.CodeProviderUnauthorized
	CodeForbidden    = toolapi.CodeProviderForbidden
	CodeNotFound     = toolapi.CodeProviderNotFound
	CodeInvalid      = toolapi.CodeProviderInvalid
	CodeRateLimited  = toolapi.CodeRateLimited
	CodeUnavailable  = toolapi.CodeProviderUnavailable
	CodeFailed       = toolapi.CodeProviderFailed
)

// Error is a provider failure an agent can act on.
type Error struct {
	Code       string
	Status     int // HTTP status, 0 for transport failures
	Message    string
	RetryAfter time.Duration // for CodeRateLimited
}

func (e *Error) Error() string { return e.Message }

// classify turns an HTTP status and the provider's message into an *Error.
func classify(provider string, status int, msg string, retryAfter time.Duration) *Error {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := &Error{Status: status, RetryAfter: retryAfter}
	switch {
	case status == http.StatusUnauthorized:
		e.Code, e.Message = CodeUnauthorized, provider+" rejected the workspace's credential (401); the operator must renew it"
	case status == http.StatusTooManyRequests || (status == http.StatusForbidden && retryAfter > 0):
		e.Code, e.Message = CodeRateLimited, fmt.Sprintf("%s rate limit reached; retry after %s", provider, retryAfter.Round(time.Second))
	case status == http.StatusForbidden:
		e.Code, e.Message = CodeForbidden, provider+" refused the request (403): "+msg
	case status == http.StatusNotFound:
		e.Code, e.Message = CodeNotFound, provider+" found no such resource (404): "+msg
	case status == http.StatusUnprocessableEntity || status == http.StatusBadRequest || status == http.StatusConflict:
		e.Code, e.Message = CodeInvalid, fmt.Sprintf("%s refused the request (%d): %s", provider, status, msg)
	case status >= 500:
		e.Code, e.Message = CodeUnavailable, fmt.Sprintf("%s is failing (%d); retry later", provider, status)
	default:
		e.Code, e.Message = CodeFailed, fmt.Sprintf("%s answered %d: %s", provider, status, msg)
	}
	if e.Code == CodeRateLimited && e.RetryAfter <= 0 {
		e.RetryAfter = time.Minute
	}
	return e
}

// transportError wraps a failure that never got an HTTP answer.
func transportError(provider string, err error) *Error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &Error{Code: CodeUnavailable, Message: provider + " did not answer in time; retry later"}
	}
	return &Error{Code: CodeUnavailable, Message: provider + " is not reachable; retry later"}
}

// queuedRetryHint is the retry hint of a call refused because its
// connection's queue is full: about one slow provider call.
const queuedRetryHint = time.Second

// LimiterOptions bound the calls in flight on one connection: at most
// MaxConcurrent reach the provider at once, at most MaxQueued more wait
// for a place, and any beyond are refused at once with CodeRateLimited
// and a retry hint.
type LimiterOptions struct {
	MaxConcurrent, MaxQueued int
}

// DefaultLimiterOptions are the default bounds (docs/operations.md#limits).
var DefaultLimiterOptions = LimiterOptions{MaxConcurrent: 4, MaxQueued: 16}

// Limiter keeps each connection (a key) within its bounds: it remembers
// until when a provider asked to be left alone, so a rate-limited
// connection is not called again before, and it bounds the calls in
// flight on the connection (LimiterOptions).
type Limiter struct {
	mu    sync.Mutex
	until map[string]time.Time
	slots map[string]*slots
	opts  LimiterOptions
	now   func() time.Time
}

// slots are one connection's places: sem holds a token per call in
// flight; queued counts the calls waiting for one.
type slots struct {
	sem    chan struct{}
	queued int
}

// NewLimiter returns a Limiter with the bounds of opts; the zero
// LimiterOptions means DefaultLimiterOptions. MaxConcurrent is at least 1
// and MaxQueued at least 0.
func NewLimiter(opts LimiterOptions) *Limiter {
	if opts == (LimiterOptions{}) {
		opts = DefaultLimiterOptions
	}
	opts.MaxConcurrent, opts.MaxQueued = max(opts.MaxConcurrent, 1), max(opts.MaxQueued, 0)
	return &Limiter{until: map[string]time.Time{}, slots: map[string]*slots{}, opts: opts, now: time.Now}
}

// Blocked reports how long key must still wait.
func (l *Limiter) Blocked(key string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wait := l.until[key].Sub(l.now())
	return wait, wait > 0
}

// Observe records a rate-limit answer for key.
func (l *Limiter) Observe(key string, err error) {
	var fe *Error
	if errors.As(err, &fe) && fe.Code == CodeRateLimited {
		l.mu.Lock()
		l.until[key] = l.now().Add(fe.RetryAfter)
		l.mu.Unlock()
	}
}

// Acquire takes a place for one call on key, waiting in the queue if
// every place is taken, and returns its release. With the queue full too
// it returns an *Error with CodeRateLimited and a retry hint at once;
// ctx ending while it waits returns ctx's error.
func (l *Limiter) Acquire(ctx context.Context, key, provider string) (release func(), err error) {
	l.mu.Lock()
	s := l.slots[key]
	if s == nil {
		s = &slots{sem: make(chan struct{}, l.opts.MaxConcurrent)}
		l.slots[key] = s
	}
	select {
	case s.sem <- struct{}{}:
		l.mu.Unlock()
		return func() { <-s.sem }, nil
	default:
	}
	if s.queued >= l.opts.MaxQueued {
		l.mu.Unlock()
		return nil, &Error{Code: CodeRateLimited, RetryAfter: queuedRetryHint, Message: fmt.Sprintf(
			"%d %s calls are already in flight on this workspace's connection and %d are waiting, the limit; retry after %s",
			l.opts.MaxConcurrent, provider, l.opts.MaxQueued, queuedRetryHint)}
	}
	s.queued++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		s.queued--
		l.mu.Unlock()
	}()
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// overall folds check states into passing, failing, pending or none.
func overall(states []string) string {
	if len(states) == 0 {
		return "none"
	}
	result := "passing"
	for _, s := range states {
		switch s {
		case "failure", "failed", "canceled", "cancelled", "timed_out", "action_required":
			return "failing"
		case "success", "neutral", "skipped", "manual":
		default:
			result = "pending"
		}
	}
	return result
}

// GitUser is the user name git's smart HTTP takes with a connection's
// token as password: x-access-token for GitHub, oauth2 for GitLab.
func GitUser(p providers.Provider) string {
	if p == providers.GitLab {
		return "oauth2"
	}
	return "x-access-token"
}

// Clone is where a repository is fetched from and delivered to.
type Clone struct {
	// Key names the repository's mirror: the clone URL's host (a port
	// joined with '-') and the repository's path.
	Key string
	// URL is the clone URL, with no credential.
	URL string
}

// CloneOf is the clone of repository path ("owner/name",
// "group/sub/project") on the instance of a connection whose REST API is
// at apiBaseURL: the API's origin with the API's root taken off
// (https://api.github.com → https://github.com; HOST/api/v3 and
// HOST/api/v4 → HOST), then /path.git. It comes from the connection,
// never from a repository's remote URL, which whoever adds a repository
// types: the connection's credential goes only to the instance it is
// for.
func CloneOf(apiBaseURL, path string) (Clone, error) {
	u, err := url.Parse(strings.TrimRight(apiBaseURL, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return Clone{}, fmt.Errorf("API base URL %q: want http(s)://host[/path]", apiBaseURL)
	}
	if strings.EqualFold(u.Host, "api.github.com") {
		u.Host = "github.com"
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/api/v3"), "/api/v4")
	u.RawQuery, u.Fragment = "", ""
	path = strings.Trim(path, "/")
	return Clone{Key: strings.ToLower(strings.ReplaceAll(u.Host, ":", "-")) + "/" + path, URL: u.String() + "/" + path + ".git"}, nil
}
