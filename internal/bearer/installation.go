package bearer

import (
	"context"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// InstallationKey is the metadata naming the orchestrator installation a
// call to agentctl comes from (ADR 0014): the Attach hello's
// orchestrator_id, carried on every other call too.
const InstallationKey = "toolscope-installation"

type installation string

// Installation returns per-RPC credentials that name the caller's
// installation on every call, over TLS or not. It is no secret.
func Installation(id string) credentials.PerRPCCredentials { return installation(id) }

func (i installation) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{InstallationKey: string(i)}, nil
}

func (installation) RequireTransportSecurity() bool { return false }

// InstallationOf returns the installation an incoming call names, "" if
// none.
func InstallationOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(InstallationKey); len(v) > 0 {
		return v[0]
	}
	return ""
}
