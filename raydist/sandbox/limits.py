"""The resource limits of one sandbox (what bounds what: ``raydist.sandbox.container``)."""
from __future__ import annotations

from dataclasses import dataclass

import docker
from docker.utils import parse_bytes


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox (see the module docstring for what bounds what).

    Sizes are Docker size strings (``"2g"``, ``"512m"``, ``"100m"``):

    * ``cpus``: cores; ``memory``: RAM, no swap beyond it; ``pids``: most processes at once.
    * ``file_size``: largest file any process may write (RLIMIT_FSIZE, soft = hard).
    * ``tmp_size``: size of the tmpfs volume at ``/tmp``.
    * ``testbed_size``: bytes ``/testbed`` may grow beyond the image's content (a tmpfs volume
      filled from the image at creation); ``None`` leaves ``/testbed`` in the container's
      writable layer, which image builds need, since they commit it.
    """

    cpus: float = 1.0
    memory: str = "2g"
    pids: int = 512
    file_size: str = "1g"
    tmp_size: str = "512m"
    testbed_size: str | None = "1g"

    def __post_init__(self) -> None:
        for name in ("memory", "file_size", "tmp_size", "testbed_size"):
            value = getattr(self, name)
            if value is None and name == "testbed_size":
                continue
            try:
                ok = parse_bytes(value) > 0
            except (docker.errors.DockerException, TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"sandbox limit {name}={value!r} is not a positive Docker size "
                                 "such as '512m' or '2g'; fix sandbox.limits")
        if self.cpus <= 0 or self.pids <= 0:
            raise ValueError(f"sandbox limits cpus={self.cpus!r} and pids={self.pids!r} must be "
                             "positive; fix sandbox.limits")
