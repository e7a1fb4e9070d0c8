package agentuid_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
)

// attacker is the unprivileged local account of the attacks below.
const attacker = 1_700_000_321

// attackRange is the agent uids of the attacks: the attacker plants a
// claim for every one but the last, leaving that one for the victim's
// session.
var attackRange = agentuid.Range{First: 1_600_100_000, Last: 1_600_100_003}

// asAttacker runs a shell script under the attacker's uid and gid, with no
// other group, from /.
func asAttacker(t *testing.T, script string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: attacker, Gid: attacker, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// claimsIn points ClaimDir, for the test, at a directory in a parent of
// the given mode (0777 and sticky: like /tmp), both under a directory every uid may
// enter and the test removes. It returns ClaimDir.
func claimsIn(t *testing.T, parentMode os.FileMode) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.SkipOrFailUnderCI(t, "the attacks play another uid: the test needs root (uid %d)", os.Geteuid())
	}
	parent := filepath.Join(testutil.TraversableDir(t), "shared")
	require.NoError(t, os.Mkdir(parent, 0o700))
	require.NoError(t, os.Chmod(parent, parentMode))
	saved := agentuid.ClaimDir
	agentuid.ClaimDir = filepath.Join(parent, "toolscope-agent-uids")
	t.Cleanup(func() { agentuid.ClaimDir = saved })
	return agentuid.ClaimDir
}

// plantScript is the attacker's script: the claims of every uid of attackRange
// but the last, held by pid 1 (alive: never stale), in directory $1.
func plantScript() string {
	var b strings.Builder
	for uid := attackRange.First; uid < attackRange.Last; uid++ {
		fmt.Fprintf(&b, `echo 1 > "$1/%d" && `, uid)
	}
	return b.String() + "true"
}

// entries lists a directory's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestTheDefaultClaimDirCannotBeTakenByAnotherUID: as root, the claims
// live in /run, where another uid can create nothing — neither the
// directory of claims nor anything beside it — and the directory, when it
// exists, is root's alone. Before, they lived in the shared temporary
// directory, where any account could make the directory first.
func TestTheDefaultClaimDirCannotBeTakenByAnotherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFailUnderCI(t, "the default claims location is root's: the test needs root (uid %d)", os.Geteuid())
	}
	dir := agentuid.ClaimDir // the default: no test changed it yet
	parent := filepath.Dir(dir)
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	require.NoError(t, err)
	if fi, err := os.Stat("/run"); err == nil && fi.IsDir() {
		assert.Equal(t, "/run/toolscope-agent-uids", dir)
	}
	assert.NotEqual(t, tmp, parent, "not in the shared temporary directory")

	// The unprivileged account tries to make the directory of claims,
	// and an entry beside it.
	probe := filepath.Join(parent, fmt.Sprintf("toolscope-agent-uids-probe-%d", os.Getpid()))
	t.Cleanup(func() {
		for _, p := range []string{dir, probe} {
			if fi, err := os.Lstat(p); err == nil && fi.Sys().(*syscall.Stat_t).Uid == attacker {
				assert.NoError(t, os.RemoveAll(p)) // only what the attacker made
			}
		}
	})
	outDir, errDir := asAttacker(t, `mkdir -m 0777 "$1"`, dir)
	outProbe, errProbe := asAttacker(t, `mkdir -m 0777 "$1"`, probe)
	assert.Error(t, errDir, "another uid makes the directory of claims")
	assert.Error(t, errProbe, "another uid makes a directory in %s", parent)
	assert.Contains(t, outProbe, "Permission denied")

	fi, err := os.Lstat(parent)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.Zero(t, st.Uid, "%s is root's", parent)
	assert.Zero(t, fi.Mode().Perm()&0o022, "%s is writable by root only (mode %s)", parent, fi.Mode())
	existing := "absent"
	if fi, err := os.Lstat(dir); err == nil {
		existing = fmt.Sprintf("present, %s, uid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
		assert.True(t, fi.IsDir(), "a directory, not a link")
		assert.Zero(t, fi.Sys().(*syscall.Stat_t).Uid, "root's")
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	}
	testutil.Figure(t, "agent uid claims: default location", "%s (parent %s, uid %d); as uid %d, mkdir there: %q, mkdir beside it: %q; the directory is %s",
		dir, fi.Mode(), st.Uid, attacker, outDir, outProbe, existing)
}

// TestClaimRefusesADirectoryPlantedByAnotherUID replays the attack: where
// another account can make the directory of claims first (the temporary
// directory, the fallback without /run), it makes it world-writable and
// plants a claim for every uid but one, to steer the victim's session to
// that uid and then free it for a second session. Claim refuses the
// directory, naming it, its owner and its mode, and writes nothing in it;
// so does a directory of root's that others may write to.
func TestClaimRefusesADirectoryPlantedByAnotherUID(t *testing.T) {
	cases := []struct {
		name, script string
		owner        string // named in the refusal
		mode         string
	}{
		{"the attacker's, mode 0777", `mkdir -m 0777 "$1" && ` + plantScript(), fmt.Sprintf("uid %d", attacker), "0777"},
		{"the attacker's, mode 0700", `mkdir -m 0700 "$1" && ` + plantScript(), fmt.Sprintf("uid %d", attacker), "0700"},
		{"root's, left mode 0777", plantScript(), "uid 0", "0777"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := claimsIn(t, 0o777|os.ModeSticky)
			if c.owner == "uid 0" {
				require.NoError(t, os.Mkdir(dir, 0o700))
				require.NoError(t, os.Chmod(dir, 0o777))
			}
			out, err := asAttacker(t, c.script, dir)
			require.NoError(t, err, "the attacker plants the directory: %s", out)
			planted := entries(t, dir)
			require.Len(t, planted, attackRange.Size()-1)

			uid, err := agentuid.Claim(attackRange, 0)
			require.Error(t, err, "Claim used the planted directory: it gave uid %d, the one the attacker left free", uid)
			assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
			assert.ErrorContains(t, err, dir)
			assert.ErrorContains(t, err, c.owner)
			assert.ErrorContains(t, err, c.mode)
			assert.ErrorContains(t, err, "rm -r "+dir, "it says what to do")

			agentuid.Hold(attackRange.Last, os.Getpid())
			agentuid.Release(attackRange.First)
			assert.Equal(t, planted, entries(t, dir), "nothing is claimed, held or released in it")
			testutil.Figure(t, "agent uid claims: planted directory, "+c.name, "%d planted claims, Claim refused: %v", len(planted), err)
		})
	}
}

// TestClaimRefusesASymlink: a symbolic link planted where the directory of
// claims goes is refused — whether it leads to the attacker's directory of
// planted claims or to a private directory of root's — and nothing is
// written where it leads.
func TestClaimRefusesASymlink(t *testing.T) {
	for _, target := range []string{"the attacker's directory", "a private directory of root's"} {
		t.Run(target, func(t *testing.T) {
			dir := claimsIn(t, 0o777|os.ModeSticky)
			to := filepath.Join(filepath.Dir(dir), "elsewhere")
			if target == "the attacker's directory" {
				out, err := asAttacker(t, `mkdir -m 0777 "$2" && ln -s "$2" "$1" && `+strings.ReplaceAll(plantScript(), `"$1/`, `"$2/`), dir, to)
				require.NoError(t, err, "the attacker plants the link: %s", out)
			} else {
				require.NoError(t, os.Mkdir(to, 0o700))
				out, err := asAttacker(t, `ln -s "$2" "$1"`, dir, to)
				require.NoError(t, err, "the attacker plants the link: %s", out)
			}
			before := entries(t, to)

			uid, err := agentuid.Claim(attackRange, 0)
			require.Error(t, err, "Claim followed the link: it gave uid %d", uid)
			assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
			assert.ErrorContains(t, err, dir)
			assert.ErrorContains(t, err, "symbolic link")
			assert.ErrorContains(t, err, fmt.Sprintf("uid %d", attacker))

			agentuid.Hold(attackRange.Last, os.Getpid())
			assert.Equal(t, before, entries(t, to), "nothing is written where the link leads")
			fi, lerr := os.Lstat(dir)
			require.NoError(t, lerr)
			assert.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "the link is left for its owner to answer for")
			testutil.Figure(t, "agent uid claims: symbolic link to "+target, "Claim refused: %v", err)
		})
	}
}

// TestClaimRefusesADirectoryAnotherUIDCouldReplace: a directory of claims
// that is root's and private, but in a parent another account may write
// to (not sticky) or owns, is refused: that account could rename it away,
// let a fresh one be made, and put it back, for two sessions to share a
// uid.
func TestClaimRefusesADirectoryAnotherUIDCouldReplace(t *testing.T) {
	for _, parent := range []string{"mode 0777", "the attacker's"} {
		t.Run(parent, func(t *testing.T) {
			dir := claimsIn(t, 0o777)
			if parent == "the attacker's" {
				require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
				require.NoError(t, os.Chown(filepath.Dir(dir), attacker, attacker))
			}
			uid, err := agentuid.Claim(attackRange, 0)
			require.Error(t, err, "Claim made its directory where another uid can replace it: it gave uid %d", uid)
			assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
			assert.ErrorContains(t, err, filepath.Dir(dir))
			assert.NoDirExists(t, dir, "nothing is made there")
			testutil.Figure(t, "agent uid claims: parent "+parent, "Claim refused: %v", err)
		})
	}
}

// TestClaimsInASharedTempDirStillWork: where the directory of claims is
// the process's own in a sticky world-writable parent (the fallback, made
// first by root), claims work as ever.
func TestClaimsInASharedTempDirStillWork(t *testing.T) {
	dir := claimsIn(t, 0o777|os.ModeSticky)
	a, err := agentuid.Claim(attackRange, 0)
	require.NoError(t, err)
	b, err := agentuid.Claim(attackRange, 0)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	fi, err := os.Lstat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "made mode 0700")
	assert.ElementsMatch(t, []string{strconv.FormatUint(uint64(a), 10), strconv.FormatUint(uint64(b), 10)}, entries(t, dir))
	agentuid.Release(a)
	agentuid.Release(b)
	assert.Empty(t, entries(t, dir))
}
