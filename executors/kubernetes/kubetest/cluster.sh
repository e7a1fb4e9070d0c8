#!/usr/bin/env bash
# The test cluster's process 1, in private pid, network and mount
# namespaces (kubetest.Start runs it under unshare). Ending it ends every
# process of the cluster, and with them its namespaces, mounts, bridge and
# veth. $1 is the cluster's directory, with env (the addresses), the
# certificates and the configurations kubetest wrote.
set -euo pipefail
D="$1"
# shellcheck source=/dev/null
source "$D/env"

# Hard-coded paths of the kubelet, containerd and CNI land in this mount
# namespace only.
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/log
mount -t tmpfs tmpfs /var/lib
mkdir -p /var/lib/cni /var/lib/kubelet /run/containerd

# The host joins eth0 to its end of the veth pair and touches veth-ready.
for _ in $(seq 1 200); do [[ -e "$D/veth-ready" ]] && break; sleep 0.05; done
[[ -e "$D/veth-ready" ]] || { echo "no veth from the host" >&2; exit 1; }
ip link set lo up
ip addr add "$NODE_IP/30" dev eth0
ip link set eth0 up
ip route add default via "$HOST_IP"
sysctl -qw net.ipv4.ip_forward=1

# The kubelet's cgroup root must exist in every hierarchy (kubetest
# removes it after the cluster ended).
for h in /sys/fs/cgroup/*/; do mkdir -p "$h$CGROUP"; done

start() { # name, command...
  local name="$1"
  shift
  "$@" >"$D/logs/$name.log" 2>&1 &
  echo "$!" >"$D/$name.pid"
}

start containerd containerd --config "$D/containerd.toml"
start etcd "$ETCD" --data-dir "$D/etcd" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
  --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster default=http://127.0.0.1:2380
start kube-apiserver "$BIN/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
  --advertise-address "$NODE_IP" --bind-address 0.0.0.0 --secure-port 6443 \
  --tls-cert-file "$D/apiserver.crt" --tls-private-key-file "$D/apiserver.key" --client-ca-file "$D/ca.crt" \
  --kubelet-client-certificate "$D/admin.crt" --kubelet-client-key "$D/admin.key" \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$D/sa.pub" \
  --service-account-signing-key-file "$D/sa.key" --service-cluster-ip-range "$SERVICE_CIDR" \
  --kubelet-preferred-address-types InternalIP --authorization-mode Node,RBAC --anonymous-auth=false --profiling=false --v=0
# The controller-manager and the scheduler give up when the apiserver is
# not healthy within 10 s (a loaded machine): they are started again.
again() { # name, command...
  local name="$1"
  shift
  while true; do
    "$@" >>"$D/logs/$name.log" 2>&1 || true
    sleep 1
  done
}
again kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$D/admin.kubeconfig" \
  --service-account-private-key-file "$D/sa.key" --root-ca-file "$D/ca.crt" --leader-elect=false \
  --bind-address 127.0.0.1 --secure-port 0 --controllers '*' --v=0 &
again kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$D/admin.kubeconfig" --leader-elect=false \
  --bind-address 127.0.0.1 --secure-port 0 --v=0 &
# The kubelet starts once containerd answers.
for _ in $(seq 1 200); do [[ -S "$D/containerd.sock" ]] && break; sleep 0.05; done
start kubelet "$BIN/kubelet" --config "$D/kubelet.yaml" --kubeconfig "$D/kubelet.kubeconfig" \
  --root-dir /var/lib/kubelet --node-ip "$NODE_IP" --hostname-override "$NODE_NAME" --v=0

# containerd, etcd, the apiserver or the kubelet ending ends the cluster:
# the test fails with its log.
wait -n "$(cat "$D/containerd.pid")" "$(cat "$D/etcd.pid")" "$(cat "$D/kube-apiserver.pid")" "$(cat "$D/kubelet.pid")"
echo "a cluster process ended" >&2
exit 1
