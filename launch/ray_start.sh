#!/usr/bin/env bash
# Start (or restart) Ray on this node with the resources raydist schedules on:
#   GPU node  advertises its GPUs (model servers such as vLLM ask for them);
#   CPU node  advertises the custom resource `sandbox`, one slot per CPU, for Docker work
#             (agent loops and grading each hold one slot).
# Usage: launch/ray_start.sh head|worker [--sandbox-slots N] [ray start flags...]
#   head:   e.g. --port=6379 --autoscaling-config=~/ray_bootstrap_config.yaml
#   worker: e.g. --address=$RAY_HEAD_IP:6379
# --sandbox-slots N overrides the slot count (0 = no Docker work on this node; a GPU node
# gets 0 unless given). Run `bash launch/setup.sh setup` first: Ray comes from .venv, or from
# the virtual environment $RAYDIST_VENV names (one environment serving several checkouts).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RAY="${RAYDIST_VENV:-$ROOT/.venv}/bin/ray"

die() {
  echo "ray_start.sh: error: $*" >&2
  exit 1
}

role=${1:-}
case "$role" in
  head|worker) shift ;;
  *) die "first argument must be 'head' or 'worker', got '${role}'" ;;
esac

slots=""
if [ "${1:-}" = "--sandbox-slots" ]; then
  [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--sandbox-slots needs a whole number, got '${2:-}'"
  slots=$2
  shift 2
fi

[ -x "$RAY" ] || die "$RAY not found; run 'bash launch/setup.sh setup' on this node first"

gpus=0
if command -v nvidia-smi >/dev/null; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ -z "$slots" ]; then
  if [ "$gpus" -gt 0 ]; then slots=0; else slots=$(nproc); fi
fi

flags=()
[ "$role" = head ] && flags+=(--head)
# Ray detects GPUs itself; saying the count keeps a failed detection from going unnoticed.
[ "$gpus" -gt 0 ] && flags+=("--num-gpus=$gpus")
[ "$slots" -gt 0 ] && flags+=("--resources={\"sandbox\": $slots}")

echo "ray_start.sh: $role node with $gpus GPU(s) and $slots sandbox slot(s)"
"$RAY" stop >/dev/null 2>&1 || true
# Many workers each hold sockets and log files open.
ulimit -n 65536 2>/dev/null || true
exec "$RAY" start "${flags[@]}" "$@"
