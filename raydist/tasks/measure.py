"""Measure FAIL_TO_PASS / PASS_TO_PASS of sdist-based instances by running their tests.

With ``test_patch`` applied, FAIL_TO_PASS are the tests that do not pass on the base
(sdist + ``injected_patch``) and pass with the gold ``patch``; PASS_TO_PASS are those
that pass in both (SWE-bench's definition, harness ``get_logs_eval``/``get_eval_tests_report``).
Each state is run ``repeat`` times and a test counts only if every run agrees.

Usage::

    python -m raydist.tasks.measure raydist/tasks/builtin/instances.jsonl            # print
    python -m raydist.tasks.measure FILE --write                                     # rewrite lists
    python -m raydist.tasks.measure FILE --runner docker     # in the instance image, via raydist.grading

The host runner builds one virtualenv per distinct ``install`` pin set under
``--work`` and runs ``test_cmd`` with that venv first on ``PATH``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from raydist.sandbox.sources import fetch_sdist, unpack_sdist  # the same host fetch the image builder uses
from raydist.tasks.loaders import builtin_path, load_instances, write_instances
from raydist.tasks.schema import Instance, Recipe

TestRunner = Callable[[Instance, str], dict[str, str]]
"""(instance, gold patch or "") -> test id -> status, from one run of test_cmd with test_patch applied."""


def apply_patch(root: Path, diff: str, label: str) -> None:
    """``git apply`` a git-style diff at ``root``; ``RuntimeError`` naming ``label`` when it does not apply."""
    if not diff:
        return
    done = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], cwd=root, input=diff,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{label} does not apply at {root}: {done.stderr.strip()}")


def prepare_tree(instance: Instance, dest: Path, cache: Path, gold_patch: str) -> Path:
    """Sdist + injected defect + test_patch (+ ``gold_patch``) unpacked under ``dest``."""
    recipe = _recipe(instance)
    root = unpack_sdist(fetch_sdist(recipe.sdist, cache), dest)
    apply_patch(root, recipe.injected_patch, f"{instance.instance_id}: injected_patch")
    apply_patch(root, instance.test_patch, f"{instance.instance_id}: test_patch")
    apply_patch(root, gold_patch, f"{instance.instance_id}: patch")
    return root


def _recipe(instance: Instance) -> Recipe:
    if instance.recipe is None:
        raise ValueError(f"instance {instance.instance_id!r} has no sdist recipe; "
                         "only sdist-based instances can be measured")
    return instance.recipe


def host_runner(work: Path) -> TestRunner:
    """A runner that executes ``test_cmd`` in a scratch tree with a venv holding ``recipe.install``."""
    venvs: dict[tuple[str, ...], Path] = {}

    def run(instance: Instance, gold_patch: str) -> str:
        recipe = _recipe(instance)
        if recipe.install not in venvs:
            venvs[recipe.install] = make_venv(recipe.install, work)
        with tempfile.TemporaryDirectory(dir=work) as scratch:
            root = prepare_tree(instance, Path(scratch), work / "sdists", gold_patch)
            env = dict(os.environ, PATH=f"{venvs[recipe.install] / 'bin'}{os.pathsep}{os.environ['PATH']}")
            if recipe.install_repo:
                subprocess.run(recipe.install_repo, shell=True, cwd=root, env=env, check=True, capture_output=True)
            done = subprocess.run(instance.require_test_cmd(), shell=True, cwd=root, env=env,
                                  capture_output=True, text=True, timeout=600, check=False)
            return parse_statuses(done.stdout + done.stderr, instance)

    return run


def make_venv(install: tuple[str, ...], work: Path) -> Path:
    """``work/venv-<hash of install>``, created with this interpreter and ``install`` on first use."""
    venv = work / ("venv-" + hashlib.sha256("\n".join(install).encode()).hexdigest()[:12])
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *install],
                       check=True, capture_output=True)
    return venv


def docker_runner(work: Path, timeout: float = 600) -> TestRunner:
    """A runner that grades in a fresh container from the instance image (``raydist.grading.grade``).

    The image (sdist + injected defect at ``/testbed``) is built or reused by
    ``raydist.sandbox.ensure_instance_image`` with its cache under ``work``.
    """
    from raydist import grading, sandbox

    client = sandbox.connect(None)

    def run(instance: Instance, gold_patch: str) -> dict[str, str]:
        image = sandbox.ensure_instance_image(client, _recipe(instance), cache_dir=work / "images",
                                              label=instance.instance_id)
        graded = grading.grade(client, instance, image.tag, gold_patch, timeout=timeout)
        if graded.error:
            raise RuntimeError(f"{instance.instance_id}: grading in {image.tag} stopped: {graded.error}")
        return graded.tests

    return run


def parse_statuses(log: str, instance: Instance | None = None) -> dict[str, str]:
    """Test id -> PASSED/FAILED/ERROR/SKIPPED/XFAIL from a test log, by the parser swebench uses
    for ``instance``'s repository (``raydist.grading.outcomes.log_parser_for``; pytest's ``-rA``
    parser when None)."""
    from raydist.grading.outcomes import parse_test_log

    return parse_test_log(log, instance)


def measure(instance: Instance, run: TestRunner, repeat: int = 2) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(FAIL_TO_PASS, PASS_TO_PASS), each sorted, measured with ``run`` ``repeat`` times per state.

    Raises ``RuntimeError`` when a state's test run reports no tests at all.
    """
    base = [_statuses(instance, run, "") for _ in range(repeat)]
    gold = [_statuses(instance, run, instance.patch) for _ in range(repeat)]
    passing_base = set.intersection(*({t for t, s in b.items() if s == "PASSED"} for b in base))
    failing_base = set.intersection(*({t for t, s in b.items() if s in ("FAILED", "ERROR")} for b in base))
    passing_gold = set.intersection(*({t for t, s in g.items() if s == "PASSED"} for g in gold))
    return tuple(sorted(failing_base & passing_gold)), tuple(sorted(passing_base & passing_gold))


def _statuses(instance: Instance, run: TestRunner, gold_patch: str) -> dict[str, str]:
    statuses = run(instance, gold_patch)
    if not statuses:
        state = "gold" if gold_patch else "base"
        raise RuntimeError(f"{instance.instance_id}: the {state} test run reported no tests")
    return statuses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="instance file (.jsonl/.json/.parquet) or 'builtin'")
    parser.add_argument("--ids", nargs="*", help="only these instance ids")
    parser.add_argument("--runner", choices=("host", "docker"), default="host")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "raydist-measure")
    parser.add_argument("--repeat", type=int, default=2, help="runs per state; a test must agree in all")
    parser.add_argument("--write", action="store_true", help="rewrite the file with the measured lists")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    run = host_runner(args.work) if args.runner == "host" else docker_runner(args.work)
    instances = load_instances(args.file)
    measured = []
    for instance in instances:
        if args.ids and instance.instance_id not in args.ids:
            measured.append(instance)
            continue
        f2p, p2p = measure(instance, run, args.repeat)
        changed = (f2p, p2p) != (instance.FAIL_TO_PASS, instance.PASS_TO_PASS)
        print(f"{instance.instance_id}: FAIL_TO_PASS {len(f2p)} PASS_TO_PASS {len(p2p)}"
              f"{' (changed)' if changed else ''}: {list(f2p)}")
        measured.append(replace(instance, FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p))
    if args.write:
        write_instances(measured, builtin_path() if args.file == "builtin" else args.file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
