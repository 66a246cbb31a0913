"""Does an exported L2 view run as a program? For each instance: write its L2 view
(``raydist view``'s tree: names and paths translated), make it the repository of the instance's
image (the diff from the original tree, renames included, applied as the model patch would be),
translate the test patch, the test command (or the official eval script) and the PASS_TO_PASS ids
into the view's names, run the tests and count the PASS_TO_PASS that pass.

The test patch is applied to the original tree before the view is made, so the tests are part
of what is exported (grading would otherwise restore the test files at their original paths).
A view whose namespace is consistent passes every PASS_TO_PASS test it passes at L0. Each failure
is a finding; the script prints the first lines of the log so its cause can be read.

    python bench/view_l2_tests.py [--seed 0] [--benchmark builtin --benchmark swebench_offline]

Needs Docker and the instances' images (built or loaded as a launch does). The offline SWE-bench
instances need ../shared/data (``data_root``).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raydist.driver.view_command import _settings_and_instance  # noqa: E402
from raydist.views.export import REPO, view_diff, write_view  # noqa: E402


def translated(instance, translator):
    """``instance`` with its tests in the view's names, run on a tree that already holds them:
    no test patch (it is part of the exported tree), the test command and PASS_TO_PASS ids
    translated, FAIL_TO_PASS dropped (they fail before the fix)."""
    return dataclasses.replace(instance, test_patch="", test_cmd=translator.to_view(instance.test_cmd),
                               FAIL_TO_PASS=(),
                               PASS_TO_PASS=tuple(translator.to_view(t) for t in instance.PASS_TO_PASS))


def measure(benchmark: str, seed: int) -> list[dict]:
    """One dict per instance of ``benchmark``: PASS_TO_PASS ``passed`` of ``total`` on its L2
    tree (the repository with the test patch applied, then viewed at L2 for ``seed``)."""
    from raydist.cluster.unit_image import unit_image
    from raydist.driver.view_command import image_settings
    from raydist.views import RepoFiles, build_view

    out = []
    for instance_id in _ids(benchmark):
        cfg, instance = _settings_and_instance(instance_id, "L2", seed, f"/tmp/raydist-view-l2-{time.time_ns()}",
                                               [f"benchmark={benchmark}"])
        start = time.time()
        image = unit_image(instance, image_settings(cfg))
        with tempfile.TemporaryDirectory() as tmp:
            tested = Path(tmp) / "tested"
            shutil.copytree(image.repo.root, tested, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            subprocess.run(["git", "apply", "-"], input=instance.test_patch, text=True, cwd=tested, check=True)
            view = build_view(instance, RepoFiles(tested), "L2", seed, cfg.view)
            write_view(view, RepoFiles(tested), Path(tmp) / "v", benchmark=benchmark)
            patch = view_diff(image.repo.root, Path(tmp) / "v" / REPO)
        run = image.tests.run(translated(instance, view.translator), patch)
        passed = sum(s == "PASSED" for s in run.pass_to_pass.values())
        out.append({"instance": instance_id, "passed": passed, "total": len(instance.PASS_TO_PASS),
                    "applied": run.applied, "error": run.error, "seconds": round(time.time() - start, 1),
                    "failing": [t for t, s in run.pass_to_pass.items() if s != "PASSED"][:5],
                    "log": run.log if passed < len(instance.PASS_TO_PASS) else ""})
    return out


def _ids(benchmark: str) -> list[str]:
    from raydist.driver.benchmark import load_benchmark
    from raydist.driver.preflight import checked_config

    return [i.instance_id for i in load_benchmark(checked_config([f"benchmark={benchmark}"]).benchmark)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--benchmark", action="append", help="benchmark group (repeatable; default builtin and "
                                                             "swebench_offline)")
    args = parser.parse_args()
    total_ok = total = 0
    for benchmark in args.benchmark or ["builtin", "swebench_offline"]:
        try:
            rows = measure(benchmark, args.seed)
        except (FileNotFoundError, ValueError) as exc:
            print(f"{benchmark}: not measured: {exc}")
            continue
        for r in rows:
            ok = r["passed"] == r["total"] and r["applied"]
            total_ok += ok
            total += 1
            print(f"{benchmark}\t{r['instance']}\tPASS_TO_PASS {r['passed']}/{r['total']}\t"
                  f"{'ok' if ok else 'FAIL'}\t{r['seconds']} s" + (f"\terror: {r['error']}" if r["error"] else ""))
            if not ok:
                print("  failing:", ", ".join(r["failing"]))
                print("  " + "\n  ".join(r["log"].splitlines()[-25:]))
    print(f"L2 trees passing all their translated PASS_TO_PASS: {total_ok} of {total} (seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
