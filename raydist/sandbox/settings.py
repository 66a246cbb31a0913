"""The ``sandbox`` settings of a launch: where containers run, from which base image, on which
network, within which limits, and how long one grading may take. The one declaration: the
launch's ``sandbox`` node is this dataclass (``raydist.driver.config``), and a unit carries it
whole (``raydist.cluster.unit_image.UnitSettings.sandbox``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from raydist._util.settings import keyless
from raydist.sandbox.limits import Limits

__all__ = ["SandboxSettings"]


@dataclass(frozen=True)
class SandboxSettings:
    """``sandbox``: the Docker sandbox of agent and grading runs (``raydist.sandbox``).

    Raises:
        ValueError: a ``grading_timeout_s`` that is not above 0 (names the key).
    """

    docker_host: str | None = keyless(None)
    """Docker daemon URL; null: DOCKER_HOST or the local socket (part of no key)."""
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

    def __post_init__(self) -> None:
        timeout = self.grading_timeout_s
        if isinstance(timeout, (int, float)) and not timeout > 0:
            raise ValueError(f"sandbox.grading_timeout_s={timeout}: must be a positive number of seconds, "
                             "e.g. sandbox.grading_timeout_s=900")
