"""The launcher skeleton every entry runs on (raydist.launcher): one exception -> exit status
mapping and the multirun bookkeeping. Pure: no Hydra run, no Docker, no Ray."""

from __future__ import annotations

import errno
import io

import pytest
from omegaconf import OmegaConf

from raydist.driver.plan import JobError
from raydist.launcher import Entry, Jobs, SettingProblem, exit_status_of, run_one
from raydist.outcomes import InfrastructureError
from raydist.problems.phases import ProblemsError
from raydist.sandbox import SandboxUnavailable


@pytest.mark.parametrize(("exc", "status", "line"), [
    (JobError("levels: unknown level 'L9'"), 2, "raydist: error: levels: unknown level 'L9'\n"),
    (ProblemsError("benchmark.limit=-1: give a whole number"), 2, "raydist: error: benchmark.limit=-1: give a whole "
                                                                  "number\n"),
    (SettingProblem("max_tokens=0: give a whole number of at least 1"), 2,
     "raydist: error: max_tokens=0: give a whole number of at least 1\n"),
    (InfrastructureError("Docker is not reachable", cause="docker"), 1, "raydist: error: Docker is not reachable\n"),
    (SandboxUnavailable("no daemon at unix:///x"), 1, "raydist: error: no daemon at unix:///x\n"),
    (OSError(errno.ENOSPC, "No space left on device"), 1,
     "raydist: error: [Errno 28] No space left on device; free space or choose another output_root (finished "
     "items are kept)\n"),
    (KeyboardInterrupt(), 130, ""),
])
def test_each_kind_of_failure_has_one_exit_status_and_one_line(exc, status, line):
    out = io.StringIO()
    assert exit_status_of(exc, out) == status
    assert out.getvalue() == line


def test_a_bug_prints_its_traceback_and_exits_1():
    out = io.StringIO()
    try:
        raise RuntimeError("a bug")
    except RuntimeError as exc:
        assert exit_status_of(exc, out) == 1
    assert out.getvalue().startswith("Traceback") and out.getvalue().endswith("RuntimeError: a bug\n")


def test_a_failing_job_does_not_stop_the_next_and_an_interrupt_skips_the_rest(capsys):
    outcomes = iter([JobError("bad"), 3, KeyboardInterrupt(), 0])

    def run(cfg, run_dir):
        outcome = next(outcomes)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    entry, jobs = Entry(config_name="config", run=run, interrupted="interrupted: rows are kept"), Jobs()
    cfg = OmegaConf.create({})
    assert [run_one(entry, jobs, cfg, f"runs/{n}", f"n={n}") for n in range(4)] == [2, 3, 130, 130]
    assert next(outcomes) == 0  # the job after the interrupt never ran
    assert jobs.reported == ["runs/1", "runs/2"]  # refused (2) and skipped jobs leave nothing to report
    err = capsys.readouterr().err
    assert err.splitlines() == ["raydist: error: bad", "", "interrupted: rows are kept",
                                "raydist: skipped runs/3: the sweep was interrupted"]
    out = io.StringIO()
    assert jobs.status(file=out) == 130
    assert out.getvalue().splitlines()[-1] == ("raydist: 4 of 4 jobs failed: runs/0 (exit 2), runs/1 (exit 3), "
                                               "runs/2 (exit 130), runs/3 (exit 130)")
