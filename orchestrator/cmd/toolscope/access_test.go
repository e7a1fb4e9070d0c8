package main

// API access, tried as an attacker would: a second local account against
// the socket, every RPC over TCP with no, a wrong, an expired and a
// revoked token and with a role too low, client certificates from the
// right and a wrong CA, a non-loopback listener without TLS. Real server
// and CLI processes, real sockets, real SQLite.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/bearer"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/apitoken"
	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/paths"
	"github.com/toolscope/toolscope/orchestrator/internal/server"
)

// runEnv runs the CLI with extra environment and without the harness's
// --server, so that contexts and defaults apply. TOOLSCOPE_CONFIG points
// into the test's directory unless env sets it.
func runEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := command(ctx, args...)
	cmd.Env = append(cmd.Env, "TOOLSCOPE_CONFIG="+filepath.Join(t.TempDir(), "none.json"), "TOOLSCOPE_ADDR=", "TOOLSCOPE_TOKEN=", "TOOLSCOPE_CONTEXT=")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

// createToken creates an API token through the owner's socket and
// returns it.
func (o *orchestrator) createToken(t *testing.T, name, role, ttl string) string {
	t.Helper()
	var resp struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.ok(t, "--json", "token", "create", name, "--role", role, "--ttl", ttl)), &resp))
	require.Regexp(t, apitoken.Pattern, resp.Secret)
	return resp.Secret
}

// tcpConn is a plain gRPC connection to the TCP listener, sending token if
// set.
func tcpConn(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer.Credentials(token, false)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// invoke calls any method with an empty request, unary or streaming, and
// returns its error.
func invoke(ctx context.Context, conn *grpc.ClientConn, m server.Method) error {
	if !m.ClientStream && !m.ServerStream {
		return conn.Invoke(ctx, m.Name, &emptypb.Empty{}, &emptypb.Empty{})
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: m.ClientStream, ServerStreams: m.ServerStream}, m.Name)
	if err != nil {
		return err
	}
	if err := s.SendMsg(&emptypb.Empty{}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = s.CloseSend()
	return s.RecvMsg(&emptypb.Empty{})
}

// snapshot is everything an API call could change, read through the
// owner's socket.
func snapshot(t *testing.T, conn *grpc.ClientConn) string {
	t.Helper()
	ctx := t.Context()
	var parts []proto.Message
	wss, err := pb.NewWorkspaceServiceClient(conn).ListWorkspaces(ctx, &pb.ListWorkspacesRequest{})
	require.NoError(t, err)
	parts = append(parts, wss)
	for _, ws := range wss.GetWorkspaces() {
		repos, err := pb.NewRepositoryServiceClient(conn).ListRepositories(ctx, &pb.ListRepositoriesRequest{WorkspaceId: ws.GetId()})
		require.NoError(t, err)
		tasks, err := pb.NewTaskServiceClient(conn).ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: ws.GetId()})
		require.NoError(t, err)
		parts = append(parts, repos, tasks)
		for _, task := range tasks.GetTasks() {
			sessions, err := pb.NewSessionServiceClient(conn).ListSessions(ctx, &pb.ListSessionsRequest{TaskId: task.GetId()})
			require.NoError(t, err)
			parts = append(parts, sessions)
		}
	}
	tokens, err := pb.NewAuthServiceClient(conn).ListAPITokens(ctx, &pb.ListAPITokensRequest{})
	require.NoError(t, err)
	providers, err := pb.NewCatalogServiceClient(conn).ListToolProviders(ctx, &pb.ListToolProvidersRequest{})
	require.NoError(t, err)
	tools, err := pb.NewCatalogServiceClient(conn).ListCatalogTools(ctx, &pb.ListCatalogToolsRequest{})
	require.NoError(t, err)
	parts = append(parts, tokens, providers, tools)
	var b strings.Builder
	for _, p := range parts {
		j, err := protojson.Marshal(p)
		require.NoError(t, err)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestEveryRPCRefusedOverTCP calls every registered method over TCP with
// no credential, a wrong token, an expired token, a revoked token, and a
// valid token of a role just below the method's: each is refused by the
// access interceptor with the right code, and nothing changes.
func TestEveryRPCRefusedOverTCP(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "--listen", "127.0.0.1:0")
	require.NotEmpty(t, srv.tcp, "the ready line names the TCP address")
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	gh := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "t", "--repo", gh)

	lower := map[model.Role]string{
		model.RoleAdmin:  srv.createToken(t, "member-token", "member", "1h"),
		model.RoleMember: srv.createToken(t, "viewer-token", "viewer", "1h"),
	}
	expired := srv.createToken(t, "expiring", "admin", "1s")
	revoked := srv.createToken(t, "revoked", "admin", "1h")
	srv.ok(t, "token", "revoke", "revoked")
	id, _, _ := apitoken.New()
	wrong := "tsat_" + strings.TrimPrefix(id, "tok_") + "_" + strings.Repeat("ab", 32)
	// Wait, with a deadline, for the expiring token to expire.
	expiredConn := tcpConn(t, srv.tcp, expired)
	require.Eventually(t, func() bool {
		_, err := pb.NewAuthServiceClient(expiredConn).WhoAmI(t.Context(), &pb.WhoAmIRequest{})
		return status.Code(err) == codes.Unauthenticated
	}, 2*time.Minute, 50*time.Millisecond)

	owner := dial(t, srv.addr)
	before := snapshot(t, owner)

	cases := []struct {
		name  string
		conn  *grpc.ClientConn
		code  codes.Code
		msg   string
		roles bool // the case is "a role too low"
	}{
		{"no credential", tcpConn(t, srv.tcp, ""), codes.Unauthenticated, "no credential", false},
		{"wrong token", tcpConn(t, srv.tcp, wrong), codes.Unauthenticated, "API token is not valid", false},
		{"expired token", expiredConn, codes.Unauthenticated, `"expiring" expired`, false},
		{"revoked token", tcpConn(t, srv.tcp, revoked), codes.Unauthenticated, `"revoked" was revoked`, false},
	}
	lowerConns := map[model.Role]*grpc.ClientConn{
		model.RoleAdmin: tcpConn(t, srv.tcp, lower[model.RoleAdmin]), model.RoleMember: tcpConn(t, srv.tcp, lower[model.RoleMember]),
	}

	methods := server.Methods()
	calls, refused, roleCases := 0, 0, 0
	for _, m := range methods {
		if access.Open[m.Name] {
			continue
		}
		run := cases
		if least := access.Table[m.Name]; least != model.RoleViewer {
			run = append(run[:len(run):len(run)], struct {
				name  string
				conn  *grpc.ClientConn
				code  codes.Code
				msg   string
				roles bool
			}{"role too low", lowerConns[least], codes.PermissionDenied, "needs role " + string(least), true})
			roleCases++
		}
		for _, c := range run {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			err := invoke(ctx, c.conn, m)
			cancel()
			calls++
			st := status.Convert(err)
			if assert.Equal(t, c.code, st.Code(), "%s with %s: %v", m.Name, c.name, err) &&
				assert.Contains(t, st.Message(), c.msg, "%s with %s: refused by the access check, not a handler", m.Name, c.name) {
				refused++
			}
		}
	}
	assert.Equal(t, before, snapshot(t, owner), "nothing changed")
	rpcs := len(methods) - len(access.Open)
	testutil.Figure(t, "api access: every RPC over TCP", "%d RPCs × 4 bad credentials + %d × role too low = %d calls: %d refused by the access check, %d reached a handler or failed otherwise, store unchanged",
		rpcs, roleCases, calls, refused, calls-refused)

	// Health checking stays open; reflection needs a credential.
	h, err := healthpb.NewHealthClient(tcpConn(t, srv.tcp, "")).Check(t.Context(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())
	refl, err := reflectionpb.NewServerReflectionClient(tcpConn(t, srv.tcp, "")).ServerReflectionInfo(t.Context())
	require.NoError(t, err)
	// The server may refuse the stream before the request is sent: Send
	// then returns io.EOF, and Recv the status.
	if err := refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		require.ErrorIs(t, err, io.EOF)
	}
	_, err = refl.Recv()
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "reflection without a credential: %v", err)

	// The right role passes: a member creates a task over TCP.
	member := tcpConn(t, srv.tcp, lower[model.RoleAdmin])
	_, err = pb.NewTaskServiceClient(member).CreateTask(t.Context(), &pb.CreateTaskRequest{WorkspaceId: ws, Title: "over tcp", RepositoryId: gh})
	require.NoError(t, err)
	who, err := pb.NewAuthServiceClient(member).WhoAmI(t.Context(), &pb.WhoAmIRequest{})
	require.NoError(t, err)
	assert.Equal(t, "member-token", who.GetName())
	assert.Equal(t, pb.Role_ROLE_MEMBER, who.GetRole())
	assert.Equal(t, access.MethodToken, who.GetMethod())
	for _, secret := range []string{expired, revoked, wrong, lower[model.RoleAdmin]} {
		assert.NotContains(t, srv.logs.String(), secret[5:], "no token in the server's log")
	}
}

// TestSocketRefusesOtherUIDs runs the real CLI as uid 65534 (nobody)
// against the socket: the 0700 directory refuses it, then the 0600
// socket, and, with both opened up by hand (a misconfigured host), the
// server's peer-uid check. Nothing changes.
func TestSocketRefusesOtherUIDs(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		testutil.SkipOrFailUnderCI(t, "running the CLI as another uid needs root (uid %d)", os.Getuid())
	}
	// Under /tmp (not t.TempDir, whose parents are 0700) so that only the
	// modes under test decide.
	dataDir, err := os.MkdirTemp("", "toolscope-access-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	require.NoError(t, os.Remove(dataDir), "serve creates the directory itself")
	srv := startServer(t, dataDir)

	info, err := os.Stat(dataDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the data directory is created 0700")
	info, err = os.Lstat(srv.socket)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, info.Mode().Type())
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the socket is 0600")
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(srv.socket, &st))
	assert.Equal(t, uint32(os.Getuid()), st.Uid, "owned by the server's user")

	// A copy of this binary that nobody may run.
	binDir, err := os.MkdirTemp("", "toolscope-bin-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(binDir) })
	require.NoError(t, os.Chmod(binDir, 0o755))
	bin := filepath.Join(binDir, "toolscope")
	self, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, self, 0o755))

	asNobody := func(args ...string) result {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--server", srv.addr}, args...)...)
		cmd.Env = []string{asMain + "=1", "HOME=/nonexistent", "TOOLSCOPE_CONFIG=/nonexistent/config.json", "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		r := result{stdout: stdout.String(), stderr: stderr.String()}
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "nobody's command must fail: %v; %s", err, r.stdout)
		r.code = ee.ExitCode()
		return r
	}
	owner := dial(t, srv.addr)
	before := snapshot(t, owner)

	layers := []struct {
		name           string
		dirMode        os.FileMode
		sockMode       os.FileMode
		want           string
		refusedAtLayer string
	}{
		{"0700 directory", 0o700, 0o600, "permission denied", "connect(2): EACCES"},
		{"0600 socket", 0o755, 0o600, "permission denied", "connect(2): EACCES"},
		{"peer uid", 0o755, 0o666, "uid 65534 is not the owner of this orchestrator", "SO_PEERCRED check"},
	}
	for _, l := range layers {
		require.NoError(t, os.Chmod(dataDir, l.dirMode))
		require.NoError(t, os.Chmod(srv.socket, l.sockMode))
		for _, args := range [][]string{{"workspace", "create", "evil"}, {"workspace", "list"}, {"token", "create", "mine", "--role", "admin"}} {
			r := asNobody(args...)
			assert.Equal(t, cli.ExitDenied, r.code, "%s: %v: %s", l.name, args, r.stderr)
			assert.Contains(t, r.stderr, l.want, "%s: %v", l.name, args)
			assert.Empty(t, r.stdout, "%s: %v", l.name, args)
		}
		testutil.Figure(t, "api access: uid 65534 against the socket, "+l.name, "3 of 3 commands refused (%s)", l.refusedAtLayer)
	}
	require.NoError(t, os.Chmod(dataDir, 0o700))
	require.NoError(t, os.Chmod(srv.socket, 0o600))
	assert.Equal(t, before, snapshot(t, owner), "nothing changed")
	assert.Contains(t, srv.logs.String(), "uid 65534 is not the owner", "the server logs the refusal")
}

func TestServeRefusesNonLoopbackWithoutTLS(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		dataDir := t.TempDir()
		r := runEnv(t, nil, "serve", "--data-dir", dataDir, "--listen", listen)
		assert.Equal(t, cli.ExitUsage, r.code, "%s: %s", listen, r.stderr)
		assert.Contains(t, r.stderr, `"`+listen+`" is not a loopback address`)
		assert.Contains(t, r.stderr, "--tls-cert")
		_, err := os.Stat(paths.Socket(dataDir))
		assert.ErrorIs(t, err, os.ErrNotExist, "refused before serving anything")
	}
}

// TestTLSClientCertificates serves TCP over TLS: a client certificate
// carries its role, one from another CA is refused, and TLS without a
// certificate or token is no credential.
func TestTLSClientCertificates(t *testing.T) {
	t.Parallel()
	dir, other := t.TempDir(), t.TempDir()
	certs := startServer(t, t.TempDir()) // any server runs the certs commands; they are local
	certs.ok(t, "certs", "init", "--dir", dir)
	certs.ok(t, "certs", "server", "--dir", dir, "--host", "127.0.0.1", "--name", "api")
	certs.ok(t, "certs", "client", "--dir", dir, "--name", "alice", "--role", "member")
	certs.ok(t, "certs", "client", "--dir", dir, "--name", "nobody-in-particular", "--role", "viewer")
	certs.ok(t, "certs", "init", "--dir", other)
	certs.ok(t, "certs", "client", "--dir", other, "--name", "mallory", "--role", "admin")
	r := certs.run(t, "certs", "client", "--dir", dir, "--name", "eve", "--role", "root")
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, `invalid --role "root"`)
	key, err := os.Stat(filepath.Join(dir, "client-alice.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), key.Mode().Perm())

	dataDir, serveArgs := t.TempDir(), []string{"--listen", "127.0.0.1:0",
		"--tls-cert", filepath.Join(dir, "api.crt"), "--tls-key", filepath.Join(dir, "api.key"), "--client-ca", filepath.Join(dir, "ca.crt")}
	srv := startServer(t, dataDir, serveArgs...)
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	gh := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	tlsArgs := func(d, name string) []string {
		return []string{"--server", srv.tcp, "--tls-ca", filepath.Join(dir, "ca.crt"),
			"--tls-cert", filepath.Join(d, "client-"+name+".crt"), "--tls-key", filepath.Join(d, "client-"+name+".key")}
	}

	var who struct{ Name, Role, Method string }
	r = runEnv(t, nil, append(tlsArgs(dir, "alice"), "--json", "whoami")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &who))
	assert.Equal(t, struct{ Name, Role, Method string }{"alice", "member", access.MethodCert}, who)
	r = runEnv(t, nil, append(tlsArgs(dir, "alice"), "task", "create", "--workspace", ws, "--title", "by cert", "--repo", gh)...)
	assert.Equal(t, 0, r.code, "a member creates tasks: %s", r.stderr)
	r = runEnv(t, nil, append(tlsArgs(dir, "alice"), "token", "create", "mine", "--role", "admin")...)
	assert.Equal(t, cli.ExitDenied, r.code, r.stderr)
	assert.Contains(t, r.stderr, "alice has role member")
	r = runEnv(t, nil, append(tlsArgs(dir, "nobody-in-particular"), "task", "create", "--workspace", ws, "--title", "x", "--repo", gh)...)
	assert.Equal(t, cli.ExitDenied, r.code, r.stderr)
	assert.Contains(t, r.stderr, "needs role member")

	owner := dial(t, srv.addr)
	before := snapshot(t, owner)
	r = runEnv(t, nil, append(tlsArgs(other, "mallory"), "workspace", "create", "mallory")...)
	assert.NotEqual(t, 0, r.code, "a certificate from another CA is refused: %s", r.stdout)
	r = runEnv(t, nil, "--server", srv.tcp, "--tls-ca", filepath.Join(dir, "ca.crt"), "workspace", "create", "anon")
	assert.Equal(t, cli.ExitDenied, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no credential")
	r = runEnv(t, nil, "--server", srv.tcp, "workspace", "list")
	assert.NotEqual(t, 0, r.code, "plain text to a TLS listener fails")
	assert.Equal(t, before, snapshot(t, owner), "nothing changed")

	// A revoked certificate is refused from the next call on, whatever
	// role it carries, and it stays so across a restart; the CA and every
	// other certificate keep working.
	certs.ok(t, "certs", "client", "--dir", dir, "--name", "bob", "--role", "admin")
	var issued struct{ Serial string }
	require.NoError(t, json.Unmarshal([]byte(certs.ok(t, "--json", "certs", "client", "--dir", dir, "--name", "carol", "--role", "member")), &issued))
	require.NotEmpty(t, issued.Serial, "certs client says the serial")
	r = runEnv(t, nil, append(tlsArgs(dir, "bob"), "whoami")...)
	require.Equal(t, 0, r.code, r.stderr)
	r = runEnv(t, nil, append(tlsArgs(dir, "alice"), "certs", "revoke", "--cert", filepath.Join(dir, "client-bob.crt"))...)
	assert.Equal(t, cli.ExitDenied, r.code, "a member revokes nothing: %s", r.stderr)
	srv.ok(t, "certs", "revoke", "--cert", filepath.Join(dir, "client-bob.crt"))
	srv.ok(t, "certs", "revoke", strings.ToUpper(issued.Serial)) // as openssl prints it
	r = srv.run(t, "certs", "revoke", "--cert", filepath.Join(dir, "client-bob.crt"))
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "already revoked")
	r = srv.run(t, "certs", "revoke", "xyz")
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, `serial number "xyz" is not hexadecimal`)
	for _, name := range []string{"bob", "carol"} {
		r = runEnv(t, nil, append(tlsArgs(dir, name), "whoami")...)
		assert.Equal(t, cli.ExitDenied, r.code, "%s: %s", name, r.stderr)
		assert.Contains(t, r.stderr, "client certificate \""+name+"\" (serial ")
		assert.Contains(t, r.stderr, "was revoked at")
	}
	r = runEnv(t, nil, append(tlsArgs(dir, "alice"), "whoami")...)
	assert.Equal(t, 0, r.code, "another certificate of the CA: %s", r.stderr)
	var revoked struct {
		RevokedCertificates []struct {
			Serial    string `json:"serial"`
			Name      string `json:"name"`
			RevokedBy string `json:"revoked_by"`
		} `json:"revoked_certificates"`
	}
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "certs", "revoked")), &revoked))
	require.Len(t, revoked.RevokedCertificates, 2)
	assert.Equal(t, "bob", revoked.RevokedCertificates[0].Name, "from its file")
	assert.Equal(t, issued.Serial, revoked.RevokedCertificates[1].Serial)
	assert.Contains(t, revoked.RevokedCertificates[0].RevokedBy, "local:")
	srv.stop(t)
	srv = startServer(t, dataDir, serveArgs...)
	r = runEnv(t, nil, append(tlsArgs(dir, "bob"), "whoami")...)
	assert.Equal(t, cli.ExitDenied, r.code, "still revoked after a restart: %s", r.stderr)

	// A token works over TLS too, and a context holds it all.
	admin := srv.createToken(t, "ops", "admin", "1h")
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(admin+"\n"), 0o600))
	config := filepath.Join(t.TempDir(), "cfg", "config.json")
	env := []string{"TOOLSCOPE_CONFIG=" + config}
	r = runEnv(t, env, "context", "set", "prod", "--server", srv.tcp, "--ca", filepath.Join(dir, "ca.crt"), "--token-file", tokenFile)
	require.Equal(t, 0, r.code, r.stderr)
	r = runEnv(t, env, "whoami")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "ops")
	assert.Contains(t, r.stdout, "role admin")
	testutil.Figure(t, "api access: TLS client certificates", "role from OU honoured (member allowed, admin RPC refused); wrong CA, no certificate, plain text: 3 of 3 refused, store unchanged; "+
		"2 revoked certificates (by file, by serial) refused on their next call and after a restart, the CA's others accepted")
}

// TestTokensAndContexts drives tokens and contexts with the CLI: a token
// is shown once, listed without its secret, works through a context, and
// stops working when revoked; errors name what the user typed.
func TestTokensAndContexts(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	srv := startServer(t, dataDir, "--listen", "127.0.0.1:0")

	// Zero setup: the default data directory's socket.
	r := runEnv(t, []string{"TOOLSCOPE_DATA_DIR=" + dataDir}, "whoami")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^local:\d+\s+role admin\s+by unix-socket`, r.stdout)

	secret := srv.createToken(t, "ci", "member", "2h")
	list := srv.ok(t, "--json", "token", "list")
	assert.NotContains(t, list, secret[5:], "never the secret")
	var tokens struct {
		APITokens []struct {
			Name      string `json:"name"`
			CreatedBy string `json:"created_by"`
		} `json:"api_tokens"`
	}
	require.NoError(t, json.Unmarshal([]byte(list), &tokens))
	require.Len(t, tokens.APITokens, 1)
	assert.Len(t, strings.Fields(srv.ok(t, "token", "list")), 7+6, "a header (CREATED BY is two words) and one token, no secret")
	assert.Equal(t, "ci", tokens.APITokens[0].Name)
	assert.Regexp(t, `^person:local:\d+$`, tokens.APITokens[0].CreatedBy)
	r = srv.run(t, "token", "create", "x", "--ttl", "9000h")
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, "invalid --ttl: ")
	r = srv.run(t, "token", "create", "ci")
	assert.Equal(t, cli.ExitAlreadyExists, r.code)

	// Without --json, stdout is the token alone: '> file' keeps just it.
	r = srv.run(t, "token", "create", "shell", "--role", "viewer")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^tsat_[a-z2-7]{10}_[0-9a-f]{64}\n$`, r.stdout)
	assert.Contains(t, r.stderr, "this is the only time it is shown")

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "ci.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(secret), 0o600))
	config := filepath.Join(dir, "config.json")
	env := []string{"TOOLSCOPE_CONFIG=" + config}
	r = runEnv(t, env, "context", "set", "ci", "--server", srv.tcp, "--token-file", tokenFile)
	require.Equal(t, 0, r.code, r.stderr)
	r = runEnv(t, env, "context", "set", "local", "--server", srv.addr)
	require.Equal(t, 0, r.code, r.stderr)
	r = runEnv(t, env, "context", "set", "leaky", "--server", srv.tcp, "--token-env", secret)
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.NotContains(t, r.stderr, secret[5:], "a token typed as a reference is not echoed")
	info, err := os.Stat(config)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	b, err := os.ReadFile(config)
	require.NoError(t, err)
	assert.NotContains(t, string(b), secret[5:], "the config file holds references, not tokens")

	var listed struct {
		Current  string `json:"current-context"`
		Contexts []struct{ Name, Server string }
	}
	r = runEnv(t, env, "--json", "context", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	assert.Equal(t, "ci", listed.Current, "the first context becomes current")
	assert.Len(t, listed.Contexts, 2)

	r = runEnv(t, env, "whoami")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^ci\s+role member\s+by api-token`, r.stdout)
	r = runEnv(t, env, "--context", "local", "whoami")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "by unix-socket")
	r = runEnv(t, append(env, "TOOLSCOPE_CONTEXT=local"), "whoami")
	assert.Contains(t, r.stdout, "by unix-socket", "the environment picks a context")
	r = runEnv(t, env, "workspace", "create", "nope")
	assert.Equal(t, cli.ExitDenied, r.code, "a member may not create workspaces: %s", r.stderr)

	errs := []struct {
		env  []string
		args []string
		code int
		msg  string
	}{
		{nil, []string{"--context", "staging", "whoami"}, cli.ExitUsage, `no context "staging" (from --context)`},
		{[]string{"TOOLSCOPE_CONTEXT=stage"}, []string{"whoami"}, cli.ExitUsage, `no context "stage" (from TOOLSCOPE_CONTEXT)`},
		{nil, []string{"--token-file", filepath.Join(dir, "missing.token"), "whoami"}, cli.ExitUsage, "read the token file " + filepath.Join(dir, "missing.token") + " (from --token-file)"},
		{nil, []string{"context", "use", "prod"}, cli.ExitUsage, `no context "prod"`},
		{nil, []string{"--server", "tcp://nowhere", "whoami"}, cli.ExitUsage, `server "tcp://nowhere" is neither`},
		{[]string{"TOOLSCOPE_TOKEN=tsat_nope"}, []string{"--server", srv.tcp, "whoami"}, cli.ExitDenied, "API token is not valid"},
		{[]string{"TOOLSCOPE_TOKEN=" + secret}, []string{"--server", "192.0.2.1:7733", "whoami"}, cli.ExitUsage, "refusing to send the API token in clear text to 192.0.2.1:7733"},
	}
	for _, e := range errs {
		r := runEnv(t, append(env, e.env...), e.args...)
		assert.Equal(t, e.code, r.code, "%v %v: %s", e.env, e.args, r.stderr)
		assert.Contains(t, r.stderr, e.msg, "%v %v", e.env, e.args)
	}

	srv.ok(t, "token", "revoke", "ci")
	r = runEnv(t, env, "whoami")
	assert.Equal(t, cli.ExitDenied, r.code)
	assert.Contains(t, r.stderr, `API token "ci" was revoked`)
	r = srv.run(t, "token", "revoke", "ci")
	assert.Equal(t, cli.ExitPrecondition, r.code, r.stderr)

	r = runEnv(t, env, "context", "remove", "ci")
	require.Equal(t, 0, r.code, r.stderr)
	r = runEnv(t, env, "--json", "context", "list")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	assert.Empty(t, listed.Current)
	assert.Len(t, listed.Contexts, 1)
}

// TestSecondServerOnTheSameDataDirIsRefused: the live socket stops a
// second orchestrator before it opens the store or touches a session.
func TestSecondServerOnTheSameDataDirIsRefused(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	srv := startServer(t, dataDir)
	r := runEnv(t, nil, "serve", "--data-dir", dataDir)
	assert.Equal(t, cli.ExitPrecondition, r.code, r.stderr)
	assert.Contains(t, r.stderr, fmt.Sprintf("another orchestrator (pid %d) serves on %s", srv.cmd.Process.Pid, srv.socket), "the refusal names the holder's pid")
	srv.ok(t, "workspace", "list") // the first one still serves
}
