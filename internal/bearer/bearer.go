// Package bearer authenticates gRPC calls with a shared secret carried as
// a bearer token in the "authorization" metadata: the orchestrator sends
// agentctl's per-launch secret with Credentials, and agentctl checks it with
// Check. The secret never appears in an error or log line.
package bearer

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/toolscope/toolscope/internal/errdefs"
)

type perRPC struct {
	secret     string
	requireTLS bool
}

// Credentials returns per-RPC credentials sending secret. Over plain TCP
// (loopback, or a published container port bound to 127.0.0.1) requireTLS
// is false; remote hosts use mutual TLS instead.
func Credentials(secret string, requireTLS bool) credentials.PerRPCCredentials {
	return perRPC{secret: secret, requireTLS: requireTLS}
}

func (p perRPC) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + p.secret}, nil
}

func (p perRPC) RequireTransportSecurity() bool { return p.requireTLS }

// Check reports whether the incoming call carries secret. The error is an
// errdefs.ErrUnauthenticated; given says whether any token was sent.
func Check(ctx context.Context, secret string) (given bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var got string
	var scheme bool
	if v := md.Get("authorization"); len(v) > 0 {
		// The scheme is case-insensitive (RFC 9110) and required: a bare
		// value is refused, as RFC 6750 reads.
		if len(v[0]) > len("Bearer ") && strings.EqualFold(v[0][:len("Bearer ")], "Bearer ") {
			got, scheme = v[0][len("Bearer "):], true
		}
		given = true
	}
	if secret != "" && scheme && subtle.ConstantTimeCompare([]byte(got), []byte(secret)) == 1 {
		return given, nil
	}
	return given, fmt.Errorf("missing or wrong orchestrator secret: %w", errdefs.ErrUnauthenticated)
}
