"""Running units on Ray: the units and their keys (``unit_key``), view preparation, the model a
launch serves, one unit's run (``unit``) and the task kinds it scores (``kinds``), the validity
gate's verdicts (``validity``), and the scheduler that runs, retries and resumes them.

Names are loaded on first use (PEP 562): importing the package imports no Ray.
"""

from __future__ import annotations

import importlib

_PUBLIC = {
    "RunUnit": "raydist.cluster.unit_key",
    "serve_model": "raydist.cluster.serving",
    "server_arguments": "raydist.cluster.serving",
    "server_command": "raydist.cluster.serving",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    """Load a public name from its module on first use; AttributeError for any other name."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'raydist.cluster' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
