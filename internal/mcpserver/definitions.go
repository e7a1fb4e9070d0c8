package mcpserver

import (
	"bytes"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/registry"
)

// A push that changes k tools costs O(k), and the work of a fan-out that
// applies the same change to many sessions is done once per process
// (docs/benchmarks.md, ADR 0030).
//
// go-sdk's AddTool re-marshals a raw input schema into a map on every call
// to check its "type", and once more to look for x-mcp-header annotations;
// with two hundred sessions applying one change that was 40% of the
// daemon's CPU, for definitions that never change. So the SDK is handed a
// stand-in for each built-in tool — its name and a schema the SDK checks
// without decoding anything (standInSchema) — and tools/list shows the
// full definition in its place (gateListing). The SDK uses a raw tool's schemas only to list them and to
// read x-mcp-header annotations; a tool whose schema has any keeps its full
// definition in the SDK too. Tools from outside the table (external,
// mirrored) are handed to the SDK whole, as before: its checks are theirs.
//
// Both values are built once per distinct built-in definition (by
// fingerprint) and shared by every publisher of the process; they are
// never modified after they are built. The cache is bounded by the
// table: one entry per built-in tool and transport.

// definition is what a publisher serves for one tool.
type definition struct {
	full *mcp.Tool // what clients list
	sdk  *mcp.Tool // what the SDK holds; full itself unless stood in for
}

// standInSchema is the input schema of a stand-in: a parsed schema of type
// "object", which AddTool checks by reading a field where it would decode
// raw JSON into a map. It cannot be encoded (Defs and Definitions are both
// set), so AddTool's scan for x-mcp-header annotations, which encodes it
// and decodes the result, stops at once instead of decoding (go-sdk's
// decoder allocates 32 KB for each decoding, however small the input). A
// stand-in is never listed (gateListing), and TestListingShowsWholeDefinitions
// fails if the SDK ever encodes one.
var standInSchema = &jsonschema.Schema{Type: "object", Defs: map[string]*jsonschema.Schema{}, Definitions: map[string]*jsonschema.Schema{}}

var builtinDefinitions = struct {
	sync.RWMutex
	m map[[32]byte]definition
}{m: map[[32]byte]definition{}}

// shown returns the whole definition to list for the SDK's stand-in of the
// named tool of r, if the SDK holds a stand-in for it.
func shown(r *registry.Registry, name string) (*mcp.Tool, bool) {
	print, ok := r.Fingerprint(name)
	if !ok {
		return nil, false
	}
	builtinDefinitions.RLock()
	d, ok := builtinDefinitions.m[print]
	builtinDefinitions.RUnlock()
	return d.full, ok && d.sdk != d.full
}

// define returns the definition of t, a tool of r.
func define(r *registry.Registry, t registry.Tool) definition {
	print, ok := r.Fingerprint(t.Name)
	if !ok || !registry.Builtin(t.Name) || t.Group == "external" || t.Group == "mirror" {
		full := toMCP(t)
		return definition{full: full, sdk: full}
	}
	builtinDefinitions.Lock()
	defer builtinDefinitions.Unlock()
	if d, ok := builtinDefinitions.m[print]; ok {
		return d
	}
	full := toMCP(t)
	d := definition{full: full, sdk: full}
	// Not checked here: the table's definitions are fixed at build time,
	// and TestTheSDKAcceptsEveryBuiltinDefinition checks each of them whole
	// in every mode, provider set and transport. Checking them at start
	// was most of the first session's start-up garbage (two 32 KB decoder
	// buffers per tool), on the path the orchestrator waits on (ADR 0033).
	if !bytes.Contains(t.InputSchema, []byte("x-mcp-header")) {
		d.sdk = &mcp.Tool{Name: t.Name, InputSchema: standInSchema}
	}
	builtinDefinitions.m[print] = d
	return d
}
