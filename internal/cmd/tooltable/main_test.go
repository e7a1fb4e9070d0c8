package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGeneratedFilesAreCurrent fails when the README's tool table or
// toolapi's generated schemas differ from what the tool table generates.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	t.Parallel()
	for _, f := range []struct {
		path string
		want func(old []byte) ([]byte, error)
	}{
		{"../../toolapi/schemas_gen.go", func([]byte) ([]byte, error) { return Schemas(), nil }},
		{"../../../README.md", Readme},
	} {
		old, err := os.ReadFile(f.path)
		require.NoError(t, err)
		want, err := f.want(old)
		require.NoError(t, err, f.path)
		if !bytes.Equal(old, want) {
			t.Errorf("%s is not what the tool table (internal/toolapi) generates: run '%s' and commit the result", f.path, fixCommand)
		}
	}
}

// TestReadmeNeedsItsMarkers: a README without the section's lines is an
// error, not a silent no-op.
func TestReadmeNeedsItsMarkers(t *testing.T) {
	t.Parallel()
	_, err := Readme([]byte("# toolscope\n"))
	assert.ErrorContains(t, err, "no tool table")
}
