// Package hosted is the orchestrator's hosted MCP endpoint (ADR 0026): a
// session whose surface the orchestrator itself serves over streamable
// HTTP, to an agent that runs elsewhere and can only reach a URL (an IDE on
// a laptop, a hosted agent). It runs no agentctl and no agent.
//
// It is an executors.Executor named "hosted", so a hosted session is a
// session record like the others (listed, inspected, stopped), and its
// surface reaches it the one way every surface does: the reconciler pushes
// the parts that lag through the Controller, whose Agentctl here is
// in-process (the same stale rule as agentctl's). The surface is the same
// registry, built from the same tool table with Transport hosted, and
// published by the same mcpserver.Publisher, so clients get the same
// list_changed once per change. A tool call is handed to the orchestrator's
// call handler (toolcalls) in-process, with the session's identity bound
// here from the bearer token: the same authorization and audit as a call
// that came over an Attach stream.
//
// All hosted sessions share one listener (toolscope serve --hosted): a
// session's URL is /sessions/ID/mcp. Every request needs the session's
// bearer token, a random secret shown once at attach and kept only as its
// SHA-256 (in the handle). A request without it, with a wrong one, another
// session's, or a stopped session's is refused 401 "invalid token" with
// the same answer whether or not the session exists.
//
// The sessions live in the orchestrator's process: a restart ends them
// (Reattach reports them lost), and a resume launches one again with a new
// token.
package hosted

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/internal/version"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// Name is the executor name of hosted sessions (model.ExecutorHosted).
const Name = model.ExecutorHosted

// FlagPrefix is how refusals name the hosted endpoint's flags.
const FlagPrefix = "toolscope serve --hosted-"

// DefaultCallTimeout bounds one tool call's answer, as agentctl's
// --call-timeout does.
const DefaultCallTimeout = 2 * time.Minute

// Options configure the hosted executor.
type Options struct {
	// Calls answers the sessions' tool calls (toolcalls.Dispatcher's
	// CallHandler): the same authorization and audit as every call.
	Calls executors.CallHandler
	// Limits bound the endpoint: HeaderTimeout, IdleTimeout and MaxConns
	// the shared listener, BodyTimeout, MaxSessions (MCP sessions of one
	// hosted session), SessionIdle and KeepAlive each session's endpoint.
	Limits mcpserver.Limits
	// AdoptWait bounds how long a self-triggered change's result waits for
	// the session's clients (mcpserver.DefaultAdoptWait if zero).
	AdoptWait time.Duration
	// CallTimeout bounds one call; DefaultCallTimeout if zero.
	CallTimeout time.Duration
	Logger      *slog.Logger
}

// Executor serves hosted sessions. It is safe for concurrent use.
type Executor struct {
	opts Options
	log  *slog.Logger
	srv  *http.Server
	base string // the URL of the listener, without a path

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	// refuse answers a request for a session this endpoint does not serve
	// exactly as a session answers a wrong token.
	refuse  http.Handler
	schemas mcpserver.Schemas // the tools' input schemas, resolved once
}

// New returns the hosted executor; Serve starts its listener.
func New(opts Options) *Executor {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	opts.Limits.FlagPrefix = FlagPrefix
	opts.Limits = opts.Limits.WithDefaults()
	x := &Executor{opts: opts, log: opts.Logger, sessions: map[string]*session{}}
	x.refuse = auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return nil, auth.ErrInvalidToken
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(http.NotFoundHandler())
	return x
}

// Serve serves the hosted endpoint on lis, whose URL is base ("http://"
// or "https://" and the address clients reach), until Close.
func (x *Executor) Serve(lis net.Listener, base string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/sessions/{id}/mcp", x.serveSession)
	// One bound on connections for all sessions: a connection counts as
	// authenticated once a request on it passes its session's bearer check.
	srv, bounded := mcpserver.NewHTTPServer(mux, lis, x.opts.Limits, x.log)
	srv.ErrorLog = slog.NewLogLogger(x.log.Handler(), slog.LevelWarn)
	x.srv = srv
	x.base = strings.TrimSuffix(base, "/")
	go func() { _ = srv.Serve(bounded) }()
}

// Base returns the URL the endpoint serves on, without a path.
func (x *Executor) Base() string { return x.base }

// URL returns the MCP URL of a session.
func (x *Executor) URL(sessionID string) string {
	return x.base + "/sessions/" + sessionID + mcpserver.Path
}

// serveSession routes a request to its session's endpoint, which checks
// the token. A session this endpoint does not serve (unknown, stopped,
// from before a restart) gets the answer of a wrong token, and the
// connection is closed, as the endpoint does after a refusal.
func (x *Executor) serveSession(w http.ResponseWriter, r *http.Request) {
	x.mu.Lock()
	s := x.sessions[r.PathValue("id")]
	x.mu.Unlock()
	if s == nil {
		w.Header().Set("Connection", "close")
		x.refuse.ServeHTTP(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = mcpserver.Path, ""
	s.endpoint.ServeHTTP(w, r2)
}

// Name implements executors.Executor.
func (x *Executor) Name() string { return Name }

// handleState is what a hosted session's handle keeps: its ids, its mode
// and its token's SHA-256, never the token.
type handleState struct {
	SessionID   string `json:"session_id"`
	TaskID      string `json:"task_id"`
	Mode        string `json:"mode"`
	TokenSHA256 string `json:"token_sha256"`
}

const handleVersion = 1

// session is one hosted session.
type session struct {
	id, taskID string
	mode       executors.Mode
	tokenHash  [32]byte
	pub        *mcpserver.Publisher
	endpoint   *mcpserver.Endpoint

	mu        sync.Mutex // guards the registry's inputs; every rebuild happens under it
	providers providers.Set
	gen       uint64
	external  []registry.Tool
	extGen    uint64
	// orientation is the orchestrator's as of the last launch or push
	// that carried one (oriented); the instructions are built from it.
	orientation []toolapi.Orientation
	oriented    bool
}

// Launch implements executors.Executor: it starts serving a session with
// the spec's surface and returns its URL and its bearer token, once
// (Status.MCPToken); the handle keeps only the token's SHA-256.
func (x *Executor) Launch(_ context.Context, spec executors.Spec, progress executors.Progress) (executors.Handle, executors.Status, error) {
	if err := spec.Validate(); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	if spec.Agent != nil {
		return executors.Handle{}, executors.Status{}, errdefs.InvalidField("agent", "a hosted session runs no agent: the agent runs elsewhere and connects to the session's URL")
	}
	if x.srv == nil {
		return executors.Handle{}, executors.Status{}, fmt.Errorf("the hosted endpoint is not serving (toolscope serve --hosted ADDR): %w", errdefs.ErrUnavailable)
	}
	token := newToken()
	s := &session{id: spec.SessionID, taskID: spec.TaskID, mode: spec.Mode, tokenHash: sha256.Sum256([]byte(token)),
		providers: spec.Providers, gen: spec.Generation, external: x.externalTools(spec.External), extGen: spec.ExternalGeneration}
	if spec.Orientation != nil {
		s.orientation, s.oriented = spec.Orientation.Entries, true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return executors.Handle{}, executors.Status{}, fmt.Errorf("the hosted endpoint is closing: %w", errdefs.ErrUnavailable)
	}
	if old := x.sessions[spec.SessionID]; old != nil {
		return executors.Handle{}, executors.Status{}, errdefs.AlreadyExists("session %q is already hosted", spec.SessionID)
	}
	s.mu.Lock()
	s.pub = mcpserver.New(registry.Build(s.specLocked()), mcpserver.Options{
		Name: "toolscope", Version: version.String(), Handler: x.toolHandler(s), Logger: x.log, AdoptWait: x.opts.AdoptWait,
		OnRefused: x.reportRefusal(s), RefusalReports: x.opts.Limits.RefusalReports,
	})
	s.pub.InstructWith(s.instructions)
	s.mu.Unlock()
	s.endpoint = s.pub.Handler(s.verify, x.opts.Limits)
	x.sessions[s.id] = s
	progress.Report("serving session %s at %s", s.id, x.URL(s.id))
	x.log.Info("hosted session started", "session_id", s.id, "task_id", s.taskID, "mode", s.mode, "tools", s.pub.Desired().Len())
	h := executors.Handle{Backend: Name, Version: handleVersion, State: executors.EncodeState(handleState{
		SessionID: s.id, TaskID: s.taskID, Mode: string(s.mode), TokenSHA256: hex.EncodeToString(s.tokenHash[:])})}
	st := s.status(x.URL(s.id))
	st.MCPToken = token
	return h, st, nil
}

// instructions are the session's server instructions, built at each
// initialize by the function agentctl's are built with
// (toolapi.Instructions), from the surface served then and the
// orchestrator's orientation as of the last push.
func (s *session) instructions() string {
	s.mu.Lock()
	o := toolapi.Orienting{TaskID: s.taskID, Mode: s.mode, Transport: toolapi.TransportHosted, Providers: s.providers,
		Orientation: s.orientation, Known: s.oriented}
	s.mu.Unlock()
	o.Tools = s.pub.Published().Names()
	return toolapi.Instructions(o)
}

// verify accepts the session's own token and nothing else, compared by
// SHA-256 in constant time.
func (s *session) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], s.tokenHash[:]) != 1 {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: s.id}, nil
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "tsh_" + hex.EncodeToString(b)
}

// specLocked is what the session's registry is built from: the same
// inputs as agentctl's, with Transport hosted.
func (s *session) specLocked() registry.Spec {
	return registry.Spec{Mode: s.mode, Providers: s.providers, Transport: toolapi.TransportHosted, External: s.external}
}

func (s *session) status(url string) executors.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return executors.Status{Phase: executors.PhaseRunning, MCPURL: url, Providers: s.providers, Generation: s.gen,
		ExternalGeneration: s.extGen, ToolNames: s.pub.Desired().Names()}
}

// externalTools are the external tools the go-sdk accepts; agentctl
// refuses a set with one it does not, the orchestrator's catalog has
// checked them already, so one that still fails is dropped and logged.
func (x *Executor) externalTools(in []executors.ExternalTool) []registry.Tool {
	out := make([]registry.Tool, 0, len(in))
	for _, t := range in {
		rt := registry.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
			OutputSchema: t.OutputSchema, ReadOnly: t.ReadOnly, OpenWorld: true}
		if err := mcpserver.Check(rt); err != nil {
			x.log.Warn("an external tool the MCP SDK refuses is not hosted", "tool", t.Name, "error", err.Error())
			continue
		}
		out = append(out, rt)
	}
	return out
}

// Reattach implements executors.Executor: a hosted session lives in the
// process of the orchestrator that served it, so after a restart it is
// lost; resuming it serves it again, with a new token.
func (x *Executor) Reattach(_ context.Context, h executors.Handle) error {
	var st handleState
	if err := executors.DecodeState(h, Name, handleVersion, &st); err != nil {
		return err
	}
	x.mu.Lock()
	s := x.sessions[st.SessionID]
	x.mu.Unlock()
	if s == nil {
		return fmt.Errorf("hosted sessions end with the orchestrator process that served them; attach a new one (toolscope session attach): %w", executors.ErrLost)
	}
	return nil
}

func (x *Executor) lookup(h executors.Handle) (*session, string, error) {
	var st handleState
	if err := executors.DecodeState(h, Name, handleVersion, &st); err != nil {
		return nil, "", err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.sessions[st.SessionID]
	if s == nil || hex.EncodeToString(s.tokenHash[:]) != st.TokenSHA256 {
		return nil, st.SessionID, errdefs.NotFound("hosted session", st.SessionID)
	}
	return s, st.SessionID, nil
}

// Endpoint implements executors.Executor.
func (x *Executor) Endpoint(h executors.Handle) (executors.Endpoint, error) {
	s, _, err := x.lookup(h)
	if err != nil {
		return executors.Endpoint{}, err
	}
	return executors.Endpoint{SessionID: s.id, Agentctl: (*inProcess)(x), Complete: func(st *executors.Status) {
		st.MCPURL = x.URL(s.id)
	}}, nil
}

// Stop implements executors.Executor: the session is no longer served,
// so its token is refused from now on, and its MCP clients are closed.
func (x *Executor) Stop(_ context.Context, h executors.Handle) error {
	s, id, err := x.lookup(h)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	x.mu.Lock()
	if x.sessions[id] == s {
		delete(x.sessions, id)
	}
	x.mu.Unlock()
	s.close()
	x.log.Info("hosted session stopped", "session_id", id)
	return nil
}

func (s *session) close() {
	s.pub.Close()
	s.endpoint.Close()
}

// Close implements executors.Executor: the listener and every hosted
// session end.
func (x *Executor) Close() error {
	x.mu.Lock()
	x.closed = true
	all := x.sessions
	x.sessions = map[string]*session{}
	x.mu.Unlock()
	var err error
	if x.srv != nil {
		err = x.srv.Close()
	}
	for _, s := range all {
		s.close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// inProcess is the hosted sessions' executors.Agentctl: what agentctl
// does for a session, done in the orchestrator's process.
type inProcess Executor

func (a *inProcess) session(ctx context.Context, id string) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[id]
	if s == nil {
		return nil, errdefs.NotFound("hosted session", id)
	}
	return s, nil
}

// ApplySurface applies each part given unless it is older than the
// applied one (agentctl's stale rule), and rebuilds the registry once.
func (a *inProcess) ApplySurface(ctx context.Context, id string, sf executors.Surface) (executors.PushResult, error) {
	s, err := a.session(ctx, id)
	if err != nil {
		return executors.PushResult{}, err
	}
	if sf.Mode != "" && sf.Mode != s.mode {
		return executors.PushResult{}, errdefs.InvalidField("surface.mode", "the session's mode is %s, fixed at launch", s.mode)
	}
	var external []registry.Tool
	if sf.ExternalGeneration > 0 {
		external = (*Executor)(a).externalTools(sf.External)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sf.Orientation != nil {
		s.orientation, s.oriented = sf.Orientation.Entries, true
	}
	accepted, moved := true, false
	if sf.Generation > 0 {
		if sf.Generation < s.gen {
			accepted = false
		} else {
			s.providers, s.gen, moved = sf.Providers, sf.Generation, true
		}
	}
	if sf.ExternalGeneration > 0 {
		if sf.ExternalGeneration < s.extGen {
			accepted = false
		} else {
			s.external, s.extGen, moved = external, sf.ExternalGeneration, true
		}
	}
	changed := moved && s.pub.Publish(registry.Build(s.specLocked()))
	return executors.PushResult{Accepted: accepted, ToolsChanged: changed, Applied: s.providers, Generation: s.gen, ExternalGeneration: s.extGen}, nil
}

// State reports the session.
func (a *inProcess) State(ctx context.Context, id string) (executors.Status, error) {
	s, err := a.session(ctx, id)
	if err != nil {
		return executors.Status{}, err
	}
	return s.status((*Executor)(a).URL(id)), nil
}

// Work: a hosted session has no workspace, so its status is all there is.
func (a *inProcess) Work(ctx context.Context, id string) (executors.Status, error) {
	return a.State(ctx, id)
}

// StopSession reports the session's last status: a hosted session runs
// no agent; the executor's Stop ends its endpoint.
func (a *inProcess) StopSession(ctx context.Context, id string) (executors.Status, error) {
	return a.State(ctx, id)
}

// Notify offers text to the session's MCP clients.
func (a *inProcess) Notify(ctx context.Context, id, text string) (int, error) {
	s, err := a.session(ctx, id)
	if err != nil {
		return 0, err
	}
	return s.pub.Notify(ctx, text), nil
}

// AgentLog: a hosted session runs no agent, so it has no agent log.
func (a *inProcess) AgentLog(ctx context.Context, id string, _ bool, _ func([]byte) error) error {
	if _, err := a.session(ctx, id); err != nil {
		return err
	}
	return errdefs.FailedPrecondition("session %q is hosted: it runs no agent, so it has no agent log", id)
}

// Deliver: a hosted session's agent runs elsewhere, with no workspace
// here to deliver from.
func (a *inProcess) Deliver(ctx context.Context, id, key string, _ executors.GitCredential) (executors.Delivery, error) {
	if _, err := a.session(ctx, id); err != nil {
		return executors.Delivery{}, err
	}
	return executors.Delivery{}, errdefs.FailedPrecondition("session %q is hosted: its agent works in a checkout of its own, which toolscope does not hold, so it has nothing to deliver of %s", id, key)
}

// reportRefusal hands the orchestrator's audit a call that session s's
// endpoint refused itself, as agentctl reports one over its link.
func (x *Executor) reportRefusal(s *session) func(context.Context, mcpserver.Refusal) bool {
	return func(ctx context.Context, r mcpserver.Refusal) bool {
		x.opts.Calls(ctx, executors.ToolCall{SessionID: s.id, TaskID: s.taskID, Tool: r.Tool, OnLink: true,
			Refused: r.Code, Suppressed: r.Suppressed})
		return true
	}
}

// toolHandler answers a tool of session s: the arguments are checked
// against the tool's schema (as agentctl checks them), then the call goes
// to the orchestrator's call handler in-process, with the session's
// identity, which the bearer token proved.
func (x *Executor) toolHandler(s *session) mcpserver.HandlerFunc {
	return func(tool registry.Tool) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
			defer func() {
				if r := recover(); r != nil {
					x.log.Error("panic in a hosted tool call", "session_id", s.id, "tool", tool.Name, "panic", fmt.Sprint(r))
					res, err = mcpserver.ToolError(toolapi.CodeInternal, "the orchestrator failed on this call; report this to the toolscope operator"), nil
				}
			}()
			args, refused := x.schemas.CheckArguments(ctx, tool, req.Params.Arguments)
			if refused != nil {
				return refused, nil
			}
			before := s.pub.Desired()
			callCtx, cancel := context.WithTimeout(ctx, x.opts.CallTimeout)
			defer cancel()
			answer := x.opts.Calls(callCtx, executors.ToolCall{SessionID: s.id, TaskID: s.taskID, Tool: tool.Name, Arguments: args, OnLink: true})
			res = fromResult(answer)
			if tool.Name == toolapi.AddSourcesTool && !res.IsError {
				mcpserver.NameToolsAdded(res, before, s.pub.Desired())
			}
			return res, nil
		}
	}
}

func fromResult(r executors.ToolResult) *mcp.CallToolResult {
	text := r.Text
	if r.IsError && r.Code != "" {
		text = r.Code + ": " + text
	}
	out := &mcp.CallToolResult{IsError: r.IsError, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	if len(r.Structured) > 0 {
		out.StructuredContent = r.Structured
	}
	return out
}
