"""``raydist report`` and ``raydist export`` on damaged run directories: each damage is named in
one line (the file and what is wrong), never read as no rows or as rows of nulls, and a wrong
``--out`` / ``--output`` is refused (exit status 2) before anything is read or written.

The run directory damaged here is a real one: one oracle unit at L0, launched once for the module
and copied for each test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raydist.cli import main
from tests.launches import launch

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

VIEW = Path("builtin") / "oracle" / "gemma3-270m" / "L0__s0"
REMEDY = "run its launch again (the same command) to rewrite it, or leave the run directory out"
NOT_PARQUET = ("not a whole Parquet file, cut short or of another format (Parquet magic bytes not found in footer. "
               "Either the file is corrupted or this is not a parquet file.)")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """The run directory of one finished oracle unit (rows/, runs.parquet, steps.parquet, preds/)."""
    out = tmp_path_factory.mktemp("hostile_reports")
    done = launch(out, "agent=oracle", "levels=[L0]", "seeds=[0]", "benchmark.limit=1")
    assert done.returncode == 0, done.stderr[-3000:]
    return out / VIEW


@pytest.fixture
def run(finished_run, tmp_path) -> Path:
    """A copy of the finished run directory, to damage."""
    return Path(shutil.copytree(finished_run, tmp_path / "run"))


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _row_file(run: Path) -> Path:
    (row,) = sorted((run / "rows").glob("*.parquet"))
    return row


def _foreign_runs(run: Path) -> Path:
    """``run`` with its rows gone and a table of columns a, b renamed ``runs.parquet``."""
    shutil.rmtree(run / "rows")
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), run / "runs.parquet")
    return run / "runs.parquet"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_truncated_row_file_is_named_never_zero_of_zero(run, capsys):
    row = _row_file(run)
    _cut_in_half(row)
    assert main(["report", str(run)]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # no "0 of 0 units ran"
    assert err == (f"raydist: error: 1 result row file(s) damaged and not counted: {row} ({NOT_PARQUET}); run the "
                   "launch again (the same command) to run their units again\n")


def test_a_truncated_row_beside_a_good_one_is_counted_in_the_report(run, capsys):
    row = _row_file(run)
    good = row.with_name("a-good-copy.parquet")
    shutil.copyfile(row, good)
    _cut_in_half(row)
    assert main(["report", str(run)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(f"# {run}\n\n1 of 1 units ran: 1 finished (resolved or unresolved), 0 ended in an error.")
    assert ("## Damaged rows\n\n1 result row file(s) could not be read and are in no count above; run the launch "
            f"again to run their units again:\n\n- {row}\n") in out
    assert err.startswith(f"raydist: error: 1 result row file(s) damaged and not counted: {row} (")
    assert err.count("\n") == 1


def test_a_foreign_runs_table_is_refused_by_name_in_report_and_export(run, tmp_path, capsys):
    runs = _foreign_runs(run)
    line = (f"raydist: error: {runs}: not a raydist result table: it lacks required column(s) key, instance_id, "
            f"model, agent, level, seed, config_hash, resolved (it has a, b); {REMEDY}\n")
    assert main(["report", str(run)]) == 1
    assert capsys.readouterr() == ("", line)
    assert main(["export", "swebench", str(run), "--out", str(tmp_path / "preds")]) == 1
    assert capsys.readouterr() == ("", line)
    assert not (tmp_path / "preds").exists()


def test_a_truncated_runs_table_is_refused_by_name_in_export(run, tmp_path, capsys):
    _cut_in_half(run / "runs.parquet")
    assert main(["export", "swebench", str(run), "--out", str(tmp_path / "preds")]) == 1
    assert capsys.readouterr() == ("", f"raydist: error: {run / 'runs.parquet'}: {NOT_PARQUET}; {REMEDY}\n")
    assert not (tmp_path / "preds").exists()


@pytest.mark.parametrize("argv", [["export", "swebench", "{run}", "--out", "{file}"],
                                  ["export", "card", "{run}", "--out", "{file}"],
                                  ["report", "{run}", "--out", "{file}"]])
def test_out_at_a_file_is_exit_2_and_writes_nothing(run, tmp_path, capsys, argv):
    file = tmp_path / "afile"
    file.write_text("mine\n")
    before = _files(run)
    assert main([a.format(run=run, file=file) for a in argv]) == 2
    assert capsys.readouterr() == ("", f"raydist: error: --out {file}: is a file, not a folder; give a new or "
                                       "existing folder\n")
    assert file.read_text() == "mine\n"
    assert _files(run) == before


def test_out_below_a_file_is_exit_2(run, tmp_path, capsys):
    file = tmp_path / "afile"
    file.write_text("mine\n")
    assert main(["export", "swebench", str(run), "--out", str(file / "sub")]) == 2
    assert capsys.readouterr().err == (f"raydist: error: --out {file / 'sub'}: {file} is a file, so no folder can "
                                       "be made below it; give another folder\n")


def test_out_through_a_symbolic_link_prints_where_the_files_really_go(run, tmp_path, capsys):
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    assert main(["export", "swebench", str(run), "--out", str(link)]) == 0
    out = capsys.readouterr().out
    written = sorted(str(p) for p in target.rglob("*.jsonl"))
    assert written and all(path in out for path in written)
    assert str(link) not in out


def test_output_at_a_folder_is_exit_2(run, tmp_path, capsys):
    assert main(["report", str(run), "--output", str(tmp_path)]) == 2
    assert capsys.readouterr() == ("", f"raydist: error: --output {tmp_path}: is a folder or a special file, not a "
                                       "file; give a file path\n")


def test_a_run_dir_with_no_rows_is_named(run, capsys):
    shutil.rmtree(run / "rows")
    (run / "rows").mkdir()
    (run / "runs.parquet").unlink()
    assert main(["report", str(run)]) == 1
    assert capsys.readouterr() == ("", f"raydist: error: {run}: no result rows (rows/ holds no .parquet file and "
                                       "there is no runs.parquet): its launch finished no unit; run it again\n")


def test_a_folder_with_only_a_summary_is_no_run_dir(tmp_path, capsys):
    (tmp_path / "summary.md").write_text("# a summary\n")
    assert main(["report", str(tmp_path)]) == 1
    assert capsys.readouterr() == ("", "raydist: error: no run directory (a folder with rows/ or runs.parquet, or a "
                                       f"problems run's variants.parquet) at or below {tmp_path}\n")


def test_a_damaged_steps_table_does_not_change_the_report(run, finished_run, capsys):
    """The report reads the rows only (the action counts are columns of the row), so a damaged
    steps.parquet leaves it exactly as it was."""
    assert main(["report", str(finished_run)]) == 0
    whole = capsys.readouterr().out
    _cut_in_half(run / "steps.parquet")
    assert main(["report", str(run)]) == 0
    assert capsys.readouterr().out == whole.replace(str(finished_run), str(run))


@pytest.mark.parametrize(("argv", "what"), [(["export", "swebench", "{run}"], "the predictions could not be written "
                                             "there (No such file or directory); give another folder with --out"),
                                            (["export", "card", "{run}"], "the cards could not be written there (No "
                                             "such file or directory); give another folder with --out"),
                                            (["report", "{run}"], "the report could not be written there (No such "
                                             "file or directory); give another folder")])
def test_out_where_nothing_can_be_made_is_one_line(finished_run, capsys, argv, what):
    """/proc takes no new folder, even from root (whom file modes do not stop)."""
    out = Path("/proc/raydist-out")
    assert main([a.format(run=finished_run) for a in argv] + ["--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"raydist: error: --out {out}: {what}\n"


def test_a_foreign_variants_table_is_refused_by_name(tmp_path, capsys):
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "variants.parquet")
    assert main(["export", "variants", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr() == ("", f"raydist: error: {tmp_path / 'variants.parquet'}: not a variants table: it "
                                       "lacks required column(s) variant_id, seed_id, dataset, generation_seed, "
                                       "generator_model, scenario, contexts, accepted, seed_prompt, entry_point, "
                                       "tests, test_setup, canonical_solution (it has a); run its problems launch "
                                       "again to rewrite it\n")
    assert not (tmp_path / "out").exists()
