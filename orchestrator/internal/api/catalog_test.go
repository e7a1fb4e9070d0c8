package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
)

// wireShape describes a message as the wire sees it: each field's number,
// kind, cardinality and oneof, recursively for message fields. Names of
// fields and messages are not on the wire.
func wireShape(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) []string {
	if seen[md.FullName()] {
		return []string{"(recursive)"}
	}
	seen[md.FullName()] = true
	defer delete(seen, md.FullName())
	var out []string
	fields := md.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		line := []string{fmt.Sprint(f.Number()), f.Kind().String(), f.Cardinality().String()}
		if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
			line = append(line, "oneof")
		}
		if f.Kind() == protoreflect.MessageKind {
			line = append(line, "{"+strings.Join(wireShape(f.Message(), seen), "; ")+"}")
		}
		out = append(out, strings.Join(line, " "))
	}
	return out
}

// TestDeprecatedCatalogMessagesMatchTheirSuccessors: every deprecated
// *ToolProvider RPC is served by its *McpServer successor through
// rewire, which is only sound while each old request and response has the
// wire shape of the new one (ADR 0017).
func TestDeprecatedCatalogMessagesMatchTheirSuccessors(t *testing.T) {
	t.Parallel()
	methods := pb.File_toolscope_orchestrator_v1_services_proto.Services().ByName("CatalogService").Methods()
	pairs := 0
	for i := range methods.Len() {
		old := methods.Get(i)
		if !strings.Contains(string(old.Name()), "ToolProvider") {
			continue
		}
		successor := methods.ByName(protoreflect.Name(strings.NewReplacer("ToolProviders", "McpServers", "ToolProvider", "McpServer").Replace(string(old.Name()))))
		require.NotNil(t, successor, "%s has a successor", old.Name())
		for _, m := range [][2]protoreflect.MessageDescriptor{{old.Input(), successor.Input()}, {old.Output(), successor.Output()}} {
			assert.Equal(t, wireShape(m[1], map[protoreflect.FullName]bool{}), wireShape(m[0], map[protoreflect.FullName]bool{}),
				"%s has the wire shape of %s", m[0].FullName(), m[1].FullName())
		}
		pairs++
	}
	assert.Equal(t, 7, pairs)
	assert.Equal(t, wireShape(pb.File_toolscope_orchestrator_v1_resources_proto.Messages().ByName("McpServer"), map[protoreflect.FullName]bool{}),
		wireShape(pb.File_toolscope_orchestrator_v1_resources_proto.Messages().ByName("ToolProvider"), map[protoreflect.FullName]bool{}))
}

// TestRewireKeepsEveryField: a request and an answer with every field
// set survive the round trip old → new → old unchanged; an error passes
// through.
func TestRewireKeepsEveryField(t *testing.T) {
	t.Parallel()
	old := &pb.UpdateToolProviderRequest{Provider: &pb.ToolProvider{Id: "tp_1", Name: "docs", Enabled: true, DiscoveryError: "x",
		Transport: &pb.ToolProvider_Http{Http: &pb.HttpTransport{Url: "https://docs.example/mcp", Headers: []*pb.HeaderReference{
			{Name: "Authorization", Prefix: "Bearer ", Value: &pb.CredentialRef{Source: &pb.CredentialRef_EnvVar{EnvVar: "DOCS_TOKEN"}}}}}}}}
	mid := rewire1[*pb.UpdateMcpServerRequest](old)
	assert.Equal(t, "https://docs.example/mcp", mid.GetServer().GetHttp().GetUrl())
	back := rewire1[*pb.UpdateToolProviderRequest](mid)
	assert.True(t, proto.Equal(old, back), "%v\n%v", old, back)

	_, err := rewire[*pb.GetToolProviderResponse](nil, errdefs.NotFound("MCP server", "nope"))
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
}

// TestDeprecatedRPCIsTheNewOne: the old RPC answers what the new one does,
// errors included.
func TestDeprecatedRPCIsTheNewOne(t *testing.T) {
	t.Parallel()
	e := newFuzzEnv(t, t.TempDir())
	t.Cleanup(e.close)
	ctx := context.Background()
	h := e.catalog
	created, err := h.CreateMcpServer(ctx, &pb.CreateMcpServerRequest{Server: &pb.McpServer{Name: "wiki",
		Transport: &pb.McpServer_Http{Http: &pb.HttpTransport{Url: "https://wiki.example/mcp"}}}})
	require.NoError(t, err)
	viaNew, err := h.GetMcpServer(ctx, &pb.GetMcpServerRequest{Server: "wiki"})
	require.NoError(t, err)
	viaOld, err := h.GetToolProvider(ctx, &pb.GetToolProviderRequest{Provider: "wiki"})
	require.NoError(t, err)
	assert.Equal(t, created.GetServer().GetId(), viaOld.GetProvider().GetId())
	assert.True(t, proto.Equal(viaNew.GetServer(), rewire1[*pb.McpServer](viaOld.GetProvider())))
	_, errNew := h.GetMcpServer(ctx, &pb.GetMcpServerRequest{Server: "nope"})
	_, errOld := h.GetToolProvider(ctx, &pb.GetToolProviderRequest{Provider: "nope"})
	require.ErrorIs(t, errOld, errdefs.ErrNotFound)
	assert.Equal(t, errNew.Error(), errOld.Error())
}
