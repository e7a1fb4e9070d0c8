package access

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/orchestrator/internal/apitoken"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// How a caller authenticated, as WhoAmI reports it.
const (
	MethodSocket = "unix-socket"
	MethodToken  = "api-token"
	MethodCert   = "client-certificate"
)

// Credentials finds an API token and the hash of its secret by id, and
// the revocation of a client certificate by serial (errdefs.ErrNotFound
// when there is none). The store implements it.
type Credentials interface {
	APITokenByID(ctx context.Context, id string) (model.APIToken, []byte, error)
	CertificateRevocation(ctx context.Context, serial string) (model.RevokedCertificate, error)
}

// Authenticator authenticates and authorizes every call of a server.
type Authenticator struct {
	Credentials Credentials
	// OwnerUID is the uid the server runs as; on the Unix socket it (and
	// root) is the owner, with the admin role.
	OwnerUID uint32
	// Now is the clock for token expiry; time.Now if nil.
	Now func() time.Time
	// Log receives refusals (method and reason, never a credential).
	Log *slog.Logger
}

type methodKey struct{}

// MethodFrom returns how the caller in ctx authenticated (MethodSocket,
// MethodToken or MethodCert).
func MethodFrom(ctx context.Context) string {
	m, _ := ctx.Value(methodKey{}).(string)
	return m
}

// ServerOptions returns the interceptors. Install them after
// grpcerr.ServerOptions, so that their errdefs errors become statuses.
func (a *Authenticator) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := a.Authorize(ctx, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := a.Authorize(ss.Context(), info.FullMethod)
			if err != nil {
				return err
			}
			return h(srv, &stream{ServerStream: ss, ctx: ctx})
		}),
	}
}

type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// Authorize authenticates the caller of method and checks its role
// against Table. It returns ctx carrying the caller (model.WithActor), or
// an ErrUnauthenticated or ErrPermissionDenied error.
func (a *Authenticator) Authorize(ctx context.Context, method string) (context.Context, error) {
	if Open[method] {
		return ctx, nil
	}
	actor, how, err := a.authenticate(ctx)
	if err != nil {
		a.refused(method, err)
		return nil, err
	}
	least, ok := Table[method]
	if !ok {
		err = fmt.Errorf("%s is not in the orchestrator's access table, so nobody may call it: %w", method, errdefs.ErrPermissionDenied)
	} else if !actor.Role.AtLeast(least) {
		err = fmt.Errorf("%s has role %s; %s needs role %s: %w", actor.Name, actor.Role, method, least, errdefs.ErrPermissionDenied)
	}
	if err != nil {
		a.refused(method, err)
		return nil, err
	}
	return context.WithValue(model.WithActor(ctx, actor), methodKey{}, how), nil
}

func (a *Authenticator) refused(method string, err error) {
	if a.Log != nil {
		a.Log.Warn("API call refused", "method", method, "reason", err.Error())
	}
}

var errNoCredential = fmt.Errorf("no credential: over TCP, send an API token (--token-file, TOOLSCOPE_TOKEN or a context's token) or a client certificate: %w", errdefs.ErrUnauthenticated)

func (a *Authenticator) authenticate(ctx context.Context) (model.Actor, string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		actor, err := a.token(ctx, v[0])
		return actor, MethodToken, err
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return model.Actor{}, "", errNoCredential
	}
	switch info := p.AuthInfo.(type) {
	case PeerInfo:
		if info.UID != a.OwnerUID && info.UID != 0 {
			return model.Actor{}, "", fmt.Errorf("uid %d is not the owner of this orchestrator (uid %d); connect over TCP with an API token: %w",
				info.UID, a.OwnerUID, errdefs.ErrPermissionDenied)
		}
		return model.Actor{Kind: model.ActorPerson, Name: "local:" + strconv.FormatUint(uint64(info.UID), 10), Role: model.RoleAdmin}, MethodSocket, nil
	case credentials.TLSInfo:
		chains := info.State.VerifiedChains
		if len(chains) == 0 || len(chains[0]) == 0 {
			return model.Actor{}, "", errNoCredential
		}
		leaf := chains[0][0]
		role, err := CertRole(leaf.Subject.OrganizationalUnit)
		if err != nil {
			return model.Actor{}, "", fmt.Errorf("client certificate %q: %v: %w", leaf.Subject.CommonName, err, errdefs.ErrPermissionDenied)
		}
		// Every call asks the store, as a token's does: a revocation holds
		// at once, on every replica.
		switch rc, err := a.Credentials.CertificateRevocation(ctx, pki.Serial(leaf)); {
		case err == nil:
			return model.Actor{}, "", fmt.Errorf("client certificate %q (serial %s) was revoked at %s: %w",
				leaf.Subject.CommonName, rc.Serial, rc.RevokedAt.Format(time.RFC3339), errdefs.ErrUnauthenticated)
		case !errors.Is(err, errdefs.ErrNotFound):
			return model.Actor{}, "", err
		}
		return model.Actor{Kind: model.ActorPerson, Name: leaf.Subject.CommonName, Role: role}, MethodCert, nil
	}
	return model.Actor{}, "", errNoCredential
}

// CertRole returns the role a client certificate's Subject carries: its
// one OrganizationalUnit that names a role.
func CertRole(units []string) (model.Role, error) {
	var found []model.Role
	for _, u := range units {
		if r := model.Role(u); r.Valid() {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		return "", errors.New("its Subject must carry exactly one role (OrganizationalUnit viewer, member or admin); issue it with 'toolscope certs client --role'")
	}
	return found[0], nil
}

var errBadToken = fmt.Errorf("the API token is not valid (not a toolscope token, or not one this orchestrator issued): %w", errdefs.ErrUnauthenticated)

func (a *Authenticator) token(ctx context.Context, header string) (model.Actor, error) {
	const scheme = "Bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return model.Actor{}, fmt.Errorf("the authorization metadata must be \"Bearer <API token>\": %w", errdefs.ErrUnauthenticated)
	}
	token := header[len(scheme):]
	id, ok := apitoken.Parse(token)
	if !ok {
		return model.Actor{}, errBadToken
	}
	tok, hash, err := a.Credentials.APITokenByID(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return model.Actor{}, errBadToken
	} else if err != nil {
		return model.Actor{}, err
	}
	if subtle.ConstantTimeCompare(apitoken.Hash(token), hash) != 1 {
		return model.Actor{}, errBadToken
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	switch {
	case !tok.RevokedAt.IsZero():
		return model.Actor{}, fmt.Errorf("API token %q was revoked at %s: %w", tok.Name, tok.RevokedAt.Format(time.RFC3339), errdefs.ErrUnauthenticated)
	case !tok.Usable(now()):
		return model.Actor{}, fmt.Errorf("API token %q expired at %s; create a new one with 'toolscope token create': %w", tok.Name, tok.ExpiresAt.Format(time.RFC3339), errdefs.ErrUnauthenticated)
	}
	return model.Actor{Kind: model.ActorPerson, Name: tok.Name, Role: tok.Role}, nil
}
