"""Images: the offline base image and one content-named image per instance recipe.

An instance image is ``raydist/instance:<recipe.key()>``: the base image plus a venv at
``/opt/venv`` with the recipe's exact pins, the sdist unpacked at ``/testbed`` and installed
(``install_repo``), the injected defect applied, a git repository whose HEAD is that base
state, and the unprivileged ``agent`` user owning ``/testbed`` (the image's ``USER``). Like
SWE-bench's env/instance layers the name is a content hash, so an image is built once (and
again when ``build_steps.BUILD_VERSION`` changes what an image holds) and reused by every run
and node that sees the same recipe (docs/architecture.md, ``raydist.sandbox``). Nothing inside a
container touches the network: the sdist and a wheelhouse are prepared on the host
(:mod:`raydist.sandbox.sources`).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from raydist.sandbox import build_steps
from raydist.sandbox.container import Sandbox
from raydist.sandbox.limits import Limits
from raydist.sandbox.provider import SandboxProvider, as_provider
from raydist.sandbox.sources import SourceError, build_requires, build_wheelhouse, fetch_sdist, file_lock, unpack_sdist

INSTANCE_REPOSITORY = "raydist/instance"
# Inside the package, so an installed raydist names the same tag as a source checkout.
BASE_SCRIPT = Path(__file__).resolve().with_name("base_image.sh")
# Builds run as root and commit /testbed, so it stays in the writable layer (testbed_size None).
BUILD_LIMITS = Limits(cpus=float(os.cpu_count() or 1), memory="8g", pids=4096, file_size="8g",
                      tmp_size="4g", testbed_size=None)


class ImageBuildError(RuntimeError):
    """An image could not be built; the message names the recipe, the step and the output."""


class BaseImageMissing(RuntimeError):
    """The offline base image is not in the daemon."""


@dataclass(frozen=True)
class InstanceImage:
    """A built instance image ``tag`` and ``repo_dir``, the host copy of its ``/testbed`` at
    the base commit (sdist + injected defect, without build byproducts)."""

    tag: str
    repo_dir: Path


def base_image_tag(override: str | None = None) -> str:
    """The base image tag: ``override`` (config ``sandbox.base_image``) when given, else the
    tag ``raydist/sandbox/base_image.sh --print-tag`` prints (a hash of the base recipe)."""
    if override:
        return override
    if not BASE_SCRIPT.is_file():
        raise BaseImageMissing(f"{BASE_SCRIPT} is absent; set sandbox.base_image to a built tag")
    out = subprocess.run(["bash", str(BASE_SCRIPT), "--print-tag"], capture_output=True,
                         text=True, check=True, timeout=30)
    return out.stdout.strip()


def ensure_base_image(provider: SandboxProvider, tag: str | None = None) -> str:
    """Return the base image tag (``tag`` or :func:`base_image_tag`) once ``provider`` holds it
    (a docker-SDK client is taken as a ``DockerProvider``).

    Raises ``BaseImageMissing`` naming the tag, the provider and ``bash launch/setup.sh`` when absent.
    """
    provider = as_provider(provider)
    tag = base_image_tag(tag)
    if not provider.image_exists(tag):
        raise BaseImageMissing(
            f"base image {tag} is not in {provider.engine_name}; build it with `bash launch/setup.sh` "
            "(or `bash raydist/sandbox/base_image.sh`), or set sandbox.base_image to an existing tag")
    return tag


def instance_tag(recipe) -> str:
    """``raydist/instance:<recipe.key()>``."""
    return f"{INSTANCE_REPOSITORY}:{recipe.key()}"


def ensure_instance_image(provider: SandboxProvider, recipe, *, base_tag: str | None = None,
                          cache_dir: Path, label: str | None = None) -> InstanceImage:
    """Return the instance image of ``recipe``, building it when its tag is absent.

    ``recipe`` has ``.sdist`` (``name version sha256 filename``), ``.install`` (exact pins),
    ``.install_repo`` (shell command or None), ``.injected_patch`` (diff, "" for none),
    ``.python`` and ``.key()``. ``cache_dir`` holds ``sdists/``, ``wheels/<hash>``,
    ``repos/<key>`` (the returned ``repo_dir``) and ``locks/``; a file lock per recipe key
    keeps concurrent builders on one host from racing. ``label`` (e.g. an instance id) names
    the build in errors.

    Raises ``ImageBuildError`` naming the recipe, the failed step and the last output lines,
    and ``BaseImageMissing`` when the base image is absent.
    """
    client = as_provider(provider)
    key = recipe.key()
    tag = instance_tag(recipe)
    cache_dir = Path(cache_dir)
    repo_dir = cache_dir / "repos" / key
    what = f"{label or recipe.sdist.name + '==' + recipe.sdist.version} (recipe {key})"
    with file_lock(cache_dir / "locks" / f"{key}.lock"):
        if not _image_current(client, tag):
            base = ensure_base_image(client, base_tag)
            _build(client, recipe, base, tag, cache_dir, what)
        if not repo_dir.is_dir():
            with client.create(tag, limits=Limits(), name=f"export-{key}",
                               labels={"raydist.role": "repo-export"}) as box:
                _export_repo(box, repo_dir, what)
    return InstanceImage(tag, repo_dir)


def _image_current(provider: SandboxProvider, tag: str) -> bool:
    """Whether ``tag`` exists and was built by today's steps (label ``raydist.build``)."""
    if not provider.image_exists(tag):
        return False
    return provider.image_labels(tag).get("raydist.build") == build_steps.BUILD_VERSION


def _build(client: SandboxProvider, recipe, base: str, tag: str, cache_dir: Path, what: str) -> None:
    with tempfile.TemporaryDirectory(prefix="raydist-src-") as tmp:
        try:
            source = unpack_sdist(fetch_sdist(recipe.sdist, cache_dir), Path(tmp))
            wheels = build_wheelhouse(tuple(recipe.install), build_requires(source),
                                      getattr(recipe, "python", "3.11"), cache_dir)
        except SourceError as exc:
            raise ImageBuildError(f"building {what} failed at step 'host sources': {exc}") from exc
        with client.create(base, limits=BUILD_LIMITS, name=f"build-{recipe.key()}",
                           labels={"raydist.role": "image-build"}) as box:
            build_steps.copy_inputs(box, source, wheels, recipe.injected_patch)
            for step, command, env, timeout in build_steps.plan(recipe):
                _run_step(box, step, command, env, timeout, what)
            client.commit(box, tag, changes=build_steps.image_changes(recipe.key()))


def _run_step(box: Sandbox, step: str, command: str, env: dict, timeout: float, what: str) -> None:
    result = box.exec(command, timeout=timeout, cwd="/testbed", env=env)
    if result.returncode != 0:
        tail = "\n".join(result.output.splitlines()[-20:])
        why = f"timed out after {timeout:g}s" if result.timed_out else f"exit {result.returncode}"
        raise ImageBuildError(f"building {what} failed at step {step!r} ({why}); last lines:\n{tail}")


def _export_repo(box: Sandbox, repo_dir: Path, what: str) -> None:
    """Write the image's ``/testbed`` at HEAD (``git archive``) to ``repo_dir`` atomically."""
    _run_step(box, "export repo", "git archive --format=tar -o /tmp/raydist-base.tar HEAD",
              {}, 300, what)
    archive = box.read_files(["raydist-base.tar"], root="/tmp")["raydist-base.tar"]
    if archive is None:
        raise ImageBuildError(f"building {what} failed at step 'export repo': git archive wrote no "
                              "/tmp/raydist-base.tar")
    repo_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{repo_dir.name}-", dir=repo_dir.parent))
    tar_path = staging.with_suffix(".tar")
    tar_path.write_bytes(archive)
    try:
        shutil.unpack_archive(tar_path, staging, format="tar", filter="data")
        os.replace(staging, repo_dir)
    finally:
        tar_path.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
