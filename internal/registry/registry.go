// Package registry decides which MCP tools a session's agent is shown. A
// Registry is a pure function of a Spec — the capabilities injected into
// it — and nothing else: building one never calls the orchestrator,
// reads a git remote or scans a file. Registries are immutable
// snapshots, safe to share between goroutines; Diff tells a publisher
// exactly which tools to remove and (re)add to move from one to another.
//
// Assembly (Build): the task tools are the base of every surface; each
// review provider of the forge capability (Spec.Providers) adds its tool
// group from toolapi's table, and the catalog capability (Spec.External)
// adds the external tools pushed for the session. A zero capability
// contributes nothing. The mode then keeps only read-only tools unless it
// is task mode, and the transport decides the schemas: a colocated
// surface (agentctl, next to the files) publishes the table's, any other
// omits toolapi.ColocatedOnly. The zero Spec is therefore the safest
// surface: the read-only task tools with hosted schemas.
package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sort"
	"sync"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// Mode selects the tools a session's agent is shown (toolapi.Mode, the
// one definition).
type Mode = toolapi.Mode

// Modes.
const (
	ModeTask = toolapi.ModeTask
	ModePlan = toolapi.ModePlan
)

// Tool is one tool definition as the agent sees it.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema is a JSON Schema (draft 2020-12) object, kept as bytes so
	// that listing never re-encodes it.
	InputSchema json.RawMessage
	// OutputSchema, if set, is the JSON Schema of the structured result.
	OutputSchema json.RawMessage
	ReadOnly     bool
	Destructive  bool
	Idempotent   bool
	// OpenWorld marks tools that reach outside the task (provider APIs).
	OpenWorld bool
	// Group names where the tool comes from: the table's group ("task",
	// "github", "gitlab"), or "external" for pushed descriptors.
	Group string
}

// Spec is everything a registry depends on: the capabilities a surface
// is assembled from. Its zero value is the safest surface (see Build).
type Spec struct {
	// Mode: task mode shows every assembled tool; plan mode, the zero
	// value and any unknown mode only the read-only ones.
	Mode Mode
	// Providers is the forge capability: the review providers whose tool
	// groups the session shows (the task's provider set). Empty: none.
	Providers providers.Set
	// Transport is where the surface is served from: TransportColocated
	// (agentctl, next to the agent and its checkout) publishes the
	// table's schemas; TransportHosted (the orchestrator), the zero value
	// and any unknown transport omit toolapi.ColocatedOnly from them.
	Transport toolapi.Transport
	// Workspace is the workspace capability: the session has checkouts of
	// its task's repositories next to the surface (agentctl's), so it
	// shows the tools that act on them (toolapi.Tool.Workspace).
	Workspace bool
	// External is the catalog capability: tool descriptors pushed by the
	// orchestrator (external MCP tools). Nil: none. They obey the mode
	// like every other tool; a descriptor whose name collides with a
	// built-in tool is dropped. Their schemas are their servers' and are
	// published as they are on either transport.
	External []Tool
}

// Registry is an immutable, name-sorted set of tools. The schema bytes of
// the tools it returns may be shared with other registries of the process:
// they are read, never modified.
type Registry struct {
	tools  []Tool
	index  map[string]int
	prints map[string][32]byte
}

// variant is the built-in tool definitions as one transport publishes
// them, one per entry of toolapi's table (the one statement of the
// built-in surface), with their fingerprints.
type variant struct {
	defs   []builtin
	prints map[string][32]byte
}

type builtin struct {
	entry toolapi.Tool
	def   Tool
}

func newVariant(transport toolapi.Transport) *variant {
	v := &variant{prints: map[string][32]byte{}}
	for _, t := range toolapi.Tools() {
		in, out := t.Schemas(transport)
		def := Tool{
			Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: in, OutputSchema: out,
			ReadOnly: t.ReadOnly, Idempotent: t.Idempotent, OpenWorld: t.OpenWorld, Group: string(t.Group),
		}
		v.defs = append(v.defs, builtin{entry: t, def: def})
		v.prints[t.Name] = fingerprint(def)
	}
	return v
}

// The two variants are made on their first Build, once: the colocated
// schemas were computed at build time and the hosted ones are rewritten
// from them, so no Build re-encodes a definition, and start-up does
// neither.
var (
	colocated = sync.OnceValue(func() *variant { return newVariant(toolapi.TransportColocated) })
	hosted    = sync.OnceValue(func() *variant { return newVariant(toolapi.TransportHosted) })
)

// variantOf returns the definitions transport publishes: the table's for
// a colocated surface, the hosted ones for every other transport.
func variantOf(transport toolapi.Transport) *variant {
	if transport == toolapi.TransportColocated {
		return colocated()
	}
	return hosted()
}

// Build assembles the registry of spec's capabilities (see the package
// comment). Unknown modes are treated as plan mode and unknown transports
// as hosted: the narrowest surface, never a wider one.
func Build(spec Spec) *Registry {
	keep := func(t Tool) bool { return spec.Mode == ModeTask || t.ReadOnly }
	v := variantOf(spec.Transport)
	tools := make([]Tool, 0, len(v.defs)+len(spec.External))
	for _, b := range v.defs {
		if b.entry.Shown(spec.Providers, spec.Workspace) && keep(b.def) {
			tools = append(tools, b.def)
		}
	}
	for _, t := range spec.External {
		if Builtin(t.Name) || t.Name == "" || !keep(t) {
			continue
		}
		t.Group = "external"
		tools = append(tools, t)
	}
	return newRegistry(tools, v.prints)
}

// Builtin reports whether name is a built-in tool's name, in any mode and
// with any provider set: the names a pushed descriptor can never take.
func Builtin(name string) bool {
	_, ok := toolapi.Lookup(name)
	return ok
}

// FromTools returns a registry holding exactly tools (the last of several
// with one name wins). It is how a mirror, such as the stdio bridge,
// publishes a list it received.
func FromTools(tools []Tool) *Registry { return newRegistry(tools, nil) }

// newRegistry makes the registry of tools; known holds fingerprints
// already computed, by name, for tools that are exactly those definitions
// (Build's built-in tools, whose names no other tool can take).
//
// The schemas of the caller's tools are copied, so the registry stays
// immutable whatever the caller does with its slices. The built-in ones
// (known) are the process-wide variant's, never modified, and shared:
// copying them gave every session's registry its own ≈10 KB of schema
// bytes, and every push another copy (docs/benchmarks.md, item 6).
func newRegistry(tools []Tool, known map[string][32]byte) *Registry {
	byName := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	r := &Registry{tools: make([]Tool, 0, len(byName)), index: make(map[string]int, len(byName)),
		prints: make(map[string][32]byte, len(byName))}
	for _, t := range byName {
		if _, shared := known[t.Name]; !shared {
			t.InputSchema, t.OutputSchema = slices.Clone(t.InputSchema), slices.Clone(t.OutputSchema)
		}
		r.tools = append(r.tools, t)
	}
	sort.Slice(r.tools, func(i, j int) bool { return r.tools[i].Name < r.tools[j].Name })
	for i, t := range r.tools {
		r.index[t.Name] = i
		p, ok := known[t.Name]
		if !ok {
			p = fingerprint(t)
		}
		r.prints[t.Name] = p
	}
	return r
}

// fingerprint covers everything a client sees of a tool.
func fingerprint(t Tool) [32]byte {
	b, _ := json.Marshal([]any{t.Name, t.Title, t.Description, compact(t.InputSchema), compact(t.OutputSchema),
		t.ReadOnly, t.Destructive, t.Idempotent, t.OpenWorld})
	return sha256.Sum256(b)
}

func compact(schema json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, schema); err != nil {
		return string(schema)
	}
	return b.String()
}

// Tools returns the tools, sorted by name. The slice is a copy.
func (r *Registry) Tools() []Tool { return slices.Clone(r.tools) }

// Names returns the tool names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, len(r.tools))
	for i, t := range r.tools {
		names[i] = t.Name
	}
	return names
}

// Len returns the number of tools.
func (r *Registry) Len() int { return len(r.tools) }

// Lookup returns the tool named name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	i, ok := r.index[name]
	if !ok {
		return Tool{}, false
	}
	return r.tools[i], true
}

// Diff returns what moves a client from old (nil: nothing) to r: the names
// to remove, and the tools to add or replace because they are new or their
// definition changed. Both are empty when the two show the same surface.
func (r *Registry) Diff(old *Registry) (removed []string, upserted []Tool) {
	if old != nil {
		for _, t := range old.tools {
			if _, ok := r.index[t.Name]; !ok {
				removed = append(removed, t.Name)
			}
		}
	}
	for _, t := range r.tools {
		if p, had := old.lookupPrint(t.Name); !had || p != r.prints[t.Name] {
			upserted = append(upserted, t)
		}
	}
	return removed, upserted
}

// Fingerprint returns the fingerprint of the named tool's definition:
// equal fingerprints mean a client sees the same tool. Publishers key
// what they build from a definition on it.
func (r *Registry) Fingerprint(name string) ([32]byte, bool) { return r.lookupPrint(name) }

func (r *Registry) lookupPrint(name string) ([32]byte, bool) {
	if r == nil {
		return [32]byte{}, false
	}
	p, ok := r.prints[name]
	return p, ok
}

// Equal reports whether r and o show the same surface.
func (r *Registry) Equal(o *Registry) bool {
	removed, upserted := r.Diff(o)
	return o != nil && len(removed) == 0 && len(upserted) == 0
}
