"""Shared fixtures: the real Docker daemon with raydist's base image.

Outside CI a missing daemon or base image skips the tests that need them, saying how to get
them; in CI (CI=true) it fails them, because there `launch/setup.sh` must have provided both.
"""

from __future__ import annotations

import os

import pytest

from raydist.sandbox import SandboxUnavailable, base_image_tag, connect


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI must provide it: launch/setup.sh starts the daemon and builds the image)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def client():
    """A docker SDK client of the running daemon whose base image exists."""
    try:
        docker_client = connect()
    except SandboxUnavailable as exc:
        _unavailable(str(exc))
    tag = base_image_tag()
    if not docker_client.images.list(name=tag):
        _unavailable(f"base image {tag} is absent; build it with `bash launch/setup.sh`")
    return docker_client
