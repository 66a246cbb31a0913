"""``raydist tasks build``: fresh instances (``raydist.tasks.fresh``) from recent PyPI releases,
with the problem statements written by a model served as every launch serves it.

The model is a ``local_models`` entry (default the embedded Gemma 3 270M, started under a local
Ray by ``raydist.cluster.serving.serve_model`` and stopped at the end), any litellm model name,
or ``none`` (every statement is then the recorded test-output fallback).
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from raydist.prompts import PACKAGE_ROOT
from raydist.tasks.fresh.keep import REASONS

# Only the pure rejection table at import: `raydist --help` loads neither Docker nor litellm.
from raydist.tasks.fresh.releases import ReleaseNotFound
from raydist.tasks.fresh.store import log_path

if TYPE_CHECKING:
    from raydist.tasks.fresh.build import LibraryReport  # deferred: docker

DEFAULT_OUT = "runs/fresh_tasks/instances.jsonl"
DEFAULT_MODEL = "gemma3-270m"

EPILOG = """\
Each library's newest final sdist uploaded on or after --released-after (or NAME==VERSION) is
fetched from PyPI, its tests run twice on the release (and once in its instance image, unless
--no-container-check), then candidate bugs (libcst: flip_comparison, drop_branch, off_by_one,
swap_arguments, swap_and_or, invert_return) are tried in a seeded order. A bug is kept when some
tests that pass on the release fail with it and every other one still passes, twice alike.

Written: OUT (SWE-bench fields + raydist's recipe: sdist, install, injected_patch, test_cmd;
plus created_at, fresh (release provenance), mutation, statement (who wrote it)),
OUT minus .jsonl plus .log.jsonl (one line per candidate tried, with its verdict) and
.summary.json (per library: tried, kept, rejected by reason, seconds). Running the same
command again resumes: candidates already in the log are not tried again.

Rejection reasons:
{reasons}

Run the instances:  raydist run benchmark=fresh benchmark.source=OUT agent=oracle levels=[L0]
Exit status: 0 every library gave --per-library instances, 1 some gave fewer, 2 a usage error.
"""


def add_parser(sub) -> None:
    """Add ``tasks build`` to ``raydist``'s subcommands ``sub``."""
    reasons = "\n".join(f"  {name:<21} {text}" for name, text in REASONS.items())
    tasks = sub.add_parser("tasks", help="Make benchmark instances.", allow_abbrev=False)
    tasks_sub = tasks.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = tasks_sub.add_parser(
        "build", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="Build fresh SWE-bench-format instances by injecting bugs into recent PyPI releases.",
        description="Build SWE-bench-format instances no model can have seen: bugs injected into recent PyPI "
                    "releases, kept only when the release's own tests catch them, with problem statements "
                    "written by a model from the failing tests' output.",
        epilog=EPILOG.format(reasons=reasons))
    build.add_argument("--libraries", required=True, metavar="NAME[==VERSION],...",
                       help="PyPI projects, comma-separated (pure Python, tests in the sdist)")
    build.add_argument("--released-after", type=date.fromisoformat, metavar="YYYY-MM-DD",
                       help="only sdists uploaded on or after this day (default: any)")
    build.add_argument("--per-library", type=int, default=8, metavar="N", help="instances per library (default 8)")
    build.add_argument("--seed", type=int, default=0, help="orders the candidates, seeds the model (default 0)")
    build.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help=f"instances file (default {DEFAULT_OUT})")
    build.add_argument("--model", default=DEFAULT_MODEL,
                       help="writes the statements: a local_models entry, a litellm name, or none (default "
                            f"{DEFAULT_MODEL}, the embedded model)")
    build.add_argument("--statement-attempts", type=int, default=2, metavar="N",
                       help="model answers tried per statement before the test-output fallback (default 2)")
    build.add_argument("--max-tries", type=int, default=80, metavar="N", help="candidates per library at most")
    build.add_argument("--max-fail-fraction", type=float, default=0.5, metavar="F",
                       help="a bug may fail at most this share of the passing tests (default 0.5)")
    build.add_argument("--timeout", type=float, default=300, metavar="S", help="seconds per test run (default 300)")
    build.add_argument("--test-cmd", action="append", default=[], metavar="NAME=COMMAND",
                       help="the test command of a library whose tests are not found (repeatable)")
    build.add_argument("--no-container-check", action="store_true",
                       help="skip the release's test run in its instance image (needs no Docker; tests that "
                            "pass only on the host may then make instances the oracle cannot resolve)")
    build.add_argument("--work", type=Path, help="scratch folder (default: the system's temporary folder)")
    build.add_argument("--sandbox-provider", default="docker", metavar="NAME",
                       help="sandbox provider of the container check (sandbox.provider; default docker)")


def main(args: argparse.Namespace) -> int:
    """Build every library of ``args.libraries``; print one line per candidate and a summary."""
    from raydist.tasks.fresh.build import BuildSettings, build_library  # deferred: docker

    settings = BuildSettings(
        released_after=args.released_after, per_library=args.per_library, seed=args.seed, max_tries=args.max_tries,
        max_fail_fraction=args.max_fail_fraction, timeout=args.timeout, statement_attempts=args.statement_attempts,
        test_cmds=dict(_pair(p) for p in args.test_cmd), **({"work": args.work} if args.work else {}))
    specs = [s.strip() for s in args.libraries.split(",") if s.strip()]
    reports: list[LibraryReport] = []
    from raydist.tasks.fresh.build import LibraryError  # deferred: docker

    failed: list[str] = []
    with ExitStack() as stack:
        model = stack.enter_context(statement_model(args.model))
        container = None if args.no_container_check else _container(settings.work, args.sandbox_provider)
        for spec in specs:
            try:
                reports.append(build_library(spec, settings, model, args.out, container))
            except (ReleaseNotFound, LibraryError) as exc:  # the library's, not the build's: go on with the next
                failed.append(spec)
                print(f"raydist tasks build: error: {spec}: {exc}; the other libraries are built, rerun with a "
                      "fixed --libraries to add it", file=sys.stderr, flush=True)
    summary = write_summary(args.out, reports)
    print(summary)
    if failed:
        return 2
    return 0 if all(r.kept >= settings.per_library for r in reports) else 1


@contextmanager
def statement_model(name: str):
    """The ``StatementModel`` of ``name`` for the duration of the block (a local model's server
    started under a local Ray and stopped after)."""
    from raydist.tasks.fresh.build import StatementModel  # deferred: docker
    from raydist.tasks.fresh.statement import load_template  # deferred: litellm

    template = load_template()
    if name == "none":
        yield StatementModel(None, None, template)
        return
    from omegaconf import OmegaConf

    from raydist.cluster.serving import serve_for_command  # deferred: docker
    from raydist.models.completion import litellm_complete  # deferred: litellm

    local = OmegaConf.to_container(OmegaConf.load(PACKAGE_ROOT / "conf" / "local_models.yaml").local_models,
                                   resolve=True)
    with serve_for_command(name, local.get(name)) as endpoint:
        # A small model on a busy CPU decodes at a token or two a second: give a request that long.
        complete = litellm_complete(endpoint, temperature=0.7, timeout=60, min_tokens_per_s=1, retries=2)
        yield StatementModel(complete, name, template)


def _container(work: Path, provider: str = "docker"):
    from raydist.tasks.measure import docker_runner, statuses  # deferred: docker

    run = docker_runner(work, provider=provider)
    return lambda instance: statuses(run, instance, "")


def write_summary(out: Path, reports: list[LibraryReport]) -> str:
    """Write ``<out>.summary.json`` and return its Markdown table."""

    rows = [asdict(r) for r in reports]
    path = out.with_name(out.name.removesuffix(".jsonl") + ".summary.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2, default=str) + "\n", encoding="utf-8")
    lines = ["| library | version | uploaded | passing tests | candidates | tried | kept | rejected | seconds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in reports:
        rejected = ", ".join(f"{k} {v}" for k, v in r.rejected.items()) or "-"
        lines.append(f"| {r.release.name} | {r.release.version} | {r.release.upload_time[:10]} | {r.base_passing} | "
                     f"{r.candidates} | {r.tried} | {r.kept} | {rejected} | {r.seconds} |")
    unparsed = [f"{r.release.name}: {u.file} ({u.error})" for r in reports for u in r.unparsed]
    tail = f"\nNot parsed by libcst (skipped): {'; '.join(unparsed)}" if unparsed else ""
    return "\n".join(lines) + f"\n\n{out} ({log_path(out).name}, {path.name}){tail}"


def _pair(text: str) -> tuple[str, str]:
    name, sep, cmd = text.partition("=")
    if not sep or not cmd.strip():
        raise SystemExit(f"raydist tasks build: --test-cmd {text!r}: expected NAME=COMMAND")
    return name.strip(), cmd.strip()
