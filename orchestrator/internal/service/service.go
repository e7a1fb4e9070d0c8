// Package service is the orchestrator's domain logic: it validates requests
// (naming the bad field), applies defaults, and changes records through the
// store, one transaction per call. It speaks domain types and errdefs
// errors only; package api converts to and from the wire.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/logdir"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// MaxBatch is the most repositories one AddSources call may attach.
const MaxBatch = 100

// Service implements the orchestrator's operations.
type Service struct {
	conns       *connections.Connections
	pushTimeout time.Duration
	maxInspects int // Options.MaxInspects
	// agentEnv and reservedEnv are Options.AgentEnv and ReservedEnv.
	agentEnv, reservedEnv []string
	agentOutputRole       model.Role // Options.AgentOutputRole
	store                 *store.Store
	broker                *events.Broker
	log                   *slog.Logger
	execs                 map[string]executors.Executor
	ctl                   *executors.Controller // every call to a running session's agentctl
	rec                   reconciler            // brings running sessions to their desired surface
	repairBackoff         time.Duration
	done                  chan struct{}   // closed by Close: ends every watcher
	life                  context.Context // the reconciler's; cancelled by Close
	endLife               context.CancelFunc
	once                  sync.Once
	catalog               *catalogState // the governed tool catalog (catalog.go)
	dataDir               string
	logs                  logdir.Bound // bound of dataDir/logs (PruneLogs)
	metrics               *metrics.Metrics
	hosted                HostedLimits // bounds of hosted sessions (hosted.go)
	hostedMu              sync.Mutex   // held while a hosted session is counted and recorded
	replica               replicaState // this replica's id and lease (replica.go)
	orient                Orienter     // what a push carries for the server instructions (orient.go)
}

// Options configure a Service.
type Options struct {
	Logger *slog.Logger
	// Executors are the backends sessions can run on, by name.
	Executors map[string]executors.Executor
	// Connections resolves, gates and builds the provider clients (shared
	// with the tool calls and the lifecycle poller); nil: a component of
	// the service's own, reading the process environment and files.
	Connections *connections.Connections
	// PushTimeout bounds the push of a surface to one session;
	// DefaultPushTimeout if zero.
	PushTimeout time.Duration
	// RepairBackoff bounds the wait between two failed attempts to bring
	// a session to its desired surface; DefaultRepairBackoff if zero.
	RepairBackoff time.Duration
	// Catalog holds the connections to external MCP servers; nil: the
	// catalog's records can be managed, but servers cannot be reached
	// (discovery fails and is recorded as such).
	Catalog *catalog.Pool
	// OnCatalogChange, if set, is called after every committed catalog
	// change that bumped the catalog generation, once its pushes to live
	// sessions are done (see catalogChanged).
	OnCatalogChange func(ctx context.Context)
	// DataDir is the orchestrator's data directory. It holds agentctl
	// secrets, so no credential reference may point into it.
	DataDir string
	// Logs bounds the sessions' logs kept in DataDir/logs (see
	// PruneLogs); no bound if zero.
	Logs logdir.Bound
	// Metrics, if set, observes the surface pushes and the catalog's
	// discovery rounds.
	Metrics *metrics.Metrics
	// Hosted bounds the hosted sessions (AttachSession); the defaults
	// where zero.
	Hosted HostedLimits
	// Replica is this orchestrator replica's id: the owner of the sessions
	// it launches, and the holder of its lease (replica.go, ADR 0027).
	Replica string
	// LeaseTTL is how long the replica's lease holds after a renewal
	// (DefaultLeaseTTL if zero); LeaseRenew how often RunReplica renews
	// it, less than LeaseTTL (if zero, a third of LeaseTTL, at most
	// DefaultLeaseRenew).
	LeaseTTL, LeaseRenew time.Duration
	// MaxInspects bounds the running sessions one listing asks for their
	// state at once (ListSessions); DefaultMaxInspects if zero.
	MaxInspects int
	// AgentEnv lists the variables (path.Match patterns) a launch may
	// pass to its agent by name (--env, --credential-env); DefaultAgentEnv
	// if nil (agentenv.go).
	AgentEnv []string
	// ReservedEnv names more variables the orchestrator reads itself (its
	// database password's), which no agent gets whatever AgentEnv says.
	ReservedEnv []string
	// AgentOutputRole is the least role that reads an agent's output where
	// events carry it (the access table's, for ReadSessionLog: the server
	// wires access.Table[access.AgentOutput]); model.RoleMember if empty.
	AgentOutputRole model.Role
}

// DefaultMaxInspects is how many running sessions one listing inspects at
// once: a host that does not answer then costs a listing about one probe
// timeout, not one per session on it.
const DefaultMaxInspects = 8

// New returns a Service over st. broker receives nothing from the service
// itself (the store publishes committed events to it); the service reads
// it to serve watchers.
func New(st *store.Store, broker *events.Broker, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PushTimeout <= 0 {
		opts.PushTimeout = DefaultPushTimeout
	}
	if opts.Connections == nil {
		opts.Connections = connections.New(st, connections.Options{})
	}
	if opts.RepairBackoff <= 0 {
		opts.RepairBackoff = DefaultRepairBackoff
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.MaxInspects <= 0 {
		opts.MaxInspects = DefaultMaxInspects
	}
	if opts.LeaseRenew <= 0 {
		opts.LeaseRenew = min(DefaultLeaseRenew, opts.LeaseTTL/3)
	}
	if opts.AgentEnv == nil {
		opts.AgentEnv = DefaultAgentEnv
	}
	if opts.AgentOutputRole == "" {
		opts.AgentOutputRole = model.RoleMember
	}
	life, endLife := context.WithCancel(context.Background())
	svc := &Service{life: life, endLife: endLife, store: st, broker: broker, log: opts.Logger, execs: opts.Executors, ctl: executors.NewController(opts.Executors), conns: opts.Connections,
		pushTimeout: opts.PushTimeout, maxInspects: opts.MaxInspects, repairBackoff: opts.RepairBackoff, rec: reconciler{workers: map[string]*worker{}, desired: map[string]desiredRead{}, reading: map[taskVersion]*desiredRead{}}, done: make(chan struct{}), dataDir: opts.DataDir, logs: opts.Logs, metrics: opts.Metrics, hosted: opts.Hosted.withDefaults(),
		catalog: &catalogState{pool: opts.Catalog, onChange: opts.OnCatalogChange}}
	svc.replica.id, svc.replica.ttl, svc.replica.renew = opts.Replica, opts.LeaseTTL, opts.LeaseRenew
	svc.agentEnv, svc.reservedEnv, svc.agentOutputRole = opts.AgentEnv, opts.ReservedEnv, opts.AgentOutputRole
	return svc
}

// ErrShuttingDown ends event watchers when the service closes.
var ErrShuttingDown = fmt.Errorf("orchestrator is shutting down: %w", errdefs.ErrUnavailable)

// Close ends every event watcher with ErrShuttingDown, so a graceful server
// stop does not wait on streams that never end, and the reconciler: its
// attempts in flight are cancelled (and not recorded), and Close waits
// for its workers to end. It does not close the store.
func (s *Service) Close() {
	// Under the reconciler's lock: a wake either started its worker
	// before (and Wait waits for it) or sees the service closed and
	// starts none (a WaitGroup's Add must not race its Wait).
	s.rec.mu.Lock()
	s.once.Do(func() {
		close(s.done)
		s.endLife()
	})
	s.rec.mu.Unlock()
	s.rec.wg.Wait()
}

// CreateWorkspace creates an empty workspace.
func (s *Service) CreateWorkspace(ctx context.Context, name string) (model.Workspace, error) {
	name = strings.TrimSpace(name)
	if err := checkName("name", name, textlimit.Name); err != nil {
		return model.Workspace{}, err
	}
	return s.store.CreateWorkspace(ctx, name)
}

// GetWorkspace returns one workspace.
func (s *Service) GetWorkspace(ctx context.Context, id string) (model.Workspace, error) {
	if err := required("workspace_id", id); err != nil {
		return model.Workspace{}, err
	}
	return s.store.GetWorkspace(ctx, id)
}

// ListWorkspaces returns every workspace.
func (s *Service) ListWorkspaces(ctx context.Context) ([]model.Workspace, error) {
	return s.ListWorkspacesPage(ctx, store.Page{})
}

// ListWorkspacesPage returns the page p of ListWorkspaces.
func (s *Service) ListWorkspacesPage(ctx context.Context, p store.Page) ([]model.Workspace, error) {
	return s.store.ListWorkspacesPage(ctx, p)
}

// ConnectionInput is a request to connect a workspace to a provider.
type ConnectionInput struct {
	WorkspaceID string
	Provider    string
	APIBaseURL  string
	Credential  model.CredentialRef
	// SkipValidation records the connection without asking the provider
	// who the credential authenticates as.
	SkipValidation bool
}

// DefaultAPIBaseURL is the public API of each provider.
var DefaultAPIBaseURL = map[providers.Provider]string{
	providers.GitHub: "https://api.github.com",
	providers.GitLab: "https://gitlab.com/api/v4",
}

var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SetConnection creates or replaces a workspace's connection to a
// provider. The credential is a reference: an environment variable name or
// an absolute file path, never the secret.
func (s *Service) SetConnection(ctx context.Context, in ConnectionInput) (model.Connection, error) {
	if err := required("workspace_id", in.WorkspaceID); err != nil {
		return model.Connection{}, err
	}
	p, err := connectionProvider(in.Provider)
	if err != nil {
		return model.Connection{}, err
	}
	c := model.Connection{Provider: p, APIBaseURL: strings.TrimRight(strings.TrimSpace(in.APIBaseURL), "/"), Credential: in.Credential}
	if err := textlimit.URL.Check("api_base_url", c.APIBaseURL); err != nil {
		return model.Connection{}, err
	}
	if c.APIBaseURL == "" {
		c.APIBaseURL = DefaultAPIBaseURL[p]
	}
	u, err := url.Parse(c.APIBaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return model.Connection{}, errdefs.InvalidField("api_base_url", "is not an absolute http(s) URL")
	}
	if problem := urlSecretProblem(u); problem != "" {
		return model.Connection{}, errdefs.InvalidField("api_base_url", "%s", problem)
	}
	// Rejected credential references are never echoed: a mistyped
	// reference may be the secret itself.
	switch c.Credential.Kind {
	case model.CredentialEnv:
		if looksLikeToken(c.Credential.Ref) {
			return model.Connection{}, errdefs.InvalidField("credential.env_var",
				"looks like a token, not the name of the variable holding it (the value is not shown)")
		}
		if len(c.Credential.Ref) > 256 || !envVarName.MatchString(c.Credential.Ref) {
			return model.Connection{}, errdefs.InvalidField("credential.env_var",
				"is not an environment variable name (letters, digits and _; the value is not shown)")
		}
	case model.CredentialFile:
		if err := textlimit.Path.CheckBytes("credential.file_path", len(c.Credential.Ref), ""); err != nil {
			return model.Connection{}, err
		}
		if !filepath.IsAbs(c.Credential.Ref) || strings.ContainsRune(c.Credential.Ref, 0) {
			return model.Connection{}, errdefs.InvalidField("credential.file_path", "is not an absolute path (the value is not shown)")
		}
		if s.dataDir != "" && within(c.Credential.Ref, s.dataDir) {
			return model.Connection{}, errdefs.InvalidField("credential.file_path",
				"is inside the orchestrator's data directory, which holds agentctl secrets; keep credentials elsewhere")
		}
	default:
		return model.Connection{}, errdefs.InvalidField("credential", "set env_var or file_path")
	}
	if _, err := s.store.GetWorkspace(ctx, in.WorkspaceID); err != nil {
		return model.Connection{}, err
	}
	if !in.SkipValidation {
		user, err := s.validate(ctx, in.WorkspaceID, c)
		if err != nil {
			return model.Connection{}, err
		}
		c.Username, c.ValidatedAt = user, time.Now().UTC()
	}
	s.conns.Remember(c.Credential) // scrubbed from its first use, validated or not
	return s.store.SetConnection(ctx, in.WorkspaceID, c)
}

// validate asks the provider who the connection's credential
// authenticates as. Errors name the credential's reference, never its value.
func (s *Service) validate(ctx context.Context, workspaceID string, c model.Connection) (string, error) {
	lease, err := s.conns.Open(ctx, workspaceID, c)
	var ce *connections.CredentialError
	if errors.As(err, &ce) {
		return "", errdefs.FailedPrecondition("validate the %s connection: %v", c.Provider, ce.Reason)
	}
	var user string
	if err == nil {
		defer lease.Release()
		user, err = lease.Client.CurrentUser(ctx)
	}
	var fe *forge.Error
	if errors.As(err, &fe) {
		fe.Message = s.conns.Secrets().Scrubber().String(fe.Message) // the provider may echo the credential
	}
	switch {
	case errors.As(err, &fe) && (fe.Code == forge.CodeUnavailable || fe.Code == forge.CodeRateLimited):
		return "", fmt.Errorf("validate the %s connection at %s: %s: %w", c.Provider, c.APIBaseURL, fe.Message, errdefs.ErrUnavailable)
	case errors.As(err, &fe):
		return "", errdefs.FailedPrecondition("validate the %s connection at %s: %s", c.Provider, c.APIBaseURL, fe.Message)
	case err != nil:
		return "", err
	case len(user) > textlimit.Title.Max:
		// Stored with the workspace and listed with it: bounded as text.
		return "", errdefs.FailedPrecondition("validate the %s connection at %s: the provider reported a username of %d bytes; the limit is %d bytes",
			c.Provider, c.APIBaseURL, len(user), textlimit.Title.Max)
	}
	return user, nil
}

// RemoveConnection deletes a workspace's connection to a provider.
func (s *Service) RemoveConnection(ctx context.Context, workspaceID, provider string) error {
	if err := required("workspace_id", workspaceID); err != nil {
		return err
	}
	p, err := connectionProvider(provider)
	if err != nil {
		return err
	}
	return s.store.RemoveConnection(ctx, workspaceID, p)
}

func connectionProvider(raw string) (providers.Provider, error) {
	if err := required("provider", raw); err != nil {
		return "", err
	}
	p, ok := providers.Normalize(raw)
	if !ok {
		return "", errdefs.InvalidField("provider", "%q is not a review provider; use one of %s", raw, providers.Of("github", "gitlab"))
	}
	return p, nil
}

// RepositoryInput is a request to add a repository to a workspace.
type RepositoryInput struct {
	WorkspaceID string
	Provider    string // stored as given
	Host        string
	Path        string
	RemoteURL   string
}

// CreateRepository adds a repository to a workspace. Host and path may be
// left out when the remote URL names them. The provider is stored exactly
// as given; one outside the allowlist contributes nothing to a task's
// provider set.
func (s *Service) CreateRepository(ctx context.Context, in RepositoryInput) (model.Repository, error) {
	if err := required("workspace_id", in.WorkspaceID); err != nil {
		return model.Repository{}, err
	}
	r := model.Repository{
		WorkspaceID: in.WorkspaceID, Provider: in.Provider,
		Host: strings.ToLower(strings.TrimSpace(in.Host)), Path: strings.TrimSpace(in.Path), RemoteURL: strings.TrimSpace(in.RemoteURL),
	}
	// The provider is stored as given (its characters too); the host is
	// held to a host name's below. Their bytes are bounded here.
	if err := textlimit.Name.CheckBytes("provider", len(r.Provider), ""); err != nil {
		return model.Repository{}, err
	}
	if err := textlimit.Host.CheckBytes("host", len(r.Host), ""); err != nil {
		return model.Repository{}, err
	}
	if err := textlimit.URL.Check("remote_url", r.RemoteURL); err != nil {
		return model.Repository{}, err
	}
	_, hosted := providers.Normalize(r.Provider)
	if r.RemoteURL != "" {
		remote, err := ParseRemote(r.RemoteURL)
		switch {
		case err != nil && (hosted || r.Host != ""):
			return model.Repository{}, errdefs.InvalidField("remote_url", "%v", err)
		case err != nil:
			// A local or unknown source may have any remote; keep it as given.
		case r.Host != "" && remote.Host != "" && remote.Host != r.Host:
			return model.Repository{}, errdefs.InvalidField("remote_url", "names host %q but host is %q", remote.Host, r.Host)
		default:
			if r.Host == "" {
				r.Host = remote.Host
			}
			if r.Path == "" {
				r.Path = remote.Path
			}
		}
	}
	if r.Host != "" {
		// A hosted repository's path is owner/name or group/project.
		r.Path = cleanRepoPath(r.Path)
	}
	if err := required("path", r.Path); err != nil {
		return model.Repository{}, err
	}
	if hosted && r.Host == "" {
		return model.Repository{}, errdefs.InvalidField("host", "is required for a %s repository", strings.TrimSpace(r.Provider))
	}
	if r.Host != "" {
		if !hostPattern.MatchString(r.Host) {
			return model.Repository{}, errdefs.InvalidField("host", "%q is not a host name (no scheme or path; a port is allowed)", r.Host)
		}
		if err := checkRepoPath(r.Provider, r.Path); err != nil {
			return model.Repository{}, err
		}
	}
	if err := textlimit.Path.Check("path", r.Path); err != nil {
		return model.Repository{}, err
	}
	return s.store.CreateRepository(ctx, r)
}

var hostPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$`)

// checkRepoPath checks a hosted repository's path: slash-separated
// segments without blanks or dot segments; owner/name on GitHub, at least
// group/project on GitLab.
func checkRepoPath(provider, path string) error {
	segments := strings.Split(path, "/")
	for _, seg := range segments {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsFunc(seg, unicode.IsSpace) {
			return errdefs.InvalidField("path", "%q is not a repository path (segments separated by single slashes, no spaces)", path)
		}
	}
	switch p, _ := providers.Normalize(provider); {
	case p == providers.GitHub && len(segments) != 2:
		return errdefs.InvalidField("path", "%q is not owner/name", path)
	case p == providers.GitLab && len(segments) < 2:
		return errdefs.InvalidField("path", "%q is not a group/project path", path)
	}
	return nil
}

// Remote is what a clone URL names.
type Remote struct {
	Host string // lower-case, without port; "" for file:// URLs
	Path string
}

// ParseRemote extracts host and path from a clone URL:
// https://host/owner/name(.git), ssh://git@host[:port]/path(.git), the
// scp-like git@host:path(.git), or file:///path. A URL carrying a password,
// a query or a fragment is refused without echoing it.
func ParseRemote(remote string) (Remote, error) {
	if i := strings.Index(remote, "://"); i < 0 {
		// scp-like: [user@]host:path
		at := strings.LastIndex(remote, "@")
		colon := strings.Index(remote, ":")
		if colon <= at+1 || strings.ContainsAny(remote[:colon], "/ ") {
			return Remote{}, fmt.Errorf("is not a clone URL (https://, ssh://, file:// or user@host:path)")
		}
		if at >= 0 && (strings.Contains(remote[:at], ":") || looksLikeToken(remote[:at])) {
			return Remote{}, errors.New("must not carry credentials (the value is not shown)")
		}
		r := Remote{Host: strings.ToLower(remote[at+1 : colon]), Path: cleanRepoPath(remote[colon+1:])}
		if r.Path == "" {
			return Remote{}, fmt.Errorf("names no repository path")
		}
		return r, nil
	}
	u, err := url.Parse(remote)
	if err != nil {
		return Remote{}, fmt.Errorf("is not a URL (the value is not shown)")
	}
	if problem := urlSecretProblem(u); problem != "" {
		return Remote{}, errors.New(problem)
	}
	if u.Scheme == "file" {
		if u.Host != "" || u.Path == "" {
			return Remote{}, fmt.Errorf("a file URL must name an absolute path (file:///path)")
		}
		return Remote{Path: u.Path}, nil
	}
	if u.Hostname() == "" {
		return Remote{}, fmt.Errorf("names no host")
	}
	r := Remote{Host: strings.ToLower(u.Hostname()), Path: cleanRepoPath(u.Path)}
	if r.Path == "" {
		return Remote{}, fmt.Errorf("names no repository path")
	}
	return r, nil
}

func cleanRepoPath(p string) string {
	p = strings.Trim(strings.TrimSpace(p), "/")
	return strings.TrimSuffix(p, ".git")
}

// GetRepository returns one repository.
func (s *Service) GetRepository(ctx context.Context, id string) (model.Repository, error) {
	if err := required("repository_id", id); err != nil {
		return model.Repository{}, err
	}
	return s.store.GetRepository(ctx, id)
}

// ListRepositories returns a workspace's repositories.
func (s *Service) ListRepositories(ctx context.Context, workspaceID string) ([]model.Repository, error) {
	return s.ListRepositoriesPage(ctx, workspaceID, store.Page{})
}

// ListRepositoriesPage returns the page p of ListRepositories.
func (s *Service) ListRepositoriesPage(ctx context.Context, workspaceID string, p store.Page) ([]model.Repository, error) {
	if err := required("workspace_id", workspaceID); err != nil {
		return nil, err
	}
	return s.store.ListRepositoriesPage(ctx, workspaceID, p)
}

// TaskInput is a request to create a task.
type TaskInput struct {
	WorkspaceID  string
	Title        string
	Description  string
	RepositoryID string // the primary repository
}

// CreateTask creates a task on its primary repository.
func (s *Service) CreateTask(ctx context.Context, in TaskInput) (model.Task, error) {
	if err := required("workspace_id", in.WorkspaceID); err != nil {
		return model.Task{}, err
	}
	title := strings.TrimSpace(in.Title)
	if err := checkName("title", title, textlimit.Title); err != nil {
		return model.Task{}, err
	}
	if err := textlimit.Text.Check("description", in.Description); err != nil {
		return model.Task{}, err
	}
	if err := required("repository_id", in.RepositoryID); err != nil {
		return model.Task{}, err
	}
	return s.store.CreateTask(ctx, model.Task{WorkspaceID: in.WorkspaceID, Title: title, Description: in.Description}, in.RepositoryID)
}

// GetTask returns a task with its repositories and provider set.
func (s *Service) GetTask(ctx context.Context, id string) (model.Task, error) {
	if err := required("task_id", id); err != nil {
		return model.Task{}, err
	}
	return s.store.GetTask(ctx, id)
}

// ListTasks returns a workspace's tasks.
func (s *Service) ListTasks(ctx context.Context, workspaceID string) ([]model.Task, error) {
	return s.ListTasksPage(ctx, workspaceID, store.Page{})
}

// ListTasksPage returns the page p of ListTasks.
func (s *Service) ListTasksPage(ctx context.Context, workspaceID string, p store.Page) ([]model.Task, error) {
	if err := required("workspace_id", workspaceID); err != nil {
		return nil, err
	}
	return s.store.ListTasksPage(ctx, workspaceID, p)
}

func validateBatch(taskID string, repoIDs []string) error {
	if err := required("task_id", taskID); err != nil {
		return err
	}
	if len(repoIDs) == 0 {
		return errdefs.InvalidField("repository_ids", "name at least one repository")
	}
	if len(repoIDs) > MaxBatch {
		return errdefs.InvalidField("repository_ids", "%d repositories in one batch; the limit is %d", len(repoIDs), MaxBatch)
	}
	seen := make(map[string]int, len(repoIDs))
	for i, id := range repoIDs {
		field := fmt.Sprintf("repository_ids[%d]", i)
		if err := required(field, id); err != nil {
			return err
		}
		if j, dup := seen[id]; dup {
			return errdefs.InvalidField(field, "repeats repository_ids[%d] (%q)", j, id)
		}
		seen[id] = i
	}
	return nil
}

func required(field, value string) error {
	if strings.TrimSpace(value) == "" {
		return errdefs.RequiredField(field)
	}
	return nil
}

// checkName refuses a blank value, or one that kind does not allow.
func checkName(field, value string, kind textlimit.Kind) error {
	if err := required(field, value); err != nil {
		return err
	}
	return kind.Check(field, value)
}
