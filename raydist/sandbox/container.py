"""A long-lived, resource-limited container in which commands run with hard timeouts.

Spec: docs/architecture.md, ``raydist.sandbox``. A sandbox is created from an image, runs
``sleep infinity`` with no network, and is always force-removed when its ``with`` block ends.
"""
from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import docker
from docker.errors import APIError, NotFound

from raydist.sandbox.archive import pack_files, unpack_single
from raydist.sandbox.engine import OWNER_LABEL, owner_label

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
_WRAPPER = (
    "mkdir -p /tmp/.raydist && rm -f /tmp/.raydist/*.out; "
    'timeout -k {grace} {limit} bash -lc "$0" > {log} 2>&1 & p=$!; wait $p; rc=$?; '
    "n=0; while kill -9 -- -$p 2>/dev/null && [ $((n+=1)) -lt 1000 ]; do :; done; "
    "cat {log}; printf %s {marker}; exit $rc"
)
# The output also lands in a file, and the stream ends with a marker: Docker sometimes drops
# the attached output of a short exec (moby/moby#27289, docker/docker-py#2042), and a stream
# without its marker is then replaced by the file, read through the archive API.


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox: ``cpus`` in cores, ``memory`` as Docker sizes it
    (``"2g"``, ``"512m"``; no swap beyond it), ``pids`` the maximum number of processes."""

    cpus: float = 1.0
    memory: str = "2g"
    pids: int = 512


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command: merged stdout/stderr text, exit code, whether the timeout
    fired, and wall time in seconds."""

    output: str
    returncode: int
    timed_out: bool
    seconds: float


def _container_name(hint: str | None) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_.-]+", "-", hint or "sandbox").strip("-.")[:40] or "sandbox"
    return f"raydist-{slug}-{secrets.token_hex(4)}"


def _resolve(root: str, relpath: str) -> str:
    """Return ``root/relpath`` without a leading slash; refuse paths escaping ``root``."""
    parts = [p for p in relpath.split("/") if p not in ("", ".")]
    if relpath.startswith("/") or ".." in parts or not parts:
        raise ValueError(
            f"file path {relpath!r} must be relative to {root} and stay inside it"
        )
    return "/".join([root.strip("/"), *parts]).lstrip("/")


class Sandbox:
    """A running container plus the operations raydist needs on it."""

    def __init__(self, client: docker.DockerClient, container) -> None:
        self.client = client
        self.container = container
        self.name: str = container.name

    @classmethod
    def create(
        cls,
        client: docker.DockerClient,
        image: str,
        *,
        limits: Limits | None = None,
        labels: Mapping[str, str] | None = None,
        name: str | None = None,
        network: str = "none",
        tmpfs: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> "Sandbox":
        """Start a detached ``sleep infinity`` container from ``image``.

        ``name`` is a hint: the container is named ``raydist-<hint>-<8 hex>``. ``labels`` are
        added to ``raydist.owner=<host>:<pid>``. ``tmpfs`` maps container paths to tmpfs mount
        options (``{"/tmp": "size=64m,mode=0755"}``); their pages count against ``limits.memory``.
        ``user`` overrides the image's user (grading runs as ``root`` to run the tests as an
        unprivileged user of its own). Raises ``docker.errors.ImageNotFound`` when the image
        is absent.
        """
        limits = limits or Limits()
        all_labels = {OWNER_LABEL: owner_label(), **(labels or {})}
        container = client.containers.run(
            image,
            command=["sleep", "infinity"],
            name=_container_name(name),
            detach=True,
            labels=all_labels,
            network_mode=network,
            nano_cpus=int(limits.cpus * 1e9),
            mem_limit=limits.memory,
            memswap_limit=limits.memory,
            pids_limit=limits.pids,
            # An init as PID 1 reaps orphans; without it killed process trees linger as
            # zombies that keep counting against the PID limit.
            init=True,
            tmpfs=dict(tmpfs or {}),
            **({"user": user} if user else {}),
        )
        return cls(client, container)

    def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str = "/testbed",
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` with ``bash -lc`` in ``cwd``; ``timeout`` in seconds.

        Inside the container coreutils ``timeout`` signals the command's whole process group
        (TERM, then KILL after ``KILL_GRACE`` s); background processes the command started do
        not outlive it. On the host a guard waits at most
        ``timeout + KILL_GRACE + HOST_SLACK`` s, then kills every process in the container but
        its init and keep-alive process, so a hung exec never blocks the caller. ``timed_out`` is True when the exit code
        is 124/137 and the time limit was reached (an OOM kill also exits 137, but early).
        """
        if timeout <= 0:
            raise ValueError(f"exec timeout must be positive seconds, got {timeout!r}")
        nonce = secrets.token_hex(8)
        log, marker = f"/tmp/.raydist/{nonce}.out", f"__raydist_end_{nonce}__"
        argv = ["bash", "-c", _WRAPPER.format(grace=f"{KILL_GRACE:g}", limit=f"{timeout:g}", log=log,
                                              marker=marker), command]
        api = self.client.api
        exec_id = api.exec_create(
            self.container.id, argv, workdir=cwd, environment=dict(env or {})
        )["Id"]
        start = time.monotonic()
        chunks: list[bytes] = []
        reader = threading.Thread(
            target=lambda: chunks.extend(api.exec_start(exec_id, stream=True)), daemon=True
        )
        reader.start()
        reader.join(timeout + KILL_GRACE + HOST_SLACK)
        guard_fired = reader.is_alive()
        if guard_fired:
            self._kill_all()
            reader.join(KILL_GRACE)
        seconds = time.monotonic() - start
        code = api.exec_inspect(exec_id).get("ExitCode")
        returncode = 137 if code is None else int(code)
        timed_out = guard_fired or (returncode in TIMEOUT_CODES and seconds >= timeout)
        data = b"".join(chunks)
        if data.endswith(marker.encode()):
            data = data[: -len(marker)]
        else:  # the stream lost output (or the guard fired before the end): the file has it
            data = self._read_log(log, fallback=data)
        return ExecResult(data.decode("utf-8", errors="replace"), returncode, timed_out, seconds)

    def _read_log(self, path: str, fallback: bytes) -> bytes:
        try:
            stream, _ = self.container.get_archive(path)
            return unpack_single(b"".join(stream), path)
        except (NotFound, APIError, ValueError):
            return fallback

    def _kill_all(self) -> None:
        # Everything but the init (immune to signals from inside), the keep-alive `sleep` and
        # pkill itself.
        try:
            self.container.exec_run(["pkill", "-9", "-v", "-f", "^sleep infinity$"])
        except APIError:
            pass

    def write_files(self, files: Mapping[str, str | bytes], root: str = "/testbed") -> None:
        """Write ``{relpath: content}`` under ``root`` (str content is UTF-8 encoded).

        Parent directories are created. Raises ``ValueError`` for absolute or escaping paths.
        """
        members = {_resolve(root, rel): data for rel, data in files.items()}
        if members:
            self.container.put_archive("/", pack_files(members))

    def read_files(
        self, paths: Iterable[str], root: str = "/testbed"
    ) -> dict[str, bytes | None]:
        """Return ``{relpath: bytes}`` for files under ``root``; ``None`` for a missing file.

        Raises ``IsADirectoryError`` when a path names a directory, ``ValueError`` for
        absolute or escaping paths.
        """
        out: dict[str, bytes | None] = {}
        for rel in paths:
            try:
                stream, _ = self.container.get_archive("/" + _resolve(root, rel))
            except NotFound:
                out[rel] = None
                continue
            out[rel] = unpack_single(b"".join(stream), rel)
        return out

    def remove(self) -> None:
        """Force-remove the container; calling it again is harmless."""
        try:
            self.container.remove(force=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"Sandbox({self.name!r})"

