package kubernetes

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolscope/toolscope/internal/errdefs"
)

// Settings are the operator's choices for the backend, as `toolscope
// serve --kubernetes-*` flags give them.
type Settings struct {
	// Namespace, if set, turns the backend on: the sessions' pods run there.
	Namespace string
	// Kubeconfig and Context select a kubeconfig context ($KUBECONFIG and
	// its current context if empty); without any kubeconfig, the in-cluster
	// configuration of the orchestrator's own pod.
	Kubeconfig, Context string
	// AgentctlImage is the toolscope image with /agentctl.
	AgentctlImage string
	// Connect is ConnectPortForward or ConnectPodIP.
	Connect string
	// PullPolicy is the pods' imagePullPolicy (Always, IfNotPresent,
	// Never; the cluster's default if empty).
	PullPolicy string
	// CPU and Memory are each pod's request and limit ("500m", "1Gi").
	CPU, Memory string
	// NodeSelector entries are key=value; Tolerations key[=value]:Effect.
	NodeSelector, Tolerations []string
}

// Options turns the settings into the backend's options (the caller adds
// StateDir, the handlers and the orchestrator's id).
func (s Settings) Options() (Options, error) {
	if s.Namespace == "" {
		return Options{}, errdefs.RequiredField("kubernetes_namespace")
	}
	if s.AgentctlImage == "" {
		return Options{}, errdefs.InvalidField("kubernetes_agentctl_image", "is required: the toolscope image with /agentctl (deploy/kubernetes/README.md)")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = s.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.Context}).ClientConfig()
	if err != nil {
		return Options{}, fmt.Errorf("kubernetes configuration (kubeconfig %q, context %q, or in-cluster): %w", s.Kubeconfig, s.Context, err)
	}
	opts := Options{Config: cfg, Namespace: s.Namespace, AgentctlImage: s.AgentctlImage, Connect: Connect(s.Connect),
		ImagePullPolicy: corev1.PullPolicy(s.PullPolicy), NodeSelector: map[string]string{}}
	switch opts.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return Options{}, errdefs.InvalidField("kubernetes_pull_policy", "%q: use Always, IfNotPresent or Never", s.PullPolicy)
	}
	for name, q := range map[corev1.ResourceName]string{corev1.ResourceCPU: s.CPU, corev1.ResourceMemory: s.Memory} {
		if q == "" {
			continue
		}
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return Options{}, errdefs.InvalidField("kubernetes_"+string(name), "%q: %v", q, err)
		}
		if opts.Resources.Requests == nil {
			opts.Resources.Requests, opts.Resources.Limits = corev1.ResourceList{}, corev1.ResourceList{}
		}
		opts.Resources.Requests[name], opts.Resources.Limits[name] = v, v
	}
	for _, kv := range s.NodeSelector {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return Options{}, errdefs.InvalidField("kubernetes_node_selector", "%q: use key=value", kv)
		}
		opts.NodeSelector[k] = v
	}
	for _, t := range s.Tolerations {
		tol, err := parseToleration(t)
		if err != nil {
			return Options{}, err
		}
		opts.Tolerations = append(opts.Tolerations, tol)
	}
	return opts, nil
}

// parseToleration reads key[=value]:Effect (kubectl taint's syntax); an
// empty effect tolerates every effect.
func parseToleration(s string) (corev1.Toleration, error) {
	spec, effect, _ := strings.Cut(s, ":")
	key, value, hasValue := strings.Cut(spec, "=")
	if key == "" {
		return corev1.Toleration{}, errdefs.InvalidField("kubernetes_toleration", "%q: use key[=value]:Effect", s)
	}
	tol := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(effect)}
	if hasValue {
		tol.Operator, tol.Value = corev1.TolerationOpEqual, value
	}
	switch tol.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Toleration{}, errdefs.InvalidField("kubernetes_toleration", "%q: the effect is NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	return tol, nil
}
