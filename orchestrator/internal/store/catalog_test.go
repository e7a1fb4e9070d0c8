package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// tool is a discovered tool with a canonical schema built from props.
func tool(t *testing.T, name, description, schema string) model.DiscoveredTool {
	t.Helper()
	in, err := catalog.Canonical([]byte(schema))
	require.NoError(t, err)
	return model.DiscoveredTool{Name: name, Description: description, InputSchema: in, SchemaHash: catalog.SchemaHash(in, nil)}
}

func stdioProvider(name string) model.MCPServer {
	return model.MCPServer{Name: name, Transport: model.TransportStdio, Stdio: &model.StdioTransport{
		Command: "/usr/bin/docs-mcp", Args: []string{"--stdio"}, WorkingDir: "/srv",
		Env: []model.EnvReference{{Name: "API_KEY", FromEnv: "DOCS_API_KEY"}},
	}}
}

func byExternal(tools []model.CatalogTool) map[string]model.CatalogTool {
	out := map[string]model.CatalogTool{}
	for _, ct := range tools {
		out[ct.ExternalName] = ct
	}
	return out
}

func generation(t *testing.T, s *store.Store) uint64 {
	t.Helper()
	g, err := s.CatalogGeneration(context.Background())
	require.NoError(t, err)
	return g
}

func TestMCPServersRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, nil)
	stdio, err := s.CreateMCPServer(ctx, stdioProvider("docs"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(stdio.ID, "tp_"))
	assert.False(t, stdio.Enabled)
	httpP, err := s.CreateMCPServer(ctx, model.MCPServer{Name: "tickets", Transport: model.TransportHTTP, HTTP: &model.HTTPTransport{
		URL: "https://tickets.example.com/mcp", Headers: []model.HeaderReference{
			{Name: "Authorization", Prefix: "Bearer ", Value: model.CredentialRef{Kind: model.CredentialEnv, Ref: "TICKETS_TOKEN"}},
			{Name: "X-Tenant", Value: model.CredentialRef{Kind: model.CredentialFile, Ref: "/run/secrets/tenant"}},
		},
	}})
	require.NoError(t, err)
	_, err = s.CreateMCPServer(ctx, stdioProvider("docs"))
	assert.ErrorIs(t, err, errdefs.ErrAlreadyExists)

	require.NoError(t, s.Close())
	s = open(t, dir, nil)
	for _, key := range []string{stdio.ID, "docs"} {
		got, err := s.GetMCPServer(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, stdio, got)
	}
	got, err := s.GetMCPServer(ctx, "tickets")
	require.NoError(t, err)
	assert.Equal(t, httpP, got)
	list, err := s.ListMCPServers(ctx)
	require.NoError(t, err)
	assert.Equal(t, []model.MCPServer{stdio, httpP}, list)
	_, err = s.GetMCPServer(ctx, "nope")
	assert.ErrorIs(t, err, errdefs.ErrNotFound)

	// A new transport replaces the old one; name and enablement stay.
	_, _, err = s.SetMCPServerEnabled(ctx, "docs", true)
	require.NoError(t, err)
	updated, err := s.UpdateMCPServerTransport(ctx, stdio.ID, model.MCPServer{Transport: model.TransportHTTP,
		HTTP: &model.HTTPTransport{URL: "http://127.0.0.1:9/mcp"}})
	require.NoError(t, err)
	assert.Equal(t, "docs", updated.Name)
	assert.True(t, updated.Enabled)
	assert.Nil(t, updated.Stdio)
	assert.Equal(t, &model.HTTPTransport{URL: "http://127.0.0.1:9/mcp"}, updated.HTTP)
	_, err = s.UpdateMCPServerTransport(ctx, "tp_nope", stdioProvider("x"))
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
}

func TestApplyDiscoveryCountsEveryRound(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		p, err := s.CreateMCPServer(ctx, stdioProvider("docs"))
		require.NoError(t, err)
		obj := `{"type":"object","properties":{"q":{"type":"string"}}}`
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		gen := generation(t, s)

		type round struct {
			name   string
			tools  []model.DiscoveredTool
			counts model.DiscoveryCounts
			bumps  bool
		}
		rounds := []round{
			{"first", []model.DiscoveredTool{tool(t, "search", "find", obj), tool(t, "fetch", "get", obj), tool(t, "stats", "count", obj)},
				model.DiscoveryCounts{New: 3, Total: 3}, false},
			{"same again", []model.DiscoveredTool{tool(t, "stats", "count", obj), tool(t, "search", "find", obj), tool(t, "fetch", "get", obj)},
				model.DiscoveryCounts{Unchanged: 3, Total: 3}, false},
			{"key order only", []model.DiscoveredTool{tool(t, "search", "find", `{"properties":{"q":{"type":"string"}},"type":"object"}`),
				tool(t, "fetch", "get", obj), tool(t, "stats", "count", obj)},
				model.DiscoveryCounts{Unchanged: 3, Total: 3}, false},
			{"description, schema, removal, addition", []model.DiscoveredTool{tool(t, "search", "find documents", obj),
				tool(t, "fetch", "get", `{"type":"object","properties":{"id":{"type":"integer"}}}`), tool(t, "index", "index", obj)},
				model.DiscoveryCounts{New: 1, Changed: 2, Unavailable: 1, Total: 3}, true},
			{"still missing", []model.DiscoveredTool{tool(t, "search", "find documents", obj),
				tool(t, "fetch", "get", `{"type":"object","properties":{"id":{"type":"integer"}}}`), tool(t, "index", "index", obj)},
				model.DiscoveryCounts{Unchanged: 3, Total: 3}, false},
			{"restored, listed twice", []model.DiscoveredTool{tool(t, "search", "find documents", obj), tool(t, "stats", "count", obj),
				tool(t, "stats", "a second definition is ignored", obj),
				tool(t, "fetch", "get", `{"type":"object","properties":{"id":{"type":"integer"}}}`), tool(t, "index", "index", obj)},
				model.DiscoveryCounts{Unchanged: 3, Restored: 1, Total: 4}, true},
			{"empty", nil, model.DiscoveryCounts{Unavailable: 4}, true},
		}
		for i, r := range rounds {
			if i == 1 {
				// Enable one tool: enablement must survive every later round.
				_, changed, err := s.SetCatalogToolEnabled(ctx, "docs__stats", true)
				require.NoError(t, err)
				require.True(t, changed)
				gen++
			}
			at = at.Add(time.Minute)
			counts, err := s.ApplyDiscovery(ctx, p.ID, r.tools, at)
			require.NoError(t, err, r.name)
			assert.Equal(t, r.counts, counts, r.name)
			if r.bumps {
				gen++
			}
			assert.Equal(t, gen, generation(t, s), "generation after %s", r.name)
			got, err := s.GetMCPServer(ctx, p.ID)
			require.NoError(t, err)
			assert.Equal(t, at, got.DiscoveredAt, r.name)
		}

		tools, err := s.ListCatalogTools(ctx, "docs")
		require.NoError(t, err)
		all := byExternal(tools)
		require.Len(t, all, 4, "nothing is ever deleted")
		for _, ct := range tools {
			assert.False(t, ct.Available, ct.ExternalName)
			assert.Equal(t, ct.ExternalName == "stats", ct.Enabled, "only stats was enabled: %s", ct.ExternalName)
			assert.Equal(t, "docs__"+ct.ExternalName, ct.ExposedName)
			assert.Equal(t, "docs", ct.ServerName)
		}
		assert.Equal(t, "find documents", all["search"].Description)
		assert.Equal(t, "count", all["stats"].Description, "the first definition of a name listed twice")
		assert.Equal(t, `{"properties":{"id":{"type":"integer"}},"type":"object"}`, string(all["fetch"].InputSchema))
		assert.Equal(t, time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC), all["search"].FirstSeen)
		assert.Equal(t, time.Date(2026, 12, 1, 10, 6, 0, 0, time.UTC), all["search"].LastSeen)
		assert.Equal(t, time.Date(2026, 12, 1, 10, 4, 0, 0, time.UTC), all["index"].FirstSeen)

		_, err = s.ApplyDiscovery(ctx, "tp_nope", nil, at)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		_, err = s.ListCatalogTools(ctx, "nope")
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
	})
}

func TestFailedDiscoveryKeepsTheCatalog(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		p, err := s.CreateMCPServer(ctx, stdioProvider("docs"))
		require.NoError(t, err)
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		_, err = s.ApplyDiscovery(ctx, p.ID, []model.DiscoveredTool{tool(t, "search", "find", `{"type":"object"}`)}, at)
		require.NoError(t, err)
		before, err := s.ListCatalogTools(ctx, "")
		require.NoError(t, err)
		gen := generation(t, s)

		require.NoError(t, s.RecordDiscoveryFailure(ctx, p.ID, "MCP server \"docs\": connect: no answer within 30s: unavailable"))
		got, err := s.GetMCPServer(ctx, "docs")
		require.NoError(t, err)
		assert.Contains(t, got.DiscoveryError, "no answer within 30s")
		assert.Equal(t, at, got.DiscoveredAt, "the last success is kept")
		after, err := s.ListCatalogTools(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, before, after)
		assert.Equal(t, gen, generation(t, s))

		// The next success clears the error.
		_, err = s.ApplyDiscovery(ctx, p.ID, []model.DiscoveredTool{tool(t, "search", "find", `{"type":"object"}`)}, at.Add(time.Hour))
		require.NoError(t, err)
		got, err = s.GetMCPServer(ctx, "docs")
		require.NoError(t, err)
		assert.Empty(t, got.DiscoveryError)
		assert.ErrorIs(t, s.RecordDiscoveryFailure(ctx, "tp_nope", "x"), errdefs.ErrNotFound)
	})
}

func TestExposedNamesAreSafeUniqueAndStable(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		long := strings.Repeat("x", 80)
		p, err := s.CreateMCPServer(ctx, stdioProvider("docs"))
		require.NoError(t, err)
		discovered := []model.DiscoveredTool{
			tool(t, "search.v2", "", `{"type":"object"}`),
			tool(t, "search/v2", "", `{"type":"object"}`), // sanitizes to the same name
			tool(t, "söke", "", `{"type":"object"}`),
			tool(t, long+"a", "", `{"type":"object"}`),
			tool(t, long+"b", "", `{"type":"object"}`), // the same after the cut
		}
		_, err = s.ApplyDiscovery(ctx, p.ID, discovered, at)
		require.NoError(t, err)
		tools, err := s.ListCatalogTools(ctx, p.ID)
		require.NoError(t, err)
		names := map[string]string{}
		for _, ct := range tools {
			names[ct.ExternalName] = ct.ExposedName
		}
		// Assigned in external-name order: "search.v2" < "search/v2".
		assert.Equal(t, "docs__search_v2", names["search.v2"])
		assert.Regexp(t, `^docs__search_v2_[0-9a-f]{8}$`, names["search/v2"])
		assert.Equal(t, "docs__s_ke", names["söke"])
		assert.Equal(t, store.ExposedName("docs", long+"a"), names[long+"a"])
		assert.Len(t, names[long+"a"], store.MaxExposedName)
		assert.Regexp(t, `^docs__x{49}_[0-9a-f]{8}$`, names[long+"b"])
		seen := map[string]bool{}
		for _, n := range names {
			assert.Regexp(t, `^[A-Za-z0-9_-]{1,64}$`, n)
			assert.False(t, seen[n], "unique: %s", n)
			seen[n] = true
		}

		// The names stay when the tools disappear and come back in another
		// order, and a tool whose name is taken by another provider's tool is
		// disambiguated.
		_, err = s.ApplyDiscovery(ctx, p.ID, nil, at.Add(time.Minute))
		require.NoError(t, err)
		_, err = s.ApplyDiscovery(ctx, p.ID, []model.DiscoveredTool{discovered[4], discovered[1], discovered[0]}, at.Add(2*time.Minute))
		require.NoError(t, err)
		tools, err = s.ListCatalogTools(ctx, p.ID)
		require.NoError(t, err)
		for _, ct := range tools {
			assert.Equal(t, names[ct.ExternalName], ct.ExposedName, ct.ExternalName)
		}
		other, err := s.CreateMCPServer(ctx, stdioProvider("docs-search"))
		require.NoError(t, err)
		_, err = s.ApplyDiscovery(ctx, other.ID, []model.DiscoveredTool{tool(t, "v2", "", `{"type":"object"}`)}, at)
		require.NoError(t, err)
		otherTools, err := s.ListCatalogTools(ctx, other.ID)
		require.NoError(t, err)
		assert.Equal(t, "docs-search__v2", otherTools[0].ExposedName, "no clash: provider names cannot hold _")
	})
}

func TestExternalToolsApplyTheGate(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")
		other := newFixture(t, s, "other")
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

		// Every combination of provider enabled, tool enabled, available and
		// assigned, one tool each, spread over two providers.
		type combo struct{ providerOn, toolOn, available, assigned bool }
		var combos []combo
		for i := range 16 {
			combos = append(combos, combo{i&1 != 0, i&2 != 0, i&4 != 0, i&8 != 0})
		}
		providers := map[bool]model.MCPServer{}
		for _, on := range []bool{false, true} {
			p, err := s.CreateMCPServer(ctx, stdioProvider(fmt.Sprintf("p-%t", on)))
			require.NoError(t, err)
			if on {
				_, _, err = s.SetMCPServerEnabled(ctx, p.ID, true)
				require.NoError(t, err)
			}
			providers[on] = p
		}
		toolName := func(c combo) string {
			return fmt.Sprintf("t-%t-%t-%t", c.toolOn, c.available, c.assigned)
		}
		for _, on := range []bool{false, true} {
			var all []model.DiscoveredTool
			for _, c := range combos {
				if c.providerOn == on {
					all = append(all, tool(t, toolName(c), "", `{"type":"object"}`))
				}
			}
			_, err := s.ApplyDiscovery(ctx, providers[on].ID, all, at)
			require.NoError(t, err)
			var still []model.DiscoveredTool
			for _, c := range combos {
				if c.providerOn == on && c.available {
					still = append(still, tool(t, toolName(c), "", `{"type":"object"}`))
				}
			}
			_, err = s.ApplyDiscovery(ctx, providers[on].ID, still, at.Add(time.Minute))
			require.NoError(t, err)
		}
		var want []string
		for _, c := range combos {
			exposed := providers[c.providerOn].Name + "__" + toolName(c)
			if c.toolOn {
				_, _, err := s.SetCatalogToolEnabled(ctx, exposed, true)
				require.NoError(t, err)
			}
			if c.assigned {
				_, _, err := s.AssignCatalogTool(ctx, exposed, f.ws.ID, true)
				require.NoError(t, err)
			}
			target, err := s.CatalogToolForCall(ctx, exposed)
			require.NoError(t, err)
			gate := target.Gate(f.ws.ID)
			if c.providerOn && c.toolOn && c.available && c.assigned {
				want = append(want, exposed)
				assert.Empty(t, gate, exposed)
			} else {
				assert.NotEmpty(t, gate, exposed)
			}
			assert.Equal(t, model.BlockNotAssigned, target.Gate(other.ws.ID), "assigned to another workspace: %s", exposed)
		}
		got, gen, err := s.ExternalTools(ctx, f.ws.ID)
		require.NoError(t, err)
		var gotNames []string
		for _, ct := range got {
			gotNames = append(gotNames, ct.ExposedName)
			assert.Equal(t, []string{f.ws.ID}, ct.WorkspaceIDs)
		}
		assert.Equal(t, want, gotNames)
		assert.Len(t, want, 1)
		assert.Equal(t, generation(t, s), gen)
		none, _, err := s.ExternalTools(ctx, other.ws.ID)
		require.NoError(t, err)
		assert.Empty(t, none)
		_, _, err = s.ExternalTools(ctx, "ws_nope")
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		_, err = s.CatalogToolForCall(ctx, "nope__x")
		assert.ErrorIs(t, err, errdefs.ErrNotFound)

		// The gate's reasons, in order.
		target, err := s.CatalogToolForCall(ctx, want[0])
		require.NoError(t, err)
		for _, step := range []struct {
			change func(*model.CatalogCallTarget)
			want   model.CatalogBlock
		}{
			{func(c *model.CatalogCallTarget) { c.Tool.Available = false }, model.BlockToolUnavailable},
			{func(c *model.CatalogCallTarget) { c.Tool.Enabled = false }, model.BlockToolDisabled},
			{func(c *model.CatalogCallTarget) { c.Server.Enabled = false }, model.BlockServerDisabled},
			{func(c *model.CatalogCallTarget) { c.Tool.WorkspaceIDs = nil }, model.BlockNotAssigned},
		} {
			step.change(&target)
			assert.Equal(t, step.want, target.Gate(f.ws.ID))
		}
	})
}

func TestEveryVisibleChangeBumpsTheGenerationOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")
		assert.Equal(t, uint64(1), generation(t, s), "a new catalog is at generation 1")
		p, err := s.CreateMCPServer(ctx, stdioProvider("docs"))
		require.NoError(t, err)
		_, err = s.ApplyDiscovery(ctx, p.ID, []model.DiscoveredTool{tool(t, "search", "", `{"type":"object"}`)}, time.Now())
		require.NoError(t, err)
		assert.Equal(t, uint64(1), generation(t, s), "new tools are disabled: nothing visible changed")

		steps := []struct {
			name    string
			do      func() (bool, error)
			changed bool
		}{
			{"enable provider", func() (bool, error) { _, c, err := s.SetMCPServerEnabled(ctx, "docs", true); return c, err }, true},
			{"enable provider again", func() (bool, error) { _, c, err := s.SetMCPServerEnabled(ctx, p.ID, true); return c, err }, false},
			{"enable tool", func() (bool, error) { _, c, err := s.SetCatalogToolEnabled(ctx, "docs__search", true); return c, err }, true},
			{"enable tool again", func() (bool, error) { _, c, err := s.SetCatalogToolEnabled(ctx, "docs__search", true); return c, err }, false},
			{"assign", func() (bool, error) {
				_, c, err := s.AssignCatalogTool(ctx, "docs__search", f.ws.ID, true)
				return c, err
			}, true},
			{"assign again", func() (bool, error) {
				_, c, err := s.AssignCatalogTool(ctx, "docs__search", f.ws.ID, true)
				return c, err
			}, false},
			{"unassign", func() (bool, error) {
				_, c, err := s.AssignCatalogTool(ctx, "docs__search", f.ws.ID, false)
				return c, err
			}, true},
			{"unassign again", func() (bool, error) {
				_, c, err := s.AssignCatalogTool(ctx, "docs__search", f.ws.ID, false)
				return c, err
			}, false},
			{"disable tool", func() (bool, error) { _, c, err := s.SetCatalogToolEnabled(ctx, "docs__search", false); return c, err }, true},
			{"disable provider", func() (bool, error) { _, c, err := s.SetMCPServerEnabled(ctx, "docs", false); return c, err }, true},
		}
		gen := generation(t, s)
		for _, step := range steps {
			changed, err := step.do()
			require.NoError(t, err, step.name)
			assert.Equal(t, step.changed, changed, step.name)
			if changed {
				gen++
			}
			assert.Equal(t, gen, generation(t, s), step.name)
		}

		_, _, err = s.AssignCatalogTool(ctx, "docs__search", "ws_nope", true)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		_, _, err = s.AssignCatalogTool(ctx, "docs__nope", f.ws.ID, true)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		_, _, err = s.SetCatalogToolEnabled(ctx, "ct_nope", true)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		_, _, err = s.SetMCPServerEnabled(ctx, "nope", true)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		assert.Equal(t, gen, generation(t, s), "failures change nothing")

		// Id and exposed name find the same tool, with its assignments.
		_, _, err = s.AssignCatalogTool(ctx, "docs__search", f.ws.ID, true)
		require.NoError(t, err)
		byName, err := s.GetCatalogTool(ctx, "docs__search")
		require.NoError(t, err)
		byID, err := s.GetCatalogTool(ctx, byName.ID)
		require.NoError(t, err)
		assert.Equal(t, byName, byID)
		assert.Equal(t, []string{f.ws.ID}, byID.WorkspaceIDs)
		assert.True(t, strings.HasPrefix(byID.ID, "ct_"))
	})
}

func TestSessionsRecordTheAppliedCatalogGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, nil)
	f := newFixture(t, s, "acme")
	task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
	require.NoError(t, err)
	sess, err := s.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending})
	require.NoError(t, err)
	assert.Zero(t, sess.ExternalGeneration)
	sess, err = s.UpdateSession(ctx, sess.ID, func(s *model.Session) ([]model.Event, error) {
		s.ExternalGeneration = 7
		return nil, nil
	})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), sess.ExternalGeneration)
	require.NoError(t, s.Close())
	s = open(t, dir, nil)
	got, err := s.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), got.ExternalGeneration)
}

func TestCatalogRecordsHoldNoSecretValues(t *testing.T) {
	t.Parallel()
	// The provider table has no column a value could go in: references
	// only. This pins its columns.
	ctx := context.Background()
	s := open(t, t.TempDir(), nil)
	_, err := s.CreateMCPServer(ctx, stdioProvider("docs"))
	require.NoError(t, err)
	p, err := s.GetMCPServer(ctx, "docs")
	require.NoError(t, err)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"ID":"`+p.ID+`","Name":"docs","Transport":"stdio",
		"Stdio":{"Command":"/usr/bin/docs-mcp","Args":["--stdio"],"WorkingDir":"/srv","Env":[{"Name":"API_KEY","FromEnv":"DOCS_API_KEY"}]},
		"HTTP":null,"Enabled":false,"DiscoveredAt":"0001-01-01T00:00:00Z","DiscoveryError":"",
		"CreatedAt":"`+p.CreatedAt.Format(time.RFC3339Nano)+`","UpdatedAt":"`+p.UpdatedAt.Format(time.RFC3339Nano)+`"}`, string(b))
}
