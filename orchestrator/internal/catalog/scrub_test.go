package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestScrubTailLeavesNoPieceOfASecret: a process's last output is cut to a
// size, and its buffer drops older output; either cut can split a secret,
// and no piece of it (of minSecret bytes or more) may remain.
func TestScrubTailLeavesNoPieceOfASecret(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-ABCDEFGHIJKLMNOP"
	s := &secretSet{}
	s.add(secret)
	for name, text := range map[string]string{
		"whole":                       "auth failed with " + secret + " (401)",
		"the buffer starts inside it": secret[9:] + " rejected",
		"the output ends inside it":   "retrying with " + secret[:12],
		"the cut splits it":           strings.Repeat("x", 600) + " key " + secret + strings.Repeat("y", 500),
	} {
		out := s.scrubTail(text, 512)
		assert.LessOrEqual(t, len(out), 512+len("…")+len("[redacted]"), name)
		for k := minSecret; k <= len(secret); k++ {
			for i := 0; i+k <= len(secret); i++ {
				if piece := secret[i : i+k]; strings.Contains(out, piece) {
					t.Errorf("%s: %q is in %q", name, piece, out)
				}
			}
		}
	}
	assert.Equal(t, "nothing secret here", s.scrubTail("nothing secret here", 512))
}
