"""How one command runs in a sandbox: under coreutils ``timeout`` in a process group of its own,
its leftovers killed after it, its output kept in a file as well as streamed (Docker may drop
the attached output of a short exec), and the stream ended by a trailer (a marker and the exit
status) that tells the two apart. ``raydist.sandbox.container.Sandbox.exec`` runs what
``wrapped_command`` builds and reads the result with ``split_trailer``.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass

# Grace between SIGTERM and SIGKILL inside the container, and extra host-side slack before the
# host gives up on the exec stream; both in seconds.
KILL_GRACE = 5.0
HOST_SLACK = 15.0
TIMEOUT_CODES = (124, 137)  # coreutils `timeout`: TERM sent -> 124, KILL sent -> 128 + 9
# `timeout` runs the command in a process group of its own and signals that group when the
# limit is reached. Processes the command left in the background would outlive it, so once
# `timeout` returns, whatever remains of its group is killed too (repeatedly: a fork loop may
# still be spawning). `$0` is the user's command. Its stderr joins stdout in the shell, so the
# output keeps the order in which the command wrote it (Docker's two streams would not).
# A process that left the group (setsid, a daemon) is killed as well: after the command every
# process but the init, the keep-alive `sleep` and this wrapper goes, with bash builtins only
# (a fork bomb that fills the PID limit leaves no room for a `pkill`).
_SWEEP = (
    "n=0; while [ $n -lt 100 ]; do left=0; for d in /proc/[0-9]*; do q=${{d#/proc/}}; "
    'case " 1 {keep} $$ " in *" $q "*) ;; *) kill -9 $q 2>/dev/null && left=1;; esac; done; '
    "[ $left = 0 ] && break; n=$((n+1)); done; "
)
# Bash's own notice of a job killed by a signal ("Killed", naming this wrapper) is silenced:
# the exit code says it. Each process the wrapper starts adds milliseconds to every command
# (a docker exec of `true` takes tens), so it starts only `timeout` (with the command's
# shell) and, when there is output, the `cat` that streams it; the exit status travels in the
# trailer, which spares the host a round trip to the daemon.
_WRAPPER = (
    "{prelude}o={log}; "
    "{{ : > $o; }} 2>/dev/null || o=/dev/stdout; "
    'timeout -k {grace} {limit} bash -lc "$0" > $o 2>&1 & p=$!; {{ wait $p; }} 2>/dev/null; rc=$?; '
    "n=0; while kill -9 -- -$p 2>/dev/null && [ $((n+=1)) -lt 1000 ]; do :; done; "
    "{sweep}"
    '[ "$o" = /dev/stdout ] || [ ! -s $o ] || cat $o; printf %s {marker}$rc.; exit $rc'
)
# The output also lands in a file, and the stream ends with a trailer: the marker, the exit
# status in decimal and a full stop (so a trailer cut short is no trailer). Docker sometimes
# drops the attached output of a short exec (moby/moby#27289, docker/docker-py#2042); a stream
# without its trailer is then replaced by the file, read through the archive API, and the
# status is asked of the daemon. The file lives in a volume of its own (mounted by
# ``Sandbox.create``), so a command that fills /tmp or /testbed does not cost its own output
# (nor that of every later command), and a command that writes more than ``LOG_SIZE`` bytes
# keeps the first ``LOG_SIZE``; were the file not writable at all (no such volume), the output
# goes straight to the stream. Every command of a sandbox truncates the same file, which frees
# the last command's output without an `rm`: a sandbox runs one command at a time (the sweep
# after a command would kill another's), and the sweep leaves nothing of an earlier command to
# write into it. Without the sweep (the keep-alive unknown) a process left behind could, so
# each command then writes a file of its own and removes the earlier ones.
LOG_DIR = "/run/raydist"
LOG = f"{LOG_DIR}/exec.out"
LOG_SIZE = 64 << 20  # bytes of one command's output the file keeps


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command: merged stdout/stderr text, exit code, whether the timeout
    fired, wall time in seconds, and whether the kernel's OOM killer killed a process of the
    container while it ran (the command then usually exits 137 before its time limit)."""

    output: str
    returncode: int
    timed_out: bool
    seconds: float
    oom_killed: bool = False


def wrapped_command(command: str, timeout: float, keepalive: int | None) -> tuple[list[str], str, str]:
    """``(argv, log, marker)``: the exec argv that runs ``command`` with ``bash -lc`` under a
    ``timeout``-second limit, the file (under ``LOG_DIR``) its output is also written to, and
    the marker that opens the trailer of a complete stream (``split_trailer``). ``keepalive``:
    the container's keep-alive PID, which the sweep of leftover processes spares; None sweeps
    nothing."""
    nonce = secrets.token_hex(8)
    marker = f"__raydist_end_{nonce}__"
    if keepalive is None:
        log, prelude, sweep = f"{LOG_DIR}/{nonce}.out", f"rm -f {LOG_DIR}/*.out 2>/dev/null; ", ""
    else:
        log, prelude, sweep = LOG, "", _SWEEP.format(keep=keepalive)
    script = _WRAPPER.format(prelude=prelude, sweep=sweep, grace=f"{KILL_GRACE:g}", limit=f"{timeout:g}",
                             log=log, marker=marker)
    return ["bash", "-c", script, command], log, marker


def split_trailer(data: bytes, marker: str) -> tuple[bytes, int | None]:
    """``(output, exit status)`` of a stream the wrapper of ``wrapped_command`` wrote: the bytes
    before the trailer and the status it carries, or ``(data, None)`` when the stream does not
    end with a trailer (Docker dropped output, or the wrapper was killed before its end)."""
    head, found, status = data.rpartition(marker.encode())
    if found and status.endswith(b".") and status[:-1].isdigit() and len(status) <= 4:
        return head, int(status[:-1])
    return data, None
