package access_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/apitoken"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

const (
	adminRPC  = pb.AuthService_CreateAPIToken_FullMethodName
	memberRPC = pb.TaskService_CreateTask_FullMethodName
	viewerRPC = pb.TaskService_ListTasks_FullMethodName
)

func onSocket(uid uint32) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{
		Addr: &net.UnixAddr{Name: "@", Net: "unix"}, AuthInfo: access.PeerInfo{UID: uid},
	})
}

func onTCP(info credentials.AuthInfo, token string) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, AuthInfo: info})
	if token != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+token))
	}
	return ctx
}

func TestSocketOwnerAndRootAreAdmins(t *testing.T) {
	a := &access.Authenticator{OwnerUID: 1000}
	for _, uid := range []uint32{1000, 0} {
		ctx, err := a.Authorize(onSocket(uid), adminRPC)
		require.NoError(t, err)
		actor, ok := model.ActorFrom(ctx)
		require.True(t, ok)
		assert.Equal(t, model.Actor{Kind: model.ActorPerson, Name: "local:" + map[uint32]string{1000: "1000", 0: "0"}[uid], Role: model.RoleAdmin}, actor)
		assert.Equal(t, access.MethodSocket, access.MethodFrom(ctx))
	}
	_, err := a.Authorize(onSocket(65534), viewerRPC)
	assert.ErrorIs(t, err, errdefs.ErrPermissionDenied)
	assert.Contains(t, err.Error(), "uid 65534 is not the owner")
}

func TestUnlistedMethodIsRefusedEvenToTheOwner(t *testing.T) {
	a := &access.Authenticator{OwnerUID: 1000}
	_, err := a.Authorize(onSocket(1000), "/toolscope.orchestrator.v1.TaskService/DeleteEverything")
	assert.ErrorIs(t, err, errdefs.ErrPermissionDenied)
	assert.Contains(t, err.Error(), "not in the orchestrator's access table")
	_, err = a.Authorize(onSocket(1000), "/grpc.health.v1.Health/Check")
	assert.NoError(t, err, "health checking is open")
	_, err = a.Authorize(onTCP(nil, ""), "/grpc.health.v1.Health/Check")
	assert.NoError(t, err, "health checking is open over TCP too")
}

func TestRolesAreOrdered(t *testing.T) {
	for _, c := range []struct {
		role, least model.Role
		ok          bool
	}{
		{model.RoleAdmin, model.RoleAdmin, true}, {model.RoleAdmin, model.RoleViewer, true},
		{model.RoleMember, model.RoleAdmin, false}, {model.RoleMember, model.RoleMember, true},
		{model.RoleViewer, model.RoleMember, false}, {model.RoleViewer, model.RoleViewer, true},
		{"", model.RoleViewer, false}, {"root", model.RoleViewer, false}, {model.RoleAdmin, "", false},
	} {
		assert.Equal(t, c.ok, c.role.AtLeast(c.least), "%q for %q", c.role, c.least)
	}
}

func TestTokens(t *testing.T) {
	st, err := store.Open(t.Context(), t.TempDir(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	a := &access.Authenticator{Credentials: st, OwnerUID: 1000, Now: func() time.Time { return now }}

	create := func(name string, role model.Role, ttl time.Duration) string {
		id, secret, hash := apitoken.New()
		assert.Regexp(t, `^tsat_[a-z2-7]{10}_[0-9a-f]{64}$`, secret)
		assert.True(t, apitoken.Pattern.MatchString("Authorization: Bearer "+secret+"\n"), "scrubbers find it in text")
		parsed, ok := apitoken.Parse(secret)
		require.True(t, ok)
		assert.Equal(t, id, parsed)
		_, err := st.CreateAPIToken(t.Context(), model.APIToken{ID: id, Name: name, Role: role, ExpiresAt: now.Add(ttl)}, hash)
		require.NoError(t, err)
		return secret
	}
	member := create("ci", model.RoleMember, time.Hour)
	viewer := create("dash", model.RoleViewer, time.Hour)
	expired := create("old", model.RoleAdmin, -time.Second)
	revoked := create("gone", model.RoleAdmin, time.Hour)
	_, err = st.RevokeAPIToken(t.Context(), "gone")
	require.NoError(t, err)

	ctx, err := a.Authorize(onTCP(nil, member), memberRPC)
	require.NoError(t, err)
	actor, _ := model.ActorFrom(ctx)
	assert.Equal(t, model.Actor{Kind: model.ActorPerson, Name: "ci", Role: model.RoleMember}, actor)
	assert.Equal(t, access.MethodToken, access.MethodFrom(ctx))

	wrongSecret := member[:len(member)-1] + map[bool]string{true: "0", false: "1"}[!strings.HasSuffix(member, "0")]
	cases := []struct {
		name, token, method string
		want                error
		msg                 string
	}{
		{"no credential", "", viewerRPC, errdefs.ErrUnauthenticated, "no credential"},
		{"malformed", "hunter2", viewerRPC, errdefs.ErrUnauthenticated, "not valid"},
		{"unknown id", "tsat_aaaaaaaaaa_" + strings.Repeat("0", 64), viewerRPC, errdefs.ErrUnauthenticated, "not valid"},
		{"right id, wrong secret", wrongSecret, viewerRPC, errdefs.ErrUnauthenticated, "not valid"},
		{"expired", expired, viewerRPC, errdefs.ErrUnauthenticated, `"old" expired`},
		{"revoked", revoked, viewerRPC, errdefs.ErrUnauthenticated, `"gone" was revoked`},
		{"member on an admin RPC", member, adminRPC, errdefs.ErrPermissionDenied, "needs role admin"},
		{"viewer on a member RPC", viewer, memberRPC, errdefs.ErrPermissionDenied, "needs role member"},
	}
	for _, c := range cases {
		_, err := a.Authorize(onTCP(nil, c.token), c.method)
		assert.ErrorIs(t, err, c.want, c.name)
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), c.msg, c.name)
			for _, secret := range []string{member, viewer, expired, revoked} {
				assert.NotContains(t, err.Error(), secret[5:], "%s: no secret in errors", c.name)
			}
		}
	}
	// A token beats the socket: sending one means being that token.
	ctx = metadata.NewIncomingContext(onSocket(1000), metadata.Pairs("authorization", "Bearer "+viewer))
	_, err = a.Authorize(ctx, adminRPC)
	assert.ErrorIs(t, err, errdefs.ErrPermissionDenied)
}

func TestClientCertificateRole(t *testing.T) {
	st, err := store.Open(t.Context(), t.TempDir(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	a := &access.Authenticator{Credentials: st, OwnerUID: 1000}
	serial := big.NewInt(0x0abc)
	certCtx := func(units ...string) context.Context {
		leaf := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: units}}
		return onTCP(credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}}, "")
	}
	ctx, err := a.Authorize(certCtx("member"), memberRPC)
	require.NoError(t, err)
	actor, _ := model.ActorFrom(ctx)
	assert.Equal(t, model.Actor{Kind: model.ActorPerson, Name: "alice", Role: model.RoleMember}, actor)
	assert.Equal(t, access.MethodCert, access.MethodFrom(ctx))

	_, err = a.Authorize(certCtx("member"), adminRPC)
	assert.ErrorIs(t, err, errdefs.ErrPermissionDenied)
	for _, units := range [][]string{nil, {"ops"}, {"admin", "viewer"}} {
		_, err = a.Authorize(certCtx(units...), viewerRPC)
		assert.ErrorIs(t, err, errdefs.ErrPermissionDenied, "OU %v", units)
	}
	// TLS without a verified client certificate is no credential.
	_, err = a.Authorize(onTCP(credentials.TLSInfo{}, ""), viewerRPC)
	assert.ErrorIs(t, err, errdefs.ErrUnauthenticated)

	// A revoked certificate is no credential either, whatever it carries:
	// its serial is asked for on every call.
	_, err = st.RevokeCertificate(t.Context(), model.RevokedCertificate{Serial: "abc", Name: "alice"})
	require.NoError(t, err)
	_, err = a.Authorize(certCtx("admin"), viewerRPC)
	assert.ErrorIs(t, err, errdefs.ErrUnauthenticated)
	assert.ErrorContains(t, err, `client certificate "alice" (serial abc) was revoked at `)
	serial = big.NewInt(0x0abd)
	_, err = a.Authorize(certCtx("member"), memberRPC)
	assert.NoError(t, err, "another serial")
}

// TestAgentOutputIsReadByTheRoleOfReadSessionLog: who reads an agent's
// output (the tail an agent.exited event records, as the session's log)
// is stated once, by ReadSessionLog's role in the table: members and
// admins, never a viewer or an unknown role.
func TestAgentOutputIsReadByTheRoleOfReadSessionLog(t *testing.T) {
	assert.Equal(t, pb.SessionService_ReadSessionLog_FullMethodName, access.AgentOutput)
	assert.Equal(t, model.RoleMember, access.Table[access.AgentOutput])
	for role, may := range map[model.Role]bool{model.RoleViewer: false, model.RoleMember: true, model.RoleAdmin: true, "": false, "guest": false} {
		assert.Equal(t, may, access.MayReadAgentOutput(role), "%q", role)
	}
}
