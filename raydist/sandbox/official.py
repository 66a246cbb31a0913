"""The names SWE-bench gives an instance's prebuilt evaluation image.

The official harness names each instance's image ``<namespace>/sweb.eval.x86_64.<id>:latest``,
lower-cased, with ``__`` written ``_1776_`` (``swebench.task.checks.expected_image``); a
SWE-bench 5.x row may name its image itself (``image``). raydist builds its own instance
images from a PyPI sdist and exact pins (``raydist.sandbox.images``); these names tell a user
which official image a row without such a recipe would need.
"""
from __future__ import annotations

from pathlib import Path

from raydist.sandbox.images import _export_repo
from raydist.sandbox.limits import Limits
from raydist.sandbox.provider import SandboxProvider, as_provider
from raydist.sandbox.sources import file_lock

DEFAULT_NAMESPACE = "swebench"


def official_image_name(instance, namespace: str = DEFAULT_NAMESPACE) -> str:
    """The official image of ``instance`` (an ``Instance``): the row's ``image`` when it has one
    (a field of ``extra``), else ``swebench.task.checks.expected_image(instance_id, namespace)``,
    e.g. ``swebench/sweb.eval.x86_64.django_1776_django-11099:latest``."""
    from swebench.task.checks import expected_image

    image = (getattr(instance, "extra", None) or {}).get("image")
    return str(image) if image else expected_image(instance.instance_id, namespace)


class OfficialImageMissing(LookupError):
    """An official row's image is neither in the Docker daemon nor pullable from here."""


def ensure_official_image(provider: SandboxProvider, instance, namespace: str = DEFAULT_NAMESPACE, *,
                          pull: bool = True) -> str:
    """The tag of ``instance``'s official image (``official_image_name``), pulled first when it
    is not in the provider and ``pull``. Raises ``OfficialImageMissing`` naming the image, what the
    pull said, and the ways to get it (pull it on a host with network, build it with swebench's
    harness, or ``raydist.tasks.official_build`` offline)."""
    from docker.errors import APIError

    provider = as_provider(provider)
    name = official_image_name(instance, namespace)
    if provider.image_exists(name):
        return name
    why = "pulling is off"
    if pull:
        repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
        try:
            provider.pull(repository, tag=tag or "latest")
            return name
        except APIError as exc:
            why = f"the pull failed: {str(exc)[:300]}"
    raise OfficialImageMissing(
        f"instance {instance.instance_id!r}: its image {name} is not in {provider.engine_name} and {why}; pull it on a "
        "host that reaches the registry (`docker pull " + name + "`), build it with swebench's harness "
        "(`swebench images build ...`), or build its layout offline from a row with an sdist recipe "
        "(`python -m raydist.tasks.official_build`)")


def official_repo_dir(provider: SandboxProvider, image: str, cache_dir: Path) -> Path:
    """A host copy of ``image``'s ``/testbed`` at HEAD (``git archive``), cached under
    ``cache_dir/repos/official-<image id>``: the repository views are built from, exactly as
    ``raydist.sandbox.images`` exports its own images'."""
    provider = as_provider(provider)
    key = "official-" + provider.image_id(image).split(":")[-1][:16]
    repo_dir = Path(cache_dir) / "repos" / key
    with file_lock(Path(cache_dir) / "locks" / f"{key}.lock"):
        if not repo_dir.is_dir():
            with provider.create(image, limits=Limits(), name=f"export-{key}", user="root",
                                 labels={"raydist.role": "repo-export"}) as box:
                box.exec("git config --global --add safe.directory '*'", timeout=60)
                _export_repo(box, repo_dir, image)
    return repo_dir
