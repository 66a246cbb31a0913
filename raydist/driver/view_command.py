"""``raydist view INSTANCE --level L --seed S --out DIR``: one view written out as the agent would
see it, without running an agent (SchrodingerRepo §III: what a reviewer of a view-based result
asks to look at).

The settings are the main job's (``raydist/conf``, the same overrides as ``raydist run``:
``benchmark=...``, ``view.l3_files=all``...), checked the same way. The view is built as a unit
builds it (``raydist.cluster.unit_image`` for the repository, ``raydist.views.build_view``), with
the preparations made here, offline: L1 is the seeded rule restatement (no view model is called,
so ``statement_source`` is ``rule``) and L4 the deterministic libcst rewrites, each kept only when
the instance's tests pass on its image (Docker). A launch with a capable view model may show an
LLM paraphrase or LLM rewrites instead; those are in its ``cache_dir/views`` records.
"""

from __future__ import annotations

import sys
from pathlib import Path

from raydist.agents.settings import AgentSettings
from raydist.cluster.prepare import PrepTask, prepared_for, run_preparation
from raydist.cluster.unit_image import UnitSettings, unit_image
from raydist.driver.benchmark import load_benchmark
from raydist.driver.config import ConfigError
from raydist.driver.preflight import checked_config
from raydist.views import build_view, level_specs, levels_needing
from raydist.views.export import REPO, view_diff, write_view


class ViewCommandError(ValueError):
    """An input of ``raydist view`` that cannot be used; the message names it and what to do."""


def view_main(instance_id: str, level: str, seed: int, out: str, overrides: list[str], *, diff: bool = False,
              with_mapping: bool = False) -> int:
    """Write the view (``raydist.views.export.write_view``) and print its folder, then with
    ``diff`` the difference from L0 (``view_diff``). Returns 0, or 2 with one line on stderr
    naming the bad input (settings, instance id, level, seed, ``--out``), or 1 when the
    machine fails (Docker, an image that does not build)."""
    try:
        cfg, instance = _settings_and_instance(instance_id, level, seed, out, overrides)
    except (ConfigError, ViewCommandError) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 2
    try:
        view, repo = build_offline_view(cfg, instance, level, seed)
    except Exception as exc:  # noqa: BLE001 - one line for the user, whatever failed below
        print(f"raydist: error: the view of {instance_id} at {level} seed {seed} could not be built: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    target = Path(out)
    write_view(view, repo, target, benchmark=str(cfg.benchmark.name), with_mapping=with_mapping)
    print(target)
    if diff:
        print(view_diff(repo.root, target / REPO, statement=(instance.problem_statement, view.problem_statement)),
              end="")
    return 0


def _settings_and_instance(instance_id: str, level: str, seed: int, out: str, overrides: list[str]):
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ViewCommandError(f"--out {target.resolve()} exists and is not an empty folder; give a new folder")
    if isinstance(seed, bool) or seed < 0:
        raise ViewCommandError(f"--seed {seed}: give a whole number >= 0")
    try:
        specs = level_specs([level])
    except ValueError as exc:
        raise ViewCommandError(f"--level {level}: {exc}") from None
    if specs != [level]:
        raise ViewCommandError(f"--level {level}: give one level (L0 ... L4, full, or a composition such as L1+L3)")
    cfg = checked_config(overrides)
    try:
        instances = {i.instance_id: i for i in load_benchmark(cfg.benchmark)}
    except (FileNotFoundError, ValueError) as exc:
        raise ViewCommandError(f"benchmark={cfg.benchmark.name}: {exc}") from None
    if instance_id not in instances:
        known = ", ".join(sorted(instances)[:8]) + (" ..." if len(instances) > 8 else "")
        raise ViewCommandError(f"instance {instance_id!r} is not in benchmark={cfg.benchmark.name} "
                               f"({len(instances)} instances: {known}); give one of its ids, or another benchmark=")
    return cfg, instances[instance_id]


def image_settings(cfg) -> UnitSettings:
    """What ``unit_image`` needs to build or find an instance's image under the checked settings
    ``cfg`` (a ``LaunchConfig``) outside a launch: its sandbox and cache folder; no agent runs."""
    return UnitSettings(agent_kind="null", agent_settings=AgentSettings(), view_options=cfg.view,
                        cache_dir=str(Path(cfg.cache_dir).resolve()), run_dir="", sandbox=cfg.sandbox)


def build_offline_view(cfg, instance, level: str, seed: int):
    """``(View, RepoFiles)`` of ``instance`` at ``level`` and ``seed`` under the checked settings
    ``cfg`` (a ``LaunchConfig``), prepared offline (module docstring). Raises what
    ``unit_image``, ``run_preparation`` and ``build_view`` raise (Docker, an image that does not
    build, an instance L4 cannot gate)."""
    settings = image_settings(cfg)
    image = unit_image(instance, settings, tested=False)
    sandbox = cfg.sandbox
    records = {kind: run_preparation(PrepTask(instance.instance_id, seed, kind), instance, cfg.view,
                                     cache_dir=settings.cache_dir, grading_timeout_s=float(sandbox.grading_timeout_s),
                                     provider=sandbox.provider, docker_host=sandbox.address,
                                     base_image=sandbox.base_image,
                                     limits=sandbox.limits, image_namespace=sandbox.image_namespace)
               for kind in sorted(levels_needing(level))}
    view = build_view(instance, image.repo, level, seed, cfg.view, prepared_for(level, records))
    return view, image.repo
