"""raydist: evaluate code LLMs and coding agents on dynamic problems and dynamic repository views.

The small public API, one name per step of a run (each is loaded on first use, so
``import raydist`` imports neither Ray, Docker nor litellm)::

    load_instances(source) -> list[Instance]                       raydist.tasks
    RunUnit(instance_id, instance_hash, model, agent, level, seed, config_hash, attempt=0)
                                                                    raydist.cluster.unit_key
    build_view(instance, repo, level, seed) -> View                 raydist.views
    NamespaceTranslator, recover_patch(original, final) -> str      raydist.views
    connect(provider) -> SandboxProvider                            raydist.sandbox
    provider.create(image, limits=Limits()) -> Sandbox              raydist.sandbox
    run_agent(view=, sandbox=, endpoint=, settings=)                raydist.agents
    grade(provider, instance, image, patch) -> GradeResult          raydist.grading
    pass_at_k(n, c, k), dypass_at_k(results, k)                     raydist.problems.metrics
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "Instance": "raydist.tasks",
    "load_instances": "raydist.tasks",
    "RunUnit": "raydist.cluster.unit_key",
    "View": "raydist.views",
    "ViewOptions": "raydist.views",
    "RepoFiles": "raydist.views",
    "build_view": "raydist.views",
    "recover_patch": "raydist.views",
    "NamespaceTranslator": "raydist.views",
    "Sandbox": "raydist.sandbox",
    "Limits": "raydist.sandbox",
    "ModelEndpoint": "raydist.models",
    "run_agent": "raydist.agents",
    "grade": "raydist.grading",
    "pass_at_k": "raydist.problems.metrics",
    "mean_pass_at_k": "raydist.problems.metrics",
    "dypass_at_k": "raydist.problems.metrics",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562); raises AttributeError for
    any other name."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'raydist' has no attribute {name!r}; its public names are {', '.join(__all__)}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
