package executortest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
)

var probe = testutil.Binary{Package: "github.com/toolscope/toolscope/executors/executortest/probe", Name: "probe"}

// Probe builds the probe agent (package probe) once per test process and
// returns its path, in a directory every uid may enter: the agents of an
// isolating backend run under uids of their own.
func Probe(t testing.TB) string {
	t.Helper()
	path := probe.Path(t)
	require.NoError(t, os.Chmod(filepath.Dir(path), 0o755))
	return path
}

// Names of the variables the isolation suite places in the executor's
// environment.
const (
	EnvPassed   = "PROBE_PASSED"    // named by the launch (--env): must reach the agent
	EnvModelKey = "PROBE_MODEL_KEY" // the launch's credential_env: must reach the agent
	// EnvTracing is a tracing variable (profiles.TracingEnv; it can hold a
	// collector's API key): agentctl's, never the agent's.
	EnvTracing = "OTEL_EXPORTER_OTLP_HEADERS"
)

// Secrets are variables of the executor's environment no agent may see:
// the forges' tokens (the values credential references point to) and a
// random canary.
var Secrets = []string{"GH_TOKEN", "GITLAB_TOKEN", "TOOLSCOPE_TEST_CANARY"}

var (
	canariesOnce sync.Once
	canaries     map[string]string
)

// Canaries returns the values of Secrets, EnvPassed, EnvModelKey and EnvTracing, random
// and fixed for the test process. A backend whose agentctl's environment is
// not the test process's (a remote daemon) starts it with these.
func Canaries() map[string]string {
	canariesOnce.Do(func() {
		canaries = map[string]string{
			"GH_TOKEN": "ghp_" + rand.Text(), "GITLAB_TOKEN": "glpat-" + rand.Text(), "TOOLSCOPE_TEST_CANARY": "canary" + rand.Text(),
			EnvPassed: "passed" + rand.Text(), EnvModelKey: "modelkey" + rand.Text(), EnvTracing: "authorization=otel" + rand.Text(),
		}
	})
	return canaries
}

// CanaryEnv is Canaries as NAME=value entries.
func CanaryEnv() []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(Canaries())) {
		env = append(env, k+"="+Canaries()[k])
	}
	return env
}

// Isolation is what RunIsolation needs of a backend.
type Isolation struct {
	Backend
	// Probe is the probe's path where the backend runs agents.
	Probe string
	// AgentctlEnviron returns the environment agentctl of h runs with, as
	// /proc/PID/environ has it (nil if the backend cannot see it).
	AgentctlEnviron func(t *testing.T, h executors.Handle) []byte
	// Refusal is the gRPC code agentctl's API gives a caller without the
	// secret: Unauthenticated, or Unavailable under mutual TLS (the
	// handshake fails).
	Refusal string
	// Ports returns the ports the probe calls agentctl's API on, given
	// the other session's handle (nil: every port agentctl's uid listens
	// on, which is right in a network namespace of agentctl's own).
	Ports func(t *testing.T, other executors.Handle) []string
	// OtherDirs returns where the session of h keeps its files, as the
	// agents of this backend would name them (nil: the same directory of
	// sessions as the probe's).
	OtherDirs func(t *testing.T, h executors.Handle) []string
	// Forbidden are more files the agent must not read where it runs
	// (agentctl's TLS key, a service-account token); APIs are URLs that
	// must not answer it with a 2xx (the Kubernetes API server).
	Forbidden, APIs []string
}

// RequireRoot fails under CI and skips loudly elsewhere when the tests do
// not run as root: only root can run agents under uids of their own.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	testutil.SkipOrFailUnderCI(t, "the isolation tests need root to run agents under uids of their own (uid %d)", os.Geteuid())
}

// reportTool is the external tool the probe reports through.
var reportTool = executors.ExternalTool{Name: "probe__report", Description: "The probe's findings.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"report":{"type":"string"}},"required":["report"]}`)}

// RunIsolation runs a hostile agent (the probe) in a session of the
// backend, next to another session, with secrets in the executor's
// environment, and checks that every attempt to cross a boundary was
// refused: agentctl's launch secret (its file, /proc/<agentctl>/environ,
// mem, fds), the other session's files, agentctl's gRPC API without the
// secret; and that neither agentctl's environment nor the agent's holds a
// secret, while what the launch named (--env, the credential variable)
// and the agent's own MCP configuration are there.
func RunIsolation(t *testing.T, b Isolation) {
	RequireRoot(t)
	for _, kv := range CanaryEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reports := make(chan map[string]string, 1)
	e := b.New(t, func(_ context.Context, c executors.ToolCall) executors.ToolResult {
		if c.Tool != reportTool.Name {
			return executors.ToolResult{Text: "answered " + c.Tool}
		}
		var args struct{ Report string }
		var r map[string]string
		if json.Unmarshal(c.Arguments, &args) != nil || json.Unmarshal([]byte(args.Report), &r) != nil {
			return executors.ToolResult{IsError: true, Code: "invalid_arguments", Text: "unreadable report"}
		}
		r["session"] = c.SessionID
		select {
		case reports <- r:
		default:
		}
		return executors.ToolResult{Text: "reported"}
	}, nil)
	n := time.Now().UnixNano() % 1e6
	spec := func(id string) executors.Spec {
		s := executors.Spec{SessionID: fmt.Sprintf("%s-%d", id, n), TaskID: "task_" + id, WorkspaceID: "ws_" + id, Mode: executors.ModeTask,
			Providers: providers.Of("github"), Generation: 1, External: []executors.ExternalTool{reportTool}, ExternalGeneration: 1}
		if b.Prepare != nil {
			b.Prepare(&s)
		}
		return s
	}
	launch := func(s executors.Spec) (executors.Handle, executors.Status) {
		h, st, err := e.Launch(ctx, s, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
		return h, st
	}

	otherSpec := spec("other")
	otherHandle, other := launch(otherSpec)
	var otherDirs []string
	if b.OtherDirs != nil {
		otherDirs = b.OtherDirs(t, otherHandle)
	}
	s := spec("probe")
	s.Agent = &executors.AgentCommand{Argv: []string{b.Probe}, CredentialEnv: EnvModelKey, PassEnv: []string{EnvPassed},
		Env: map[string]string{"PROBE_OTHER_ID": otherSpec.SessionID, "PROBE_OTHER_DIRS": strings.Join(otherDirs, string(filepath.ListSeparator))}}
	s.Agent.Env["PROBE_FORBIDDEN"] = strings.Join(b.Forbidden, string(filepath.ListSeparator))
	s.Agent.Env["PROBE_APIS"] = strings.Join(b.APIs, ",")
	if b.Ports != nil {
		s.Agent.Env["PROBE_PORTS"] = strings.Join(b.Ports(t, otherHandle), ",")
	}
	h, _ := launch(s)

	var r map[string]string
	select {
	case r = <-reports:
	case <-ctx.Done():
		t.Fatalf("the probe never reported through its own MCP endpoint")
	}
	assert.Equal(t, s.SessionID, r["session"])
	for k, v := range r {
		t.Logf("probe %s: %.200q", k, v)
	}

	secrets := map[string]string{"the other session's MCP token": other.MCPToken}
	for _, name := range Secrets {
		secrets[name] = Canaries()[name]
	}
	if secret := launchSecret(h); secret != "" {
		secrets["agentctl's launch secret"] = secret
	}
	leaks := func(where string, data string) int {
		hits := 0
		for name, v := range secrets {
			if v != "" && strings.Contains(data, v) {
				t.Errorf("%s holds %s", where, name)
				hits++
			}
		}
		return hits
	}

	refused := 0
	denied := func(key string) {
		t.Helper()
		v, ok := r[key]
		if !ok {
			return
		}
		if assert.True(t, strings.HasPrefix(v, "denied: "), "the agent read %s: %.120q", key, v) {
			refused++
		}
	}
	assert.NotEqual(t, r["agentctl_uid"], r["uid"], "the agent runs under a uid of its own, not agentctl's")
	// Its HOME and temporary directory are its session's, which end with
	// it: the uid serves later sessions, the host's /tmp would keep what
	// this one leaves for them.
	assert.Equal(t, r["own"], r["home"], "the agent's HOME is its session's directory")
	assert.Equal(t, filepath.Join(r["own"], "tmp"), r["tmpdir"], "the agent's TMPDIR is inside its session's directory")
	assert.True(t, strings.HasPrefix(r["tmp_write"], "wrote: "+r["tmpdir"]+string(filepath.Separator)),
		"the agent writes its temporary files there: %s", r["tmp_write"])
	for _, k := range []string{"agentctl/environ", "agentctl/mem", "agentctl/fd", "agentctl/root/proc/1/environ", "agentctl/cwd",
		"agentctl/maps", "agentctl/auxv", "secret_file", "secret_file(/toolscope/secret)", "sessions_dir"} {
		denied(k)
	}
	others := 0
	for k := range r {
		if strings.HasPrefix(k, "other[") {
			denied(k)
			others++
		}
	}
	assert.Positive(t, others, "the probe tried the other session's files")
	forbidden, apis := 0, 0
	for k, v := range r {
		switch {
		case strings.HasPrefix(k, "forbidden["):
			denied(k)
			forbidden++
		case strings.HasPrefix(k, "api["):
			assert.False(t, strings.HasPrefix(v, "status 2"), "%s answered the agent: %s", k, v)
			apis++
		}
	}
	assert.Equal(t, len(b.Forbidden), forbidden, "the probe tried every forbidden file")
	assert.Equal(t, len(b.APIs), apis, "the probe tried every API")
	if r["pid1/environ"] != "" && r["agentctl_pid"] != "1" {
		denied("pid1/environ")
	}
	calls, refusedByAgentctl := 0, 0
	for k, v := range r {
		if strings.HasPrefix(k, "grpc:") {
			calls++
			assert.NotContains(t, v, "=OK", "agentctl's API at %s answered a call without the secret", k)
			if v == "stop="+b.Refusal+" create="+b.Refusal {
				refusedByAgentctl++
			}
		}
	}
	assert.Positive(t, refusedByAgentctl, "the probe reached agentctl's API and was refused with %s", b.Refusal)

	// Positive controls: the agent's own MCP files, what the launch
	// named, the MCP variables.
	assert.Equal(t, "read", r["own/mcp.json"], "the agent reads its own MCP configuration")
	env := r["self/environ"]
	assert.Contains(t, env, EnvPassed+"="+Canaries()[EnvPassed], "--env NAME reaches the agent")
	assert.Contains(t, env, EnvModelKey+"="+Canaries()[EnvModelKey], "the credential variable reaches the agent")
	assert.Contains(t, env, "TOOLSCOPE_MCP_TOKEN=", "the agent gets its MCP token")
	report, _ := json.Marshal(r)
	hits := leaks("what the agent could read", string(report))
	assert.NotContains(t, string(report), Canaries()[EnvTracing], "the agent gets none of agentctl's tracing variables")

	if b.AgentctlEnviron != nil {
		environ := string(b.AgentctlEnviron(t, h))
		assert.Contains(t, environ, EnvPassed+"="+Canaries()[EnvPassed], "agentctl gets what the launch named, to pass it on")
		assert.Contains(t, environ, EnvTracing+"="+Canaries()[EnvTracing], "agentctl gets the tracing variables")
		hits += leaks("agentctl's environment", environ)
	}
	testutil.Figure(t, e.Name()+" executor: agent isolation",
		"%d reads of agentctl's secret, its /proc entries and another session's files refused; %d of agentctl's TCP ports called without the secret, none answered; %d of %d secrets in the agent's reach or agentctl's environment (controls: own MCP config read, --env and credential variable present)",
		refused, calls, hits, len(secrets))
}

// launchSecret reads the secret file a local or docker handle names.
func launchSecret(h executors.Handle) string {
	var st struct {
		SecretFile string `json:"secret_file"`
	}
	if json.Unmarshal(h.State, &st) != nil || st.SecretFile == "" {
		return ""
	}
	b, err := os.ReadFile(st.SecretFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
