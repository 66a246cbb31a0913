"""Instance images built offline from real PyPI sdists on the real daemon."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from raydist.sandbox import (
    BaseImageMissing,
    ImageBuildError,
    Sandbox,
    as_provider,
    base_image_tag,
    ensure_base_image,
    ensure_instance_image,
)
from raydist.tasks import load_instances

pytestmark = pytest.mark.docker
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} (shared reference data) is absent")
# Wheelhouses and sdists are kept between runs, as the product keeps them.
CACHE = Path(os.environ.get("RAYDIST_CACHE_DIR", Path.home() / ".cache" / "raydist"))
ITERTOOLZ_MARK = "# raydist test: injected line\n"


def _instance(path: str, instance_id: str):
    return load_instances(str(DATA / path), ids=[instance_id])[0]


def _injected_patch(original: str) -> str:
    """A diff adding one comment line at the top of toolz/itertoolz.py."""
    first = original.splitlines(keepends=True)[0]
    return ("diff --git a/toolz/itertoolz.py b/toolz/itertoolz.py\n"
            "--- a/toolz/itertoolz.py\n+++ b/toolz/itertoolz.py\n"
            f"@@ -1 +1,2 @@\n+{ITERTOOLZ_MARK}{' ' + first}")


def _tracked_digests(box: Sandbox) -> dict[str, str]:
    out = box.exec("git ls-files -z | xargs -0 sha256sum", timeout=120).output
    return {line[66:]: line[:64] for line in out.splitlines()}


def _host_digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file()}


@needs_data
def test_toolz_image_builds_with_injected_patch_and_is_reused(client):
    base = _instance("tasks/realfix.jsonl", "pytoolz__toolz-5a7e078").recipe
    plain = ensure_instance_image(client, base, cache_dir=CACHE)
    original = (plain.repo_dir / "toolz" / "itertoolz.py").read_text()
    # A recipe of its own (a distinct injected patch) so this test really builds an image.
    recipe = dataclasses.replace(base, injected_patch=_injected_patch(original))
    tag = f"raydist/instance:{recipe.key()}"
    shutil.rmtree(CACHE / "repos" / recipe.key(), ignore_errors=True)
    try:
        first = ensure_instance_image(client, recipe, cache_dir=CACHE, label="toolz-injected")
        built = client.images.get(tag)
        again = ensure_instance_image(client, recipe, cache_dir=CACHE)
        assert (first.tag, again.tag, again.repo_dir) == (tag, tag, CACHE / "repos" / recipe.key())
        assert client.images.get(tag).id == built.id  # reused, not rebuilt
        assert (first.repo_dir / "toolz" / "itertoolz.py").read_text() == ITERTOOLZ_MARK + original
        with as_provider(client).create(tag, name="toolz-check") as box:
            assert _tracked_digests(box) == _host_digests(first.repo_dir)
            assert box.exec("git status --porcelain", timeout=60).output == ""
            assert box.exec("git log --format=%an:%s", timeout=60).output == "raydist:raydist base state\n"
            assert box.exec("python -c 'import pytest; print(pytest.__version__)'",
                            timeout=60).output == "8.3.4\n"
            assert box.exec("ls /wheels 2>&1 | head -1", timeout=60).output.startswith("ls: cannot access")
    finally:
        client.images.remove(tag, force=True)
        shutil.rmtree(CACHE / "repos" / recipe.key(), ignore_errors=True)


@needs_data
def test_failing_step_names_recipe_step_and_output_and_leaves_no_container(client):
    base = _instance("tasks/realfix.jsonl", "pytoolz__toolz-5a7e078").recipe
    recipe = dataclasses.replace(base, install_repo="echo kaboom >&2; exit 7")
    with pytest.raises(ImageBuildError) as err:
        ensure_instance_image(client, recipe, cache_dir=CACHE, label="toolz-broken")
    assert str(err.value) == (f"building toolz-broken (recipe {recipe.key()}) failed at step "
                              "'install_repo' (exit 7); last lines:\nkaboom")
    assert client.containers.list(all=True, filters={"name": f"raydist-build-{recipe.key()}"}) == []
    assert client.images.list(name=f"raydist/instance:{recipe.key()}") == []


@needs_data
def test_wrong_sdist_hash_is_refused_before_any_container(client):
    base = _instance("tasks/realfix.jsonl", "pytoolz__toolz-5a7e078").recipe
    recipe = dataclasses.replace(base, sdist=dataclasses.replace(base.sdist, sha256="0" * 64))
    with pytest.raises(ImageBuildError, match=r"step 'host sources': no file of toolz on "
                       r"\S+ has sha256 0{64} \(expected the 1.0.0 sdist\)"):
        ensure_instance_image(client, recipe, cache_dir=CACHE)


def test_missing_base_image_names_tag_and_remedy(client):
    with pytest.raises(BaseImageMissing, match=r"base image raydist/base:absent-000 is not in the "
                       r"Docker daemon; build it with `bash launch/setup.sh`"):
        ensure_base_image(client, "raydist/base:absent-000")


def test_base_image_tag_comes_from_the_script_or_the_override(client):
    assert base_image_tag("raydist/base:custom") == "raydist/base:custom"
    assert ensure_base_image(client) == base_image_tag()
    assert base_image_tag().startswith("raydist/base:bookworm-")


@needs_data
def test_flask_image_installs_exact_pins_and_the_repo_offline(client):
    instance = _instance("swebench/offline.jsonl", "pallets__flask-4992")
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=instance.instance_id)
    with as_provider(client).create(image.tag, name="flask-check") as box:
        versions = box.exec("python -c 'import flask, werkzeug, pytest; import importlib.metadata as m;"
                            " print(m.version(\"flask\"), werkzeug.__version__, pytest.__version__, "
                            "flask.__file__)'", timeout=60).output
    assert versions == "2.2.3 2.2.3 7.2.1 /testbed/src/flask/__init__.py\n"
    assert (image.repo_dir / "src" / "flask" / "app.py").is_file()
    assert not list(image.repo_dir.rglob("*.egg-info"))


@needs_data
@pytest.mark.slow
def test_xarray_image_has_compiled_pins_without_network(client):
    instance = _instance("swebench/offline.jsonl", "pydata__xarray-7393")
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=instance.instance_id)
    with as_provider(client).create(image.tag, name="xarray-check") as box:
        versions = box.exec("python -c 'import numpy, pandas, scipy, xarray; print(numpy.__version__, "
                            "pandas.__version__, scipy.__version__, xarray.__file__)'", timeout=120).output
    assert versions == "1.24.0 1.5.2 1.9.3 /testbed/xarray/__init__.py\n"
