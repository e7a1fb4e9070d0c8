package agentuid_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/errdefs"
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

// TestClaimsAreHostWide: two claimers never get the same uid; a released
// uid is claimed again; a claim whose holder is gone is taken over — but
// not this process's own before it releases it, and a release does not
// free a claim another live process took over; the directory of claims is
// kept, private, after the last release.
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
	assert.ErrorIs(t, err, errdefs.ErrResourceExhausted)

	const dead = 1<<22 + 12345 // a holder that is not running
	agentuid.Hold(a, dead)
	_, err = agentuid.Claim(r, 0)
	assert.Error(t, err, "this process's own claim is not taken over before it releases it")

	agentuid.Release(b)
	again, err := agentuid.Claim(r, 1)
	require.NoError(t, err)
	assert.Equal(t, b, again, "a released uid is claimed again")

	// A claim left behind by a holder that died (an orchestrator that
	// crashed): stale, taken over.
	agentuid.Release(a)
	claim := filepath.Join(agentuid.ClaimDir, strconv.FormatUint(uint64(a), 10))
	require.NoError(t, os.WriteFile(claim, []byte(strconv.Itoa(dead)+"\n"), 0o600))
	c, err := agentuid.Claim(r, 0)
	require.NoError(t, err)
	assert.Equal(t, a, c, "a stale claim is taken over")

	// Another process took the claim over (pid 1 holds it): releasing the
	// uid here leaves its claim.
	require.NoError(t, os.WriteFile(claim, []byte("1\n"), 0o600))
	agentuid.Release(c)
	assert.FileExists(t, claim, "a claim another live process holds is not released")
	require.NoError(t, os.Remove(claim))

	agentuid.Release(again)
	fi, err := os.Lstat(agentuid.ClaimDir)
	require.NoError(t, err, "the directory of claims is kept after the last release")
	assert.True(t, fi.IsDir())
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	left, err := os.ReadDir(agentuid.ClaimDir)
	require.NoError(t, err)
	assert.Empty(t, left, "every claim was released")
}
