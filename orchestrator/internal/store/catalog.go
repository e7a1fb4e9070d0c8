package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// The governed catalog of external MCP servers (see
// docs/catalog.md). Every change that can change what a session sees — a
// server or tool enabled or disabled, a tool assigned or unassigned, a
// discovery that changed, removed or restored tools — bumps the single
// catalog generation in its own transaction, so a set read with
// ExternalTools carries the generation of the commit it reflects.

// MaxExposedName is the longest exposed tool name: MCP clients commonly
// refuse longer tool names.
const MaxExposedName = 64

// ExposedName returns the name agents see for external tool external of
// server: server + "__" + external, with every character outside
// [A-Za-z0-9_-] replaced by "_", cut to MaxExposedName bytes. When that
// name is taken (two names that differ only in such characters, or only
// after the cut) the store appends a hash of the original names instead;
// either way the name is recorded once and never recomputed.
func ExposedName(server, external string) string {
	var b strings.Builder
	b.WriteString(server)
	b.WriteString("__")
	for _, r := range external {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > MaxExposedName {
		name = name[:MaxExposedName]
	}
	return name
}

// disambiguated is the n-th alternative to a taken exposed name: the
// name cut short, "_" and 8 hex digits of a hash of the original names.
func disambiguated(server, external string, n int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", server, external, n))
	suffix := "_" + hex.EncodeToString(sum[:4])
	base := ExposedName(server, external)
	if len(base) > MaxExposedName-len(suffix) {
		base = base[:MaxExposedName-len(suffix)]
	}
	return base + suffix
}

const serverColumns = `id, name, transport, stdio_command, stdio_args, stdio_working_dir, stdio_env, http_url, http_headers,
	enabled, discovered_at, discovery_error, created_at, updated_at`

type envRefJSON struct {
	Name    string `json:"name"`
	FromEnv string `json:"from_env"`
}

type headerRefJSON struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Ref    string `json:"ref"`
	Prefix string `json:"prefix,omitempty"`
}

// transportColumns returns the values of the transport columns, from
// stdio_command to http_headers, for p.
func transportColumns(p model.MCPServer) ([]any, error) {
	var (
		command, workDir, url string
		args                  = []string{}
		env                   = []envRefJSON{}
		headers               = []headerRefJSON{}
	)
	switch p.Transport {
	case model.TransportStdio:
		if p.Stdio == nil {
			return nil, errdefs.RequiredField("server.stdio")
		}
		command, workDir = p.Stdio.Command, p.Stdio.WorkingDir
		args = append(args, p.Stdio.Args...)
		for _, e := range p.Stdio.Env {
			env = append(env, envRefJSON(e))
		}
	case model.TransportHTTP:
		if p.HTTP == nil {
			return nil, errdefs.RequiredField("server.http")
		}
		url = p.HTTP.URL
		for _, h := range p.HTTP.Headers {
			headers = append(headers, headerRefJSON{Name: h.Name, Kind: string(h.Value.Kind), Ref: h.Value.Ref, Prefix: h.Prefix})
		}
	default:
		return nil, errdefs.InvalidField("server.transport", "set stdio or http")
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	envJSON, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	headersJSON, err := json.Marshal(headers)
	if err != nil {
		return nil, err
	}
	return []any{command, string(argsJSON), workDir, string(envJSON), url, string(headersJSON)}, nil
}

// CreateMCPServer records a new server, disabled and never
// discovered; its ID and timestamps are assigned.
func (s *Store) CreateMCPServer(ctx context.Context, p model.MCPServer) (model.MCPServer, error) {
	p.ID = newID("tp")
	p.Enabled, p.DiscoveredAt, p.DiscoveryError = false, time.Time{}, ""
	cols, err := transportColumns(p)
	if err != nil {
		return model.MCPServer{}, err
	}
	err = s.write(ctx, func(t *tx) error {
		p.CreatedAt, p.UpdatedAt = t.now, t.now
		args := append([]any{p.ID, p.Name, string(p.Transport)}, cols...)
		args = append(args, false, "", "", formatTime(t.now), formatTime(t.now))
		_, err := t.ExecContext(ctx, `INSERT INTO tool_providers (`+serverColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
		if isUnique(err) {
			return errdefs.AlreadyExists("MCP server named %q", p.Name)
		}
		return err
	})
	if err != nil {
		return model.MCPServer{}, err
	}
	return p, nil
}

// UpdateMCPServerTransport replaces the transport of server id with
// p's. The name, enablement and catalog are kept.
func (s *Store) UpdateMCPServerTransport(ctx context.Context, id string, p model.MCPServer) (model.MCPServer, error) {
	cols, err := transportColumns(p)
	if err != nil {
		return model.MCPServer{}, err
	}
	var out model.MCPServer
	err = s.write(ctx, func(t *tx) error {
		args := append([]any{string(p.Transport)}, cols...)
		args = append(args, formatTime(t.now), id)
		res, err := t.ExecContext(ctx, `UPDATE tool_providers SET transport = ?, stdio_command = ?, stdio_args = ?,
			stdio_working_dir = ?, stdio_env = ?, http_url = ?, http_headers = ?, updated_at = ? WHERE id = ?`, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("MCP server", id)
		}
		out, err = getMCPServer(ctx, t, id)
		return err
	})
	return out, err
}

// GetMCPServer returns the server with the given id or name.
func (s *Store) GetMCPServer(ctx context.Context, idOrName string) (model.MCPServer, error) {
	return getMCPServer(ctx, s.r, idOrName)
}

// ListMCPServers returns every server, by name.
func (s *Store) ListMCPServers(ctx context.Context) ([]model.MCPServer, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+serverColumns+` FROM tool_providers ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []model.MCPServer{}
	for rows.Next() {
		p, err := scanMCPServer(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// SetMCPServerEnabled enables or disables a server (by id or name).
// changed reports whether its state changed, in which case the catalog
// generation was bumped in the same transaction.
func (s *Store) SetMCPServerEnabled(ctx context.Context, idOrName string, enabled bool) (p model.MCPServer, changed bool, err error) {
	err = s.write(ctx, func(t *tx) error {
		if p, err = getMCPServer(ctx, t, idOrName); err != nil {
			return err
		}
		if p.Enabled == enabled {
			return nil
		}
		changed, p.Enabled, p.UpdatedAt = true, enabled, t.now
		if _, err := t.ExecContext(ctx, `UPDATE tool_providers SET enabled = ?, updated_at = ? WHERE id = ?`,
			enabled, formatTime(t.now), p.ID); err != nil {
			return err
		}
		return bumpGeneration(ctx, t)
	})
	return p, changed, err
}

// RecordDiscoveryFailure records why a server's discovery failed. The
// catalog is kept as it was.
func (s *Store) RecordDiscoveryFailure(ctx context.Context, serverID, reason string) error {
	if reason == "" {
		reason = "discovery failed"
	}
	return s.write(ctx, func(t *tx) error {
		res, err := t.ExecContext(ctx, `UPDATE tool_providers SET discovery_error = ?, updated_at = ? WHERE id = ?`,
			reason, formatTime(t.now), serverID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errdefs.NotFound("MCP server", serverID)
		}
		return nil
	})
}

// ApplyDiscovery records, in one transaction, what one successful
// discovery of a server found at time at:
//   - a tool seen for the first time is inserted disabled and available,
//     with a new exposed name;
//   - a listed tool that was available is changed (its title,
//     description, read-only hint or schema hash differ; the record is
//     updated) or unchanged;
//   - a listed tool that was unavailable is restored: available again,
//     its record updated, its enablement untouched;
//   - an available tool that is not listed becomes unavailable; it is
//     never deleted and keeps its enablement and assignments;
//   - an unavailable tool that is still not listed is left alone.
//
// Listed tools get last_seen = at. The server's discovery time becomes at
// and its discovery error is cleared. When the counts can change what a
// session sees (model.DiscoveryCounts.AffectsSessions) the catalog
// generation is bumped. A name listed twice counts once, with its first
// definition.
func (s *Store) ApplyDiscovery(ctx context.Context, serverID string, tools []model.DiscoveredTool, at time.Time) (model.DiscoveryCounts, error) {
	var counts model.DiscoveryCounts
	seen := map[string]bool{}
	listed := make([]model.DiscoveredTool, 0, len(tools))
	for _, d := range tools {
		if !seen[d.Name] {
			seen[d.Name] = true
			listed = append(listed, d)
		}
	}
	// Sorted, so exposed names are assigned in an order that does not
	// depend on the server's.
	slices.SortFunc(listed, func(a, b model.DiscoveredTool) int { return strings.Compare(a.Name, b.Name) })
	err := s.write(ctx, func(t *tx) error {
		counts = model.DiscoveryCounts{Total: len(listed)}
		p, err := getMCPServer(ctx, t, serverID)
		if err != nil {
			return err
		}
		existing, err := serverTools(ctx, t, p.ID)
		if err != nil {
			return err
		}
		byName := make(map[string]model.CatalogTool, len(existing))
		for _, ct := range existing {
			byName[ct.ExternalName] = ct
		}
		atText := formatTime(at)
		for _, d := range listed {
			old, ok := byName[d.Name]
			if !ok {
				counts.New++
				if err := insertTool(ctx, t, p, d, atText); err != nil {
					return err
				}
				continue
			}
			switch {
			case !old.Available:
				counts.Restored++
			case old.Title != d.Title || old.Description != d.Description || old.SchemaHash != d.SchemaHash || old.ReadOnly != d.ReadOnly:
				counts.Changed++
			default:
				counts.Unchanged++
			}
			if _, err := t.ExecContext(ctx, `UPDATE catalog_tools SET title = ?, description = ?, input_schema = ?,
				output_schema = ?, schema_hash = ?, read_only = ?, available = 1, last_seen = ? WHERE id = ?`,
				d.Title, d.Description, string(d.InputSchema), string(d.OutputSchema), d.SchemaHash, d.ReadOnly,
				atText, old.ID); err != nil {
				return err
			}
		}
		for _, old := range existing {
			if old.Available && !seen[old.ExternalName] {
				counts.Unavailable++
				if _, err := t.ExecContext(ctx, `UPDATE catalog_tools SET available = 0 WHERE id = ?`, old.ID); err != nil {
					return err
				}
			}
		}
		if _, err := t.ExecContext(ctx, `UPDATE tool_providers SET discovered_at = ?, discovery_error = '', updated_at = ? WHERE id = ?`,
			atText, formatTime(t.now), p.ID); err != nil {
			return err
		}
		if counts.AffectsSessions() {
			return bumpGeneration(ctx, t)
		}
		return nil
	})
	if err != nil {
		return model.DiscoveryCounts{}, err
	}
	return counts, nil
}

// insertTool records a newly discovered tool, disabled and available,
// under the first free exposed name.
func insertTool(ctx context.Context, t *tx, p model.MCPServer, d model.DiscoveredTool, at string) error {
	name := ExposedName(p.Name, d.Name)
	for n := 0; ; n++ {
		var one int
		err := t.QueryRowContext(ctx, `SELECT 1 FROM catalog_tools WHERE exposed_name = ?`, name).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			break
		} else if err != nil {
			return err
		}
		if n == 100 {
			return fmt.Errorf("no free exposed name for tool %q of server %q", d.Name, p.Name)
		}
		name = disambiguated(p.Name, d.Name, n)
	}
	_, err := t.ExecContext(ctx, `INSERT INTO catalog_tools (id, provider_id, external_name, exposed_name, title, description,
		input_schema, output_schema, schema_hash, read_only, enabled, available, first_seen, last_seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 1, ?, ?)`,
		newID("ct"), p.ID, d.Name, name, d.Title, d.Description, string(d.InputSchema), string(d.OutputSchema),
		d.SchemaHash, d.ReadOnly, at, at)
	return err
}

// ListCatalogTools returns the catalog's tools by exposed name: every
// server's, or one server's (by id or name) when server is not "".
func (s *Store) ListCatalogTools(ctx context.Context, server string) (out []model.CatalogTool, err error) {
	err = s.read(ctx, func(q queryer) error {
		serverID := ""
		if server != "" {
			p, err := getMCPServer(ctx, q, server)
			if err != nil {
				return err
			}
			serverID = p.ID
		}
		out, err = queryTools(ctx, q, `WHERE CAST(? AS TEXT) = '' OR t.provider_id = ? ORDER BY t.exposed_name`, serverID, serverID)
		return err
	})
	return out, err
}

// GetCatalogTool returns the tool with the given id or exposed name.
func (s *Store) GetCatalogTool(ctx context.Context, idOrExposed string) (ct model.CatalogTool, err error) {
	err = s.read(ctx, func(q queryer) error {
		ct, err = getTool(ctx, q, idOrExposed)
		return err
	})
	return ct, err
}

// SetCatalogToolEnabled enables or disables a tool (by id or exposed
// name). changed reports whether its state changed, in which case the
// catalog generation was bumped in the same transaction.
func (s *Store) SetCatalogToolEnabled(ctx context.Context, idOrExposed string, enabled bool) (ct model.CatalogTool, changed bool, err error) {
	err = s.write(ctx, func(t *tx) error {
		if ct, err = getTool(ctx, t, idOrExposed); err != nil {
			return err
		}
		if ct.Enabled == enabled {
			return nil
		}
		changed, ct.Enabled = true, enabled
		if _, err := t.ExecContext(ctx, `UPDATE catalog_tools SET enabled = ? WHERE id = ?`, enabled, ct.ID); err != nil {
			return err
		}
		return bumpGeneration(ctx, t)
	})
	return ct, changed, err
}

// AssignCatalogTool assigns a tool (by id or exposed name) to an existing
// workspace, or removes the assignment when assigned is false. changed
// reports whether the assignment changed, in which case the catalog
// generation was bumped in the same transaction.
func (s *Store) AssignCatalogTool(ctx context.Context, idOrExposed, workspaceID string, assigned bool) (ct model.CatalogTool, changed bool, err error) {
	err = s.write(ctx, func(t *tx) error {
		if ct, err = getTool(ctx, t, idOrExposed); err != nil {
			return err
		}
		if err := workspaceExists(ctx, t, workspaceID); err != nil {
			return err
		}
		var res sql.Result
		if assigned {
			res, err = t.ExecContext(ctx, `INSERT INTO tool_assignments (tool_id, workspace_id, created_at) VALUES (?, ?, ?)
				ON CONFLICT DO NOTHING`, ct.ID, workspaceID, formatTime(t.now))
		} else {
			res, err = t.ExecContext(ctx, `DELETE FROM tool_assignments WHERE tool_id = ? AND workspace_id = ?`, ct.ID, workspaceID)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		changed = true
		if ct, err = getTool(ctx, t, ct.ID); err != nil {
			return err
		}
		return bumpGeneration(ctx, t)
	})
	return ct, changed, err
}

// ExternalTools returns the tools the sessions of a workspace may see —
// assigned to it, server enabled, tool enabled and available (the rule
// of model.CatalogCallTarget.Gate) — by exposed name, with the catalog
// generation they reflect, read in one transaction.
func (s *Store) ExternalTools(ctx context.Context, workspaceID string) (out []model.CatalogTool, generation uint64, err error) {
	err = s.read(ctx, func(q queryer) error {
		if err := workspaceExists(ctx, q, workspaceID); err != nil {
			return err
		}
		if generation, err = catalogGeneration(ctx, q); err != nil {
			return err
		}
		out, err = queryTools(ctx, q, `JOIN tool_assignments a ON a.tool_id = t.id
			WHERE a.workspace_id = ? AND p.enabled = 1 AND t.enabled = 1 AND t.available = 1
			ORDER BY t.exposed_name`, workspaceID)
		return err
	})
	return out, generation, err
}

// CatalogGeneration returns the current catalog generation (1 for a
// catalog never changed).
func (s *Store) CatalogGeneration(ctx context.Context) (uint64, error) {
	return catalogGeneration(ctx, s.r)
}

// CatalogToolForCall returns the tool with the given exposed name and its
// server, read in one transaction, for checking a call with
// model.CatalogCallTarget.Gate and forwarding it. An unknown name is
// ErrNotFound.
func (s *Store) CatalogToolForCall(ctx context.Context, exposedName string) (target model.CatalogCallTarget, err error) {
	err = s.read(ctx, func(q queryer) error {
		tools, err := queryTools(ctx, q, `WHERE t.exposed_name = ?`, exposedName)
		if err != nil {
			return err
		}
		if len(tools) == 0 {
			return errdefs.NotFound("catalog tool", exposedName)
		}
		target.Tool = tools[0]
		target.Server, err = getMCPServer(ctx, q, target.Tool.ServerID)
		return err
	})
	return target, err
}

func catalogGeneration(ctx context.Context, q queryer) (uint64, error) {
	var g uint64
	err := q.QueryRowContext(ctx, `SELECT generation FROM catalog_generation WHERE id = 1`).Scan(&g)
	return g, err
}

func bumpGeneration(ctx context.Context, t *tx) error {
	t.notify = true // other replicas push the catalog's change to their sessions
	_, err := t.ExecContext(ctx, `UPDATE catalog_generation SET generation = generation + 1 WHERE id = 1`)
	return err
}

func getMCPServer(ctx context.Context, q queryer, idOrName string) (model.MCPServer, error) {
	p, err := scanMCPServer(q.QueryRowContext(ctx, `SELECT `+serverColumns+` FROM tool_providers WHERE id = ?1 OR name = ?1`, idOrName))
	if errors.Is(err, sql.ErrNoRows) {
		return p, errdefs.NotFound("MCP server", idOrName)
	}
	return p, err
}

func scanMCPServer(sc scanner) (model.MCPServer, error) {
	var (
		p                                                    model.MCPServer
		transport, command, args, workDir, env, url, headers string
		discovered, created, updated                         string
	)
	if err := sc.Scan(&p.ID, &p.Name, &transport, &command, &args, &workDir, &env, &url, &headers,
		&p.Enabled, &discovered, &p.DiscoveryError, &created, &updated); err != nil {
		return p, err
	}
	p.Transport = model.TransportKind(transport)
	switch p.Transport {
	case model.TransportStdio:
		p.Stdio = &model.StdioTransport{Command: command, WorkingDir: workDir}
		if err := json.Unmarshal([]byte(args), &p.Stdio.Args); err != nil {
			return p, err
		}
		var refs []envRefJSON
		if err := json.Unmarshal([]byte(env), &refs); err != nil {
			return p, err
		}
		for _, r := range refs {
			p.Stdio.Env = append(p.Stdio.Env, model.EnvReference(r))
		}
	case model.TransportHTTP:
		p.HTTP = &model.HTTPTransport{URL: url}
		var refs []headerRefJSON
		if err := json.Unmarshal([]byte(headers), &refs); err != nil {
			return p, err
		}
		for _, r := range refs {
			p.HTTP.Headers = append(p.HTTP.Headers, model.HeaderReference{
				Name: r.Name, Value: model.CredentialRef{Kind: model.CredentialKind(r.Kind), Ref: r.Ref}, Prefix: r.Prefix,
			})
		}
	}
	var err error
	if p.DiscoveredAt, err = parseTime(discovered); err != nil {
		return p, err
	}
	if p.CreatedAt, err = parseTime(created); err != nil {
		return p, err
	}
	p.UpdatedAt, err = parseTime(updated)
	return p, err
}

const toolColumns = `t.id, t.provider_id, p.name, t.external_name, t.exposed_name, t.title, t.description, t.input_schema,
	t.output_schema, t.schema_hash, t.read_only, t.enabled, t.available, t.first_seen, t.last_seen`

// queryTools returns the tools (with their server's name and their
// workspaces) that the clause after FROM selects.
func queryTools(ctx context.Context, q queryer, clause string, args ...any) ([]model.CatalogTool, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+toolColumns+`
		FROM catalog_tools t JOIN tool_providers p ON p.id = t.provider_id `+clause, args...)
	if err != nil {
		return nil, err
	}
	out := []model.CatalogTool{}
	for rows.Next() {
		ct, err := scanTool(rows)
		if err != nil {
			_ = rows.Close()
			return nil, err
		}
		out = append(out, ct)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	ids := make([]any, len(out))
	index := make(map[string]int, len(out))
	for i, ct := range out {
		ids[i], index[ct.ID] = ct.ID, i
	}
	arows, err := q.QueryContext(ctx, `SELECT tool_id, workspace_id FROM tool_assignments WHERE tool_id IN (`+placeholders(len(ids))+`)
		ORDER BY tool_id, workspace_id`, ids...)
	if err != nil {
		return nil, err
	}
	defer arows.Close()
	for arows.Next() {
		var toolID, wsID string
		if err := arows.Scan(&toolID, &wsID); err != nil {
			return nil, err
		}
		i := index[toolID]
		out[i].WorkspaceIDs = append(out[i].WorkspaceIDs, wsID)
	}
	return out, arows.Err()
}

func serverTools(ctx context.Context, q queryer, serverID string) ([]model.CatalogTool, error) {
	return queryTools(ctx, q, `WHERE t.provider_id = ? ORDER BY t.external_name`, serverID)
}

func getTool(ctx context.Context, q queryer, idOrExposed string) (model.CatalogTool, error) {
	tools, err := queryTools(ctx, q, `WHERE t.id = ?1 OR t.exposed_name = ?1`, idOrExposed)
	if err != nil {
		return model.CatalogTool{}, err
	}
	if len(tools) == 0 {
		return model.CatalogTool{}, errdefs.NotFound("catalog tool", idOrExposed)
	}
	return tools[0], nil
}

func scanTool(sc scanner) (model.CatalogTool, error) {
	var (
		ct                         model.CatalogTool
		input, output, first, last string
	)
	if err := sc.Scan(&ct.ID, &ct.ServerID, &ct.ServerName, &ct.ExternalName, &ct.ExposedName, &ct.Title, &ct.Description,
		&input, &output, &ct.SchemaHash, &ct.ReadOnly, &ct.Enabled, &ct.Available, &first, &last); err != nil {
		return ct, err
	}
	ct.InputSchema = json.RawMessage(input)
	if output != "" {
		ct.OutputSchema = json.RawMessage(output)
	}
	var err error
	if ct.FirstSeen, err = parseTime(first); err != nil {
		return ct, err
	}
	ct.LastSeen, err = parseTime(last)
	return ct, err
}
