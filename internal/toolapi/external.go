package toolapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// externalName is what an external tool's exposed name may be: the
// characters every MCP host accepts in a tool name, within the length most
// of them allow (maxExternalName). The length is checked apart: a bounded
// repetition ({1,64}) compiles into a program 64 times as long, ≈0.4 ms of
// every process's start.
var externalName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

const maxExternalName = 64

// CheckExternalName reports why name cannot be an external tool's exposed
// name, or nil.
func CheckExternalName(name string) error {
	if len(name) > maxExternalName || !externalName.MatchString(name) {
		return fmt.Errorf("must be 1 to 64 letters, digits, '_' or '-'")
	}
	return nil
}

// CheckExternalSchema reports why raw cannot be an external tool's input
// (or output) schema, or nil: it must be a JSON Schema object of "type":
// "object" that resolves without fetching anything. agentctl refuses a
// pushed set holding such a tool, so the orchestrator keeps these tools
// out of the sets it pushes; both sides call this one check.
func CheckExternalSchema(raw []byte) error {
	if len(raw) == 0 {
		return fmt.Errorf("is required")
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fmt.Errorf("is not a JSON object")
	}
	if typ, _ := obj["type"].(string); typ != "object" {
		return fmt.Errorf(`must be a schema of "type": "object"`)
	}
	var schema jsonschema.Schema
	err := json.Unmarshal(raw, &schema)
	if err == nil {
		_, err = schema.Resolve(nil)
	}
	if err != nil {
		return fmt.Errorf("is not a JSON Schema agentctl can validate with: %s", strings.TrimSpace(err.Error()))
	}
	return nil
}
