"""Sandboxes at raydist's edge: providers (engines), limited containers, content-named images.

Public API (docs/architecture.md, ``raydist.sandbox``)::

    connect, PROVIDERS, register, provider_class                  registry
    SandboxProvider, DockerProvider, SandboxError, as_provider    provider
    PodmanProvider                                                podman
    SandboxUnavailable, owner_label                               engine
    Sandbox                                                       container
    Limits                                                        limits
    ExecResult                                                    command
    base_image_tag, ensure_base_image, ensure_instance_image,
    InstanceImage, ImageBuildError, BaseImageMissing              images

Everything outside this package reaches an engine through a ``SandboxProvider`` and a
``Sandbox``; never through their docker-SDK client or container (``tests/test_sandbox_provider.py``).
"""
from raydist.sandbox.command import ExecResult
from raydist.sandbox.container import Sandbox
from raydist.sandbox.engine import SandboxUnavailable, owner_label
from raydist.sandbox.images import (
    BaseImageMissing,
    ImageBuildError,
    InstanceImage,
    base_image_tag,
    ensure_base_image,
    ensure_instance_image,
)
from raydist.sandbox.limits import Limits
from raydist.sandbox.podman import PodmanProvider  # registers sandbox.provider=podman
from raydist.sandbox.provider import DockerProvider, SandboxError, SandboxProvider, as_provider
from raydist.sandbox.registry import PROVIDERS, connect, provider_class, register

__all__ = [
    "PROVIDERS", "BaseImageMissing", "DockerProvider", "ExecResult", "ImageBuildError", "InstanceImage", "Limits",
    "PodmanProvider", "Sandbox", "SandboxError", "SandboxProvider", "SandboxUnavailable", "as_provider",
    "base_image_tag", "connect", "ensure_base_image", "ensure_instance_image", "owner_label", "provider_class",
    "register",
]
