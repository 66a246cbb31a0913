"""Optional dependencies: modules that only some nodes install, imported on first use.

A CPU worker installs raydist's core only; the embedded model server, the analysis models and
vLLM come with the extras ``local``, ``analysis`` and ``gpu`` (pyproject.toml). A module that
needs one imports it through ``require`` so that importing raydist never needs the extra and a
missing one is reported with the command that installs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtra(ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` (e.g. ``"sentence_transformers"``), which the extra ``extra`` installs.

    Raises ``MissingExtra`` (a ``ModuleNotFoundError``) with ``purpose`` and the install command,
    e.g. ``semantic similarity needs sentence_transformers, from the analysis extra:
    pip install 'raydist[analysis]'``. Other import errors (a broken install) propagate."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or module.split(".")[0] != exc.name.split(".")[0]:
            raise  # the module exists but one of its own imports is missing: not ours to rename
        raise MissingExtra(f"{purpose} needs {module}, from the {extra} extra: pip install 'raydist[{extra}]'",
                           name=module) from exc
