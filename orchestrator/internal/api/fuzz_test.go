package api

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// fuzzRPC is one RPC of the public API as FuzzRequests drives it: a
// request of its input type goes through the real handler (the
// protobuf → domain conversion, the service, a real SQLite store) and
// comes back as the responses the handler sent, or an error.
type fuzzRPC struct {
	method string // full name, for example toolscope.orchestrator.v1.TaskService.AddSources
	req    func() proto.Message
	call   func(ctx context.Context, e *fuzzEnv, req proto.Message) ([]proto.Message, error)
}

func unary[Req, Res proto.Message](method string, h func(*fuzzEnv) func(context.Context, Req) (Res, error)) fuzzRPC {
	return fuzzRPC{
		method: method,
		req:    func() proto.Message { var r Req; return r.ProtoReflect().New().Interface() },
		call: func(ctx context.Context, e *fuzzEnv, req proto.Message) ([]proto.Message, error) {
			res, err := h(e)(ctx, req.(Req))
			if err != nil {
				return nil, err
			}
			return []proto.Message{res}, nil
		},
	}
}

// fuzzRPCs lists every RPC of services.proto and auth.proto; a test checks it against the
// file descriptor. The order picks the RPC from the fuzzed kind, so new
// RPCs go at the end to keep the committed corpus meaningful.
var fuzzRPCs = []fuzzRPC{
	unary("toolscope.orchestrator.v1.WorkspaceService.CreateWorkspace", func(e *fuzzEnv) func(context.Context, *pb.CreateWorkspaceRequest) (*pb.CreateWorkspaceResponse, error) {
		return e.workspaces.CreateWorkspace
	}),
	unary("toolscope.orchestrator.v1.WorkspaceService.GetWorkspace", func(e *fuzzEnv) func(context.Context, *pb.GetWorkspaceRequest) (*pb.GetWorkspaceResponse, error) {
		return e.workspaces.GetWorkspace
	}),
	unary("toolscope.orchestrator.v1.WorkspaceService.ListWorkspaces", func(e *fuzzEnv) func(context.Context, *pb.ListWorkspacesRequest) (*pb.ListWorkspacesResponse, error) {
		return e.workspaces.ListWorkspaces
	}),
	unary("toolscope.orchestrator.v1.WorkspaceService.SetConnection", func(e *fuzzEnv) func(context.Context, *pb.SetConnectionRequest) (*pb.SetConnectionResponse, error) {
		return e.workspaces.SetConnection
	}),
	unary("toolscope.orchestrator.v1.WorkspaceService.RemoveConnection", func(e *fuzzEnv) func(context.Context, *pb.RemoveConnectionRequest) (*pb.RemoveConnectionResponse, error) {
		return e.workspaces.RemoveConnection
	}),
	unary("toolscope.orchestrator.v1.RepositoryService.CreateRepository", func(e *fuzzEnv) func(context.Context, *pb.CreateRepositoryRequest) (*pb.CreateRepositoryResponse, error) {
		return e.repositories.CreateRepository
	}),
	unary("toolscope.orchestrator.v1.RepositoryService.GetRepository", func(e *fuzzEnv) func(context.Context, *pb.GetRepositoryRequest) (*pb.GetRepositoryResponse, error) {
		return e.repositories.GetRepository
	}),
	unary("toolscope.orchestrator.v1.RepositoryService.ListRepositories", func(e *fuzzEnv) func(context.Context, *pb.ListRepositoriesRequest) (*pb.ListRepositoriesResponse, error) {
		return e.repositories.ListRepositories
	}),
	unary("toolscope.orchestrator.v1.TaskService.CreateTask", func(e *fuzzEnv) func(context.Context, *pb.CreateTaskRequest) (*pb.CreateTaskResponse, error) {
		return e.tasks.CreateTask
	}),
	unary("toolscope.orchestrator.v1.TaskService.GetTask", func(e *fuzzEnv) func(context.Context, *pb.GetTaskRequest) (*pb.GetTaskResponse, error) {
		return e.tasks.GetTask
	}),
	unary("toolscope.orchestrator.v1.TaskService.ListTasks", func(e *fuzzEnv) func(context.Context, *pb.ListTasksRequest) (*pb.ListTasksResponse, error) {
		return e.tasks.ListTasks
	}),
	unary("toolscope.orchestrator.v1.TaskService.AddSources", func(e *fuzzEnv) func(context.Context, *pb.AddSourcesRequest) (*pb.AddSourcesResponse, error) {
		return e.tasks.AddSources
	}),
	unary("toolscope.orchestrator.v1.SessionService.LaunchSession", func(e *fuzzEnv) func(context.Context, *pb.LaunchSessionRequest) (*pb.LaunchSessionResponse, error) {
		return e.sessions.LaunchSession
	}),
	{
		method: "toolscope.orchestrator.v1.SessionService.StartSession",
		req:    func() proto.Message { return &pb.StartSessionRequest{} },
		call: func(ctx context.Context, e *fuzzEnv, req proto.Message) ([]proto.Message, error) {
			stream := &fuzzStream[pb.StartSessionResponse]{ctx: ctx, limit: -1}
			err := e.sessions.StartSession(req.(*pb.StartSessionRequest), stream)
			return stream.sent, err
		},
	},
	unary("toolscope.orchestrator.v1.SessionService.ResumeSession", func(e *fuzzEnv) func(context.Context, *pb.ResumeSessionRequest) (*pb.ResumeSessionResponse, error) {
		return e.sessions.ResumeSession
	}),
	unary("toolscope.orchestrator.v1.SessionService.StopSession", func(e *fuzzEnv) func(context.Context, *pb.StopSessionRequest) (*pb.StopSessionResponse, error) {
		return e.sessions.StopSession
	}),
	unary("toolscope.orchestrator.v1.SessionService.CleanSession", func(e *fuzzEnv) func(context.Context, *pb.CleanSessionRequest) (*pb.CleanSessionResponse, error) {
		return e.sessions.CleanSession
	}),
	unary("toolscope.orchestrator.v1.SessionService.GetSession", func(e *fuzzEnv) func(context.Context, *pb.GetSessionRequest) (*pb.GetSessionResponse, error) {
		return e.sessions.GetSession
	}),
	unary("toolscope.orchestrator.v1.SessionService.ListSessions", func(e *fuzzEnv) func(context.Context, *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
		return e.sessions.ListSessions
	}),
	unary("toolscope.orchestrator.v1.SessionService.GetSessionMCP", func(e *fuzzEnv) func(context.Context, *pb.GetSessionMCPRequest) (*pb.GetSessionMCPResponse, error) {
		return e.sessions.GetSessionMCP
	}),
	unary("toolscope.orchestrator.v1.SessionService.AttachSession", func(e *fuzzEnv) func(context.Context, *pb.AttachSessionRequest) (*pb.AttachSessionResponse, error) {
		return e.sessions.AttachSession
	}),
	{
		// A watch never ends on its own: the stream stops it once the
		// stored backlog (counted beforehand; nothing else writes while
		// the fuzzer runs) has been sent. With no backlog to send, the
		// watch runs with a cancelled context: the request is converted
		// and validated, and the store read ends it with Canceled. A
		// request the store refuses is refused by the watch too, before
		// it waits.
		method: "toolscope.orchestrator.v1.EventService.WatchTaskEvents",
		req:    func() proto.Message { return &pb.WatchTaskEventsRequest{} },
		call: func(ctx context.Context, e *fuzzEnv, req proto.Message) ([]proto.Message, error) {
			r := req.(*pb.WatchTaskEventsRequest)
			backlog, err := e.st.Events(ctx, r.GetTaskId(), r.GetAfterSequence(), 1<<20)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if err == nil && len(backlog) == 0 {
				cancel()
			}
			stream := &fuzzStream[pb.WatchTaskEventsResponse]{ctx: ctx, limit: len(backlog)}
			err = e.events.WatchTaskEvents(r, stream)
			if errors.Is(err, errBacklogSent) {
				err = nil
			}
			if err == nil && len(stream.sent) != len(backlog) {
				return stream.sent, errors.New("the watch sent a different backlog than the store holds")
			}
			return stream.sent, err
		},
	},
	unary("toolscope.orchestrator.v1.CatalogService.CreateToolProvider", func(e *fuzzEnv) func(context.Context, *pb.CreateToolProviderRequest) (*pb.CreateToolProviderResponse, error) {
		return e.catalog.CreateToolProvider
	}),
	unary("toolscope.orchestrator.v1.CatalogService.UpdateToolProvider", func(e *fuzzEnv) func(context.Context, *pb.UpdateToolProviderRequest) (*pb.UpdateToolProviderResponse, error) {
		return e.catalog.UpdateToolProvider
	}),
	unary("toolscope.orchestrator.v1.CatalogService.GetToolProvider", func(e *fuzzEnv) func(context.Context, *pb.GetToolProviderRequest) (*pb.GetToolProviderResponse, error) {
		return e.catalog.GetToolProvider
	}),
	unary("toolscope.orchestrator.v1.CatalogService.ListToolProviders", func(e *fuzzEnv) func(context.Context, *pb.ListToolProvidersRequest) (*pb.ListToolProvidersResponse, error) {
		return e.catalog.ListToolProviders
	}),
	unary("toolscope.orchestrator.v1.CatalogService.TestToolProvider", func(e *fuzzEnv) func(context.Context, *pb.TestToolProviderRequest) (*pb.TestToolProviderResponse, error) {
		return e.catalog.TestToolProvider
	}),
	unary("toolscope.orchestrator.v1.CatalogService.RefreshToolProvider", func(e *fuzzEnv) func(context.Context, *pb.RefreshToolProviderRequest) (*pb.RefreshToolProviderResponse, error) {
		return e.catalog.RefreshToolProvider
	}),
	unary("toolscope.orchestrator.v1.CatalogService.SetToolProviderEnabled", func(e *fuzzEnv) func(context.Context, *pb.SetToolProviderEnabledRequest) (*pb.SetToolProviderEnabledResponse, error) {
		return e.catalog.SetToolProviderEnabled
	}),
	unary("toolscope.orchestrator.v1.CatalogService.ListCatalogTools", func(e *fuzzEnv) func(context.Context, *pb.ListCatalogToolsRequest) (*pb.ListCatalogToolsResponse, error) {
		return e.catalog.ListCatalogTools
	}),
	unary("toolscope.orchestrator.v1.CatalogService.GetCatalogTool", func(e *fuzzEnv) func(context.Context, *pb.GetCatalogToolRequest) (*pb.GetCatalogToolResponse, error) {
		return e.catalog.GetCatalogTool
	}),
	unary("toolscope.orchestrator.v1.CatalogService.SetCatalogToolEnabled", func(e *fuzzEnv) func(context.Context, *pb.SetCatalogToolEnabledRequest) (*pb.SetCatalogToolEnabledResponse, error) {
		return e.catalog.SetCatalogToolEnabled
	}),
	unary("toolscope.orchestrator.v1.CatalogService.AssignCatalogTool", func(e *fuzzEnv) func(context.Context, *pb.AssignCatalogToolRequest) (*pb.AssignCatalogToolResponse, error) {
		return e.catalog.AssignCatalogTool
	}),
	unary("toolscope.orchestrator.v1.SourcePolicyService.SetAgentSourcePolicy", func(e *fuzzEnv) func(context.Context, *pb.SetAgentSourcePolicyRequest) (*pb.SetAgentSourcePolicyResponse, error) {
		return e.sources.SetAgentSourcePolicy
	}),
	unary("toolscope.orchestrator.v1.SourcePolicyService.ListSourceRequests", func(e *fuzzEnv) func(context.Context, *pb.ListSourceRequestsRequest) (*pb.ListSourceRequestsResponse, error) {
		return e.sources.ListSourceRequests
	}),
	unary("toolscope.orchestrator.v1.SourcePolicyService.GetSourceRequest", func(e *fuzzEnv) func(context.Context, *pb.GetSourceRequestRequest) (*pb.GetSourceRequestResponse, error) {
		return e.sources.GetSourceRequest
	}),
	unary("toolscope.orchestrator.v1.SourcePolicyService.ApproveSourceRequest", func(e *fuzzEnv) func(context.Context, *pb.ApproveSourceRequestRequest) (*pb.ApproveSourceRequestResponse, error) {
		return e.sources.ApproveSourceRequest
	}),
	unary("toolscope.orchestrator.v1.SourcePolicyService.RejectSourceRequest", func(e *fuzzEnv) func(context.Context, *pb.RejectSourceRequestRequest) (*pb.RejectSourceRequestResponse, error) {
		return e.sources.RejectSourceRequest
	}),
	unary("toolscope.orchestrator.v1.AuthService.CreateAPIToken", func(e *fuzzEnv) func(context.Context, *pb.CreateAPITokenRequest) (*pb.CreateAPITokenResponse, error) {
		return e.auth.CreateAPIToken
	}),
	unary("toolscope.orchestrator.v1.AuthService.ListAPITokens", func(e *fuzzEnv) func(context.Context, *pb.ListAPITokensRequest) (*pb.ListAPITokensResponse, error) {
		return e.auth.ListAPITokens
	}),
	unary("toolscope.orchestrator.v1.AuthService.RevokeAPIToken", func(e *fuzzEnv) func(context.Context, *pb.RevokeAPITokenRequest) (*pb.RevokeAPITokenResponse, error) {
		return e.auth.RevokeAPIToken
	}),
	unary("toolscope.orchestrator.v1.AuthService.WhoAmI", func(e *fuzzEnv) func(context.Context, *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
		return e.auth.WhoAmI
	}),
	unary("toolscope.orchestrator.v1.AuthService.RevokeCertificate", func(e *fuzzEnv) func(context.Context, *pb.RevokeCertificateRequest) (*pb.RevokeCertificateResponse, error) {
		return e.auth.RevokeCertificate
	}),
	unary("toolscope.orchestrator.v1.AuthService.ListRevokedCertificates", func(e *fuzzEnv) func(context.Context, *pb.ListRevokedCertificatesRequest) (*pb.ListRevokedCertificatesResponse, error) {
		return e.auth.ListRevokedCertificates
	}),
	{
		method: "toolscope.orchestrator.v1.SessionService.ReadSessionLog",
		req:    func() proto.Message { return &pb.ReadSessionLogRequest{} },
		call: func(ctx context.Context, e *fuzzEnv, req proto.Message) ([]proto.Message, error) {
			stream := &fuzzStream[pb.ReadSessionLogResponse]{ctx: ctx, limit: -1}
			err := e.sessions.ReadSessionLog(req.(*pb.ReadSessionLogRequest), stream)
			return stream.sent, err
		},
	},
	unary("toolscope.orchestrator.v1.CatalogService.CreateMcpServer", func(e *fuzzEnv) func(context.Context, *pb.CreateMcpServerRequest) (*pb.CreateMcpServerResponse, error) {
		return e.catalog.CreateMcpServer
	}),
	unary("toolscope.orchestrator.v1.CatalogService.UpdateMcpServer", func(e *fuzzEnv) func(context.Context, *pb.UpdateMcpServerRequest) (*pb.UpdateMcpServerResponse, error) {
		return e.catalog.UpdateMcpServer
	}),
	unary("toolscope.orchestrator.v1.CatalogService.GetMcpServer", func(e *fuzzEnv) func(context.Context, *pb.GetMcpServerRequest) (*pb.GetMcpServerResponse, error) {
		return e.catalog.GetMcpServer
	}),
	unary("toolscope.orchestrator.v1.CatalogService.ListMcpServers", func(e *fuzzEnv) func(context.Context, *pb.ListMcpServersRequest) (*pb.ListMcpServersResponse, error) {
		return e.catalog.ListMcpServers
	}),
	unary("toolscope.orchestrator.v1.CatalogService.TestMcpServer", func(e *fuzzEnv) func(context.Context, *pb.TestMcpServerRequest) (*pb.TestMcpServerResponse, error) {
		return e.catalog.TestMcpServer
	}),
	unary("toolscope.orchestrator.v1.CatalogService.RefreshMcpServer", func(e *fuzzEnv) func(context.Context, *pb.RefreshMcpServerRequest) (*pb.RefreshMcpServerResponse, error) {
		return e.catalog.RefreshMcpServer
	}),
	unary("toolscope.orchestrator.v1.CatalogService.SetMcpServerEnabled", func(e *fuzzEnv) func(context.Context, *pb.SetMcpServerEnabledRequest) (*pb.SetMcpServerEnabledResponse, error) {
		return e.catalog.SetMcpServerEnabled
	}),
}

var errBacklogSent = errors.New("fuzz: backlog sent")

// fuzzStream is the server side of a server stream: it collects what the
// handler sends, and fails the send after limit messages (never if
// limit < 0).
type fuzzStream[T any] struct {
	grpc.ServerStream // nil: the handlers use Context and Send only
	ctx               context.Context
	limit             int
	sent              []proto.Message
}

func (s *fuzzStream[T]) Context() context.Context { return s.ctx }

func (s *fuzzStream[T]) Send(m *T) error {
	s.sent = append(s.sent, any(m).(proto.Message))
	if s.limit >= 0 && len(s.sent) >= s.limit {
		return errBacklogSent
	}
	return nil
}

// fuzzEnv is a real service over a real SQLite store, with fake executor
// backends, seeded with a workspace, its connections, repositories, tasks
// and sessions. Fuzzed requests name those records through placeholders
// (see ids), so they reach past the "not found" checks.
type fuzzEnv struct {
	root  string
	dir   string
	st    *store.Store
	svc   *service.Service
	calls int // since the env was built

	workspaces   *workspaces
	repositories *repositories
	tasks        *tasks
	sessions     *sessions
	events       *eventsServer
	catalog      *catalogServer
	sources      *sourcePolicy
	auth         *authServer

	// ids maps a placeholder such as "@task" to the id of the record it
	// stands for; FuzzRequests substitutes every string field that equals
	// one.
	ids map[string]string
}

// fuzzRebuildEvery bounds the store: the env is rebuilt, empty, after
// this many requests, so lists do not grow for the whole run.
const fuzzRebuildEvery = 500

func newFuzzEnv(tb testing.TB, root string) *fuzzEnv {
	tb.Helper()
	ctx := context.Background()
	e := &fuzzEnv{root: root, ids: map[string]string{}}
	var err error
	e.dir, err = os.MkdirTemp(root, "env")
	require.NoError(tb, err)
	broker := &events.Broker{}
	e.st, err = store.Open(ctx, e.dir, store.Options{OnCommit: broker.Publish})
	require.NoError(tb, err)
	execs := map[string]executors.Executor{}
	for _, name := range service.Executors {
		execs[name] = fake.New(name)
	}
	// No credential resolves, so validating a connection never leaves the
	// process (file references are not validated at all: see FuzzRequests).
	// There is no catalog pool: a fuzzed tool provider is recorded but
	// never run or reached (its discovery fails, and is recorded as such).
	e.svc = service.New(e.st, broker, service.Options{Executors: execs,
		Connections: connections.New(e.st, connections.Options{Credentials: credentials.Resolver{Env: func(string) (string, bool) { return "", false }}})})
	e.workspaces, e.repositories = &workspaces{svc: e.svc}, &repositories{svc: e.svc}
	e.tasks, e.sessions, e.events = &tasks{svc: e.svc}, &sessions{svc: e.svc}, &eventsServer{svc: e.svc}
	e.catalog, e.sources = &catalogServer{svc: e.svc}, &sourcePolicy{svc: e.svc}
	e.auth = &authServer{svc: e.svc}

	ws, err := e.svc.CreateWorkspace(ctx, "acme")
	require.NoError(tb, err)
	e.ids["@ws"] = ws.ID
	for _, c := range []service.ConnectionInput{
		{WorkspaceID: ws.ID, Provider: "github", Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GH_TOKEN"}, SkipValidation: true},
		{WorkspaceID: ws.ID, Provider: "gitlab", APIBaseURL: "https://gitlab.example.com/api/v4",
			Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: "/run/secrets/gitlab"}, SkipValidation: true},
	} {
		_, err := e.svc.SetConnection(ctx, c)
		require.NoError(tb, err)
	}
	for name, in := range map[string]service.RepositoryInput{
		"@repo.github": {Provider: "github", RemoteURL: "https://github.com/acme/api.git"},
		"@repo.gitlab": {Provider: "gitlab", Host: "gitlab.com", Path: "acme/web"},
		"@repo.local":  {Provider: "local", Path: "/src/tools"},
		"@repo.odd":    {Provider: "G\u0130THUB", Path: "/src/look-alike"},
		"@repo.spaced": {Provider: " GitLab\t", Host: "gitlab.example.com", Path: "grp/sub/proj"},
	} {
		in.WorkspaceID = ws.ID
		r, err := e.svc.CreateRepository(ctx, in)
		require.NoError(tb, err, name)
		e.ids[name] = r.ID
	}
	task, err := e.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "fix login", RepositoryID: e.ids["@repo.github"]})
	require.NoError(tb, err)
	e.ids["@task"] = task.ID
	local, err := e.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "tools", RepositoryID: e.ids["@repo.local"]})
	require.NoError(tb, err)
	e.ids["@task.local"] = local.ID
	running, err := e.svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "local"}, nil)
	require.NoError(tb, err)
	e.ids["@session"] = running.ID
	_, err = e.svc.AddSources(ctx, task.ID, []string{e.ids["@repo.gitlab"]})
	require.NoError(tb, err)
	stopped, err := e.svc.LaunchSession(ctx, service.SessionInput{TaskID: local.ID, Executor: "remote", Mode: model.ModePlan,
		AgentArgv: []string{"/usr/bin/agent", "--flag"}}, nil)
	require.NoError(tb, err)
	_, err = e.svc.StopSession(ctx, stopped.ID, false)
	require.NoError(tb, err)
	e.ids["@session.stopped"] = stopped.ID
	// A pending source request: the workspace holds its agents' batches.
	_, err = e.svc.SetSourcePolicy(ctx, ws.ID, model.SourcePolicyApprove)
	require.NoError(tb, err)
	req, err := e.svc.AgentAddSources(ctx, stopped.ID, local.ID, []string{e.ids["@repo.spaced"]})
	require.NoError(tb, err)
	e.ids["@request"] = req.Request.ID

	// A provider with a catalog: its tools are applied as a discovery
	// would, straight to the store.
	prov, _, err := e.svc.CreateMCPServer(ctx, model.MCPServer{Name: "docs",
		HTTP: &model.HTTPTransport{URL: "http://127.0.0.1:9/mcp", Headers: []model.HeaderReference{{Name: "Authorization", Prefix: "Bearer ",
			Value: model.CredentialRef{Kind: model.CredentialEnv, Ref: "DOCS_TOKEN"}}}}})
	require.NoError(tb, err)
	e.ids["@provider"] = prov.ID
	_, err = e.st.ApplyDiscovery(ctx, prov.ID, []model.DiscoveredTool{
		{Name: "search", Description: "find", InputSchema: []byte(`{"type":"object"}`), SchemaHash: "h1"},
		{Name: "fetch.v2", Description: "fetch", InputSchema: []byte(`{"type":"object"}`), SchemaHash: "h2", ReadOnly: true},
	}, time.Now())
	require.NoError(tb, err)
	e.ids["@tool"] = "docs__search"
	return e
}

func (e *fuzzEnv) close() {
	e.svc.Close()
	_ = e.st.Close()
	_ = os.RemoveAll(e.dir)
}

// substitute replaces, in every string field of m at any depth, a value
// that is a placeholder with the id it stands for.
func substitute(m protoreflect.Message, ids map[string]string) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			l := v.List()
			for i := range l.Len() {
				if id, ok := ids[l.Get(i).String()]; ok {
					l.Set(i, protoreflect.ValueOfString(id))
				}
			}
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				substitute(l.Get(i).Message(), ids)
			}
		case fd.Kind() == protoreflect.StringKind:
			if id, ok := ids[v.String()]; ok {
				m.Set(fd, protoreflect.ValueOfString(id))
			}
		case fd.Message() != nil:
			substitute(v.Message(), ids)
		}
		return true
	})
}

// visit calls fn on m and on every message inside it.
func visit(m protoreflect.Message, fn func(proto.Message)) {
	fn(m.Interface())
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { visit(mv.Message(), fn); return true })
			}
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				visit(v.List().Get(i).Message(), fn)
			}
		case fd.Message() != nil:
			visit(v.Message(), fn)
		}
		return true
	})
}

// allowlisted is an independent statement of the allowlist rule over raw
// values: trim ASCII white space, lower-case ASCII letters, keep github
// and gitlab; the answer is canonical (github before gitlab).
func allowlisted(raws ...string) []string {
	keep := map[string]bool{}
	for _, raw := range raws {
		s := strings.Trim(raw, " \t\n\v\f\r")
		b := []byte(s)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		keep[string(b)] = true
	}
	out := []string{}
	for _, p := range []string{"github", "gitlab"} {
		if keep[p] {
			out = append(out, p)
		}
	}
	return out
}

// checkResponse fails t if a response names a provider outside the
// allowlist, in a non-canonical form, or if a task's set is not the rule
// applied to its repositories; and if it cannot be marshalled.
func checkResponse(t *testing.T, res proto.Message) {
	t.Helper()
	if _, err := proto.Marshal(res); err != nil {
		t.Fatalf("response %T cannot be marshalled: %v", res, err)
	}
	visit(res.ProtoReflect(), func(m proto.Message) {
		switch m := m.(type) {
		case *pb.ProviderSet:
			if got := m.GetProviders(); !slices.Equal(got, allowlisted(got...)) {
				t.Fatalf("provider set %q is not a canonical set of allowlisted providers", got)
			}
		case *pb.Connection:
			if p := m.GetProvider(); p != string(providers.GitHub) && p != string(providers.GitLab) {
				t.Fatalf("connection to provider %q, outside the allowlist", p)
			}
		case *pb.CatalogTool:
			if !exposedName.MatchString(m.GetExposedName()) {
				t.Fatalf("catalog tool %s has exposed name %q, not ^[A-Za-z0-9_-]{1,64}$", m.GetId(), m.GetExposedName())
			}
		case *pb.Task:
			var raws []string
			for _, r := range m.GetRepositories() {
				raws = append(raws, r.GetRepository().GetProvider())
			}
			if got, want := m.GetProviderSet().GetProviders(), allowlisted(raws...); !slices.Equal(got, want) {
				t.Fatalf("task %s has providers %q, but its repositories' providers %q make %q", m.GetId(), got, raws, want)
			}
		}
	})
}

var exposedName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkError fails t unless err is a classified domain error: one the
// gRPC boundary maps to a code other than Internal or Unknown.
func checkError(t *testing.T, method string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if _, isStatus := status.FromError(err); isStatus {
		t.Fatalf("%s: the handler built a status itself (%v); handlers return domain errors", method, err)
	}
	if code := status.Code(grpcerr.ToStatus(err)); code == codes.Internal || code == codes.Unknown {
		t.Fatalf("%s: unclassified error (%s at the boundary): %v", method, code, err)
	}
}

func rpcIndex(tb testing.TB, method string) uint8 {
	for i, r := range fuzzRPCs {
		if strings.HasSuffix(r.method, "."+method) {
			return uint8(i)
		}
	}
	tb.Fatalf("no RPC %s", method)
	return 0
}

// requestSeeds are valid requests of every kind, with placeholders for
// the env's records, and the edge cases around them.
func requestSeeds(tb testing.TB) []testutil.FuzzSeed {
	tb.Helper()
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		require.NoError(tb, err)
		return b
	}
	env := func(ref string) *pb.CredentialRef {
		return &pb.CredentialRef{Source: &pb.CredentialRef_EnvVar{EnvVar: ref}}
	}
	file := func(path string) *pb.CredentialRef {
		return &pb.CredentialRef{Source: &pb.CredentialRef_FilePath{FilePath: path}}
	}
	manyIDs := make([]string, service.MaxBatch+1)
	for i := range manyIDs {
		manyIDs[i] = "repo_" + strings.Repeat("x", i%7)
	}
	huge := strings.Repeat("x", 4096) + "\u00e9"
	seeds := []struct {
		name string
		req  proto.Message
	}{
		{"CreateWorkspace", &pb.CreateWorkspaceRequest{Name: "acme"}},
		{"CreateWorkspace", &pb.CreateWorkspaceRequest{Name: " \t"}},
		{"CreateWorkspace", &pb.CreateWorkspaceRequest{Name: "bad\x07name"}},
		{"CreateWorkspace", &pb.CreateWorkspaceRequest{Name: huge}},
		{"GetWorkspace", &pb.GetWorkspaceRequest{WorkspaceId: "@ws"}},
		{"GetWorkspace", &pb.GetWorkspaceRequest{WorkspaceId: "ws_nope"}},
		{"ListWorkspaces", &pb.ListWorkspacesRequest{}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "github", Credential: env("GH_TOKEN"), SkipValidation: true}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: " GitLab\n", ApiBaseUrl: "https://gitlab.example.com/api/v4/",
			Credential: file("/run/secrets/gitlab")}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "G\u0130THUB", Credential: env("T"), SkipValidation: true}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "github\x00", Credential: env("T"), SkipValidation: true}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "local", Credential: env("T")}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "github", Credential: env("GH_TOKEN")}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "github", ApiBaseUrl: "https://me:pw@ghe.local/api/v3",
			Credential: env("T")}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "gitlab", Credential: env("glpat-secretvalue0123456789")}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "gitlab", Credential: file("token.txt")}},
		{"SetConnection", &pb.SetConnectionRequest{WorkspaceId: "@ws", Provider: "github"}},
		{"RemoveConnection", &pb.RemoveConnectionRequest{WorkspaceId: "@ws", Provider: "GITLAB"}},
		{"RemoveConnection", &pb.RemoveConnectionRequest{WorkspaceId: "@ws", Provider: "gitla\u212a"}},
		{"CreateRepository", &pb.CreateRepositoryRequest{WorkspaceId: "@ws", Provider: "github", RemoteUrl: "git@github.com:acme/new.git"}},
		{"CreateRepository", &pb.CreateRepositoryRequest{WorkspaceId: "@ws", Provider: "gitlab", Host: "GitLab.com", Path: "/grp/sub/proj/"}},
		{"CreateRepository", &pb.CreateRepositoryRequest{WorkspaceId: "@ws", Provider: "local", Path: "/src/x", RemoteUrl: "not a url"}},
		{"CreateRepository", &pb.CreateRepositoryRequest{WorkspaceId: "@ws", Provider: "G\u0130THUB", Path: "/src/odd"}},
		{"CreateRepository", &pb.CreateRepositoryRequest{WorkspaceId: "@ws", Provider: "github", Host: "github.com", Path: "a/b/c"}},
		{"CreateRepository", &pb.CreateRepositoryRequest{WorkspaceId: "@ws", Provider: "github", RemoteUrl: "https://me:pw@github.com/acme/x.git"}},
		{"CreateRepository", &pb.CreateRepositoryRequest{WorkspaceId: "@ws", Provider: "gitlab", Host: "gitlab.com", Path: "grp/" + huge}},
		{"GetRepository", &pb.GetRepositoryRequest{RepositoryId: "@repo.odd"}},
		{"ListRepositories", &pb.ListRepositoriesRequest{WorkspaceId: "@ws"}},
		{"CreateTask", &pb.CreateTaskRequest{WorkspaceId: "@ws", Title: "review", Description: "d", RepositoryId: "@repo.spaced"}},
		{"CreateTask", &pb.CreateTaskRequest{WorkspaceId: "@ws", Title: "odd", RepositoryId: "@repo.odd"}},
		{"CreateTask", &pb.CreateTaskRequest{WorkspaceId: "@ws", Title: "x", RepositoryId: "repo_nope"}},
		{"GetTask", &pb.GetTaskRequest{TaskId: "@task"}},
		{"ListTasks", &pb.ListTasksRequest{WorkspaceId: "@ws"}},
		{"ListTasks", &pb.ListTasksRequest{WorkspaceId: "-", PageSize: 1}},
		{"ListTasks", &pb.ListTasksRequest{WorkspaceId: "@ws", PageSize: -3}},
		{"ListTasks", &pb.ListTasksRequest{WorkspaceId: "@ws", PageSize: 1, PageToken: "eyJsIjoidGFza3MiLCJpIjoieCJ9"}},
		{"ListSessions", &pb.ListSessionsRequest{TaskId: "-", PageSize: 1 << 30, PageToken: "%%%"}},
		{"ListRepositories", &pb.ListRepositoriesRequest{WorkspaceId: "@ws", PageSize: 2}},
		{"ListWorkspaces", &pb.ListWorkspacesRequest{PageSize: 1}},
		{"AddSources", &pb.AddSourcesRequest{TaskId: "@task.local", RepositoryIds: []string{"@repo.spaced", "@repo.odd", "@repo.github"}}},
		{"AddSources", &pb.AddSourcesRequest{TaskId: "@task", RepositoryIds: []string{"@repo.spaced"}}},
		{"AddSources", &pb.AddSourcesRequest{TaskId: "@task", RepositoryIds: []string{"@repo.gitlab"}}},
		{"AddSources", &pb.AddSourcesRequest{TaskId: "@task", RepositoryIds: []string{"@repo.local", "@repo.local"}}},
		{"AddSources", &pb.AddSourcesRequest{TaskId: "@task", RepositoryIds: []string{"@repo.local", " "}}},
		{"AddSources", &pb.AddSourcesRequest{TaskId: "@task", RepositoryIds: manyIDs}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "local"}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "docker", Image: "ubuntu:24.04", Mode: pb.SessionMode_SESSION_MODE_PLAN,
			Agent: &pb.AgentSpec{Profile: "claude-code", Model: "opus", CredentialEnv: "ANTHROPIC_API_KEY"}}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "local", DryRun: true,
			Agent: &pb.AgentSpec{Profile: "codex", Argv: []string{"--full-auto"}}}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "local", DryRun: true, Agent: &pb.AgentSpec{Argv: []string{"/bin/agent", "-v"}}}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "docker"}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "local", Mode: pb.SessionMode(99)}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "local", Agent: &pb.AgentSpec{Argv: []string{"a\x00b"}}}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "kubernetes"}},
		{"LaunchSession", &pb.LaunchSessionRequest{TaskId: "@task", Executor: "local", Agent: &pb.AgentSpec{Profile: "nope"}}},
		{"StartSession", &pb.StartSessionRequest{Launch: &pb.LaunchSessionRequest{TaskId: "@task.local", Executor: "remote",
			Agent: &pb.AgentSpec{Argv: []string{"/bin/agent"}, WorkingDir: "/src"}}}},
		{"StartSession", &pb.StartSessionRequest{}},
		{"ResumeSession", &pb.ResumeSessionRequest{SessionId: "@session.stopped"}},
		{"ResumeSession", &pb.ResumeSessionRequest{SessionId: "@session"}},
		{"StopSession", &pb.StopSessionRequest{SessionId: "@session"}},
		{"CleanSession", &pb.CleanSessionRequest{SessionId: "@session.stopped"}},
		{"CleanSession", &pb.CleanSessionRequest{SessionId: "@session", Discard: true}},
		{"AttachSession", &pb.AttachSessionRequest{TaskId: "@task"}},
		{"AttachSession", &pb.AttachSessionRequest{TaskId: "@task", Mode: pb.SessionMode_SESSION_MODE_PLAN}},
		{"AttachSession", &pb.AttachSessionRequest{TaskId: "@task", Mode: pb.SessionMode(99)}},
		{"AttachSession", &pb.AttachSessionRequest{}},
		{"GetSession", &pb.GetSessionRequest{SessionId: "@session"}},
		{"ListSessions", &pb.ListSessionsRequest{TaskId: "@task"}},
		{"GetSessionMCP", &pb.GetSessionMCPRequest{SessionId: "@session"}},
		{"GetSessionMCP", &pb.GetSessionMCPRequest{SessionId: "@session.stopped"}},
		{"WatchTaskEvents", &pb.WatchTaskEventsRequest{TaskId: "@task"}},
		{"WatchTaskEvents", &pb.WatchTaskEventsRequest{TaskId: "@task", AfterSequence: 2}},
		{"WatchTaskEvents", &pb.WatchTaskEventsRequest{TaskId: "@task", AfterSequence: 1 << 63}},
		{"WatchTaskEvents", &pb.WatchTaskEventsRequest{TaskId: "task_nope"}},
		{"WatchTaskEvents", &pb.WatchTaskEventsRequest{}},
		{"CreateToolProvider", &pb.CreateToolProviderRequest{Provider: &pb.ToolProvider{Name: "kb", Transport: &pb.ToolProvider_Stdio{
			Stdio: &pb.StdioTransport{Command: "/bin/sh", Args: []string{"-c", "exit 0"}, WorkingDir: "/",
				Env: []*pb.EnvReference{{Name: "API_KEY", FromEnv: "KB_API_KEY"}}}}}}},
		{"CreateToolProvider", &pb.CreateToolProviderRequest{Provider: &pb.ToolProvider{Name: "tickets", Transport: &pb.ToolProvider_Http{
			Http: &pb.HttpTransport{Url: "https://tickets.example.com/mcp", Headers: []*pb.HeaderReference{
				{Name: "authorization", Prefix: "Bearer ", Value: env("TICKETS_TOKEN")}, {Name: "X-Tenant", Value: file("/run/secrets/tenant")}}}}}}},
		{"CreateToolProvider", &pb.CreateToolProviderRequest{Provider: &pb.ToolProvider{Name: "docs", Transport: &pb.ToolProvider_Http{
			Http: &pb.HttpTransport{Url: "https://docs.example.com/mcp"}}}}},
		{"CreateToolProvider", &pb.CreateToolProviderRequest{Provider: &pb.ToolProvider{Name: "Bad_Name"}}},
		{"CreateToolProvider", &pb.CreateToolProviderRequest{Provider: &pb.ToolProvider{Name: "kb", Transport: &pb.ToolProvider_Http{
			Http: &pb.HttpTransport{Url: "https://me:pw@kb.example.com/mcp?token=x"}}}}},
		{"CreateToolProvider", &pb.CreateToolProviderRequest{Provider: &pb.ToolProvider{Name: "kb", Transport: &pb.ToolProvider_Http{
			Http: &pb.HttpTransport{Url: "https://kb.example.com/mcp", Headers: []*pb.HeaderReference{{Name: "Authorization",
				Value: env("glpat-secretvalue0123456789")}}}}}}},
		{"CreateToolProvider", &pb.CreateToolProviderRequest{Provider: &pb.ToolProvider{Name: "kb", Transport: &pb.ToolProvider_Stdio{
			Stdio: &pb.StdioTransport{Command: "relative/kb", Args: []string{"--token", "ghp_0123456789abcdefghij"}}}}}},
		{"CreateToolProvider", &pb.CreateToolProviderRequest{}},
		{"UpdateToolProvider", &pb.UpdateToolProviderRequest{Provider: &pb.ToolProvider{Id: "@provider", Transport: &pb.ToolProvider_Http{
			Http: &pb.HttpTransport{Url: "http://127.0.0.1:10/mcp"}}}}},
		{"UpdateToolProvider", &pb.UpdateToolProviderRequest{Provider: &pb.ToolProvider{Id: "@provider", Name: "renamed", Transport: &pb.ToolProvider_Http{
			Http: &pb.HttpTransport{Url: "http://127.0.0.1:10/mcp"}}}}},
		{"UpdateToolProvider", &pb.UpdateToolProviderRequest{}},
		{"GetToolProvider", &pb.GetToolProviderRequest{Provider: "@provider"}},
		{"GetToolProvider", &pb.GetToolProviderRequest{Provider: "docs"}},
		{"GetToolProvider", &pb.GetToolProviderRequest{Provider: "tp_nope"}},
		{"ListToolProviders", &pb.ListToolProvidersRequest{}},
		{"TestToolProvider", &pb.TestToolProviderRequest{Provider: "docs"}},
		{"RefreshToolProvider", &pb.RefreshToolProviderRequest{Provider: "@provider"}},
		{"RefreshToolProvider", &pb.RefreshToolProviderRequest{}},
		{"SetToolProviderEnabled", &pb.SetToolProviderEnabledRequest{Provider: "docs", Enabled: true}},
		{"CreateMcpServer", &pb.CreateMcpServerRequest{Server: &pb.McpServer{Name: "wiki", Transport: &pb.McpServer_Http{
			Http: &pb.HttpTransport{Url: "https://wiki.example/mcp"}}}}},
		{"CreateMcpServer", &pb.CreateMcpServerRequest{Server: &pb.McpServer{Name: "Bad_Name"}}},
		{"UpdateMcpServer", &pb.UpdateMcpServerRequest{Server: &pb.McpServer{Id: "@provider", Transport: &pb.McpServer_Http{
			Http: &pb.HttpTransport{Url: "https://docs.example/v2/mcp"}}}}},
		{"GetMcpServer", &pb.GetMcpServerRequest{Server: "docs"}},
		{"ListMcpServers", &pb.ListMcpServersRequest{}},
		{"TestMcpServer", &pb.TestMcpServerRequest{Server: "docs"}},
		{"RefreshMcpServer", &pb.RefreshMcpServerRequest{Server: "@provider"}},
		{"SetMcpServerEnabled", &pb.SetMcpServerEnabledRequest{Server: "docs", Enabled: true}},
		{"ListCatalogTools", &pb.ListCatalogToolsRequest{Server: "@provider"}},
		{"ListCatalogTools", &pb.ListCatalogToolsRequest{}},
		{"ListCatalogTools", &pb.ListCatalogToolsRequest{Provider: "@provider"}},
		{"ListCatalogTools", &pb.ListCatalogToolsRequest{Provider: "nope"}},
		{"GetCatalogTool", &pb.GetCatalogToolRequest{Tool: "@tool"}},
		{"GetCatalogTool", &pb.GetCatalogToolRequest{Tool: "docs__fetch_v2"}},
		{"SetCatalogToolEnabled", &pb.SetCatalogToolEnabledRequest{Tool: "@tool", Enabled: true}},
		{"SetCatalogToolEnabled", &pb.SetCatalogToolEnabledRequest{Tool: "ct_nope"}},
		{"AssignCatalogTool", &pb.AssignCatalogToolRequest{Tool: "@tool", WorkspaceId: "@ws", Assigned: true}},
		{"AssignCatalogTool", &pb.AssignCatalogToolRequest{Tool: "@tool", WorkspaceId: "@ws"}},
		{"AssignCatalogTool", &pb.AssignCatalogToolRequest{Tool: "@tool", WorkspaceId: "ws_nope", Assigned: true}},
		{"AssignCatalogTool", &pb.AssignCatalogToolRequest{Tool: "@tool"}},
		{"SetAgentSourcePolicy", &pb.SetAgentSourcePolicyRequest{WorkspaceId: "@ws", Policy: pb.AgentSourcePolicy_AGENT_SOURCE_POLICY_DENY}},
		{"SetAgentSourcePolicy", &pb.SetAgentSourcePolicyRequest{WorkspaceId: "@ws", Policy: pb.AgentSourcePolicy_AGENT_SOURCE_POLICY_ALLOW}},
		{"SetAgentSourcePolicy", &pb.SetAgentSourcePolicyRequest{WorkspaceId: "@ws"}},
		{"SetAgentSourcePolicy", &pb.SetAgentSourcePolicyRequest{WorkspaceId: "ws_nope", Policy: pb.AgentSourcePolicy(9)}},
		{"ListSourceRequests", &pb.ListSourceRequestsRequest{}},
		{"ListSourceRequests", &pb.ListSourceRequestsRequest{TaskId: "@task.local", State: pb.SourceRequestState_SOURCE_REQUEST_STATE_PENDING}},
		{"ListSourceRequests", &pb.ListSourceRequestsRequest{WorkspaceId: "ws_nope", State: pb.SourceRequestState(7)}},
		{"GetSourceRequest", &pb.GetSourceRequestRequest{RequestId: "@request"}},
		{"ApproveSourceRequest", &pb.ApproveSourceRequestRequest{RequestId: "@request"}},
		{"ApproveSourceRequest", &pb.ApproveSourceRequestRequest{RequestId: "sreq_nope"}},
		{"RejectSourceRequest", &pb.RejectSourceRequestRequest{RequestId: "@request", Reason: "not this one"}},
		{"RejectSourceRequest", &pb.RejectSourceRequestRequest{RequestId: "@request", Reason: "bad\x00reason"}},
		{"RejectSourceRequest", &pb.RejectSourceRequestRequest{}},
		{"CreateAPIToken", &pb.CreateAPITokenRequest{Name: "ci", Role: pb.Role_ROLE_MEMBER, Ttl: durationpb.New(time.Hour)}},
		{"CreateAPIToken", &pb.CreateAPITokenRequest{Name: "ci", Role: pb.Role(42)}},
		{"CreateAPIToken", &pb.CreateAPITokenRequest{Name: "x", Ttl: &durationpb.Duration{Seconds: -1, Nanos: 5}}},
		{"CreateAPIToken", &pb.CreateAPITokenRequest{Name: "local:0", Role: pb.Role_ROLE_ADMIN}},
		{"ListAPITokens", &pb.ListAPITokensRequest{}},
		{"RevokeAPIToken", &pb.RevokeAPITokenRequest{ApiToken: "tok_nope"}},
		{"RevokeAPIToken", &pb.RevokeAPITokenRequest{}},
		{"WhoAmI", &pb.WhoAmIRequest{}},
	}
	out := []testutil.FuzzSeed{}
	count := map[string]int{}
	for _, s := range seeds {
		count[s.name]++
		out = append(out, testutil.FuzzSeed{Name: s.name + "-" + string(rune('0'+count[s.name])), Args: []any{rpcIndex(tb, s.name), marshal(s.req)}})
	}
	// Bytes that are not a request, and a string field that is not UTF-8.
	out = append(out,
		testutil.FuzzSeed{Name: "garbage", Args: []any{rpcIndex(tb, "GetTask"), []byte{0xff, 0xff, 0xff, 0x0f}}},
		testutil.FuzzSeed{Name: "invalid-utf8", Args: []any{rpcIndex(tb, "CreateWorkspace"), []byte{0x0a, 0x02, 0xc3, 0x28}}},
		testutil.FuzzSeed{Name: "unknown-field", Args: []any{rpcIndex(tb, "ListWorkspaces"), []byte{0xf8, 0x01, 0x01}}},
	)
	return out
}

// FuzzRequests drives every RPC of the public API with arbitrary
// requests: kind picks the RPC, data is its request in protobuf wire
// format (inputs that do not unmarshal are skipped). The request goes
// through the real handler, service and SQLite store. No request may
// panic; every error must be a classified domain error; every provider in
// a response must be allowlisted and canonical, and a task's set must be
// the rule applied to its repositories.
func FuzzRequests(f *testing.F) {
	testutil.AddFuzzSeeds(f, requestSeeds(f))
	root := f.TempDir()
	var e *fuzzEnv
	f.Cleanup(func() {
		if e != nil {
			e.close()
		}
	})
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		rpc := fuzzRPCs[int(kind)%len(fuzzRPCs)]
		req := rpc.req()
		if err := proto.Unmarshal(data, req); err != nil {
			t.Skip("not a request of this kind")
		}
		if e == nil || e.calls >= fuzzRebuildEvery {
			if e != nil {
				e.close()
			}
			e = newFuzzEnv(t, root)
		}
		e.calls++
		substitute(req.ProtoReflect(), e.ids)
		// Validating a connection asks the provider's API; a file
		// reference could name a real file and resolve, so file
		// references are recorded without validation.
		if sc, ok := req.(*pb.SetConnectionRequest); ok && sc.GetCredential().GetFilePath() != "" {
			sc.SkipValidation = true
		}
		responses, err := rpc.call(context.Background(), e, req)
		if testing.Verbose() {
			t.Logf("%s(%v): %d responses, error %v", rpc.method, req, len(responses), err)
		}
		checkError(t, rpc.method, err)
		for _, res := range responses {
			checkResponse(t, res)
		}
	})
}

// TestFuzzRequestsCoverEveryRPC: FuzzRequests drives every RPC of every
// service in services.proto, sources.proto and auth.proto with that RPC's request
// type, so a new RPC cannot be added without fuzz coverage.
func TestFuzzRequestsCoverEveryRPC(t *testing.T) {
	t.Parallel()
	want := map[string]protoreflect.FullName{}
	nServices := 0
	for _, file := range []protoreflect.FileDescriptor{pb.File_toolscope_orchestrator_v1_services_proto, pb.File_toolscope_orchestrator_v1_sources_proto, pb.File_toolscope_orchestrator_v1_auth_proto} {
		services := file.Services()
		nServices += services.Len()
		for i := range services.Len() {
			methods := services.Get(i).Methods()
			for j := range methods.Len() {
				m := methods.Get(j)
				want[string(m.FullName())] = m.Input().FullName()
			}
		}
	}
	got := map[string]protoreflect.FullName{}
	for _, r := range fuzzRPCs {
		_, dup := got[r.method]
		assert.False(t, dup, "%s is listed twice", r.method)
		got[r.method] = r.req().ProtoReflect().Descriptor().FullName()
	}
	assert.Equal(t, want, got, "fuzzRPCs must list every RPC of services.proto with its request type")
	assert.Equal(t, nServices, len(ServiceNames), "every service is registered")
}
