"""What a unit runs with besides itself: its settings (``UnitSettings``) and the image it runs in
with the runner of its tests there (``UnitImage``, made by ``unit_image``).

Both kinds of task (``raydist.cluster.kinds``) and the unit's flow (``raydist.cluster.unit``)
read these; they live apart from both so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydist.cluster.errors import UnitInputError
from raydist.grading.official import has_eval_script, runner_for
from raydist.outcomes import InfrastructureError
from raydist.sandbox import SandboxProvider, ensure_instance_image
from raydist.sandbox.official import (
    OfficialImageMissing,
    ensure_official_image,
    official_image_name,
    official_repo_dir,
)
from raydist.sandbox.settings import SandboxSettings
from raydist.views import RepoFiles

if TYPE_CHECKING:  # imported where used: the sandbox's Limits loads Docker
    from raydist.agents.settings import AgentSettings
    from raydist.grading import TestRunner
    from raydist.qa.judge import JudgeSettings
    from raydist.tasks import Instance
    from raydist.views import RepoFiles, ViewOptions


@dataclass(frozen=True)
class UnitSettings:
    """Everything a unit needs besides the unit, the instance and the model endpoint; ``sandbox``
    is the launch's ``sandbox`` node itself (``raydist.sandbox.settings.SandboxSettings``). None
    of it is hashed here: the unit key hashes the composed config (``raydist.driver.plan``)."""

    agent_kind: str  # "llm" | "oracle" | "null"
    agent_settings: AgentSettings
    view_options: ViewOptions
    cache_dir: str
    run_dir: str
    sandbox: SandboxSettings = SandboxSettings()
    judge: JudgeSettings | None = None  # repository questions: who scores the answers (raydist.qa.judge)
    judge_endpoint: Any = None  # the served judge's ModelEndpoint (None until the launch serves it)


@dataclass(frozen=True)
class UnitImage:
    """The image a unit runs in: the sandbox ``provider`` (``raydist.sandbox.SandboxProvider``), the
    image ``tag``, the ``repo``
    (``raydist.views.RepoFiles`` of its /testbed) and ``tests``, the ``raydist.grading.TestRunner``
    of the instance's tests on that image (pytest + junit on raydist's image, or swebench's eval
    script on an official row's image)."""

    provider: SandboxProvider
    tag: str
    repo: RepoFiles
    tests: TestRunner



def unit_image(instance: Instance, settings: UnitSettings, tested: bool = True) -> UnitImage:
    """The ``UnitImage`` of ``instance``: raydist's own image of its sdist recipe, its tests run by
    pytest + junit (``raydist.grading.ContainerRunner``); or, for an official SWE-bench 5.x row (no
    recipe, an ``eval_script``), its official image (``raydist.sandbox.official``), its tests run by
    swebench's eval script and report (``raydist.grading.OfficialRunner``); the runner is
    ``raydist.grading.runner_for``'s. Raises ``UnitInputError`` for a row with
    neither, or without a test command when ``tested`` (its task kind runs tests), and
    ``InfrastructureError`` (cause ``official_image``) when the official image is neither here nor
    pullable."""
    if instance.recipe is None and has_eval_script(instance):
        client = settings.sandbox.connect()
        try:
            tag = ensure_official_image(client, instance, settings.sandbox.image_namespace)
        except OfficialImageMissing as exc:
            raise InfrastructureError(str(exc), cause="official_image") from None
        return UnitImage(client, tag, RepoFiles(official_repo_dir(client, tag, Path(settings.cache_dir))),
                         runner_for(client, instance, tag, timeout=settings.sandbox.grading_timeout_s,
                                    limits=settings.sandbox.limits))
    if instance.recipe is None:
        raise UnitInputError(
            f"instance {instance.instance_id!r} has no build recipe (sdist) and no eval_script: raydist builds an "
            "instance's image offline from a PyPI sdist and exact pins, or runs an official SWE-bench 5.x row "
            f"(image, eval_script, log_parser, eval_type) on its image (this row's is "
            f"{official_image_name(instance, settings.sandbox.image_namespace)}); "
            "give the row `sdist` and `install` fields as the rows of ../shared/data/swebench/offline.jsonl have, or "
            "use the dataset's 5.x rows", cause="no_recipe")
    if not instance.test_cmd and tested:  # a question is judged, not tested
        raise UnitInputError(f"instance {instance.instance_id!r} has no test_cmd; add one to the instance",
                             cause="no_test_cmd")
    client = settings.sandbox.connect()
    image = ensure_instance_image(client, instance.recipe, base_tag=settings.sandbox.base_image,
                                  cache_dir=Path(settings.cache_dir))
    tests = runner_for(client, instance, image.tag, timeout=settings.sandbox.grading_timeout_s,
                       limits=settings.sandbox.limits)
    return UnitImage(client, image.tag, RepoFiles(Path(image.repo_dir)), tests)

