"""A watcher that removes a process's containers as soon as that process dies.

A driver or worker killed with SIGKILL (or by a SIGTERM it does not handle) runs no clean-up,
and its sandboxes would otherwise live until the next launch on the host sweeps them
(``raydist.sandbox.engine.sweep_orphans``). The containers cannot watch their owner themselves:
they run in a pid namespace of their own, with no network. So every process that creates a
container has one reaper: a small detached process (a session of its own, so a Ctrl-C or a
kill of the owner's process group does not reach it) that checks every ``POLL`` seconds whether
the owner is alive. When the owner is gone it force-removes every container labelled
``raydist.owner=<host>:<owner pid>`` and exits. When the owner has had no container for
``IDLE`` seconds it exits as well, and the owner's next container starts a new one.

Bound: the containers of an owner killed at time t are gone by t + ``REAP_BOUND`` seconds
(one poll, then the daemon's forced removal, under a second per container here).

The hand-over between a leaving reaper and a container being created is guarded by a lock
file per owner. Creation holds it shared (``reaped``) and finds there the token it gave the
reaper it started; a reaper leaves only while holding it exclusively, after finding no
container, and first overwrites the token and unlinks the file. A creator that finds no token
of its own (or its reaper gone) starts a new reaper, so no container is created unwatched.

Run as ``python -m raydist.sandbox.reaper --pid P --label L --docker-host URL --lock PATH``
(``reaped`` does this; a user never does).
"""
from __future__ import annotations

import argparse
import fcntl
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
from docker.errors import APIError, DockerException

from raydist.sandbox.engine import OWNER_LABEL, connect, owner_label, pid_alive, remove_container

POLL = 1.0  # seconds between two checks of the owner
IDLE = 5.0  # seconds without a container of the owner before a reaper leaves
REAP_BOUND = 10.0  # seconds from the owner's death until its containers are gone

_guard = threading.Lock()
_reaper: subprocess.Popen | None = None
_reaper_of: tuple[int, bytes] | None = None  # (owner pid, the token in the lock file)


def lock_path(label: str) -> Path:
    """The lock file of the owner ``label`` (``"<host>:<pid>"``) in the temporary directory."""
    return Path(tempfile.gettempdir()) / f"raydist-reaper-{re.sub(r'[^A-Za-z0-9_.-]', '-', label)}.lock"


def _lock_linked(path: Path) -> int:
    """A descriptor of ``path`` opened and locked shared, retried until the file locked is
    the one linked at ``path`` (a leaving reaper unlinks it)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        held = os.fstat(fd)
        try:
            linked = os.stat(path)
        except FileNotFoundError:
            linked = None
        if linked is not None and (linked.st_dev, linked.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)


def _start(address: str, path: Path) -> subprocess.Popen:
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p))
    argv = [sys.executable, "-m", "raydist.sandbox.reaper", "--pid", str(os.getpid()),
            "--label", owner_label(), "--docker-host", address, "--lock", str(path)]
    return subprocess.Popen(argv, cwd="/", env=env, start_new_session=True, close_fds=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextmanager
def reaped(address: str) -> Iterator[None]:
    """Hold while creating a container of this process on the daemon at ``address``: makes
    sure this process's reaper is running, and keeps it from leaving until the block ends."""
    global _reaper, _reaper_of
    path = lock_path(owner_label())
    fd = _lock_linked(path)
    try:
        with _guard:
            token = os.pread(fd, 64, 0)
            if _reaper is None or _reaper.poll() is not None or _reaper_of != (os.getpid(), token):
                token = secrets.token_hex(8).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, token, 0)
                _reaper, _reaper_of = _start(address, path), (os.getpid(), token)
        yield
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (dead, not yet waited for) counts as dead."""
    if not pid_alive(pid):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _containers(client: docker.DockerClient, label: str) -> list:
    return client.containers.list(all=True, sparse=True, filters={"label": f"{OWNER_LABEL}={label}"})


def _remove_all(client: docker.DockerClient, label: str) -> None:
    # Listed again after each pass: a creation the owner started before dying may land late.
    found = _containers(client, label)
    for _ in range(10):
        if not found:
            return
        for container in found:
            remove_container(container)
        found = _containers(client, label)
        if found:
            time.sleep(POLL)


def _leave_if_idle(client: docker.DockerClient, label: str, lock_fd: int, path: Path) -> bool:
    """True (the lock file unlinked) when no creation is under way and no container is left."""
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a container is being created
    try:
        if _containers(client, label):
            return False
        os.ftruncate(lock_fd, 0)
        os.pwrite(lock_fd, b"left", 0)
        held, linked = os.fstat(lock_fd), os.stat(path)
        if (held.st_dev, held.st_ino) == (linked.st_dev, linked.st_ino):
            path.unlink()
        return True
    except FileNotFoundError:
        return True
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)


def watch(pid: int, label: str, address: str, path: Path) -> None:
    """Watch the owner ``pid`` (label ``label``) until it dies, then remove its containers on
    the daemon at ``address``; return early when it has none for ``IDLE`` seconds."""
    client = connect(address)
    lock_fd = os.open(path, os.O_RDWR)
    idle_since: float | None = None
    while True:
        if not _alive(pid):
            try:
                _remove_all(client, label)  # a daemon error ends the reaper: the next sweep removes the rest
            finally:
                path.unlink(missing_ok=True)  # nobody creates under a dead owner's label
            return
        try:
            empty = not _containers(client, label)
        except (APIError, DockerException):
            empty = False  # the daemon is busy or restarting: ask again
        now = time.monotonic()
        idle_since = (idle_since or now) if empty else None
        if idle_since is not None and now - idle_since >= IDLE and _leave_if_idle(client, label, lock_fd, path):
            return
        time.sleep(POLL)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the reaper process; 0 when done, 1 when the daemon cannot be reached."""
    parser = argparse.ArgumentParser(prog="python -m raydist.sandbox.reaper", description=__doc__.split("\n")[0])
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--docker-host", required=True)
    parser.add_argument("--lock", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        watch(args.pid, args.label, args.docker_host, args.lock)
    except (DockerException, OSError):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
