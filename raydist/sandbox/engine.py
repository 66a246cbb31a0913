"""The Docker engine at raydist's edge: connecting, owner labels and orphan clean-up.

Every container raydist starts carries ``raydist.owner=<host>:<pid>`` so that containers left
behind by a crashed worker can be told apart from those of a live one and removed.
"""
from __future__ import annotations

import os
import socket
import time
import weakref

import docker
from docker.errors import APIError, DockerException, NotFound
from docker.utils import parse_host

OWNER_LABEL = "raydist.owner"
API_TIMEOUT = 600.0  # seconds, for every call after the ping
DEFAULT_ADDRESS = "unix:///var/run/docker.sock"
REMOVAL_WAIT = 60.0  # seconds another caller's removal of a container may take to finish
_addresses: weakref.WeakKeyDictionary[docker.DockerClient, str] = weakref.WeakKeyDictionary()


class SandboxUnavailable(RuntimeError):
    """The engine of a sandbox provider (the Docker daemon, ...) cannot be reached."""


def connect(docker_host: str | None = None, timeout: float = 10, *, what: str = "the Docker daemon",
            how: str = "start it with `bash launch/setup.sh`, or set sandbox.docker_host",
            provider: str | None = None) -> docker.DockerClient:
    """Return a client for the Docker daemon at ``docker_host`` after a successful ping.

    ``docker_host`` is a URL such as ``unix:///var/run/docker.sock`` or ``tcp://host:2375``;
    ``None`` uses ``DOCKER_HOST`` or the default socket. ``timeout`` (seconds) bounds the
    ping; later calls get ``API_TIMEOUT``, since committing or removing a container holding a
    large environment legitimately takes longer (exec output is streamed without a timeout).

    Raises ``SandboxUnavailable``: "cannot reach ``what`` at <address> (<why>) for
    sandbox.provider=``provider``; ``how``" (without "for ..." when ``provider`` is None). The
    rest of raydist connects through a provider (``raydist.sandbox.registry.connect``).
    """
    address = docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_ADDRESS
    try:
        client = docker.DockerClient(base_url=address, timeout=timeout)
        client.ping()
        client.api.timeout = max(timeout, API_TIMEOUT)
    except (DockerException, OSError) as exc:
        raise SandboxUnavailable(
            f"cannot reach {what} at {address} ({exc})"
            f"{f' for sandbox.provider={provider}' if provider else ''}; {how}") from exc
    _addresses[client] = address
    return client


def address_problem(address: object) -> str | None:
    """Why ``address`` (``sandbox.docker_host`` or ``sandbox.podman_socket``) is no engine
    address, or None for one the docker SDK connects to (``docker.utils.parse_host``; None itself:
    the default). An empty one is refused too: the SDK would take the default socket for it. Said
    before anything starts, as a setting (exit status 2), not as an engine that cannot be reached."""
    if address is None or not isinstance(address, str):
        return None  # the schema refuses another type
    try:
        if address.strip():
            parse_host(address)
            return None
        why = "it is empty"
    except DockerException as exc:
        why = str(exc)
    example = f"unix://{address}" if address.startswith("/") else "unix:///run/raydist-podman.sock"
    return f"is not an engine address ({why}): give a URL such as {example} or tcp://host:2375"


def address_of(client: docker.DockerClient) -> str:
    """The daemon address ``client`` was connected to by ``connect`` (for a client made some
    other way, ``DOCKER_HOST`` or the default socket)."""
    return _addresses.get(client) or os.environ.get("DOCKER_HOST") or DEFAULT_ADDRESS


def owner_label() -> str:
    """Return ``"<hostname>:<pid>"`` identifying this process as a container's owner."""
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_alive(pid: int) -> bool:
    """True while a process ``pid`` exists on this host (``kill(pid, 0)``; one of another user
    counts); a zombie counts as alive here (``raydist.sandbox.reaper`` tells those apart)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _is_orphan(owner: str, host: str) -> bool:
    owner_host, _, pid = owner.rpartition(":")
    # Liveness can only be judged on this host; other hosts sweep their own containers.
    if owner_host != host or not pid.isdigit():
        return False
    return not pid_alive(int(pid))


def sweep_orphans(client: docker.DockerClient) -> int:
    """Force-remove raydist containers whose owner process on this host is no longer alive.

    Containers owned by live processes, or by processes on other hosts, are left alone.
    Returns the number of containers removed.
    """
    host = socket.gethostname()
    removed = 0
    # sparse: labels come with the listing, so a container removed concurrently (by another
    # launch's sweep or its owner) cannot fail an inspect here.
    for container in client.containers.list(all=True, sparse=True, filters={"label": OWNER_LABEL}):
        labels = container.attrs.get("Labels") or {}  # the sparse listing's own field
        if not _is_orphan(labels.get(OWNER_LABEL, ""), host):
            continue
        removed += remove_container(container)
    return removed


def remove_container(container, wait: float = REMOVAL_WAIT) -> bool:
    """Force-remove ``container`` (a docker SDK ``Container``) with its volumes; True when this
    call removed it, False when another caller (a sweep, the reaper, its owner) did.

    The engine answers a removal that meets another one 404 (already gone) or 409 ("removal
    ... is already in progress"); neither is an error, and on 409 this waits up to ``wait``
    seconds for the other removal to finish, so the container is gone when this returns.
    Raises ``docker.errors.APIError`` for any other refusal, and for a 409 removal that has
    not finished within ``wait``.
    """
    try:
        container.remove(force=True, v=True)
        return True
    except NotFound:
        return False
    except APIError as exc:
        if exc.status_code != 409:
            raise
        conflict = exc
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            container.reload()
        except NotFound:
            return False
        time.sleep(0.2)
    raise conflict
