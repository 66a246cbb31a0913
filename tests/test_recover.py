"""Patch recovery (SchrodingerRepo §III-G) and exact in-memory patch application."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raydist.views import PatchApplyError, apply_patch_to_texts, patched_paths, recover_patch

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

ORIGINAL = {
    "pkg/mod.py": "def f():\n    return 1\n\n\ndef g():\n    return 2\n",
    "pkg/no_eol.py": "x = 1\ny = 2",
    "pkg/crlf.py": "a = 1\r\nb = 2\r\n",
    "pkg/formfeed.py": "a = 1\n\x0c\nb = 2\n",
    "pkg/gone.py": "print('bye')\n",
    "pkg/empty_gone.txt": "",
    "README": "same\n",
}
FINAL = {
    "pkg/mod.py": "def f():\n    return 10\n\n\ndef g():\n    return 2\n",
    "pkg/no_eol.py": "x = 1\ny = 3",
    "pkg/crlf.py": "a = 1\r\nb = 3\r\n",
    "pkg/formfeed.py": "a = 1\n\x0c\nb = 3\n",
    "pkg/new.py": "NEW = True",
    "pkg/empty_new.txt": "",
    "README": "same\n",
}


def test_modified_file_diff_is_git_style():
    assert recover_patch({"m.py": "a\nb\n"}, {"m.py": "a\nc\n"}) == (
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    )


def test_added_and_deleted_files_use_dev_null():
    assert recover_patch({}, {"n.py": "x"}) == (
        "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n"
        "@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
    )
    assert recover_patch({"d.py": "x\n"}, {"d.py": None}) == (
        "diff --git a/d.py b/d.py\ndeleted file mode 100644\n--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )


def test_unchanged_files_give_an_empty_patch():
    assert recover_patch(ORIGINAL, dict(ORIGINAL)) == ""


def test_files_are_sorted_and_only_changed_ones_listed():
    assert patched_paths(recover_patch(ORIGINAL, FINAL)) == [
        "pkg/crlf.py",
        "pkg/empty_gone.txt",
        "pkg/empty_new.txt",
        "pkg/formfeed.py",
        "pkg/gone.py",
        "pkg/mod.py",
        "pkg/new.py",
        "pkg/no_eol.py",
    ]


def write_tree(root: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        if text is not None:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(text.encode())


def read_tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes().decode()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def test_recovered_patch_round_trips_through_git_apply(tmp_path):
    write_tree(tmp_path, ORIGINAL)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    patch = recover_patch(ORIGINAL, FINAL)
    (tmp_path / "fix.patch").write_text(patch)
    subprocess.run(["git", "apply", "--check", "fix.patch"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True)
    (tmp_path / "fix.patch").unlink()
    assert read_tree(tmp_path) == {k: v for k, v in FINAL.items() if v is not None}


def test_apply_patch_to_texts_inverts_recover_patch():
    result = apply_patch_to_texts(ORIGINAL, recover_patch(ORIGINAL, FINAL))
    assert {k: v for k, v in result.items() if v is not None} == FINAL
    assert result["pkg/gone.py"] is None and result["pkg/empty_gone.txt"] is None


line = st.text(alphabet="ab \t\r\x0c", max_size=4)
text = st.lists(line, max_size=8).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), text), st.one_of(st.none(), text))
def test_round_trip_property(old, new):
    original, final = {"f.txt": old}, {"f.txt": new}
    assert apply_patch_to_texts(original, recover_patch(original, final)) == final


def test_mismatched_context_names_file_and_hunk():
    patch = recover_patch({"m.py": "a\nb\nc\n"}, {"m.py": "a\nB\nc\n"})
    with pytest.raises(PatchApplyError, match=r"m\.py: hunk 1 \(@@ -1,3 \+1,3 @@\) matches nowhere"):
        apply_patch_to_texts({"m.py": "a\nX\nc\n"}, patch)


def test_a_hunk_whose_lines_moved_applies_at_the_nearest_exact_match_like_git_apply():
    body = "".join(f"line{i}\n" for i in range(20))
    patch = recover_patch({"m.py": body}, {"m.py": body.replace("line10\n", "LINE10\n")})
    moved = "new0\nnew1\nnew2\n" + body  # the file gained three lines above the hunk
    assert apply_patch_to_texts({"m.py": moved}, patch) == {"m.py": moved.replace("line10\n", "LINE10\n")}
    twice = body + body  # two exact matches: the one nearest the stated line wins
    assert apply_patch_to_texts({"m.py": twice}, patch) == {"m.py": body.replace("line10\n", "LINE10\n") + body}


def test_missing_and_existing_files_are_errors():
    with pytest.raises(PatchApplyError, match="m.py: the patch modifies it but it does not exist"):
        apply_patch_to_texts({}, recover_patch({"m.py": "a\n"}, {"m.py": "b\n"}))
    with pytest.raises(PatchApplyError, match="n.py: the patch adds it but it already exists"):
        apply_patch_to_texts({"n.py": "x\n"}, recover_patch({}, {"n.py": "y\n"}))


def test_paths_outside_the_repository_are_rejected():
    with pytest.raises(ValueError, match="path '../x' must be relative and stay inside the repository"):
        recover_patch({}, {"../x": "x"})


ODD_NAMES = ["sp ace.py", 'q"uote.py', "new\nline.py", "\u00e9t\u00e9.py", "tab\there.py", "back\\slash.py"]


def test_odd_file_names_are_quoted_as_git_does_and_round_trip_through_git_and_patch(tmp_path):
    original = {name: "a\n" for name in ODD_NAMES}
    final = {name: "b\n" for name in ODD_NAMES} | {"n ew \u00fc.py": "x\n"}
    patch = recover_patch(original, final)
    for tool, argv in [("git", ["git", "apply", "fix.patch"]),
                       ("patch", ["patch", "--batch", "-p1", "-i", "fix.patch"])]:
        root = tmp_path / tool
        root.mkdir()
        write_tree(root, original)
        (root / "fix.patch").write_text(patch)
        subprocess.run(argv, cwd=root, check=True, capture_output=True)
        (root / "fix.patch").unlink()
        assert read_tree(root) == final, tool
    assert 'diff --git "a/new\\nline.py" "b/new\\nline.py"\n' in patch
    assert "--- a/sp ace.py\t\n" in patch and '+++ "b/\\303\\251t\\303\\251.py"\n' in patch


@pytest.mark.shared_data
def test_real_swebench_patches_name_their_files():
    source = SHARED / "swebench" / "swebench_lite.jsonl"
    if not source.exists():
        pytest.skip(f"{source} is absent (reference data)")
    first = json.loads(source.read_text().splitlines()[0])
    assert first["instance_id"] == "astropy__astropy-12907"
    assert patched_paths(first["patch"]) == ["astropy/modeling/separable.py"]
    assert patched_paths(first["test_patch"]) == ["astropy/modeling/tests/test_separable.py"]


# -- the submission is the final tree against the view's initial tree, whatever .git became --

WCWIDTH = "jquast__wcwidth-del-control"
EDIT = "sed -i 's/or 0x07F < ucs < 0x0A0/or 0x07F <= ucs < 0x0A0/' wcwidth/wcwidth.py"
ODD = {"wcwidth/sp ace.py": "a = 1\n", 'wcwidth/q"uote.py': "b = 2\n", "wcwidth/new\nline.py": "c = 3\n",
       "wcwidth/\u00e9t\u00e9.py": "d = 4\n"}
SCENARIOS = {
    "plain edit": ([EDIT], {}, {}),
    "git commit": ([EDIT, "git add -A && git -c user.name=a -c user.email=a@b commit -qm fix"], {}, {}),
    "git checkout -b": (["git checkout -q -b fix", EDIT, "git -c user.name=a -c user.email=a@b commit -qam fix"],
                        {}, {}),
    "rm -rf .git": ([EDIT, "rm -rf .git"], {}, {}),
    "symlink": ([EDIT, "ln -s wcwidth.py wcwidth/link.py"], {}, {"wcwidth/link.py": "symlink"}),
    "binary file": ([EDIT, "printf '\\000\\377\\001' > wcwidth/blob.bin"], {}, {"wcwidth/blob.bin": "binary"}),
    "odd file names": ([EDIT, *(f"printf %s {shlex.quote(t)} > {shlex.quote(p)}" for p, t in ODD.items())], ODD, {}),
    "git stash": ([EDIT, "git stash -q"], None, {}),
}


@pytest.fixture(scope="module")
def wcwidth_image(client):
    from raydist.sandbox import ensure_instance_image
    from raydist.tasks import load_instances

    cache = Path(os.environ.get("RAYDIST_CACHE_DIR", Path.home() / ".cache" / "raydist"))
    instance = load_instances("builtin", ids=[WCWIDTH])[0]
    return instance, ensure_instance_image(client, instance.recipe, cache_dir=cache, label=WCWIDTH)


@pytest.mark.docker
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_what_the_agent_does_to_git_does_not_change_the_recovered_patch(client, wcwidth_image, scenario):
    from raydist.cluster.workspace import install_view, read_changes
    from raydist.sandbox import as_provider
    from raydist.views import RepoFiles, ViewOptions, build_view

    instance, image = wcwidth_image
    repo = RepoFiles(image.repo_dir)
    view = build_view(instance, repo, "L0", 0, ViewOptions(), None)
    commands, added, dropped = SCENARIOS[scenario]
    with as_provider(client).create(image.tag, name="recover") as box:
        initial = install_view(box, view)
        for command in commands:
            assert box.exec(command, timeout=60).returncode == 0, command
        changes = read_changes(box, initial, repo)
    path = "wcwidth/wcwidth.py"
    fixed = repo.read(path).replace("or 0x07F < ucs < 0x0A0", "or 0x07F <= ucs < 0x0A0")
    expected = "" if added is None else recover_patch({path: repo.read(path)}, {path: fixed, **added})
    assert recover_patch({p: repo.read(p) for p in changes.final}, changes.final) == expected
    assert changes.dropped == dropped
