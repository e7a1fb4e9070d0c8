package api

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

// catalogServer serves CatalogService: the governed catalog of external
// MCP servers and their tools.
type catalogServer struct {
	pb.UnimplementedCatalogServiceServer
	svc *service.Service
}

func (h *catalogServer) CreateMcpServer(ctx context.Context, req *pb.CreateMcpServerRequest) (*pb.CreateMcpServerResponse, error) {
	m, counts, err := h.svc.CreateMCPServer(ctx, fromMCPServer(req.GetServer()))
	if err != nil {
		return nil, err
	}
	return &pb.CreateMcpServerResponse{Server: toMCPServer(m), Counts: toCounts(counts)}, nil
}

func (h *catalogServer) UpdateMcpServer(ctx context.Context, req *pb.UpdateMcpServerRequest) (*pb.UpdateMcpServerResponse, error) {
	m, counts, err := h.svc.UpdateMCPServer(ctx, fromMCPServer(req.GetServer()))
	if err != nil {
		return nil, err
	}
	return &pb.UpdateMcpServerResponse{Server: toMCPServer(m), Counts: toCounts(counts)}, nil
}

func (h *catalogServer) GetMcpServer(ctx context.Context, req *pb.GetMcpServerRequest) (*pb.GetMcpServerResponse, error) {
	m, err := h.svc.GetMCPServer(ctx, req.GetServer())
	if err != nil {
		return nil, err
	}
	return &pb.GetMcpServerResponse{Server: toMCPServer(m)}, nil
}

func (h *catalogServer) ListMcpServers(ctx context.Context, _ *pb.ListMcpServersRequest) (*pb.ListMcpServersResponse, error) {
	list, err := h.svc.ListMCPServers(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.ListMcpServersResponse{Servers: []*pb.McpServer{}}
	for _, m := range list {
		out.Servers = append(out.Servers, toMCPServer(m))
	}
	return out, nil
}

func (h *catalogServer) TestMcpServer(ctx context.Context, req *pb.TestMcpServerRequest) (*pb.TestMcpServerResponse, error) {
	res, err := h.svc.TestMCPServer(ctx, req.GetServer())
	if err != nil {
		return nil, err
	}
	return &pb.TestMcpServerResponse{ServerName: res.ServerName, ServerVersion: res.ServerVersion, ToolNames: res.ToolNames}, nil
}

func (h *catalogServer) RefreshMcpServer(ctx context.Context, req *pb.RefreshMcpServerRequest) (*pb.RefreshMcpServerResponse, error) {
	m, counts, err := h.svc.RefreshMCPServer(ctx, req.GetServer())
	if err != nil {
		return nil, err
	}
	return &pb.RefreshMcpServerResponse{Server: toMCPServer(m), Counts: toCounts(counts)}, nil
}

func (h *catalogServer) SetMcpServerEnabled(ctx context.Context, req *pb.SetMcpServerEnabledRequest) (*pb.SetMcpServerEnabledResponse, error) {
	m, err := h.svc.SetMCPServerEnabled(ctx, req.GetServer(), req.GetEnabled())
	if err != nil {
		return nil, err
	}
	return &pb.SetMcpServerEnabledResponse{Server: toMCPServer(m)}, nil
}

// The deprecated *ToolProvider RPCs (ADR 0017) are the *McpServer ones:
// their messages have the same field numbers and types
// (TestDeprecatedCatalogMessagesMatchTheirSuccessors), so each request is
// re-read as its successor, served by it, and its answer re-read back.

func (h *catalogServer) CreateToolProvider(ctx context.Context, req *pb.CreateToolProviderRequest) (*pb.CreateToolProviderResponse, error) {
	return rewire[*pb.CreateToolProviderResponse](h.CreateMcpServer(ctx, rewire1[*pb.CreateMcpServerRequest](req)))
}

func (h *catalogServer) UpdateToolProvider(ctx context.Context, req *pb.UpdateToolProviderRequest) (*pb.UpdateToolProviderResponse, error) {
	return rewire[*pb.UpdateToolProviderResponse](h.UpdateMcpServer(ctx, rewire1[*pb.UpdateMcpServerRequest](req)))
}

func (h *catalogServer) GetToolProvider(ctx context.Context, req *pb.GetToolProviderRequest) (*pb.GetToolProviderResponse, error) {
	return rewire[*pb.GetToolProviderResponse](h.GetMcpServer(ctx, rewire1[*pb.GetMcpServerRequest](req)))
}

func (h *catalogServer) ListToolProviders(ctx context.Context, req *pb.ListToolProvidersRequest) (*pb.ListToolProvidersResponse, error) {
	return rewire[*pb.ListToolProvidersResponse](h.ListMcpServers(ctx, rewire1[*pb.ListMcpServersRequest](req)))
}

func (h *catalogServer) TestToolProvider(ctx context.Context, req *pb.TestToolProviderRequest) (*pb.TestToolProviderResponse, error) {
	return rewire[*pb.TestToolProviderResponse](h.TestMcpServer(ctx, rewire1[*pb.TestMcpServerRequest](req)))
}

func (h *catalogServer) RefreshToolProvider(ctx context.Context, req *pb.RefreshToolProviderRequest) (*pb.RefreshToolProviderResponse, error) {
	return rewire[*pb.RefreshToolProviderResponse](h.RefreshMcpServer(ctx, rewire1[*pb.RefreshMcpServerRequest](req)))
}

func (h *catalogServer) SetToolProviderEnabled(ctx context.Context, req *pb.SetToolProviderEnabledRequest) (*pb.SetToolProviderEnabledResponse, error) {
	return rewire[*pb.SetToolProviderEnabledResponse](h.SetMcpServerEnabled(ctx, rewire1[*pb.SetMcpServerEnabledRequest](req)))
}

// rewire1 re-reads m as T, a message with the same field numbers and
// types. Both are generated from proto/ and checked equal by a test, so
// the conversion cannot fail; if it did, T is left empty and the service
// refuses it naming the missing field.
func rewire1[T proto.Message](m proto.Message) T {
	out, _ := rewire[T](m, nil)
	return out
}

// rewire is rewire1 for a handler's answer: an error is passed through.
func rewire[T proto.Message](m proto.Message, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	out := zero.ProtoReflect().Type().New().Interface().(T)
	b, err := proto.Marshal(m)
	if err == nil {
		err = proto.Unmarshal(b, out)
	}
	if err != nil {
		return out, fmt.Errorf("re-read %s as %s: %w", m.ProtoReflect().Descriptor().FullName(), out.ProtoReflect().Descriptor().FullName(), err)
	}
	return out, nil
}

func (h *catalogServer) ListCatalogTools(ctx context.Context, req *pb.ListCatalogToolsRequest) (*pb.ListCatalogToolsResponse, error) {
	server := req.GetServer()
	if server == "" {
		server = req.GetProvider() // the deprecated field, read for one release
	}
	list, err := h.svc.ListCatalogTools(ctx, server)
	if err != nil {
		return nil, err
	}
	out := &pb.ListCatalogToolsResponse{Tools: []*pb.CatalogTool{}}
	for _, ct := range list {
		out.Tools = append(out.Tools, toCatalogTool(ct))
	}
	return out, nil
}

func (h *catalogServer) GetCatalogTool(ctx context.Context, req *pb.GetCatalogToolRequest) (*pb.GetCatalogToolResponse, error) {
	ct, err := h.svc.GetCatalogTool(ctx, req.GetTool())
	if err != nil {
		return nil, err
	}
	return &pb.GetCatalogToolResponse{Tool: toCatalogTool(ct)}, nil
}

func (h *catalogServer) SetCatalogToolEnabled(ctx context.Context, req *pb.SetCatalogToolEnabledRequest) (*pb.SetCatalogToolEnabledResponse, error) {
	ct, err := h.svc.SetCatalogToolEnabled(ctx, req.GetTool(), req.GetEnabled())
	if err != nil {
		return nil, err
	}
	return &pb.SetCatalogToolEnabledResponse{Tool: toCatalogTool(ct)}, nil
}

func (h *catalogServer) AssignCatalogTool(ctx context.Context, req *pb.AssignCatalogToolRequest) (*pb.AssignCatalogToolResponse, error) {
	ct, err := h.svc.AssignCatalogTool(ctx, req.GetTool(), req.GetWorkspaceId(), req.GetAssigned())
	if err != nil {
		return nil, err
	}
	return &pb.AssignCatalogToolResponse{Tool: toCatalogTool(ct)}, nil
}

// fromMCPServer converts the request's server; the service validates it.
// id is kept (UpdateMcpServer names the server by it), the enablement and
// discovery fields are ignored.
func fromMCPServer(p *pb.McpServer) model.MCPServer {
	out := model.MCPServer{ID: p.GetId(), Name: p.GetName()}
	switch t := p.GetTransport().(type) {
	case *pb.McpServer_Stdio:
		s := &model.StdioTransport{Command: t.Stdio.GetCommand(), Args: t.Stdio.GetArgs(), WorkingDir: t.Stdio.GetWorkingDir()}
		for _, e := range t.Stdio.GetEnv() {
			s.Env = append(s.Env, model.EnvReference{Name: e.GetName(), FromEnv: e.GetFromEnv()})
		}
		out.Transport, out.Stdio = model.TransportStdio, s
	case *pb.McpServer_Http:
		h := &model.HTTPTransport{URL: t.Http.GetUrl()}
		for _, hr := range t.Http.GetHeaders() {
			h.Headers = append(h.Headers, model.HeaderReference{Name: hr.GetName(), Value: fromCredential(hr.GetValue()), Prefix: hr.GetPrefix()})
		}
		out.Transport, out.HTTP = model.TransportHTTP, h
	}
	return out
}

func toMCPServer(p model.MCPServer) *pb.McpServer {
	out := &pb.McpServer{
		Id: p.ID, Name: p.Name, Enabled: p.Enabled, DiscoverTime: ts(p.DiscoveredAt), DiscoveryError: p.DiscoveryError,
		CreateTime: ts(p.CreatedAt), UpdateTime: ts(p.UpdatedAt),
	}
	switch {
	case p.Stdio != nil:
		s := &pb.StdioTransport{Command: p.Stdio.Command, Args: p.Stdio.Args, WorkingDir: p.Stdio.WorkingDir}
		for _, e := range p.Stdio.Env {
			s.Env = append(s.Env, &pb.EnvReference{Name: e.Name, FromEnv: e.FromEnv})
		}
		out.Transport = &pb.McpServer_Stdio{Stdio: s}
	case p.HTTP != nil:
		h := &pb.HttpTransport{Url: p.HTTP.URL}
		for _, hr := range p.HTTP.Headers {
			h.Headers = append(h.Headers, &pb.HeaderReference{Name: hr.Name, Value: toCredential(hr.Value), Prefix: hr.Prefix})
		}
		out.Transport = &pb.McpServer_Http{Http: h}
	}
	return out
}

func toCredential(c model.CredentialRef) *pb.CredentialRef {
	out := &pb.CredentialRef{}
	switch c.Kind {
	case model.CredentialEnv:
		out.Source = &pb.CredentialRef_EnvVar{EnvVar: c.Ref}
	case model.CredentialFile:
		out.Source = &pb.CredentialRef_FilePath{FilePath: c.Ref}
	}
	return out
}

func toCatalogTool(ct model.CatalogTool) *pb.CatalogTool {
	return &pb.CatalogTool{
		Id: ct.ID, ServerId: ct.ServerID, ProviderId: ct.ServerID, ExternalName: ct.ExternalName, ExposedName: ct.ExposedName,
		Title: ct.Title, Description: ct.Description, InputSchemaJson: string(ct.InputSchema),
		OutputSchemaJson: string(ct.OutputSchema), SchemaHash: ct.SchemaHash, ReadOnly: ct.ReadOnly,
		Enabled: ct.Enabled, Available: ct.Available, WorkspaceIds: ct.WorkspaceIDs,
		FirstSeenTime: ts(ct.FirstSeen), LastSeenTime: ts(ct.LastSeen),
	}
}

func toCounts(c model.DiscoveryCounts) *pb.DiscoveryCounts {
	return &pb.DiscoveryCounts{
		New: uint32(c.New), Changed: uint32(c.Changed), Unchanged: uint32(c.Unchanged),
		Unavailable: uint32(c.Unavailable), Restored: uint32(c.Restored), Total: uint32(c.Total),
	}
}
