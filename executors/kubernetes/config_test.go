package kubernetes_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/toolscope/toolscope/executors/kubernetes"
	"github.com/toolscope/toolscope/internal/errdefs"
)

func TestSettingsBecomeOptions(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: "https://a.example:6443"}}, {name: b, cluster: {server: "https://b.example:6443"}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: a, context: {cluster: a, user: u}}, {name: b, context: {cluster: b, user: u}}]
current-context: a
`), 0o600))
	opts, err := kubernetes.Settings{Namespace: "agents", Kubeconfig: kubeconfig, Context: "b", AgentctlImage: "toolscope/agentctl:1",
		CPU: "500m", Memory: "1Gi", NodeSelector: []string{"pool=agents"}, Tolerations: []string{"dedicated=agents:NoSchedule", "spot:"}}.Options()
	require.NoError(t, err)
	assert.Equal(t, "https://b.example:6443", opts.Config.Host, "the context chosen")
	assert.Equal(t, resource.MustParse("500m"), opts.Resources.Limits[corev1.ResourceCPU])
	assert.Equal(t, resource.MustParse("1Gi"), opts.Resources.Requests[corev1.ResourceMemory])
	assert.Equal(t, map[string]string{"pool": "agents"}, opts.NodeSelector)
	assert.Equal(t, []corev1.Toleration{
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "agents", Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Operator: corev1.TolerationOpExists},
	}, opts.Tolerations)

	for _, bad := range []kubernetes.Settings{
		{Namespace: "agents", Kubeconfig: kubeconfig},
		{Namespace: "agents", Kubeconfig: kubeconfig, AgentctlImage: "x", CPU: "lots"},
		{Namespace: "agents", Kubeconfig: kubeconfig, AgentctlImage: "x", NodeSelector: []string{"novalue"}},
		{Namespace: "agents", Kubeconfig: kubeconfig, AgentctlImage: "x", Tolerations: []string{"k:Sometimes"}},
		{Namespace: "agents", Kubeconfig: kubeconfig, AgentctlImage: "x", PullPolicy: "Maybe"},
	} {
		_, err := bad.Options()
		assert.ErrorIs(t, err, errdefs.ErrInvalidArgument, "%+v", bad)
	}
}
