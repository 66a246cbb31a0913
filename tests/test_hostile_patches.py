"""Patches and trees as hostile input: a diff cut after its last line (mini-swe-agent#305) means
the same diff, on every path that applies one (in memory for views, ``git apply`` on the host);
a repository whose files end their lines with CRLF (SWE-bench#372) keeps its bytes through L2,
L3 and recovery, and the oracle's recovered patch resolves it."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from raydist.grading.apply import PatchError, apply_on_host
from raydist.sandbox.sources import fetch_sdist, unpack_sdist
from raydist.tasks import Instance, load_instances
from raydist.views import RepoFiles, build_view
from raydist.views.l2.namespace import namespace_level  # noqa: F401  (registers L2)
from raydist.views.l3.reorder import reorder_file  # noqa: F401  (registers L3)
from raydist.views.recover import apply_patch_to_texts, patched_paths, recover_patch

ORIGINAL = {"calc.py": "def add(a, b):\n    return a - b\n"}
PATCH = """diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
# The same change, the new last line left without a newline of its own (git's marker says so).
NO_EOL_PATCH = PATCH + "\\ No newline at end of file\n"
FIXED = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize(("patch", "expected"), [(PATCH, FIXED), (NO_EOL_PATCH, FIXED[:-1])],
                         ids=["plain", "no-newline-marker"])
def test_a_patch_without_its_final_newline_applies_in_memory_like_the_whole_one(patch, expected):
    assert apply_patch_to_texts(ORIGINAL, patch) == {"calc.py": expected}
    assert apply_patch_to_texts(ORIGINAL, patch.rstrip("\n")) == {"calc.py": expected}
    assert patched_paths(patch.rstrip("\n")) == ["calc.py"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree holding ``ORIGINAL``, committed."""
    (tmp_path / "calc.py").write_bytes(ORIGINAL["calc.py"].encode())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=tmp_path, check=True)
    return tmp_path


@pytest.mark.parametrize(("patch", "expected"), [(PATCH, FIXED), (NO_EOL_PATCH, FIXED[:-1])],
                         ids=["plain", "no-newline-marker"])
def test_a_patch_without_its_final_newline_applies_and_reverts_on_the_host(repo, patch, expected):
    apply_on_host(repo, patch.rstrip("\n"), label="the gold patch")
    assert (repo / "calc.py").read_bytes() == expected.encode()
    apply_on_host(repo, patch.rstrip("\n"), label="the gold patch", reverse=True)
    assert (repo / "calc.py").read_bytes() == ORIGINAL["calc.py"].encode()


def test_a_patch_cut_inside_a_hunk_is_still_refused_on_the_host(repo):
    cut = PATCH[: PATCH.index("+    return")]  # the added line is missing: the hunk is short
    with pytest.raises(PatchError, match=r"^the gold patch does not apply at .*corrupt patch at line 7"):
        apply_on_host(repo, cut, label="the gold patch")


# --- a repository with CRLF line endings (SWE-bench#372) ------------------------------------

INFLECTION = next(i for i in load_instances("builtin") if i.instance_id == "jpvanhal__inflection-humanize-id-anchor")


def crlf_patch(patch: str) -> str:
    """``patch`` for the same change to a tree whose lines end with CRLF: every body line
    (context, removed, added) ends with ``\\r\\n``, the headers keep ``\\n`` as git writes them."""
    lines = patch.split("\n")[:-1]
    body = [line[:1] in (" ", "+", "-") and not line.startswith(("--- ", "+++ ")) for line in lines]
    return "".join(line + ("\r\n" if is_body else "\n") for line, is_body in zip(lines, body, strict=True))


def crlf_instance(instance: Instance) -> Instance:
    return dataclasses.replace(instance, patch=crlf_patch(instance.patch), test_patch=crlf_patch(instance.test_patch))


def to_crlf(root: Path) -> None:
    """Every Python file under ``root`` rewritten with CRLF line endings."""
    for path in root.rglob("*.py"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))


def crlf_only(data: bytes) -> bool:
    return data.count(b"\n") == data.count(b"\r\n") > 0


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> tuple[Path, Path]:
    """``(lf, crlf)``: inflection's tree as the built-in instance has it, and the same with CRLF."""
    try:
        archive = fetch_sdist(INFLECTION.recipe.sdist, tmp_path_factory.mktemp("sdists"))
    except RuntimeError as error:
        pytest.skip(f"PyPI unreachable, cannot fetch the inflection sdist: {error}")
    lf = unpack_sdist(archive, tmp_path_factory.mktemp("lf"))
    apply_on_host(lf, INFLECTION.recipe.injected_patch, label="injected_patch")
    crlf = tmp_path_factory.mktemp("crlf") / "tree"
    shutil.copytree(lf, crlf)
    to_crlf(crlf)
    return lf, crlf


@pytest.mark.parametrize("level", ["L2", "L3", "L2+L3"])
def test_a_crlf_view_is_the_lf_view_with_crlf_and_translates_back_byte_for_byte(trees, level):
    lf, crlf = trees
    lf_view = build_view(INFLECTION, RepoFiles(lf), level, 0)
    view = build_view(crlf_instance(INFLECTION), RepoFiles(crlf), level, 0)
    assert {p: t.replace("\n", "\r\n") for p, t in lf_view.files.items()} == view.files
    repo = RepoFiles(crlf)
    for path in repo.python_files():
        text = repo.read(path)
        assert view.translator.to_original(view.translator.to_view(text)) == text, path
        assert crlf_only(view.translator.to_view(text).encode()), path


@pytest.mark.parametrize("level", ["L2", "L3", "L2+L3"])
def test_the_oracle_through_a_crlf_view_recovers_a_patch_that_keeps_crlf_and_resolves(trees, level, tmp_path):
    """The oracle's path (``raydist.agents.scripted.oracle``) on the host: the gold patch applied
    in original coordinates, rendered as the view shows it, translated back, recovered, then
    applied with ``git apply`` to the original CRLF tree with the test patch; its
    FAIL_TO_PASS test passes."""
    _, crlf = trees
    instance = crlf_instance(INFLECTION)
    view = build_view(instance, RepoFiles(crlf), level, 0)
    originals = {p: RepoFiles(crlf).read(p) for p in patched_paths(instance.patch)}
    gold = apply_patch_to_texts(originals, instance.patch)
    final = {p: None if t is None else view.translator.to_original(view.render_file(p, t)) for p, t in gold.items()}
    work = tmp_path / "work"
    shutil.copytree(crlf, work)
    untouched = (work / "setup.py").read_bytes()
    apply_on_host(work, recover_patch(originals, final), label="the recovered patch")
    apply_on_host(work, instance.test_patch, label="the test patch")
    assert (work / "setup.py").read_bytes() == untouched
    assert all(crlf_only((work / p).read_bytes()) for p in [*originals, "test_inflection.py"])
    if "L3" not in level:  # no reordering: the recovered patch is the gold patch's change
        assert (work / "inflection/__init__.py").read_bytes() == gold["inflection/__init__.py"].encode()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                          *INFLECTION.FAIL_TO_PASS], cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert run.stdout.strip().splitlines()[-1].startswith(f"{len(INFLECTION.FAIL_TO_PASS)} passed in ")
