package kubernetes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/kubernetes"
	"github.com/toolscope/toolscope/executors/kubernetes/kubetest"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.LeaveNothing(m, kubetest.Stop, kubetest.RemoveBuilds, executortest.RemoveBuilds))
}

// Images of the test cluster (imported, never pulled).
const (
	agentctlImage = "toolscope.test/agentctl:1"
	scratchImage  = "toolscope.test/scratch:1"
	probeImage    = "toolscope.test/probe:1"
	gitImage      = "toolscope.test/git:1" // executortest.GitRootfs
)

// Rules is the orchestrator's Role in its sessions' namespace: the least
// that works, verb by verb (docs/operations.md, Running agents on
// Kubernetes). The tests run the executor as a user bound to it alone.
var Rules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"get", "create"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "patch", "list", "delete"}},
}

type fixture struct {
	cluster   *kubetest.Cluster
	namespace string
	config    *rest.Config // the orchestrator's: Rules in namespace, nothing else
	stateDir  string
}

// setup starts (or reuses) the cluster, imports the images and makes a
// namespace of the test's own with an orchestrator user bound to Rules.
func setup(t testing.TB) fixture {
	t.Helper()
	c := kubetest.Start(t)
	c.Image(t, agentctlImage, map[string]kubetest.File{"/agentctl": {Path: executortest.Agentctl(t)}}, []string{"/agentctl"})
	c.Image(t, scratchImage, map[string]kubetest.File{"/marker": {Data: []byte("toolscope test image\n"), Mode: 0o644}}, nil)
	ctx := context.Background()
	ns := fmt.Sprintf("ts-%d", time.Now().UnixNano()%1e9)
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	// Pods are admitted once the namespace's default ServiceAccount
	// exists (the controller-manager makes it), token or not.
	require.Eventually(t, func() bool {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the namespace's default ServiceAccount")
	user := "toolscope-orchestrator-" + ns
	_, err = c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "toolscope"}, Rules: Rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "toolscope"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "toolscope"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg, err := c.UserConfig(user)
	require.NoError(t, err)
	f := fixture{cluster: c, namespace: ns, config: cfg, stateDir: t.TempDir()}
	// After the test's own cleanups (stops, sweeps): nothing is left.
	t.Cleanup(func() { f.leftNothing(t) })
	return f
}

func (f fixture) options(id string, calls executors.CallHandler, events executors.EventHandler) kubernetes.Options {
	opts := kubernetes.Options{Config: f.config, Namespace: f.namespace, AgentctlImage: agentctlImage, StateDir: f.stateDir,
		ImagePullPolicy: corev1.PullNever, Calls: calls, Events: events, OrchestratorID: id}
	if os.Getenv("KUBETEST_DEBUG") != "" {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return opts
}

func (f fixture) executor(t testing.TB, opts kubernetes.Options) *kubernetes.Executor {
	t.Helper()
	e, err := kubernetes.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// leftNothing checks that no pod or Secret of toolscope's is left in the
// namespace once the pods stopped terminating.
func (f fixture) leftNothing(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	var left []string
	deadline := time.Now().Add(time.Minute)
	for {
		left = left[:0]
		pods, err := f.cluster.Client.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelManaged})
		require.NoError(t, err)
		rv := pods.ResourceVersion
		for _, p := range pods.Items {
			left = append(left, "pod "+p.Name)
		}
		secrets, err := f.cluster.Client.CoreV1().Secrets(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelManaged})
		require.NoError(t, err)
		for _, s := range secrets.Items {
			left = append(left, "Secret "+s.Name)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		// The next change of a pod, or a second: then look again.
		w, err := f.cluster.Client.CoreV1().Pods(f.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelManaged, ResourceVersion: rv})
		require.NoError(t, err)
		select {
		case <-w.ResultChan():
		case <-time.After(time.Second):
		}
		w.Stop()
	}
	assert.Empty(t, left, "left behind in namespace %s", f.namespace)
}

func TestConformance(t *testing.T) {
	f := setup(t)
	testutil.Figure(t, "kubernetes test cluster", "started in %.1f s (node Ready, default ServiceAccount)", f.cluster.Started.Seconds())
	var current *kubernetes.Executor
	executortest.Run(t, executortest.Backend{
		New: func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor {
			current = f.executor(t, f.options("conformance", calls, events))
			return current
		},
		Kill: func(t *testing.T, h executors.Handle) {
			require.NoError(t, current.Kill(context.Background(), h))
		},
		Prepare:     func(s *executors.Spec) { s.Image = scratchImage },
		ReportsLoss: true,
		// A pod reaches the host at the cluster link's host end.
		Workspaces: &executortest.Workspaces{Host: f.cluster.HostIP,
			Prepare: func(s *executors.Spec) { s.Image = f.cluster.RootfsImage(t, gitImage, executortest.GitRootfs(t), nil) }},
		Agent:   []string{"/toolscope/bin/agentctl", "version"},
		Printed: "contract toolscope.agentctl.v1.AgentctlService",
		Control: func(t *testing.T, h executors.Handle) executortest.Controller {
			grpcAddr, mcpAddr, cfg, err := kubernetes.Reach(current, h)
			require.NoError(t, err)
			conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			return executortest.Controller{
				Client: agentctlv1.NewAgentctlServiceClient(conn),
				MCPURL: func(reported string) string {
					u, err := url.Parse(reported)
					require.NoError(t, err)
					u.Host = mcpAddr
					return u.String()
				},
			}
		},
	})
}

// TestDeletedPodIsLostAndResumeRelaunches: an operator deleting a
// session's pod (graceful, as kubectl delete does) is recorded lost
// within 2 s by the watch; launching the session again (session resume)
// runs a new pod.
func TestDeletedPodIsLostAndResumeRelaunches(t *testing.T) {
	f := setup(t)
	lost := make(chan executors.SessionEvent, 4)
	e := f.executor(t, f.options("deleted", nil, func(ev executors.SessionEvent) {
		if ev.Kind == executors.EventLost {
			lost <- ev
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := executors.Spec{SessionID: "ses_deleted", TaskID: "task_1", Mode: executors.ModeTask, Image: scratchImage,
		Providers: providers.Of("github"), Generation: 1}
	h, _, err := e.Launch(ctx, spec, nil)
	require.NoError(t, err)
	var st struct {
		Pod string `json:"pod"`
	}
	require.NoError(t, json.Unmarshal(h.State, &st))
	began := time.Now()
	require.NoError(t, f.cluster.Client.CoreV1().Pods(f.namespace).Delete(ctx, st.Pod, metav1.DeleteOptions{}))
	select {
	case ev := <-lost:
		assert.Equal(t, spec.SessionID, ev.SessionID)
		assert.Contains(t, ev.Message, st.Pod)
		testutil.Figure(t, "kubernetes executor: pod deleted", "lost event %d ms after the delete (bound %s)", time.Since(began).Milliseconds(), executortest.LossDeadline)
	case <-time.After(executortest.LossDeadline):
		t.Fatalf("no lost event within %s of deleting the pod", executortest.LossDeadline)
	}
	ctl := executors.NewController(map[string]executors.Executor{e.Name(): e})
	status, err := ctl.Inspect(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, executors.PhaseLost, status.Phase)
	require.NoError(t, e.Stop(ctx, h))

	spec.Generation = 2
	h2, status, err := e.Launch(ctx, spec, nil)
	require.NoError(t, err)
	assert.Equal(t, executors.PhaseRunning, status.Phase)
	assert.NotEqual(t, h.State, h2.State, "a new pod")
	require.NoError(t, e.Stop(ctx, h2))
}

// TestPodSpecHoldsNoSecretAndNoCredentials: the agent's allowlisted
// environment (a credential variable) reaches the pod through its Secret,
// owned by the pod; the pod spec has no literal value of it, mounts no
// service-account token and asks for no privilege.
func TestPodSpecHoldsNoSecretAndNoCredentials(t *testing.T) {
	f := setup(t)
	t.Setenv("PROBE_MODEL_KEY", "modelkey-"+fmt.Sprint(time.Now().UnixNano()))
	e := f.executor(t, f.options("podspec", nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := executors.Spec{SessionID: "ses_podspec", TaskID: "task_1", Mode: executors.ModeTask, Image: scratchImage,
		Providers: providers.Of("github"), Generation: 1,
		Agent: &executors.AgentCommand{Argv: []string{"/toolscope/bin/agentctl", "version"}, CredentialEnv: "PROBE_MODEL_KEY"}}
	h, _, err := e.Launch(ctx, spec, nil)
	require.NoError(t, err)
	var st struct {
		Pod string `json:"pod"`
	}
	require.NoError(t, json.Unmarshal(h.State, &st))
	pod, err := f.cluster.Client.CoreV1().Pods(f.namespace).Get(ctx, st.Pod, metav1.GetOptions{})
	require.NoError(t, err)
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), os.Getenv("PROBE_MODEL_KEY"), "no secret value in the pod")
	assert.Equal(t, "ses_podspec", pod.Annotations[kubernetes.AnnotationSession])
	assert.Equal(t, "ses_podspec", pod.Labels[kubernetes.LabelSession])
	require.NotNil(t, pod.Spec.AutomountServiceAccountToken)
	assert.False(t, *pod.Spec.AutomountServiceAccountToken)
	var found bool
	for _, c := range pod.Spec.Containers {
		assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
		assert.False(t, *c.SecurityContext.Privileged)
		for _, m := range c.VolumeMounts {
			assert.NotContains(t, m.MountPath, "serviceaccount", "no service-account token mounted")
		}
		for _, env := range c.Env {
			assert.Empty(t, env.Value, "%s: no literal value", env.Name)
			if env.Name == "PROBE_MODEL_KEY" {
				found = env.ValueFrom != nil && env.ValueFrom.SecretKeyRef != nil && env.ValueFrom.SecretKeyRef.Name == st.Pod
			}
		}
	}
	assert.True(t, found, "the credential variable comes from the pod's Secret")
	secret, err := f.cluster.Client.CoreV1().Secrets(f.namespace).Get(ctx, st.Pod, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, secret.OwnerReferences, 1)
	assert.Equal(t, pod.UID, secret.OwnerReferences[0].UID, "the Secret goes with its pod")
	require.NoError(t, e.Stop(ctx, h))
}

// TestSweepDeletesPodsNoSessionNeeds: a restarted orchestrator deletes
// the pods of sessions no longer running, never another orchestrator's.
func TestSweepDeletesPodsNoSessionNeeds(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := f.executor(t, f.options("sweeper", nil, nil))
	other := f.executor(t, f.options("sweeper-other", nil, nil))
	launch := func(e *kubernetes.Executor, id string) {
		h, _, err := e.Launch(ctx, executors.Spec{SessionID: id, TaskID: "t", Mode: executors.ModeTask, Image: scratchImage}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
	}
	launch(other, "sweep-theirs")
	launch(e, "sweep-keep")
	launch(e, "sweep-drop")
	cleaned, err := e.Sweep(ctx, func(id string) bool { return id == "sweep-keep" })
	require.NoError(t, err)
	assert.Equal(t, []string{"sweep-drop"}, cleaned)
	left, err := e.Managed(ctx)
	require.NoError(t, err)
	assert.Contains(t, left, "sweep-keep")
	assert.NotContains(t, left, "sweep-drop")
	theirs, err := other.Managed(ctx)
	require.NoError(t, err)
	assert.Contains(t, theirs, "sweep-theirs")
}

// TestMissingImageIsAClearErrorAndLeavesNothing: an image the node does
// not have (never pulled) fails the launch with its name, and removes the
// pod and its Secret.
func TestMissingImageIsAClearErrorAndLeavesNothing(t *testing.T) {
	f := setup(t)
	e := f.executor(t, f.options("noimage", nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, err := e.Launch(ctx, executors.Spec{SessionID: "noimage", TaskID: "t", Mode: executors.ModeTask,
		Image: "toolscope.test/does-not-exist:0", Providers: providers.Of("github")}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "toolscope.test/does-not-exist:0")
}

// TestIsolation: the agent of a kubernetes session (the probe) runs under
// another uid than agentctl, so agentctl's TLS key (the launch secret,
// mounted 0400 for root), its /proc entries and its API are out of its
// reach; the pod has no service-account token, and the API server,
// reached directly, serves the agent nothing.
func TestIsolation(t *testing.T) {
	f := setup(t)
	probe := executortest.Probe(t)
	f.cluster.Image(t, probeImage, map[string]kubetest.File{"/probe": {Path: probe}}, nil)
	executortest.RunIsolation(t, executortest.Isolation{
		Backend: executortest.Backend{
			New: func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor {
				return f.executor(t, f.options("isolation", calls, events))
			},
			Prepare: func(s *executors.Spec) { s.Image = probeImage },
		},
		Probe:   "/probe",
		Refusal: "Unavailable",
		Forbidden: []string{"/toolscope/tls/tls.key", "/toolscope/tls/tls.crt", "/toolscope/tls/ca.crt",
			"/var/run/secrets/kubernetes.io/serviceaccount/token"},
		APIs: []string{"https://" + f.cluster.NodeIP + ":6443/api/v1/namespaces/" + f.namespace + "/secrets",
			"https://" + f.cluster.NodeIP + ":6443/api/v1/namespaces/" + f.namespace + "/pods"},
		// Another session's files are in another pod: the probe tries
		// their path in its own (OtherDirs nil).
	})
}

// TestPodIPConnect: an orchestrator inside the cluster (here: on the host
// the pod network is routed to) dials agentctl at the pod's IP, with the
// same mutual TLS; the MCP endpoint still goes through port-forward.
func TestPodIPConnect(t *testing.T) {
	f := setup(t)
	opts := f.options("podip", nil, nil)
	opts.Connect = kubernetes.ConnectPodIP
	e := f.executor(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, st, err := e.Launch(ctx, executors.Spec{SessionID: "ses_podip", TaskID: "task_1", Mode: executors.ModeTask, Image: scratchImage,
		Providers: providers.Of("github"), Generation: 1}, nil)
	require.NoError(t, err)
	assert.Equal(t, executors.PhaseRunning, st.Phase)
	names := mcptest.Connect(t, mcptest.HTTP(st.MCPURL, st.MCPToken), "").Names(t)
	assert.Contains(t, names, "github_pr_status")
	res, err := executors.NewController(map[string]executors.Executor{e.Name(): e}).ApplySurface(ctx, h,
		executors.Surface{Providers: providers.Of("github", "gitlab"), Generation: 2})
	require.NoError(t, err)
	assert.True(t, res.Accepted, "a push reaches agentctl at the pod's IP")
	require.NoError(t, e.Stop(ctx, h))
}

// TestRelayRetriesABusyAPIServer: a relayed connection whose streams the
// API server fails to open (busy, under load) is retried, a bounded number
// of times, before the client has sent anything: the agent's connect
// succeeds through two failed dials, and fails, not hangs, after
// RelayAttempts of them.
func TestRelayRetriesABusyAPIServer(t *testing.T) {
	f := setup(t)
	e := f.executor(t, f.options("relay", nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, st, err := e.Launch(ctx, executors.Spec{SessionID: "ses_relay", TaskID: "task_1", Mode: executors.ModeTask, Image: scratchImage,
		Providers: providers.Of("github"), Generation: 1}, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Stop(ctx, h)) }()

	require.NoError(t, kubernetes.FailDials(e, h, kubernetes.RelayAttempts-1))
	assert.Contains(t, mcptest.Connect(t, mcptest.HTTP(st.MCPURL, st.MCPToken), "").Names(t), "github_pr_status",
		"a connection opened through %d failed dials", kubernetes.RelayAttempts-1)

	require.NoError(t, kubernetes.FailDials(e, h, kubernetes.RelayAttempts))
	u, err := url.Parse(st.MCPURL)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST "+u.Path+" HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Length: 0\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
	// Closed, unanswered: EOF, or a reset since the request was not read.
	n, err := conn.Read(make([]byte, 1))
	assert.Zero(t, n)
	assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET),
		"a connection the API server refused %d times in a row is closed, unanswered: %v", kubernetes.RelayAttempts, err)
}
