"""The built-in set: shape, provenance, and that every gold patch exactly undoes its defect."""

import shutil
import subprocess
from pathlib import Path

import pytest

from raydist.grading.apply import apply_on_host
from raydist.sandbox.sources import fetch_sdist, unpack_sdist
from raydist.tasks import load_instances

BUILTIN = load_instances("builtin")
TEST_CMD_PREFIX = 'python -m pytest -rA -p no:cacheprovider -o addopts="" '


@pytest.fixture(scope="session")
def sdist_cache(tmp_path_factory):
    """The real sdists of the built-in set, downloaded from PyPI once per session (sha256 checked)."""
    cache = tmp_path_factory.mktemp("sdists")
    try:
        for recipe in {i.recipe.sdist: i.recipe for i in BUILTIN}.values():
            fetch_sdist(recipe.sdist, cache)
    except RuntimeError as error:
        pytest.skip(f"PyPI unreachable, cannot fetch the built-in sdists: {error}")
    return cache


def test_builtin_has_at_least_six_instances_on_three_libraries():
    assert len(BUILTIN) == 6
    assert sorted({i.recipe.sdist.name for i in BUILTIN}) == ["inflection", "six", "wcwidth"]


def test_builtin_instances_are_injected_sdist_instances_with_pinned_pytest():
    for instance in BUILTIN:
        assert instance.extra["injected"] is True
        assert instance.extra["license"] == "MIT"
        assert instance.recipe.install == ("pytest==8.3.4",)
        assert instance.recipe.install_repo is None
        assert instance.recipe.injected_patch.startswith("diff --git a/")
        assert instance.base_commit == instance.version == instance.recipe.sdist.version


def test_builtin_test_commands_run_one_test_file_touched_by_test_patch():
    for instance in BUILTIN:
        assert instance.test_cmd.startswith(TEST_CMD_PREFIX)
        test_file = instance.test_cmd.removeprefix(TEST_CMD_PREFIX)
        assert instance.test_patch.startswith(f"diff --git a/{test_file} b/{test_file}\n")
        assert all(t.startswith(f"{test_file}::") for t in instance.FAIL_TO_PASS + instance.PASS_TO_PASS)


def test_builtin_fail_to_pass_is_one_to_five_new_tests_disjoint_from_pass_to_pass():
    for instance in BUILTIN:
        assert 1 <= len(instance.FAIL_TO_PASS) <= 5
        assert not set(instance.FAIL_TO_PASS) & set(instance.PASS_TO_PASS)
        assert len(instance.PASS_TO_PASS) >= 17
        for test_id in instance.FAIL_TO_PASS:
            assert f"+def {test_id.rsplit('::', 1)[1]}(" in instance.test_patch


def test_builtin_counts_are_the_measured_ones():
    counts = {i.instance_id: (len(i.FAIL_TO_PASS), len(i.PASS_TO_PASS)) for i in BUILTIN}
    assert counts == {
        "jpvanhal__inflection-humanize-id-anchor": (1, 449),
        "jpvanhal__inflection-underscore-dashes": (1, 449),
        "jquast__wcwidth-table-upper-bound": (1, 17),
        "jquast__wcwidth-del-control": (1, 17),
        "benjaminp__six-ensure-text-errors": (1, 184),
        "jquast__wcwidth-wcswidth-zero-n": (1, 17),
    }


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("instance", BUILTIN, ids=lambda i: i.instance_id)
def test_gold_patch_exactly_reverses_the_injected_defect(instance, sdist_cache, tmp_path):
    archive = fetch_sdist(instance.recipe.sdist, sdist_cache)
    original = _tree_bytes(unpack_sdist(archive, tmp_path / "original"))
    root = unpack_sdist(archive, tmp_path / "work")
    apply_on_host(root, instance.recipe.injected_patch, label="injected_patch")
    assert _tree_bytes(root) != original
    apply_on_host(root, instance.patch, label="patch")
    assert _tree_bytes(root) == original


@pytest.mark.parametrize("instance", BUILTIN, ids=lambda i: i.instance_id)
def test_test_patch_applies_on_the_defective_base(instance, sdist_cache, tmp_path):
    root = unpack_sdist(fetch_sdist(instance.recipe.sdist, sdist_cache), tmp_path)
    apply_on_host(root, instance.recipe.injected_patch, label="injected_patch")
    check = subprocess.run(["git", "apply", "--check", "-"], cwd=root, input=instance.test_patch, text=True,
                           capture_output=True, check=False)
    assert check.returncode == 0, check.stderr


def test_apply_patch_names_the_patch_that_does_not_apply(tmp_path):
    (tmp_path / "f.py").write_text("x = 1\n")
    bad = "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-x = 2\n+x = 3\n"
    with pytest.raises(RuntimeError, match=r"^gold patch does not apply at "):
        apply_on_host(tmp_path, bad, label="gold patch")




def test_host_measurement_reproduces_the_stored_lists(sdist_cache, tmp_path_factory):
    from raydist.tasks.measure import host_runner, measure

    instance = next(i for i in BUILTIN if i.instance_id == "jquast__wcwidth-del-control")
    work = tmp_path_factory.mktemp("measure")
    shutil.copytree(sdist_cache, work / "sdists")
    try:
        measured = measure(instance, host_runner(work), repeat=1)
    except subprocess.CalledProcessError as error:
        pytest.skip(f"cannot build the scratch venv (PyPI unreachable?): {error}")
    assert measured == (instance.FAIL_TO_PASS, instance.PASS_TO_PASS)
