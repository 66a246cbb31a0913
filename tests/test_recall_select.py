"""``benchmark.leakage`` / ``benchmark.min_leakage``: a launch runs only the instances a recall
probe's table puts at or above a level, and says which setting is wrong when it cannot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.driver.benchmark import BenchmarkConfig, load_benchmark
from raydist.recall.table import TABLE_NAME, write_tables

BUILTIN = ["jpvanhal__inflection-humanize-id-anchor", "jpvanhal__inflection-underscore-dashes",
           "jquast__wcwidth-table-upper-bound", "jquast__wcwidth-del-control", "benjaminp__six-ensure-text-errors",
           "jquast__wcwidth-wcswidth-zero-n"]
# Per instance, the levels of its two rounds: the instance's level is the higher one.
ROUNDS = {BUILTIN[0]: ("none", "files_symbols"), BUILTIN[1]: ("repair_logic", "none"),
          BUILTIN[2]: ("no_answer", "patch_test"), BUILTIN[3]: ("none", "none"),
          BUILTIN[4]: ("no_answer", "no_answer")}  # BUILTIN[5] was not probed


def _row(instance_id: str, index: int, level: str) -> dict:
    return {"instance_id": instance_id, "repo": "r", "model": "m", "round": f"r{index}", "round_index": index,
            "answered": level != "no_answer", "level": level, "revealed": ["problem_statement"], "reply_chars": 2}


@pytest.fixture
def probe_dir(tmp_path) -> Path:
    rows = [_row(i, n, level) for i, levels in ROUNDS.items() for n, level in enumerate(levels)]
    write_tables(rows, tmp_path)
    return tmp_path


def _ids(**bench) -> list[str]:
    return [i.instance_id for i in load_benchmark(BenchmarkConfig(name="builtin", source="builtin", **bench))]


def test_the_table_keeps_each_instance_level_as_its_highest_round(probe_dir):
    table = pq.read_table(probe_dir / TABLE_NAME).to_pylist()
    assert {r["instance_id"]: r["instance_level"] for r in table} == {
        BUILTIN[0]: "files_symbols", BUILTIN[1]: "repair_logic", BUILTIN[2]: "patch_test", BUILTIN[3]: "none",
        BUILTIN[4]: "no_answer"}


@pytest.mark.parametrize(("level", "kept"), [
    ("patch_test", [BUILTIN[2]]),
    ("repair_logic", [BUILTIN[1], BUILTIN[2]]),
    ("files_symbols", [BUILTIN[0], BUILTIN[1], BUILTIN[2]]),
    ("none", BUILTIN[:4]),  # no answer and not probed stay out even at the lowest level
])
def test_only_instances_at_or_above_the_level_are_kept(probe_dir, level, kept):
    assert _ids(leakage=str(probe_dir), min_leakage=level) == kept
    assert _ids(leakage=str(probe_dir / TABLE_NAME), min_leakage=level) == kept


def test_limit_counts_after_the_leakage_cut(probe_dir):
    assert _ids(leakage=str(probe_dir), min_leakage="files_symbols", limit=2) == [BUILTIN[0], BUILTIN[1]]


def test_without_leakage_every_instance_is_kept():
    assert _ids() == BUILTIN


def test_a_missing_table_names_the_option(tmp_path):
    with pytest.raises(ValueError, match=r"^benchmark\.leakage='.*nowhere': no probe table there"):
        _ids(leakage=str(tmp_path / "nowhere"))


def test_a_table_without_rows_for_these_instances_names_the_option(probe_dir):
    with pytest.raises(ValueError, match=r"^benchmark\.leakage=.*no row for any of the 1 instance"):
        _ids(leakage=str(probe_dir), ids=[BUILTIN[5]])


def test_an_unknown_level_names_min_leakage(probe_dir):
    with pytest.raises(ValueError, match=r"^benchmark\.min_leakage='high': choose one of none, files_symbols"):
        _ids(leakage=str(probe_dir), min_leakage="high")


def _plan(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "raydist.launch", "agent=oracle", "dry_run=true",
               f"output_root={tmp_path / 'runs'}", *overrides]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=os.environ.copy(), check=False)


def test_the_launch_plans_only_the_high_leakage_instances(probe_dir, tmp_path):
    done = _plan(tmp_path, f"benchmark.leakage={probe_dir}", "benchmark.min_leakage=repair_logic")
    assert done.returncode == 0, done.stderr
    planned = [line.split(":")[0].strip() for line in done.stdout.splitlines() if " to run of " in line]
    assert planned == [BUILTIN[1], BUILTIN[2]]


def test_the_launch_refuses_a_missing_table_naming_the_option(tmp_path):
    done = _plan(tmp_path, f"benchmark.leakage={tmp_path / 'nowhere'}")
    assert done.returncode == 2
    assert "benchmark.leakage=" in done.stderr and "no probe table there" in done.stderr
