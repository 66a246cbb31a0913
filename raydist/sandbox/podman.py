"""Podman as a sandbox provider (``sandbox.provider=podman``, issue 31 item 2).

Podman is daemonless: ``podman system service`` answers a Docker-compatible API on a socket
(``sandbox.podman_socket``, default ``unix:///run/raydist-podman.sock``, which
``launch/setup.sh`` starts as root), so the docker SDK drives it and the provider differs from
Docker's only where Podman 4.3's compat API does (measured on Debian 12, Podman 4.3.1, runc,
cgroup v1, as root):

* Works as on Docker: ``nano_cpus`` (CFS quota), ``mem_limit`` with ``memswap_limit`` equal
  (no swap), ``pids_limit``, ``cap_drop=["ALL"]`` with ``cap_add``, ``security_opt=
  ["no-new-privileges"]``, the ``fsize`` ulimit, ``network_mode="none"``, labels and label
  filters (the orphan sweep, the reaper), ``init=True`` (catatonit as ``/run/podman-init``;
  its only child is the keep-alive ``sleep``), exec streams, ``exec_inspect`` exit codes,
  ``put_archive``/``get_archive`` (also into tmpfs mounts: Podman copies in the container's
  mount namespace), ``commit`` with changes, and the cgroup v1 OOM counter
  (``memory/memory.oom_control``'s ``oom_kill``).
* Differs: an anonymous volume with tmpfs driver options (Docker's bounded ``/tmp``,
  ``/testbed`` and log volumes) becomes a plain directory on the host's disk (the options are
  ignored), so a full one would not answer ENOSPC; a named one with ``o=size=`` is refused
  ("Filesystem does not support Project Quota"). Podman's ``tmpfs`` mounts do what Docker's
  volumes do (bounded, and visible to the archive API), so each volume becomes a ``tmpfs``
  mount of the same size and options, with ``notmpcopyup`` (the image's ``/testbed`` is copied
  in by ``create``, as on Docker).
* Differs: as root Podman gives every container ``nofile`` 1048576 and ``nproc`` 4194304;
  where the host's root lacks ``CAP_SYS_RESOURCE`` (this machine) runc cannot raise its limits
  that far and every start fails ("error setting rlimit type 7: operation not permitted"). The
  provider sets both to the API service's own hard limits (``service_rlimits``), which is what
  Docker's containers inherit from dockerd.
* Differs: a committed image is named ``docker.io/<repository>:<tag>``; looking it up by the
  short name finds it.
* Differs: Docker gives a non-root user no effective capability (the kept ones stay in the
  bounding set only), while Podman 4.3 makes ``cap_add`` the non-root user's effective,
  permitted and ambient capabilities too: a sandbox running as ``agent`` could ``setuid(0)``
  and read ``/etc/shadow``. A sandbox whose user is not root is therefore given none.
* Rootless on cgroup v1 (or v2 without delegated controllers) Podman ignores memory, pids and
  cpu limits with only a warning ("Resource limits are not supported and ignored on cgroups V1
  rootless systems"): a container asked for 64 MiB allocates 200 MiB. ``check`` refuses such a
  service before any sandbox runs. Rootless limits need cgroup v2 with the memory, pids and cpu
  controllers delegated to the user.
"""
from __future__ import annotations

import re
import resource
import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import docker
import requests
from docker.types import Mount, Ulimit

from raydist.sandbox.limits import Limits
from raydist.sandbox.provider import SandboxProvider
from raydist.sandbox.registry import register

__all__ = ["DEFAULT_SOCKET", "PodmanProvider", "host_cgroups", "service_rlimits"]

DEFAULT_SOCKET = "unix:///run/raydist-podman.sock"
# The libpod API version asked for Podman's own view of the host (4.0.0: the oldest 4.x serves).
LIBPOD_INFO = "/v4.0.0/libpod/info"
# The cgroup controllers that enforce Limits.memory, Limits.pids and Limits.cpus.
NEEDED_CONTROLLERS = ("memory", "pids", "cpu")


def host_cgroups(client: docker.DockerClient) -> tuple[bool, str, frozenset[str]]:
    """``(rootless, cgroup version, controllers)`` of the Podman service ``client`` talks to, from
    its libpod ``info`` (``host.security.rootless``, ``host.cgroupVersion`` such as ``"v1"``,
    ``host.cgroupControllers``: the controllers its containers can be limited by; for a rootless
    service, those delegated to its user, none on cgroup v1). Docker's ``/info`` is no help here:
    Podman answers ``MemoryLimit: true`` even where it ignores the limit.

    Raises ``docker.errors.DockerException`` (``requests`` errors) when the service does not answer.
    """
    api = client.api
    response = api.get(api.base_url + LIBPOD_INFO, timeout=30)
    response.raise_for_status()
    host = response.json()["host"]
    return (bool(host["security"]["rootless"]), str(host["cgroupVersion"]),
            frozenset(host.get("cgroupControllers") or ()))


def service_rlimits(address: str) -> dict[str, int]:
    """The hard ``nofile`` and ``nproc`` limits (counts) its containers can get from the Podman
    service at ``address``: those of the process answering on its unix socket (found by
    ``SO_PEERCRED``, read from ``/proc/<pid>/limits``), whose limits conmon and runc inherit and,
    without ``CAP_SYS_RESOURCE``, cannot raise. For an address that is no local unix socket (or a
    peer that cannot be read), this process's own hard limits. An unlimited one is left out."""
    names = {"nofile": ("Max open files", resource.RLIMIT_NOFILE),
             "nproc": ("Max processes", resource.RLIMIT_NPROC)}
    found: dict[str, int] = {}
    url = urlparse(address)
    if url.scheme in ("unix", "http+unix"):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
                peer.settimeout(5)
                peer.connect(url.path)
                pid, _, _ = struct.unpack("3i", peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                struct.calcsize("3i")))
            text = Path(f"/proc/{pid}/limits").read_text()
        except OSError:
            text = ""
        for name, (row, _) in names.items():
            match = re.search(rf"^{row}\s+\S+\s+(\d+)\s", text, re.MULTILINE)
            if match:
                found[name] = int(match.group(1))
    for name, (_, which) in names.items():
        hard = resource.getrlimit(which)[1]
        if name not in found and hard != resource.RLIM_INFINITY:
            found[name] = hard
    return found


def _is_root(user: str | None) -> bool:
    """True for a container user spec (``name``, ``uid``, ``uid:gid``; empty: the image's
    default, root) that names root."""
    name = (user or "").partition(":")[0]
    return name in ("", "root", "0")


def _as_tmpfs(mount: Mount) -> tuple[str, str] | None:
    """``(target, tmpfs options)`` of an anonymous tmpfs volume ``mount`` (the form Docker needs,
    ``raydist.sandbox.container._tmpfs_volume``), or None for any other mount."""
    driver = (mount.get("VolumeOptions") or {}).get("DriverConfig") or {}
    options = driver.get("Options") or {}
    if mount.get("Type") != "volume" or mount.get("Source") or options.get("type") != "tmpfs":
        return None
    return mount["Target"], ",".join(o for o in (options.get("o", ""), "notmpcopyup") if o)


@register
class PodmanProvider(SandboxProvider):
    """Podman's API service (``podman system service``), as root or rootless; a rootless one is
    refused by ``check`` unless the host delegates the cgroup controllers that enforce limits."""

    name = "podman"
    engine_name = "Podman's API service"
    how_to_start = ("start it with `bash launch/setup.sh` (or `podman system service --time=0 "
                    f"{DEFAULT_SOCKET}`), or set sandbox.podman_socket")

    def __init__(self, client: docker.DockerClient, address: str) -> None:
        super().__init__(client, address)
        self._cgroups: tuple[bool, str, frozenset[str]] | None = None
        self._rlimits: dict[str, int] | None = None

    @classmethod
    def default_address(cls) -> str:
        """``unix:///run/raydist-podman.sock`` (``sandbox.podman_socket``'s default)."""
        return DEFAULT_SOCKET

    def _image_user(self, image: str) -> str:
        """The ``USER`` of ``image`` (``""``: root), from the engine's inspect."""
        return (self.client.images.get(image).attrs.get("Config") or {}).get("User") or ""

    def check(self, limits: Limits) -> None:
        """Refuse a service that would run ``limits`` unenforced: one missing a cgroup controller
        of ``NEEDED_CONTROLLERS`` (a rootless service on cgroup v1, or on v2 without delegation),
        or one that is not Podman (no libpod API: ``sandbox.podman_socket`` at a Docker daemon).
        Asked once per provider (``host_cgroups``).

        Raises ``ValueError``, one line naming the provider, its address, the reason and the
        remedy (issue 31: never run a sandbox silently unbounded).
        """
        if self._cgroups is None:
            try:
                self._cgroups = host_cgroups(self.client)
            except requests.HTTPError as exc:
                if exc.response is None or exc.response.status_code != 404:
                    raise
                raise ValueError(f"sandbox.provider=podman at {self.address}: the service there is not Podman (it "
                                 f"answers no libpod API: {LIBPOD_INFO} is 404); set sandbox.podman_socket to "
                                 "Podman's socket, or sandbox.provider=docker for a Docker daemon") from None
        rootless, version, controllers = self._cgroups
        missing = [c for c in NEEDED_CONTROLLERS if c not in controllers]
        if not missing:
            return
        who = "rootless Podman" if rootless else "Podman"
        why = (f"{who} on cgroup {version} cannot enforce the memory, pids and cpu limits (its "
               f"containers get no {', '.join(missing)} controller)")
        remedy = ("run Podman as root, or on a host with cgroup v2 delegating memory, pids and cpu "
                  "to the user" if rootless else "enable those cgroup controllers on the host")
        raise ValueError(f"sandbox.provider=podman at {self.address}: {why}; {remedy}")

    def _run_options(self, *, image: str, limits: Limits, mounts: list[Mount], network: str,
                     tmpfs: Mapping[str, str], user: str | None) -> dict[str, Any]:
        """Docker's options (``SandboxProvider._run_options``) in the form Podman 4.3 enforces:
        each tmpfs volume becomes a ``tmpfs`` mount of the same size, ``nofile``/``nproc`` are
        the service's hard limits (``service_rlimits``), and a sandbox whose user (``user``, else
        the image's ``USER``) is not root is given no capability at all (see the module
        docstring)."""
        options = super()._run_options(image=image, limits=limits, mounts=mounts, network=network, tmpfs=tmpfs,
                                       user=user)
        if not _is_root(user if user else self._image_user(image)):
            options["cap_add"] = []
        kept: list[Mount] = []
        all_tmpfs = dict(options.get("tmpfs") or {})
        for mount in options.get("mounts") or []:
            as_tmpfs = _as_tmpfs(mount)
            if as_tmpfs is None:
                kept.append(mount)
            else:
                all_tmpfs.setdefault(*as_tmpfs)
        options["mounts"] = kept
        options["tmpfs"] = all_tmpfs
        if self._rlimits is None:
            self._rlimits = service_rlimits(self.address)
        inherited = [Ulimit(name=name, soft=hard, hard=hard) for name, hard in self._rlimits.items()]
        options["ulimits"] = [*options.get("ulimits", []), *inherited]
        return options
