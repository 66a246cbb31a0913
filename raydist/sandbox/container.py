"""A long-lived, hardened, resource-limited container in which commands run with hard timeouts.

Spec: docs/architecture.md, ``raydist.sandbox``. A sandbox is created from an image, runs
``sleep infinity`` with no network, and is always force-removed when its ``with`` block ends.

What bounds what (every sandbox, agent and grading alike):

* processes: ``Limits.pids`` (cgroup pids), so a fork bomb fails to fork instead of filling
  the host's process table; time: ``exec``'s timeout kills the command's process group.
* memory: ``Limits.memory`` with no swap beyond it (cgroup); the kernel's OOM killer picks
  the largest process of the container, so a memory hog dies (exit 137) while the container's
  init and keep-alive ``sleep`` (a few hundred KiB) live on.
* CPU: ``Limits.cpus`` (CFS quota).
* privileges: every capability dropped but ``CAPABILITIES`` (what a root test run needs to
  own, chmod and signal its own files and processes); ``no-new-privileges``, so a setuid
  binary runs with the caller's ids; the image's own user (``USER``; instance images run as
  the unprivileged ``agent``, :mod:`raydist.sandbox.build_steps`).
* network: ``none`` (only a loopback of the container's own).
* disk: the overlay2 driver here sits on ext4, where Docker cannot cap a container's writable
  layer (``storage_opt size`` needs xfs with pquota). Instead ``/tmp`` and ``/testbed`` are
  tmpfs volumes of bounded size (``Limits.tmp_size``; the image's ``/testbed`` plus
  ``Limits.testbed_size``): a full one answers ENOSPC. Pages written there by the container
  count against ``Limits.memory`` too, and the volumes vanish with the container.
  ``Limits.file_size`` (RLIMIT_FSIZE) caps any one file a process writes anywhere, including
  with ``fallocate`` (SIGXFSZ, exit 153). ``exec`` keeps each command's output in a third
  volume (``LOG_DIR``, ``LOG_SIZE``). Not bounded beyond the per-file cap: the rest of the
  writable layer, which only a root user can write into (for ``agent`` the image leaves no
  other writable directory; its home is ``/tmp``). The copy of the image's ``/testbed`` is
  made by the daemon, so its pages are the host's, not the container's.
"""
from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

import docker
from docker.errors import APIError, NotFound
from docker.types import DriverConfig, Mount

from raydist.sandbox.archive import ChunkReader, pack_files, unpack_single
from raydist.sandbox.command import (
    HOST_SLACK,
    KILL_GRACE,
    TIMEOUT_CODES,
    ExecResult,
    split_trailer,
    wrapped_command,
)
from raydist.sandbox.engine import OWNER_LABEL, owner_label, remove_container

if TYPE_CHECKING:
    from raydist.sandbox.provider import SandboxProvider

# Capabilities a root process in a sandbox keeps (the bounding set of every process in it):
# enough to chown/chmod files of other owners, signal and switch to other ids (a harness that
# runs programs as a spare uid). Gone, among Docker's defaults: NET_RAW (raw sockets),
# MKNOD, SYS_CHROOT, SETPCAP, SETFCAP, NET_BIND_SERVICE, AUDIT_WRITE. A non-root user has no
# effective capability at all.
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID")
TESTBED = "/testbed"
OWNER_ATTEMPTS = 3  # how often ``Sandbox.owner`` asks before it gives up
# Where the container's memory cgroup counts its OOM kills (`oom_kill N`): cgroup v2, then v1.
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


def _container_name(hint: str | None) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_.-]+", "-", hint or "sandbox").strip("-.")[:40] or "sandbox"
    return f"raydist-{slug}-{secrets.token_hex(4)}"


def _tmpfs_volume(target: str, size: int, options: str = "") -> Mount:
    """An anonymous tmpfs volume of ``size`` bytes at ``target``. Unlike a plain tmpfs mount
    (``tmpfs=``) it lives in the daemon's mount namespace, so ``put_archive``/``get_archive``
    see it; the volume goes with the container (``remove(v=True)``)."""
    opts = ",".join(o for o in (f"size={size}", "nosuid", "nodev", options) if o)
    return Mount(target=target, source=None, type="volume",
                 driver_config=DriverConfig("local", {"type": "tmpfs", "device": "tmpfs", "o": opts}))


def _image_testbed(client: docker.DockerClient, image: str):
    """The image's ``/testbed`` as a tar archive in a temporary file (positioned at 0), or
    ``None`` when the image has none. Read from a created, never started container."""
    helper = client.containers.create(image, command=["true"], network_mode="none",
                                      name=_container_name("testbed-copy"),
                                      labels={OWNER_LABEL: owner_label()})
    try:
        try:
            stream, _ = helper.get_archive(TESTBED)
        except NotFound:
            return None
        archive = tempfile.SpooledTemporaryFile(max_size=64 << 20, prefix="raydist-testbed-")
        for chunk in stream:
            archive.write(chunk)
        archive.seek(0)
        return archive
    finally:
        helper.remove(force=True, v=True)


def _keepalive_pid(container) -> int | None:
    """PID (in the container) of the keep-alive ``sleep infinity``, the init's only child right
    after the start; ``None`` when it cannot be told (then ``exec`` sweeps no stray process).
    Asked up to three times: the daemon can drop a short exec's output (moby/moby#27289)."""
    for _ in range(3):
        try:
            done = container.exec_run(["cat", "/proc/1/task/1/children"])
        except APIError:
            return None
        pids = done.output.decode(errors="replace").split()
        if done.exit_code == 0 and len(pids) == 1 and pids[0].isdigit():
            return int(pids[0])
    return None


def _tell(archive) -> int:
    """Length in bytes of a seekable file, which is left at position 0."""
    archive.seek(0, 2)
    size = archive.tell()
    archive.seek(0)
    return size


def _resolve(root: str, relpath: str) -> str:
    """Return ``root/relpath`` without a leading slash; refuse paths escaping ``root``."""
    parts = [p for p in relpath.split("/") if p not in ("", ".")]
    if relpath.startswith("/") or ".." in parts or not parts:
        raise ValueError(
            f"file path {relpath!r} must be relative to {root} and stay inside it"
        )
    return "/".join([root.strip("/"), *parts]).lstrip("/")


class Sandbox:
    """A running sandbox of a ``provider`` (``raydist.sandbox.provider``) plus the operations raydist
    needs on it; made by ``SandboxProvider.create``."""

    def __init__(self, provider: SandboxProvider, container) -> None:
        self.provider = provider
        self.client: docker.DockerClient = provider.client
        self.container = container
        self.name: str = container.name
        self._owner: tuple[int, int] | None = None
        self._keepalive: int | None = None
        self._oom_kills = 0  # OOM kills in the container's cgroup seen so far
        self.memory: str | None = None  # the memory limit (a Docker size) it was created with

    @property
    def owner(self) -> tuple[int, int]:
        """``(uid, gid)`` of the container's user: the owner of files ``write_files`` writes.
        Asked through ``exec``, so an output stream the daemon dropped (moby/moby#27289) is
        read back from the exec log; asked up to ``OWNER_ATTEMPTS`` times, since under load both
        engines were seen to answer a short exec with exit 0 and no output at all (in about one
        unit of a few hundred). Raises RuntimeError when no answer is two ids."""
        for _ in range(OWNER_ATTEMPTS if self._owner is None else 0):
            done = self.exec("id -u; id -g", timeout=30, cwd="/")
            ids = done.output.split()
            if done.returncode == 0 and len(ids) == 2 and all(i.isdigit() for i in ids):
                self._owner = (int(ids[0]), int(ids[1]))
                break
        if self._owner is None:
            raise RuntimeError(f"cannot tell the user of sandbox {self.name}: exit {done.returncode}, "
                               f"output {done.output!r} ({OWNER_ATTEMPTS} attempts)")
        return self._owner

    @classmethod
    def create(cls, provider: SandboxProvider, image: str, **options) -> Sandbox:
        """``provider.create(image, **options)`` (``raydist.sandbox.provider.SandboxProvider.create``)."""
        return provider.create(image, **options)

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
        its init and keep-alive process, so a hung exec never blocks the caller. ``timed_out`` is
        True when the exit code is 124/137 and the time limit was reached (an OOM kill also exits 137, but early).
        ``oom_killed`` is True when a command killed early (137) coincides with a new OOM kill
        in the container's memory cgroup: the container itself lives on (its init and
        keep-alive are far smaller than what the killer picks), so the next command runs.
        """
        if timeout <= 0:
            raise ValueError(f"exec timeout must be positive seconds, got {timeout!r}")
        argv, log, marker = wrapped_command(command, timeout, self._keepalive)
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
        deadline = start + timeout + KILL_GRACE + HOST_SLACK
        reader.join(timeout + KILL_GRACE + HOST_SLACK)
        guard_fired = reader.is_alive()
        if guard_fired:
            self._kill_all()
            reader.join(KILL_GRACE)
        data, returncode = split_trailer(b"".join(chunks), marker)
        if returncode is None:  # the stream lost output (or the guard fired before the end)
            code, still_running = self._exit_code(exec_id, deadline)
            guard_fired = guard_fired or still_running
            returncode = 137 if code is None else code
            data = self._read_log(log, fallback=data)
        seconds = time.monotonic() - start
        timed_out = guard_fired or (returncode in TIMEOUT_CODES and seconds >= timeout)
        oom_killed = returncode == 137 and not timed_out and self._new_oom_kill()
        return ExecResult(data.decode("utf-8", errors="replace"), returncode, timed_out, seconds, oom_killed)

    def _exit_code(self, exec_id: str, deadline: float) -> tuple[int | None, bool]:
        """``(exit code, killed by the guard)`` of an exec whose stream ended without its trailer.
        A dropped stream can end while the command still runs, and the engine then reports no
        exit code (Docker) or 0 (Podman) with ``Running`` true; so the exec is asked until it
        has ended, and past ``deadline`` (monotonic seconds) the guard kills it."""
        api, pause, killed = self.client.api, 0.02, False
        while True:
            info = api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                return (None if code is None else int(code)), killed
            if time.monotonic() >= deadline:
                if killed:
                    return None, True
                self._kill_all()
                killed, deadline = True, time.monotonic() + KILL_GRACE
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _new_oom_kill(self) -> bool:
        """True when the cgroup counts more OOM kills than when last asked (or created)."""
        try:
            done = self.container.exec_run(["cat", *OOM_COUNTERS])
        except APIError:
            return False
        counts = [int(n) for key, _, n in (line.partition(" ") for line in done.output.decode().splitlines())
                  if key == "oom_kill" and n.isdigit()]
        if not counts or counts[0] <= self._oom_kills:
            return False
        self._oom_kills = counts[0]
        return True

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

        Files and the parent directories created belong to the container's user (``owner``),
        so a non-root agent can edit what was written for it. Raises ``ValueError`` for
        absolute or escaping paths.
        """
        members = {_resolve(root, rel): data for rel, data in files.items()}
        if members:
            self.container.put_archive("/", pack_files(members, owner=self.owner,
                                                       below=root.strip("/")))

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

    def read_tree(self, root: str = TESTBED) -> IO[bytes] | None:
        """The tree under ``root`` as an uncompressed tar stream (a file object read once, front
        to back; member names start with ``root``'s last component), read through the engine's
        archive API, not through tools in the sandbox; ``None`` when ``root`` is absent (an agent
        removed ``/testbed``)."""
        try:
            stream, _ = self.container.get_archive(root)
        except NotFound:
            return None
        return io.BufferedReader(ChunkReader(stream))

    def copy_out(self, path: str, dest: Path) -> Path:
        """Copy the file or directory ``path`` (absolute, in the sandbox) to ``dest`` on the host,
        which it becomes (like ``docker cp``). Extracted with tarfile's ``data`` filter: bytes,
        executable bits and relative links kept; owners, setuid/setgid bits and group/other
        write not. ``dest``'s parent must exist; an existing ``dest`` is replaced. Returns ``dest``.

        Raises ``FileNotFoundError`` naming ``path`` when it is absent, ``ValueError`` for a
        relative ``path``, ``tarfile.FilterError`` for a link pointing outside ``path``."""
        if not path.startswith("/"):
            raise ValueError(f"copy_out path {path!r} must be absolute")
        dest = Path(dest)
        tree = self.read_tree(path)
        if tree is None:
            raise FileNotFoundError(f"{path} does not exist in sandbox {self.name}")
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
        try:
            with tree, tarfile.open(fileobj=tree, mode="r|") as archive:
                archive.extractall(staging, filter="data")
            [top] = list(staging.iterdir())
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            os.replace(top, dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return dest

    def remove(self) -> None:
        """Force-remove the container; calling it again is harmless."""
        remove_container(self.container)  # with its tmpfs volumes; waits out a concurrent removal

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"Sandbox({self.name!r})"

