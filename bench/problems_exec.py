"""Sandboxed program executions per second: ProgramRunner (1 and 2 workers) against plain
`python3 -I program.py` subprocesses on the host and against one fresh container per program,
on the canonical solutions and tests of the first N HumanEval problems (the pool runs them as
scored Programs, with the proof of every assert; the other rows as one script each).

Every row runs the same programs in the same process run, rows interleaved over --repeat
rounds (best kept); a rate is programs / wall seconds of the executions alone (a pool's
start-up is its own column). The fresh-container row runs `python3 -I -B` in a new container
from the same image (create, write, exec, remove) on the first --fresh programs, without uid
switch, rlimits or clean-up: a floor for that design.

Usage: python bench/problems_exec.py [--n 40] [--fresh 10] [--workers 1 2] [--repeat 3] [--image TAG]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from raydist.problems import assemble_program, load_seeds
from raydist.problems.execute import ExecLimits, Program, ProgramRunner
from raydist.sandbox import Limits, as_provider, base_image_tag, connect, ensure_base_image


@dataclass
class Row:
    label: str
    programs: int
    passed: int
    seconds: float
    setup_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.programs / self.seconds


def host_python() -> str:
    """The interpreter ``python3`` names on the host, resolved once (a version manager's shim
    would add its own start-up to every run)."""
    shim = shutil.which("python3") or sys.executable
    done = subprocess.run([shim, "-c", "import sys; print(sys.executable)"], capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def run_host(python: str, programs: list[str], wall: float) -> Row:
    passed = 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for index, program in enumerate(programs):
            path = Path(tmp) / f"p{index}.py"
            path.write_text(program)
            paths.append(path)
        start = time.perf_counter()
        for path in paths:
            try:
                done = subprocess.run([python, "-I", str(path)], capture_output=True, timeout=wall, cwd=tmp,
                                      check=False)
                passed += done.returncode == 0
            except subprocess.TimeoutExpired:
                pass
        return Row("host subprocess (python3 -I)", len(programs), passed,
                   time.perf_counter() - start)


def run_pool(client, image: str, programs: list[Program], limits: ExecLimits, workers: int) -> Row:
    start = time.perf_counter()
    with ProgramRunner(client, image, limits=limits, workers=workers) as runner:
        setup = time.perf_counter() - start
        start = time.perf_counter()
        results = runner.run_many(programs)
        seconds = time.perf_counter() - start
    return Row(f"ProgramRunner workers={workers}", len(programs), sum(r.passed for r in results),
               seconds, setup)


def run_fresh(client, image: str, programs: list[str], limits: ExecLimits) -> Row:
    passed = 0
    start = time.perf_counter()
    for program in programs:
        with as_provider(client).create(image, limits=Limits(memory=f"{limits.memory_mb + 256}m"),
                            name="bench-fresh") as box:
            box.write_files({"program.py": program}, root="/work")
            result = box.exec("python3 -I -B program.py", timeout=limits.wall_seconds, cwd="/work")
            passed += result.returncode == 0
    return Row("fresh container per program", len(programs), passed, time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="HumanEval programs (default 40)")
    parser.add_argument("--fresh", type=int, default=10,
                        help="programs for the fresh-container row (default 10; it is slow)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="pool sizes (default 1 2)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds, best kept (default 3)")
    parser.add_argument("--image", default=None, help="image tag (default: the base image)")
    args = parser.parse_args()
    client = connect()
    image = ensure_base_image(client, args.image or base_image_tag())
    problems = load_seeds("humaneval", limit=args.n)
    programs = [assemble_program(problem) for problem in problems]  # scripts, for the host and fresh rows
    scored = [Program(p.canonical_solution, p.tests, p.test_setup) for p in problems]  # what scoring runs
    limits = ExecLimits()
    python = host_python()
    measures = [lambda: run_host(python, programs, limits.wall_seconds)]
    measures += [lambda w=workers: run_pool(client, image, scored, limits, w) for workers in args.workers]
    measures.append(lambda: run_fresh(client, image, programs[:args.fresh], limits))
    # Interleaved rounds: load from other jobs on the machine hits every row alike.
    rounds = [[measure() for measure in measures] for _ in range(args.repeat)]
    rows = [min(runs, key=lambda row: row.seconds) for runs in zip(*rounds)]
    baseline = rows[0].rate
    print(f"image {image}; host {python}; HumanEval/0..{args.n - 1} canonical programs; "
          f"best of {args.repeat} interleaved rounds")
    print(f"limits {limits}")
    print(f"{'':34}{'programs':>9}{'passed':>8}{'seconds':>9}{'setup s':>9}{'prog/s':>8}{'vs host':>9}")
    for row in rows:
        print(f"{row.label:34}{row.programs:9d}{row.passed:8d}{row.seconds:9.2f}{row.setup_seconds:9.2f}"
              f"{row.rate:8.1f}{row.rate / baseline:8.2f}x")


if __name__ == "__main__":
    main()
