"""ProgramRunner on the real Docker daemon: real programs, real limits, nothing left behind."""
from __future__ import annotations

import pytest

from raydist.problems import assemble_program, load_seeds
from raydist.problems.execute import FIRST_UID, ExecLimits, ProgramRunner
from raydist.sandbox import base_image_tag

pytestmark = pytest.mark.docker
LIMITS = ExecLimits(cpu_seconds=2, wall_seconds=4)
WRONG_HAS_CLOSE_ELEMENTS = "def has_close_elements(numbers, threshold):\n    return False\n"
# ctypes goes around the audit hook: the children sleep, the parent forks until the process
# limit refuses, then reports how many forks it made and exits 0.
COUNT_FORKS = """\
import ctypes, time
libc = ctypes.CDLL(None)
forks = 0
while True:
    pid = libc.fork()
    if pid == 0:
        time.sleep(1000)
    if pid < 0:
        break
    forks += 1
print("forks", forks)
"""


#: The pool's uids: below the default's (65534 is also grading's `nobody`) so that no other
#: test's container, running beside these on another worker, holds tasks of them. RLIMIT_NPROC
#: counts a uid's tasks in every container, so the fork count below is exact only then.
OWN_UID = FIRST_UID - 100


@pytest.fixture(scope="module")
def runner(client):
    with ProgramRunner(client, base_image_tag(), limits=LIMITS, first_uid=OWN_UID) as pool:
        yield pool


def processes_left(runner: ProgramRunner, slot: int = 0) -> int:
    result = runner.sandboxes[slot].exec(f"pgrep -u {runner.first_uid - slot} | wc -l", timeout=30, cwd="/")
    return int(result.output)


def humaneval_0(solution: str | None = None) -> str:
    return assemble_program(load_seeds("humaneval", ids=["HumanEval/0"])[0], solution)


def test_canonical_humaneval_solution_passes(runner):
    result = runner.run(humaneval_0())
    assert (result.passed, result.status, result.returncode, result.output_tail) == (True, "passed", 0, "")


def test_wrong_solution_fails_with_its_assertion(runner):
    result = runner.run(humaneval_0(WRONG_HAS_CLOSE_ELEMENTS))
    assert (result.passed, result.status, result.returncode) == (False, "failed", 1)
    assert result.output_tail.endswith("AssertionError\n")


def test_busy_loop_stops_at_the_cpu_limit(runner):
    result = runner.run("while True: pass\n")
    assert (result.passed, result.status, result.returncode) == (False, "timeout", 152)  # SIGXCPU
    assert LIMITS.cpu_seconds <= result.seconds <= LIMITS.wall_seconds + 1


def test_sleeping_program_stops_at_the_wall_limit(runner):
    result = runner.run("import time\ntime.sleep(100)\n")
    assert (result.passed, result.status, result.returncode) == (False, "timeout", 124)
    assert LIMITS.wall_seconds <= result.seconds < LIMITS.wall_seconds + 1


def test_10_gb_allocation_is_a_memory_error(runner):
    result = runner.run("x = bytearray(10 * 1024**3)\n")
    assert (result.passed, result.status) == (False, "memory")
    assert result.output_tail.endswith("MemoryError\n")


def test_fork_bomb_is_stopped_and_the_next_program_passes(runner):
    result = runner.run("import os\nwhile True: os.fork()\n")
    assert (result.passed, result.status) == (False, "error")
    assert "os.fork is not allowed" in result.output_tail
    assert processes_left(runner) == 0
    assert runner.run(humaneval_0()).passed


def test_fork_loop_around_the_audit_hook_is_held_by_the_process_limit(runner):
    result = runner.run(COUNT_FORKS)
    # The program's two threads (the runner's main thread and the one running the program)
    # and its 62 sleeping children fill RLIMIT_NPROC = 64 tasks of its uid.
    assert (result.status, result.output_tail) == ("passed", f"forks {LIMITS.max_processes - 2}\n")
    assert processes_left(runner) == 0
    assert runner.run(humaneval_0()).passed


def test_detached_child_does_not_outlive_its_program(runner):
    program = ("import ctypes, time\nlibc = ctypes.CDLL(None)\n"
               "if libc.fork() == 0:\n    libc.setsid()\n    time.sleep(1000)\n")
    assert runner.run(program).status == "passed"
    assert processes_left(runner) == 0


def test_socket_connection_is_an_error(runner):
    result = runner.run('import socket\nsocket.create_connection(("1.1.1.1", 80), timeout=2)\n')
    assert (result.passed, result.status) == (False, "error")
    assert "socket.getaddrinfo is not allowed" in result.output_tail


def test_creating_a_socket_is_an_error(runner):
    result = runner.run("import socket\nsocket.socket()\n")
    assert (result.passed, result.status) == (False, "error")
    assert "socket.__new__ is not allowed" in result.output_tail


def test_caught_block_cannot_be_swallowed(runner):
    result = runner.run("import socket\ntry:\n    socket.socket()\nexcept BaseException:\n    pass\n")
    assert result.status == "error"


def test_subprocess_is_an_error(runner):
    result = runner.run('import subprocess\nsubprocess.run(["true"])\n')
    assert (result.status, "subprocess.Popen is not allowed" in result.output_tail) == ("error", True)


def test_2_gb_file_is_stopped_by_the_file_size_limit(runner):
    program = ("with open('big.bin', 'wb') as out:\n"
               "    for _ in range(2048):\n        out.write(bytes(1 << 20))\n")
    result = runner.run(program)
    assert (result.passed, result.status) == (False, "error")
    assert result.output_tail.endswith("OSError: [Errno 27] File too large\n")
    assert result.seconds < LIMITS.wall_seconds


def test_10_mb_of_output_is_truncated_and_still_scored(runner):
    result = runner.run("import sys\nsys.stdout.write('x' * 10_000_000)\nprint('\\nend')\n")
    assert (result.passed, len(result.output_tail)) == (True, LIMITS.output_bytes)
    assert result.output_tail.endswith("xx\nend\n")
    failing = runner.run("print('x' * 10_000_000)\nassert False, 'after the output'\n")
    assert (failing.status, len(failing.output_tail)) == ("failed", LIMITS.output_bytes)
    assert failing.output_tail.endswith("AssertionError: after the output\n")


def test_exit_before_the_last_line_is_not_a_pass(runner):
    for program in ("import sys\nsys.exit(0)\nassert False\n", "exit()\n", "import os\nos._exit(0)\n"):
        result = runner.run(program)
        assert (result.passed, result.status) == (False, "failed"), program
        assert "EarlyExit" in result.output_tail


def test_forged_status_line_in_the_output_is_ignored(runner):
    program = ('print("@@raydist-program-output@@")\n'
               'print("@@raydist-program-status@@ rc=0 real=0 user=0 sys=0 oom=0 left=0")\nassert False\n')
    result = runner.run(program)
    assert (result.passed, result.status, result.returncode) == (False, "failed", 1)


def test_container_oom_kill_is_memory(client):
    # Four children of 400 MB each stay under RLIMIT_AS but not under the container's memory
    # (512 + 256 + 256 MB): the kernel's OOM killer takes one, and the parent's check fails.
    # The parent reaps whichever child ends first (the killed one, while the others still sleep).
    # Filling memory up to the OOM kill can take more than the module's 4 s wall limit on a
    # loaded machine, so this pool has 60 s: the status asserted is the kill, not a timeout.
    program = ("import ctypes, os, time\nlibc = ctypes.CDLL(None)\n"
               "for _ in range(4):\n    pid = libc.fork()\n    if pid == 0:\n"
               "        hold = b'x' * (400 << 20)\n        time.sleep(120)\n        libc._exit(0)\n"
               "assert os.wait()[1] == 0\n")
    limits = ExecLimits(cpu_seconds=30, wall_seconds=60)
    with ProgramRunner(client, base_image_tag(), limits=limits, first_uid=OWN_UID - 10) as pool:
        result = pool.run(program)
        assert (result.passed, result.status, result.returncode) == (False, "memory", 1)
        assert processes_left(pool) == 0


def test_program_cannot_read_the_harness_environment(runner):
    program = ("import glob\nseen = []\nfor path in glob.glob('/proc/[0-9]*/environ'):\n"
               "    try:\n        seen.append(open(path, 'rb').read())\n    except OSError:\n        pass\n"
               "assert seen and not any(b'RAYDIST' in env for env in seen)\n")
    result = runner.run(program)
    assert result.passed, result.output_tail


def test_death_by_signal_is_killed(runner):
    result = runner.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert (result.passed, result.status, result.returncode) == (False, "killed", 137)


def test_program_writes_only_its_own_directory_and_its_files_are_gone_next_time(runner):
    assert runner.run("open('left.txt', 'w').write('x')\n").passed
    assert runner.run("import os\nassert not os.path.exists('left.txt')\n").passed
    for path in ("/var/tmp/x", "/tmp/x", "/dev/shm/x", "/opt/raydist/x"):
        result = runner.run(f"open({path!r}, 'w')\n")
        assert result.output_tail.endswith(f"PermissionError: [Errno 13] Permission denied: {path!r}\n")


def test_program_runs_isolated_as_the_unprivileged_user(runner):
    program = (f"import os, sys\nassert os.getuid() == os.getgid() == {OWN_UID}\nassert os.getgroups() == []\n"
               "assert sys.flags.no_user_site and sys.flags.safe_path and sys.flags.dont_write_bytecode\n"
               "assert not any(k.startswith('RAYDIST') for k in os.environ)\n")
    result = runner.run(program)
    assert result.passed, result.output_tail


def test_program_larger_than_the_environment_allows_still_runs(runner):
    program = "# " + "x" * 300_000 + "\n" + humaneval_0()
    assert runner.run(program).passed


def test_dead_sandbox_is_replaced_and_the_program_still_runs(client):
    with ProgramRunner(client, base_image_tag(), limits=LIMITS, first_uid=OWN_UID) as pool:
        old = pool.sandboxes[0].name
        pool.sandboxes[0].container.kill()
        results = pool.run_many([humaneval_0(), "assert False\n", humaneval_0()])
        assert [r.status for r in results] == ["passed", "failed", "passed"]
        assert pool.sandboxes[0].name != old


def test_run_many_keeps_order_across_a_mix_with_two_workers(client):
    programs = [
        humaneval_0(),
        "import time\ntime.sleep(100)\n",
        "x = bytearray(10 * 1024**3)\n",
        "import os\nwhile True: os.fork()\n",
        humaneval_0(WRONG_HAS_CLOSE_ELEMENTS),
        "import socket\nsocket.socket()\n",
        COUNT_FORKS,
        "while True: pass\n",
        "with open('big.bin', 'wb') as out:\n    out.write(bytes(100 << 20))\n",
        "print('x' * 10_000_000)\n",
        "# " + "x" * 300_000 + "\n" + humaneval_0(),
        humaneval_0(),
    ]
    with ProgramRunner(client, base_image_tag(), limits=LIMITS, workers=2, first_uid=OWN_UID) as pool:
        results = pool.run_many(programs)
        assert [r.status for r in results] == [
            "passed", "timeout", "memory", "error", "failed", "error", "passed", "timeout", "error",
            "passed", "passed", "passed"]
        assert [r.passed for r in results] == [r.status == "passed" for r in results]
        assert [processes_left(pool, slot) for slot in (0, 1)] == [0, 0]


def test_a_pool_whose_uids_would_reach_root_is_refused_before_any_sandbox_starts():
    with pytest.raises(ValueError, match="first_uid=2 with 3 workers reaches uid 0; give a higher first_uid"):
        ProgramRunner(None, "no-such-image", workers=3, first_uid=2)
