// Package connections is the one way the orchestrator reaches GitHub or
// GitLab for a workspace. It resolves the workspace's connection to a
// provider, resolves the connection's credential reference at the moment
// of use (so a rotated secret takes effect on the next call), gates the
// call on the connection's one forge.Limiter — the retry-after a provider
// asked for, and the bound on calls in flight and queued — and builds the
// forge client. Tool calls (toolcalls), the lifecycle poller and the
// service's connection validation all hold the same *Connections, so a
// rate limit any of them meets pauses the others' calls on that
// connection too.
package connections

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/tracing"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// ErrNotConnected: the workspace has no connection to the provider.
var ErrNotConnected = fmt.Errorf("workspace not connected: %w", errdefs.ErrFailedPrecondition)

// CredentialError: a connection's credential reference does not resolve
// (an unset variable, a missing file). It names the reference, never a
// value, and matches errdefs.ErrFailedPrecondition under errors.Is.
type CredentialError struct {
	Provider providers.Provider
	Reason   error
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("the workspace's %s credential is not available to the orchestrator (%v)", e.Provider, e.Reason)
}

// Is reports whether target is errdefs.ErrFailedPrecondition.
func (e *CredentialError) Is(target error) bool { return target == errdefs.ErrFailedPrecondition }

// Workspaces reads a workspace with its connections (*store.Store).
type Workspaces interface {
	GetWorkspace(ctx context.Context, id string) (model.Workspace, error)
}

// Options configure Connections.
type Options struct {
	// Credentials resolves credential references; its Secrets records
	// every value resolved, for the orchestrator's scrubbers. The zero
	// value reads the process environment and files, recording into a
	// set of its own.
	Credentials credentials.Resolver
	// Limits bound the provider calls in flight on one connection;
	// forge.DefaultLimiterOptions if zero (--provider-concurrency,
	// --provider-queue).
	Limits forge.LimiterOptions
	// HTTPClient is the clients' HTTP client; nil: forge's default.
	HTTPClient *http.Client
	// Metrics, if set, counts the provider requests by status class, the
	// rate limits met and the waits for a place (metrics.go).
	Metrics *metrics.Metrics
}

// Connections resolves, gates and builds the provider clients of every
// workspace connection. It is safe for concurrent use.
type Connections struct {
	workspaces Workspaces
	creds      credentials.Resolver
	limiter    *forge.Limiter
	httpClient *http.Client
	metrics    *metrics.Metrics
	// newClient is forge.New; a test may count through it.
	newClient func(p providers.Provider, baseURL, token string, hc *http.Client) (forge.Client, error)
}

// New returns the connections of the workspaces ws holds.
func New(ws Workspaces, opts Options) *Connections {
	if opts.Credentials.Secrets == nil {
		opts.Credentials.Secrets = &scrub.Set{}
	}
	return &Connections{workspaces: ws, creds: opts.Credentials, limiter: forge.NewLimiter(opts.Limits),
		httpClient: opts.HTTPClient, metrics: opts.Metrics, newClient: forge.New}
}

// Secrets is the set every credential this component resolved is
// recorded in: what the scrubbers at the orchestrator's boundaries use.
func (c *Connections) Secrets() *scrub.Set { return c.creds.Secrets }

// Remember resolves refs now and records their values in Secrets,
// skipping those that do not resolve: the scrubbers then redact a
// credential before its first use (after a restart, a prefix-less GitLab
// token echoed in a catalog result has no shape to be caught by).
func (c *Connections) Remember(refs ...model.CredentialRef) {
	for _, r := range refs {
		_, _ = c.creds.Resolve(r)
	}
}

// Lookup returns the workspace's connection to p, or ErrNotConnected.
func (c *Connections) Lookup(ctx context.Context, workspaceID string, p providers.Provider) (model.Connection, error) {
	ws, err := c.workspaces.GetWorkspace(ctx, workspaceID)
	if err != nil {
		return model.Connection{}, err
	}
	for _, conn := range ws.Connections {
		if conn.Provider == p {
			return conn, nil
		}
	}
	return model.Connection{}, fmt.Errorf("workspace %s has no %s connection: %w", workspaceID, p, ErrNotConnected)
}

// Lease is a place among a connection's calls in flight, with a client
// on its credential. Every call through Client is refused without a
// provider request while the connection is rate limited, and a rate
// limit it meets pauses every caller of the connection. Release gives
// the place back; it must be called once.
type Lease struct {
	Client  forge.Client
	Release func()
}

// Open gates a use of workspaceID's connection conn, in order: its
// credential resolves (now, so a rotated secret takes effect); the
// connection is not rate limited; it has a place among its calls in flight,
// waiting in its queue if need be. Errors: a *CredentialError; a
// *forge.Error with forge.CodeRateLimited; ctx's error while queued; an
// errdefs.FieldError on api_base_url for a client that cannot be built.
func (c *Connections) Open(ctx context.Context, workspaceID string, conn model.Connection) (_ *Lease, err error) {
	ctx, span := startOpen(ctx, conn)
	defer func() { endOpen(span, err) }()
	token, err := c.creds.Resolve(conn.Credential)
	if err != nil {
		return nil, &CredentialError{Provider: conn.Provider, Reason: err}
	}
	tracing.Stage(ctx, "credential: resolved")
	key := workspaceID + "/" + string(conn.Provider)
	if err := c.blocked(key, conn.Provider); err != nil {
		return nil, err
	}
	tracing.Stage(ctx, "gate: not rate limited")
	client, err := c.newClient(conn.Provider, conn.APIBaseURL, token, c.counted(conn.Provider))
	if err != nil {
		return nil, errdefs.InvalidField("api_base_url", "%v", err)
	}
	release, err := c.acquire(ctx, key, conn.Provider)
	if err != nil {
		return nil, err
	}
	tracing.Stage(ctx, "place: among the connection's calls in flight")
	return &Lease{Client: &gated{c: client, conns: c, key: key, provider: conn.Provider}, Release: release}, nil
}

// CheckCredential reports whether conn's credential resolves now, as Open
// would: a *CredentialError if not. Nothing is called on the provider.
func (c *Connections) CheckCredential(conn model.Connection) error {
	if _, err := c.creds.Resolve(conn.Credential); err != nil {
		return &CredentialError{Provider: conn.Provider, Reason: err}
	}
	return nil
}

// GitCredential resolves conn's credential for git's smart HTTP, as the
// provider takes it (GitHub: x-access-token; GitLab: oauth2, with the
// token as password), or a *CredentialError. The value is recorded in
// Secrets, like every value this component resolves.
func (c *Connections) GitCredential(conn model.Connection) (user, token string, err error) {
	token, err = c.creds.Resolve(conn.Credential)
	if err != nil {
		return "", "", &CredentialError{Provider: conn.Provider, Reason: err}
	}
	return forge.GitUser(conn.Provider), token, nil
}

// blocked returns the rate-limited error of a connection a provider asked
// to be left alone, or nil.
func (c *Connections) blocked(key string, p providers.Provider) error {
	if wait, blocked := c.limiter.Blocked(key); blocked {
		c.metrics.RateLimited(string(p), metrics.RateLimitWaiting)
		return &forge.Error{Code: forge.CodeRateLimited, RetryAfter: wait,
			Message: fmt.Sprintf("%s asked toolscope to wait; retry after %s", p, wait.Round(time.Second))}
	}
	return nil
}

// RateLimited reports whether err is a rate limit (a provider's, or the
// connection's bound on calls in flight).
func RateLimited(err error) bool {
	var fe *forge.Error
	return errors.As(err, &fe) && fe.Code == forge.CodeRateLimited
}

// RateLimitWait returns how long a provider asked the workspace's
// connection to p to be left alone from now; zero when it is not rate
// limited. (The web console shows it.)
func (c *Connections) RateLimitWait(workspaceID string, p providers.Provider) time.Duration {
	if wait, blocked := c.limiter.Blocked(workspaceID + "/" + string(p)); blocked {
		return wait
	}
	return 0
}
