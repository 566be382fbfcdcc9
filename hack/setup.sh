#!/usr/bin/env bash
# Installs what allot's build, demo and tests need, when missing. Safe to
# run repeatedly.
#
#  - Go: checked, never installed; it must be at least the version on
#    go.mod's `go` line, else setup says how to install it and fails.
#  - Debian packages (as root; waits for another apt/dpkg to finish instead
#    of failing): etcd-server (external-etcd tests), runc and busybox-static
#    (containers), with --test chromium (the dashboard's browser test, run
#    headless; never a tool's own browser download).
#  - kubectl (compatibility tests): Debian has no package, so when none is
#    on PATH it is built from the Go module proxy (hack/tools/kubectl, its
#    own module pinned to allot's client-go version) into
#    _output/bin/kubectl, where the tests also look.
#  - the Go modules (go mod download).
#
# For its tests (test/setup), these variables replace fixed paths:
#   ALLOT_SETUP_BUSYBOX   busybox-static's binary (default /bin/busybox)
#   ALLOT_SETUP_CHROMIUM  chromium's binary (default /usr/bin/chromium)
#   ALLOT_SETUP_PROC      where to look for apt/dpkg lock holders (default /proc)
#   ALLOT_SETUP_LOCK_WAIT seconds to wait for the apt/dpkg locks (default 600)
#   ALLOT_SETUP_LOCK_POLL seconds between looks at the locks (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."

busybox=${ALLOT_SETUP_BUSYBOX:-/bin/busybox}
chromium=${ALLOT_SETUP_CHROMIUM:-/usr/bin/chromium}
proc=${ALLOT_SETUP_PROC:-/proc}
lock_wait=${ALLOT_SETUP_LOCK_WAIT:-600}
lock_poll=${ALLOT_SETUP_LOCK_POLL:-5}

# --- Go, at least go.mod's version.
want_go=$(sed -n 's/^go \([0-9][0-9.]*\)[[:space:]]*$/\1/p' go.mod)
if [ -z "$want_go" ]; then
  echo "setup: go.mod has no 'go' line" >&2
  exit 1
fi
go_help() {
  local arch
  case "$(uname -m)" in
  aarch64) arch=arm64 ;;
  *) arch=amd64 ;;
  esac
  cat >&2 <<EOF
setup: install Go $want_go or newer from https://go.dev/dl/ (Debian's golang
package is older): download go$want_go.linux-$arch.tar.gz from there, then
  rm -rf /usr/local/go && tar -C /usr/local -xzf go$want_go.linux-$arch.tar.gz
  export PATH=/usr/local/go/bin:\$PATH   # and add this line to ~/.profile
and run $0 again.
EOF
}
if ! command -v go >/dev/null 2>&1; then
  echo "setup: Go is not on PATH; allot needs Go $want_go or newer" >&2
  if [ -x /usr/local/go/bin/go ]; then
    echo "setup: /usr/local/go/bin/go exists: export PATH=/usr/local/go/bin:\$PATH" >&2
  fi
  go_help
  exit 1
fi
# Run in the module, so that a Go that switches toolchains (GOTOOLCHAIN)
# reports the one it would build with, and one that cannot says why.
if ! have_go=$(go env GOVERSION); then
  echo "setup: $(command -v go) cannot build this module (it needs Go $want_go or newer)" >&2
  go_help
  exit 1
fi
# version_ge A B: whether dotted version A >= B (go1.26.8, 1.26rc1, ...).
version_ge() {
  local a b i x y
  IFS=. read -ra a <<<"$1"
  IFS=. read -ra b <<<"$2"
  for ((i = 0; i < ${#b[@]}; i++)); do
    x=${a[i]:-0} y=${b[i]:-0}
    x=${x%%[!0-9]*} y=${y%%[!0-9]*}
    x=${x:-0} y=${y:-0}
    if ((10#$x != 10#$y)); then
      ((10#$x > 10#$y))
      return
    fi
  done
  return 0
}
have_ver=
if [[ $have_go =~ go([0-9][0-9.]*) ]]; then
  have_ver=${BASH_REMATCH[1]}
fi
if [ -z "$have_ver" ] || ! version_ge "$have_ver" "$want_go"; then
  echo "setup: $(command -v go) is $have_go; allot needs Go $want_go or newer" >&2
  go_help
  exit 1
fi

# --- Debian packages.
# lock_holders prints "PID (COMMAND)" for each process holding an apt/dpkg
# lock file open (apt and dpkg hold them open while they run).
lock_holders() {
  local fd pid comm
  find "$proc"/[0-9]*/fd -maxdepth 1 \( -lname /var/lib/dpkg/lock-frontend \
    -o -lname /var/lib/dpkg/lock -o -lname /var/lib/apt/lists/lock \
    -o -lname /var/cache/apt/archives/lock \) 2>/dev/null |
    while read -r fd; do
      pid=${fd#"$proc"/}
      pid=${pid%%/*}
      comm=$(cat "$proc/$pid/comm" 2>/dev/null || echo '?')
      echo "$pid ($comm)"
    done | sort -u | tr '\n' ' ' || true
}
# wait_for_apt waits up to $lock_wait seconds for other apt/dpkg runs
# (unattended-upgrades on a fresh machine) to let go of their locks.
wait_for_apt() {
  local waited=0 holders
  while holders=$(lock_holders) && [ -n "$holders" ]; do
    if ((waited >= lock_wait)); then
      echo "setup: apt/dpkg still busy after ${lock_wait}s (held by ${holders% }); run $0 again when it is done" >&2
      exit 1
    fi
    echo "setup: waiting for apt/dpkg, held by ${holders% } (${waited}s of ${lock_wait}s)" >&2
    sleep "$lock_poll"
    waited=$((waited + lock_poll))
  done
}

need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x "$busybox" ] || need+=(busybox-static)
# Only the tests need a browser: `hack/setup.sh --test`.
if [ "${1:-}" = "--test" ]; then
  [ -x "$chromium" ] || need+=(chromium)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages ${need[*]}; run $0 as root, or install them: apt-get install ${need[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # apt-get's own wait (DPkg::Lock::Timeout) is for dpkg's locks;
  # wait_for_apt also covers the package lists' and archives' locks.
  apt_opts=(-o "DPkg::Lock::Timeout=$lock_wait")
  wait_for_apt
  apt-get "${apt_opts[@]}" update -qq
  wait_for_apt
  apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# --- kubectl: PATH's, else ours, built again when its module changed or
# it was built without the version flags below.
# kubectl_ldflags prints the -ldflags that give the built kubectl its
# version (else `kubectl version` says v0.0.0-master): k8s.io/kubectl
# v0.X.Y in hack/tools/kubectl/go.mod is Kubernetes v1.X.Y.
kubectl_ldflags() {
  local line mod= pkg=k8s.io/component-base/version
  while read -r line; do
    if [[ $line =~ ^(require[[:space:]]+)?k8s\.io/kubectl[[:space:]]+(v[^[:space:]]+) ]]; then
      mod=${BASH_REMATCH[2]}
    fi
  done <hack/tools/kubectl/go.mod
  if ! [[ $mod =~ ^v0\.([0-9]+)\.([0-9].*)$ ]]; then
    echo "setup: hack/tools/kubectl/go.mod requires no k8s.io/kubectl v0.X.Y${mod:+ (it has $mod)}" >&2
    return 1
  fi
  echo "-X $pkg.gitVersion=v1.${BASH_REMATCH[1]}.${BASH_REMATCH[2]} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${BASH_REMATCH[1]}"
}
kubectl=_output/bin/kubectl
if command -v kubectl >/dev/null 2>&1; then
  :
else
  kubectl_flags=$(kubectl_ldflags)
  # go version -m prints the -ldflags a binary was built with.
  if [ -x "$kubectl" ] && ! [ hack/tools/kubectl/go.mod -nt "$kubectl" ] &&
    [[ $(go version -m "$kubectl" 2>/dev/null) == *"-ldflags=\"$kubectl_flags\""* ]]; then
    echo "setup: using $PWD/$kubectl (kubectl is not on PATH)"
  else
    echo "setup: building kubectl from the Go module proxy (first time takes a few minutes)"
    mkdir -p _output/bin
    # Into a temporary name first: a test may be building it at the same time.
    (cd hack/tools/kubectl && GOWORK=off go build -ldflags "$kubectl_flags" -o "../../../$kubectl.tmp.$$" .)
    mv -f "$kubectl.tmp.$$" "$kubectl"
    echo "setup: kubectl is at $PWD/$kubectl; to use it: export PATH=$PWD/_output/bin:\$PATH"
  fi
fi

go mod download
