package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A context's name and a certificate file's base name: a letter or digit,
// then letters, digits, '.', '_' and '-', at most 64 and 100 bytes.
func TestNamesAreBounded(t *testing.T) {
	cases := []struct {
		name  string
		check func(string) bool
		max   int
	}{
		{"context", validContextName, 64},
		{"file base", validFileBase, 100},
	}
	for _, c := range cases {
		assert.True(t, c.check("a"), c.name)
		assert.True(t, c.check("a"+strings.Repeat("b._-9", (c.max-1)/5)), c.name)
		assert.True(t, c.check(strings.Repeat("x", c.max)), c.name)
		for _, bad := range []string{"", strings.Repeat("x", c.max+1), ".a", "-a", "a b", "a/b", "naïve"} {
			assert.False(t, c.check(bad), "%s %q", c.name, bad)
		}
	}
}
