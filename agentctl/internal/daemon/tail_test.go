package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTailIsBounded(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	got := tail(write("lines", strings.Join(lines, "\n")+"\n\n"), 20, 4096)
	assert.Equal(t, strings.Join(lines[10:], "\n"), got, "the last 20 lines, trailing newlines dropped")

	long := strings.Repeat("é", 3000) // 6000 bytes on one line
	got = tail(write("long", "first\n"+long), 20, 4096)
	assert.LessOrEqual(t, len(got), 4096)
	assert.True(t, utf8.ValidString(got), "a rune cut by the byte bound is replaced, never sent invalid")
	assert.True(t, strings.HasSuffix(got, "éé"))

	got = tail(write("odd", "first\n"+"x"+long), 20, 4096)
	assert.LessOrEqual(t, len(got), 4096)
	assert.True(t, utf8.ValidString(got), "a rune cut by the byte bound is dropped")
	assert.Equal(t, "é", got[:2])

	invalid := strings.Repeat("\xff", 4096)
	got = tail(write("invalid", invalid), 20, 4096)
	assert.LessOrEqual(t, len(got), 4096, "replacement characters do not grow it past the bound")
	assert.True(t, utf8.ValidString(got))

	assert.Equal(t, "", tail(filepath.Join(dir, "missing"), 20, 4096))
	assert.Equal(t, "", tail(write("empty", ""), 20, 4096))
	assert.Equal(t, "one", tail(write("one", "one"), 20, 4096))
}
