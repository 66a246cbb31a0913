"""Host-side inputs of an instance image: the verified sdist and a wheelhouse of its pins.

Containers never have network, so everything an image build installs is fetched here, on the
host, from PyPI (or pip's configured index) and handed to the build as files.
"""
from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin

import requests
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from raydist._util import file_sha256, stable_hash, temporary_beside

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"  # PEP 691
DEFAULT_BUILD_REQUIRES = ("setuptools>=40.8.0", "wheel")  # PEP 517's fallback backend


class SourceError(RuntimeError):
    """The sdist or a wheel could not be obtained or verified on the host."""


@contextmanager
def file_lock(path: Path):
    """Hold an exclusive ``fcntl`` lock on ``path`` (created if needed) for the block, so
    concurrent builders on one host take turns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _index_url() -> str:
    return os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")


@retry(retry=retry_if_exception_type(requests.ConnectionError), stop=stop_after_attempt(3),
       wait=wait_exponential(min=1, max=8), reraise=True)
def _sdist_url(sdist) -> tuple[str, str]:
    """Find the release file whose sha256 is the recipe's in the index's PEP 691 listing."""
    project = re.sub(r"[-_.]+", "-", sdist.name).lower()  # PEP 503 normalised name
    url = f"{_index_url()}/{project}/"
    resp = requests.get(url, headers={"Accept": SIMPLE_JSON}, timeout=30)
    if resp.status_code == 404:
        raise SourceError(f"the package index has no project {sdist.name!r} ({url}); "
                          "check the recipe's sdist.name")
    resp.raise_for_status()
    for entry in resp.json()["files"]:
        if entry.get("hashes", {}).get("sha256") == sdist.sha256:
            return urljoin(url, entry["url"]), entry["filename"]
    raise SourceError(
        f"no file of {sdist.name} on {url} has sha256 {sdist.sha256} "
        f"(expected the {sdist.version} sdist); check the recipe's sdist.sha256"
    )


def fetch_sdist(sdist, cache_dir: Path) -> Path:
    """Return the path of ``sdist`` (``.name .version .sha256 .filename``) under
    ``cache_dir/sdists``, downloading it from the package index (``PIP_INDEX_URL`` or PyPI,
    PEP 691 JSON listing) when absent.

    Raises ``SourceError`` when no release file has the recipe's sha256.
    """
    folder = Path(cache_dir) / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    if sdist.filename and (folder / sdist.filename).is_file():
        cached = folder / sdist.filename
        if file_sha256(cached) == sdist.sha256:
            return cached
    url, filename = _sdist_url(sdist)
    target = folder / filename
    with temporary_beside(target) as (handle, tmp):
        with requests.get(url, stream=True, timeout=60) as resp:
            resp.raise_for_status()
            for chunk in resp.iter_content(1 << 20):
                handle.write(chunk)
        handle.flush()
        if file_sha256(tmp) != sdist.sha256:
            raise SourceError(f"{url} does not match sha256 {sdist.sha256}")
        os.replace(tmp, target)
    return target


def unpack_sdist(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` (.tar.gz/.tar.bz2/.zip) into ``dest``; return the source root
    (the archive's single top-level folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
    entries = [p for p in dest.iterdir()]
    if len(entries) != 1 or not entries[0].is_dir():
        raise SourceError(f"{archive.name} does not hold a single top-level folder")
    return entries[0]


def build_requires(source_root: Path) -> tuple[str, ...]:
    """``[build-system].requires`` of the source's pyproject.toml, or setuptools + wheel
    (PEP 518 defaults) when it declares none."""
    pyproject = source_root / "pyproject.toml"
    if pyproject.is_file():
        table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("build-system", {})
        if "requires" in table:
            return tuple(table["requires"])
    return DEFAULT_BUILD_REQUIRES


def wheelhouse_key(install: tuple[str, ...], build: tuple[str, ...], python: str) -> str:
    """16 hex chars naming the wheelhouse of one set of requirements."""
    return stable_hash({"install": list(install), "build": list(build), "python": python})


def build_wheelhouse(install: tuple[str, ...], build: tuple[str, ...], python: str,
                     cache_dir: Path) -> Path:
    """Return ``cache_dir/wheels/<key>`` holding wheels for ``install`` and ``build`` and
    all their dependencies, built with this interpreter's ``pip wheel`` (the host runs the
    same Python and glibc generation as the base image).

    Pins and build requirements are resolved separately: they may name different versions of
    the same project (a pinned setuptools and a newer one for building). Raises
    ``SourceError`` with pip's last output lines when a requirement cannot be obtained.
    """
    if python != f"{sys.version_info.major}.{sys.version_info.minor}":
        raise SourceError(f"recipe asks for Python {python}; the base image provides "
                          f"{sys.version_info.major}.{sys.version_info.minor}")
    folder = Path(cache_dir) / "wheels" / wheelhouse_key(install, build, python)
    # Recipes differing only in their sdist share a wheelhouse, so it has its own lock.
    with file_lock(folder.with_name(folder.name + ".lock")):
        if not (folder / ".complete").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            for group in (install, build):
                if group:
                    _pip_wheel(group, folder)
            (folder / ".complete").write_text("\n".join([*install, *build]) + "\n")
    return folder


def _pip_wheel(requirements: tuple[str, ...], folder: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(folder),
           *requirements]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise SourceError(f"pip wheel {' '.join(requirements)} failed:\n{tail}")
