package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/internal/errdefs"
)

// TestTheServerBinaryServesOnlyItsOwnBuild: toolscope-server refuses to
// serve for a toolscope binary of another build, naming both builds and
// where it is; the same build, or a build that cannot say what it is (a
// test binary, one built outside a checkout), goes on.
func TestTheServerBinaryServesOnlyItsOwnBuild(t *testing.T) {
	err := checkBuilds("v1.4.0 (go1.26.8)", "v1.3.2 (go1.26.8)", "/usr/local/bin/toolscope-server")
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.ErrorContains(t, err, "toolscope v1.4.0 (go1.26.8) ran toolscope-server v1.3.2 (go1.26.8) (/usr/local/bin/toolscope-server)")
	assert.ErrorContains(t, err, "make build puts both in bin/")
	assert.ErrorIs(t, checkBuilds("9b05660b1c2d+dirty (go1.26.8)", "a31acf5e0f1d (go1.26.8)", "x"), errdefs.ErrFailedPrecondition, "two checkouts")

	for _, c := range [][2]string{
		{"v1.4.0 (go1.26.8)", "v1.4.0 (go1.26.8)"},
		{"(devel) (go1.26.8)", "v1.4.0 (go1.26.8)"},
		{"v1.4.0 (go1.26.8)", "(devel) (go1.26.8)"},
		{"unknown (go1.26.8)", "v1.4.0 (go1.26.8)"},
		{" (go1.26.8)", "v1.4.0 (go1.26.8)"},
	} {
		assert.NoError(t, checkBuilds(c[0], c[1], "x"), "%q ran %q", c[0], c[1])
	}
}
