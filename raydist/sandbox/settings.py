"""The ``sandbox`` settings of a launch: where containers run, from which base image, on which
network, within which limits, and how long one grading may take. The one declaration: the
launch's ``sandbox`` node is this dataclass (``raydist.driver.config``), and a unit carries it
whole (``raydist.cluster.unit_image.UnitSettings.sandbox``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raydist._util.settings import keyless
from raydist.sandbox.engine import address_problem
from raydist.sandbox.limits import Limits
from raydist.sandbox.podman import DEFAULT_SOCKET
from raydist.sandbox.provider import SandboxProvider
from raydist.sandbox.registry import connect, provider_class

__all__ = ["ADDRESS_SETTINGS", "SandboxSettings", "sandbox_at"]

#: The setting that holds a provider's address, by provider; ``docker_host`` for any other.
ADDRESS_SETTINGS = {"podman": "podman_socket"}


def sandbox_at(sandbox: Any) -> tuple[str, str | None]:
    """``(sandbox.provider, its address or None)`` of a ``sandbox`` node: ``SandboxSettings``, or
    the composed config's node (a ``DictConfig`` or dict) before it is checked. The address is
    ``podman_socket`` for Podman, ``docker_host`` otherwise (``raydist.sandbox.connect``'s
    arguments)."""
    def get(name: str) -> Any:
        return sandbox.get(name) if hasattr(sandbox, "get") else getattr(sandbox, name, None)
    provider = get("provider") or "docker"
    return provider, get(ADDRESS_SETTINGS.get(provider, "docker_host"))


@dataclass(frozen=True)
class SandboxSettings:
    """``sandbox``: the sandbox of agent and grading runs (``raydist.sandbox``).

    Raises:
        ValueError: a ``grading_timeout_s`` that is not above 0, a ``provider`` that is not
            a registered one (names the key, the value and the choices), or a ``docker_host`` or
            ``podman_socket`` that is no engine URL (``address_problem``: empty, a bare path).
    """

    provider: str = keyless("docker")
    """The engine sandboxes run on (``raydist.sandbox.registry.PROVIDERS``: ``docker``,
    ``podman``; ``sandbox=podman`` selects Podman); part of no key, as a result must not depend on
    it (issue 31), but recorded with the launch's settings."""
    docker_host: str | None = keyless(None)
    """URL of Docker's API (``unix:///var/run/docker.sock``, ``tcp://host:2375``); null:
    DOCKER_HOST or the local socket (part of no key)."""
    podman_socket: str = keyless(DEFAULT_SOCKET)
    """URL of Podman's API service (``podman system service``), used when ``provider`` is
    ``podman``: ``launch/setup.sh`` starts it as root there; a rootless one is the user's own
    socket (part of no key)."""
    base_image: str | None = None
    """Base image tag; null: the tag raydist/sandbox/base_image.sh builds."""
    network: str = "none"
    """Docker network of agent containers (``none``: no network)."""
    limits: Limits = field(default_factory=Limits)
    """Resource limits of every container (``raydist.sandbox.Limits``: cpus, memory, pids,
    file_size, tmp_size, testbed_size, Docker sizes)."""
    grading_timeout_s: float = 900.0
    """Seconds the test run of one grading may take (> 0)."""
    image_namespace: str = "swebench"
    """Registry namespace (or ``registry/prefix``) of official SWE-bench images, for a 5.x row that
    names no ``image``: ``<namespace>/sweb.eval.x86_64.<id>:latest`` (``raydist.sandbox.official``)."""

    @property
    def address(self) -> str | None:
        """Where ``provider``'s engine listens (``podman_socket`` for Podman, else ``docker_host``);
        None: the provider's default (``sandbox_at``)."""
        return sandbox_at(self)[1]

    def connect(self, timeout: float = 10) -> SandboxProvider:
        """The provider these settings name at ``address`` (``raydist.sandbox.registry.connect``).
        Raises ``SandboxUnavailable`` when its engine cannot be reached."""
        return connect(self.provider, self.address, timeout)

    def __post_init__(self) -> None:
        provider_class(self.provider)
        for key in ("docker_host", "podman_socket"):
            problem = address_problem(getattr(self, key))
            if problem:
                raise ValueError(f"sandbox.{key}={getattr(self, key)!r} {problem}")
        timeout = self.grading_timeout_s
        if isinstance(timeout, (int, float)) and not timeout > 0:
            raise ValueError(f"sandbox.grading_timeout_s={timeout}: must be a positive number of seconds, "
                             "e.g. sandbox.grading_timeout_s=900")
