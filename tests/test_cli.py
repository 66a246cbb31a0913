"""The ``raydist`` console script: each command's exec argv, its help, and real Hydra runs of
``config show`` (the packaged configs compose) and exit statuses passed through."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from raydist.cli import command, config_groups

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([PY, "-m", "raydist.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_run_passes_overrides_and_hydra_flags_in_order():
    argv, _ = command(["run", "--multirun", "model=a,b", "+sweep=full_levels", "-m", "hydra.run.dir=x"])
    assert argv == [PY, "-m", "raydist.launch", "--multirun", "model=a,b", "+sweep=full_levels", "-m",
                    "hydra.run.dir=x"]


def test_probe_runs_the_recall_probe_entry():
    argv, _ = command(["probe", "benchmark.limit=2", "--cfg", "job"])
    assert argv == [PY, "-m", "raydist.launch_recall", "benchmark.limit=2", "--cfg", "job"]


def test_problems_runs_the_problems_entry():
    argv, _ = command(["problems", "benchmark=mbpp", "--cfg", "job"])
    assert argv == [PY, "-m", "raydist.launch_problems", "benchmark=mbpp", "--cfg", "job"]


@pytest.mark.parametrize("args", [["plan", "--dry-run", "agent=oracle"], ["plan", "agent=oracle"]])
def test_plan_is_the_launch_with_dry_run_first(args):
    assert command(args)[0] == [PY, "-m", "raydist.launch", "dry_run=true", "agent=oracle"]


def test_config_show_is_hydra_cfg_job_of_either_entry():
    assert command(["config", "show", "agent=null"])[0] == [
        PY, "-m", "raydist.launch", "--cfg", "job", "--resolve", "agent=null"]
    assert command(["config", "show", "agent=null", "--resolve"])[0] == [
        PY, "-m", "raydist.launch", "--cfg", "job", "--resolve", "agent=null"]
    assert command(["config", "show", "--problems"])[0] == [
        PY, "-m", "raydist.launch_problems", "--cfg", "job", "--resolve"]


def test_report_runs_in_process_with_its_paths():
    argv, args = command(["report", "runs/a", "runs/b", "--output", "r.md"])
    assert argv is None
    assert (args.paths, args.output) == (["runs/a", "runs/b"], "r.md")


def test_report_rejects_a_hydra_flag():
    with pytest.raises(SystemExit) as exc:
        command(["report", "runs", "--multirun"])
    assert exc.value.code == 2


def test_unknown_command_is_a_usage_error():
    with pytest.raises(SystemExit) as exc:
        command(["runn", "agent=oracle"])
    assert exc.value.code == 2


def test_config_groups_are_read_from_the_package():
    groups = config_groups()
    assert groups["sweep"] == ["full_levels"]
    assert groups["cluster"] == ["local", "remote"]
    assert groups["benchmark"] == ["builtin", "file", "fresh", "humaneval", "mbpp", "realfix", "swe_qa", "swebench",
                                   "swebench_offline"]
    assert "prompts" not in groups


def test_config_groups_skip_folders_without_yaml(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "a.yaml").write_text("x: 1\n")
    (tmp_path / "model" / "notes.txt").write_text("")
    (tmp_path / "empty").mkdir()
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "p.yaml").write_text("")
    assert config_groups(tmp_path) == {"model": ["a"]}


def test_top_level_help_names_every_command(tmp_path):
    out = _cli("--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for name in ("run", "problems", "probe", "plan", "config", "report"):
        assert f"\n    {name} " in out.stdout


def test_run_help_explains_overrides_groups_and_exit_status(tmp_path):
    out = _cli("run", "--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: raydist run [overrides ...] [hydra flags ...]\n")
    assert "  sweep: full_levels\n" in out.stdout
    assert "raydist run +sweep=full_levels agent=oracle" in out.stdout
    assert "Exit status: 0 every unit finished" in out.stdout


@pytest.mark.slow
def test_config_show_composes_the_packaged_config_from_any_directory(tmp_path):
    out = _cli("config", "show", "agent=oracle", "+sweep=full_levels", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "agent: oracle" in out.stdout.splitlines()
    assert "\nseeds:\n- 0\n- 1\n- 2\n" in out.stdout
    assert "prompts_dir: conf/prompts" in out.stdout
    assert not (tmp_path / "outputs").exists()  # --cfg composes only, it runs nothing


@pytest.mark.slow
def test_config_show_prints_interpolations_resolved(tmp_path):
    out = _cli("config", "show", "benchmark=realfix", "data_root=/data/x", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "  source: /data/x/tasks/realfix.jsonl" in out.stdout.splitlines()
    assert "${" not in out.stdout


@pytest.mark.slow
def test_config_show_of_the_problems_job(tmp_path):
    out = _cli("config", "show", "--problems", "pipeline=generate", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "pipeline: generate" in out.stdout.splitlines()  # a top-level key, wherever the schema puts it


@pytest.mark.slow
def test_hydra_error_status_passes_through(tmp_path):
    direct = subprocess.run([PY, "-m", "raydist.launch", "benchmark=no_such_benchmark", "--cfg", "job"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
                            check=False)
    out = _cli("config", "show", "benchmark=no_such_benchmark", cwd=tmp_path)
    # A group option that does not exist is a configuration error, named with the options there.
    assert (direct.returncode, out.returncode) == (2, 2)
    assert out.stderr.strip() == ("raydist: error: In 'config': Could not find 'benchmark/no_such_benchmark'; "
                                  "Available options in 'benchmark': builtin, file, fresh, humaneval, mbpp, realfix, "
                                  "swe_qa, swebench, swebench_offline")


@pytest.mark.slow
def test_configuration_error_status_2_passes_through(tmp_path):
    out = _cli("run", "agent=oracle", "levels=[L9]", f"output_root={tmp_path / 'runs'}", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("raydist: error: levels: unknown level 'L9' in 'L9'; implemented levels are ")
