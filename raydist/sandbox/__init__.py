"""Docker at raydist's edge: the daemon, limited containers, and content-named images.

Public API (docs/architecture.md, ``raydist.sandbox``)::

    connect, SandboxUnavailable, owner_label, sweep_orphans       engine
    Sandbox                                                       container
    Limits                                                        limits
    ExecResult                                                    command
    base_image_tag, ensure_base_image, ensure_instance_image,
    InstanceImage, ImageBuildError, BaseImageMissing              images
"""
from raydist.sandbox.command import ExecResult
from raydist.sandbox.container import Sandbox
from raydist.sandbox.engine import SandboxUnavailable, connect, owner_label, sweep_orphans
from raydist.sandbox.images import (
    BaseImageMissing,
    ImageBuildError,
    InstanceImage,
    base_image_tag,
    ensure_base_image,
    ensure_instance_image,
)
from raydist.sandbox.limits import Limits

__all__ = [
    "BaseImageMissing", "ExecResult", "ImageBuildError", "InstanceImage", "Limits", "Sandbox",
    "SandboxUnavailable", "base_image_tag", "connect", "ensure_base_image",
    "ensure_instance_image", "owner_label", "sweep_orphans",
]
