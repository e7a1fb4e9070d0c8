package grpcerr_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/testutil"
)

// failingHealth answers Check and Watch with the domain error (or panic)
// selected by the service name.
type failingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (failingHealth) fail(service string) error {
	switch service {
	case "field":
		return errdefs.InvalidField("repository_ids[1]", "duplicate of repository_ids[0]")
	case "notfound":
		return errdefs.NotFound("task", "task_123")
	case "exists":
		return errdefs.AlreadyExists("repository github.com/acme/api in workspace ws_1")
	case "plain":
		return errors.New("disk on fire")
	case "panic":
		panic("boom")
	}
	return nil
}

func (h failingHealth) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := h.fail(req.GetService()); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h failingHealth) Watch(req *healthpb.HealthCheckRequest, _ healthpb.Health_WatchServer) error {
	return h.fail(req.GetService())
}

func dial(t *testing.T) healthpb.HealthClient {
	t.Helper()
	client, _ := dialLogged(t)
	return client
}

// dialLogged also returns the server's log.
func dialLogged(t *testing.T) (healthpb.HealthClient, *testutil.SyncBuffer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	logs := &testutil.SyncBuffer{}
	srv := grpc.NewServer(grpcerr.ServerOptions(slog.New(slog.NewTextHandler(logs, nil)))...)
	healthpb.RegisterHealthServer(srv, failingHealth{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(),
		append(grpcerr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn), logs
}

func TestInternalDetailIsLoggedNotSent(t *testing.T) {
	t.Parallel()
	client, logs := dialLogged(t)
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "plain"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "disk on fire")
	assert.Contains(t, logs.String(), "disk on fire")
	assert.Contains(t, logs.String(), "/grpc.health.v1.Health/Check")
}

func TestErrorsSurviveTheWire(t *testing.T) {
	t.Parallel()
	client := dial(t)
	cases := []struct {
		service  string
		class    error
		code     codes.Code
		field    string
		contains string
	}{
		{"field", errdefs.ErrInvalidArgument, codes.InvalidArgument, "repository_ids[1]", "invalid repository_ids[1]: duplicate"},
		{"notfound", errdefs.ErrNotFound, codes.NotFound, "", `task "task_123"`},
		{"exists", errdefs.ErrAlreadyExists, codes.AlreadyExists, "", "github.com/acme/api"},
		{"plain", nil, codes.Internal, "", "internal error; the orchestrator's log has the details"},
		{"panic", nil, codes.Internal, "", "internal error in /grpc.health.v1.Health/Check"},
	}
	for _, c := range cases {
		t.Run(c.service, func(t *testing.T) {
			t.Parallel()
			_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: c.service})
			require.Error(t, err)
			if c.class != nil {
				assert.ErrorIs(t, err, c.class)
			}
			assert.Equal(t, c.code, status.Code(err))
			assert.Equal(t, c.field, errdefs.FieldOf(err))
			assert.Contains(t, err.Error(), c.contains)
			assert.NotContains(t, err.Error(), "disk on fire", "internal detail reached the client")
		})
	}
}

func TestStreamErrorsSurviveTheWire(t *testing.T) {
	t.Parallel()
	client := dial(t)
	stream, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: "notfound"})
	require.NoError(t, err)
	_, err = stream.Recv()
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
	assert.Contains(t, err.Error(), "task_123")
}

func TestToStatusPassesStatusesAndContextErrors(t *testing.T) {
	t.Parallel()
	st := status.Error(codes.ResourceExhausted, "slow down")
	assert.Equal(t, st, grpcerr.ToStatus(st))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(grpcerr.ToStatus(context.DeadlineExceeded)))
	assert.NoError(t, grpcerr.ToStatus(nil))
	assert.NoError(t, grpcerr.FromStatus(nil))
}
