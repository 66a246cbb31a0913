"""An image in SWE-bench's official layout, built offline from one of raydist's own images.

SWE-bench's instance images (``swebench/sweb.eval.x86_64.<id>:latest``) hold the repository at
``/testbed`` at its base commit and a conda environment ``testbed`` under ``/opt/miniconda3``,
which the eval script activates (``source /opt/miniconda3/bin/activate; conda activate
testbed``). Where no registry is reachable, this builds that layout from the image raydist
builds for a row with an ``sdist`` recipe (``raydist.sandbox.images``): its ``/opt/venv`` is
placed at ``/opt/miniconda3/envs/testbed`` behind a small ``activate`` script defining
``conda activate``; ``refs/replace/<base_commit>`` points the upstream commit id at the
image's own base commit, so ``git checkout <base_commit> <files>`` works as upstream; the tag
is the official name. The row written with it is SWE-bench 5.x's schema (``image``,
``eval_script`` in the classic eval-script shape, ``log_parser``, ``eval_type``) and carries
no recipe, so raydist runs and grades it through the official path
(``raydist.sandbox.official``, ``raydist.grading.official``).

    python -m raydist.tasks.official_build ROWS.jsonl INSTANCE_ID OUT.jsonl [--cache-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from raydist.grading.rules import log_parser_for
from raydist.grading.test_files import touched_files
from raydist.sandbox import SandboxProvider, as_provider, connect
from raydist.sandbox.build_steps import AGENT_USER, VENV
from raydist.sandbox.images import ensure_instance_image
from raydist.sandbox.official import DEFAULT_NAMESPACE
from raydist.tasks.loaders import load_instances

HEREDOC = "EOF_114329324912"  # the delimiter swebench's eval scripts use for the test patch
RECIPE_FIELDS = ("sdist", "install", "install_repo", "injected_patch", "python", "test_cmd")
ACTIVATE = ('conda() { if [ "$1" = activate ]; then export VIRTUAL_ENV=/opt/miniconda3/envs/"${2:-testbed}"; '
            'export PATH="$VIRTUAL_ENV/bin:$PATH"; fi; }')


def eval_script(instance) -> str:
    """The classic SWE-bench eval script of ``instance`` (swebench 4.x
    ``make_eval_script_list``'s shape): activate ``testbed``, show the state, put the test
    files back to ``base_commit``, apply ``test_patch`` from a here-document, run the test
    command between the ``>>>>> Start/End Test Output`` markers (traced by ``set -x``), put
    the test files back again."""
    files = " ".join(shlex.quote(f) for f in touched_files(instance.test_patch))
    reset = f"git checkout {instance.base_commit} {files}"
    patch = instance.test_patch if instance.test_patch.endswith("\n") else instance.test_patch + "\n"
    lines = ["#!/bin/bash", "set -uxo pipefail", "source /opt/miniconda3/bin/activate", "conda activate testbed",
             "cd /testbed", "git config --global --add safe.directory /testbed", "cd /testbed", "git status",
             "git show", f"git -c core.fileMode=false diff {instance.base_commit}",
             "source /opt/miniconda3/bin/activate", "conda activate testbed", reset,
             f"git apply -v - <<'{HEREDOC}'\n{patch}{HEREDOC}", ": '>>>>> Start Test Output'",
             instance.require_test_cmd(), ": '>>>>> End Test Output'", reset]
    return "\n".join(lines) + "\n"


def official_row(instance, image: str, log_parser: str = "parse_log_pytest") -> dict:
    """``instance``'s row in SWE-bench 5.x's schema for ``image``: its official fields, the
    ``eval_script``, ``log_parser`` and ``eval_type`` (``pass_and_fail``), without the recipe."""
    row = {k: v for k, v in instance.to_record().items() if k not in RECIPE_FIELDS}
    return {**row, "image": image, "eval_script": eval_script(instance), "log_parser": log_parser,
            "eval_type": "pass_and_fail"}


def build_official_image(provider: SandboxProvider, instance, *, cache_dir: Path, base_tag: str | None = None,
                         namespace: str = DEFAULT_NAMESPACE) -> dict:
    """Build ``instance``'s image in the official layout (see the module docstring) from
    raydist's image of its recipe, tag it ``expected_image(instance_id, namespace)`` and
    return its 5.x row (``official_row``). Raises ``ValueError`` for a row without a recipe,
    ``raydist.sandbox.images.ImageBuildError`` / ``docker.errors.BuildError`` naming the step."""
    from swebench.task.checks import expected_image

    if instance.recipe is None:
        raise ValueError(f"instance {instance.instance_id!r} has no sdist recipe to build an image from")
    provider = as_provider(provider)
    own = ensure_instance_image(provider, instance.recipe, base_tag=base_tag, cache_dir=Path(cache_dir),
                                label=instance.instance_id)
    tag = expected_image(instance.instance_id, namespace)
    git = "git -c safe.directory='*' -C /testbed"
    dockerfile = "\n".join([
        f"FROM {own.tag}", "USER root",
        "RUN mkdir -p /opt/miniconda3/bin /opt/miniconda3/envs && "
        f"ln -s {VENV} /opt/miniconda3/envs/testbed && "
        f"printf '%s\\n' {shlex.quote(ACTIVATE)} > /opt/miniconda3/bin/activate && "
        f"{git} update-ref refs/replace/{instance.base_commit} HEAD && "
        f"chown -R {AGENT_USER}:{AGENT_USER} /testbed/.git",
        f"USER {AGENT_USER}", ""])
    provider.build_image(dockerfile, tag, labels={"raydist.role": "official-layout", "raydist.from": own.tag})
    return official_row(instance, tag, log_parser_for(instance)[0])


def main(argv: list[str] | None = None) -> int:
    """Command line: build the image of one row of ROWS.jsonl and append its 5.x row to OUT.jsonl."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows")
    parser.add_argument("instance_id")
    parser.add_argument("out")
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "raydist"))
    parser.add_argument("--provider", default="docker", help="sandbox provider to build with (sandbox.provider)")
    parser.add_argument("--address", help="its engine's address (sandbox.docker_host; default: the provider's)")
    args = parser.parse_args(argv)
    [instance] = load_instances(args.rows, ids=[args.instance_id])
    row = build_official_image(connect(args.provider, args.address), instance, cache_dir=Path(args.cache_dir))
    with open(args.out, "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
    print(f"{row['image']}\t{args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
