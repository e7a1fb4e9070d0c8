package testutil

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/toolscope/toolscope/internal/procs"
)

// SessionsDirPattern names the directories the local executor makes in
// the temporary directory for its agents (one per session, removed when
// it ends): toolscope-sessions-<pid>-<random>, pid being the process that
// made it (executors/local names it so), which attributes it exactly.
const SessionsDirPattern = "toolscope-sessions-*"

// sessionDirs returns the SessionsDirPattern directories in root (the
// temporary directory, for the guard).
func sessionDirs(root string) map[string]bool {
	matches, _ := filepath.Glob(filepath.Join(root, SessionsDirPattern))
	out := map[string]bool{}
	for _, m := range matches {
		out[m] = true
	}
	return out
}

// sessionDirCreator returns the pid in a session directory's name, or 0
// if it names none.
func sessionDirCreator(dir string) int {
	rest, ok := strings.CutPrefix(filepath.Base(dir), "toolscope-sessions-")
	if !ok {
		return 0
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// leftSessionDirs returns, sorted, the SessionsDirPattern directories made
// since before that are self's (made by self or a process descending from
// it) or whose maker is dead, and that no live process names. Another
// package's directory is never counted: its maker is alive, and may be
// between making it and starting the agentctl that names it. A directory
// whose name carries no pid is not attributable, and is left alone.
func leftSessionDirs(root string, before map[string]bool, ps []procs.Process, self int) []string {
	live := map[int]bool{}
	for _, p := range ps {
		if p.State != 'Z' && p.State != 'X' {
			live[p.PID] = true
		}
	}
	mine := map[int]bool{self: true}
	for _, p := range started(ps, self, nil) {
		mine[p.PID] = true
	}
	var left []string
	for dir := range sessionDirs(root) {
		creator := sessionDirCreator(dir)
		if before[dir] || creator == 0 || (live[creator] && !mine[creator]) {
			continue
		}
		named := false
		for _, p := range ps {
			if p.State != 'Z' && strings.Contains(p.Args, dir) {
				named = true
				break
			}
		}
		if !named {
			left = append(left, dir)
		}
	}
	sort.Strings(left)
	return left
}

// container is what leftContainers reads of a container.
type container struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	Labels map[string]string `json:"Labels"`
	Mounts []struct {
		Source string `json:"Source"`
	} `json:"Mounts"`
}

// Container labels that mark a container as toolscope's: the docker
// executor's, and the one tests put on containers they start themselves
// (a remote host's, say).
const (
	labelManaged = "toolscope.managed"
	LabelTest    = "toolscope.test"
)

// dockerClient returns an HTTP client for the Docker engine's socket
// ($DOCKER_HOST if it is a unix:// address), or nil without one.
func dockerClient() *http.Client {
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if !strings.HasPrefix(h, "unix://") {
			return nil
		}
		sock = strings.TrimPrefix(h, "unix://")
	}
	if _, err := os.Stat(sock); err != nil {
		return nil
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

// leftContainers returns the containers, running or not, labelled as
// toolscope's that mount one of builds: this test process's builds of
// agentctl (or of another program), so they are this package's. Without
// a Docker engine there are none.
func leftContainers(builds []string) ([]container, error) {
	c := dockerClient()
	if c == nil || len(builds) == 0 {
		return nil, nil
	}
	resp, err := c.Get("http://docker/containers/json?all=1")
	if err != nil {
		return nil, nil // no engine answers: nothing could have been started
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list containers: engine answered %s", resp.Status)
	}
	var all []container
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var left []container
	for _, ct := range all {
		_, managed := ct.Labels[labelManaged]
		_, test := ct.Labels[LabelTest]
		if !managed && !test {
			continue
		}
	mounts:
		for _, m := range ct.Mounts {
			for _, b := range builds {
				if b != "" && strings.HasPrefix(m.Source, b) {
					left = append(left, ct)
					break mounts
				}
			}
		}
	}
	return left, nil
}

// removeContainer removes a container left behind, with its volumes.
func removeContainer(id string) {
	c := dockerClient()
	if c == nil {
		return
	}
	req, err := http.NewRequest(http.MethodDelete, "http://docker/containers/"+url.PathEscape(id)+"?force=1&v=1", nil)
	if err != nil {
		return
	}
	if resp, err := c.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}
