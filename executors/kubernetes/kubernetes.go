// Package kubernetes runs each session as a pod of the user's image in a
// namespace the operator chooses, through the API server with the official
// client (k8s.io/client-go). ADR 0031 has the choices.
//
// agentctl reaches the user's image without rebuilding it: an init
// container of the small FROM-scratch toolscope image (Options.AgentctlImage)
// copies its agentctl (`agentctl install`) into an emptyDir that the
// agent container runs it from. agentctl runs as root with the few
// capabilities it needs to run the agent under a uid of its own, no
// privilege escalation, a read-only root filesystem; the pod gets no
// service-account token and no service links. Its TLS material (a server
// certificate issued per launch by the executor's CA, which also signs the
// orchestrator's client certificate) and the agent's allowlisted
// environment are a Kubernetes Secret owned by the pod, mounted read-only
// for root alone, or referenced by valueFrom: never literal values in the
// pod spec.
//
// Only the orchestrator opens connections, with mutual TLS end to end: to
// the pod's IP from inside the cluster (ConnectPodIP), or through the API
// server's port-forward subresource from outside (ConnectPortForward). The
// MCP endpoint listens on the pod's loopback: the agent reaches it, and
// the orchestrator through port-forward, nobody else. An informer on the
// orchestrator's pods reports a deleted, evicted or failed pod lost at
// once; pods carry toolscope.* labels, so a restarted orchestrator finds,
// re-attaches or sweeps them.
//
// A session's workspace (ADR 0038) is an emptyDir of its pod
// (/toolscope/workspaces), made by agentctl before the agent starts; the
// fetch credential reaches agentctl over the link, never the pod spec or
// a file. It ends with the pod: the executor is an
// executors.WorkspaceDropper, so the orchestrator stops a session only
// once its work is delivered, or discarded on purpose.
package kubernetes

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	"github.com/toolscope/toolscope/executors/attached"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/internal/profiles"
)

// Name is the backend's name.
const Name = "kubernetes"

// Labels on every pod and Secret this backend creates; the session's own
// id, which may not be a label value, is the annotation AnnotationSession.
const (
	LabelManaged      = "toolscope.managed"
	LabelOrchestrator = "toolscope.orchestrator"
	LabelSession      = "toolscope.session"
	LabelTask         = "toolscope.task"
	AnnotationSession = "toolscope.session"
)

// Connect is how the orchestrator reaches a pod's agentctl.
type Connect string

// Connects.
const (
	// ConnectPortForward goes through the API server's port-forward
	// subresource: an orchestrator outside the cluster.
	ConnectPortForward Connect = "port-forward"
	// ConnectPodIP dials the pod's IP: an orchestrator inside the cluster.
	ConnectPodIP Connect = "pod-ip"
)

// Ports agentctl listens on in the pod: gRPC on every address (mutual
// TLS), MCP on the pod's loopback only.
const (
	GRPCPort = 7077
	MCPPort  = 7078
)

const (
	stateVersion  = 1
	container     = "agent"
	initContainer = "agentctl-install"
	binDir        = "/toolscope/bin"
	tlsDir        = "/toolscope/tls"
	stateDir      = "/toolscope/state"
	workspacesDir = "/toolscope/workspaces"
	envPrefix     = "env."
	certValidity  = 90 * 24 * time.Hour
)

// Defaults of the bounds in Options.
const (
	DefaultReadyTimeout = 2 * time.Minute
	DefaultStopGrace    = 5 * time.Second
	DefaultLogTailLines = 5000
)

// Options configure the kubernetes backend.
type Options struct {
	// Config reaches the API server: a kubeconfig context or the
	// in-cluster configuration (package config of the caller). Required.
	Config *rest.Config
	// Namespace is where the pods run. Required.
	Namespace string
	// AgentctlImage is the toolscope image holding a static agentctl at
	// /agentctl, run as the pods' init container. Required.
	AgentctlImage string
	// StateDir keeps the executor's CA (kubernetes-ca.crt/.key), which
	// signs agentctl's server certificates and the orchestrator's client
	// certificate. Required.
	StateDir string
	// Connect is how agentctl is reached; ConnectPortForward if empty.
	Connect Connect
	// ImagePullPolicy of both containers; the cluster's default if empty.
	ImagePullPolicy corev1.PullPolicy
	// Resources, NodeSelector and Tolerations of every pod: the operator's
	// profile for the sessions' pods.
	Resources    corev1.ResourceRequirements
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// ReadyTimeout bounds a launch's wait for the pod and agentctl
	// (DefaultReadyTimeout); StopGrace a pod's termination grace period
	// (DefaultStopGrace); LogTailLines what AgentctlLog sends before
	// following (DefaultLogTailLines).
	ReadyTimeout time.Duration
	StopGrace    time.Duration
	LogTailLines int
	Calls        executors.CallHandler
	Events       executors.EventHandler
	// OrchestratorID labels the pods this orchestrator creates; Managed
	// and Sweep see only those. Required.
	OrchestratorID string
	AgentctlFlags  executors.AgentctlFlags
	Log            *slog.Logger
}

type state struct {
	SessionID string `json:"session_id"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
}

// Executor is the kubernetes backend.
type Executor struct {
	opts     Options
	client   kubernetes.Interface
	ca       *pki.CA
	client2  pki.Pair // the orchestrator's client certificate
	selector labels.Selector

	informer cache.SharedIndexInformer
	stopInf  chan struct{}
	stopOnce sync.Once

	sessions attached.Table[string, *session] // by pod name
}

type session struct {
	attached.Session
	st     state
	fwd    *forwarder
	mcpURL string
}

// New returns the kubernetes backend and starts watching its pods.
func New(opts Options) (*Executor, error) {
	switch {
	case opts.Config == nil:
		return nil, errdefs.RequiredField("config")
	case opts.Namespace == "":
		return nil, errdefs.RequiredField("namespace")
	case opts.AgentctlImage == "":
		return nil, errdefs.RequiredField("agentctl_image")
	case opts.StateDir == "":
		return nil, errdefs.RequiredField("state_dir")
	case opts.OrchestratorID == "":
		return nil, errdefs.RequiredField("orchestrator_id")
	}
	switch opts.Connect {
	case "":
		opts.Connect = ConnectPortForward
	case ConnectPortForward, ConnectPodIP:
	default:
		return nil, errdefs.InvalidField("connect", "%q: use %s or %s", opts.Connect, ConnectPortForward, ConnectPodIP)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.LogTailLines <= 0 {
		opts.LogTailLines = DefaultLogTailLines
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	client, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	ca, err := loadCA(opts.StateDir)
	if err != nil {
		return nil, err
	}
	pair, err := ca.IssueClient("toolscope-orchestrator", certValidity)
	if err != nil {
		return nil, err
	}
	e := &Executor{
		opts: opts, client: client, ca: ca, client2: pair, stopInf: make(chan struct{}),
		selector: labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelOrchestrator: labelValue(opts.OrchestratorID)}),
	}
	pods := client.CoreV1().Pods(opts.Namespace)
	e.informer = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = e.selector.String()
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = e.selector.String()
			return pods.Watch(ctx, o)
		},
	}, &corev1.Pod{}, 0, cache.Indexers{})
	if _, err := e.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.observe(obj, false) },
		UpdateFunc: func(_, obj any) { e.observe(obj, false) },
		DeleteFunc: func(obj any) { e.observe(obj, true) },
	}); err != nil {
		return nil, err
	}
	go e.informer.Run(e.stopInf)
	return e, nil
}

// loadCA reads the executor's CA from dir, creating it on first use.
func loadCA(dir string) (*pki.CA, error) {
	certFile, keyFile := filepath.Join(dir, "kubernetes-ca.crt"), filepath.Join(dir, "kubernetes-ca.key")
	certPEM, err1 := os.ReadFile(certFile)
	keyPEM, err2 := os.ReadFile(keyFile)
	if err1 == nil && err2 == nil {
		return pki.LoadCA(certPEM, keyPEM)
	}
	if !errors.Is(err1, os.ErrNotExist) && err1 != nil {
		return nil, err1
	}
	ca, err := pki.NewCA("toolscope kubernetes executor", 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, ca.KeyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(certFile, ca.CertPEM, 0o600); err != nil {
		return nil, err
	}
	return ca, nil
}

// Name implements executors.Executor.
func (e *Executor) Name() string { return Name }

// DropsWorkspaces implements executors.WorkspaceDropper: a session's
// workspace is its pod's volume.
func (e *Executor) DropsWorkspaces() bool { return true }

// serverName is the name agentctl's certificate is issued for, checked
// by the orchestrator: a certificate of another session's pod fails.
func serverName(pod string) string { return pod + ".agentctl.toolscope" }

// Launch implements executors.Executor.
func (e *Executor) Launch(ctx context.Context, spec executors.Spec, progress executors.Progress) (executors.Handle, executors.Status, error) {
	if err := spec.Validate(); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	if spec.Image == "" {
		return executors.Handle{}, executors.Status{}, errdefs.RequiredField("image")
	}
	ns := e.opts.Namespace
	name := podName(spec.SessionID)
	server, err := e.ca.IssueServer("agentctl "+spec.SessionID, []string{serverName(name)}, certValidity)
	if err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	env := containerEnv(spec)
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
		LabelManaged: "true", LabelOrchestrator: labelValue(e.opts.OrchestratorID),
		LabelSession: labelValue(spec.SessionID), LabelTask: labelValue(spec.TaskID),
	}, Annotations: map[string]string{AnnotationSession: spec.SessionID}}
	secret := &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{
		"tls.crt": server.CertPEM, "tls.key": server.KeyPEM, "ca.crt": e.ca.CertPEM,
	}}
	for k, v := range env {
		secret.Data[envPrefix+k] = []byte(v)
	}
	progress.Report("creating Secret %s/%s", ns, name)
	if _, err := e.client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return executors.Handle{}, executors.Status{}, fmt.Errorf("create Secret %s/%s: %w", ns, name, apiError(err))
	}
	st := state{SessionID: spec.SessionID, Namespace: ns, Pod: name}
	fail := func(err error) (executors.Handle, executors.Status, error) {
		e.retire(context.WithoutCancel(ctx), st, true)
		return executors.Handle{}, executors.Status{}, err
	}
	progress.Report("creating pod %s/%s of %s", ns, name, spec.Image)
	pod, err := e.client.CoreV1().Pods(ns).Create(ctx, e.pod(meta, spec, env), metav1.CreateOptions{})
	if err != nil {
		return fail(fmt.Errorf("create pod %s/%s: %w", ns, name, apiError(err)))
	}
	st.UID = string(pod.UID)
	// The Secret goes with the pod (the garbage collector deletes it).
	owner := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":%q,"uid":%q}]}}`, name, pod.UID)
	if _, err := e.client.CoreV1().Secrets(ns).Patch(ctx, name, types.MergePatchType, []byte(owner), metav1.PatchOptions{}); err != nil {
		return fail(fmt.Errorf("make pod %s the owner of its Secret: %w", name, apiError(err)))
	}
	progress.Report("waiting for pod %s to run", name)
	if pod, err = e.waitRunning(ctx, name); err != nil {
		return fail(err)
	}
	s, err := e.attach(ctx, st, pod)
	if err != nil {
		return fail(err)
	}
	progress.Report("agentctl in pod %s reached (%s); %s", name, e.opts.Connect, spec.Creating())
	// agentctl answers once its Attach stream is acknowledged: the link
	// redials (100 ms, growing to 2 s) while agentctl is still starting.
	ready, cancel := context.WithTimeout(ctx, e.opts.ReadyTimeout)
	defer cancel()
	if err := s.Link.WaitAttached(ready); err != nil {
		e.release(s)
		if ready.Err() != nil {
			return fail(fmt.Errorf("agentctl in pod %s did not answer within %s: %w", name, e.opts.ReadyTimeout, errdefs.ErrUnavailable))
		}
		return fail(fmt.Errorf("attach to agentctl in pod %s: %w", name, err))
	}
	status, err := s.Link.CreateSession(ready, spec)
	if err != nil {
		e.release(s)
		return fail(fmt.Errorf("agentctl in pod %s: %w", name, err))
	}
	status.MCPURL = s.mcpURL
	return executors.Handle{Backend: Name, Version: stateVersion, State: executors.EncodeState(st)}, status, nil
}

// pod is the pod of a session.
func (e *Executor) pod(meta metav1.ObjectMeta, spec executors.Spec, env map[string]string) *corev1.Pod {
	no, yes := false, true
	root, nonRoot := int64(0), int64(65532)
	grace := int64(e.opts.StopGrace / time.Second)
	if grace < 1 {
		grace = 1
	}
	var envVars []corev1.EnvVar
	for _, k := range slices.Sorted(mapsKeys(env)) {
		envVars = append(envVars, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: meta.Name}, Key: envPrefix + k}}})
	}
	mode := int32(0o400)
	args := append([]string{"serve", "--listen", "0.0.0.0:" + strconv.Itoa(GRPCPort),
		"--tls-cert", tlsDir + "/tls.crt", "--tls-key", tlsDir + "/tls.key", "--client-ca", tlsDir + "/ca.crt",
		"--state-dir", stateDir, "--workspaces-dir", workspacesDir, "--mcp-host", "127.0.0.1", "--mcp-port", strconv.Itoa(MCPPort),
		"--agent-uids", agentuid.Single(agentuid.Default.First).String()}, e.opts.AgentctlFlags.Args()...)
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	return &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  e.opts.NodeSelector,
			Tolerations:                   e.opts.Tolerations,
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: seccomp},
			InitContainers: []corev1.Container{{
				Name: initContainer, Image: e.opts.AgentctlImage, ImagePullPolicy: e.opts.ImagePullPolicy,
				Command:      []string{"/agentctl", "install", binDir + "/agentctl"},
				VolumeMounts: []corev1.VolumeMount{{Name: "bin", MountPath: binDir}},
				SecurityContext: &corev1.SecurityContext{RunAsUser: &nonRoot, RunAsGroup: &nonRoot, RunAsNonRoot: &yes, AllowPrivilegeEscalation: &no,
					Privileged: &no, ReadOnlyRootFilesystem: &yes, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Containers: []corev1.Container{{
				Name: container, Image: spec.Image, ImagePullPolicy: e.opts.ImagePullPolicy,
				Command: []string{binDir + "/agentctl"}, Args: args, Env: envVars, Resources: e.opts.Resources,
				Ports: []corev1.ContainerPort{{Name: "agentctl", ContainerPort: GRPCPort}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "bin", MountPath: binDir, ReadOnly: true},
					{Name: "tls", MountPath: tlsDir, ReadOnly: true},
					{Name: "state", MountPath: stateDir},
					{Name: "workspaces", MountPath: workspacesDir},
					{Name: "tmp", MountPath: "/tmp"},
				},
				// agentctl is root in the container, whatever the image's
				// USER, so that it runs the agent under another uid; with
				// only the capabilities that takes, and no escalation.
				SecurityContext: &corev1.SecurityContext{RunAsUser: &root, RunAsGroup: &root, AllowPrivilegeEscalation: &no, Privileged: &no,
					ReadOnlyRootFilesystem: &yes, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"},
						Add: []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: meta.Name, DefaultMode: &mode,
					Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}, {Key: "ca.crt", Path: "ca.crt"}}}}},
				{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "workspaces", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// waitRunning waits until the pod's agent container runs, failing early
// on what will not resolve itself (an image that cannot be had, a failed
// init container, a deleted pod).
func (e *Executor) waitRunning(ctx context.Context, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.ReadyTimeout)
	defer cancel()
	pods := e.client.CoreV1().Pods(e.opts.Namespace)
	var last *corev1.Pod
	for {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil, e.notRunning(last)
			}
			return nil, fmt.Errorf("pod %s: %w", name, apiError(err))
		}
		last = pod
		if done, err := running(pod); done || err != nil {
			return pod, err
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: pod.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return nil, e.notRunning(last)
			}
			continue
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == "DELETED" {
				w.Stop()
				return nil, fmt.Errorf("pod %s was deleted while starting: %w", name, executors.ErrLost)
			}
			last = p
			if done, err := running(p); done || err != nil {
				w.Stop()
				return p, err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, e.notRunning(last)
		}
	}
}

func (e *Executor) notRunning(pod *corev1.Pod) error {
	why := "no status yet"
	if pod != nil {
		why = describe(pod)
	}
	return fmt.Errorf("the pod's agent container did not run within %s (%s): %w", e.opts.ReadyTimeout, why, errdefs.ErrUnavailable)
}

// running says whether the agent container runs, or fails with why it
// never will.
func running(pod *corev1.Pod) (bool, error) {
	if pod.DeletionTimestamp != nil {
		return false, fmt.Errorf("pod %s is being deleted: %w", pod.Name, executors.ErrLost)
	}
	for _, c := range pod.Status.InitContainerStatuses {
		if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
			return false, errdefs.FailedPrecondition("the init container copying agentctl from %s failed (exit %d, %s %s); is it the toolscope image?",
				c.Image, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
		}
		if w := c.State.Waiting; w != nil && unrecoverable(w.Reason) {
			return false, errdefs.FailedPrecondition("the toolscope image %s: %s: %s", c.Image, w.Reason, w.Message)
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name != container {
			continue
		}
		if c.State.Running != nil {
			return true, nil
		}
		if t := c.State.Terminated; t != nil {
			return false, fmt.Errorf("agentctl exited (code %d, %s): %s: %w", t.ExitCode, t.Reason, strings.TrimSpace(t.Message), executors.ErrLost)
		}
		if w := c.State.Waiting; w != nil && unrecoverable(w.Reason) {
			return false, errdefs.FailedPrecondition("image %q: %s: %s", c.Image, w.Reason, w.Message)
		}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false, fmt.Errorf("pod %s ended (%s): %w", pod.Name, describe(pod), executors.ErrLost)
	}
	return false, nil
}

func unrecoverable(reason string) bool {
	switch reason {
	case "ErrImageNeverPull", "InvalidImageName", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return true
	}
	return false
}

func describe(pod *corev1.Pod) string {
	parts := []string{"phase " + string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		parts = append(parts, pod.Status.Reason+": "+pod.Status.Message)
	}
	for _, c := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		switch {
		case c.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting: %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message))
		case c.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated: %s (exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode))
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// attach connects to the agentctl of a running pod: directly or through
// a port-forward, under mutual TLS, and registers the session.
func (e *Executor) attach(ctx context.Context, st state, pod *corev1.Pod) (*session, error) {
	fwd, err := relayFor(e.opts.Config, e.client, st.Namespace, st.Pod, st.UID, e.opts.Log)
	if err != nil {
		return nil, err
	}
	s := &session{Session: attached.NewSession(st.SessionID, nil), st: st, fwd: fwd, mcpURL: "http://" + fwd.mcpAddr + "/mcp"}
	grpcAddr := fwd.grpcAddr
	if e.opts.Connect == ConnectPodIP && pod.Status.PodIP != "" {
		grpcAddr = net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(GRPCPort))
	}
	cfg, err := e.tlsConfig(st.Pod)
	if err == nil {
		s.Link, err = e.dial(grpcAddr, cfg)
	}
	if err != nil {
		dropRelay(st.Namespace, st.Pod, st.UID)
		return nil, err
	}
	e.sessions.Put(st.Pod, s)
	// The informer may have seen the pod end already.
	if obj, ok, _ := e.informer.GetStore().GetByKey(st.Namespace + "/" + st.Pod); ok {
		e.observe(obj, false)
	}
	return s, nil
}

// tlsConfig is the orchestrator's end of the mutual TLS with a pod's
// agentctl, which must present the certificate issued for that pod.
func (e *Executor) tlsConfig(pod string) (*tls.Config, error) {
	cfg, err := pki.ClientConfig(e.client2, e.ca.CertPEM)
	if err != nil {
		return nil, err
	}
	cfg = cfg.Clone()
	cfg.ServerName = serverName(pod)
	return cfg, nil
}

func (e *Executor) dial(addr string, cfg *tls.Config) (*agentlink.Link, error) {
	return agentlink.Dial(agentlink.Options{Addr: addr, TLS: cfg, Calls: e.opts.Calls, Events: e.opts.Events,
		OrchestratorID: e.opts.OrchestratorID, Log: e.opts.Log})
}

// observe is the informer's view of one of this orchestrator's pods: a
// session's pod deleted, being deleted, failed or whose agentctl ended
// is lost, at once.
func (e *Executor) observe(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = tomb.Obj, true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s, _ := e.sessions.Get(pod.Name)
	if s == nil || (s.st.UID != "" && string(pod.UID) != s.st.UID) {
		return
	}
	var cause string
	switch {
	case deleted:
		cause = fmt.Sprintf("pod %s/%s was deleted", pod.Namespace, pod.Name)
	case pod.DeletionTimestamp != nil:
		cause = fmt.Sprintf("pod %s/%s is being deleted", pod.Namespace, pod.Name)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		cause = fmt.Sprintf("pod %s/%s ended: %s", pod.Namespace, pod.Name, describe(pod))
	default:
		for _, c := range pod.Status.ContainerStatuses {
			if c.Name == container && c.State.Terminated != nil {
				cause = fmt.Sprintf("agentctl in pod %s/%s exited (code %d, %s)", pod.Namespace, pod.Name, c.State.Terminated.ExitCode, c.State.Terminated.Reason)
			}
		}
	}
	if cause == "" || !s.Exit.End(cause) {
		return
	}
	e.sessions.CloseLink(s)
	dropRelay(s.st.Namespace, s.st.Pod, s.st.UID)
	if !e.sessions.Lost(pod.Name, s) {
		return
	}
	e.opts.Log.Warn("session pod ended", "session_id", s.st.SessionID, "cause", cause)
	if e.opts.Events != nil {
		e.opts.Events(executors.SessionEvent{SessionID: s.st.SessionID, Kind: executors.EventLost, Message: cause})
	}
}

func (e *Executor) lookup(h executors.Handle) (*session, state, error) {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return nil, st, err
	}
	s, err := e.sessions.Lookup(st.Pod, "pod "+st.Pod, nil)
	return s, st, err
}

// Endpoint implements executors.Executor.
func (e *Executor) Endpoint(h executors.Handle) (executors.Endpoint, error) {
	s, _, err := e.lookup(h)
	if err != nil {
		return executors.Endpoint{}, err
	}
	return e.sessions.Endpoint(s, func(st *executors.Status) { st.MCPURL = s.mcpURL }), nil
}

// Reattach implements executors.Executor: the pod is found by its name
// (and uid), must still run, and its agentctl must answer.
func (e *Executor) Reattach(ctx context.Context, h executors.Handle) error {
	s, st, err := e.lookup(h)
	if err == nil && !s.Exit.Gone() {
		return nil
	}
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	pod, err := e.client.CoreV1().Pods(st.Namespace).Get(ctx, st.Pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && st.UID != "" && string(pod.UID) != st.UID) {
		return fmt.Errorf("pod %s/%s is gone: %w", st.Namespace, st.Pod, executors.ErrLost)
	} else if err != nil {
		return fmt.Errorf("pod %s/%s: %w", st.Namespace, st.Pod, apiError(err))
	}
	if ok, err := running(pod); !ok {
		if err == nil {
			err = executors.ErrLost
		}
		return fmt.Errorf("pod %s/%s does not run (%s): %w", st.Namespace, st.Pod, describe(pod), errors.Join(err, executors.ErrLost))
	}
	if s, err = e.attach(ctx, st, pod); err != nil {
		return err
	}
	// This pod was started for this session: the link may carry it.
	if err := attached.Adopt(ctx, s.Link, st.SessionID, "agentctl in pod "+st.Pod); err != nil {
		e.release(s)
		return err
	}
	return nil
}

func (e *Executor) release(s *session) {
	e.sessions.Release(s.st.Pod, s)
	dropRelay(s.st.Namespace, s.st.Pod, s.st.UID)
}

// Stop implements executors.Executor: the session, then its pod and
// Secret, which are deleted.
func (e *Executor) Stop(ctx context.Context, h executors.Handle) error {
	s, st, err := e.lookup(h)
	if errors.Is(err, errdefs.ErrNotFound) {
		if pod, err := e.client.CoreV1().Pods(st.Namespace).Get(ctx, st.Pod, metav1.GetOptions{}); err == nil &&
			pod.Labels[LabelOrchestrator] != labelValue(e.opts.OrchestratorID) {
			// A copy of another installation's database (ADR 0014).
			return errdefs.FailedPrecondition("the pod of session %s (%s/%s) runs for another orchestrator installation; stop the session there (docs/operations.md, restoring a backup)",
				st.SessionID, st.Namespace, st.Pod)
		}
		e.retire(ctx, st, true) // not attached, but leave nothing behind
		return nil
	} else if err != nil {
		return err
	}
	e.sessions.Stop(ctx, s, e.opts.StopGrace, func() { e.retire(ctx, st, true) })
	return nil
}

// retire deletes a session's pod and Secret; with wait, until the pod is
// gone (bounded by the grace period and ctx).
func (e *Executor) retire(ctx context.Context, st state, wait bool) {
	dropRelay(st.Namespace, st.Pod, st.UID)
	pods := e.client.CoreV1().Pods(st.Namespace)
	opts := metav1.DeleteOptions{}
	if st.UID != "" {
		uid := types.UID(st.UID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := pods.Delete(ctx, st.Pod, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		e.opts.Log.Warn("delete pod", "pod", st.Pod, "error", err)
	}
	if err := e.client.CoreV1().Secrets(st.Namespace).Delete(ctx, st.Pod, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		e.opts.Log.Warn("delete Secret", "secret", st.Pod, "error", err)
	}
	if !wait || err != nil {
		return
	}
	waitCtx, cancel := context.WithTimeout(ctx, e.opts.StopGrace+30*time.Second)
	defer cancel()
	for {
		pod, err := pods.Get(waitCtx, st.Pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && st.UID != "" && string(pod.UID) != st.UID) {
			return
		}
		if err != nil && waitCtx.Err() != nil {
			e.opts.Log.Warn("pod still terminating", "pod", st.Pod)
			return
		}
		w, err := pods.Watch(waitCtx, metav1.ListOptions{FieldSelector: "metadata.name=" + st.Pod, ResourceVersion: pod.ResourceVersion})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == "DELETED" {
				w.Stop()
				return
			}
		}
		w.Stop()
	}
}

// AgentctlLog implements executors.AgentctlLogReader: agentctl's output
// is the agent container's, kept by the kubelet while the pod exists (a
// stopped or lost session's pod is deleted). It sends the last
// Options.LogTailLines lines, then, with follow, what agentctl writes
// until the container ends.
func (e *Executor) AgentctlLog(ctx context.Context, h executors.Handle, follow bool, fn func([]byte) error) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	tail := int64(e.opts.LogTailLines)
	stream, err := e.client.CoreV1().Pods(st.Namespace).GetLogs(st.Pod, &corev1.PodLogOptions{Container: container, Follow: follow, TailLines: &tail}).Stream(ctx)
	if apierrors.IsNotFound(err) {
		return errdefs.FailedPrecondition("the pod of session %s was deleted with it, and agentctl's log with it", st.SessionID)
	} else if err != nil {
		return fmt.Errorf("read the log of pod %s: %w", st.Pod, apiError(err))
	}
	defer stream.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := stream.Read(buf)
		if n > 0 {
			if ferr := fn(buf[:n]); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			if err == io.EOF || ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// Managed lists the pods this orchestrator created that still exist, by
// session id: what a restarted orchestrator can re-attach or clean.
func (e *Executor) Managed(ctx context.Context) (map[string]string, error) {
	list, err := e.client.CoreV1().Pods(e.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: e.selector.String()})
	if err != nil {
		return nil, apiError(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil { // one being deleted is gone already
			out[p.Annotations[AnnotationSession]] = p.Name
		}
	}
	return out, nil
}

// Sweep implements executors.Sweeper: it deletes the pods, and Secrets,
// of sessions keep does not want.
func (e *Executor) Sweep(ctx context.Context, keep func(sessionID string) bool) ([]string, error) {
	pods, err := e.Managed(ctx)
	if err != nil {
		return nil, err
	}
	secrets, err := e.client.CoreV1().Secrets(e.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: e.selector.String()})
	if err != nil {
		return nil, apiError(err)
	}
	cleaned := map[string]bool{}
	for session, pod := range pods {
		if !keep(session) {
			e.retire(ctx, state{SessionID: session, Namespace: e.opts.Namespace, Pod: pod}, false)
			cleaned[session] = true
		}
	}
	for _, s := range secrets.Items {
		session := s.Annotations[AnnotationSession]
		if _, hasPod := pods[session]; !hasPod && !keep(session) {
			// A launch that failed between its Secret and its pod.
			e.retire(ctx, state{SessionID: session, Namespace: e.opts.Namespace, Pod: s.Name}, false)
			cleaned[session] = true
		}
	}
	return slices.Sorted(mapsKeys(cleaned)), nil
}

// Close implements executors.Executor: pods keep running.
func (e *Executor) Close() error {
	e.sessions.Drain() // the pods' relays stay: see relays
	e.stopOnce.Do(func() { close(e.stopInf) })
	return nil
}

// Kill deletes a session's pod at once (no grace period), as an operator
// or an eviction would. Tests use it; it is not part of the Executor
// interface.
func (e *Executor) Kill(ctx context.Context, h executors.Handle) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	zero := int64(0)
	return e.client.CoreV1().Pods(st.Namespace).Delete(ctx, st.Pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// containerEnv is what of the orchestrator's environment the pod gets:
// the agent's allowlist, except the base variables (PATH, HOME, ...),
// which are the image's. Values go into the pod's Secret.
func containerEnv(spec executors.Spec) map[string]string {
	names := slices.DeleteFunc(profiles.Allowed(spec.Agent.ProfileSpec()), func(n string) bool { return slices.Contains(profiles.BaseEnv, n) })
	out := map[string]string{}
	for _, kv := range profiles.Filter(os.Environ(), names) {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// podName is a DNS-1123 label naming the session, unique per launch.
func podName(sessionID string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(sessionID) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 40 {
		base = base[:40]
	}
	return strings.Trim("ts-"+base, "-") + "-" + strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36), 36)
}

// labelValue is v if it is a valid label value, else a hash of it.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:])[:40]
}

// apiError maps the API server's refusals to the domain's errors.
func apiError(err error) error {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrPermissionDenied)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrAlreadyExists)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
	}
	return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
