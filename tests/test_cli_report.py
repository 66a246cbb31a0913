"""``raydist report``: run directories found at or below the given paths, read back from their
result rows and summarised together; a problems run prints its own summary.md."""

from raydist.results import ResultStore
from raydist.results.report import find_run_dirs, report_main

HEADER = ("| model | agent | level | finished | resolved | resolved rate | resolved rate, errors unresolved "
          "| mean steps | mean input tokens | mean output tokens | cost (USD) | input errors | infrastructure errors "
          "| bugs |")


def _row(key: str, level: str, outcome: str, steps: int) -> dict:
    return {"key": key, "instance_id": f"inst-{key}", "model": "-", "agent": "oracle", "level": level, "seed": 0,
            "config_hash": "h", "resolved": outcome == "resolved", "outcome": outcome, "steps": steps,
            "input_tokens": 0, "output_tokens": 0, "cost": 0.0,
            "error": "docker: daemon gone" if outcome == "infrastructure_error" else None,
            "error_cause": "docker" if outcome == "infrastructure_error" else None}


def _run_dir(path, rows):
    store = ResultStore(path)
    for row in rows:
        store.write_row(row)
    return path


def test_report_of_one_run_dir_has_the_exact_table(tmp_path, capsys):
    run = _run_dir(tmp_path / "runs" / "builtin" / "oracle" / "-", [
        _row("a", "L0", "resolved", 2), _row("b", "L0", "unresolved", 4), _row("c", "L3", "infrastructure_error", 0)])
    assert report_main([str(run)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {run}\n\n3 of 3 units ran: 2 finished (resolved or unresolved), 1 ended in an error.")
    assert HEADER in out
    assert "| - | oracle | L0 | 2 | 1 | 50.0% | 50.0% | 3.0 | 0 | 0 | 0.0000 | 0 | 0 | 0 |" in out
    assert "| - | oracle | L3 | 0 | 0 | 0.0% | 0.0% | 0.0 | 0 | 0 | 0.0000 | 0 | 1 | 0 |" in out
    assert "| infrastructure_error | docker | 1 | inst-c L3 seed 0: docker: daemon gone |" in out


def test_report_of_an_output_root_combines_its_run_dirs(tmp_path, capsys):
    _run_dir(tmp_path / "builtin" / "oracle" / "m1", [_row("a", "L0", "resolved", 1)])
    _run_dir(tmp_path / "builtin" / "oracle" / "m2", [_row("b", "L0", "resolved", 3)])
    output = tmp_path / "report.md"
    assert report_main([str(tmp_path)], output=str(output)) == 0
    out = capsys.readouterr().out
    assert out.startswith("# 2 run directories\n\n2 of 2 units ran: 2 finished")
    assert "| - | oracle | L0 | 2 | 2 | 100.0% | 100.0% | 2.0 | 0 | 0 | 0.0000 | 0 | 0 | 0 |" in out
    assert output.read_text() == out


def test_run_dirs_are_not_searched_inside_another(tmp_path):
    outer = _run_dir(tmp_path / "run", [_row("a", "L0", "resolved", 1)])
    (outer / "trajectories" / "rows").mkdir(parents=True)  # looks like a run dir, lies inside one
    problems = tmp_path / "dyc" / "humaneval"
    problems.mkdir(parents=True)
    (problems / "variants.parquet").write_bytes(b"")
    (problems / "summary.md").write_text("# DyCodeEval\n")
    assert find_run_dirs([tmp_path]) == ([outer], [problems])


def test_the_run_dirs_of_sweep_jobs_below_a_run_dir_are_found(tmp_path):
    outer = _run_dir(tmp_path / "L0__s0", [_row("a", "L0", "resolved", 1)])
    job = _run_dir(outer / "view.l3_files=all", [_row("b", "L0", "resolved", 1)])
    assert find_run_dirs([tmp_path]) == ([outer, job], [])


def test_problems_run_dir_prints_its_summary(tmp_path, capsys):
    (tmp_path / "variants.parquet").write_bytes(b"")
    (tmp_path / "summary.md").write_text("# DyCodeEval humaneval\n\npass@1 0.5\n")
    assert report_main([str(tmp_path)]) == 0
    assert capsys.readouterr().out == "# DyCodeEval humaneval\n\npass@1 0.5\n"


def test_no_run_dir_is_exit_status_1(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert report_main([str(tmp_path)]) == 1
    assert "no run directory" in capsys.readouterr().err


def test_rows_are_read_without_runs_parquet_and_a_damaged_row_is_named_and_counted(tmp_path, capsys):
    run = _run_dir(tmp_path, [_row("a", "L0", "resolved", 1), _row("b", "L0", "unresolved", 1)])
    (run / "rows" / "b.parquet").write_bytes(b"not parquet")
    assert not (run / "runs.parquet").exists()
    assert report_main([str(run)]) == 1
    out, err = capsys.readouterr()
    assert "| - | oracle | L0 | 1 | 1 | 100.0% | 100.0% | 1.0 | 0 | 0 | 0.0000 | 0 | 0 | 0 |" in out
    assert "## Damaged rows\n\n1 result row file(s) could not be read" in out
    assert f"- {run}/rows/b.parquet\n" in out
    assert err.startswith(f"raydist: error: 1 result row file(s) damaged and not counted: {run}/rows/b.parquet (")


def test_export_swebench_writes_a_file_per_cell_and_refuses_a_folder_without_tables(tmp_path, capsys):
    import json

    from raydist.cli import main

    run = _run_dir(tmp_path / "run", [_row("a", "L0", "resolved", 2), _row("b", "L3", "unresolved", 4)])
    ResultStore(run).compile(["a", "b"])
    assert main(["export", "swebench", str(run), "--out", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert capsys.readouterr().out.splitlines() == [f"{out}/oracle__oracle__L0__s0.jsonl\t1 predictions",
                                                    f"{out}/oracle__oracle__L3__s0.jsonl\t1 predictions",
                                                    f"{out}/card/oracle/card.json"]  # the card beside them
    assert [json.loads(line)["instance_id"] for line in (out / "oracle__oracle__L3__s0.jsonl").open()] == ["inst-b"]
    assert main(["export", "swebench", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(f"raydist: error: {tmp_path}: no runs.parquet;")
