package api

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// wide is a character of 4 bytes in UTF-8 (U+1D54F), the attack's.
const wide = "𝕏"

// grpcDefaultMax is what a gRPC client receives by default, the limit
// the listings broke.
const grpcDefaultMax = 4 << 20

// socketAPI is the public API served over a real Unix socket, with the
// server's error interceptors, and a client with gRPC's defaults (a
// 4 MiB receive limit), as the command line dials it.
type socketAPI struct {
	st   *store.Store
	svc  *service.Service
	conn *grpc.ClientConn
}

func serveOnSocket(t *testing.T) socketAPI {
	t.Helper()
	broker := &events.Broker{}
	st, err := store.Open(context.Background(), t.TempDir(), store.Options{OnCommit: broker.Publish})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, broker, service.Options{Executors: map[string]executors.Executor{"local": fake.New("local")}})
	t.Cleanup(svc.Close)
	srv := grpc.NewServer(grpcerr.ServerOptions(slog.New(slog.DiscardHandler))...)
	Register(srv, svc)
	dir, err := os.MkdirTemp("", "ts-api-") // short: a socket's path is at most 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	lis, err := net.Listen("unix", filepath.Join(dir, "api.sock"))
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return socketAPI{st: st, svc: svc, conn: conn}
}

// pageThrough asks for every page of a listing with pageSize, checking
// each response's size, and returns the ids in order and the number of
// pages.
func pageThrough[M interface{ GetId() string }, R proto.Message](t *testing.T, pageSize int32,
	call func(size int32, token string) (R, error), items func(R) []M, next func(R) string) ([]string, int) {
	t.Helper()
	var ids []string
	token, pages := "", 0
	for {
		resp, err := call(pageSize, token)
		require.NoError(t, err, "page %d", pages+1)
		pages++
		size := proto.Size(resp)
		assert.LessOrEqual(t, size, MaxPageBytes+1024, "page %d: %d bytes", pages, size)
		if pageSize > 0 {
			assert.LessOrEqual(t, len(items(resp)), int(pageSize), "page %d", pages)
		}
		require.NotEmpty(t, items(resp), "page %d holds at least one item", pages)
		for _, m := range items(resp) {
			ids = append(ids, m.GetId())
		}
		if next(resp) == "" {
			return ids, pages
		}
		token = next(resp)
		require.Less(t, pages, 10_000, "the pages end")
	}
}

// TestTaskListOfWideTextSpansPages replays the attack through the real
// API, over a socket, with a client's default 4 MiB limit. Then: 17 tasks
// whose descriptions were 65,536 '𝕏' (within the limit counted in
// characters, 262,144 bytes each) made a 4.66 MB listing that every
// ListTasks, and so `task list`, failed to receive. Now such a
// description (and such a title) is refused naming the field and the
// limit in bytes; tasks at the limit in bytes, enough of them to pass 4
// MiB together, are listed in full across pages each under MaxPageBytes;
// a request that does not page is refused with a message that says how,
// not left to fail in the transport.
func TestTaskListOfWideTextSpansPages(t *testing.T) {
	t.Parallel()
	api := serveOnSocket(t)
	ctx := context.Background()
	ws, err := api.svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	repo, err := api.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	tasks := pb.NewTaskServiceClient(api.conn)

	_, err = tasks.CreateTask(ctx, &pb.CreateTaskRequest{WorkspaceId: ws.ID, RepositoryId: repo.ID, Title: "wide",
		Description: strings.Repeat(wide, 65536)})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Equal(t, "invalid description: is 262144 bytes long; the limit is 65536 bytes", status.Convert(err).Message())
	_, err = tasks.CreateTask(ctx, &pb.CreateTaskRequest{WorkspaceId: ws.ID, RepositoryId: repo.ID, Title: strings.Repeat(wide, 256)})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Equal(t, "invalid title: is 1024 bytes long; the limit is 256 bytes", status.Convert(err).Message())

	title := strings.Repeat(wide, textlimit.Title.Max/len(wide))
	description := strings.Repeat(wide, textlimit.Text.Max/len(wide))
	n := grpcDefaultMax/(len(title)+len(description)) + 2 // together past 4 MiB
	var want []string
	for range n {
		resp, err := tasks.CreateTask(ctx, &pb.CreateTaskRequest{WorkspaceId: ws.ID, RepositoryId: repo.ID, Title: title, Description: description})
		require.NoError(t, err)
		want = append(want, resp.GetTask().GetId())
	}

	for _, parent := range []string{ws.ID, model.Every} {
		got, pages := pageThrough(t, MaxPageSize, func(size int32, token string) (*pb.ListTasksResponse, error) {
			return tasks.ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: parent, PageSize: size, PageToken: token})
		}, (*pb.ListTasksResponse).GetTasks, (*pb.ListTasksResponse).GetNextPageToken)
		assert.Equal(t, want, got, "%s: every task, once, oldest first", parent)
		assert.GreaterOrEqual(t, pages, 3, "%s: %d tasks of %d bytes take 3 pages of at most %d bytes", parent, n, len(title)+len(description), MaxPageBytes)
		if parent == ws.ID {
			testutil.Figure(t, "limit: listing pages", "%d tasks of %d bytes of 4-byte characters (%.2f MB in all) listed in %d pages of at most %d bytes",
				n, len(title)+len(description), float64(n*(len(title)+len(description)))/1e6, pages, MaxPageBytes)
		}
	}
	got, pages := pageThrough(t, 7, func(size int32, token string) (*pb.ListTasksResponse, error) {
		return tasks.ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: ws.ID, PageSize: size, PageToken: token})
	}, (*pb.ListTasksResponse).GetTasks, (*pb.ListTasksResponse).GetNextPageToken)
	assert.Equal(t, want, got, "pages of 7")
	assert.Equal(t, (n+6)/7, pages)

	_, err = tasks.ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: ws.ID})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(),
		fmt.Sprintf("the tasks listing is more than %d bytes, more than one response carries; ask for it by pages (page_size and page_token", MaxPageBytes))

	first, err := tasks.ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: ws.ID, PageSize: 2})
	require.NoError(t, err)
	for _, req := range []*pb.ListTasksRequest{
		{WorkspaceId: model.Every, PageSize: 2, PageToken: first.GetNextPageToken()}, // another parent's
		{WorkspaceId: ws.ID, PageSize: 2, PageToken: "bm90IGEgdG9rZW4"},
		{WorkspaceId: ws.ID, PageSize: -1},
	} {
		_, err := tasks.ListTasks(ctx, req)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", req)
	}
	_, err = pb.NewRepositoryServiceClient(api.conn).ListRepositories(ctx,
		&pb.ListRepositoriesRequest{WorkspaceId: ws.ID, PageSize: 2, PageToken: first.GetNextPageToken()})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "a token of another listing")
	assert.Contains(t, status.Convert(err).Message(), "invalid page_token: is not a page token of this repositories listing")
}

// TestEveryListingWithFreeTextPagesByBytes: the other listings that carry
// free text page the same way, through the real API: repositories with
// paths and clone URLs at their limits, sessions with agent arguments at
// theirs (65,536 bytes in all, of 4-byte characters), workspaces by
// count; each in full, in order, in pages under MaxPageBytes.
func TestEveryListingWithFreeTextPagesByBytes(t *testing.T) {
	t.Parallel()
	api := serveOnSocket(t)
	ctx := context.Background()
	var workspaceIDs []string
	for i := range 5 {
		ws, err := api.svc.CreateWorkspace(ctx, fmt.Sprintf("%s-%d", strings.Repeat(wide, (textlimit.Name.Max-2)/len(wide)), i))
		require.NoError(t, err)
		workspaceIDs = append(workspaceIDs, ws.ID)
	}
	ws := workspaceIDs[0]
	path := strings.Repeat(wide, (textlimit.Path.Max-8)/len(wide))
	url := "file:///" + strings.Repeat(wide, (textlimit.URL.Max-8)/len(wide))
	perRepo := len(path) + len(url)
	var repoIDs []string
	for i := range grpcDefaultMax/perRepo + 2 {
		r, err := api.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws, Provider: "local",
			Path: fmt.Sprintf("/%03d%s", i, path), RemoteURL: url})
		require.NoError(t, err)
		repoIDs = append(repoIDs, r.ID)
	}
	task, err := api.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws, Title: "t", RepositoryID: repoIDs[0]})
	require.NoError(t, err)
	quarter := strings.Repeat(wide, textlimit.Text.Max/4/len(wide))
	sessions := pb.NewSessionServiceClient(api.conn)
	var sessionIDs []string
	for range grpcDefaultMax/textlimit.Text.Max + 2 {
		resp, err := sessions.LaunchSession(ctx, &pb.LaunchSessionRequest{TaskId: task.ID, Executor: "local",
			Agent: &pb.AgentSpec{Argv: []string{quarter, quarter, quarter, quarter}}})
		require.NoError(t, err)
		sessionIDs = append(sessionIDs, resp.GetSession().GetId())
	}

	repos := pb.NewRepositoryServiceClient(api.conn)
	got, pages := pageThrough(t, MaxPageSize, func(size int32, token string) (*pb.ListRepositoriesResponse, error) {
		return repos.ListRepositories(ctx, &pb.ListRepositoriesRequest{WorkspaceId: ws, PageSize: size, PageToken: token})
	}, (*pb.ListRepositoriesResponse).GetRepositories, (*pb.ListRepositoriesResponse).GetNextPageToken)
	assert.Equal(t, repoIDs, got, "every repository")
	assert.GreaterOrEqual(t, pages, 3)

	got, pages = pageThrough(t, MaxPageSize, func(size int32, token string) (*pb.ListSessionsResponse, error) {
		return sessions.ListSessions(ctx, &pb.ListSessionsRequest{TaskId: model.Every, PageSize: size, PageToken: token})
	}, (*pb.ListSessionsResponse).GetSessions, (*pb.ListSessionsResponse).GetNextPageToken)
	assert.Equal(t, sessionIDs, got, "every session")
	assert.GreaterOrEqual(t, pages, 3)

	workspaces := pb.NewWorkspaceServiceClient(api.conn)
	got, pages = pageThrough(t, 2, func(size int32, token string) (*pb.ListWorkspacesResponse, error) {
		return workspaces.ListWorkspaces(ctx, &pb.ListWorkspacesRequest{PageSize: size, PageToken: token})
	}, (*pb.ListWorkspacesResponse).GetWorkspaces, (*pb.ListWorkspacesResponse).GetNextPageToken)
	assert.Equal(t, workspaceIDs, got, "every workspace")
	assert.Equal(t, 3, pages)
	all, err := workspaces.ListWorkspaces(ctx, &pb.ListWorkspacesRequest{})
	require.NoError(t, err, "a listing that fits one response is answered whole without paging, as before pages")
	assert.Len(t, all.GetWorkspaces(), 5)
	assert.Empty(t, all.GetNextPageToken())
}

// TestTheLargestRecordsFitAPage derives the page bound from the record
// bounds: the largest task, repository and workspace the limits allow
// (every text at its limit in bytes, a task with store.MaxTaskRepositories
// such repositories) each fit in MaxPageBytes, so any page of them is
// under gRPC's 4 MiB; the largest session (with what agentctls report,
// store.MaxMessageBytes of status and a checkout per repository) fits
// MaxItemBytes, alone on a page if it must.
func TestTheLargestRecordsFitAPage(t *testing.T) {
	t.Parallel()
	text := func(k textlimit.Kind) string { return strings.Repeat(wide, k.Max/len(wide)) }
	id := func(prefix string) string { return prefix + "_" + strings.Repeat("x", 10) }
	now := time.Now()
	repo := model.Repository{ID: id("repo"), WorkspaceID: id("ws"), Provider: text(textlimit.Name), Host: strings.Repeat("h", textlimit.Host.Max),
		Path: text(textlimit.Path), RemoteURL: text(textlimit.URL), CreatedAt: now}
	task := model.Task{ID: id("task"), WorkspaceID: id("ws"), Title: text(textlimit.Title), Description: text(textlimit.Text),
		CreatedAt: now, UpdatedAt: now}
	for i := range store.MaxTaskRepositories {
		task.Repositories = append(task.Repositories, model.TaskRepository{Repository: repo, Position: i, Primary: i == 0})
	}
	conn := model.Connection{Provider: "gitlab", APIBaseURL: text(textlimit.URL), Username: text(textlimit.Title),
		Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: text(textlimit.Path)}, ValidatedAt: now}
	ws := model.Workspace{ID: id("ws"), Name: text(textlimit.Name), Connections: []model.Connection{conn, conn}, CreatedAt: now}
	sess := model.Session{ID: id("sess"), TaskID: id("task"), Executor: "kubernetes", Mode: model.ModeTask, State: model.SessionRunning,
		AgentArgv: []string{text(textlimit.Text)}, AgentWorkDir: text(textlimit.Path), AgentProfile: "claude-code",
		AgentModel: text(textlimit.Title), AgentCredentialEnv: strings.Repeat("K", textlimit.Title.Max), Image: text(textlimit.Path),
		StatusMessage: strings.Repeat(wide, store.MaxMessageBytes/len(wide)), Owner: strings.Repeat("o", textlimit.Path.Max),
		CreatedAt: now, UpdatedAt: now}
	for range 64 { // profiles.MaxPassEnv
		sess.AgentPassEnv = append(sess.AgentPassEnv, strings.Repeat("E", textlimit.Title.Max))
	}
	sess.Checkouts.Dir = text(textlimit.Path)
	for range store.MaxTaskRepositories {
		key := repo.Host + "/" + repo.Path
		sess.Checkouts.Repositories = append(sess.Checkouts.Repositories, model.Checkout{RepositoryID: id("repo"), Key: key,
			Path: sess.Checkouts.Dir + "/" + key, Branch: "toolscope/" + id("task") + "/" + id("sess"), Error: text(textlimit.Kind{Max: 4 << 10}),
			Delivered: &model.Delivered{Commit: strings.Repeat("c", 64), At: now},
			Work:      &model.Work{Head: strings.Repeat("c", 64), Error: text(textlimit.Kind{Max: 4 << 10}), At: now}})
	}
	for _, c := range []struct {
		what  string
		m     proto.Message
		bound int
	}{
		{"repository", toRepository(repo), MaxPageBytes},
		{"task", toTask(task), MaxPageBytes},
		{"workspace", toWorkspace(ws), MaxPageBytes},
		{"session", toSession(sess), MaxItemBytes},
	} {
		size := proto.Size(c.m)
		assert.LessOrEqual(t, size, c.bound, "the largest %s: %d bytes", c.what, size)
		testutil.Figure(t, "limit: largest "+c.what, "%d bytes encoded (bound %d)", size, c.bound)
	}
}

// TestListingsOfTextStoredBeforeTheBoundStillPage replays the attack's
// very records: 17 tasks with descriptions of 65,536 '𝕏' (262,144 bytes
// each, 4.46 MB together), as a database written before the bound in
// bytes holds them (straight to the store: the API refuses them now).
// `task list` could not read that workspace's tasks at all; now they are
// listed in full, in pages under MaxPageBytes, whatever text is stored. A
// record too large for any response (4 MiB of description, possible only
// in the store) is refused by name and size, not sent to fail in the
// transport.
func TestListingsOfTextStoredBeforeTheBoundStillPage(t *testing.T) {
	t.Parallel()
	api := serveOnSocket(t)
	ctx := context.Background()
	ws, err := api.svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	repo, err := api.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	attack := strings.Repeat(wide, 65536)
	var want []string
	for range 17 {
		task, err := api.st.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: "t", Description: attack}, repo.ID)
		require.NoError(t, err)
		want = append(want, task.ID)
	}
	require.Greater(t, 17*len(attack), grpcDefaultMax, "the listing is past 4 MiB")
	tasks := pb.NewTaskServiceClient(api.conn)
	got, pages := pageThrough(t, MaxPageSize, func(size int32, token string) (*pb.ListTasksResponse, error) {
		return tasks.ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: ws.ID, PageSize: size, PageToken: token})
	}, (*pb.ListTasksResponse).GetTasks, (*pb.ListTasksResponse).GetNextPageToken)
	assert.Equal(t, want, got)
	assert.Equal(t, 3, pages, "17 tasks of 262 KB: 7, 7 and 3 in pages of at most %d bytes", MaxPageBytes)

	huge, err := api.st.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: "huge", Description: strings.Repeat("d", MaxItemBytes)}, repo.ID)
	require.NoError(t, err)
	var token string
	for range pages { // the pages before it are served as before
		resp, err := tasks.ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: ws.ID, PageSize: MaxPageSize, PageToken: token})
		require.NoError(t, err)
		token = resp.GetNextPageToken()
	}
	require.NotEmpty(t, token)
	_, err = tasks.ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: ws.ID, PageSize: MaxPageSize, PageToken: token})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), fmt.Sprintf("task %s is %d bytes encoded, more than a response carries (%d bytes)",
		huge.ID, proto.Size(toTaskOf(t, api, huge.ID))+5, MaxItemBytes))
}

func toTaskOf(t *testing.T, api socketAPI, id string) *pb.Task {
	t.Helper()
	task, err := api.svc.GetTask(context.Background(), id)
	require.NoError(t, err)
	return toTask(task)
}

// TestPageSizeIsBounded: a page holds at most MaxPageSize items, however
// many are asked for; the next page holds the rest.
func TestPageSizeIsBounded(t *testing.T) {
	t.Parallel()
	api := serveOnSocket(t)
	ctx := context.Background()
	for i := range MaxPageSize + 1 {
		_, err := api.svc.CreateWorkspace(ctx, fmt.Sprintf("ws-%04d", i))
		require.NoError(t, err)
	}
	workspaces := pb.NewWorkspaceServiceClient(api.conn)
	first, err := workspaces.ListWorkspaces(ctx, &pb.ListWorkspacesRequest{PageSize: 5 * MaxPageSize})
	require.NoError(t, err)
	assert.Len(t, first.GetWorkspaces(), MaxPageSize)
	require.NotEmpty(t, first.GetNextPageToken())
	rest, err := workspaces.ListWorkspaces(ctx, &pb.ListWorkspacesRequest{PageSize: 5 * MaxPageSize, PageToken: first.GetNextPageToken()})
	require.NoError(t, err)
	require.Len(t, rest.GetWorkspaces(), 1)
	assert.Equal(t, fmt.Sprintf("ws-%04d", MaxPageSize), rest.GetWorkspaces()[0].GetName())
	assert.Empty(t, rest.GetNextPageToken())
	all, err := workspaces.ListWorkspaces(ctx, &pb.ListWorkspacesRequest{})
	require.NoError(t, err)
	assert.Len(t, all.GetWorkspaces(), MaxPageSize+1, "without page_size: the whole listing, as it fits one response")
}

// TestTheContractStatesThePageBounds: services.proto tells clients the
// page bounds these constants are, so the two cannot drift apart.
func TestTheContractStatesThePageBounds(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "proto", "toolscope", "orchestrator", "v1", "services.proto"))
	require.NoError(t, err)
	text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", " ")), " ")
	for _, want := range []string{
		fmt.Sprintf("a page ends at page_size items (at most %d; more asks for %d) or before its items would pass %d MiB encoded", MaxPageSize, MaxPageSize, MaxPageBytes>>20),
		fmt.Sprintf("refused with RESOURCE_EXHAUSTED if that is more than %d MiB", MaxPageBytes>>20),
	} {
		assert.Equal(t, 4, strings.Count(text, want), "services.proto states, for each paged listing: %s", want)
	}
	assert.Equal(t, 0, MaxPageBytes%(1<<20), "stated in MiB")
}
