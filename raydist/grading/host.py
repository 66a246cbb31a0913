"""The host virtualenv ``TestRunner``: an instance's tests run in a scratch tree on the host.

The tree is the instance's sdist unpacked (``raydist.sandbox.sources``, the same fetch the image
builder uses) with its ``injected_patch``, ``test_patch`` and the patch under test applied by
``git apply`` (``raydist.grading.apply.apply_on_host``); the test command runs with a virtualenv
holding the recipe's pins first on ``PATH`` (one virtualenv per distinct pin set, made once
under ``work``), ``PYTHONPATH`` cleared and bytecode never written (a mutation may keep a
file's size and land within the same second, and Python would then trust a stale ``.pyc``), under
``raydist.grading.environment.GRADING_ENV`` (TZ, hash seed and locale pinned).
Per-test statuses come from the log, by the parser swebench uses for the instance
(``raydist.grading.rules.parse_test_log``), channel ``host``.
"""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from raydist.grading.apply import apply_on_host
from raydist.grading.environment import GRADING_ENV
from raydist.grading.rules import MISSING, is_resolved, parse_test_log, statuses_of
from raydist.grading.testrun import TestRun
from raydist.sandbox.sources import fetch_sdist, unpack_sdist

HOST_TIMEOUT = 600.0  # seconds per test run, unless told


def make_venv(install: tuple[str, ...], work: Path) -> Path:
    """``work/venv-<hash of install>``, created with this interpreter and ``install`` on first
    use. Raises ``subprocess.CalledProcessError`` when pip cannot install the pins."""
    venv = work / ("venv-" + hashlib.sha256("\n".join(install).encode()).hexdigest()[:12])
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *install],
                       check=True, capture_output=True)
    return venv


def prepare_tree(instance, dest: Path, cache: Path, patch: str) -> Path:
    """``instance``'s sdist unpacked under ``dest`` (fetched into ``cache``) with its
    ``injected_patch``, ``test_patch`` and ``patch`` applied, in that order; the tree's root.
    Raises ``ValueError`` for an instance without a recipe, ``PatchError`` naming the patch
    that does not apply."""
    recipe = recipe_of(instance)
    root = unpack_sdist(fetch_sdist(recipe.sdist, cache), dest)
    apply_on_host(root, recipe.injected_patch, label=f"{instance.instance_id}: injected_patch")
    apply_on_host(root, instance.test_patch, label=f"{instance.instance_id}: test_patch")
    apply_on_host(root, patch, label=f"{instance.instance_id}: patch")
    return root


def recipe_of(instance):
    """``instance.recipe``; ``ValueError`` naming the instance when it has none."""
    if instance.recipe is None:
        raise ValueError(f"instance {instance.instance_id!r} has no sdist recipe; "
                         "only sdist-based instances run on the host")
    return instance.recipe


class HostRunner:
    """The host ``TestRunner`` (``raydist.grading.testrun``): virtualenvs and scratch trees under
    ``work``; ``timeout`` seconds per test run."""

    def __init__(self, work: Path, *, timeout: float = HOST_TIMEOUT):
        self.work, self.timeout = Path(work), timeout

    def run(self, instance, patch: str) -> TestRun:
        """``instance``'s test command in a fresh scratch tree (``prepare_tree``) with ``patch``.
        Raises ``ValueError`` without a recipe, ``PatchError`` when a patch does not apply,
        ``subprocess.CalledProcessError`` when the pins or ``install_repo`` fail."""
        recipe = recipe_of(instance)
        venv = make_venv(recipe.install, self.work)
        with tempfile.TemporaryDirectory(dir=self.work) as scratch:
            root = prepare_tree(instance, Path(scratch), self.work / "sdists", patch)
            if recipe.install_repo:
                subprocess.run(recipe.install_repo, shell=True, cwd=root, env=_env(venv), check=True,
                               capture_output=True)
            return self._tests(root, venv, instance.require_test_cmd(), instance, "git-apply" if patch else "empty")

    def run_in(self, root: Path, install: tuple[str, ...], test_cmd: str, patch: str = "") -> TestRun:
        """``test_cmd`` in the existing tree ``root`` with ``patch`` applied, then reverted (a
        fresh task's release tree, ``raydist.tasks.fresh``), with the virtualenv of ``install``;
        statuses by pytest's ``-rA`` parser. Raises ``PatchError`` when ``patch`` does not apply
        or revert."""
        venv = make_venv(install, self.work)
        apply_on_host(root, patch)
        try:
            return self._tests(root, venv, test_cmd, None, "git-apply" if patch else "empty")
        finally:
            apply_on_host(root, patch, reverse=True)

    def _tests(self, root: Path, venv: Path, test_cmd: str, instance, method: str) -> TestRun:
        start = time.monotonic()
        proc = subprocess.Popen(test_cmd, shell=True, cwd=root, env=_env(venv), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=self.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the shell's children too (pytest, its workers)
            log, _ = proc.communicate()
            timed_out = True
        seconds = time.monotonic() - start
        tests = {} if timed_out else parse_test_log(log or "", instance)
        return _host_run(tests, log or "", instance, method, timed_out, seconds, self.timeout)


def _env(venv: Path) -> dict[str, str]:
    env = dict(os.environ, **GRADING_ENV, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)  # the library under test comes from the tree, never from raydist's path
    return env


def _host_run(tests: dict[str, str], log: str, instance, method: str, timed_out: bool, seconds: float,
              timeout: float) -> TestRun:
    f2p = statuses_of(getattr(instance, "FAIL_TO_PASS", ()), tests)
    p2p = statuses_of(getattr(instance, "PASS_TO_PASS", ()), tests)
    missing = sum(s == MISSING for s in (*f2p.values(), *p2p.values()))
    name = getattr(instance, "instance_id", "the tree")
    error = f"{name}: tests timed out after {timeout:g}s" if timed_out else None
    resolved = (instance is not None and error is None and missing == 0
                and is_resolved(tests, list(f2p), list(p2p)))
    return TestRun(resolved=resolved, applied=True, apply_method=method, tests=tests, fail_to_pass=f2p,
                   pass_to_pass=p2p, log=log, error=error, channel="host",
                   error_cause="tests_timed_out" if timed_out else None, missing=missing, timed_out=timed_out,
                   seconds=seconds)
