"""``raydist view INSTANCE --level L --seed S --out DIR``: one built-in instance's view written
out as the agent sees it at L2, L3, L4 and ``full``, checked against the view the unit builds,
and bad input refused by name. Real Docker (the instance's image, L4's test gate)."""

from __future__ import annotations

import json
import re

import pytest

from raydist.cli import main as raydist_main
from raydist.driver.view_command import _settings_and_instance, build_offline_view
from raydist.views import RepoFiles
from raydist.views.export import view_diff, visible_files, write_view

pytestmark = [pytest.mark.docker]

INSTANCE = "jquast__wcwidth-del-control"
PATCHED = "wcwidth/wcwidth.py"


@pytest.fixture(scope="module")
def views(client, tmp_path_factory):
    """The view folders ``raydist view`` wrote: ``{(level, seed): folder}``, one command each."""
    root = tmp_path_factory.mktemp("views")
    out = {}
    for level, seed, extra in (("L2", 0, ["--with-mapping"]), ("L2", 1, []), ("L3", 1, []), ("L4", 0, []),
                               ("full", 0, ["--with-mapping"])):
        folder = root / f"{level}-{seed}"
        assert raydist_main(["view", INSTANCE, "--level", level, "--seed", str(seed), "--out", str(folder),
                             *extra]) == 0
        out[(level, seed)] = folder
    return out


def _record(folder) -> dict:
    return json.loads((folder / "view.json").read_text())


def test_l2_writes_every_file_in_view_names_and_the_mapping_for_a_reviewer(views):
    folder = views[("L2", 0)]
    record = _record(folder)
    mapping = record["mapping"]
    assert (record["level"], record["seed"], record["statement_source"], record["files_changed"]) == (
        "L2", 0, "canonical", [])
    assert record["l2_names"] == len(mapping) > 0
    package = mapping["wcwidth"]
    # The package directory is renamed, the original path is gone, and its module reads in view names.
    assert (folder / "repo" / package / f"{package}.py").is_file() and not (folder / "repo" / "wcwidth").exists()
    module = (folder / "repo" / package / f"{package}.py").read_text()
    assert f"def {mapping['wcswidth']}(" in module and not re.search(r"\bdef wcswidth\(", module)
    statement = (folder / "problem_statement.md").read_text()
    assert "wcwidth" not in statement and f"{package}(" in statement
    # Every original file has exactly one shown counterpart (nothing dropped, nothing extra besides .git).
    cfg, instance = _settings_and_instance(INSTANCE, "L2", 0, str(folder.parent / "unused"), [])
    view, repo = build_offline_view(cfg, instance, "L2", 0)
    shown = sorted(p.relative_to(folder / "repo").as_posix() for p in (folder / "repo").rglob("*") if p.is_file())
    assert shown == sorted(path for _, path, _ in visible_files(view, repo))


def test_the_same_seed_writes_the_same_bytes_and_another_seed_other_names(views, tmp_path):
    again = tmp_path / "again"
    assert raydist_main(["view", INSTANCE, "--level", "L2", "--seed", "0", "--out", str(again),
                         "--with-mapping"]) == 0
    first = views[("L2", 0)]
    files = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again).as_posix() for p in again.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (again / f).read_bytes() for f in files)
    other = _record(views[("L2", 1)])
    assert "mapping" not in other  # only with --with-mapping
    assert (views[("L2", 1)] / "problem_statement.md").read_text() != (first / "problem_statement.md").read_text()


def test_l3_reorders_the_patched_file_into_a_permutation_of_its_definitions(views):
    folder = views[("L3", 1)]
    record = _record(folder)
    assert record["l3_reordered"] == [PATCHED] == record["files_changed"]
    cfg, instance = _settings_and_instance(INSTANCE, "L3", 1, str(folder.parent / "unused"), [])
    _, repo = build_offline_view(cfg, instance, "L0", 1)
    original, shown = repo.read(PATCHED), (folder / "repo" / PATCHED).read_text()
    assert shown != original
    assert sorted(shown.splitlines()) == sorted(original.splitlines())  # same lines, other order
    assert _defs(shown) != _defs(original) and sorted(_defs(shown)) == sorted(_defs(original))


def _defs(text: str) -> list[str]:
    return re.findall(r"^def (\w+)", text, re.M)


def test_l4_lists_its_test_gated_rewrites_and_full_composes_every_level(views):
    l4 = _record(views[("L4", 0)])
    assert l4["files_changed"] == [PATCHED]
    assert l4["l4_rewrites"][f"{PATCHED}::wcwidth"]["source"] == "deterministic"
    full = _record(views[("full", 0)])
    assert (full["level"], full["statement_source"]) == ("full", "rule")  # L1 offline: the rule restatement
    assert full["l4_rewrites"] and full["l2_names"] == len(full["mapping"])
    package = full["mapping"]["wcwidth"]
    assert (views[("full", 0)] / "repo" / package / f"{package}.py").is_file()


def test_diff_shows_the_statement_and_renames_against_l0(views, tmp_path, capsys):
    out = tmp_path / "d"
    assert raydist_main(["view", INSTANCE, "--level", "L2", "--seed", "0", "--out", str(out), "--diff"]) == 0
    printed = capsys.readouterr().out
    package = _record(views[("L2", 0)])["mapping"]["wcwidth"]
    assert printed.splitlines()[0] == str(out)
    assert "--- a/problem_statement.md" in printed and "+++ b/problem_statement.md" in printed
    assert f"rename from wcwidth/wcwidth.py\nrename to {package}/{package}.py" in printed


def test_an_identity_view_diffs_to_nothing(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text("x = 1\n")
    assert view_diff(tmp_path / "a", tmp_path / "a") == ""
    with pytest.raises(FileExistsError, match="is not an empty folder"):
        write_view(None, RepoFiles(tmp_path / "a"), tmp_path / "a", benchmark="b")  # type: ignore[arg-type]


@pytest.mark.parametrize(("args", "message"), [
    (["no_such_instance", "--level", "L2", "--seed", "0"], "instance 'no_such_instance' is not in benchmark=builtin"),
    ([INSTANCE, "--level", "L9", "--seed", "0"], "--level L9:"),
    ([INSTANCE, "--level", "L2", "--seed=-1"], "--seed -1: give a whole number >= 0"),
    ([INSTANCE, "--level", "L2", "--seed", "0", "agent=bogus"], "agent='bogus' is not defined"),
    ([INSTANCE, "--level", "L2", "--seed", "0", "benchmark=nope"], "benchmark"),
])
def test_bad_input_exits_2_naming_it_and_writes_nothing(args, message, tmp_path, capsys):
    out = tmp_path / "v"
    assert raydist_main(["view", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("raydist: error: ") and message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_a_non_empty_out_folder_is_refused(tmp_path, capsys):
    (tmp_path / "x").write_text("keep")
    assert raydist_main(["view", INSTANCE, "--level", "L0", "--seed", "0", "--out", str(tmp_path)]) == 2
    assert f"--out {tmp_path} exists and is not an empty folder" in capsys.readouterr().err
    assert (tmp_path / "x").read_text() == "keep"
