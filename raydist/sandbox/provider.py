"""The seam between raydist and whatever runs its sandboxes (``sandbox.provider``, issue 31).

A ``SandboxProvider`` is everything the rest of raydist asks of a container engine: connect,
create a hardened and limited sandbox (``raydist.sandbox.container.Sandbox``: exec with a
timeout, write files with exact bytes and owner, read the tree, copy out, remove), sweep the
orphans of dead owners by label, refuse limits the host cannot enforce, and the few image
operations (exists, id, labels, build from a Dockerfile, pull). No module outside
``raydist.sandbox`` reaches the engine's client or a sandbox's container; ``tests/
test_sandbox_provider.py`` holds that.

Every provider speaks a Docker-compatible API through a docker-SDK ``DockerClient``
(``client``): Docker's daemon here, Podman's API service for a Podman provider. What differs
between engines at creation (mounts, options) lives in one overridable method,
``_run_options``, so a subclass changes it without copying ``create``.
"""
from __future__ import annotations

import abc
import io
import os
from collections.abc import Mapping
from typing import Any, ClassVar

import docker
from docker.errors import DockerException, ImageNotFound
from docker.types import Mount, Ulimit
from docker.utils import parse_bytes

from raydist.sandbox import engine
from raydist.sandbox.command import LOG_DIR, LOG_SIZE
from raydist.sandbox.container import (
    CAPABILITIES,
    TESTBED,
    Sandbox,
    _container_name,
    _image_testbed,
    _keepalive_pid,
    _tell,
    _tmpfs_volume,
)
from raydist.sandbox.limits import Limits
from raydist.sandbox.reaper import reaped

#: The base of every error an engine call raises (a missing image: ``ImageNotFound``, one of it).
SandboxError = DockerException

__all__ = ["DockerProvider", "ImageNotFound", "SandboxError", "SandboxProvider", "as_provider"]


class SandboxProvider(abc.ABC):
    """A container engine raydist's sandboxes run on, reached at ``address`` through ``client``
    (a docker-SDK ``DockerClient`` of the engine's Docker-compatible API)."""

    name: ClassVar[str]
    """The value of ``sandbox.provider`` that selects it (``raydist.sandbox.registry``)."""
    engine_name: ClassVar[str]
    """What ``connect`` failed to reach, for its message (``"the Docker daemon"``)."""
    how_to_start: ClassVar[str]
    """How to start the engine or point raydist at it, for ``connect``'s message."""

    def __init__(self, client: docker.DockerClient, address: str) -> None:
        self.client = client
        self.address = address

    @classmethod
    @abc.abstractmethod
    def default_address(cls) -> str:
        """The address ``connect`` uses when given none (an environment variable, else a socket)."""

    @classmethod
    def connect(cls, address: str | None = None, timeout: float = 10) -> SandboxProvider:
        """The provider at ``address`` (a URL such as ``unix:///var/run/docker.sock``; ``None``:
        ``default_address()``) after a successful ping; ``timeout`` (seconds) bounds the ping,
        later calls get ``engine.API_TIMEOUT``.

        Raises ``SandboxUnavailable``: "cannot reach <engine> at <address> (<why>) for
        sandbox.provider=<name>; <how to start it>"."""
        address = address or cls.default_address()
        client = engine.connect(address, timeout, what=cls.engine_name, how=cls.how_to_start, provider=cls.name)
        return cls(client, address)

    # --- sandboxes ---------------------------------------------------------------------------

    @abc.abstractmethod
    def check(self, limits: Limits) -> None:
        """Refuse ``limits`` this provider cannot enforce on this host (``ValueError`` naming the
        limit, the reason and what to do). Never run a sandbox silently unbounded (issue 31)."""

    def create(
        self,
        image: str,
        *,
        limits: Limits | None = None,
        labels: Mapping[str, str] | None = None,
        name: str | None = None,
        network: str = "none",
        tmpfs: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> Sandbox:
        """Start a detached, hardened ``sleep infinity`` sandbox from ``image``.

        ``name`` is a hint: the container is named ``raydist-<hint>-<8 hex>``. ``labels`` are
        added to ``raydist.owner=<host>:<pid>``. ``tmpfs`` maps container paths to tmpfs mount
        options (``{"/tmp": "size=64m,mode=0755"}``); their pages count against ``limits.memory``,
        and a ``/tmp`` given there replaces the ``/tmp`` volume. Commands run as the image's
        user with the hardening of ``raydist.sandbox.container``; ``/testbed`` (when the image has
        one and ``limits.testbed_size`` is set) is a bounded tmpfs volume holding a copy of the
        image's ``/testbed``, owners and modes kept. ``user`` overrides the image's user
        (grading runs as ``root`` to run the tests as an unprivileged user of its own).
        Should this process die without removing it, its reaper does within
        ``raydist.sandbox.reaper.REAP_BOUND`` seconds.

        Raises ``ImageNotFound`` when the image is absent, ``ValueError`` from ``check``.
        """
        limits = limits or Limits()
        self.check(limits)
        with reaped(self.address):
            return self._create(image, limits=limits, labels=labels, name=name, network=network,
                                tmpfs=dict(tmpfs or {}), user=user)

    def _create(self, image: str, *, limits: Limits, labels: Mapping[str, str] | None, name: str | None,
                network: str, tmpfs: dict[str, str], user: str | None) -> Sandbox:
        all_labels = {engine.OWNER_LABEL: engine.owner_label(), **(labels or {})}
        mounts = [_tmpfs_volume(LOG_DIR, LOG_SIZE, "mode=1777")]
        if "/tmp" not in tmpfs:
            mounts.append(_tmpfs_volume("/tmp", parse_bytes(limits.tmp_size), "mode=1777"))
        testbed = None
        if limits.testbed_size is not None and TESTBED not in tmpfs:
            testbed = _image_testbed(self.client, image)
        if testbed is not None:
            mounts.append(_tmpfs_volume(TESTBED, _tell(testbed) + parse_bytes(limits.testbed_size)))
        try:
            container = self.client.containers.run(
                image, command=["sleep", "infinity"], name=_container_name(name), detach=True,
                labels=all_labels,
                **self._run_options(image=image, limits=limits, mounts=mounts, network=network, tmpfs=tmpfs,
                                    user=user))
            box = Sandbox(self, container)
            box.memory = limits.memory
            box._keepalive = _keepalive_pid(container)
            if testbed is not None:
                try:
                    container.put_archive("/", testbed)
                except BaseException:
                    box.remove()
                    raise
        finally:
            if testbed is not None:
                testbed.close()
        return box

    def _run_options(self, *, image: str, limits: Limits, mounts: list[Mount], network: str,
                     tmpfs: Mapping[str, str], user: str | None) -> dict[str, Any]:
        """The docker-SDK ``containers.run`` keyword arguments that limit and harden a sandbox
        of ``image`` (besides image, command, name, detach and labels): the one place a
        provider's options differ. See ``raydist.sandbox.container`` for what bounds what."""
        file_size = parse_bytes(limits.file_size)
        return {
            "network_mode": network,
            "nano_cpus": int(limits.cpus * 1e9),
            "mem_limit": limits.memory,
            "memswap_limit": limits.memory,
            "pids_limit": limits.pids,
            "cap_drop": ["ALL"],
            "cap_add": list(CAPABILITIES),
            "security_opt": ["no-new-privileges"],
            "ulimits": [Ulimit(name="fsize", soft=file_size, hard=file_size)],
            # An init as PID 1 reaps orphans; without it killed process trees linger as zombies
            # that keep counting against the PID limit.
            "init": True,
            "tmpfs": dict(tmpfs),
            "mounts": mounts,
            **({"user": user} if user else {}),
        }

    def sweep_orphans(self) -> int:
        """Force-remove raydist sandboxes whose owner process on this host is gone (label
        ``raydist.owner``); those of live owners or of other hosts stay. Returns how many went."""
        return engine.sweep_orphans(self.client)

    # --- images ------------------------------------------------------------------------------

    def image_exists(self, tag: str) -> bool:
        """Whether the engine holds an image named ``tag``."""
        try:
            self.client.images.get(tag)
        except ImageNotFound:
            return False
        return True

    def image_id(self, tag: str) -> str:
        """The id (``sha256:<64 hex>``) of image ``tag``. Raises ``ImageNotFound``."""
        return str(self.client.images.get(tag).id)

    def image_labels(self, tag: str) -> dict[str, str]:
        """The labels of image ``tag`` (``{}`` for none). Raises ``ImageNotFound``."""
        return dict(self.client.images.get(tag).labels or {})

    def build_image(self, dockerfile: str, tag: str, *, labels: Mapping[str, str] | None = None) -> str:
        """Build ``dockerfile`` (text; no build context, no network) as ``tag``, with ``labels``;
        returns the image id. Raises ``docker.errors.BuildError`` naming the failed step."""
        image, _ = self.client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, network_mode="none",
                                            rm=True, forcerm=True, labels=dict(labels or {}))
        return str(image.id)

    def commit(self, box: Sandbox, tag: str, *, changes: list[str] | None = None) -> None:
        """Save ``box``'s container as image ``tag`` (``repository:tag``), applying Dockerfile
        ``changes`` (``USER agent``, ``LABEL ...``)."""
        repository, _, version = tag.rpartition(":")
        box.container.commit(repository=repository, tag=version, changes=changes)

    def pull(self, repository: str, tag: str = "latest") -> None:
        """Pull ``repository:tag`` from its registry. Raises ``docker.errors.APIError`` with the
        registry's answer (no network, unknown image)."""
        self.client.images.pull(repository, tag=tag)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r})"


class DockerProvider(SandboxProvider):
    """Docker's daemon (the default provider)."""

    name = "docker"
    engine_name = "the Docker daemon"
    how_to_start = "start it with `bash launch/setup.sh`, or set sandbox.docker_host"

    @classmethod
    def default_address(cls) -> str:
        """``DOCKER_HOST``, else ``unix:///var/run/docker.sock``."""
        return os.environ.get("DOCKER_HOST") or engine.DEFAULT_ADDRESS

    def __init__(self, client: docker.DockerClient, address: str) -> None:
        super().__init__(client, address)
        self._components: frozenset[str] | None = None

    def check(self, limits: Limits) -> None:
        """The daemon enforces every limit through its cgroups, v1 or v2; refused is an engine
        that is Podman's API service (its ``version`` names a ``Podman Engine`` component): it
        answers the same API but does not bound Docker's tmpfs volumes (``/tmp``, ``/testbed``)
        and gives a non-root user the kept capabilities (``raydist.sandbox.podman``), so it is
        driven as ``sandbox.provider=podman``. Asked once per provider.

        Raises ``ValueError`` naming the provider, its address and the settings to use instead.
        """
        if self._components is None:
            self._components = frozenset(str(c.get("Name")) for c in self.client.version().get("Components") or ())
        if "Podman Engine" in self._components:
            raise ValueError(f"sandbox.provider=docker at {self.address}: that is Podman's API service, where "
                             "Docker's options leave /tmp and /testbed unbounded; set sandbox.provider=podman "
                             f"sandbox.podman_socket={self.address}")


def as_provider(target: SandboxProvider | docker.DockerClient) -> SandboxProvider:
    """``target`` when it is a provider; a ``DockerProvider`` over it when it is a docker-SDK
    client (one made by hand, e.g. in a test); ``TypeError`` otherwise."""
    if isinstance(target, SandboxProvider):
        return target
    if isinstance(target, docker.DockerClient):
        return DockerProvider(target, engine.address_of(target))
    raise TypeError(f"expected a SandboxProvider (raydist.sandbox.connect()), got {type(target).__name__}")
