"""Hostile settings for the two other Hydra entries: DyCodeEval problems
(``python -m raydist.launch_problems``) and the recall probe (``python -m raydist.launch_recall``).

The rule of the main job holds for them too: every file they write lies below ``output_root``
(or ``cache_dir`` / ``storage``); an empty root, a name from a setting that would leave it
(``generation.model``, ``model``, ``benchmark.name``) and every bad setting or input of any
job of a ``--multirun`` are refused with exit status 2 and one line before Hydra makes a
folder; a refused launch leaves a finished run directory as it was (the job writes ``.hydra/``
itself once its plan is valid); relative roots are taken from the directory the command was
started in.

Refusals run the entry in this process (nothing after the plan runs). The launches that must
get past the plan run as a user does, in a subprocess from ``tmp_path``, and stop early without
a model or Docker: the problems job at an unreachable Docker daemon (after its run directory
and settings are written), the probe against a stub OpenAI-compatible server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raydist import launch_problems, launch_recall, launcher
from tests.openai_stub_server import reply, scripted_server

ROOT = Path(__file__).resolve().parents[1]
#: The smallest problems job: one seed problem, variants only.
SMALL = ("benchmark.limit=1", "pipeline=generate")


def _files(root: Path) -> dict[str, bytes | None]:
    """Every path below ``root`` with its bytes (None for a folder)."""
    return {p.relative_to(root).as_posix(): None if p.is_dir() else p.read_bytes() for p in root.rglob("*")}


def _refused(capsys, cli, *args: str) -> str:
    """The one line ``cli(args)`` prints when it refuses them with exit status 2."""
    assert cli(list(args)) == launcher.EXIT_SETTING
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _run(cwd: Path, module: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` started in ``cwd``, importing this checkout's raydist."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


# -- problems: roots and names ------------------------------------------------------------------

def test_problems_an_empty_output_root_is_refused_and_nothing_is_written_anywhere(tmp_path, capsys, monkeypatch):
    """The command a user ran: it used to make ``/problems/humaneval/`` and ``/x/.hydra/`` at
    the filesystem root before refusing ``pipeline=[generate]``."""
    monkeypatch.chdir(tmp_path)
    line = _refused(capsys, launch_problems.cli, "output_root=", "generation.model=../../../../x",
                    "pipeline=[generate]", "benchmark.limit=1")
    assert line == ("raydist: error: output_root is empty: give a folder, e.g. output_root=runs (a relative folder "
                    "is taken from the directory the command is started in)")
    assert list(tmp_path.iterdir()) == []
    assert not Path("/problems").exists() and not Path("/x").exists()


@pytest.mark.parametrize("key, value, why", [
    ("generation.model", "../../../../x", "a part of it is '.' or '..' (a folder outside the run directory's root)"),
    ("generation.model", "openai/", "a part of it between '/' is empty"),
    ("generation.model", "/tmp/x", "it starts with '/' (a path from the filesystem root)"),
    ("benchmark.name", "../../escape", "a part of it is '.' or '..' (a folder outside the run directory's root)"),
])
def test_problems_a_name_that_would_leave_output_root_is_refused_before_anything_is_written(
        tmp_path, capsys, monkeypatch, key, value, why):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "a" / "b" / "out"
    line = _refused(capsys, launch_problems.cli, f"output_root={out}", f"{key}={value}", *SMALL)
    assert line == (f"raydist: error: {key}={value!r}: {why}; it names folders of the run directory below "
                    f"output_root={out} (e.g. model=openai/gpt-4o-mini)")
    assert list(tmp_path.iterdir()) == []


def test_problems_relative_roots_are_made_absolute_against_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [job] = launch_problems.plan_problems(["output_root=o", "cache_dir=c", *SMALL])
    assert job.run_dir == tmp_path / "o" / "problems" / "humaneval" / "gemma3-270m"
    assert (job.settings.output_root, job.settings.cache_dir) == (str(tmp_path / "o"), str(tmp_path / "c"))
    assert job.cache_dir == tmp_path / "c" / "problems"
    assert list(tmp_path.iterdir()) == []


def test_problems_an_output_root_at_a_regular_file_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "taken").write_text("mine\n")
    line = _refused(capsys, launch_problems.cli, f"output_root={tmp_path / 'taken'}", *SMALL)
    assert line == (f"raydist: error: output_root={tmp_path / 'taken'}: {tmp_path / 'taken'} is a file; choose "
                    "another output_root (a folder, or a path that does not exist yet)")
    assert _files(tmp_path) == {"taken": b"mine\n"}


def test_problems_a_run_directory_set_outside_output_root_is_refused(tmp_path, capsys):
    line = _refused(capsys, launch_problems.cli, f"output_root={tmp_path / 'out'}",
                    f"hydra.run.dir={tmp_path / 'elsewhere'}", *SMALL)
    assert line == (f"raydist: error: output_root={tmp_path / 'out'}: the run directory {tmp_path / 'elsewhere'} is "
                    "not below it; every file a launch writes goes below output_root (set output_root, not "
                    "hydra.run.dir or hydra.sweep.dir)")
    assert list(tmp_path.iterdir()) == []


# -- problems: every job checked before any starts ---------------------------------------------

@pytest.mark.parametrize("sweep, why, naming", [
    ("analysis.human_check=1,-1", "analysis.human_check=-1: give a whole number of at least 0 (job ", ""),
    ("benchmark.ids=[HumanEval/0],[no_such_problem]", "benchmark=humaneval: ", ": unknown problem ids "
                                                                                "'no_such_problem' (job "),
    ("generation.model=gemma3-270m,../x", "generation.model='../x': a part of it is '.' or '..'", ""),
])
def test_problems_a_multirun_with_one_bad_job_is_refused_before_the_first_runs(tmp_path, capsys, sweep, why,
                                                                                naming):
    """The bad job is the second (its seed problems are found only when they are loaded); the
    first, had it started, would have made its run directory before failing to reach Docker."""
    fixed = (f"output_root={tmp_path}", f"sandbox.docker_host=unix://{tmp_path}/no-daemon.sock", *SMALL)
    line = _refused(capsys, launch_problems.cli, "--multirun", *fixed, sweep)
    assert line.startswith(f"raydist: error: {why}")
    assert naming in line
    key, last = sweep.split("=", 1)[0], sweep.rsplit(",", 1)[1]
    assert f" (job output_root={tmp_path} " in line and line.endswith(f" {key}={last})")  # Hydra escapes ':' there
    assert list(tmp_path.iterdir()) == []


def test_problems_a_launch_refused_for_other_settings_leaves_every_run_directory_as_it_was(tmp_path, capsys):
    """The second job's run directory holds variants made at another temperature: the launch is
    refused before the first job runs (it would have made its run directory, then failed to
    reach Docker), and the second's record, settings and log keep their bytes."""
    args = ["--multirun", f"output_root={tmp_path}", f"sandbox.docker_host=unix://{tmp_path}/no-daemon.sock", *SMALL,
            "generation.temperature=0.7,0.9"]
    first, second = launch_problems.plan_problems(args)
    (second.run_dir / ".hydra").mkdir(parents=True)
    (second.run_dir / "settings.json").write_text(json.dumps({**second.run_settings(), "temperature": 0.5}))
    (second.run_dir / ".hydra" / "config.yaml").write_text("generation:\n  temperature: 0.5\n")
    (second.run_dir / "launch.log").write_text("finished\n")
    before = _files(tmp_path)
    line = _refused(capsys, launch_problems.cli, *args)
    assert line.startswith(f"raydist: error: {second.run_dir} holds variants made with other settings (temperature "
                           "differ); choose another output_root for these settings, or remove that run directory to "
                           f"start over (job output_root={tmp_path} ")
    assert line.endswith(" generation.temperature=0.9)")
    assert _files(tmp_path) == before
    assert not first.run_dir.exists()


def test_problems_a_job_past_its_plan_writes_its_settings_record_below_output_root(tmp_path):
    """Relative roots from the starting directory; the Docker daemon unreachable, so the job
    stops (exit 1) after its run directory is held and before any model call."""
    res = _run(tmp_path, "raydist.launch_problems", "output_root=runs", "cache_dir=cache", *SMALL,
               f"sandbox.docker_host=unix://{tmp_path}/no-daemon.sock")
    assert res.returncode == 1, res.stderr[-3000:]
    assert res.stderr.startswith(f"raydist: error: cannot reach the Docker daemon at unix://{tmp_path}/no-daemon.sock")
    run_dir = tmp_path / "runs" / "problems" / "humaneval" / "gemma3-270m"
    assert sorted(_files(tmp_path)) == ["cache", "cache/problems", "runs", "runs/problems", "runs/problems/humaneval",
                                        "runs/problems/humaneval/gemma3-270m",
                                        "runs/problems/humaneval/gemma3-270m/.hydra",
                                        "runs/problems/humaneval/gemma3-270m/.hydra/config.yaml",
                                        "runs/problems/humaneval/gemma3-270m/.hydra/overrides.yaml",
                                        "runs/problems/humaneval/gemma3-270m/launch.log",
                                        "runs/problems/humaneval/gemma3-270m/settings.json"]
    config = (run_dir / ".hydra" / "config.yaml").read_text()
    assert f"output_root: {tmp_path / 'runs'}\n" in config and f"cache_dir: {tmp_path / 'cache'}\n" in config
    assert (run_dir / ".hydra" / "overrides.yaml").read_text() == "".join(
        f"- {o}\n" for o in ("output_root=runs", "cache_dir=cache", *SMALL,
                             f"sandbox.docker_host=unix://{tmp_path}/no-daemon.sock"))


def test_problems_the_run_directories_the_plan_checks_are_the_ones_hydra_makes(tmp_path, monkeypatch):
    args = ["--multirun", "output_root=runs", "cache_dir=cache", "benchmark.limit=1", "pipeline=generate",
            "generation.variants_per_seed=1,2", f"sandbox.docker_host=unix://{tmp_path}/no-daemon.sock"]
    monkeypatch.chdir(tmp_path)
    planned = [job.run_dir for job in launch_problems.plan_problems(args)]
    res = _run(tmp_path, "raydist.launch_problems", *args)
    assert res.returncode == 1, res.stderr[-3000:]
    made = sorted(p.parent for p in (tmp_path / "runs").rglob("settings.json"))
    assert planned == made
    assert [p.parent for p in made] == [tmp_path / "runs" / "problems" / "humaneval" / "gemma3-270m"] * 2
    assert ["generation.variants_per_seed=1" in p.name for p in made] == [True, False]


# -- recall probe -------------------------------------------------------------------------------

def test_recall_an_empty_output_root_is_refused_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _refused(capsys, launch_recall.cli, "output_root=", "benchmark=builtin")
    assert line == ("raydist: error: output_root is empty: give a folder, e.g. output_root=runs (a relative folder "
                    "is taken from the directory the command is started in)")
    assert list(tmp_path.iterdir()) == []
    assert not Path("/recall").exists()


@pytest.mark.parametrize("key, value, why", [
    ("model", "../../x", "a part of it is '.' or '..' (a folder outside the run directory's root)"),
    ("model", "openai/", "a part of it between '/' is empty"),
    ("benchmark.name", "a/../../b", "a part of it is '.' or '..' (a folder outside the run directory's root)"),
])
def test_recall_a_name_that_would_leave_output_root_is_refused_before_anything_is_written(
        tmp_path, capsys, monkeypatch, key, value, why):
    monkeypatch.chdir(tmp_path)
    line = _refused(capsys, launch_recall.cli, "output_root=out", "benchmark=builtin", f"{key}={value}")
    assert line == (f"raydist: error: {key}={value!r}: {why}; it names folders of the run directory below "
                    f"output_root={tmp_path / 'out'} (e.g. model=openai/gpt-4o-mini)")
    assert list(tmp_path.iterdir()) == []


def test_recall_an_unknown_setting_is_one_line_naming_it_and_the_probe_keys(tmp_path, capsys):
    line = _refused(capsys, launch_recall.cli, f"output_root={tmp_path}", "nosuch=1")
    assert line == ("raydist: error: config key nosuch: Key 'nosuch' not in 'RecallConfig'; allowed keys there: "
                    "model, rounds, max_tokens, temperature, seed, answer, prompts_dir, timeout_base_s, "
                    "min_tokens_per_s, benchmark, cluster, local_models, data_root, cache_dir, output_root")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad, why", [
    ("max_tokens=0", "max_tokens=0: give a whole number of at least 1"),
    ("model=nosuchmodel", "model=nosuchmodel: unknown model 'nosuchmodel'"),
    ("benchmark.ids=[no_such_instance]", "benchmark=builtin: builtin: unknown instance ids 'no_such_instance'"),
])
def test_recall_a_refused_probe_into_a_finished_run_changes_nothing(tmp_path, capsys, bad, why):
    run_dir = tmp_path / "recall" / "builtin" / "gemma3-270m"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text("model: gemma3-270m\n")
    (run_dir / "summary.json").write_text("{}\n")
    before = _files(tmp_path)
    line = _refused(capsys, launch_recall.cli, f"output_root={tmp_path}", "benchmark=builtin", bad)
    assert line.startswith(f"raydist: error: {why}")
    assert _files(tmp_path) == before


def test_recall_a_multirun_with_one_bad_job_is_refused_before_the_first_runs(tmp_path, capsys):
    """The first job, had it started, would have written its run directory at once: no
    instance to probe, and a model that needs no server."""
    fixed = (f"output_root={tmp_path}", "benchmark=builtin", "benchmark.limit=0", "model=stub",
             "+local_models.stub.api_base=http://127.0.0.1:9/v1", "+local_models.stub.litellm_model=openai/stub")
    line = _refused(capsys, launch_recall.cli, "--multirun", *fixed, "max_tokens=16,0")
    assert line.startswith("raydist: error: max_tokens=0: give a whole number of at least 1 "
                           f"(job output_root={tmp_path} benchmark=builtin benchmark.limit=0 model=stub ")
    # (Hydra escapes the ':' of the overrides that follow)
    assert line.endswith(" max_tokens=0)")
    assert list(tmp_path.iterdir()) == []


def test_recall_each_job_of_a_multirun_is_planned_in_the_folder_hydra_numbers_it(tmp_path):
    planned = launch_recall.plan_recall(["--multirun", f"output_root={tmp_path}", "benchmark=builtin",
                                         "max_tokens=16,32"])
    assert planned == [tmp_path / "recall" / "builtin" / "gemma3-270m" / str(n) for n in (0, 1)]
    assert list(tmp_path.iterdir()) == []


def test_recall_a_probe_past_its_plan_writes_its_settings_record_below_output_root(tmp_path):
    """A stub OpenAI-compatible server answers every round; relative roots are taken from the
    directory the command was started in."""
    with scripted_server([reply('{"files": []}')]) as (_, api_base):
        res = _run(tmp_path, "raydist.launch_recall", "output_root=runs", "cache_dir=cache", "benchmark=builtin",
                   "benchmark.limit=1", "model=stub", f"+local_models.stub.api_base={api_base}",
                   "+local_models.stub.litellm_model=openai/stub")
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "runs"]
    run_dir = tmp_path / "runs" / "recall" / "builtin" / "stub"
    assert sorted(p.name for p in (run_dir / ".hydra").iterdir()) == ["config.yaml", "overrides.yaml"]
    config = (run_dir / ".hydra" / "config.yaml").read_text()
    assert f"output_root: {tmp_path / 'runs'}\n" in config and f"cache_dir: {tmp_path / 'cache'}\n" in config


# -- raydist audit-tests --out ------------------------------------------------------------------

def test_audit_tests_refuses_an_out_it_cannot_write_before_auditing_anything(tmp_path, capsys):
    """It used to audit every instance (containers, test runs) and then fail on the file; here
    the Docker daemon is unreachable, so an audit that started would end at once."""
    from raydist.driver.audit_tests import audit_main  # deferred: docker

    (tmp_path / "folder").mkdir()
    settings = ["benchmark=builtin", f"sandbox.docker_host=unix://{tmp_path}/no-daemon.sock"]
    assert audit_main(settings, out=str(tmp_path / "folder")) == launcher.EXIT_SETTING
    assert capsys.readouterr() == ("", f"raydist: error: --out {tmp_path / 'folder'} is a folder; give a file to "
                                       f"write, e.g. --out {tmp_path / 'folder' / 'audit.json'}\n")
    assert audit_main(settings, out=str(tmp_path / "missing" / "a.json")) == launcher.EXIT_SETTING
    assert capsys.readouterr() == ("", f"raydist: error: --out {tmp_path / 'missing' / 'a.json'}: "
                                       f"{tmp_path / 'missing'} is not an existing folder; create it or give another "
                                       "file\n")
    assert _files(tmp_path) == {"folder": None}
