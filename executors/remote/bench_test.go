package remote_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/executors/executortest"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/pki"
)

// BenchmarkLaunchToFirstList: a remote launch (session created on the
// host's running daemon over mutual TLS) to the first tools/list
// answered, against a fresh gRPC connection to the same daemon (TLS
// handshake included) answering one call.
func BenchmarkLaunchToFirstList(b *testing.B) {
	h := startHost(b)
	e := h.executor(b, nil)
	cfg, err := pki.ClientConfig(h.clientTLS, h.ca.CertPEM)
	require.NoError(b, err)
	executortest.BenchLaunch(b, e, nil, func(b *testing.B) func() {
		conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg.Clone())))
		require.NoError(b, err)
		_, err = agentctlv1.NewAgentctlServiceClient(conn).GetSessionState(context.Background(),
			&agentctlv1.GetSessionStateRequest{SessionId: "floor"})
		require.Equal(b, codes.NotFound, status.Code(err), "%v", err)
		return func() { _ = conn.Close() }
	})
}
