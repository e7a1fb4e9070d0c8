package agentlink_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
)

// previousRelease is an agentctl of the release before ApplySurface: it
// knows SetProviders and, unless preCatalog, SetExternalTools.
type previousRelease struct {
	agentctlv1.UnimplementedAgentctlServiceServer
	preCatalog bool

	mu          sync.Mutex
	set         []string
	gen, extGen uint64
}

func (p *previousRelease) SetProviders(_ context.Context, req *agentctlv1.SetProvidersRequest) (*agentctlv1.SetProvidersResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := req.GetProviderSet()
	if ps.GetGeneration() < p.gen {
		return &agentctlv1.SetProvidersResponse{Applied: &agentctlv1.ProviderSet{Providers: p.set, Generation: p.gen}}, nil
	}
	p.set, p.gen = ps.GetProviders(), ps.GetGeneration()
	return &agentctlv1.SetProvidersResponse{Applied: ps, Accepted: true, ToolsChanged: true}, nil
}

func (p *previousRelease) SetExternalTools(_ context.Context, req *agentctlv1.SetExternalToolsRequest) (*agentctlv1.SetExternalToolsResponse, error) {
	if p.preCatalog {
		return nil, status.Error(codes.Unimplemented, "unknown method SetExternalTools")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.extGen = req.GetExternalTools().GetGeneration()
	return &agentctlv1.SetExternalToolsResponse{AppliedGeneration: p.extGen, Accepted: true, ToolsChanged: true}, nil
}

func linkTo(t *testing.T, srv agentctlv1.AgentctlServiceServer) *agentlink.Link {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	agentctlv1.RegisterAgentctlServiceServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	l, err := agentlink.Dial(agentlink.Options{Addr: lis.Addr().String(), Secret: "s3cret-for-agentlink-tests-0123456789"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestApplySurfaceReachesAnAgentctlOfThePreviousRelease: an agentctl that
// kept running across an upgrade has no ApplySurface; the link pushes the
// surface through the deprecated RPCs it knows (ADR 0020).
func TestApplySurfaceReachesAnAgentctlOfThePreviousRelease(t *testing.T) {
	old := &previousRelease{}
	l := linkTo(t, old)
	ctx := context.Background()
	tools := []executors.ExternalTool{{Name: "docs__search", InputSchema: []byte(`{"type":"object"}`), ReadOnly: true}}
	res, err := l.ApplySurface(ctx, "s1", executors.Surface{Mode: executors.ModeTask, Providers: providers.Of("github", "gitlab"), Generation: 3,
		External: tools, ExternalGeneration: 2})
	require.NoError(t, err)
	assert.Equal(t, executors.PushResult{Accepted: true, ToolsChanged: true, Applied: providers.Of("github", "gitlab"), Generation: 3, ExternalGeneration: 2}, res)
	stale, err := l.ApplySurface(ctx, "s1", executors.Surface{Providers: providers.Of("github"), Generation: 2})
	require.NoError(t, err)
	assert.False(t, stale.Accepted, "its stale check holds")
	assert.Equal(t, uint64(3), stale.Generation)

	// An agentctl from before the catalog exposes no external tools: right
	// for an empty set, refused, saying why, for another.
	preCatalog := linkTo(t, &previousRelease{preCatalog: true})
	res, err = preCatalog.ApplySurface(ctx, "s1", executors.Surface{Providers: providers.Of("github"), Generation: 1, ExternalGeneration: 4})
	require.NoError(t, err)
	assert.Equal(t, uint64(4), res.ExternalGeneration)
	_, err = preCatalog.ApplySurface(ctx, "s1", executors.Surface{External: tools, ExternalGeneration: 5})
	require.ErrorIs(t, err, errdefs.ErrUnimplemented)
	assert.ErrorContains(t, err, "predates external tools")
}
