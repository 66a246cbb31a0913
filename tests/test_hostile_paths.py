"""Hostile settings for the paths a launch writes and for what it checks before starting.

One rule for paths: every file ``python -m raydist.launch`` writes lies below ``output_root``
(or ``cache_dir`` / ``storage``); a name from a setting that would leave it, an empty
``output_root``, one at a file or where nothing can be written is refused with exit status 2
and one line, before anything is written. Relative folders are taken from the directory the
command was started in, and messages print them absolute. Every job of a ``--multirun`` is
planned whole before the first starts, and a refused launch changes no run directory: the
driver writes ``.hydra/`` itself once the plan is valid.

Most cases run the entry in this process (``raydist.launch.cli``: a refusal and a dry run
start neither Hydra's jobs, Ray nor Docker); the ones that must show nothing ran, or that a
finished run is left as it was, launch as a user does (``tests.launches.launch``) and share
one real launch.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raydist import launcher
from raydist._util.run_dirs import name_problem
from raydist.driver.preflight import plan_launch
from raydist.launch import ENTRY, cli
from tests.launches import launch

SMALL = ("agent=oracle", "levels=[L0]", "seeds=[0]", "benchmark.limit=1")
#: The first built-in instance (``benchmark.limit=1`` runs it).
FIRST = "jpvanhal__inflection-humanize-id-anchor"


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every path below ``root`` with its size and modification time (ns): what a refusal must
    leave as it was."""
    return {p.relative_to(root).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def _refused(capsys, *args: str) -> str:
    """The one line ``cli(args)`` prints when it refuses them with exit status 2."""
    assert cli(list(args)) == launcher.EXIT_SETTING
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# -- output_root -------------------------------------------------------------------------------

@pytest.mark.parametrize("dry_run", ["true", "false"])
def test_an_empty_output_root_is_refused_and_nothing_is_written_anywhere(tmp_path, capsys, monkeypatch, dry_run):
    monkeypatch.chdir(tmp_path)
    line = _refused(capsys, "output_root=", f"dry_run={dry_run}", *SMALL)
    assert line == ("raydist: error: output_root is empty: give a folder, e.g. output_root=runs (a relative folder "
                    "is taken from the directory the command is started in)")
    assert list(tmp_path.iterdir()) == []
    assert not Path("/builtin").exists()  # where an empty output_root used to put the run


def test_an_output_root_at_a_regular_file_is_one_line_naming_the_file(tmp_path, capsys):
    (tmp_path / "taken").write_text("mine\n")
    line = _refused(capsys, f"output_root={tmp_path / 'taken'}", *SMALL)
    assert line == (f"raydist: error: output_root={tmp_path / 'taken'}: {tmp_path / 'taken'} is a file; choose "
                    "another output_root (a folder, or a path that does not exist yet)")
    # below a file: the file on the way is named
    line = _refused(capsys, f"output_root={tmp_path / 'taken' / 'runs'}", *SMALL)
    assert line.startswith(f"raydist: error: output_root={tmp_path / 'taken' / 'runs'}: {tmp_path / 'taken'} is a file")
    assert (tmp_path / "taken").read_text() == "mine\n"


def test_an_output_root_nobody_may_write_says_so_in_one_line(capsys):
    """``/sys`` refuses a new folder even to root, whom ``os.access`` lets write anywhere."""
    line = _refused(capsys, "output_root=/sys/raydist-hostile-paths", *SMALL)
    assert line == ("raydist: error: output_root=/sys/raydist-hostile-paths: /sys cannot be written by this user "
                    "(read-only or not permitted); choose another output_root or make it writable")
    assert not Path("/sys/raydist-hostile-paths").exists()


def test_a_relative_output_root_is_taken_from_the_current_directory_and_printed_absolute(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(["output_root=rel", "dry_run=true", *SMALL]) == 0
    out = capsys.readouterr().out
    assert f"run directory: {tmp_path}/rel/builtin/oracle/gemma3-270m/L0__s0\n" in out
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing, not even its run directory


def test_relative_roots_are_made_absolute_against_the_current_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [planned] = plan_launch(["output_root=o", "cache_dir=c", "dry_run=true", *SMALL])
    assert (planned.job.output_root, planned.job.settings.cache_dir) == (tmp_path / "o", str(tmp_path / "c"))
    line = _refused(capsys, "output_root=o", "model=..", *SMALL)
    assert line.endswith(f"output_root={tmp_path}/o (e.g. model=openai/gpt-4o-mini)")


# -- names from settings that build paths ------------------------------------------------------

@pytest.mark.parametrize("key, value, why", [
    ("model", "../../../../x", "a part of it is '.' or '..' (a folder outside the run directory's root)"),
    ("model", "openai/", "a part of it between '/' is empty"),
    ("model", "/tmp/x", "it starts with '/' (a path from the filesystem root)"),
    ("benchmark.name", "../../escape", "a part of it is '.' or '..' (a folder outside the run directory's root)"),
    ("model", "m" * 151, "it is 151 bytes long; file names are made from it (e.g. "
     "preds/<model>__<agent>__<level>__s<seed>.jsonl) and one holds at most 255 bytes: give at most 150"),
])
def test_a_name_that_would_leave_output_root_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch,
                                                                                   key, value, why):
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # model=openai/ used to be planned once a key was set
    out = tmp_path / "a" / "b" / "out"
    for agent in ("oracle", "miniswe"):
        line = _refused(capsys, f"output_root={out}", f"{key}={value}", f"agent={agent}", "levels=[L0]",
                        "benchmark.limit=1")
        assert line == (f"raydist: error: {key}={value!r}: {why}; it names folders of the run directory below "
                        f"output_root={out} (e.g. model=openai/gpt-4o-mini)")
    assert list(tmp_path.iterdir()) == []


def test_a_name_with_an_invisible_format_character_is_refused():
    # Hydra's parser takes it quoted (model='...'); the folder would print unlike its name.
    assert name_problem("gpt\u202e4") == "it holds the invisible format character '\\u202e'"
    assert name_problem("gpt\u200b4") == "it holds the invisible format character '\\u200b'"


def test_a_name_of_the_longest_length_allowed_plans():
    assert name_problem("m" * 150) is None
    assert name_problem("openai/" + "m" * 143) is None


def test_a_run_directory_set_outside_output_root_is_refused(tmp_path, capsys):
    line = _refused(capsys, f"output_root={tmp_path / 'out'}", f"hydra.run.dir={tmp_path / 'elsewhere'}", *SMALL)
    assert line == (f"raydist: error: output_root={tmp_path / 'out'}: the run directory {tmp_path / 'elsewhere'} is "
                    "not below it; every file a launch writes goes below output_root (set output_root, not "
                    "hydra.run.dir or hydra.sweep.dir)")
    assert list(tmp_path.iterdir()) == []


def test_the_run_and_gate_directories_of_an_llm_agent_lie_below_output_root(tmp_path):
    [planned] = plan_launch([f"output_root={tmp_path / 'out' / '..' / 'out'}", "dry_run=true", "levels=[L0]",
                             "benchmark.limit=1", "model=gemma3-270m"])
    root = (tmp_path / "out").resolve()
    assert planned.run_dir == root / "builtin" / "miniswe" / "gemma3-270m" / "L0__s0"
    assert planned.job.gate is not None
    assert Path(planned.job.gate.store_dir).resolve() == root / "builtin" / "_gate"


def test_the_run_directories_the_preflight_plans_are_the_ones_hydra_makes(tmp_path, capsys):
    args = ["--multirun", f"output_root={tmp_path}", "dry_run=true", "agent=oracle", "levels=[L0],[L3]",
            "seeds=[0]", "benchmark.limit=1", "view.l3_files=all,patched",
            "hydra/job_logging=none", "hydra/hydra_logging=none"]  # Hydra in this process: leave logging alone
    planned = [str(p.run_dir) for p in plan_launch(args)]
    assert launcher.launch(ENTRY, args) == 0  # Hydra's own jobs, as before: each prints its run directory
    made = [line.removeprefix("run directory: ") for line in capsys.readouterr().out.splitlines()
            if line.startswith("run directory: ")]
    assert made == planned
    assert len(set(planned)) == 4


# -- data_root and the current directory -------------------------------------------------------

def test_a_missing_data_file_names_data_root_and_its_absolute_path(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RAYDIST_DATA_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    data_root = os.path.abspath(tmp_path / ".." / "shared" / "data")
    line = _refused(capsys, "benchmark=realfix", "dry_run=true", "agent=oracle", "levels=[L0]")
    assert line == (f"raydist: error: benchmark=realfix: instance file '{data_root}/tasks/realfix.jsonl' does not "
                    f"exist; check the config key benchmark.source; it is read below data_root={data_root} (a "
                    f"relative data_root is taken from the directory the command was started in, {tmp_path}): set "
                    "data_root=<the folder holding tasks/realfix.jsonl> or the environment variable RAYDIST_DATA_ROOT")
    assert list(tmp_path.iterdir()) == []


def test_a_relative_instance_file_is_named_by_its_absolute_path(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _refused(capsys, "benchmark=file", "benchmark.source=missing.jsonl", "dry_run=true", "agent=oracle",
                    "levels=[L0]")
    assert line.startswith(f"raydist: error: benchmark=file: instance file '{tmp_path}/missing.jsonl' does not exist")


# -- instance selection and override syntax ----------------------------------------------------

@pytest.mark.parametrize("key", ["ids", "instance_ids"])
def test_an_empty_id_list_is_refused_not_read_as_every_instance(tmp_path, capsys, key):
    line = _refused(capsys, f"output_root={tmp_path}", f"benchmark.{key}=[]", "dry_run=true", "agent=oracle",
                    "levels=[L0]")
    assert line == (f"raydist: error: benchmark.{key}=[] names no instance; list the ids to run, e.g. "
                    f"benchmark.{key}=[<instance_id>], or drop the key to run every instance")


@pytest.mark.parametrize("override, key", [("levels=[L0", "levels"), ("benchmark.ids=[a,", "benchmark.ids")])
def test_an_override_that_does_not_parse_names_its_key(tmp_path, capsys, override, key):
    line = _refused(capsys, f"output_root={tmp_path}", override)
    assert line.startswith(f"raydist: error: config key {key}: the override {override!r} does not parse (")
    assert line.endswith("); quote a value holding spaces or brackets, e.g. 'levels=[L0,L3]'")


def test_an_empty_agent_names_agent(tmp_path, capsys):
    line = _refused(capsys, f"output_root={tmp_path}", "agent=")
    assert line == "raydist: error: agent='' is not defined; choose one of miniswe, oracle, null"


# -- every job checked before any starts -------------------------------------------------------

@pytest.mark.parametrize("sweep, why", [
    (("levels=[L0],[L9]",), "levels: unknown level 'L9' in 'L9'"),
    (("agent=oracle,bogus",), "agent='bogus' is not defined"),
    ((f"benchmark.ids=[{FIRST}],[no_such_instance]",), "benchmark=builtin: builtin: unknown instance ids "
                                                        "'no_such_instance'"),
    (("agent=miniswe", "model=gemma3-270m,openai/"), "model='openai/': a part of it between '/' is empty"),
])
def test_a_multirun_with_one_bad_job_is_refused_before_the_first_runs(tmp_path, capsys, sweep, why):
    """In this process, as ``raydist run`` runs it: a job that ran would have made its run
    directory (and its rows) below ``output_root``."""
    agent = () if any(s.startswith("agent=") for s in sweep) else ("agent=oracle",)
    line = _refused(capsys, "--multirun", f"output_root={tmp_path}", *agent, "levels=[L0]", "benchmark.limit=1", *sweep)
    assert line.startswith(f"raydist: error: {why}")
    assert " (job " in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.docker
@pytest.mark.usefixtures("client")
def test_a_multirun_launched_as_a_user_does_runs_no_job_when_its_second_names_an_unknown_instance(tmp_path):
    """The second job's instance id is unknown: found only when its instances are loaded."""
    res = launch(tmp_path, "--multirun", *SMALL[:-1], f"benchmark.ids=[{FIRST}],[no_such_instance]", timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.strip().splitlines() == [
        "raydist: error: benchmark=builtin: builtin: unknown instance ids 'no_such_instance'; check benchmark.ids "
        f"(job output_root={tmp_path} agent=oracle levels=[L0] seeds=[0] benchmark.ids=[no_such_instance])"]
    assert list(tmp_path.iterdir()) == []


# -- a finished run is left as it was ----------------------------------------------------------

@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One oracle unit run to the end: ``(output_root, run_dir)``."""
    out = tmp_path_factory.mktemp("finished")
    res = launch(out, *SMALL, timeout=900)
    if res.returncode != 0:
        pytest.fail(f"the launch failed:\n{res.stderr[-3000:]}")
    return out, out / "builtin" / "oracle" / "gemma3-270m" / "L0__s0"


@pytest.mark.docker
@pytest.mark.usefixtures("client")
def test_the_driver_writes_the_settings_record_of_a_run_it_started(finished):
    out, run_dir = finished
    assert sorted(p.name for p in (run_dir / ".hydra").iterdir()) == ["config.yaml", "overrides.yaml"]
    config = (run_dir / ".hydra" / "config.yaml").read_text()
    assert f"output_root: {out}\n" in config  # resolved, absolute
    assert "name: builtin\n" in config
    assert "\nsandbox:\n  provider: docker\n" in config  # keyless, but recorded with the launch's settings
    assert (run_dir / ".hydra" / "overrides.yaml").read_text() == "".join(
        f"- {o}\n" for o in (f"output_root={out}", *SMALL))


@pytest.mark.docker
@pytest.mark.usefixtures("client")
@pytest.mark.parametrize("bad", ["benchmark.ids=[no_such_instance]", "levels=[L9]", "agent=bogus"])
def test_a_refused_launch_into_a_finished_run_changes_nothing(finished, bad):
    out, run_dir = finished
    before = _files(out)
    hydra_bytes = {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()}
    res = launch(out, *SMALL, bad, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.startswith("raydist: error: ") and len(res.stderr.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()} == hydra_bytes
    assert _files(out) == before
