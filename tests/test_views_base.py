"""View construction, level registry and RepoFiles."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from raydist.views import IDENTITY, RepoFiles, Translator, ViewOptions, build_view, known_levels

SOURCE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
PATCH = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def a():\n-    return 1\n+    return 3\n"


def instance() -> SimpleNamespace:
    return SimpleNamespace(instance_id="demo-2", problem_statement="Make a return 3.", patch=PATCH, test_patch="")


@pytest.fixture
def repo(tmp_path) -> RepoFiles:
    (tmp_path / "m.py").write_text(SOURCE)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "z.py").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hook.py").write_text("")
    (tmp_path / "notes.txt").write_text("n")
    return RepoFiles(tmp_path)


def test_l0_is_the_canonical_task(repo):
    view = build_view(instance(), repo, "L0", 0)
    assert (view.instance_id, view.level, view.seed) == ("demo-2", "L0", 0)
    assert view.problem_statement == "Make a return 3."
    assert dict(view.files) == {} and view.meta == {}
    assert view.translator is IDENTITY
    assert view.render_file("m.py", SOURCE) == SOURCE


def test_identity_translator_satisfies_the_protocol():
    assert isinstance(IDENTITY, Translator)
    assert IDENTITY.to_original("grep -n a m.py") == "grep -n a m.py"
    assert IDENTITY.to_view("m.py:1:def a():") == "m.py:1:def a():"


def test_levels_compose_left_to_right(repo):
    l3 = build_view(instance(), repo, "L3", 4)
    both = build_view(instance(), repo, "L0+L3", 4)
    assert both.level == "L0+L3"
    assert dict(both.files) == dict(l3.files)
    assert {"L0", "L3"} <= set(known_levels())


def test_files_hold_only_content_that_differs(repo):
    # Only two orders exist; over seeds the view is either absent or the swapped file.
    seen = {tuple(build_view(instance(), repo, "L3", s).files.items()) for s in range(6)}
    assert seen == {(), (("m.py", "def b():\n    return 2\n\n\ndef a():\n    return 1\n"),)}


def test_unknown_level_names_it_and_the_known_ones(repo):
    with pytest.raises(ValueError, match=r"unknown level 'L9' in 'L0\+L9'; known levels: .*L0, .*L3"):
        build_view(instance(), repo, "L0+L9", 0)


def test_repeated_level_is_rejected(repo):
    with pytest.raises(ValueError, match="repeats L3"):
        build_view(instance(), repo, "L3+L3", 0)


def test_non_integer_seed_is_rejected(repo):
    with pytest.raises(TypeError, match="seed must be an int, got '1'"):
        build_view(instance(), repo, "L0", "1")


def test_instance_without_task_fields_is_rejected(repo):
    with pytest.raises(TypeError, match="lacks patch, test_patch"):
        build_view(SimpleNamespace(instance_id="x", problem_statement=""), repo, "L0", 0)


def test_bad_option_is_rejected():
    with pytest.raises(ValueError, match="l3_files='some'; use 'patched' or 'all'"):
        ViewOptions(l3_files="some")


@pytest.mark.parametrize("name", ["request_timeout_base_s", "request_min_tokens_per_s"])
def test_a_timing_option_not_above_zero_is_rejected(name):
    with pytest.raises(ValueError, match=f"ViewOptions.{name}=0; give a number of seconds or tokens above 0"):
        ViewOptions(**{name: 0})


def test_repo_files_reads_exact_text_and_lists_python_files(repo):
    assert repo.read("m.py") == SOURCE
    assert repo.read("missing.py") is None
    assert repo.python_files() == ["m.py", "sub/z.py"]


def test_repo_files_refuses_paths_outside_the_root(repo):
    with pytest.raises(ValueError, match=r"path '\.\./etc/passwd' must be relative"):
        repo.read("../etc/passwd")


def test_repo_files_needs_a_directory(tmp_path):
    with pytest.raises(ValueError, match="is not a directory"):
        RepoFiles(tmp_path / "nope")
