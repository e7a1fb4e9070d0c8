package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolscope/toolscope/agentctl/internal/mcpbridge"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/profiles"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// Environment variables agentctl sets for the agent process.
const (
	EnvMCPURL    = "TOOLSCOPE_MCP_URL"    // streamable HTTP endpoint of the session
	EnvMCPToken  = "TOOLSCOPE_MCP_TOKEN"  // its bearer token
	EnvMCPConfig = "TOOLSCOPE_MCP_CONFIG" // path of the generated MCP client config
	EnvSessionID = "TOOLSCOPE_SESSION_ID"
	EnvTaskID    = "TOOLSCOPE_TASK_ID"
)

// session is one agent session hosted by the daemon.
type session struct {
	id, taskID, workspaceID string
	mode                    registry.Mode
	dir                     string // holds mcp.json, bridge.json and the agent's logs
	token                   string
	url                     string
	uid                     int // the agent's uid; noUID: agentctl's own
	// workspace holds repos' checkouts (empty: none); fixed at launch.
	workspace string
	repos     []repo

	pub      *mcpserver.Publisher
	endpoint *mcpserver.Endpoint

	// mu guards the registry's inputs (mode is fixed at launch): every
	// rebuild happens under it, from the latest of each (rebuildLocked).
	mu        sync.Mutex
	providers providers.Set
	gen       uint64
	genMoved  chan struct{}   // closed and replaced when gen moves
	external  []registry.Tool // pushed external tool descriptors, validated
	extGen    uint64
	// orientation is the orchestrator's, as of its last launch or push
	// that carried one (oriented); the instructions say it.
	orientation []toolapi.Orientation
	oriented    bool
	phase       agentctlv1.SessionPhase
	exitCode    int32
	exitTail    string // the last lines of the agent's output, once it exited
	agent       *exec.Cmd
	agentDone   chan struct{} // closed when the agent process has been reaped
}

// status returns the session as agentctl sees it.
func (s *session) status() *agentctlv1.SessionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &agentctlv1.SessionStatus{
		SessionId:               s.id,
		Phase:                   s.phase,
		Mode:                    modeToProto(s.mode),
		ProviderSet:             &agentctlv1.ProviderSet{Providers: s.providers.Strings(), Generation: s.gen},
		ToolNames:               s.toolNamesLocked(),
		McpUrl:                  s.url,
		AgentExitCode:           s.exitCode,
		AgentOutputTail:         s.exitTail,
		McpBearerToken:          s.token,
		ExternalToolsGeneration: s.extGen,
		WorkspaceDir:            s.workdirLocked(),
		Checkouts:               s.checkoutStates(),
	}
}

func (s *session) toolNamesLocked() []string {
	if s.pub == nil {
		return nil
	}
	return s.pub.Desired().Names()
}

// specLocked is what the session's registry is assembled from: agentctl
// runs next to the agent and its checkout, so its surface is colocated.
func (s *session) specLocked() registry.Spec {
	return registry.Spec{Mode: s.mode, Providers: s.providers, External: s.external, Transport: toolapi.TransportColocated, Workspace: s.hasCheckout()}
}

// rebuildLocked publishes the registry of the session's current mode,
// providers and external tools, and reports whether the surface changed.
// s.mu is held, so pushes of providers and of external tools that race
// each other always publish from the latest of both.
func (s *session) rebuildLocked() bool {
	if s.pub == nil {
		return false // still starting: start builds from the latest inputs
	}
	return s.pub.Publish(registry.Build(s.specLocked()))
}

// surface is a pushed surface, validated: a part that is nil is kept.
type surface struct {
	providers *agentctlv1.ProviderSet
	set       providers.Set // providers', normalized once (newSurface)
	external  *agentctlv1.ExternalToolSet
	tools     []registry.Tool // external's tools, validated
	// orientation, if set, replaces the session's (it has no generation).
	orientation *agentctlv1.OrientationSet
}

// newSurface is a surface of the parts given; the provider set is
// normalized here, once, through internal/providers.
func newSurface(ps *agentctlv1.ProviderSet, ext *agentctlv1.ExternalToolSet, tools []registry.Tool) surface {
	return surface{providers: ps, set: providers.Of(ps.GetProviders()...), external: ext, tools: tools}
}

// stale is agentctl's one stale check: a part whose generation is older
// than the applied one is ignored.
func stale(gen, applied uint64) bool { return gen < applied }

// apply applies each part of a pushed surface that is not stale, and
// rebuilds the registry once, from the mode (fixed at launch) and the
// latest of both parts. It reports what is now applied.
func (s *session) apply(in surface) *agentctlv1.ApplySurfaceResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	accepted, moved := true, false
	if p := in.providers; p != nil {
		if stale(p.GetGeneration(), s.gen) {
			accepted = false
		} else {
			if p.GetGeneration() != s.gen {
				// wake the calls waiting for their own change (adopt.go)
				close(s.genMoved)
				s.genMoved = make(chan struct{})
			}
			s.providers, s.gen, moved = in.set, p.GetGeneration(), true
		}
	}
	if e := in.external; e != nil {
		if stale(e.GetGeneration(), s.extGen) {
			accepted = false
		} else {
			s.external, s.extGen, moved = in.tools, e.GetGeneration(), true
		}
	}
	if o := in.orientation; o != nil {
		s.orientation, s.oriented = orientationOf(o), true
	}
	return &agentctlv1.ApplySurfaceResponse{
		AppliedProviderSet:             &agentctlv1.ProviderSet{Providers: s.providers.Strings(), Generation: s.gen},
		AppliedExternalToolsGeneration: s.extGen,
		Accepted:                       accepted,
		ToolsChanged:                   moved && s.rebuildLocked(),
	}
}

// serveMCP starts the session's streamable HTTP endpoint on host, behind
// its bearer token, within limits.
func (s *session) serveMCP(host string, port int, limits mcpserver.Limits) error {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listen for MCP on %s port %d: %w", host, port, err)
	}
	addr := lis.Addr().(*net.TCPAddr)
	if addr.IP.IsUnspecified() {
		// Bound to every interface: the agent next to agentctl reaches it
		// on loopback.
		addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: addr.Port}
	}
	s.url = "http://" + addr.String() + mcpserver.Path
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if subtle.ConstantTimeCompare([]byte(token), []byte(s.token)) != 1 {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: s.id}, nil
	}
	s.endpoint = s.pub.Serve(lis, verify, limits)
	return nil
}

// MCPConfig is the file agentctl writes for an agent: the mcpServers shape
// Claude Code (--mcp-config, .mcp.json) and most MCP hosts read.
type MCPConfig struct {
	MCPServers map[string]MCPServerEntry `json:"mcpServers"`
}

// MCPServerEntry is one server of an MCPConfig.
type MCPServerEntry struct {
	Type    string            `json:"type"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
}

// writeConfigs writes bridge.json and the generic MCP client configs,
// readable by the owner only: mcp.json (the session over HTTP) and, when
// agentctlPath is known, mcp-stdio.json (the same session through the
// stdio bridge). One server entry per file: a client that loads a file
// with both would see every tool twice.
func (s *session) writeConfigs(agentctlPath string) error {
	bridge := filepath.Join(s.dir, "bridge.json")
	if err := s.writeJSON(bridge, mcpbridge.Config{URL: s.url, Token: s.token, SessionID: s.id}); err != nil {
		return err
	}
	if agentctlPath != "" {
		stdio := MCPConfig{MCPServers: map[string]MCPServerEntry{
			profiles.ServerName: {Type: "stdio", Command: agentctlPath, Args: []string{"mcp", "--config", bridge}},
		}}
		if err := s.writeJSON(filepath.Join(s.dir, "mcp-stdio.json"), stdio); err != nil {
			return err
		}
	}
	return s.writeJSON(filepath.Join(s.dir, "mcp.json"), MCPConfig{MCPServers: map[string]MCPServerEntry{
		profiles.ServerName: {Type: "http", URL: s.url, Headers: map[string]string{"Authorization": "Bearer " + s.token}},
	}})
}

func (s *session) writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return s.writeFile(path, append(b, '\n'))
}

// writeFile writes a file of the session's directory, readable by the
// session's uid alone.
func (s *session) writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := s.own(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// startAgent starts the agent command with the MCP endpoint injected. The
// agent's environment is an allowlist (profiles.Allowed): the listed
// variables of agentctl's environment, then the spec's env and the plan's,
// then the MCP variables. With a uid of its own, it runs under it, with
// its session directory as HOME and its tmp as TMPDIR. It runs in its own
// process group.
func (s *session) startAgent(spec *agentctlv1.AgentCommand, agentctlPath string, opts Options, onExit func(code int32, tail string)) error {
	plan, err := profiles.Render(profileSpec(spec),
		profiles.Endpoint{URL: s.url, Token: s.token, Bridge: filepath.Join(s.dir, "bridge.json"), Agentctl: agentctlPath, Dir: s.dir})
	if err != nil {
		return err
	}
	for _, f := range plan.Files {
		if err := s.mkdirAll(filepath.Dir(f.Path)); err != nil {
			return err
		}
		if err := s.writeFile(f.Path, []byte(f.Content)); err != nil {
			return err
		}
	}
	argv, extraEnv := plan.Argv, plan.Env
	if len(argv) == 0 {
		return fmt.Errorf("no agent command")
	}
	if err := s.reachesItsTools(plan.Reach); err != nil {
		return err
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return agentNotFound(argv[0], err)
	}
	cmd := exec.Command(path, argv[1:]...)
	s.mu.Lock()
	// The launch's, else the workspace, else the session's own directory
	// (its HOME): never agentctl's, which on the local executor is the
	// orchestrator's.
	cmd.Dir = cmp.Or(spec.GetWorkingDir(), s.workdirLocked(), s.dir)
	s.mu.Unlock()
	env := profiles.Filter(os.Environ(), plan.PassEnv)
	if s.uid != noUID {
		// agentctl's home is not the agent's, and neither is the host's
		// temporary directory: the uid serves later sessions, so what the
		// agent leaves there (Claude Code's claude-<uid>, cc-socks) would
		// reach them. Both end with the session's directory.
		tmp := filepath.Join(s.dir, "tmp")
		if err := s.mkdirAll(tmp); err != nil {
			return err
		}
		env = append(env, "HOME="+s.dir, "TMPDIR="+tmp)
	}
	for k, v := range spec.GetEnv() {
		env = append(env, k+"="+v)
	}
	for k, v := range extraEnv {
		env = append(env, k+"="+v)
	}
	env = append(env,
		EnvMCPURL+"="+s.url, EnvMCPToken+"="+s.token, EnvMCPConfig+"="+filepath.Join(s.dir, "mcp.json"),
		EnvSessionID+"="+s.id, EnvTaskID+"="+s.taskID)
	cmd.Env = env
	// The agent writes to a pipe; agentctl copies it into agent.log,
	// bounded (rotatingLog). A pipe, not the file itself: nothing else
	// could bound what the agent writes.
	logFile, err := openRotatingLog(filepath.Join(s.dir, "agent.log"), opts.AgentLogMax, s.own)
	if err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = logFile.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.credential()}
	err = cmd.Start()
	_ = pw.Close() // the agent holds the write end now
	if err != nil {
		_ = pr.Close()
		_ = logFile.Close()
		if s.uid != noUID && errors.Is(err, os.ErrPermission) {
			return errdefs.FailedPrecondition("start agent %q as uid %d (a uid of its own, not agentctl's): %v; the command and the working directory %q must be reachable by that uid",
				argv[0], s.uid, err, spec.GetWorkingDir())
		}
		return errdefs.FailedPrecondition("start agent command `%s` in %q: %v", argv[0], spec.GetWorkingDir(), err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(logFile, pr)
		_ = pr.Close()
	}()
	s.mu.Lock()
	s.agent, s.agentDone = cmd, make(chan struct{})
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		// What the agent wrote last is in agent.log before the event
		// goes out, unless a process it left holds the pipe open.
		select {
		case <-copied:
		case <-time.After(agentOutputDrain):
		}
		code := int32(cmd.ProcessState.ExitCode())
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			code = -1
		}
		out := tail(logFile.path, opts.ExitTailLines, opts.ExitTailBytes)
		s.mu.Lock()
		if s.phase == agentctlv1.SessionPhase_SESSION_PHASE_RUNNING {
			s.phase, s.exitCode, s.exitTail = agentctlv1.SessionPhase_SESSION_PHASE_AGENT_EXITED, code, out
		}
		s.mu.Unlock()
		close(s.agentDone)
		onExit(code, out)
		<-copied
		_ = logFile.Close()
	}()
	return nil
}

// reachesItsTools refuses to start an agent, under a uid of its own, that
// could not reach its MCP configuration or server: it would run, and
// silently have none of its tools.
func (s *session) reachesItsTools(paths []profiles.Reach) error {
	if s.uid == noUID {
		return nil
	}
	for _, r := range paths {
		if r.Run {
			if err := agentuid.Reaches(uint32(s.uid), r.Path, agentuid.Run); err != nil {
				return errdefs.FailedPrecondition("the agent would have none of its tools: it runs %s to reach them (its MCP server), and %v; "+
					"install agentctl where every user may run it (mode o+x along its path, e.g. /usr/local/bin)", r.Path, err)
			}
			continue
		}
		if err := agentuid.Reaches(uint32(s.uid), r.Path, agentuid.Read); err != nil {
			return errdefs.FailedPrecondition("the agent would have none of its tools: it reads %s to find them, and %v; "+
				"give agentctl a state directory whose parents other users may traverse (mode o+x: agentctl serve --state-dir)", r.Path, err)
		}
	}
	return nil
}

// agentOutputDrain bounds how long an exited agent's last output is
// waited for before its exit is reported: a process it started may hold
// its output open.
const agentOutputDrain = 2 * time.Second

// agentNotFound is the error of an agent command that cannot be run from
// where this agentctl runs (the executor's host or container): a
// precondition of the launch, named as the user gave it.
func agentNotFound(name string, err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		if strings.ContainsRune(name, '/') {
			return errdefs.FailedPrecondition("agent command `%s` not found on the executor", name)
		}
		return errdefs.FailedPrecondition("agent command `%s` not found on the executor's PATH; install it there, or name it by its full path", name)
	}
	return errdefs.FailedPrecondition("agent command `%s`: %v", name, err)
}

// stopped reports whether the session was stopped.
func (s *session) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.phase == agentctlv1.SessionPhase_SESSION_PHASE_STOPPED
}

// stop ends the agent (SIGTERM to its group, SIGKILL after grace) and the
// MCP endpoint. It is idempotent.
func (s *session) stop(grace time.Duration) {
	s.mu.Lock()
	if s.phase == agentctlv1.SessionPhase_SESSION_PHASE_STOPPED {
		s.mu.Unlock()
		return
	}
	s.phase = agentctlv1.SessionPhase_SESSION_PHASE_STOPPED
	agent, done := s.agent, s.agentDone
	s.mu.Unlock()
	if agent != nil {
		_ = syscall.Kill(-agent.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			_ = syscall.Kill(-agent.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	if s.uid != noUID {
		agentuid.End(uint32(s.uid))
	}
	s.pub.Close()
	// Every connection is closed, notification streams included: they
	// never end by themselves, and the session is over.
	s.endpoint.Close()
}

func (s *session) event(kind agentctlv1.SessionEventKind, msg string) *agentctlv1.SessionEvent {
	return &agentctlv1.SessionEvent{SessionId: s.id, Kind: kind, Time: timestamppb.Now(), Message: msg}
}

// reportRefusal sends the orchestrator the report of a call this session's
// endpoint refused, for its audit: bound to the session like a call, the
// tool name the agent's own text, which the orchestrator checks.
func (s *session) reportRefusal(h *hub) func(context.Context, mcpserver.Refusal) bool {
	return func(_ context.Context, r mcpserver.Refusal) bool {
		return h.refused(&agentctlv1.ToolRefused{
			SessionId: s.id, TaskId: s.taskID, ToolName: r.Tool, ErrorCode: r.Code, Suppressed: uint32(min(r.Suppressed, math.MaxUint32)),
		})
	}
}

// toolHandler forwards a call to the orchestrator, binding the session's
// identity. Arguments are checked against the tool's schema first, so a
// malformed call never leaves agentctl.
func (d *Daemon) toolHandler(s *session) mcpserver.HandlerFunc {
	return func(tool registry.Tool) mcp.ToolHandler {
		// Only what a call reads of its tool: a handler is kept per tool
		// and session, and the whole Tool is ≈150 bytes.
		name, schema := tool.Name, tool.InputSchema
		return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
			// External tools' schemas come from other servers, and the
			// go-sdk does not recover a handler's panic: one call must never
			// take every session of this agentctl down.
			defer func() {
				if r := recover(); r != nil {
					d.log.Error("panic in a tool call", "session_id", s.id, "tool", name, "panic", fmt.Sprint(r))
					res, err = mcpserver.ToolError(toolapi.CodeInternal, "agentctl failed on this call; report this to the toolscope operator"), nil
				}
			}()
			args, refused := d.schemas.CheckArguments(ctx, registry.Tool{Name: name, InputSchema: schema}, req.Params.Arguments)
			if refused != nil {
				return refused, nil
			}
			var before *registry.Registry // the surface before a call that may change it
			if name == toolapi.AddSourcesTool && s.pub != nil {
				before = s.pub.Desired()
			}
			callCtx, cancel := context.WithTimeout(ctx, d.callTimeout)
			defer cancel()
			answer, cerr := d.hub.call(callCtx, &agentctlv1.ToolCall{
				SessionId: s.id, TaskId: s.taskID, ToolName: name, ArgumentsJson: args,
			})
			switch {
			case errors.Is(cerr, ErrOrchestratorUnreachable):
				return mcpserver.ToolError("orchestrator_unreachable",
					"the toolscope orchestrator is not reachable right now; listing tools still works, retry the call later"), nil
			case errors.Is(cerr, context.DeadlineExceeded):
				return mcpserver.ToolError("timeout", fmt.Sprintf("the orchestrator did not answer within %s", d.callTimeout)), nil
			case cerr != nil:
				return mcpserver.ToolError("unavailable", cerr.Error()), nil
			}
			res = fromToolResult(answer)
			if before != nil && !res.IsError {
				s.selfChange(ctx, res, before, d.opts.AdoptWait)
			}
			return res, nil
		}
	}
}

// waitGeneration waits, at most wait, until the session applied provider
// set generation gen or a later one.
func (s *session) waitGeneration(ctx context.Context, gen uint64, wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		applied, moved := s.gen, s.genMoved
		s.mu.Unlock()
		if applied >= gen {
			return true
		}
		select {
		case <-moved:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// selfChange completes the result of a call that changed the caller's own
// surface: once the session applied the generation the result names
// (waiting at most wait), it names the tools that became available
// (mcpserver.NameToolsAdded).
func (s *session) selfChange(ctx context.Context, res *mcp.CallToolResult, before *registry.Registry, wait time.Duration) {
	if gen, ok := mcpserver.AddedGeneration(res); ok && s.waitGeneration(ctx, gen, wait) {
		mcpserver.NameToolsAdded(res, before, s.pub.Desired())
	}
}

func fromToolResult(r *agentctlv1.ToolResult) *mcp.CallToolResult {
	text := r.GetText()
	if r.GetIsError() && r.GetErrorCode() != "" {
		text = r.GetErrorCode() + ": " + text
	}
	out := &mcp.CallToolResult{IsError: r.GetIsError(), Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	if len(r.GetStructuredJson()) > 0 {
		out.StructuredContent = json.RawMessage(r.GetStructuredJson())
	}
	return out
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
