package service

import (
	"context"
	"fmt"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// The governed catalog of external MCP servers (docs/catalog.md):
// servers are recorded disabled, their tools discovered disabled, and an
// administrator enables and assigns them to workspaces. Every committed
// change that can change what a session sees bumps the catalog generation
// (in the store) and then calls catalogChanged.

// catalogState is the Service's share of the catalog: the connections and
// the change hook, and one lock per server so that discoveries of one
// server (and its updates) apply in the order they ran.
type catalogState struct {
	pool     *catalog.Pool
	onChange func(context.Context)
	locks    sync.Map // server id → *sync.Mutex
}

func (c *catalogState) lock(serverID string) func() {
	m, _ := c.locks.LoadOrStore(serverID, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// catalogChanged runs after every committed change that bumped the catalog
// generation: a server or tool enabled or disabled, a tool assigned or
// unassigned, a discovery that changed, removed or restored tools. It is
// the one place where live sessions learn of catalog changes: the
// reconciler brings each to its workspace's external tool set before the
// request returns (each within the push timeout).
func (s *Service) catalogChanged(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if active, err := s.store.ActiveSessions(ctx); err != nil {
		s.log.ErrorContext(ctx, "list sessions for a catalog change", "error", err.Error())
	} else {
		// Other replicas' sessions: their owners learn of the change from
		// the database (FollowCommits).
		own, _ := s.mine(running(active))
		s.reconcileAndWait(ctx, own)
	}
	if s.catalog.onChange != nil {
		s.catalog.onChange(ctx)
	}
}

// errNoPool is the discovery error of a service without connections.
var errNoPool = fmt.Errorf("this orchestrator does not connect to MCP servers: %w", errdefs.ErrFailedPrecondition)

var (
	serverName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	// An HTTP token of at most 128 bytes (the length is checked apart:
	// `{1,128}` compiled at every start cost ≈0.5 ms).
	headerToken  = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	headerPrefix = regexp.MustCompile(`^[A-Za-z0-9 ._:=-]{0,32}$`)
)

// managedHeaders are set by the MCP transport or HTTP itself; a server
// may not set them.
var managedHeaders = map[string]bool{
	"Accept": true, "Connection": true, "Content-Length": true, "Content-Type": true, "Host": true,
	"Keep-Alive": true, "Last-Event-Id": true, "Mcp-Protocol-Version": true, "Mcp-Session-Id": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// containsToken reports whether s holds something that looks like a
// GitHub or GitLab token anywhere.
func containsToken(s string) bool { return scrub.ContainsTokenPrefix(s) }

// checkMCPServer validates a server's transport (and its name, when
// withName) and returns it normalized: exactly one transport, Transport
// set from it, header names canonical. Errors name the request field and
// never echo a value that could be a secret.
func checkMCPServer(in model.MCPServer, withName bool) (model.MCPServer, error) {
	out := model.MCPServer{ID: in.ID, Name: strings.TrimSpace(in.Name)}
	if withName {
		if err := required("server.name", out.Name); err != nil {
			return out, err
		}
		if !serverName.MatchString(out.Name) {
			return out, errdefs.InvalidField("server.name",
				"must be 1 to 32 lower-case letters, digits and -, starting with a letter (it starts the names agents see)")
		}
	}
	switch {
	case in.Stdio != nil && in.HTTP != nil:
		return out, errdefs.InvalidField("server.transport", "set one of stdio and http, not both")
	case in.Stdio != nil:
		stdio, err := checkStdio(*in.Stdio)
		out.Transport, out.Stdio = model.TransportStdio, &stdio
		return out, err
	case in.HTTP != nil:
		h, err := checkHTTP(*in.HTTP)
		out.Transport, out.HTTP = model.TransportHTTP, &h
		return out, err
	}
	return out, errdefs.InvalidField("server.transport", "set stdio (a command) or http (a URL)")
}

// MaxStdioArgs bounds a stdio server's arguments.
const MaxStdioArgs = 256

func checkStdio(in model.StdioTransport) (model.StdioTransport, error) {
	out := model.StdioTransport{Command: in.Command, WorkingDir: in.WorkingDir}
	switch {
	case in.Command == "":
		return out, errdefs.RequiredField("server.stdio.command")
	case containsToken(in.Command):
		return out, errdefs.InvalidField("server.stdio.command", "looks like it holds a token (the value is not shown)")
	case strings.ContainsRune(in.Command, 0) || !filepath.IsAbs(in.Command):
		return out, errdefs.InvalidField("server.stdio.command", "%q is not an absolute path", in.Command)
	}
	if info, err := os.Stat(in.Command); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return out, errdefs.InvalidField("server.stdio.command", "%s is not an executable file on the orchestrator's host", in.Command)
	}
	if len(in.Args) > MaxStdioArgs {
		return out, errdefs.InvalidField("server.stdio.args", "%d arguments; the limit is %d", len(in.Args), MaxStdioArgs)
	}
	for i, a := range in.Args {
		field := fmt.Sprintf("server.stdio.args[%d]", i)
		switch {
		case containsToken(a):
			return out, errdefs.InvalidField(field,
				"looks like it holds a token; give secrets as server.stdio.env references (the value is not shown)")
		case strings.ContainsRune(a, 0) || len(a) > 4096:
			return out, errdefs.InvalidField(field, "holds a NUL byte or is over 4096 bytes")
		}
	}
	out.Args = append([]string(nil), in.Args...)
	if in.WorkingDir != "" {
		if strings.ContainsRune(in.WorkingDir, 0) || !filepath.IsAbs(in.WorkingDir) {
			return out, errdefs.InvalidField("server.stdio.working_dir", "%q is not an absolute path", in.WorkingDir)
		}
		if info, err := os.Stat(in.WorkingDir); err != nil || !info.IsDir() {
			return out, errdefs.InvalidField("server.stdio.working_dir", "%s is not a directory on the orchestrator's host", in.WorkingDir)
		}
	}
	seen := map[string]int{}
	for i, e := range in.Env {
		field := fmt.Sprintf("server.stdio.env[%d]", i)
		if len(e.Name) > 256 || !envVarName.MatchString(e.Name) {
			return out, errdefs.InvalidField(field+".name", "is not an environment variable name (letters, digits and _; the value is not shown)")
		}
		if j, dup := seen[e.Name]; dup {
			return out, errdefs.InvalidField(field+".name", "repeats server.stdio.env[%d] (%s)", j, e.Name)
		}
		seen[e.Name] = i
		if looksLikeToken(e.FromEnv) {
			return out, errdefs.InvalidField(field+".from_env",
				"looks like a token, not the name of the orchestrator's variable holding it (the value is not shown)")
		}
		if len(e.FromEnv) > 256 || !envVarName.MatchString(e.FromEnv) {
			return out, errdefs.InvalidField(field+".from_env",
				"is not an environment variable name (letters, digits and _; the value is not shown)")
		}
		out.Env = append(out.Env, e)
	}
	return out, nil
}

func checkHTTP(in model.HTTPTransport) (model.HTTPTransport, error) {
	out := model.HTTPTransport{URL: strings.TrimSpace(in.URL)}
	if err := required("server.http.url", out.URL); err != nil {
		return out, err
	}
	u, err := url.Parse(out.URL)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(out.URL) > 2048:
		return out, errdefs.InvalidField("server.http.url", "is not an absolute http(s) URL (the value is not shown)")
	case u.User != nil || containsToken(out.URL):
		return out, errdefs.InvalidField("server.http.url",
			"must not carry credentials (the value is not shown); give them as server.http.headers references")
	}
	if problem := urlSecretProblem(u); problem != "" {
		return out, errdefs.InvalidField("server.http.url", "%s", problem)
	}
	seen := map[string]int{}
	for i, h := range in.Headers {
		field := fmt.Sprintf("server.http.headers[%d]", i)
		if len(h.Name) > 128 || !headerToken.MatchString(h.Name) {
			return out, errdefs.InvalidField(field+".name", "is not an HTTP header name (the value is not shown)")
		}
		h.Name = textproto.CanonicalMIMEHeaderKey(h.Name)
		if managedHeaders[h.Name] {
			return out, errdefs.InvalidField(field+".name", "%s is set by the MCP transport", h.Name)
		}
		if j, dup := seen[h.Name]; dup {
			return out, errdefs.InvalidField(field+".name", "repeats server.http.headers[%d] (%s)", j, h.Name)
		}
		seen[h.Name] = i
		if looksLikeToken(strings.TrimSpace(h.Prefix)) || containsToken(h.Prefix) || !headerPrefix.MatchString(h.Prefix) {
			return out, errdefs.InvalidField(field+".prefix",
				"must be at most 32 letters, digits, spaces and ._:=- such as \"Bearer \" (the value is not shown)")
		}
		switch h.Value.Kind {
		case model.CredentialEnv:
			if looksLikeToken(h.Value.Ref) {
				return out, errdefs.InvalidField(field+".value.env_var",
					"looks like a token, not the name of the variable holding it (the value is not shown)")
			}
			if len(h.Value.Ref) > 256 || !envVarName.MatchString(h.Value.Ref) {
				return out, errdefs.InvalidField(field+".value.env_var",
					"is not an environment variable name (letters, digits and _; the value is not shown)")
			}
		case model.CredentialFile:
			if !filepath.IsAbs(h.Value.Ref) || strings.ContainsRune(h.Value.Ref, 0) || containsToken(h.Value.Ref) {
				return out, errdefs.InvalidField(field+".value.file_path", "is not an absolute path (the value is not shown)")
			}
		default:
			return out, errdefs.InvalidField(field+".value", "set env_var or file_path")
		}
		out.Headers = append(out.Headers, h)
	}
	return out, nil
}

// CreateMCPServer records a server, disabled, and runs its first
// discovery. A failed discovery is not an error: it is recorded on the
// server (DiscoveryError) and the catalog stays empty.
func (s *Service) CreateMCPServer(ctx context.Context, in model.MCPServer) (model.MCPServer, model.DiscoveryCounts, error) {
	p, err := checkMCPServer(in, true)
	if err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	if p, err = s.store.CreateMCPServer(ctx, p); err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	return s.discover(ctx, p, false)
}

// UpdateMCPServer replaces the transport of the server in.ID (an id
// or a name) and runs discovery over the new one. The name cannot change.
// Like CreateMCPServer, a failed discovery is recorded, not returned.
func (s *Service) UpdateMCPServer(ctx context.Context, in model.MCPServer) (model.MCPServer, model.DiscoveryCounts, error) {
	if err := required("server.id", in.ID); err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	p, err := checkMCPServer(in, false)
	if err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	old, err := s.store.GetMCPServer(ctx, in.ID)
	if err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	if p.Name != "" && p.Name != old.Name {
		return model.MCPServer{}, model.DiscoveryCounts{}, errdefs.InvalidField("server.name",
			"cannot change (%q); exposed tool names are built from it", old.Name)
	}
	unlock := s.catalog.lock(old.ID)
	updated, err := s.store.UpdateMCPServerTransport(ctx, old.ID, p)
	unlock()
	if err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	if s.catalog.pool != nil {
		s.catalog.pool.Forget(old.ID)
	}
	return s.discover(ctx, updated, false)
}

// GetMCPServer returns a server by id or name.
func (s *Service) GetMCPServer(ctx context.Context, server string) (model.MCPServer, error) {
	if err := required("server", server); err != nil {
		return model.MCPServer{}, err
	}
	return s.store.GetMCPServer(ctx, server)
}

// ListMCPServers returns every server, by name.
func (s *Service) ListMCPServers(ctx context.Context) ([]model.MCPServer, error) {
	return s.store.ListMCPServers(ctx)
}

// TestMCPServer connects to a server on a new connection and lists
// its tools. It changes nothing: neither the catalog nor the server's
// discovery fields.
func (s *Service) TestMCPServer(ctx context.Context, server string) (catalog.TestResult, error) {
	p, err := s.GetMCPServer(ctx, server)
	if err != nil {
		return catalog.TestResult{}, err
	}
	if s.catalog.pool == nil {
		return catalog.TestResult{}, errNoPool
	}
	return s.catalog.pool.Test(ctx, p)
}

// RefreshMCPServer runs a server's discovery and returns what it
// changed. A failed discovery is recorded on the server, the catalog is
// kept, and the error is returned.
func (s *Service) RefreshMCPServer(ctx context.Context, server string) (model.MCPServer, model.DiscoveryCounts, error) {
	p, err := s.GetMCPServer(ctx, server)
	if err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	return s.discover(ctx, p, true)
}

// discover lists the server's tools and applies them to the catalog. A
// failure is recorded on the server; it is returned only if fail.
func (s *Service) discover(ctx context.Context, p model.MCPServer, fail bool) (model.MCPServer, model.DiscoveryCounts, error) {
	unlock := s.catalog.lock(p.ID)
	defer unlock()
	// Discover with the server as stored now: an update may have
	// replaced its transport since it was read.
	current, err := s.store.GetMCPServer(ctx, p.ID)
	if err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	var tools []model.DiscoveredTool
	derr := errNoPool
	if s.catalog.pool != nil {
		tools, derr = s.catalog.pool.Discover(ctx, current)
	}
	s.metrics.Discovery(derr)
	if derr != nil {
		s.log.Warn("MCP server discovery failed", "server", current.Name, "error", derr.Error())
		// Recorded even when the request is cancelled: the failure is the
		// server's state now.
		if err := s.store.RecordDiscoveryFailure(context.WithoutCancel(ctx), current.ID, derr.Error()); err != nil {
			return model.MCPServer{}, model.DiscoveryCounts{}, err
		}
		current, err = s.store.GetMCPServer(ctx, current.ID)
		if err != nil {
			return model.MCPServer{}, model.DiscoveryCounts{}, err
		}
		if fail {
			return current, model.DiscoveryCounts{}, derr
		}
		return current, model.DiscoveryCounts{}, nil
	}
	counts, err := s.store.ApplyDiscovery(ctx, current.ID, tools, time.Now().UTC())
	if err != nil {
		return model.MCPServer{}, model.DiscoveryCounts{}, err
	}
	s.log.Info("MCP server discovered", "server", current.Name, "new", counts.New, "changed", counts.Changed,
		"unchanged", counts.Unchanged, "unavailable", counts.Unavailable, "restored", counts.Restored, "total", counts.Total)
	if counts.AffectsSessions() {
		s.catalogChanged(ctx)
	}
	current, err = s.store.GetMCPServer(ctx, current.ID)
	return current, counts, err
}

// SetMCPServerEnabled enables or disables a server (by id or name).
func (s *Service) SetMCPServerEnabled(ctx context.Context, server string, enabled bool) (model.MCPServer, error) {
	if err := required("server", server); err != nil {
		return model.MCPServer{}, err
	}
	p, changed, err := s.store.SetMCPServerEnabled(ctx, server, enabled)
	if err != nil {
		return model.MCPServer{}, err
	}
	if changed {
		s.catalogChanged(ctx)
	}
	return p, nil
}

// ListCatalogTools returns the catalog's tools, or one server's (by id
// or name) when server is not "".
func (s *Service) ListCatalogTools(ctx context.Context, server string) ([]model.CatalogTool, error) {
	return s.store.ListCatalogTools(ctx, strings.TrimSpace(server))
}

// GetCatalogTool returns a tool by id or exposed name.
func (s *Service) GetCatalogTool(ctx context.Context, tool string) (model.CatalogTool, error) {
	if err := required("tool", tool); err != nil {
		return model.CatalogTool{}, err
	}
	return s.store.GetCatalogTool(ctx, tool)
}

// SetCatalogToolEnabled enables or disables a tool (by id or exposed
// name). An unavailable tool can be enabled: it is offered again as soon
// as a discovery finds it.
func (s *Service) SetCatalogToolEnabled(ctx context.Context, tool string, enabled bool) (model.CatalogTool, error) {
	if err := required("tool", tool); err != nil {
		return model.CatalogTool{}, err
	}
	ct, changed, err := s.store.SetCatalogToolEnabled(ctx, tool, enabled)
	if err != nil {
		return model.CatalogTool{}, err
	}
	if changed {
		s.catalogChanged(ctx)
	}
	return ct, nil
}

// AssignCatalogTool lets the sessions of a workspace see a tool (by id or
// exposed name), or stops it when assigned is false.
func (s *Service) AssignCatalogTool(ctx context.Context, tool, workspaceID string, assigned bool) (model.CatalogTool, error) {
	if err := required("tool", tool); err != nil {
		return model.CatalogTool{}, err
	}
	if err := required("workspace_id", workspaceID); err != nil {
		return model.CatalogTool{}, err
	}
	ct, changed, err := s.store.AssignCatalogTool(ctx, tool, workspaceID, assigned)
	if err != nil {
		return model.CatalogTool{}, err
	}
	if changed {
		s.catalogChanged(ctx)
	}
	return ct, nil
}
