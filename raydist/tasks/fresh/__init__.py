"""Fresh instances: bugs injected into recent PyPI releases, kept when the release's own tests
catch them (``raydist tasks build``; README "Fresh tasks").

Names load from their modules on first use (PEP 562), so the pure ones (``keep_or_drop``,
``scan_tree``) load neither Docker nor litellm.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "BuildSettings": "build", "LibraryReport": "build", "StatementModel": "build", "build_library": "build",
    "REASONS": "keep", "Verdict": "keep", "keep_or_drop": "keep",
    "KINDS": "mutations", "Mutation": "mutations", "scan_tree": "mutations",
    "Release": "releases", "pick_release": "releases",
    "Statement": "statement", "check_statement": "statement", "write_statement": "statement",
}

__all__ = sorted(_PUBLIC)  # noqa: PLE0605 - as raydist/__init__.py


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use; AttributeError for any other name."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'raydist.tasks.fresh' has no attribute {name!r}; its public names are "
                             f"{', '.join(__all__)}")
    value = getattr(importlib.import_module(f"raydist.tasks.fresh.{_PUBLIC[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
