// Package agentlink is the orchestrator's end of one agentctl daemon: a
// gRPC connection authenticated by the per-launch secret or by mutual TLS,
// and an Attach stream the orchestrator opens and keeps open (reconnecting
// after failures), on which agentctl's tool calls arrive and are answered
// concurrently. Every executor backend reaches agentctl through it.
package agentlink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/executors"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/bearer"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/internal/tracing"
	"github.com/toolscope/toolscope/internal/tracing/tracesetup"
)

// Options configure a Link.
type Options struct {
	// Addr is agentctl's gRPC address.
	Addr string
	// Secret authenticates over plain TCP (loopback or a port published on
	// 127.0.0.1); TLS, if set, authenticates by client certificate.
	Secret string
	TLS    *tls.Config
	// Calls answers tool calls; Events receives session events (may be nil).
	Calls  executors.CallHandler
	Events executors.EventHandler
	// OrchestratorID identifies this orchestrator's installation: the
	// same after a restart on its data directory, different for a copy
	// of its database elsewhere (ADR 0014). agentctl serves one
	// orchestrator at a time and keeps its sessions to the one that
	// attached to them.
	OrchestratorID string
	Log            *slog.Logger
}

// Link is a connection to one agentctl daemon.
type Link struct {
	Client agentctlv1.AgentctlServiceClient

	conn   *grpc.ClientConn
	opts   Options
	cancel context.CancelFunc
	done   chan struct{}

	// calls are the tool calls being answered, on this stream or an
	// earlier one; Close waits for them after cancelling them.
	calls sync.WaitGroup

	mu   sync.Mutex
	live chan struct{} // closed while an Attach stream is acknowledged; replaced when it ends
	up   bool
	// refused is agentctl's refusal of the last attempt to attach, if
	// it was refused (another orchestrator holds it); refusedNow is
	// closed, and replaced, when a refusal is recorded.
	refused    error
	refusedNow chan struct{}
	// sessions are the sessions this orchestrator created or re-adopted on
	// this agentctl: the only identities a call arriving here may claim.
	sessions map[string]bool
}

// Dial connects to agentctl and starts keeping an Attach stream open.
func Dial(opts Options) (*Link, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	dial := append(grpcerr.DialOptions(), tracesetup.DialOption(),
		// Detect a dead or unreachable agentctl within seconds, even idle.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		// Reconnect within 2 s of an agentctl coming back: gRPC's default
		// backoff grows to two minutes, so a host that was down for a while
		// would otherwise stay unreachable long after it returned.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	)
	switch {
	case opts.TLS != nil:
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(opts.TLS)))
	case opts.Secret != "":
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(bearer.Credentials(opts.Secret, false)))
	default:
		return nil, errdefs.InvalidField("credentials", "a secret or a TLS configuration is required to reach agentctl")
	}
	if opts.OrchestratorID != "" {
		// Every call names the installation, not only the Attach hello:
		// agentctl refuses pushes and stops from another one while its
		// holder is attached (ADR 0014).
		dial = append(dial, grpc.WithPerRPCCredentials(bearer.Installation(opts.OrchestratorID)))
	}
	conn, err := grpc.NewClient(opts.Addr, dial...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Link{
		Client: agentctlv1.NewAgentctlServiceClient(conn), conn: conn, opts: opts, cancel: cancel,
		done: make(chan struct{}), live: make(chan struct{}), refusedNow: make(chan struct{}), sessions: map[string]bool{},
	}
	go l.attachLoop(ctx)
	return l, nil
}

// WaitAttached waits until an Attach stream is open and acknowledged now:
// after agentctl restarts or the network comes back, it waits for the new
// stream. agentctl's refusal because another orchestrator owns its
// sessions (errdefs.ErrPermissionDenied, naming it) ends the wait at once;
// a refusal because another orchestrator is attached (the previous
// holder may be going away) is waited out, and reported if ctx ends first.
func (l *Link) WaitAttached(ctx context.Context) error {
	for {
		l.mu.Lock()
		live, refusedNow, refused := l.live, l.refusedNow, l.refused
		l.mu.Unlock()
		if errors.Is(refused, errdefs.ErrPermissionDenied) {
			return refused
		}
		select {
		case <-live:
			return nil
		case <-refusedNow:
		case <-ctx.Done():
			if refused != nil {
				return fmt.Errorf("%w; agentctl refused the last attempt: %w", context.Cause(ctx), refused)
			}
			return context.Cause(ctx)
		}
	}
}

// refusal records the outcome of an attempt to attach: err if agentctl
// refused it, nil once one succeeded.
func (l *Link) refusal(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused = err
	if err != nil {
		close(l.refusedNow)
		l.refusedNow = make(chan struct{})
	}
}

// Adopt binds a session that runs on this agentctl to the link: tool
// calls arriving here may then act as it. CreateSession adopts the
// session it creates; a backend re-attaching after an orchestrator
// restart adopts the session it re-attaches to. A session agentctl holds
// but the orchestrator never created or adopted here (someone with
// agentctl's secret created it) gets no tools.
func (l *Link) Adopt(sessionID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sessions[sessionID] = true
}

// forget unbinds a session from the link.
func (l *Link) forget(sessionID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.sessions, sessionID)
}

// bind completes a call with what the link knows: whether its session was
// created or adopted here, and if not, which sessions were.
func (l *Link) bind(c *executors.ToolCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.OnLink = l.sessions[c.SessionID]; !c.OnLink {
		for id := range l.sessions {
			c.LinkSessions = append(c.LinkSessions, id)
		}
		slices.Sort(c.LinkSessions)
	}
}

func (l *Link) lastRefusal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

func (l *Link) setLive(up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if up == l.up {
		return
	}
	l.up = up
	if up {
		close(l.live)
	} else {
		l.live = make(chan struct{})
	}
}

// Close ends the Attach stream and the connection, and cancels the calls
// in flight; the sessions keep running. It may be called more than once.
func (l *Link) Close() error {
	l.cancel()
	<-l.done
	l.calls.Wait()
	err := l.conn.Close()
	if status.Code(err) == codes.Canceled {
		err = nil // closed before
	}
	return err
}

func (l *Link) attachLoop(ctx context.Context) {
	defer close(l.done)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		attached, err := l.attachOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if attached {
			backoff = 50 * time.Millisecond // a stream that worked ended: retry at once
		}
		if !attached && (errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrPermissionDenied)) {
			// Another orchestrator holds agentctl: said once, then
			// retried quietly (it may detach).
			if refused := l.lastRefusal(); refused == nil || refused.Error() != err.Error() {
				l.opts.Log.Warn("agentctl refused to attach", "addr", l.opts.Addr, "error", err)
			}
			l.refusal(err)
		} else {
			l.opts.Log.Debug("agentctl attach stream ended; reconnecting", "addr", l.opts.Addr, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// attachOnce holds one Attach stream until it ends. Its end cancels the
// calls in flight and does not wait for them: agentctl has already failed
// them toward their agents (orchestrator_unreachable, retryable), their
// answers have no stream left to travel on, and a provider call that is
// slow to notice the cancellation must not hold up the next stream.
func (l *Link) attachOnce(ctx context.Context) (attached bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer l.setLive(false)
	stream, err := l.Client.Attach(ctx)
	if err != nil {
		return false, err
	}
	var sendMu sync.Mutex
	send := func(m *agentctlv1.AttachRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	if err := send(&agentctlv1.AttachRequest{Message: &agentctlv1.AttachRequest_Hello{
		Hello: &agentctlv1.AttachHello{OrchestratorId: l.opts.OrchestratorID},
	}}); err != nil {
		return false, err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return attached, err
		}
		if c := msg.GetToolCall(); c != nil && l.opts.Calls != nil {
			l.calls.Go(func() {
				call := executors.ToolCall{
					SessionID: c.GetSessionId(), TaskID: c.GetTaskId(), Tool: c.GetToolName(), Arguments: c.GetArgumentsJson(),
				}
				l.bind(&call)
				ctx, span := traceCall(ctx, c)
				r := l.opts.Calls(ctx, call)
				tracing.EndCall(span, r.IsError, r.Code)
				_ = send(l.resultMessage(c, r))
			})
		}
		// A call agentctl refused itself is audited like the ones it
		// forwards, on the session the link says it came from; it has no
		// answer.
		if r := msg.GetToolRefused(); r != nil && l.opts.Calls != nil {
			l.calls.Go(func() {
				call := executors.ToolCall{
					SessionID: r.GetSessionId(), TaskID: r.GetTaskId(), Tool: r.GetToolName(),
					Refused: r.GetErrorCode(), Suppressed: int(r.GetSuppressed()),
				}
				if call.Refused == "" {
					call.Refused = toolapi.CodeInternal // a report must say why
				}
				l.bind(&call)
				l.opts.Calls(ctx, call)
			})
		}
		// An exited agent is the one session event agentctl sends.
		if e := msg.GetSessionEvent(); e.GetKind() == agentctlv1.SessionEventKind_SESSION_EVENT_KIND_AGENT_EXITED && l.opts.Events != nil {
			l.opts.Events(executors.SessionEvent{SessionID: e.GetSessionId(), Kind: executors.EventAgentExited, Message: e.GetMessage(),
				AgentExitCode: int(e.GetAgentExitCode()), AgentOutput: e.GetAgentOutputTail()})
		}
		if msg.GetAttached() != nil {
			// agentctl routes tool calls here from now on.
			l.refusal(nil)
			l.setLive(true)
			attached = true
		}
	}
}

// MaxMessageBytes is the largest message agentctl's end of the link
// receives: gRPC's default receive limit, which agentctl does not raise
// (nor may the orchestrator count on more). A larger message ends the
// Attach stream, and with it every call in flight on the link.
const MaxMessageBytes = 4 << 20

// resultMessage is the Attach message that answers call c with r; a
// result that would make it larger than MaxMessageBytes is answered
// result_too_large instead, so the link carries on. The orchestrator's
// dispatcher bounds results well under it (toolapi.MaxResultBytes);
// this holds for any handler.
func (l *Link) resultMessage(c *agentctlv1.ToolCall, r executors.ToolResult) *agentctlv1.AttachRequest {
	// The message's size: its fields' bytes, and at most resultEnvelope
	// of tags and lengths around them.
	if n := len(c.GetCallId()) + len(r.Code) + len(r.Text) + len(r.Structured) + resultEnvelope; n > MaxMessageBytes {
		l.opts.Log.Warn("tool result over the link's message limit; answered result_too_large", "tool", c.GetToolName(),
			"session_id", c.GetSessionId(), "bytes", n, "limit", MaxMessageBytes)
		r = executors.ToolResult{IsError: true, Code: toolapi.CodeResultTooLarge,
			Text: toolapi.ResultTooLarge(c.GetToolName(), int64(len(r.Text)+len(r.Structured)), false)}
	}
	return &agentctlv1.AttachRequest{Message: &agentctlv1.AttachRequest_ToolResult{ToolResult: &agentctlv1.ToolResult{
		CallId: c.GetCallId(), IsError: r.IsError, ErrorCode: r.Code, Text: r.Text, StructuredJson: r.Structured,
	}}}
}

// resultEnvelope bounds what a ToolResult's encoding adds to its fields:
// a tag and a length of at most 5 bytes for each of them, and for the
// message that holds it.
const resultEnvelope = 64

// CreateSession hands spec to agentctl and binds the session to the link.
// It is bound before agentctl starts the agent, whose first call may
// arrive before this returns, and unbound if the creation fails.
func (l *Link) CreateSession(ctx context.Context, spec executors.Spec) (executors.Status, error) {
	l.Adopt(spec.SessionID)
	resp, err := l.Client.CreateSession(ctx, &agentctlv1.CreateSessionRequest{Spec: LaunchSpec(spec)})
	if err != nil {
		l.forget(spec.SessionID)
		return executors.Status{}, err
	}
	return FromProto(resp.GetStatus()), nil
}

// ApplySurface pushes a surface to a session (agentctl ApplySurface). An
// agentctl of the release before it (kept running across an upgrade)
// answers Unimplemented; the surface then goes as the deprecated
// SetProviders and SetExternalTools it knows (ADR 0020).
func (l *Link) ApplySurface(ctx context.Context, sessionID string, sf executors.Surface) (executors.PushResult, error) {
	resp, err := l.Client.ApplySurface(ctx, &agentctlv1.ApplySurfaceRequest{SessionId: sessionID, Surface: SurfaceOf(sf)})
	if errors.Is(err, errdefs.ErrUnimplemented) {
		return l.applyDeprecated(ctx, sessionID, sf)
	} else if err != nil {
		return executors.PushResult{}, err
	}
	return executors.PushResult{
		Accepted: resp.GetAccepted(), ToolsChanged: resp.GetToolsChanged(),
		Applied:    providers.Of(resp.GetAppliedProviderSet().GetProviders()...),
		Generation: resp.GetAppliedProviderSet().GetGeneration(), ExternalGeneration: resp.GetAppliedExternalToolsGeneration(),
		WorkspaceDir: resp.GetWorkspaceDir(), Checkouts: checkoutStatesOf(resp.GetCheckouts()),
	}, nil
}

// CheckAgent asks agentctl whether agent could start on its host
// (agentctl CheckAgent: the binary on the agent's PATH, the credential
// variable named set). An agentctl from before CheckAgent answers
// errdefs.ErrUnimplemented.
func (l *Link) CheckAgent(ctx context.Context, agent *executors.AgentCommand) error {
	if agent == nil {
		return nil
	}
	_, err := l.Client.CheckAgent(ctx, &agentctlv1.CheckAgentRequest{Agent: commandOf(agent)})
	return err
}

// commandOf converts an agent command to the wire (nil to nil).
func commandOf(a *executors.AgentCommand) *agentctlv1.AgentCommand {
	if a == nil {
		return nil
	}
	return &agentctlv1.AgentCommand{Argv: a.Argv, Env: a.Env, WorkingDir: a.WorkDir,
		Profile: a.Profile, Model: a.Model, CredentialEnv: a.CredentialEnv, PassEnv: a.PassEnv, Auth: a.Auth}
}

// SurfaceOf converts a surface to the wire: a part of generation 0 is
// left out (kept by agentctl).
func SurfaceOf(sf executors.Surface) *agentctlv1.Surface {
	out := &agentctlv1.Surface{Mode: modeOf(sf.Mode)}
	if sf.Generation > 0 {
		out.ProviderSet = &agentctlv1.ProviderSet{Providers: sf.Providers.Strings(), Generation: sf.Generation}
	}
	if sf.ExternalGeneration > 0 {
		out.ExternalTools = ExternalToolSet(sf.External, sf.ExternalGeneration)
	}
	out.Orientation = OrientationOf(sf.Orientation)
	out.Checkouts = checkoutsOf(sf.Checkouts)
	return out
}

// checkoutsOf converts checkouts to the wire, with their fetch
// credential (in memory, over the authenticated link).
func checkoutsOf(in []executors.Checkout) []*agentctlv1.Checkout {
	var out []*agentctlv1.Checkout
	for _, c := range in {
		out = append(out, &agentctlv1.Checkout{Key: c.Key, Url: c.URL, Branch: c.Branch, Base: c.Base, Path: c.Path,
			FetchCredential: &agentctlv1.GitCredential{Username: c.Fetch.User, Token: c.Fetch.Token}})
	}
	return out
}

// OrientationOf converts an orientation to the wire (nil: absent).
func OrientationOf(o *executors.Orientation) *agentctlv1.OrientationSet {
	if o == nil {
		return nil
	}
	out := &agentctlv1.OrientationSet{}
	for _, e := range o.Entries {
		out.Entries = append(out.Entries, &agentctlv1.Orientation{State: e.State, Provider: e.Provider, Tool: e.Tool, Message: e.Message})
	}
	return out
}

// applyDeprecated pushes a surface as the two RPCs agentctl had before
// ApplySurface. An agentctl from before the catalog has no
// SetExternalTools: it exposes no external tools, which is right for an
// empty set and refused for another.
func (l *Link) applyDeprecated(ctx context.Context, sessionID string, sf executors.Surface) (executors.PushResult, error) {
	res := executors.PushResult{Accepted: true}
	if sf.Generation > 0 {
		resp, err := l.Client.SetProviders(ctx, &agentctlv1.SetProvidersRequest{
			SessionId: sessionID, ProviderSet: &agentctlv1.ProviderSet{Providers: sf.Providers.Strings(), Generation: sf.Generation},
		})
		if err != nil {
			return executors.PushResult{}, err
		}
		res.Accepted, res.ToolsChanged = resp.GetAccepted(), resp.GetToolsChanged()
		res.Applied, res.Generation = providers.Of(resp.GetApplied().GetProviders()...), resp.GetApplied().GetGeneration()
	}
	if sf.ExternalGeneration > 0 {
		resp, err := l.Client.SetExternalTools(ctx, &agentctlv1.SetExternalToolsRequest{
			SessionId: sessionID, ExternalTools: ExternalToolSet(sf.External, sf.ExternalGeneration),
		})
		switch {
		case errors.Is(err, errdefs.ErrUnimplemented) && len(sf.External) == 0:
			res.ExternalGeneration = sf.ExternalGeneration
		case errors.Is(err, errdefs.ErrUnimplemented):
			return res, fmt.Errorf("this session's agentctl predates external tools; resume the session to relaunch it with the current agentctl: %w", err)
		case err != nil:
			return res, err
		default:
			res.Accepted = res.Accepted && resp.GetAccepted()
			res.ToolsChanged = res.ToolsChanged || resp.GetToolsChanged()
			res.ExternalGeneration = resp.GetAppliedGeneration()
		}
	}
	return res, nil
}

// ExternalToolSet converts external tools and their generation to the
// wire.
func ExternalToolSet(tools []executors.ExternalTool, gen uint64) *agentctlv1.ExternalToolSet {
	out := &agentctlv1.ExternalToolSet{Generation: gen, Tools: make([]*agentctlv1.ExternalTool, len(tools))}
	for i, t := range tools {
		out.Tools[i] = &agentctlv1.ExternalTool{
			Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchemaJson: t.InputSchema, OutputSchemaJson: t.OutputSchema, ReadOnly: t.ReadOnly,
		}
	}
	return out
}

// State reports a session's status.
func (l *Link) State(ctx context.Context, sessionID string) (executors.Status, error) {
	resp, err := l.Client.GetSessionState(ctx, &agentctlv1.GetSessionStateRequest{SessionId: sessionID})
	if err != nil {
		return executors.Status{}, err
	}
	return FromProto(resp.GetStatus()), nil
}

// Work reports a session's status with its checkouts' work measured now
// (agentctl GetSessionState with work).
func (l *Link) Work(ctx context.Context, sessionID string) (executors.Status, error) {
	resp, err := l.Client.GetSessionState(ctx, &agentctlv1.GetSessionStateRequest{SessionId: sessionID, Work: true})
	if err != nil {
		return executors.Status{}, err
	}
	return FromProto(resp.GetStatus()), nil
}

// AgentLog streams a session's agent log to fn (agentctl ReadAgentLog).
func (l *Link) AgentLog(ctx context.Context, sessionID string, follow bool, fn func([]byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := l.Client.ReadAgentLog(ctx, &agentctlv1.ReadAgentLogRequest{SessionId: sessionID, Follow: follow})
	if err != nil {
		return err
	}
	return receive(stream, fn)
}

// AgentctlLog streams the lines of agentctl's own log that name a
// session to fn (agentctl ReadAgentctlLog).
func (l *Link) AgentctlLog(ctx context.Context, sessionID string, follow bool, fn func([]byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := l.Client.ReadAgentctlLog(ctx, &agentctlv1.ReadAgentctlLogRequest{SessionId: sessionID, Follow: follow})
	if err != nil {
		return err
	}
	return receive(stream, fn)
}

// receive hands each message of a log stream to fn until it ends.
func receive[T any, P interface {
	*T
	GetData() []byte
}](stream grpc.ServerStreamingClient[T], fn func([]byte) error) error {
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := fn(P(resp).GetData()); err != nil {
			return err
		}
	}
}

// Notify sends a message to a session's MCP clients.
func (l *Link) Notify(ctx context.Context, sessionID, text string) (int, error) {
	resp, err := l.Client.Notify(ctx, &agentctlv1.NotifyRequest{SessionId: sessionID, Text: text})
	return int(resp.GetDelivered()), err
}

// Deliver pushes a session's own branch of one of its checkouts.
func (l *Link) Deliver(ctx context.Context, sessionID, key string, cred executors.GitCredential) (executors.Delivery, error) {
	resp, err := l.Client.Deliver(ctx, &agentctlv1.DeliverRequest{SessionId: sessionID, Key: key,
		Credential: &agentctlv1.GitCredential{Username: cred.User, Token: cred.Token}})
	if err != nil {
		return executors.Delivery{}, err
	}
	return executors.Delivery{Ref: resp.GetRef(), Commit: resp.GetCommit(), UpToDate: resp.GetUpToDate()}, nil
}

// StopSession stops a session and unbinds it from the link.
func (l *Link) StopSession(ctx context.Context, sessionID string) (executors.Status, error) {
	l.forget(sessionID)
	resp, err := l.Client.StopSession(ctx, &agentctlv1.StopSessionRequest{SessionId: sessionID})
	if err != nil {
		return executors.Status{}, err
	}
	return FromProto(resp.GetStatus()), nil
}

// LaunchSpec converts a spec to the wire.
func LaunchSpec(s executors.Spec) *agentctlv1.LaunchSpec {
	out := &agentctlv1.LaunchSpec{
		SessionId: s.SessionID, TaskId: s.TaskID, WorkspaceId: s.WorkspaceID, Mode: modeOf(s.Mode),
		ProviderSet: &agentctlv1.ProviderSet{Providers: s.Providers.Strings(), Generation: s.Generation},
	}
	if len(s.External) > 0 || s.ExternalGeneration > 0 {
		out.ExternalTools = ExternalToolSet(s.External, s.ExternalGeneration)
	}
	out.Orientation = OrientationOf(s.Orientation)
	out.Checkouts = checkoutsOf(s.Checkouts)
	out.Agent = commandOf(s.Agent)
	return out
}

// modeOf converts a mode to the wire (empty: unspecified).
func modeOf(m executors.Mode) agentctlv1.SessionMode {
	switch m {
	case executors.ModeTask:
		return agentctlv1.SessionMode_SESSION_MODE_TASK
	case executors.ModePlan:
		return agentctlv1.SessionMode_SESSION_MODE_PLAN
	}
	return agentctlv1.SessionMode_SESSION_MODE_UNSPECIFIED
}

// checkoutStatesOf converts checkout states from the wire.
func checkoutStatesOf(in []*agentctlv1.CheckoutState) []executors.CheckoutState {
	var out []executors.CheckoutState
	for _, c := range in {
		cs := executors.CheckoutState{Key: c.GetKey(), Path: c.GetPath(), Branch: c.GetBranch(), Error: c.GetError()}
		if w := c.GetWork(); w != nil {
			cs.Work = &executors.Work{Head: w.GetHead(), Uncommitted: int(w.GetUncommitted()), Unpushed: int(w.GetUnpushed()), Error: w.GetError()}
		}
		out = append(out, cs)
	}
	return out
}

// FromProto converts a session status from the wire.
func FromProto(st *agentctlv1.SessionStatus) executors.Status {
	out := executors.Status{
		MCPURL: st.GetMcpUrl(), MCPToken: st.GetMcpBearerToken(),
		Providers: providers.Of(st.GetProviderSet().GetProviders()...), Generation: st.GetProviderSet().GetGeneration(),
		ToolNames: st.GetToolNames(), AgentExitCode: int(st.GetAgentExitCode()), AgentOutput: st.GetAgentOutputTail(), ExternalGeneration: st.GetExternalToolsGeneration(),
		WorkspaceDir: st.GetWorkspaceDir(),
	}
	out.Checkouts = checkoutStatesOf(st.GetCheckouts())
	switch st.GetPhase() {
	case agentctlv1.SessionPhase_SESSION_PHASE_AGENT_EXITED:
		out.Phase = executors.PhaseAgentExited
	case agentctlv1.SessionPhase_SESSION_PHASE_STOPPED:
		out.Phase = executors.PhaseStopped
	default:
		out.Phase = executors.PhaseRunning
	}
	return out
}
