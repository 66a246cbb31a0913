"""L3 on real code: a library's own test suite passes on its reordered view.

Uses the toolz 1.0.0 source release from PyPI (its sdist ships its tests) and the
installed ``hypothesis`` package as a large, decorator-heavy robustness corpus.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from raydist.views import RepoFiles, ViewOptions, build_view, reorder_file

SITE = Path(sysconfig.get_paths()["purelib"])


def is_test_file(path: str) -> bool:
    return "/tests/" in f"/{path}" or Path(path).name.startswith("test_")


def toolz_view_copy(src: Path, dst: Path, seed: int) -> list[str]:
    shutil.copytree(src, dst)
    inst = SimpleNamespace(instance_id="toolz-1.0.0", problem_statement="", patch="", test_patch="")
    view = build_view(inst, RepoFiles(src), "L3", seed, ViewOptions(l3_files="all"))
    written = [p for p in view.files if not is_test_file(p)]
    for path in written:
        (dst / path).write_bytes(view.files[path].encode())
    assert view.meta["l3_skipped"] == {}
    return written


def run_suite(root: Path) -> str:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "toolz/tests"]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600, check=False)
    return done.stdout.strip().splitlines()[-1]


def passed_count(summary: str) -> int:
    match = re.fullmatch(r"(\d+) passed in [\d.]+s", summary)
    assert match, f"unexpected pytest summary: {summary}"
    return int(match.group(1))


def test_toolz_suite_passes_on_reordered_views_as_on_the_original(toolz_src, tmp_path):
    baseline = passed_count(run_suite(toolz_src))
    assert baseline == 180
    for seed in (0, 1, 2):
        dst = tmp_path / f"seed{seed}"
        written = toolz_view_copy(toolz_src, dst, seed)
        assert "toolz/itertoolz.py" in written and "toolz/functoolz.py" in written
        assert passed_count(run_suite(dst)) == baseline


def test_real_file_is_reordered_and_still_compiles(toolz_src):
    source = (toolz_src / "toolz" / "itertoolz.py").read_text()
    out = reorder_file(source, "toolz-1.0.0", "toolz/itertoolz.py", 0)
    assert out != source
    assert Counter(out.splitlines()) == Counter(source.splitlines())
    compile(out, "toolz/itertoolz.py", "exec")


def test_every_file_of_a_big_package_still_compiles(tmp_path):
    package = SITE / "hypothesis"
    repo = RepoFiles(package)
    changed = 0
    for path in repo.python_files():
        source = repo.read(path)
        out = reorder_file(source, "hypothesis", path, 0)
        compile(out, path, "exec")
        changed += out != source
    assert len(repo.python_files()) > 100 and changed > 50


def test_reordered_big_package_imports_and_runs(tmp_path):
    package = SITE / "hypothesis"
    copy = tmp_path / "hypothesis"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    repo = RepoFiles(package)
    for path in repo.python_files():
        (copy / path).write_bytes(reorder_file(repo.read(path), "hypothesis", path, 1).encode())
    probe = (
        "import hypothesis, sys\n"
        "from hypothesis import given, settings, strategies as st\n"
        f"assert hypothesis.__file__.startswith({str(copy)!r}), hypothesis.__file__\n"
        "@settings(max_examples=50, database=None)\n"
        "@given(st.lists(st.integers()))\n"
        "def t(xs):\n"
        "    assert sorted(sorted(xs)) == sorted(xs)\n"
        "t()\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}, check=False,
    )
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


REALFIX = Path(__file__).resolve().parents[2] / "shared" / "data" / "tasks" / "realfix.jsonl"


def realfix_toolz() -> SimpleNamespace:
    if not REALFIX.exists():
        pytest.skip(f"{REALFIX} is absent (reference data)")
    import json

    for line in REALFIX.read_text().splitlines():
        record = json.loads(line)
        if record["instance_id"] == "pytoolz__toolz-5a7e078":
            return SimpleNamespace(**record)
    pytest.skip("pytoolz__toolz-5a7e078 is not in realfix.jsonl")


def git_apply(root: Path, patch: str) -> None:
    subprocess.run(["git", "apply", "-"], cwd=root, input=patch, text=True, check=True)


def run_fail_to_pass(root: Path, tests: list[str]) -> int:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600, check=False).returncode


@pytest.mark.shared_data
def test_oracle_edit_in_l3_view_recovers_a_patch_that_resolves_the_real_task(toolz_src, tmp_path):
    from raydist.views import apply_patch_to_texts, patched_paths, recover_patch

    task = realfix_toolz()
    repo = RepoFiles(toolz_src)
    view = build_view(task, repo, "L3", 0)
    assert list(view.files) == ["toolz/itertoolz.py"]
    original = {p: repo.read(p) for p in patched_paths(task.patch)}
    gold = apply_patch_to_texts(original, task.patch)
    # What the oracle writes through the agent channel: the fix, presented in the view.
    final = {p: view.render_file(p, gold[p]) for p in original}
    assert final["toolz/itertoolz.py"] != gold["toolz/itertoolz.py"]
    recovered = recover_patch(original, final)

    graded = tmp_path / "graded"
    shutil.copytree(toolz_src, graded)
    git_apply(graded, task.test_patch)
    assert run_fail_to_pass(graded, list(task.FAIL_TO_PASS)) == 1
    git_apply(graded, recovered)
    assert run_fail_to_pass(graded, list(task.FAIL_TO_PASS)) == 0
    assert passed_count(run_suite(graded)) == 180
