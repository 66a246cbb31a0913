"""Shared fixtures: the real Docker daemon with raydist's base image.

Outside CI a missing daemon or base image skips the tests that need them, saying how to get
them; in CI (CI=true) it fails them, because there `launch/setup.sh` must have provided both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

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


SDIST_CACHE = Path(tempfile.gettempdir()) / "raydist-test-sdists"


@pytest.fixture(scope="session")
def toolz_src(tmp_path_factory) -> Path:
    """A pristine unpack of the real toolz 1.0.0 sdist (downloaded once from PyPI, cached);
    tests that change files work on a copy."""
    archive = SDIST_CACHE / "toolz-1.0.0.tar.gz"
    if not archive.exists():
        SDIST_CACHE.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "toolz==1.0.0",
               "-d", str(SDIST_CACHE)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not archive.exists():
            pytest.skip(f"cannot download the toolz 1.0.0 sdist from PyPI: {done.stderr.strip()[-300:]}")
    root = tmp_path_factory.mktemp("toolz")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root / "toolz-1.0.0"
