"""Patches as hostile input: a diff cut after its last line (mini-swe-agent#305) means the same
diff, on every path that applies one (in memory for views, ``git apply`` on the host)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from raydist.grading.apply import PatchError, apply_on_host
from raydist.views.recover import apply_patch_to_texts, patched_paths

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
