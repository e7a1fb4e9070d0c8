package textlimit_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind  textlimit.Kind
		value string
		want  string // "" passes
	}{
		{textlimit.Title, strings.Repeat("é", 256), ""},
		{textlimit.Title, strings.Repeat("é", 257), "is 257 characters long; the limit is 256"},
		{textlimit.Title, "fix\x00login", "control character (U+0000) at character 4"},
		{textlimit.Title, "fix \x1b[31mlogin", "control character (U+001B)"},
		{textlimit.Title, "fix\u0085login", "control character (U+0085)"},
		{textlimit.Title, "two\nlines", "control character (U+000A)"},
		{textlimit.Branch, "fix\tlogin", "control character (U+0009)"},
		{textlimit.Text, "line one\r\n\tline two\n", ""},
		{textlimit.Text, "bell\a", "control character (U+0007)"},
		{textlimit.Text, strings.Repeat("x", 65537), "the limit is 65536"},
		{textlimit.Name, "bad \xff utf-8", "is not valid UTF-8"},
		{textlimit.Name, "", ""},
	} {
		err := c.kind.Check("f", c.value)
		if c.want == "" {
			assert.NoError(t, err, "%q", c.value)
			continue
		}
		assert.ErrorIs(t, err, errdefs.ErrInvalidArgument, "%q", c.value)
		assert.Equal(t, "f", errdefs.FieldOf(err))
		assert.ErrorContains(t, err, c.want)
	}
}
