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
		{textlimit.Title, strings.Repeat("é", 128), ""},
		{textlimit.Title, strings.Repeat("é", 129), "is 258 bytes long; the limit is 256 bytes"},
		{textlimit.Title, "fix\x00login", "control character (U+0000) at character 4"},
		{textlimit.Title, "fix \x1b[31mlogin", "control character (U+001B)"},
		{textlimit.Title, "fix\u0085login", "control character (U+0085)"},
		{textlimit.Title, "é\u0085", "control character (U+0085) at character 2"},
		{textlimit.Title, "two\nlines", "control character (U+000A)"},
		{textlimit.Branch, "fix\tlogin", "control character (U+0009)"},
		{textlimit.Text, "line one\r\n\tline two\n", ""},
		{textlimit.Text, "bell\a", "control character (U+0007)"},
		{textlimit.Text, strings.Repeat("x", 65537), "is 65537 bytes long; the limit is 65536 bytes"},
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

// TestLimitsCountBytes replays the attack on the bound in characters: a
// description of 65,536 '𝕏' (U+1D54F, 4 bytes in UTF-8) was 65,536
// characters, within the old limit, and 262,144 bytes; 17 of them made a
// task listing of 4.46 MB, past gRPC's 4 MiB. Counted in bytes it is
// refused, naming the field and the limit in bytes; 16,384 of them (the
// limit's 65,536 bytes) pass.
func TestLimitsCountBytes(t *testing.T) {
	t.Parallel()
	const wide = "𝕏"
	assert.Len(t, wide, 4)
	err := textlimit.Text.Check("description", strings.Repeat(wide, 65536))
	assert.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.Equal(t, "description", errdefs.FieldOf(err))
	assert.EqualError(t, err, "invalid description: is 262144 bytes long; the limit is 65536 bytes")
	assert.NoError(t, textlimit.Text.Check("description", strings.Repeat(wide, textlimit.Text.Max/len(wide))))
	assert.Error(t, textlimit.Text.Check("description", strings.Repeat(wide, textlimit.Text.Max/len(wide))+"x"))

	err = textlimit.Title.Check("title", strings.Repeat(wide, 65))
	assert.EqualError(t, err, "invalid title: is 260 bytes long; the limit is 256 bytes")
	assert.NoError(t, textlimit.Title.Check("title", strings.Repeat(wide, 64)))

	err = textlimit.Text.CheckBytes("agent.argv", 70000, "in all")
	assert.EqualError(t, err, "invalid agent.argv: is 70000 bytes in all; the limit is 65536 bytes")
	assert.NoError(t, textlimit.Text.CheckBytes("agent.argv", 65536, "in all"))
}
