package daemon_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/toolscope/toolscope/agentctl/internal/daemon"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// recorder is the orchestrator's end of the Attach stream, keeping every
// tool call that reached it.
type recorder struct {
	mu    sync.Mutex
	calls []*agentctlv1.ToolCall
}

func (r *recorder) answer(c *agentctlv1.ToolCall) *agentctlv1.ToolResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return &agentctlv1.ToolResult{Text: "answered " + c.GetToolName()}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recorder) all() []*agentctlv1.ToolCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*agentctlv1.ToolCall(nil), r.calls...)
}

// validArgs are arguments every tool's input schema accepts, so that with
// the right token the call does reach the orchestrator (the positive
// control of the matrix).
func validArgs(tool string) map[string]any {
	switch {
	case tool == "task_add_sources":
		return map[string]any{"repository_ids": []string{"repo_2"}}
	case strings.HasSuffix(tool, "_create"):
		return map[string]any{"branch": "fix-login", "title": "Fix login"}
	case strings.HasSuffix(tool, "_reply"):
		return map[string]any{"thread_id": "1", "body": "fixed"}
	case strings.HasSuffix(tool, "_request_reviewers"):
		return map[string]any{"reviewers": []string{"carol"}}
	case strings.HasSuffix(tool, "_set_automation"):
		return map[string]any{"auto_merge": true}
	}
	return map[string]any{}
}

// rawMCP posts one JSON-RPC message to a streamable HTTP endpoint, as any
// client would, and returns the status and the body.
func rawMCP(t *testing.T, url, token string, headers map[string]string, msg any) (int, http.Header, string, error) {
	t.Helper()
	b, err := json.Marshal(msg)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(body), nil
}

func toolsCall(id int, tool string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": validArgs(tool)}}
}

// TestWrongTokenMatrix is the "wrong token" column of the authorization
// matrix, at agentctl's MCP endpoint: for every tool the session shows, a
// tools/call over real streamable HTTP with no token, a wrong token or
// another session's token is refused with 401 — bare, inside a live MCP
// session, and on the stateless protocol — and nothing reaches the
// orchestrator's end of the Attach stream. The same calls with the
// session's token do reach it, so the observation is live. A stopped
// session's endpoint refuses too.
func TestWrongTokenMatrix(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github", "gitlab"))
	h.create(t, spec("s2", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github", "gitlab"))
	stoppedSt := h.create(t, spec("s3", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	rec := &recorder{}
	orchestrator(t, h, rec.answer)
	url, token := st.GetMcpUrl(), h.token(t, "s1")
	stoppedToken := h.token(t, "s3")

	tools := st.GetToolNames()
	require.Equal(t, toolapi.Surface("github", "gitlab"), tools, "the session shows every tool")
	require.Len(t, tools, 18)

	// A live stateful MCP session, opened with the right token: a wrong
	// token must not ride on its session id.
	code, hdr, body, err := rawMCP(t, url, token, nil, map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "authz-test", "version": "1"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	live := map[string]string{"Mcp-Session-Id": hdr.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	require.NotEmpty(t, live["Mcp-Session-Id"])
	code, _, body, err = rawMCP(t, url, token, live, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code, body)

	// The tools are reached from every protocol entry the endpoint has.
	transports := []struct {
		name    string
		headers map[string]string
	}{
		{"bare", nil},
		{"inside a live session", live},
		{"stateless 2026-07-28", map[string]string{"Mcp-Protocol-Version": "2026-07-28"}},
	}
	badTokens := []struct{ name, token string }{
		{"no token", ""},
		{"wrong token", "not-the-session-token"},
		{"another session's token", h.token(t, "s2")},
		{"the token with a suffix", token + "x"},
		{"a prefix of the token", token[:len(token)-1]},
	}
	refused, id := 0, 1
	for _, tool := range tools {
		for _, tr := range transports {
			for _, bad := range badTokens {
				id++
				code, _, body, err := rawMCP(t, url, bad.token, tr.headers, toolsCall(id, tool))
				require.NoError(t, err)
				assert.Equal(t, http.StatusUnauthorized, code, "%s %s %s: %s", tool, tr.name, bad.name, body)
				assert.NotContains(t, body, "answered", "%s %s %s", tool, tr.name, bad.name)
				refused++
			}
		}
		require.Zero(t, rec.count(), "a refused %s reached the orchestrator", tool)
	}

	// A real client with a bad token cannot even connect, at any version.
	for _, version := range mcptest.ProtocolVersions {
		for _, bad := range badTokens {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			client := mcp.NewClient(&mcp.Implementation{Name: "intruder", Version: "1"}, nil)
			cs, err := client.Connect(ctx, mcptest.HTTP(url, bad.token), &mcp.ClientSessionOptions{ProtocolVersion: version})
			cancel()
			if err == nil {
				_, callErr := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_info", Arguments: map[string]any{}})
				assert.Error(t, callErr, "%s at %s", bad.name, mcptest.VersionName(version))
				_ = cs.Close()
			}
			assert.Error(t, err, "%s connected at %s", bad.name, mcptest.VersionName(version))
			refused++
		}
	}
	require.Zero(t, rec.count(), "nothing reached the orchestrator")

	// A stopped session's endpoint refuses its own token, and its token
	// opens no other session's endpoint.
	_, err = h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s3"})
	require.NoError(t, err)
	for _, tool := range stoppedSt.GetToolNames() {
		id++
		code, _, body, err := rawMCP(t, stoppedSt.GetMcpUrl(), stoppedToken, nil, toolsCall(id, tool))
		if err == nil {
			// Only if the port was handed to another endpoint meanwhile.
			assert.Equal(t, http.StatusUnauthorized, code, "stopped session's %s: %s", tool, body)
		}
		code, _, body, err = rawMCP(t, url, stoppedToken, live, toolsCall(id, tool))
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, code, "stopped session's token on a live endpoint, %s: %s", tool, body)
		refused += 2
	}
	require.Zero(t, rec.count(), "no call of the stopped session reached the orchestrator")

	// Positive control: the very same requests with the session's token
	// reach the orchestrator, bound to the session's identity.
	for _, tool := range tools {
		id++
		code, _, body, err := rawMCP(t, url, token, live, toolsCall(id, tool))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, "answered "+tool)
	}
	got := rec.all()
	require.Len(t, got, len(tools), "with the token, each call reached the orchestrator once")
	for i, c := range got {
		assert.Equal(t, tools[i], c.GetToolName())
		assert.Equal(t, "s1", c.GetSessionId())
		assert.Equal(t, "task_s1", c.GetTaskId())
	}
	logs := h.logs.String()
	for _, tok := range []string{token, h.token(t, "s2"), stoppedToken} {
		assert.NotContains(t, logs, tok, "a session token was logged")
	}

	testutil.Figure(t, "authz wrong MCP token", "%d tools × %d transports × %d bad tokens + %d client connects + %d stopped-session calls: "+
		"%d refused with 401, 0 reached the orchestrator; %d/%d control calls with the token reached it",
		len(tools), len(transports), len(badTokens), len(mcptest.ProtocolVersions)*len(badTokens), 2*len(stoppedSt.GetToolNames()),
		refused, len(got), len(tools))
}

// rpc is one method of the agentctl service, from its descriptor.
type rpc struct {
	name      string
	full      string
	streaming bool
	in, out   protoreflect.MessageType
}

// agentctlRPCs enumerates the service's methods from its descriptor, so
// a new RPC is covered without touching the test, and checks that the
// server registers exactly those.
func agentctlRPCs(t *testing.T) []rpc {
	t.Helper()
	desc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(agentctlv1.AgentctlService_ServiceDesc.ServiceName))
	require.NoError(t, err)
	methods := desc.(protoreflect.ServiceDescriptor).Methods()
	var out []rpc
	for i := range methods.Len() {
		m := methods.Get(i)
		in, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
		require.NoError(t, err)
		resp, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
		require.NoError(t, err)
		out = append(out, rpc{name: string(m.Name()), full: fmt.Sprintf("/%s/%s", desc.FullName(), m.Name()),
			streaming: m.IsStreamingClient() || m.IsStreamingServer(), in: in, out: resp})
	}
	registered := len(agentctlv1.AgentctlService_ServiceDesc.Methods) + len(agentctlv1.AgentctlService_ServiceDesc.Streams)
	require.Len(t, out, registered, "the descriptor and the registered service have the same methods")
	require.GreaterOrEqual(t, len(out), 6)
	return out
}

// invoke calls one RPC with an empty request and returns its error.
func invoke(conn *grpc.ClientConn, r rpc) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !r.streaming {
		return conn.Invoke(ctx, r.full, r.in.New().Interface(), r.out.New().Interface())
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: r.name, ServerStreams: true, ClientStreams: true}, r.full)
	if err != nil {
		return err
	}
	_ = stream.SendMsg(r.in.New().Interface())
	_ = stream.CloseSend()
	var out proto.Message = r.out.New().Interface()
	return stream.RecvMsg(out)
}

// TestEveryRPCNeedsTheSecret: every RPC of the agentctl service, without
// the launch secret or with a wrong one (including an agent's MCP token,
// which an agent holds), is refused with Unauthenticated before it does
// anything, and no secret or token is logged.
func TestEveryRPCNeedsTheSecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	mcpToken := h.token(t, "s1")
	rpcs := agentctlRPCs(t)
	bad := []struct {
		name, secret string
		bare         bool // sent without the "Bearer " scheme
	}{
		{"no secret", "", false},
		{"wrong secret", "wrong-secret-value", false},
		{"the secret with a suffix", secret + "x", false},
		{"a prefix of the secret", secret[:len(secret)-1], false},
		{"a session's MCP token", mcpToken, false},
		{"the secret without the Bearer scheme", secret, true},
	}
	refused := 0
	for _, b := range bad {
		conn := h.dial(t, b.secret)
		if b.bare {
			opts := append(grpcerr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithPerRPCCredentials(bareAuth(b.secret)))
			var err error
			conn, err = grpc.NewClient(h.addr, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
		}
		for _, r := range rpcs {
			err := invoke(conn, r)
			assert.Equal(t, codes.Unauthenticated, status.Code(err), "%s with %s: %v", r.name, b.name, err)
			assert.ErrorIs(t, err, errdefs.ErrUnauthenticated)
			refused++
		}
	}
	// Nothing was done: the session is still running, with its providers.
	state, err := h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: "s1"})
	require.NoError(t, err)
	assert.Equal(t, agentctlv1.SessionPhase_SESSION_PHASE_RUNNING, state.GetStatus().GetPhase())
	assert.Equal(t, []string{"github"}, state.GetStatus().GetProviderSet().GetProviders())

	// Positive control: with the secret, no RPC is refused as
	// unauthenticated (empty requests may be refused for other reasons).
	allowed := 0
	for _, r := range rpcs {
		err := invoke(h.dial(t, secret), r)
		assert.NotEqual(t, codes.Unauthenticated, status.Code(err), "%s with the secret: %v", r.name, err)
		if status.Code(err) != codes.Unauthenticated {
			allowed++
		}
	}

	logs := h.logs.String()
	assert.Equal(t, refused, strings.Count(logs, "refused a call without the orchestrator secret"), "every refusal is logged once")
	for _, b := range bad[1 : len(bad)-1] {
		assert.NotContains(t, logs, b.secret, "%s was logged", b.name)
	}
	assert.NotContains(t, logs, secret, "the secret was logged")
	testutil.Figure(t, "authz agentctl gRPC secret", "%d RPCs × %d bad secrets: %d refused Unauthenticated, %d/%d allowed with the secret, 0 secrets in %d bytes of log",
		len(rpcs), len(bad), refused, allowed, len(rpcs), len(logs))
}

// bareAuth sends its value as the whole authorization header, with no
// scheme.
type bareAuth string

func (b bareAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(b)}, nil
}

func (bareAuth) RequireTransportSecurity() bool { return false }

// TestMutualTLSRefusesOtherCertificates: a daemon serving mutual TLS (no
// secret, as on a remote host) refuses every RPC from a client with no
// certificate, a certificate from another CA, a self-signed one naming
// the orchestrator, the right CA's server certificate used as a client
// one, an API caller's certificate from the same CA ('certs client', a
// role in its OU), or plaintext; none of them creates a session. The
// orchestrator's certificate passes, and so does one from before it was
// marked (no OU).
func TestMutualTLSRefusesOtherCertificates(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("agentctl CA", time.Hour)
	require.NoError(t, err)
	serverPair, err := ca.IssueServer("agentctl", []string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	orchestratorPair, err := ca.IssueOrchestrator("orchestrator", time.Hour)
	require.NoError(t, err)
	legacyPair, err := ca.IssueClient("orchestrator", time.Hour) // 'certs init' before OU=orchestrator
	require.NoError(t, err)
	apiCaller, err := ca.IssueClient("alice", time.Hour, "member")
	require.NoError(t, err)
	apiAdmin, err := ca.IssueClient("orchestrator", time.Hour, "admin", pki.OrchestratorUnit)
	require.NoError(t, err)
	otherCA, err := pki.NewCA("other CA", time.Hour)
	require.NoError(t, err)
	stranger, err := otherCA.IssueClient("orchestrator", time.Hour)
	require.NoError(t, err)
	selfCA, err := pki.NewCA("orchestrator", time.Hour)
	require.NoError(t, err)
	selfSigned := pki.Pair{CertPEM: selfCA.CertPEM, KeyPEM: selfCA.KeyPEM}

	logs := &testutil.SyncBuffer{}
	d, err := daemon.New(daemon.Options{TLSClientAuth: true, StateDir: t.TempDir(), CallTimeout: 10 * time.Second,
		StopGrace: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	serverTLS, err := pki.ServerConfig(serverPair, ca.CertPEM)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := d.NewGRPCServer(grpc.Creds(credentials.NewTLS(serverTLS)))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		d.Close()
		srv.Stop()
	})
	dial := func(creds credentials.TransportCredentials) *grpc.ClientConn {
		conn, err := grpc.NewClient(lis.Addr().String(), append(grpcerr.DialOptions(), grpc.WithTransportCredentials(creds))...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	withCert := func(p *pki.Pair) credentials.TransportCredentials {
		if p == nil {
			cfg, err := pki.ClientConfig(orchestratorPair, ca.CertPEM)
			require.NoError(t, err)
			cfg.Certificates = nil
			return credentials.NewTLS(cfg)
		}
		cfg, err := pki.ClientConfig(*p, ca.CertPEM)
		require.NoError(t, err)
		return credentials.NewTLS(cfg)
	}
	legit := dial(withCert(&orchestratorPair))

	rpcs := agentctlRPCs(t)
	clients := []struct {
		name  string
		creds credentials.TransportCredentials
	}{
		{"no client certificate", withCert(nil)},
		{"a certificate from another CA", withCert(&stranger)},
		{"a self-signed certificate naming the orchestrator", withCert(&selfSigned)},
		{"the CA's server certificate as a client one", withCert(&serverPair)},
		{"an API caller's certificate from the same CA", withCert(&apiCaller)},
		{"an API admin's certificate also claiming OU orchestrator", withCert(&apiAdmin)},
		{"plaintext", insecure.NewCredentials()},
		{"TLS without verifying the daemon, no certificate", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})}, //nolint:gosec // the intruder
	}
	refused := 0
	for i, c := range clients {
		conn := dial(c.creds)
		for _, r := range rpcs {
			err := invoke(conn, r)
			require.Error(t, err, "%s with %s", r.name, c.name)
			assert.Contains(t, []codes.Code{codes.Unavailable, codes.Unauthenticated}, status.Code(err), "%s with %s: %v", r.name, c.name, err)
			refused++
		}
		// A real attempt to create a session does not create it.
		id := fmt.Sprintf("intruder-%d", i)
		_, err := agentctlv1.NewAgentctlServiceClient(conn).CreateSession(context.Background(), &agentctlv1.CreateSessionRequest{
			Spec: spec(id, agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")})
		require.Error(t, err, c.name)
		_, err = agentctlv1.NewAgentctlServiceClient(legit).GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: id})
		assert.ErrorIs(t, err, errdefs.ErrNotFound, "%s created a session", c.name)
	}

	assert.Contains(t, logs.String(), `is not the orchestrator's: its OrganizationalUnit [\"member\"]`, "the refusal is logged with its reason")

	// Positive control: the orchestrator's certificate passes every RPC,
	// and so does one issued before it was marked.
	allowed := 0
	for _, conn := range []*grpc.ClientConn{legit, dial(withCert(&legacyPair))} {
		for _, r := range rpcs {
			err := invoke(conn, r)
			if assert.NotContains(t, []codes.Code{codes.Unavailable, codes.Unauthenticated}, status.Code(err), "%s with the right certificate: %v", r.name, err) {
				allowed++
			}
		}
	}
	testutil.Figure(t, "authz agentctl mTLS", "%d RPCs × %d wrong clients (no cert, other CA, self-signed, server cert, "+
		"an API caller's and an API admin's certificates from the same CA, plaintext, unverified TLS): "+
		"%d refused, 0 sessions created; %d/%d allowed with the orchestrator's certificates (marked, and from before the mark)",
		len(rpcs), len(clients), refused, allowed, 2*len(rpcs))
}
