"""``raydist audit-tests``: do an instance set's tests reject correct fixes? For every instance of
the benchmark (the main job's settings and overrides), the gold patch and its rewritten,
behaviour-preserving variants are graded on the instance's image
(``raydist.grading.false_rejections``); the share of instances with a confirmed false rejection
is printed with its 95% Wilson interval, and the instances and tests named.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from raydist.cluster.unit_image import unit_image
from raydist.driver.benchmark import load_benchmark
from raydist.driver.config import ConfigError
from raydist.driver.preflight import checked_config
from raydist.driver.view_command import image_settings
from raydist.grading.false_rejections import InstanceAudit, audit_instance, summarise_audits


def audit_main(overrides: list[str], *, seeds: int = 3, out: str | None = None) -> int:
    """Audit every instance of the configured benchmark with ``seeds`` rewrite seeds
    (0 .. seeds-1); print one line per instance and the summary; with ``out`` write the JSON
    (``{"summary": ..., "instances": [...]}``). Returns 0, 2 for a bad setting (one line on
    stderr; an ``out`` that cannot be a new file is one, found before any instance is
    audited), 1 when no instance could be audited because the machine failed."""
    if seeds < 1:
        print(f"raydist: error: --seeds {seeds}: give a whole number >= 1", file=sys.stderr)
        return 2
    problem = out_problem(out) if out else None
    if problem:
        print(f"raydist: error: {problem}", file=sys.stderr)
        return 2
    try:
        cfg = checked_config(overrides)
        instances = load_benchmark(cfg.benchmark)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 2
    settings = image_settings(cfg)
    audits: list[InstanceAudit] = []
    errors: dict[str, str] = {}
    for instance in instances:
        try:
            image = unit_image(instance, settings)
            audit = audit_instance(instance, image.repo, image.tests, range(seeds))
        except Exception as exc:  # noqa: BLE001 - an instance that cannot be audited is counted, not fatal
            errors[instance.instance_id] = f"{type(exc).__name__}: {exc}"
            print(f"{instance.instance_id}\terror\t{errors[instance.instance_id][:300]}", flush=True)
            continue
        audits.append(audit)
        detail = "; ".join(f"seed {r.seed} ({', '.join(r.functions)}): {', '.join(r.failing)}"
                           for r in audit.rejections)
        print(f"{instance.instance_id}\t{audit.outcome}\tfixes {audit.fixes}\tconfirmed {len(audit.rejections)}"
              f"\tflaky {len(audit.flaky)}" + (f"\t{detail}" if detail else ""), flush=True)
    summary = summarise_audits(str(cfg.benchmark.name), audits, errors=len(errors))
    share = "undefined (nothing audited)"
    if summary.share is not None and summary.low is not None and summary.high is not None:
        share = f"{100 * summary.share:.1f}% (95% Wilson {100 * summary.low:.1f}-{100 * summary.high:.1f}%)"
    print(f"{summary.benchmark}: {summary.rejecting} of {summary.audited} audited instances reject a correct "
          f"fix: {share}; gold rejected {summary.gold_rejected}, nothing to rewrite {summary.no_rewrite}, "
          f"flaky {summary.flaky}, errors {summary.errors}")
    if out:
        record = {"summary": summary.to_dict(), "errors": errors,
                  "instances": [{"instance_id": a.instance_id, "outcome": a.outcome, "fixes": a.fixes,
                                 "rejections": [vars(r) for r in a.rejections],
                                 "flaky": [vars(r) for r in a.flaky], "gold_failing": list(a.gold_failing)}
                                for a in audits]}
        Path(out).write_text(json.dumps(record, indent=1, default=list) + "\n", encoding="utf-8")
    return 1 if errors and not audits else 0


def out_problem(out: str) -> str | None:
    """Why ``--out`` (a JSON file to write) cannot be written, naming its absolute path: it is
    a folder, or the folder it would go in is not an existing folder; else None."""
    path = Path(out).expanduser().absolute()
    if path.is_dir():
        return f"--out {path} is a folder; give a file to write, e.g. --out {path / 'audit.json'}"
    if not path.parent.is_dir():
        return f"--out {path}: {path.parent} is not an existing folder; create it or give another file"
    return None
