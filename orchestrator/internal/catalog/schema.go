// Package catalog connects the orchestrator to external MCP servers — the
// MCP servers of the governed catalog (docs/catalog.md) — through the
// official go-sdk client, and turns what they list into catalog records.
//
// A Pool keeps one client connection per server: made on first use,
// reused by every later discovery and call (a stdio server is one long-
// lived process, not one per call), replaced when the server's transport
// changes or the connection breaks, and closed, stdio processes ended, by
// Pool.Close. Every operation is bounded by a timeout.
//
// Secrets stay references until the moment of use: a stdio server's
// environment is built only from its references (plus a minimal PATH and
// HOME), read from the orchestrator's environment when the server starts;
// HTTP headers are resolved per request by credentials.Resolver. Resolved
// values (and token-shaped strings) are replaced by "[redacted]" in every
// error, tool definition and call result that comes back from a server,
// by the orchestrator's one scrubber (package scrub).
package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Canonical returns the canonical form of a JSON document: it is decoded
// and encoded again with encoding/json, so object keys are sorted, there
// is no insignificant white space, numbers take Go's shortest float64
// spelling (1.0 and 1 are the same; integers beyond 2^53 lose precision),
// and strings are escaped the same way (HTML characters are not escaped).
// Two documents that differ only in key order or formatting have the same
// canonical form. An empty document is null.
func Canonical(doc []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return json.RawMessage("null"), nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return encode(v)
}

// CanonicalValue returns the canonical JSON of a Go value, as Canonical
// would of its encoding.
func CanonicalValue(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonical(b)
}

func encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// SchemaHash returns the hex SHA-256 identifying a tool's pair of
// canonical schemas (output may be empty: the tool declares none). Equal
// schemas, whatever their key order, hash the same.
func SchemaHash(input, output json.RawMessage) string {
	h := sha256.New()
	h.Write(input)
	h.Write([]byte{0})
	h.Write(output)
	return hex.EncodeToString(h.Sum(nil))
}
