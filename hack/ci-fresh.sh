#!/usr/bin/env bash
# make ci-fresh: .ci/run as a brand-new machine sees it, on a fresh clone of
# HEAD (committed work only, as CI gets it).
#
# What an earlier run leaves behind on a machine, and what this does to it:
#   - the Docker engine's containers and images that the project's tests
#     create (label toolscope.test or toolscope.managed, or an image named
#     toolscope-test-*; nothing else is touched): removed;
#   - ~/.cache/toolscope (the Kubernetes binaries, the git root file system
#     of the workspace tests): moved aside for the run,
#     put back after it (the run's own copy is removed);
#   - the Go build and module caches and npm's cache: the run gets empty
#     ones of its own (GOCACHE, GOMODCACHE, npm_config_cache), removed after;
#   - the agent CLIs' and the interop client's node_modules: a fresh clone
#     has none.
# Debian packages the run installs (docker.io, chromium, postgresql, ...)
# stay installed: a new machine installs them in .ci/run's first steps, and
# this cannot uninstall what a session may need. CI_FRESH_KEEP_GO_CACHES=1
# keeps the Go caches (a faster run that no longer times a cold build).
#
# The log is $CI_FRESH_DIR/ci.log (default: a new directory under /var/tmp,
# removed with the clone unless CI_FRESH_KEEP=1); .ci/run ends with the
# wall time of each step.
set -euo pipefail
top="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
work="${CI_FRESH_DIR:-$(mktemp -d /var/tmp/toolscope-ci-fresh.XXXXXX)}"
mkdir -p "$work"
# mktemp makes it 0700: the agent tests run the agent CLIs from the clone
# under uids of their own, which must be able to reach them (as in CI's
# own folder).
chmod 0755 "$work"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/toolscope"
aside="$cache.aside.$$"

say() { printf '== ci-fresh: %s\n' "$*"; }

restore() {
  local rc=$?
  if [[ -e $aside ]]; then
    rm -rf "$cache" && mv "$aside" "$cache"
    say "put ~/.cache/toolscope back"
  elif [[ -e $cache ]]; then
    rm -rf "$cache"
  fi
  # The module cache is read-only by design; make it removable.
  [[ -d $work/gomodcache ]] && chmod -R u+w "$work/gomodcache"
  if [[ -n ${CI_FRESH_KEEP:-} ]]; then
    say "kept $work (log: $work/ci.log)"
  else
    cp "$work/ci.log" "$top/bench/ci-fresh.log" 2>/dev/null || true
    rm -rf "$work"
    say "removed $work; the log is in bench/ci-fresh.log"
  fi
  exit $rc
}
trap restore EXIT

# The Docker engine: .ci/run starts one if none answers; this starts it the
# same way first, so that the images an earlier run left are seen.
if ! docker info >/dev/null 2>&1 && command -v dockerd >/dev/null; then
  say "starting dockerd to clear what earlier runs left in it"
  nohup dockerd >/tmp/toolscope-ci-dockerd.log 2>&1 &
  for _ in $(seq 1 90); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
if docker info >/dev/null 2>&1; then
  containers=$( { docker ps -aq --filter label=toolscope.test; docker ps -aq --filter label=toolscope.managed; } | sort -u)
  if [[ -n $containers ]]; then
    say "removing $(wc -w <<<"$containers") test container(s)"
    docker rm -f $containers >/dev/null
  fi
  images=$( { docker images -q --filter label=toolscope.test; docker images -q --filter 'reference=toolscope-test-*'; } | sort -u)
  if [[ -n $images ]]; then
    say "removing $(wc -w <<<"$images") test image(s): $(docker images --format '{{.Repository}}:{{.Tag}}' --filter 'reference=toolscope-test-*' | tr '\n' ' ')"
    docker rmi -f $images >/dev/null
  fi
  docker builder prune -f >/dev/null 2>&1 || true
else
  say "no Docker engine on this machine yet (.ci/run installs and starts one)"
fi

if [[ -e $cache ]]; then
  say "moving ~/.cache/toolscope aside"
  mv "$cache" "$aside"
fi

env=(CI=true npm_config_cache="$work/npmcache")
if [[ -z ${CI_FRESH_KEEP_GO_CACHES:-} ]]; then
  env+=(GOCACHE="$work/gocache" GOMODCACHE="$work/gomodcache")
fi

say "cloning $(git -C "$top" rev-parse --short HEAD) into $work/toolscope"
git clone -q --no-local "$top" "$work/toolscope"
say "running .ci/run (log: $work/ci.log)"
start=$SECONDS
cd "$work/toolscope"
rc=0
env "${env[@]}" bash .ci/run </dev/null >"$work/ci.log" 2>&1 || rc=$?
say ".ci/run exited $rc after $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
sed -n '/^== step times/,$p' "$work/ci.log"
if ((rc)); then
  grep -E -- '^(--- FAIL|FAIL|panic:)' "$work/ci.log" | head -40 || true
  tail -30 "$work/ci.log"
fi
exit $rc
