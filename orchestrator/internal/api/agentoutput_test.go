package api

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// printedSecret is a line an agent printed that no scrubber rule knows:
// only the role rule keeps it from a reader.
const printedSecret = "cat notes/prod.txt: the vault unseal phrase is ZEBRA-OCTOPUS-4471"

// printing is the fake backend whose sessions' agent log holds output,
// as a real agentctl's would after the agent printed it.
func printing(output string) *fake.Executor {
	e := fake.New("local")
	e.AgentOutput = output
	return e
}

// servedAPI is the public API served as the server serves it (the
// error and access interceptors, API tokens checked against the store),
// over an in-memory connection.
type servedAPI struct {
	svc  *service.Service
	conn *grpc.ClientConn
}

func serveAPI(t *testing.T, exec executors.Executor) servedAPI {
	t.Helper()
	broker := &events.Broker{}
	st, err := store.Open(context.Background(), t.TempDir(), store.Options{OnCommit: broker.Publish})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, broker, service.Options{Executors: map[string]executors.Executor{"local": exec}})
	t.Cleanup(svc.Close)
	log := slog.New(slog.DiscardHandler)
	auth := &access.Authenticator{Credentials: st, OwnerUID: 1 << 31, Log: log}
	srv := grpc.NewServer(append(grpcerr.ServerOptions(log), auth.ServerOptions()...)...)
	Register(srv, svc)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///api", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return servedAPI{svc: svc, conn: conn}
}

// as is a context whose calls carry a new API token of role.
func (a servedAPI) as(t *testing.T, role model.Role) context.Context {
	t.Helper()
	_, secret, err := a.svc.CreateAPIToken(context.Background(), "tok-"+string(role), role, time.Hour)
	require.NoError(t, err)
	return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+secret)
}

// agentExited reads a task's events over the API until the agent.exited
// event, and returns it.
func agentExited(t *testing.T, stream grpc.ServerStreamingClient[pb.WatchTaskEventsResponse]) *pb.TaskEvent {
	t.Helper()
	for {
		resp, err := stream.Recv()
		require.NoError(t, err)
		if e := resp.GetEvent(); e.GetKind() == pb.TaskEventKind_TASK_EVENT_KIND_AGENT_EXITED {
			return e
		}
	}
}

// TestAViewerWatchingEventsNeverReadsTheAgentsOutput replays the attack
// through the API, with API tokens: a viewer watches a task's events
// while a member's session's agent prints a secret line and exits, then
// lists them again from the start (toolscope events watch / list). Both
// times the agent.exited event tells the viewer the exit code and never
// the line, and the viewer cannot read the session's log. A member reads
// the line, in the event and in the session's log.
func TestAViewerWatchingEventsNeverReadsTheAgentsOutput(t *testing.T) {
	t.Parallel()
	output := "reading the notes\n" + printedSecret
	api := serveAPI(t, printing(output))
	ctx := context.Background()
	ws, err := api.svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	repo, err := api.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	task, err := api.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "t", RepositoryID: repo.ID})
	require.NoError(t, err)
	viewer, member := api.as(t, model.RoleViewer), api.as(t, model.RoleMember)
	events, sessions := pb.NewEventServiceClient(api.conn), pb.NewSessionServiceClient(api.conn)

	launched, err := sessions.LaunchSession(member, &pb.LaunchSessionRequest{TaskId: task.ID, Executor: "local"})
	require.NoError(t, err)
	sid := launched.GetSession().GetId()
	watching, err := events.WatchTaskEvents(viewer, &pb.WatchTaskEventsRequest{TaskId: task.ID})
	require.NoError(t, err)
	api.svc.SessionEvent(executors.SessionEvent{SessionID: sid, Kind: executors.EventAgentExited, AgentExitCode: 3, AgentOutput: output})

	const withheld = "agent exited with code 3; its output is withheld: reading it (toolscope session logs) needs role member"
	live := agentExited(t, watching)
	assert.Equal(t, sid, live.GetSessionId())
	assert.Equal(t, withheld, live.GetMessage(), "watched as it happened")
	listed, err := events.WatchTaskEvents(viewer, &pb.WatchTaskEventsRequest{TaskId: task.ID})
	require.NoError(t, err)
	assert.Equal(t, withheld, agentExited(t, listed).GetMessage(), "read back from the store")

	logs, err := sessions.ReadSessionLog(viewer, &pb.ReadSessionLogRequest{SessionId: sid})
	require.NoError(t, err)
	_, err = logs.Recv()
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "a viewer reads no session log: %v", err)

	asMember, err := events.WatchTaskEvents(member, &pb.WatchTaskEventsRequest{TaskId: task.ID})
	require.NoError(t, err)
	assert.Equal(t, "agent exited with code 3; last output:\n"+output, agentExited(t, asMember).GetMessage(), "a member reads the tail")
	logs, err = sessions.ReadSessionLog(member, &pb.ReadSessionLogRequest{SessionId: sid})
	require.NoError(t, err)
	var text strings.Builder
	for {
		resp, err := logs.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		text.WriteString(resp.GetText())
	}
	assert.Contains(t, text.String(), printedSecret, "a member reads the session's log")
}
