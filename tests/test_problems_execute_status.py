"""How a program's end becomes its status, and how a batch's output is read (no Docker)."""
from __future__ import annotations

import pytest

from raydist.problems._program_runner import EXIT_BLOCKED, EXIT_EARLY, EXIT_LIMIT, EXIT_MEMORY
from raydist.problems.execute import ExecLimits, ProgramResult, classify, parse_batch_output

LIMITS = ExecLimits(cpu_seconds=5, wall_seconds=10)


@pytest.mark.parametrize(("returncode", "seconds", "cpu", "oom", "status"), [
    (0, 0.1, 0.1, False, "passed"),
    (1, 0.1, 0.1, False, "failed"),
    (EXIT_EARLY, 0.1, 0.1, False, "failed"),
    (3, 0.1, 0.1, False, "failed"),
    (124, 10.0, 0.1, False, "timeout"),  # wall limit, TERM
    (137, 11.0, 0.1, False, "timeout"),  # wall limit, KILL after TERM was ignored
    (152, 5.2, 5.0, False, "timeout"),  # SIGXCPU
    (137, 6.1, 6.0, False, "timeout"),  # SIGKILL at the hard CPU limit
    (EXIT_MEMORY, 0.1, 0.1, False, "memory"),
    (137, 0.5, 0.1, True, "memory"),  # the container's OOM killer
    (1, 0.5, 0.1, True, "memory"),  # a child was OOM-killed, the program failed on it
    (EXIT_BLOCKED, 0.1, 0.1, False, "error"),
    (EXIT_LIMIT, 0.1, 0.1, False, "error"),
    (153, 0.1, 0.1, False, "error"),  # SIGXFSZ, when a program stops ignoring it
    (127, 0.0, 0.0, False, "error"),
    (137, 0.5, 0.1, False, "killed"),
    (139, 0.5, 0.1, False, "killed"),  # SIGSEGV
])
def test_classify(returncode, seconds, cpu, oom, status):
    assert classify(returncode, seconds, cpu, oom, LIMITS, proved=True) == status


@pytest.mark.parametrize("returncode", [0, 1, EXIT_EARLY])
def test_an_exit_without_this_runs_proof_is_never_a_pass(returncode):
    assert classify(returncode, 0.1, 0.1, False, LIMITS, proved=False) == "failed"


def test_parse_reads_each_program_between_its_marks():
    output = ("noise\nT:begin:0\nhello\n\nT:end:0 rc=0 real=0.050 user=0.020 sys=0.010 oom=0 left=0 proof=ab:2:2\n"
              "T:begin:1\nTraceback\n\nT:end:1 rc=1 real=0.060 user=0.030 sys=0.000 oom=0 left=0 proof=\n"
              "T:begin:2\nok\n\nT:end:2 rc=0 real=0.010 user=0.010 sys=0.000 oom=0 left=0 proof=ab:1:2\n")
    assert parse_batch_output(output, "T", ["ab:2:2", "ab:3:3", "ab:2:2"], LIMITS) == ([
        ProgramResult(True, "passed", 0, 0.05, "hello\n"),
        ProgramResult(False, "failed", 1, 0.06, "Traceback\n"),
        ProgramResult(False, "failed", 0, 0.01, "ok\n"),  # exit 0, but one of two asserts ran
    ], "")


def test_parse_marks_unfinished_programs_and_an_unhealthy_sandbox():
    output = "T:begin:0\n\nT:end:0 rc=0 real=0.050 user=0.020 sys=0.010 oom=0 left=0 proof=\nT:begin:1\npart"
    results, problem = parse_batch_output(output, "T", ["p0", "p1", "p2"], LIMITS)
    assert (results[1:], problem.splitlines()[0]) == ([None, None], "the sandbox stopped after 1 of 3 programs:")


def test_parse_stops_at_processes_that_survived():
    output = "T:begin:0\n\nT:end:0 rc=0 real=0.050 user=0.020 sys=0.010 oom=0 left=2 proof=a1:1:1\n"
    results, problem = parse_batch_output(output, "T", ["a1:1:1", "a1:1:1"], LIMITS)
    assert ([r.status if r else None for r in results], problem) == (
        ["passed", None], "2 processes survived the clean-up")


@pytest.mark.parametrize("field", ["cpu_seconds", "memory_mb", "max_processes", "output_bytes", "file_mb"])
def test_limits_must_be_positive_whole_numbers(field):
    with pytest.raises(ValueError, match=f"ExecLimits.{field} must be a positive whole number"):
        ExecLimits(**{field: 2.5})
    with pytest.raises(ValueError, match=f"ExecLimits.{field}"):
        ExecLimits(**{field: 0})
