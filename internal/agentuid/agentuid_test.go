package agentuid_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/agentuid"

	"github.com/toolscope/toolscope/internal/testutil"
)

func TestParse(t *testing.T) {
	t.Parallel()
	r, err := agentuid.Parse(" 100000-100999 ")
	require.NoError(t, err)
	assert.Equal(t, agentuid.Range{First: 100000, Last: 100999}, r)
	assert.Equal(t, 1000, r.Size())
	assert.Equal(t, "100000-100999", r.String())
	one, err := agentuid.Parse("4242")
	require.NoError(t, err)
	assert.Equal(t, agentuid.Single(4242), one)
	none, err := agentuid.Parse("")
	require.NoError(t, err)
	assert.False(t, none.Set())
	for _, bad := range []string{"0-10", "0", "10-5", "a-b", "100000-", "-5", "1-2147483647", "1-2-3"} {
		_, err := agentuid.Parse(bad)
		assert.Error(t, err, bad)
		if err != nil {
			assert.Contains(t, err.Error(), "--agent-uids", "the error names the flag")
		}
	}
	assert.True(t, agentuid.Default.Set())
	assert.Greater(t, agentuid.Default.First, uint32(165535), "above the usual /etc/subuid ranges")
}

// TestClaimsAreHostWide: two claimers never get the same uid; a claim
// whose holder is gone is taken over; the last release removes the
// directory of claims.
func TestClaimsAreHostWide(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFailUnderCI(t, "claims live in a root directory: the test needs root (uid %d)", os.Geteuid())
	}
	dir := agentuid.ClaimDir
	agentuid.ClaimDir = filepath.Join(t.TempDir(), "claims")
	t.Cleanup(func() { agentuid.ClaimDir = dir })
	r := agentuid.Range{First: 1_600_000_000, Last: 1_600_000_001}
	a, err := agentuid.Claim(r, 0)
	require.NoError(t, err)
	b, err := agentuid.Claim(r, 0)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	_, err = agentuid.Claim(r, 0)
	assert.Error(t, err, "both uids are held")

	agentuid.Hold(a, 1<<22+12345) // a holder that is not running
	c, err := agentuid.Claim(r, 0)
	require.NoError(t, err)
	assert.Equal(t, a, c, "a stale claim is taken over")

	agentuid.Release(b)
	agentuid.Release(c)
	_, err = os.Stat(agentuid.ClaimDir)
	assert.True(t, os.IsNotExist(err), "the last release removes the directory")
}
