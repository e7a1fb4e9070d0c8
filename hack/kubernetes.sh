#!/usr/bin/env bash
# The throw-away Kubernetes cluster of the executors/kubernetes tests: what it
# needs on the machine, built or installed once.
#
#   hack/kubernetes.sh deps    Debian packages: etcd-server, containerd, runc,
#                              containernetworking-plugins (apt-get, idempotent)
#   hack/kubernetes.sh build   the Kubernetes binaries pinned by
#                              tools/kubernetes/go.mod, built once per machine
#                              into $TOOLSCOPE_KUBERNETES_BIN (default
#                              ${XDG_CACHE_HOME:-$HOME/.cache}/toolscope/kubernetes-<version>/bin)
#   hack/kubernetes.sh bin     print that directory
#
# The tests (executors/kubernetes/kubetest) find the binaries there and skip
# without them (fail under CI). docs/operations.md has the measured times.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mod="$root/tools/kubernetes"
version="$(awk '$1=="k8s.io/kubernetes" {print $2; exit}' "$mod/go.mod")"
bin="${TOOLSCOPE_KUBERNETES_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/toolscope/kubernetes-$version/bin}"
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet)

deps() {
  local need=()
  command -v etcd >/dev/null || need+=(etcd-server)
  command -v containerd >/dev/null || need+=(containerd)
  command -v runc >/dev/null || need+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null || need+=(iptables)
  if ((${#need[@]})); then
    echo "installing ${need[*]} from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  # etcd-server's package starts a system etcd on 2379: the cluster runs its
  # own in a private network namespace, so the system one is not needed.
  if command -v systemctl >/dev/null && systemctl is-active -q etcd 2>/dev/null; then systemctl disable --now etcd >/dev/null 2>&1 || true; fi
}

build() {
  local ok=1
  for c in "${cmds[@]}"; do [[ -x "$bin/$c" ]] || ok=0; done
  if ((ok)); then echo "Kubernetes $version binaries cached in $bin"; return; fi
  mkdir -p "$(dirname "$bin")"
  exec 9>"$(dirname "$bin")/.build.lock"
  flock 9
  ok=1
  for c in "${cmds[@]}"; do [[ -x "$bin/$c" ]] || ok=0; done
  if ((ok)); then echo "Kubernetes $version binaries cached in $bin"; return; fi
  local tmp="$bin.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  echo "building Kubernetes $version (${cmds[*]}) into $bin; once per machine, several minutes"
  local start=$SECONDS
  (cd "$mod" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$tmp/" \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version" \
    $(printf 'k8s.io/kubernetes/cmd/%s ' "${cmds[@]}"))
  rm -rf "$bin" && mv "$tmp" "$bin"
  echo "built in $((SECONDS - start)) s"
}

case "${1:-}" in
  deps) deps ;;
  build) build ;;
  bin) echo "$bin" ;;
  *) echo "usage: $0 deps|build|bin" >&2; exit 2 ;;
esac
