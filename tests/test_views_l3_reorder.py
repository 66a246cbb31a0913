"""L3 reordering of files and the L3 level (SchrodingerRepo §III-D)."""

from __future__ import annotations

import hashlib
import random
import textwrap
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from raydist.views import RepoFiles, ViewOptions, build_view, reorder_file, reorder_source
from raydist.views.l3.reorder import file_seed

INDEPENDENT = textwrap.dedent(
    '''\
    """Module docstring."""
    import os


    # alpha comment
    def alpha():
        return 1


    def beta():
        return 2


    class Gamma:
        # first method comment
        def one(self):
            return 1

        def two(self):
            return 2

        def three(self):
            return 3


    def delta():
        return os.sep
    '''
)


def test_same_instance_path_seed_gives_identical_bytes():
    assert reorder_file(INDEPENDENT, "i-1", "m.py", 3) == reorder_file(INDEPENDENT, "i-1", "m.py", 3)


def test_different_seeds_give_different_layouts():
    # 4! top-level x 3! method orders = 144 layouts; ten seeds land on several of them
    outputs = {reorder_file(INDEPENDENT, "i-1", "m.py", seed) for seed in range(10)}
    assert reorder_file(INDEPENDENT, "i-1", "m.py", 0) != reorder_file(INDEPENDENT, "i-1", "m.py", 1)
    assert len(outputs) >= 6


def test_file_seed_is_a_stable_hash():
    digest = hashlib.sha256(b"i-1\x00m.py\x000").digest()
    assert file_seed("i-1", "m.py", 0) == int.from_bytes(digest[:8], "big")
    assert file_seed("i-1", "m.py", 0) != file_seed("i-1", "m.py", 1)
    assert file_seed("i-1", "m.py", 0) != file_seed("i-1", "n.py", 0)


def test_reordering_keeps_lines_comments_and_anchors():
    for seed in range(20):
        out = reorder_source(INDEPENDENT, random.Random(seed))
        compile(out, "m.py", "exec")
        assert Counter(out.splitlines()) == Counter(INDEPENDENT.splitlines())
        lines = out.splitlines()
        assert lines[:2] == ['"""Module docstring."""', "import os"]
        assert lines[lines.index("# alpha comment") + 1] == "def alpha():"
        assert lines[lines.index("    # first method comment") + 1] == "    def one(self):"
        # the class body's first statement follows the class line directly, as before
        assert lines[lines.index("class Gamma:") + 1].strip() in {"# first method comment", "def two(self):",
                                                                  "def three(self):"}


def test_no_alternative_leaves_file_byte_identical():
    source = "def a():\n    pass\n\n\n@a\ndef b():\n    pass\n\r\n"
    assert reorder_source(source, random.Random(0)) == source


def test_crlf_line_endings_survive():
    source = "def a():\r\n    return 1\r\n\r\n\r\ndef b():\r\n    return 2\r\n"
    outs = {reorder_source(source, random.Random(s)) for s in range(8)}
    assert outs == {source, "def b():\r\n    return 2\r\n\r\n\r\ndef a():\r\n    return 1\r\n"}


def make_repo(tmp_path: Path, files: dict[str, bytes]) -> RepoFiles:
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    return RepoFiles(tmp_path)


PATCH = """\
diff --git a/pkg/m.py b/pkg/m.py
--- a/pkg/m.py
+++ b/pkg/m.py
@@ -1,2 +1,2 @@
 \"\"\"Module docstring.\"\"\"
-import os
+import os  # patched
"""


def instance(patch: str = PATCH) -> SimpleNamespace:
    return SimpleNamespace(instance_id="demo-1", problem_statement="Fix it.", patch=patch, test_patch="")


def test_l3_level_reorders_only_patched_python_files(tmp_path):
    repo = make_repo(tmp_path, {"pkg/m.py": INDEPENDENT.encode(), "pkg/other.py": INDEPENDENT.encode()})
    view = build_view(instance(), repo, "L3", 5)
    assert list(view.files) == ["pkg/m.py"]
    assert view.files["pkg/m.py"] == reorder_file(INDEPENDENT, "demo-1", "pkg/m.py", 5)
    assert view.meta == {"l3_files": ["pkg/m.py"], "l3_reordered": ["pkg/m.py"], "l3_skipped": {}, "l3_pinned": {}}
    assert view.level == "L3" and view.problem_statement == "Fix it."


def test_l3_all_files_option(tmp_path):
    repo = make_repo(tmp_path, {"pkg/m.py": INDEPENDENT.encode(), "pkg/other.py": INDEPENDENT.encode()})
    view = build_view(instance(), repo, "L3", 5, ViewOptions(l3_files="all"))
    assert sorted(view.files) == ["pkg/m.py", "pkg/other.py"]


def test_unparsable_and_non_utf8_files_are_skipped_with_reason(tmp_path):
    repo = make_repo(tmp_path, {"bad.py": b"def f(:\n    pass\n", "latin.py": b"x = '\xe9'\n"})
    view = build_view(instance(), repo, "L3", 0, ViewOptions(l3_files="all"))
    assert dict(view.files) == {}
    assert sorted(view.meta["l3_skipped"]) == ["bad.py", "latin.py"]
    assert view.meta["l3_skipped"]["bad.py"].startswith("ParserSyntaxError")
    assert "not UTF-8" in view.meta["l3_skipped"]["latin.py"]


def test_render_file_presents_patched_original_like_the_view(tmp_path):
    repo = make_repo(tmp_path, {"pkg/m.py": INDEPENDENT.encode()})
    view = build_view(instance(), repo, "L3", 2)
    patched = INDEPENDENT.replace("import os\n", "import os  # patched\n")
    assert view.render_file("pkg/m.py", patched) == reorder_file(patched, "demo-1", "pkg/m.py", 2)
    assert view.render_file("pkg/m.py", INDEPENDENT) == view.files["pkg/m.py"]
    assert view.render_file("pkg/untouched.py", patched) == patched
