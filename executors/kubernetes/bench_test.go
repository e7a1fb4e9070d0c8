package kubernetes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/kubernetes/kubetest"
)

// BenchmarkLaunchToFirstList: a kubernetes launch (Secret, pod with its
// init container, Running, agentctl reached through port-forward under
// mutual TLS, session created) to the first tools/list answered, against
// the same cluster's floor: a pod of the scratch image running the pause
// program, from create to Running. Next to docker's figure in
// docs/benchmarks.md.
func BenchmarkLaunchToFirstList(b *testing.B) {
	f := setup(b)
	e := f.executor(b, f.options(b.Name(), nil, nil))
	executortest.BenchLaunch(b, e, func(s *executors.Spec) { s.Image = scratchImage }, podFloor(f))
}

// podFloor creates a pod of the pause image and waits for it to run:
// the cluster's cost of running anything at all. Deletion is untimed.
func podFloor(f fixture) func(b *testing.B) func() {
	return func(b *testing.B) func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pods := f.cluster.Client.CoreV1().Pods(f.namespace)
		name := fmt.Sprintf("floor-%d", time.Now().UnixNano()%1e9)
		no := false
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "pause", Image: kubetest.PauseImage, ImagePullPolicy: corev1.PullNever}},
		}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		remove := func() {
			zero := int64(0)
			_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified && p.Status.Phase == corev1.PodRunning {
				return remove
			}
		}
		// Say why: the pod's state, and what the cluster recorded of it.
		why := "gone"
		if p, err := pods.Get(context.Background(), name, metav1.GetOptions{}); err == nil {
			why = fmt.Sprintf("phase %s, conditions %v, containers %v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		}
		var events []string
		if list, err := f.cluster.Client.CoreV1().Events(f.namespace).List(context.Background(),
			metav1.ListOptions{FieldSelector: "involvedObject.name=" + name}); err == nil {
			for _, e := range list.Items {
				events = append(events, e.Reason+": "+e.Message)
			}
		}
		remove()
		b.Fatalf("the floor pod %s did not run within a minute: %s; events: %v", name, why, events)
		return nil
	}
}
