package access_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
)

// operations lists what the orchestrator can perform: every forge.Client
// method and every RPC of the toolscope.orchestrator.v1 services.
func operations(t *testing.T) map[string]bool {
	t.Helper()
	ops := map[string]bool{}
	client := reflect.TypeFor[forge.Client]()
	for i := range client.NumMethod() {
		ops["forge."+client.Method(i).Name] = true
	}
	protoregistry.GlobalFiles.RangeFilesByPackage("toolscope.orchestrator.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				ops[fmt.Sprintf("/%s/%s", s.FullName(), s.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	require.Greater(t, len(ops), client.NumMethod(), "no RPC found: is the generated package registered?")
	return ops
}

// TestCoverageMap pins the coverage map (toolapi.CoverageMap) to what
// exists: every operation has exactly one entry, every entry names a real
// operation, and is either real tools or a reason, never both or neither.
func TestCoverageMap(t *testing.T) {
	ops := operations(t)
	seen := map[string]bool{}
	for _, c := range toolapi.CoverageMap() {
		assert.True(t, ops[c.Operation], "coverage entry %q names no forge operation or public RPC", c.Operation)
		assert.False(t, seen[c.Operation], "coverage entry %q is stated twice", c.Operation)
		seen[c.Operation] = true
		assert.True(t, (len(c.Tools) > 0) != (c.Why != ""), "coverage entry %q must name tools or say why it is not one (not both)", c.Operation)
		for _, name := range c.Tools {
			_, ok := toolapi.Lookup(name)
			assert.True(t, ok, "coverage entry %q names tool %q, which is not in the tool table", c.Operation, name)
		}
	}
	for op := range ops {
		assert.True(t, seen[op], "operation %q has no coverage entry: decide in internal/toolapi/coverage.go whether it is a tool", op)
	}
	// The RPCs the map covers are the ones the access table governs.
	for op := range ops {
		if op[0] == '/' {
			_, ok := access.Table[op]
			assert.True(t, ok, "RPC %q is not in access.Table", op)
		}
	}
}
