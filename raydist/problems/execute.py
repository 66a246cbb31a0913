"""Run model-written Python programs safely and fast: a pool of long-lived sandboxes.

DyCodeEval scores a completion by running it with the problem's tests (``assert``
statements) and counting it correct when they all ran and held (§4.1, pass@k). A
:class:`Program` (solution, test set-up, tests) is scored so that a completion cannot forge
the verdict: ``passed`` needs a proof line, written by the runner only after every test
returned and every ``assert`` executed, that holds a fresh random secret per run which the
program's code never sees (``_program_runner.py`` says how, which threats that closes and
which remain). Exit code 0 or anything the program prints is never a pass. An evaluation
runs thousands of programs, so a container per program is too slow
(``bench/problems_exec.py``). :class:`ProgramRunner` keeps ``workers`` sandboxes (no network,
container memory and PID limits as a backstop) and runs each program as its own process in
one of them:

* as an unprivileged uid (slot ``k`` uses ``FIRST_UID - k``: 65534 ``nobody`` for the first;
  one uid per slot because RLIMIT_NPROC counts a uid's processes across all containers of
  the host), so the program can write only its own temporary directory;
* under ``prlimit`` rlimits (see :class:`ExecLimits`) and a wall-clock ``timeout``;
* as ``python3 -s -P -B`` under ``env -i`` (no environment but the grading environment,
  ``raydist.grading.environment``: TZ=UTC, PYTHONHASHSEED=0, C.UTF-8; no user site, script
  directory or bytecode files; as ``-I`` but with the hash seed read) with an audit
  hook that ends the program at its first socket or process start: benchmark programs need
  neither, and a fork bomb or network probe becomes a clear ``error`` (``_program_runner.py``
  says what is blocked and why the hook is a tripwire, not the boundary);
* after it, every process of that uid is killed and its directory removed, so nothing it
  left behind reaches the next program (``_run_program.sh``, one exec per batch of programs).

Docker is needed here; the pure parts of :mod:`raydist.problems` do not import this module.
"""
from __future__ import annotations

import hmac
import json
import math
import queue
import re
import secrets
import signal
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from raydist.grading.environment import GRADING_ENV
from raydist.problems._program_runner import EXIT_BLOCKED, EXIT_LIMIT, EXIT_MEMORY
from raydist.problems.program import Program, assert_sites
from raydist.sandbox import Limits, Sandbox, SandboxError, SandboxProvider, as_provider

__all__ = ["ExecLimits", "Program", "ProgramResult", "ProgramRunner", "classify", "expected_proof",
           "parse_batch_output", "program_json"]

Status = Literal["passed", "failed", "timeout", "memory", "killed", "error"]
FIRST_UID = 65534
HOME = "/opt/raydist"
HARNESS_MB = 256  # container memory beyond the program's own: shell, tools, page cache
HARNESS_PIDS = 64  # container PIDs beyond the program's own: init, shell, timeout, pkill
SLACK_SECONDS = 5.0  # set-up and clean-up time allowed per program, on top of its wall limit
MAX_BATCH = 8  # programs per exec: one Docker exec costs about as much as running one program
MAX_ENV_BYTES = 96_000  # a larger program travels as a file (Linux caps one variable at 128 KiB)
MAX_BATCH_ENV_BYTES = 512_000  # all programs of a batch in the environment (ARG_MAX is ~2 MiB)
SELF_CHECK = ("import os, sys\nassert __name__ == '__main__' and sys.flags.safe_path and sys.flags.no_user_site "
              "and os.getuid() != 0\n")
_STATUS = re.compile(r"rc=(\d+) real=([\d.]+) user=([\d.]+) sys=([\d.]+) oom=(-?\d+) left=(\d+) proof=([0-9a-f:]*)\n")
_FILES = Path(__file__).parent


@dataclass(frozen=True)
class ExecLimits:
    """Limits of one program run; each names the harm it stops.

    ``cpu_seconds`` RLIMIT_CPU (SIGXCPU, then SIGKILL a second later): busy loops.
    ``wall_seconds`` TERM, then KILL 1 s later, to the program's process group: sleeping or
    blocked programs. ``memory_mb`` RLIMIT_AS in MB: huge allocations fail with ``MemoryError``
    instead of starving the machine. ``max_processes`` RLIMIT_NPROC of the program's uid
    (threads count, the runner's own two among them): fork bombs that get past the audit hook.
    ``output_bytes``: how much of the end of the merged stdout/stderr is kept. ``file_mb``
    RLIMIT_FSIZE in MB, also the most a program may print: a program filling the disk.
    ``scratch_mb``: the tmpfs holding the program's directory and its output, counted against
    the container's memory.
    """

    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_mb: int = 512
    max_processes: int = 64
    output_bytes: int = 65536
    file_mb: int = 64
    scratch_mb: int = 256

    def __post_init__(self) -> None:
        counts = ("cpu_seconds", "memory_mb", "max_processes", "output_bytes", "file_mb", "scratch_mb")
        for name in counts:  # prlimit takes whole numbers only
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ExecLimits.{name} must be a positive whole number, got {value!r}")
        if not self.wall_seconds > 0:
            raise ValueError(f"ExecLimits.wall_seconds must be positive, got {self.wall_seconds!r}")


@dataclass(frozen=True)
class ProgramResult:
    """Outcome of one program. ``passed`` is ``status == "passed"``: exit code 0 and the runner's
    proof line, with this run's secret, that every test ran (a script: that it ran to its end).

    ``status``: ``passed``; ``failed`` (an exception, a failed assert, a non-zero exit, an
    early exit of any kind, tests whose namespace changed under them, or no valid proof);
    ``timeout`` (CPU or wall limit); ``memory``
    (``MemoryError`` under the address-space limit, or the container's OOM killer);
    ``killed`` (any other death by a signal); ``error`` (the sandbox refused it: a blocked
    socket or process start, a native-code or introspection operation a :class:`Program` may
    not use, the file-size or process limit, or the sandbox itself failed).
    ``returncode`` is the program's exit code (``128 + n`` for signal ``n``, ``124`` for the wall
    timeout, ``-1`` when the sandbox failed), ``seconds`` its wall time, ``output_tail`` the last
    ``output_bytes`` of its merged stdout/stderr.
    """

    passed: bool
    status: Status
    returncode: int
    seconds: float
    output_tail: str


@dataclass
class _Slot:
    sandbox: Sandbox
    uid: int


class ProgramRunner:
    """A pool of ``workers`` program sandboxes from ``image``; use it as a context manager.

    The image needs ``bash``, ``python3``, and util-linux/procps/coreutils (``setpriv``,
    ``prlimit``, ``pkill``, ``timeout``); raydist's base image has them. Creating the runner
    starts the sandboxes (about half a second each) and proves each by running one program;
    leaving the ``with`` block removes them. Slot ``k``'s programs run as uid ``first_uid - k``:
    RLIMIT_NPROC counts a uid's tasks in every container of the machine, so two pools that run
    at once on one machine give each other room only with disjoint uids. Raises
    ``raydist.sandbox.provider.ImageNotFound`` for a missing image, ``RuntimeError`` when the image lacks a
    tool or cannot run that program, ``ValueError`` for ``workers < 1`` or a root uid.
    """

    def __init__(self, provider: SandboxProvider, image: str, *,
                 limits: ExecLimits = ExecLimits(),  # noqa: B008 - ExecLimits is a frozen dataclass
                 workers: int = 1, first_uid: int = FIRST_UID) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if first_uid - workers + 1 < 1:
            raise ValueError(f"first_uid={first_uid} with {workers} workers reaches uid 0; give a higher first_uid")
        self.provider, self.image, self.limits, self.workers = as_provider(provider), image, limits, workers
        self.first_uid = first_uid
        self._run_id = secrets.token_hex(3)
        self._slots: list[_Slot] = []
        self._free: queue.Queue[_Slot] = queue.Queue()
        try:
            for index in range(workers):
                slot = _Slot(self._start_sandbox(first_uid - index), first_uid - index)
                self._slots.append(slot)
                self._free.put(slot)
        except BaseException:
            self.close()
            raise

    @property
    def sandboxes(self) -> list[Sandbox]:
        """The pool's current sandboxes; slot ``k``'s programs run there as uid ``first_uid - k``."""
        return [slot.sandbox for slot in self._slots]

    def run(self, program: Program | str) -> ProgramResult:
        """Run one program in a free sandbox; blocks until one is free. A :class:`Program` is a
        completion and its tests (what scoring uses); a ``str`` is a script, ``passed`` when it
        ran to its end (not proof against a hostile script: see ``_program_runner.py``)."""
        return self.run_many([program])[0]

    def run_many(self, programs: Sequence[Program | str]) -> list[ProgramResult]:
        """Run ``programs``, the results in their order; with ``workers > 1`` in parallel threads.

        Programs go to the sandboxes in batches of up to ``MAX_BATCH`` (one exec each), still
        one process per program. Raises ``ValueError`` for a :class:`Program` whose tests hold
        no ``assert`` (nothing would prove they ran), ``raydist.sandbox.SandboxError`` only
        when a failed sandbox cannot be replaced (the daemon is gone).
        """
        for program in programs:
            if isinstance(program, Program) and assert_sites(program.tests) == 0:
                raise ValueError("a Program's tests must hold at least one assert statement; "
                                 "give the problem's asserts as Program.tests")
        size = max(1, min(MAX_BATCH, math.ceil(len(programs) / (self.workers * 4))))
        batches = [list(programs[start:start + size]) for start in range(0, len(programs), size)]
        if self.workers == 1 or len(batches) <= 1:
            done = [self._run_batch(batch) for batch in batches]
        else:
            with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="programs") as pool:
                done = list(pool.map(self._run_batch, batches))
        return [result for batch in done for result in batch]

    def close(self) -> None:
        """Remove every sandbox of the pool; calling it again is harmless."""
        for slot in self._slots:
            slot.sandbox.remove()
        self._slots = []

    def __enter__(self) -> ProgramRunner:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- batches ---------------------------------------------------------------------------

    def _run_batch(self, programs: list[Program | str]) -> list[ProgramResult]:
        """Run ``programs`` in one free sandbox. A sandbox that fails is replaced and the
        unfinished programs run again there; the one it failed on gets a second chance only."""
        slot = self._free.get()
        try:
            results: list[ProgramResult | None] = [None] * len(programs)
            strikes = [0] * len(programs)
            pending = list(range(len(programs)))
            while pending:
                done, problem = self._exec(slot, [programs[i] for i in pending])
                for index, result in zip(pending, done):
                    results[index] = result
                if problem:
                    self._replace(slot)
                pending = [i for i in pending if results[i] is None]
                if pending:
                    strikes[pending[0]] += 1
                    if strikes[pending[0]] == 2:
                        results[pending.pop(0)] = _failure(f"the program sandbox failed twice on it: {problem}")
            return results
        finally:
            self._free.put(slot)

    def _exec(self, slot: _Slot, programs: list[Program | str]) -> tuple[list[ProgramResult | None], str]:
        """One exec of ``_run_program.sh``: per program its result or None, and what went
        wrong with the sandbox ("" when nothing did)."""
        limits, token = self.limits, secrets.token_hex(8)
        env, files, env_bytes, proofs = {**GRADING_ENV, "RAYDIST_MARK": token}, {}, 0, []
        for index, program in enumerate(programs):
            secret = secrets.token_hex(16)
            env[f"RAYDIST_SECRET_{index}"] = secret
            proofs.append(expected_proof(program, secret))
            text = program_json(program)
            size = len(text.encode("utf-8"))
            if size <= MAX_ENV_BYTES and env_bytes + size <= MAX_BATCH_ENV_BYTES:
                env[f"RAYDIST_PROGRAM_{index}"], env_bytes = text, env_bytes + size
            else:
                files[f"incoming/{index}.json"] = text
        command = (f"bash {HOME}/run_program.sh {slot.uid} {limits.wall_seconds:g} {limits.cpu_seconds} "
                   f"{limits.memory_mb << 20} {limits.max_processes} {limits.file_mb << 20} "
                   f"{limits.output_bytes} {len(programs)}")
        try:
            if files:
                slot.sandbox.write_files(files, root=HOME)
            output = slot.sandbox.exec(command, cwd="/", env=env,
                                       timeout=len(programs) * (limits.wall_seconds + 1 + SLACK_SECONDS)).output
        except (SandboxError, OSError) as error:
            return [None] * len(programs), f"the sandbox failed: {error}"
        return parse_batch_output(output, token, proofs, limits)

    # --- sandboxes ---------------------------------------------------------------------------

    def _start_sandbox(self, uid: int) -> Sandbox:
        limits = self.limits
        sandbox = self.provider.create(
            self.image,
            limits=Limits(cpus=1.0, memory=f"{limits.memory_mb + limits.scratch_mb + HARNESS_MB}m",
                          pids=limits.max_processes + HARNESS_PIDS),
            labels={"raydist.role": "programs"}, name=f"programs-{self._run_id}-{self.first_uid - uid}",
            network="none", tmpfs={"/tmp": f"size={limits.scratch_mb}m,mode=0755"},
        )
        try:
            sandbox.write_files({"run_program.sh": (_FILES / "_run_program.sh").read_text(),
                                 "program_runner.py": (_FILES / "_program_runner.py").read_text()},
                                root=HOME)
            # Only the program's own directory may be writable by its uid.
            check = sandbox.exec(
                "for t in bash python3 setpriv prlimit pkill pgrep timeout; do "
                "command -v $t >/dev/null || { echo \"missing $t\"; exit 1; }; done; "
                "chmod o-w /dev/shm /dev/mqueue 2>/dev/null; "
                "find / -xdev -type d -perm -0002 -exec chmod o-w {} + 2>/dev/null; true",
                timeout=60, cwd="/")
            if check.returncode != 0:
                raise RuntimeError(f"image {self.image} cannot run programs: {check.output.strip()}")
            # A broken tool (an old setpriv, a python3 that will not start) would otherwise
            # score every program "failed".
            [result], problem = self._exec(_Slot(sandbox, uid), [SELF_CHECK])
            if problem or result is None or not result.passed:
                detail = problem or (result.output_tail if result else "")
                raise RuntimeError(f"image {self.image} cannot run programs: {detail}")
        except BaseException:
            sandbox.remove()
            raise
        return sandbox

    def _replace(self, slot: _Slot) -> None:
        slot.sandbox.remove()
        slot.sandbox = self._start_sandbox(slot.uid)


def program_json(program: Program | str) -> str:
    """What ``_program_runner.py`` reads: a :class:`Program` as kind ``tests``, a script as
    kind ``script`` (JSON, ASCII-only, so no NUL byte or encoding issue reaches the shell)."""
    if isinstance(program, Program):
        spec = {"kind": "tests", "solution": program.solution, "setup": program.setup,
                "tests": list(program.tests)}
    elif isinstance(program, str):
        spec = {"kind": "script", "source": program}
    else:
        raise TypeError(f"a program is a Program or a str, got {type(program).__name__}")
    return json.dumps(spec)


def expected_proof(program: Program | str, secret: str) -> str:
    """The proof line the runner writes for ``program`` run with ``secret`` when it passed:
    ``<secret>:<n>:<n>`` with ``n`` the asserts of its tests (0 for a script). A Program whose
    tests do not parse gets a proof no run can write."""
    sites = assert_sites(program.tests) if isinstance(program, Program) else 0
    return f"{secret}:{sites}:{sites}" if sites >= 0 else "never"


def parse_batch_output(output: str, token: str, proofs: Sequence[str],
                       limits: ExecLimits) -> tuple[list[ProgramResult | None], str]:
    """Per program, its result (None when the script never finished it), and the sandbox's
    problem ("" when healthy) from the text ``_run_program.sh`` printed with mark ``token``;
    ``proofs[i]`` is program ``i``'s :func:`expected_proof`.

    Program ``i``'s output tail lies between ``<token>:begin:<i>`` and ``<token>:end:<i>``;
    the program cannot forge either, since it never sees the token. It passed only when it
    exited 0 and its proof file held exactly ``proofs[i]``. Processes of the uid that
    survived the clean-up, or a program left unfinished, make the sandbox unhealthy.
    """
    count = len(proofs)
    results: list[ProgramResult | None] = []
    for index in range(count):
        begin_mark, end_mark = f"{token}:begin:{index}\n", f"\n{token}:end:{index} "
        begin = output.find(begin_mark)
        end = output.find(end_mark, begin + len(begin_mark)) if begin >= 0 else -1
        match = _STATUS.match(output, end + len(end_mark)) if end >= 0 else None
        if match is None:
            break
        rc, real, user, sys_, oom, left, proof = match.groups()
        status = classify(int(rc), float(real), float(user) + float(sys_), int(oom) > 0, limits,
                          proved=hmac.compare_digest(proof, proofs[index]))
        results.append(ProgramResult(status == "passed", status, int(rc), float(real),
                                     output[begin + len(begin_mark):end]))
        if int(left):
            return results + [None] * (count - len(results)), f"{left} processes survived the clean-up"
    if len(results) < count:
        problem = f"the sandbox stopped after {len(results)} of {count} programs:\n{output[-2000:]}"
        return results + [None] * (count - len(results)), problem
    return results, ""


def classify(returncode: int, seconds: float, cpu_seconds: float, oom_killed: bool,
             limits: ExecLimits, *, proved: bool) -> Status:
    """The status of a program from how it ended (exit codes of ``_program_runner.py`` and
    ``timeout``; ``128 + n`` is death by signal ``n``; times in seconds) and whether its proof
    line was this run's (``proved``): ``passed`` needs both exit code 0 and the proof."""
    if returncode == 0:
        return "passed" if proved else "failed"
    if oom_killed or returncode == EXIT_MEMORY:
        return "memory"
    killed = returncode == 128 + signal.SIGKILL
    if (returncode in (124, 128 + signal.SIGXCPU)
            or (killed and (seconds >= limits.wall_seconds or cpu_seconds >= limits.cpu_seconds))):
        return "timeout"
    if returncode in (EXIT_BLOCKED, EXIT_LIMIT, 126, 127, 128 + signal.SIGXFSZ):
        return "error"  # 126/127: the interpreter could not be started
    if returncode > 128:
        return "killed"
    return "failed"  # 1, EXIT_EARLY, or the program's own exit code


def _failure(message: str) -> ProgramResult:
    return ProgramResult(False, "error", -1, 0.0, message)
