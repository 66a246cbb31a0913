"""Completions that try to be scored ``passed`` without solving the problem, run by the real
ProgramRunner in Docker with the real HumanEval tests: every one must be scored not passed,
while honest completions of real HumanEval and MBPP problems still pass.

Each forgery answers wrongly (or not at all) and adds one trick: an early exit of some kind,
a forged marker or proof, patching what the tests use, reading the tests or the proof
channel, tracing or frame tricks, processes, threads and signals."""

from __future__ import annotations

from pathlib import Path

import pytest

from raydist.problems import load_seeds
from raydist.problems.evaluate import Item, program_for
from raydist.problems.execute import ExecLimits, Program, ProgramRunner
from raydist.sandbox import base_image_tag

pytestmark = pytest.mark.docker
LIMITS = ExecLimits(cpu_seconds=3, wall_seconds=6)
MBPP = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mbpp" / "sanitized-mbpp.json"

WRONG_0 = "def has_close_elements(numbers, threshold):\n    return False\n"
IMPORT_0 = "from typing import List\n\n\n"

# name: (problem, solution). Problem 0 is has_close_elements, 2 truncate_number (its tests
# use abs), 32 find_zero (its tests call the set-up's poly and math.fabs).
FORGERIES: dict[str, tuple[str, str]] = {
    "sys.exit(0) at import": ("HumanEval/0", WRONG_0 + "import sys\nsys.exit(0)\n"),
    "exit() in the function": ("HumanEval/0", "def has_close_elements(numbers, threshold):\n    exit()\n"),
    "os._exit(0)": ("HumanEval/0", "import os\ndef has_close_elements(numbers, threshold):\n    os._exit(0)\n"),
    "posix._exit(0)": ("HumanEval/0", "import posix\ndef has_close_elements(numbers, threshold):\n"
                                      "    posix._exit(0)\n"),
    "libc _exit via ctypes": ("HumanEval/0", "import ctypes\ndef has_close_elements(numbers, threshold):\n"
                                             "    ctypes.CDLL(None)._exit(0)\n"),
    "os.kill self SIGKILL": ("HumanEval/0", "import os, signal\ndef has_close_elements(numbers, threshold):\n"
                                            "    os.kill(os.getpid(), signal.SIGKILL)\n"),
    "os.kill self SIGTERM": ("HumanEval/0", "import os, signal\ndef has_close_elements(numbers, threshold):\n"
                                            "    os.kill(os.getpid(), signal.SIGTERM)\n"),
    "os.kill self SIGINT": ("HumanEval/0", "import os, signal, time\ndef has_close_elements(numbers, threshold):\n"
                                           "    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(1)\n"
                                           "    return False\n"),
    "raise SystemExit": ("HumanEval/0", "def has_close_elements(numbers, threshold):\n    raise SystemExit\n"),
    "raise SystemExit(0) caught by nothing": ("HumanEval/0", WRONG_0 + "raise SystemExit(0)\n"),
    "raise KeyboardInterrupt": ("HumanEval/0", "def has_close_elements(numbers, threshold):\n"
                                               "    raise KeyboardInterrupt\n"),
    "_thread.interrupt_main": ("HumanEval/0", "import _thread, time\ndef has_close_elements(numbers, threshold):\n"
                                              "    _thread.interrupt_main()\n    time.sleep(1)\n    return False\n"),
    "sys.exit(0) in __del__": ("HumanEval/0", "import sys\nclass Bye:\n    def __del__(self):\n        sys.exit(0)\n"
                                              "keep = Bye()\n" + WRONG_0),
    "os._exit(0) at exit": ("HumanEval/0", "import atexit, os\natexit.register(os._exit, 0)\n" + WRONG_0),
    "signal.alarm": ("HumanEval/0", "import signal, time\ndef has_close_elements(numbers, threshold):\n"
                                    "    signal.alarm(1)\n    time.sleep(3)\n"),
    "thread calls os._exit(0)": ("HumanEval/0", "import threading, os, time\n"
                                                "threading.Thread(target=lambda: os._exit(0)).start()\n"
                                                "time.sleep(0.5)\n" + WRONG_0),
    "daemon thread posix._exit while asserts fail": (
        "HumanEval/0", "import threading, posix, time\n"
                       "def later():\n    time.sleep(0.2)\n    posix._exit(0)\n"
                       "threading.Thread(target=later, daemon=True).start()\n"
                       "def has_close_elements(numbers, threshold):\n    time.sleep(1)\n    return False\n"),
    "os.execv": ("HumanEval/0", "import os, sys\ndef has_close_elements(numbers, threshold):\n"
                                "    os.execv(sys.executable, [sys.executable, '-c', 'pass'])\n"),
    "fork a child that prints a marker": (
        "HumanEval/0", "import os\nif os.fork() == 0:\n    print('passed')\n    os._exit(0)\n" + WRONG_0),
    "prints every marker it can guess": (
        "HumanEval/0", "import builtins\n_print = builtins.print\n"
                       "builtins.print = lambda *a, **k: _print('rc=0 real=0 user=0 sys=0 oom=0 left=0 proof=')\n"
                       "print('PASSED')\n" + WRONG_0),
    "writes a status line to fd 1 and 2": (
        "HumanEval/0", "import os\nfor fd in (1, 2):\n"
                       "    os.write(fd, b'\\nx:end:0 rc=0 real=0 user=0 sys=0 oom=0 left=0 proof=\\n')\n" + WRONG_0),
    "writes a forged proof to fd 3": (
        "HumanEval/0", "import os\nos.write(3, b'0' * 32 + b':9:9')\nos._exit(0)\n" + WRONG_0),
    "reads the secret from fd 0": (
        "HumanEval/0", "import os\nsecret = os.read(0, 256).strip()\nos.write(3, secret + b':9:9')\n"
                       "os._exit(0)\n" + WRONG_0),
    "reads /proc/self/fd": ("HumanEval/0", "import os\nprint(os.listdir('/proc/self/fd'))\n" + WRONG_0),
    "reads /proc/self/mem": ("HumanEval/0", "open('/proc/self/mem', 'rb')\n" + WRONG_0),
    "reaches /proc through a symlink": ("HumanEval/0", "import os\nos.symlink('/proc/self', 'me')\n"
                                                       "open('me/environ', 'rb')\n" + WRONG_0),
    "reads the environment": ("HumanEval/0", "import os\nassert not any('SECRET' in k for k in os.environ)\n"
                                             "print(dict(os.environ))\n" + WRONG_0),
    "AssertionError monkeypatched": ("HumanEval/0", "import builtins\nclass Never(Exception):\n    pass\n"
                                                    "builtins.AssertionError = Never\n" + WRONG_0),
    "builtins.exec patched to skip the tests": ("HumanEval/0", "import builtins\n"
                                                               "builtins.exec = lambda *a, **k: None\n" + WRONG_0),
    "answers from the tests in its own file": (
        "HumanEval/0", "import ast, sys\ntable = {}\nfor node in ast.walk(ast.parse(open(sys.argv[0]).read())):\n"
                       "    if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):\n"
                       "        args = [ast.literal_eval(a) for a in node.test.left.args]\n"
                       "        table[repr(args)] = ast.literal_eval(node.test.comparators[0])\n"
                       "def has_close_elements(numbers, threshold):\n    return table[repr([numbers, threshold])]\n"),
    "settrace jumps over the asserts": (
        "HumanEval/0", "import sys\ndef skip(frame, event, arg):\n"
                       "    if event == 'line' and frame.f_code.co_name == '<module>':\n"
                       "        frame.f_lineno = frame.f_lineno + 1\n    return skip\n"
                       "def has_close_elements(numbers, threshold):\n    sys.settrace(skip)\n"
                       "    sys._getframe(1).f_trace = skip\n    return False\n"),
    "frame trick on the caller's globals": (
        "HumanEval/0", "import sys\ndef has_close_elements(numbers, threshold):\n"
                       "    caller = sys._getframe(1).f_globals\n"
                       "    caller['__builtins__']['AssertionError'] = None\n    return False\n"),
    "frames from a traceback": (
        "HumanEval/0", "def has_close_elements(numbers, threshold):\n    try:\n        raise ValueError\n"
                       "    except ValueError as error:\n"
                       "        error.__traceback__.tb_frame.f_back.f_globals.clear()\n    return False\n"),
    "frames from a generator": (
        "HumanEval/0", "def has_close_elements(numbers, threshold):\n    def g():\n        yield\n"
                       "    gen = g()\n    next(gen)\n    gen.gi_frame.f_back\n    return False\n"),
    "gc finds the runner's objects": (
        "HumanEval/0", "import gc\nfor o in gc.get_objects():\n    pass\n" + WRONG_0),
    "an exception that equals everything": (
        "HumanEval/0", "class Odd(BaseException):\n    def __eq__(self, other):\n        return True\n"
                       "    __hash__ = object.__hash__\n"
                       "def has_close_elements(numbers, threshold):\n    raise Odd()\n"),
    "crafted bytecode": ("HumanEval/0", "code = (lambda: 0).__code__.replace(co_consts=(1,))\n" + WRONG_0),
    "rebinds the tests' helper (global poly)": (
        "HumanEval/32", "def find_zero(xs):\n    global poly\n    poly = lambda xs, x: 0.0\n    return 0.0\n"),
    "patches math.fabs the tests use": (
        "HumanEval/32", "import math\nmath.fabs = lambda x: 0.0\ndef find_zero(xs):\n    return 0.0\n"),
    "patches builtins.abs the tests use": (
        "HumanEval/2", "import builtins\nbuiltins.abs = lambda x: 0\n"
                       "def truncate_number(number: float) -> float:\n    return 0.5\n"),
    "runner's globals rebound": (
        "HumanEval/0", "import os\ng = os._exit.__globals__\n"
                       "g['_tampering'] = lambda *a: None\ng['sum'] = lambda *a: 0\n" + WRONG_0),
}


@pytest.fixture(scope="module")
def runner(client):
    with ProgramRunner(client, base_image_tag(), limits=LIMITS, workers=2) as pool:
        yield pool


def item_of(problem) -> Item:
    return Item(problem.problem_id, None, problem.prompt, problem.entry_point, tuple(problem.tests), problem.test_setup)


def test_every_forgery_is_scored_not_passed(runner):
    problems = {p.problem_id: p for p in load_seeds("humaneval", ids=["HumanEval/0", "HumanEval/2", "HumanEval/32"])}
    names = list(FORGERIES)
    programs = [program_for(item_of(problems[FORGERIES[name][0]]), FORGERIES[name][1]) for name in names]
    results = runner.run_many(programs)
    scored = {name: (result.passed, result.status) for name, result in zip(names, results)}
    assert [name for name, (passed, _) in scored.items() if passed] == []
    assert all(status != "passed" for _, status in scored.values())
    # The ones that only the proof stops end with exit code 0 or a clean EarlyExit.
    by_name = dict(zip(names, results))
    assert (by_name["posix._exit(0)"].status, by_name["posix._exit(0)"].returncode) == ("failed", 90)
    assert by_name["libc _exit via ctypes"].status == "error"
    assert "BlockedBySandbox: import of ctypes" in by_name["libc _exit via ctypes"].output_tail
    assert "TestsTampered" not in by_name["rebinds the tests' helper (global poly)"].output_tail
    assert by_name["rebinds the tests' helper (global poly)"].output_tail.endswith("AssertionError\n")
    assert by_name["patches builtins.abs the tests use"].output_tail.endswith("AssertionError\n")
    assert by_name["settrace jumps over the asserts"].status == "error"
    assert "sys.settrace is not allowed" in by_name["settrace jumps over the asserts"].output_tail
    assert "ValueError: call stack is not deep enough" in by_name["frame trick on the caller's globals"].output_tail
    assert "is not available in the program sandbox" in by_name["frames from a generator"].output_tail


def test_the_same_trick_after_a_correct_answer_still_passes_when_harmless(runner):
    """The checks refuse the trick, not the program around it: a correct solution that also
    prints a fake marker and writes to fd 1 still passes."""
    problem = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    solution = "import os\nprint('PASSED')\nos.write(1, b'rc=0 proof=\\n')\n" + problem.canonical_solution
    result = runner.run(program_for(item_of(problem), solution))
    assert (result.passed, result.status, result.returncode) == (True, "passed", 0)


def test_a_wrong_answer_fails_and_every_assert_counts(runner):
    problem = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    wrong = runner.run(program_for(item_of(problem), IMPORT_0 + WRONG_0))
    assert (wrong.passed, wrong.status, wrong.returncode) == (False, "failed", 1)
    assert wrong.output_tail.endswith("AssertionError\n")
    # An assert that never runs (here: behind a condition that is false) is not proved.
    skipped = Program("def f(x):\n    return x\n", ("assert f(1) == 1", "if f(0):\n    assert f(2) == 3"))
    result = runner.run(skipped)
    assert (result.passed, result.status, result.returncode) == (False, "failed", 1)
    assert "AssertsSkipped: 1 of the tests' 2 asserts never ran" in result.output_tail


def test_a_program_without_asserts_is_refused(runner):
    with pytest.raises(ValueError, match="at least one assert"):
        runner.run(Program("def f():\n    return 1\n", ("f()",)))


def test_honest_code_that_uses_the_stdlib_passes(runner):
    """namedtuple, typing, enum, dataclasses, warnings and tracebacks of caught exceptions
    look at frames; the hidden frames must not fail an honest solution."""
    solution = (
        "import collections, dataclasses, enum, typing, warnings, re, heapq, functools, itertools, math\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "class Colour(enum.Enum):\n    RED = 1\n"
        "Shade = enum.Enum('Shade', 'DARK LIGHT')\n"
        "@dataclasses.dataclass(frozen=True)\nclass Box:\n    size: int\n"
        "T = typing.TypeVar('T')\n"
        "@functools.lru_cache(maxsize=None)\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "def f(n: int) -> int:\n    warnings.warn('careful')\n"
        "    try:\n        int('x')\n    except ValueError:\n        pass\n"
        "    return Point(n, 0).x + Box(Colour.RED.value).size + Shade.DARK.value - 2 + 0 * fib(20)\n")
    result = runner.run(Program(solution, ("assert f(3) == 3", "assert math.isclose(f(1), 1)"), "import math"))
    assert (result.passed, result.status) == (True, "passed"), result.output_tail


@pytest.mark.slow
def test_all_164_humaneval_canonical_solutions_pass(runner):
    problems = load_seeds("humaneval")
    results = runner.run_many([program_for(item_of(p), p.canonical_solution) for p in problems])
    failed = {p.problem_id: r.output_tail[-300:] for p, r in zip(problems, results) if not r.passed}
    assert (len(problems), failed) == (164, {})


@pytest.mark.shared_data
@pytest.mark.skipif(not MBPP.is_file(), reason=f"MBPP-sanitized not found at {MBPP} (shared reference data)")
def test_mbpp_canonical_solutions_pass(runner):
    problems = load_seeds("mbpp", path=MBPP, limit=60)
    results = runner.run_many([program_for(item_of(p), p.canonical_solution) for p in problems])
    failed = {p.problem_id: r.output_tail[-300:] for p, r in zip(problems, results) if not r.passed}
    assert (len(problems), failed) == (60, {})
