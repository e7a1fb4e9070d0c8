// Package kubetest starts a throw-away single-node Kubernetes cluster for
// the executors/kubernetes tests: kube-apiserver, kube-controller-manager,
// kube-scheduler and the kubelet (built once per machine by
// hack/kubernetes.sh build), etcd, containerd with runc and CNI bridge
// networking (Debian packages, hack/kubernetes.sh deps), all in private
// pid, network and mount namespaces joined to the host by a veth pair.
// Nothing can be pulled: the images the tests run are one-layer archives of
// static binaries, imported into the cluster's containerd.
//
// Stop ends the namespaces' process 1, which ends every process of the
// cluster and with them its mounts, bridge and veth; then it removes the
// cgroup directories and the cluster's directory. Call it from TestMain,
// before testutil.LeaveNothing checks.
package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	_ "embed"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolscope/toolscope/internal/testutil"
)

// Version is the Kubernetes release the harness runs (tools/kubernetes/go.mod).
const Version = "v1.37.2"

// EnvBin names the directory of the Kubernetes binaries, if not the cache
// hack/kubernetes.sh builds into.
const EnvBin = "TOOLSCOPE_KUBERNETES_BIN"

// NodeName is the cluster's one node.
const NodeName = "toolscope-node"

// PauseImage is the sandbox image the cluster's containerd uses.
const PauseImage = "toolscope.test/pause:1"

//go:embed cluster.sh
var script []byte

// Cluster is a running test cluster.
type Cluster struct {
	// Dir holds the certificates, configurations and the components' logs.
	Dir string
	// Config and Client are the cluster admin's (system:masters).
	Config *rest.Config
	Client kubernetes.Interface
	// CA signs the cluster's certificates: a test issues users with it.
	CA *CA
	// NodeIP is the node's address, reachable from the host; PodCIDR is
	// routed to it. HostIP is the host's end of that link, which pods
	// reach: where a test serves what a pod must reach (a git server).
	NodeIP, PodCIDR, HostIP string
	// Started is how long the start took, to a schedulable node with its
	// default ServiceAccount.
	Started time.Duration

	cmd    *exec.Cmd
	veth   string
	cgroup string
	done   chan struct{}
	images sync.Map // name -> error
}

var (
	once     sync.Once
	current  *Cluster
	startErr error
	skipWhy  string
)

// Bin is the directory of the Kubernetes binaries.
func Bin() string {
	if d := os.Getenv(EnvBin); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "toolscope", "kubernetes-"+Version, "bin")
}

// missing says what the machine lacks to run the cluster ("" if nothing).
func missing() string {
	if os.Geteuid() != 0 {
		return "the test cluster needs root (namespaces, mounts, cgroups)"
	}
	var lack []string
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if _, err := os.Stat(filepath.Join(Bin(), c)); err != nil {
			lack = append(lack, filepath.Join(Bin(), c)+" (hack/kubernetes.sh build)")
		}
	}
	for _, c := range []string{"etcd", "containerd", "runc", "ctr", "unshare", "ip", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			lack = append(lack, c+" (hack/kubernetes.sh deps)")
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		lack = append(lack, "/usr/lib/cni/bridge (hack/kubernetes.sh deps)")
	}
	if len(lack) == 0 {
		return ""
	}
	return "the test cluster needs " + strings.Join(lack, ", ")
}

// Start returns the package's test cluster, starting it on first use. It
// skips t where the machine lacks what the cluster needs (fails under CI).
func Start(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() {
		if skipWhy = missing(); skipWhy != "" {
			return
		}
		current, startErr = start(t)
	})
	if skipWhy != "" {
		testutil.SkipOrFailUnderCI(t, "%s", skipWhy)
	}
	if startErr != nil {
		t.Fatalf("start the test cluster: %v", startErr)
	}
	return current
}

// Stop tears the package's cluster down, if one was started; for TestMain.
func Stop() {
	if current != nil {
		current.stop()
		current = nil
	}
}

func start(t testing.TB) (c *Cluster, err error) {
	began := time.Now()
	dir, err := os.MkdirTemp("", "toolscope-kubetest-")
	if err != nil {
		return nil, err
	}
	// Addresses of this process's own: a /30 for the veth pair, a /24 of
	// pods, a /24 of services.
	n := os.Getpid()%200 + 20
	c = &Cluster{
		Dir: dir, NodeIP: fmt.Sprintf("10.231.%d.2", n), PodCIDR: fmt.Sprintf("10.232.%d.0/24", n),
		veth: fmt.Sprintf("tsk8s%d", os.Getpid()%100000), cgroup: fmt.Sprintf("toolscope-kubetest-%d", os.Getpid()),
		done: make(chan struct{}),
	}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	hostIP := fmt.Sprintf("10.231.%d.1", n)
	c.HostIP = hostIP
	serviceCIDR := fmt.Sprintf("10.233.%d.0/24", n)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return c, err
	}
	if c.CA, err = newCA(); err != nil {
		return c, err
	}
	etcd, _ := exec.LookPath("etcd")
	files := map[string]string{
		"env": fmt.Sprintf("NODE_IP=%s\nHOST_IP=%s\nSERVICE_CIDR=%s\nBIN=%s\nETCD=%s\nNODE_NAME=%s\nCGROUP=%s\n",
			c.NodeIP, hostIP, serviceCIDR, Bin(), etcd, NodeName, c.cgroup),
		"cluster.sh": string(script),
		"ca.crt":     string(c.CA.CertPEM),
		"containerd.toml": fmt.Sprintf(`version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "%[1]s/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[2]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni"
`, dir, PauseImage),
		"cni/10-toolscope.conflist": fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "toolscope", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "%s/cni-ipam"}}]}
`, c.PodCIDR, dir),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[2]s
failSwapOn: false
containerRuntimeEndpoint: unix://%[1]s/containerd.sock
address: %[3]s
port: 10250
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %[1]s/kubelet.crt
tlsPrivateKeyFile: %[1]s/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]s/ca.crt}
authorization: {mode: Webhook}
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
resolvConf: ""
localStorageCapacityIsolation: false
`, dir, c.cgroup, c.NodeIP),
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return c, err
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			return c, err
		}
	}
	server := "https://" + net.JoinHostPort(c.NodeIP, "6443")
	if err := c.CA.writePair(dir, "apiserver", "kube-apiserver", nil, []string{c.NodeIP, "127.0.0.1", "10.233." + strconv.Itoa(n) + ".1", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, true); err != nil {
		return c, err
	}
	if err := c.CA.writePair(dir, "kubelet", NodeName, nil, []string{c.NodeIP, NodeName}, true); err != nil {
		return c, err
	}
	if err := c.CA.writeKubeconfig(dir, "admin", "kubetest-admin", []string{"system:masters"}, server); err != nil {
		return c, err
	}
	if err := c.CA.writeKubeconfig(dir, "kubelet", "system:node:"+NodeName, []string{"system:nodes"}, server); err != nil {
		return c, err
	}
	if err := writeServiceAccountKey(dir); err != nil {
		return c, err
	}

	c.cmd = exec.Command("unshare", "--pid", "--net", "--mount", "--propagation", "private", "--mount-proc", "--fork", "--kill-child",
		"bash", filepath.Join(dir, "cluster.sh"), dir)
	out, err := os.Create(filepath.Join(dir, "logs", "cluster.log"))
	if err != nil {
		return c, err
	}
	defer out.Close()
	c.cmd.Stdout, c.cmd.Stderr = out, out
	// Its own process group: a test's signal never reaches the cluster.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		return c, err
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	init, err := c.nsInit(5 * time.Second)
	if err != nil {
		return c, err
	}
	for _, args := range [][]string{
		{"link", "add", c.veth, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(init)},
		{"addr", "add", hostIP + "/30", "dev", c.veth},
		{"link", "set", c.veth, "up"},
		{"route", "add", c.PodCIDR, "via", c.NodeIP, "dev", c.veth},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return c, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "veth-ready"), nil, 0o600); err != nil {
		return c, err
	}

	if c.Config, err = clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig")); err != nil {
		return c, err
	}
	c.Config.QPS, c.Config.Burst = 100, 200
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return c, err
	}
	// The pause image first: no pod starts without it.
	if err := c.waitFor(30*time.Second, "containerd", func() bool { _, err := os.Stat(filepath.Join(dir, "containerd.sock")); return err == nil }); err != nil {
		return c, err
	}
	if err := c.importImage(PauseImage, map[string]File{"/pause": {Path: pause.Path(t)}}, []string{"/pause"}); err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.waitFor(60*time.Second, "a Ready node", func() bool {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	}); err != nil {
		return c, err
	}
	if err := c.waitFor(60*time.Second, "the default ServiceAccount", func() bool {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return c, err
	}
	c.Started = time.Since(began)
	return c, nil
}

// nsInit is the host pid of the namespaces' process 1 (unshare's child).
func (c *Cluster) nsInit(within time.Duration) (int, error) {
	var pid int
	err := c.waitFor(within, "unshare's child", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.cmd.Process.Pid, c.cmd.Process.Pid))
		if err != nil {
			return false
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return false
		}
		pid, _ = strconv.Atoi(f[0])
		return pid > 0
	})
	return pid, err
}

// waitFor polls ready until it holds, the cluster ends or within passes.
func (c *Cluster) waitFor(within time.Duration, what string, ready func() bool) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("the cluster ended while waiting for %s:\n%s", what, c.Logs())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s:\n%s", what, within, c.Logs())
		}
	}
}

// Logs returns the last lines of every component's log.
func (c *Cluster) Logs() string {
	var b strings.Builder
	entries, _ := os.ReadDir(filepath.Join(c.Dir, "logs"))
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(c.Dir, "logs", e.Name()))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "== %s\n%s\n", e.Name(), strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

func (c *Cluster) stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		if init, err := c.nsInit(0); err == nil {
			// Ending the pid namespace's process 1 ends every process in it.
			_ = syscall.Kill(init, syscall.SIGKILL)
		}
		_ = syscall.Kill(c.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
		}
	}
	// The host end of the veth goes with the namespace; a failed start may
	// have left it.
	_ = exec.Command("ip", "link", "del", c.veth).Run()
	c.removeCgroups()
	_ = os.RemoveAll(c.Dir)
}

// removeCgroups removes the kubelet's cgroup tree in every hierarchy once
// its processes are gone (rmdir, deepest first).
func (c *Cluster) removeCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + c.cgroup)
	if own := "/sys/fs/cgroup/" + c.cgroup; isDir(own) {
		roots = append(roots, own)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, root := range roots {
		for {
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			var failed error
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
					failed = err
				}
			}
			if failed == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

// CA is the test cluster's certificate authority.
type CA struct {
	CertPEM []byte
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
}

func newCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubetest-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// Issue issues a certificate: a client's with its user name and groups,
// or a server's for hosts.
func (ca *CA) Issue(user string, groups, hosts []string, server bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func (ca *CA) writePair(dir, name, user string, groups, hosts []string, server bool) error {
	cert, key, err := ca.Issue(user, groups, hosts, server)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), key, 0o600)
}

func (ca *CA) writeKubeconfig(dir, name, user string, groups []string, server string) error {
	if err := ca.writePair(dir, name, user, groups, nil, false); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: kubetest, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: %q, user: {client-certificate: %q, client-key: %q}}]
contexts: [{name: kubetest, context: {cluster: kubetest, user: %q}}]
current-context: kubetest
`, server, filepath.Join(dir, "ca.crt"), user, filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), user)
	return os.WriteFile(filepath.Join(dir, name+".kubeconfig"), []byte(cfg), 0o600)
}

// UserConfig is a client configuration of the cluster as user, in groups:
// what RBAC then allows it is what the user can do.
func (c *Cluster) UserConfig(user string, groups ...string) (*rest.Config, error) {
	cert, key, err := c.CA.Issue(user, groups, nil, false)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = cert, key
	return cfg, nil
}

func writeServiceAccountKey(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

// File is a file of an image: its content, from Path or Data.
type File struct {
	Path string
	Data []byte
	Mode int64
}

// Image imports a one-layer image of files (by path in the image) with
// the given entrypoint into the cluster's containerd, once per name.
func (c *Cluster) Image(t testing.TB, name string, files map[string]File, entrypoint []string) string {
	t.Helper()
	v, _ := c.images.LoadOrStore(name, &imageOnce{})
	o := v.(*imageOnce)
	o.once.Do(func() { o.err = c.importImage(name, files, entrypoint) })
	if o.err != nil {
		t.Fatalf("import image %s: %v", name, o.err)
	}
	return name
}

type imageOnce struct {
	once sync.Once
	err  error
}

func (c *Cluster) importImage(name string, files map[string]File, entrypoint []string) error {
	b, err := filesLayer(files)
	if err != nil {
		return err
	}
	return c.importLayer(name, bytesLayer(b), entrypoint)
}

// RootfsImage imports a one-layer image of a root file system (a tar,
// such as executortest.GitRootfs) with the given entrypoint into the
// cluster's containerd, once per name.
func (c *Cluster) RootfsImage(t testing.TB, name, rootfs string, entrypoint []string) string {
	t.Helper()
	v, _ := c.images.LoadOrStore(name, &imageOnce{})
	o := v.(*imageOnce)
	o.once.Do(func() {
		l, f, err := fileLayer(rootfs)
		if err != nil {
			o.err = err
			return
		}
		defer f.Close()
		o.err = c.importLayer(name, l, entrypoint)
	})
	if o.err != nil {
		t.Fatalf("import image %s: %v", name, o.err)
	}
	return name
}

// importLayer streams a one-layer image into `ctr images import`.
func (c *Cluster) importLayer(name string, l layer, entrypoint []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", "--address", filepath.Join(c.Dir, "containerd.sock"), "-n", "k8s.io", "images", "import", "-")
	pr, pw := io.Pipe()
	cmd.Stdin = pr
	go func() { pw.CloseWithError(writeArchive(pw, name, l, entrypoint)) }()
	out, err := cmd.CombinedOutput()
	pr.CloseWithError(io.ErrClosedPipe) // the writer never blocks on an importer that ended
	if err != nil {
		return fmt.Errorf("ctr images import: %v: %s", err, out)
	}
	return nil
}

var pause = testutil.Binary{Package: "github.com/toolscope/toolscope/executors/kubernetes/kubetest/pause", Name: "pause"}

// RemoveBuilds deletes the binaries the harness built; for TestMain.
func RemoveBuilds() { pause.Remove() }
