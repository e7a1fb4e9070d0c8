package testutil

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(LeaveNothing(m)) }

// TestStartedFindsAnOrphan: a process whose parent exited (a session's
// agentctl after its server was killed) is still found as started by the
// test process, since LeaveNothing made it a child subreaper; and
// StopProcessesNaming ends it.
func TestStartedFindsAnOrphan(t *testing.T) {
	marker := "leave-nothing-" + strconv.Itoa(os.Getpid())
	// The outer sh starts a looping sh (named by marker) in the background
	// and exits at once: the looping sh is orphaned.
	require.NoError(t, exec.Command("sh", "-c", `sh -c 'while :; do sleep 1; done' "$0" &`, marker).Run())
	var orphan int
	require.Eventually(t, func() bool {
		ps, err := processes()
		require.NoError(t, err)
		for _, p := range started(ps, os.Getpid(), nil) {
			if strings.Contains(p.Args, marker) {
				orphan = p.PID
				assert.Equal(t, os.Getpid(), p.PPID, "reparented to the test process")
				return true
			}
		}
		return false
	}, 2*time.Minute, 10*time.Millisecond, "the orphaned sh is found as started by the tests")
	assert.Len(t, ProcessesNaming(t, marker), 1)

	StopProcessesNaming(t, marker)
	assert.Empty(t, ProcessesNaming(t, marker), "ended")
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(orphan, &ws, 0, nil) // reap it: it is the test process's child now
}

// TestLeftSessionDirsAreFound: an agent session directory made while the
// tests ran, by the test process, a child of it or a process now dead, that
// no live process names, is left behind. One a live process names is not;
// nor one made by a live process of someone else (another test package's
// executor, between making it and starting the agentctl that names it:
// the guard used to remove that one); nor one whose name carries no pid.
func TestLeftSessionDirsAreFound(t *testing.T) {
	// Its own root: other test packages (and other runs on the machine)
	// make and remove session directories in the shared temporary
	// directory while this test runs.
	root := t.TempDir()
	before := sessionDirs(root)
	dir := func(creator string) string {
		d, err := os.MkdirTemp(root, "toolscope-sessions-"+creator)
		require.NoError(t, err)
		return d
	}
	self := os.Getpid()
	inUse := fmt.Sprintf("%s/toolscope-sessions-%d-in-use", root, self)
	holder := exec.Command("sh", "-c", `read x`, inUse) // a live child, naming inUse until its stdin closes
	stdin, err := holder.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = holder.Wait() })
	gone := exec.Command("true")
	require.NoError(t, gone.Run())

	left := []string{
		dir(fmt.Sprintf("%d-", self)),               // made by the test process
		dir(fmt.Sprintf("%d-", holder.Process.Pid)), // by a child of it
		dir(fmt.Sprintf("%d-", gone.Process.Pid)),   // by a process now dead
	}
	require.NoError(t, os.Mkdir(inUse, 0o700)) // named by the live holder
	dir(fmt.Sprintf("%d-", os.Getppid()))      // made by a live process of someone else
	dir("nopid")                               // not attributable

	ps, err := processes()
	require.NoError(t, err)
	slices.Sort(left)
	assert.Equal(t, left, leftSessionDirs(root, before, ps, self))
	assert.Equal(t, 1234, sessionDirCreator("/tmp/toolscope-sessions-1234-567"))
	assert.Zero(t, sessionDirCreator("/tmp/toolscope-sessions-567"))
}

// TestLeftContainersAreFound: a container labelled as toolscope's that
// mounts one of the package's builds is left behind, running or not, and
// removed once reported; one that mounts nothing of the package is not.
// The containers are only created, never started, from an image the test
// imports itself: a new Docker engine has no image at all.
func TestLeftContainersAreFound(t *testing.T) {
	c := dockerClient()
	if c == nil {
		SkipOrFailUnderCI(t, "no Docker engine socket")
	}
	if _, err := c.Get("http://docker/_ping"); err != nil {
		SkipOrFailUnderCI(t, "no Docker engine answers: %v", err)
	}
	image := importImage(t, c)
	build := t.TempDir()
	create := func(bind string) string {
		body, _ := json.Marshal(map[string]any{
			"Image": image, "Cmd": []string{"/nothing"}, "Labels": map[string]string{LabelTest: "leave-nothing"},
			"HostConfig": map[string]any{"Binds": []string{bind + ":/mounted:ro"}},
		})
		resp, err := c.Post("http://docker/containers/create", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var created struct {
			ID string `json:"Id"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
		require.NotEmpty(t, created.ID, "create: %s", resp.Status)
		t.Cleanup(func() { removeContainer(created.ID) })
		return created.ID
	}
	ours := create(build)
	create(t.TempDir()) // not a build of the package's

	left, err := leftContainers([]string{build})
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, ours, left[0].ID)
	removeContainer(ours)
	left, err = leftContainers([]string{build})
	require.NoError(t, err)
	assert.Empty(t, left, "removed")
}

// importImage imports a one-file image labelled LabelTest, named for this
// test process, and removes it when the test ends.
func importImage(t *testing.T, c *http.Client) string {
	t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	body := []byte("toolscope leave-nothing test\n")
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "marker", Mode: 0o644, Size: int64(len(body))}))
	_, err := tw.Write(body)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	repo, tag := "toolscope-test-leave", strconv.Itoa(os.Getpid())
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}, "changes": {"LABEL " + LabelTest + "=leave-nothing"}}
	resp, err := c.Post("http://docker/images/create?"+q.Encode(), "application/x-tar", &layer)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "import an image: %s", out)
	require.NotContains(t, string(out), `"error"`, "import an image")
	image := repo + ":" + tag
	t.Cleanup(func() {
		req, err := http.NewRequest(http.MethodDelete, "http://docker/images/"+url.PathEscape(image)+"?force=1", nil)
		if err != nil {
			return
		}
		if resp, err := c.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	})
	return image
}
