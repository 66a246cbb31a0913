#!/usr/bin/env bash
# A three-host Ray cluster made on this machine and driven by Ray's cluster launcher exactly
# as machines you own are (provider `local`, ssh): `ray up`, `ray job submit`, `ray down`.
#
# Each host is a set of Linux namespaces: its own network (a veth on a private /24 behind a
# bridge), process ids, hostname and /tmp, running its own sshd (key-only root login). Hosts
# share the filesystem, so each sees the repository and its virtual environment, and they reach
# the one Docker daemon through /var/run/docker.sock (containers run with network none).
# The head advertises no `sandbox` slot, so run units go to the two workers.
#
# Usage: launch/local_cluster.sh up|submit|down|all [Hydra overrides for submit/all...]
#   up      make the hosts, write $STATE/cluster.yaml, `ray up` it, wait until all 3 nodes are alive
#   submit  `ray job submit` the launcher (cluster=remote agent=oracle, the built-in instances,
#           levels L0,L3 seed 0 = 12 units; extra arguments are more overrides) with this
#           repository as the job's working directory, then print what its rows say
#   down    `ray down`, then remove hosts, bridge, sshd processes, their containers and $STATE
#           (does what is left to do; safe to repeat)
#   all     up, submit, down (down also when a step fails)
#
# Environment (defaults in brackets):
#   RAYDIST_LC_NAME    cluster name, prefix of namespaces, interfaces and hostnames [raydist-lc]
#   RAYDIST_LC_SUBNET  first three octets of the hosts' /24 [10.213.7]: head .1, workers .2 .3
#   RAYDIST_LC_DIR     state: keys, configs, each host's home and /tmp [/var/tmp/$RAYDIST_LC_NAME]
#   RAYDIST_LC_OUTPUT  the job's output_root; must be visible to every host, so not under /tmp
#                      [<repository>/runs/local_cluster]; a second submit there resumes (the
#                      units that finished are not run again)
#   RAYDIST_VENV       the virtual environment with raydist and Ray [<repository>/.venv]
# Needs root, iproute2, util-linux's unshare, openssh-server and rsync (installed with apt on
# first use). Every command it runs and prints is what a real cluster runs; only the
# addresses and the key in $STATE/cluster.yaml differ (see README, "On a Ray cluster").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NAME=${RAYDIST_LC_NAME:-raydist-lc}
SUBNET=${RAYDIST_LC_SUBNET:-10.213.7}
STATE=${RAYDIST_LC_DIR:-/var/tmp/$NAME}
OUTPUT=${RAYDIST_LC_OUTPUT:-$ROOT/runs/local_cluster}
VENV=${RAYDIST_VENV:-$ROOT/.venv}
HOSTS=(head w1 w2)
HEAD_IP=$SUBNET.1
BRIDGE=$NAME-br
BRIDGE_IP=$SUBNET.254
# Each host's share of this machine: the three split its cores between them.
OBJECT_STORE_BYTES=300000000

# What every launcher command sees: no usage report (no network), the cluster's own token, the
# launcher's own state file (Ray keeps it under $RAY_TMPDIR/ray), and Ray's first autoscaler on
# the head: the second one (the default since Ray 2.50) does not support the local provider
# (ray-project/ray#57153) and starts one of the two workers only.
export RAY_USAGE_STATS_ENABLED=0 RAY_UP_enable_autoscaler_v2=0
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$STATE/launcher/.ray/auth_token
export RAY_TMPDIR=$STATE/launcher/tmp TMPDIR=$STATE/launcher/tmp

die() {
  echo "local_cluster.sh: error: $*" >&2
  exit 1
}
say() { echo "local_cluster.sh: $*"; }

host_ip() {
  case "$1" in head) echo "$HEAD_IP" ;; w1) echo "$SUBNET.2" ;; w2) echo "$SUBNET.3" ;; esac
}

check_inputs() {
  [[ "$NAME" =~ ^[a-z][a-z0-9-]{0,9}$ ]] ||
    die "RAYDIST_LC_NAME='$NAME': give 1-10 lowercase letters, digits or '-' (interface names are at most 15 characters)"
  [[ "$SUBNET" =~ ^(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){2}$ ]] ||
    die "RAYDIST_LC_SUBNET='$SUBNET': give the first three octets of an IPv4 /24, e.g. 10.213.7"
  case "$STATE" in /*) ;; *) die "RAYDIST_LC_DIR='$STATE' must be an absolute path" ;; esac
  case "$OUTPUT" in /*) ;; *) die "RAYDIST_LC_OUTPUT='$OUTPUT' must be an absolute path (the job runs in another directory)" ;; esac
  local path
  for path in "$STATE" "$OUTPUT" "$ROOT" "$VENV"; do
    case "$path" in /tmp|/tmp/*|/root|/root/*)
      die "'$path' is under /tmp or /root, which each host has its own of: use a directory every host sees (RAYDIST_LC_DIR, RAYDIST_LC_OUTPUT, RAYDIST_VENV)" ;;
    esac
  done
}

need_tools() {
  [ "$(id -u)" = 0 ] || die "making network namespaces needs root; run as root"
  [ -x "$VENV/bin/ray" ] || die "$VENV/bin/ray not found; run 'bash launch/setup.sh setup' or set RAYDIST_VENV"
  local missing=()
  command -v ip >/dev/null || missing+=(iproute2)
  command -v unshare >/dev/null || missing+=(util-linux)
  [ "$(dpkg-query -W -f='${db:Status-Status}' openssh-server 2>/dev/null)" = installed ] || missing+=(openssh-server)
  command -v ssh >/dev/null || missing+=(openssh-client)
  command -v rsync >/dev/null || missing+=(rsync)
  [ ${#missing[@]} -eq 0 ] && return
  say "installing ${missing[*]} (apt)"
  # policy-rc.d keeps the package from starting a system sshd on this machine's port 22.
  local policy=/usr/sbin/policy-rc.d made_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  # The packages' maintainer scripts run mktemp: they get the system's TMPDIR, not this script's
  # (which does not exist yet). A package an earlier attempt left half-configured is finished first.
  local apt=(env -u TMPDIR -u RAY_TMPDIR DEBIAN_FRONTEND=noninteractive)
  "${apt[@]}" dpkg --configure -a >/dev/null 2>&1 || true
  "${apt[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
    { "${apt[@]}" apt-get update -qq && "${apt[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; } ||
    { [ -n "$made_policy" ] && rm -f "$policy"; die "could not install ${missing[*]} with apt-get"; }
  [ -n "$made_policy" ] && rm -f "$policy"
  return 0
}

check_subnet_free() {
  if ip -4 -o addr show | awk '{print $4}' | grep -q "^${SUBNET//./\\.}\."; then
    die "RAYDIST_LC_SUBNET=$SUBNET.0/24 is already used on this machine ($(ip -4 -o addr show | awk -v s="$SUBNET." 'index($4, s) == 1 {print $2 " " $4}' | head -1)); run '$0 down' if it is a cluster of this script, or pick another subnet"
  fi
  ! ip netns list | grep -q "^$NAME-" || die "network namespaces $NAME-* exist already; run '$0 down' first"
}

# --- hosts ------------------------------------------------------------------------------------

make_keys() {
  mkdir -p "$STATE/launcher/tmp"
  chmod 700 "$STATE"
  ssh-keygen -q -t ed25519 -N '' -C "$NAME" -f "$STATE/launcher/id_ed25519"
  cp "$STATE/launcher/id_ed25519.pub" "$STATE/authorized_keys"
  # Ray's token authentication: every node and every client of the cluster holds this token.
  HOME=$STATE/launcher env -u RAY_AUTH_TOKEN_PATH -u RAY_AUTH_MODE "$VENV/bin/ray" get-auth-token --generate >/dev/null
  [ -s "$RAY_AUTH_TOKEN_PATH" ] || die "ray get-auth-token --generate wrote no $RAY_AUTH_TOKEN_PATH"
}

write_sshd_config() {
  local host=$1 dir=$STATE/hosts/$1
  cat >"$dir/sshd_config" <<EOF
ListenAddress $(host_ip "$host")
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $STATE/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The key file lives outside the user's home, under a world-writable parent (/var/tmp).
StrictModes no
UseDNS no
PrintMotd no
# The launcher multiplexes many commands over one connection per host.
MaxSessions 64
MaxStartups 64:30:128
Subsystem sftp internal-sftp
EOF
  mkdir -p /run/sshd  # sshd's privilege-separation directory
  /usr/sbin/sshd -t -f "$dir/sshd_config" || die "sshd rejects $dir/sshd_config"
}

make_host() {
  local host=$1 ip dir ns=$NAME-$1
  ip=$(host_ip "$host")
  dir=$STATE/hosts/$host
  mkdir -p "$dir/home" "$dir/tmp"
  touch "$dir/home/.bashrc"
  chmod 700 "$dir/home"
  chmod 1777 "$dir/tmp"
  ssh-keygen -q -t ed25519 -N '' -C "$ns" -f "$dir/ssh_host_ed25519_key"
  write_sshd_config "$host"

  ip netns add "$ns"
  ip link add "$ns" type veth peer name eth0 netns "$ns"
  ip link set "$ns" master "$BRIDGE" up
  ip -n "$ns" addr add "$ip/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up

  # Own process ids (a `ray stop` on this host ends only this host's Ray), hostname (raydist
  # tells containers' owners apart by hostname:pid), /tmp (Ray's sessions and state) and root's
  # home (~/ray_bootstrap_config.yaml, ~/.ray/auth_token, ~/.bashrc, ~/.cache/raydist), with
  # the Python the virtual environment runs on shown at its place when it lives there (pyenv).
  local python_home=""
  python_home=$(readlink -f "$VENV/bin/python")
  case "$python_home" in
    /root/*) python_home=/root/$(echo "${python_home#/root/}" | cut -d/ -f1); mkdir -p "$dir/home${python_home#/root}" ;;
    *) python_home="" ;;
  esac
  setsid ip netns exec "$ns" unshare --mount --uts --pid --fork --mount-proc \
    /bin/bash -c '[ -z "$3" ] || mount --bind -o ro "$3" "$1/home${3#/root}"
      mount --bind "$1/tmp" /tmp && mount --rbind "$1/home" /root && hostname "$2" &&
      exec /usr/sbin/sshd -D -f "$1/sshd_config" -E "$1/sshd.log"' \
    _ "$dir" "$ns" "$python_home" </dev/null >>"$dir/sshd.log" 2>&1 &
  disown
}

ssh_host() {
  local ip=$1
  shift
  ssh -i "$STATE/launcher/id_ed25519" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5 "root@$ip" "$@"
}

wait_for_sshd() {
  local host=$1 ip i
  ip=$(host_ip "$host")
  for i in $(seq 50); do
    ssh_host "$ip" true 2>/dev/null && return
    sleep 0.2
  done
  cat "$STATE/hosts/$host/sshd.log" >&2 || true
  die "sshd of $host ($ip) does not answer; its log is above"
}

make_hosts() {
  mkdir -p "$STATE"
  make_keys
  ip link add "$BRIDGE" type bridge
  ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local host
  for host in "${HOSTS[@]}"; do make_host "$host"; done
  for host in "${HOSTS[@]}"; do wait_for_sshd "$host"; done
  say "hosts: ${HOSTS[*]} at $HEAD_IP, $(host_ip w1), $(host_ip w2) (bridge $BRIDGE, $BRIDGE_IP on this machine)"
}

# --- the cluster launcher's config ------------------------------------------------------------

write_cluster_yaml() {
  NAME=$NAME HEAD_IP=$HEAD_IP W1=$(host_ip w1) W2=$(host_ip w2) STATE=$STATE ROOT=$ROOT VENV=$VENV \
    OBJECT_STORE_BYTES=$OBJECT_STORE_BYTES "$VENV/bin/python" - >"$STATE/cluster.yaml" <<'EOF'
import os

import yaml

e = os.environ
ray_start = f"bash {e['ROOT']}/launch/ray_start.sh"
common = f"--object-store-memory={e['OBJECT_STORE_BYTES']}"
# A worker's address is the one it reaches the head from.
worker_ip = "$(ip -4 -o route get $RAY_HEAD_IP | awk '{for (i = 1; i < NF; i++) if ($i == \"src\") print $(i + 1)}')"
config = {
    "cluster_name": e["NAME"],
    "provider": {"type": "local", "head_ip": e["HEAD_IP"], "worker_ips": [e["W1"], e["W2"]]},
    "auth": {"ssh_user": "root", "ssh_private_key": f"{e['STATE']}/launcher/id_ed25519"},
    # The hosts share this machine's filesystem, so the repository and .venv need no copy; the
    # head passes the token on to the workers.
    "file_mounts": {"~/.ray/auth_token": f"{e['STATE']}/launcher/.ray/auth_token"},
    "setup_commands": [
        # Every Ray process of the cluster runs with token authentication (the token file alone
        # turns it on for `ray start --head` only) and the project's Ray on PATH.
        f"grep -qs RAYDIST_VENV ~/.bashrc || echo 'export RAY_AUTH_MODE=token RAYDIST_VENV={e['VENV']}"
        f" PATH={e['VENV']}/bin:$PATH' >> ~/.bashrc"
    ],
    "head_start_ray_commands": [
        f"{ray_start} head --sandbox-slots 0 --node-ip-address={e['HEAD_IP']} --port=6379"
        f" --dashboard-host={e['HEAD_IP']} --autoscaling-config=~/ray_bootstrap_config.yaml {common}"
    ],
    "worker_start_ray_commands": [
        f"{ray_start} worker --sandbox-slots 1 --num-cpus=1 --address=$RAY_HEAD_IP:6379"
        f" --node-ip-address={worker_ip} {common}"
    ],
}
print(f"# Written by launch/local_cluster.sh for the hosts it made on this machine.")
print(yaml.safe_dump(config, sort_keys=False, width=1000), end="")
EOF
}

ray_up() {
  write_cluster_yaml
  say "\$ ray up -y $STATE/cluster.yaml"
  local t0=$SECONDS
  "$VENV/bin/ray" up -y --no-config-cache "$STATE/cluster.yaml"
  say "ray up: $((SECONDS - t0)) s"
}

alive_nodes() {
  "$VENV/bin/ray" list nodes --address "$HEAD_IP:6379" --filter state=ALIVE --format json 2>/dev/null |
    "$VENV/bin/python" -c 'import json, sys; print(len(json.load(sys.stdin)))' 2>/dev/null || echo 0
}

wait_for_nodes() {
  local want=${#HOSTS[@]} t0=$SECONDS n=0
  # The head's autoscaler starts the workers over ssh after `ray up` returns.
  while [ $((SECONDS - t0)) -lt 600 ]; do
    n=$(alive_nodes)
    [ "$n" = "$want" ] && break
    sleep 5
  done
  [ "$n" = "$want" ] || die "$n of $want Ray nodes alive after 600 s; see the head's autoscaler log, $STATE/hosts/head/tmp/ray/session_*/logs/monitor.*"
  say "nodes: $n alive, $((SECONDS - t0)) s after ray up returned"
  "$VENV/bin/ray" list nodes --address "$HEAD_IP:6379" --filter state=ALIVE
}

# --- the job ----------------------------------------------------------------------------------

runtime_env_json() {
  local data_root=${RAYDIST_DATA_ROOT:-}
  [ -z "$data_root" ] && [ -d "$ROOT/../shared/data" ] && data_root=$(cd "$ROOT/../shared/data" && pwd)
  DATA_ROOT=$data_root "$VENV/bin/python" -c '
import json, os
env = {"PYTHONUNBUFFERED": "1"}
if os.environ["DATA_ROOT"]:
    # The job runs in a copy of the repository, where ../shared/data is not.
    env["RAYDIST_DATA_ROOT"] = os.environ["DATA_ROOT"]
print(json.dumps({
    "excludes": [".venv", ".git", "runs", "outputs", "multirun", "build", "dist", "*.egg-info",
                 "__pycache__", ".pytest_cache", ".hypothesis", ".cache"],
    "env_vars": env,
}))'
}

submit() {
  local t0=$SECONDS env
  env=$(runtime_env_json)
  mkdir -p "$OUTPUT"
  say "\$ ray job submit --address http://$HEAD_IP:8265 --working-dir $ROOT --runtime-env-json '$env' -- python -m raydist.launch cluster=remote agent=oracle output_root=$OUTPUT $*"
  local rc=0
  "$VENV/bin/ray" job submit --address "http://$HEAD_IP:8265" --working-dir "$ROOT" --runtime-env-json "$env" \
    -- python -m raydist.launch cluster=remote agent=oracle "output_root=$OUTPUT" "$@" || rc=$?
  say "sweep: ray job submit ended with status $rc after $((SECONDS - t0)) s"
  summarize
  return $rc
}

summarize() {
  "$VENV/bin/python" - "$OUTPUT" <<'EOF'
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

files = sorted(Path(sys.argv[1]).glob("*/*/*/*/rows/*.parquet"))
rows = [row for f in files for row in pq.read_table(f).to_pylist()]
outcomes = Counter(row["outcome"] for row in rows)
nodes = Counter(row["node_ip"] for row in rows)
print(f"local_cluster.sh: rows under {sys.argv[1]}: {len(rows)} units, "
      + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items()))
      + f"; {len(nodes)} nodes: " + ", ".join(f"{ip} ran {n}" for ip, n in sorted(nodes.items())))
EOF
}

# --- down -------------------------------------------------------------------------------------

ns_alive() { ip netns list | grep -q "^$NAME-$1\b"; }

stop_ray() {
  if [ -f "$STATE/cluster.yaml" ] && ns_alive head && ssh_host "$HEAD_IP" true 2>/dev/null; then
    say "\$ ray down -y $STATE/cluster.yaml"
    local t0=$SECONDS
    timeout 300 "$VENV/bin/ray" down -y "$STATE/cluster.yaml" || say "ray down failed; removing the hosts anyway"
    say "ray down: $((SECONDS - t0)) s"
  fi
  # `ray down` with the local provider stops Ray on the head only; the workers' Ray is ours to stop.
  local host
  for host in "${HOSTS[@]:1}"; do
    if ns_alive "$host"; then
      ssh_host "$(host_ip "$host")" "$VENV/bin/ray stop" >/dev/null 2>&1 &
    fi
  done
  wait
}

kill_hosts() {
  local host pids="" i
  # Every process in a namespace is this cluster's: the sshd started above and its children.
  for host in "${HOSTS[@]}"; do
    ! ns_alive "$host" || pids+=" $(ip netns pids "$NAME-$host" | tr '\n' ' ')"
  done
  [ -z "${pids// /}" ] && return 0
  kill -TERM $pids 2>/dev/null || true
  for i in $(seq 50); do
    kill -0 $pids 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL $pids 2>/dev/null || true
}

remove_containers() {
  # Containers whose owner (raydist.owner = hostname:pid) was a process on one of these hosts.
  NAME=$NAME "$VENV/bin/python" - <<'EOF' || true
import os

import docker

from_hosts = tuple(f"{os.environ['NAME']}-{h}:" for h in ("head", "w1", "w2"))
client = docker.from_env()
for c in client.containers.list(all=True, sparse=True, filters={"label": "raydist.owner"}):
    if (c.attrs.get("Labels") or {}).get("raydist.owner", "").startswith(from_hosts):
        c.remove(force=True, v=True)
        print(f"local_cluster.sh: removed container {c.id[:12]} left by a host of the cluster")
EOF
}

remove_network() {
  local host
  for host in "${HOSTS[@]}"; do
    ! ns_alive "$host" || ip netns del "$NAME-$host"
    # Deleting the namespace deletes its veth pair, a moment later.
    ip link del "$NAME-$host" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
}

down() {
  local t0=$SECONDS
  stop_ray
  kill_hosts
  remove_containers
  remove_network
  # The launcher's ssh connection sockets for this cluster (Ray names the directory by hashes
  # of the user and the cluster name).
  local control
  control=$(NAME=$NAME "$VENV/bin/python" -c 'import getpass, hashlib, os
h = lambda s: hashlib.sha256(s.encode()).hexdigest()[:10]
print("/tmp/ray_ssh_" + h(getpass.getuser()) + "/" + h(os.environ["NAME"]))' || true)
  [ -n "$control" ] && rm -rf "$control" && { rmdir "$(dirname "$control")" 2>/dev/null || true; }
  rm -rf "$STATE"
  say "down: done in $((SECONDS - t0)) s"
}

# --- main -------------------------------------------------------------------------------------

up() {
  make_hosts
  ray_up
  wait_for_nodes
}

mode=${1:-}
case "$mode" in
  up|submit|down|all) shift ;;
  *) die "first argument must be one of up, submit, down, all; got '${mode}'" ;;
esac
check_inputs
need_tools

case "$mode" in
  up)
    check_subnet_free
    trap 'rc=$?; [ $rc -eq 0 ] || { say "up failed (status $rc); taking down what was made"; down; }' EXIT
    up
    ;;
  submit)
    [ -f "$STATE/cluster.yaml" ] || die "no cluster at $STATE; run '$0 up' first"
    submit "$@"
    ;;
  down)
    down
    ;;
  all)
    check_subnet_free
    trap 'down' EXIT
    up
    submit "$@"
    ;;
esac
