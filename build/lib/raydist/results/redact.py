"""Keep secrets out of every output: trajectories, rows, logs.

API keys reach raydist only through the environment; anything written to disk passes
through ``redact`` first, which blanks fields named like credentials and every occurrence
of the value of a credential-like environment variable.
"""

from __future__ import annotations

import os
import re
from typing import Any

_SECRET_FIELD = re.compile(r"(api[_-]?key|authorization|secret|token|password)$", re.I)
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$")
MASK = "<redacted>"


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of credential-like environment variables (names ending in KEY, TOKEN, SECRET,
    PASSWORD), longest first, ignoring values shorter than 8 characters."""
    env = os.environ if environ is None else environ
    vals = {v for k, v in env.items() if _SECRET_ENV.search(k) and v and len(v) >= 8}
    return sorted(vals, key=len, reverse=True)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """A copy of ``value`` (nested dicts/lists/strings) with credential fields masked and
    secret values replaced by ``<redacted>``. Token-count fields (``*_tokens``) are kept."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and _SECRET_FIELD.search(k) and not k.endswith("tokens") and isinstance(v, str):
                out[k] = MASK
            else:
                out[k] = redact(v, secrets)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, MASK)
        return value
    return value
