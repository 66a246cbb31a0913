"""Measure FAIL_TO_PASS / PASS_TO_PASS of sdist-based instances by running their tests.

With ``test_patch`` applied, FAIL_TO_PASS are the tests that do not pass on the base
(sdist + ``injected_patch``) and pass with the gold ``patch``; PASS_TO_PASS are those
that pass in both (SWE-bench's definition, harness ``get_logs_eval``/``get_eval_tests_report``).
Each state is run ``repeat`` times and a test counts only if every run agrees.

Usage::

    python -m raydist.tasks.measure raydist/tasks/builtin/instances.jsonl            # print
    python -m raydist.tasks.measure FILE --write                                     # rewrite lists
    python -m raydist.tasks.measure FILE --runner docker     # in the instance image, via raydist.grading

The runners are the test-execution service's (``raydist.grading``): the host one
(``HostRunner``) builds one virtualenv per distinct ``install`` pin set under ``--work`` and runs
``test_cmd`` with that venv first on ``PATH``; the docker one grades in the instance image.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from raydist.grading import HostRunner, TestRunner, measure_lists, runner_for
from raydist.grading.host import recipe_of
from raydist.sandbox import connect, ensure_instance_image
from raydist.tasks.loaders import builtin_path, load_instances, write_instances
from raydist.tasks.schema import Instance


def host_runner(work: Path, timeout: float = 600) -> TestRunner:
    """The host virtualenv runner (``raydist.grading.HostRunner``): ``test_cmd`` in a scratch
    tree with a venv holding ``recipe.install``, made under ``work``."""
    return HostRunner(work, timeout=timeout)


class _ImageRunner:
    """A ``TestRunner`` that grades in a fresh container of the instance's image (built or
    reused by ``raydist.sandbox.ensure_instance_image`` with its cache under ``work``)."""

    def __init__(self, work: Path, timeout: float, provider: str = "docker", address: str | None = None):
        self.work, self.timeout, self.client = work, timeout, connect(provider, address)

    def run(self, instance: Instance, patch: str):
        image = ensure_instance_image(self.client, recipe_of(instance), cache_dir=self.work / "images",
                                              label=instance.instance_id)
        return runner_for(self.client, instance, image.tag, timeout=self.timeout).run(instance, patch)


def docker_runner(work: Path, timeout: float = 600, *, provider: str = "docker",
                  address: str | None = None) -> TestRunner:
    """A runner that grades in a fresh sandbox from the instance image
    (``raydist.grading.ContainerRunner``), the image (sdist + injected defect at ``/testbed``)
    built or reused by ``raydist.sandbox.ensure_instance_image`` with its cache under ``work``;
    the sandbox is ``provider``'s at ``address`` (``raydist.sandbox.connect``; ``ValueError`` for
    an unknown provider, ``SandboxUnavailable`` when it cannot be reached)."""
    return _ImageRunner(work, timeout, provider, address)


def statuses(run: TestRunner, instance: Instance, patch: str) -> dict[str, str]:
    """Test id -> status of one run of ``instance``'s tests with ``patch`` (``""`` for the base).
    Raises ``RuntimeError`` naming the instance when the run stopped short (``TestRun.error``)
    or reported no tests at all."""
    result = run.run(instance, patch)
    state = "gold" if patch else "base"
    if result.error:
        raise RuntimeError(f"{instance.instance_id}: the {state} test run stopped: {result.error}")
    if not result.tests:
        raise RuntimeError(f"{instance.instance_id}: the {state} test run reported no tests")
    return dict(result.tests)


def measure(instance: Instance, run: TestRunner, repeat: int = 2) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(FAIL_TO_PASS, PASS_TO_PASS), each sorted, measured with ``run`` ``repeat`` times per state
    (``raydist.grading.rules.measure_lists``).

    Raises ``RuntimeError`` when a state's test run stops short or reports no tests at all.
    """
    base = [statuses(run, instance, "") for _ in range(repeat)]
    gold = [statuses(run, instance, instance.patch) for _ in range(repeat)]
    return measure_lists(base, gold)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="instance file (.jsonl/.json/.parquet) or 'builtin'")
    parser.add_argument("--ids", nargs="*", help="only these instance ids")
    parser.add_argument("--runner", choices=("host", "docker"), default="host",
                        help="host: a venv; docker: the instance image in a sandbox of --provider")
    parser.add_argument("--provider", default="docker", help="sandbox provider of --runner docker (sandbox.provider)")
    parser.add_argument("--address", help="its engine's address (sandbox.docker_host; default: the provider's)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "raydist-measure")
    parser.add_argument("--repeat", type=int, default=2, help="runs per state; a test must agree in all")
    parser.add_argument("--write", action="store_true", help="rewrite the file with the measured lists")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    run = host_runner(args.work) if args.runner == "host" else docker_runner(
        args.work, provider=args.provider, address=args.address)
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
