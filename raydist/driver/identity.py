"""What decides a model's and a prompt folder's answers, as hashes that go into unit keys."""

from __future__ import annotations

from pathlib import Path

from raydist._util.hashing import file_sha256, stable_hash


class IdentityError(ValueError):
    """A model's weights or an agent's prompt files cannot be found; the message says which."""


def agent_prompts_digest(agent: str, agent_cfg: dict) -> str:
    """sha256 (16 hex) of the agent's prompt templates' bytes (``agents.<agent>.prompts_dir``).
    Raises ``IdentityError`` naming a missing file and the files the folder must hold."""
    from raydist.agents.settings import PROMPT_FILES, AgentSettings
    from raydist.prompts import resolve_prompts_dir

    folder = resolve_prompts_dir(agent_cfg.get("prompts_dir") or AgentSettings().prompts_dir)
    try:
        return stable_hash({name: file_sha256(folder / f"{name}.j2") for name in PROMPT_FILES})
    except FileNotFoundError as exc:
        raise IdentityError(f"agents.{agent}.prompts_dir={agent_cfg.get('prompts_dir')}: {exc.filename} is "
                            f"missing; the folder must hold {', '.join(f'{n}.j2' for n in PROMPT_FILES)}") from exc


def model_identity(model: str, local: dict | None, cache_dir: Path) -> str:
    """What decides a model's answers: its name, and for a model raydist serves its server
    command, settings and the sha256 of its weights file (``model_path``; ``embedded`` is the
    embedded Gemma GGUF; a path that is no file, e.g. a hub id for vLLM, counts as its name),
    cached by path, size and mtime under ``cache_dir`` so it is computed once per file."""
    if local is None:
        return model
    fields = {k: local.get(k) for k in ("litellm_model", "model_path", "command", "grammar_server")}
    path = weights_path(model, local.get("model_path"))
    if path is not None and path.is_file():
        fields["weights_sha256"] = file_sha256(path, cache=cache_dir / "file_hashes.json")
    return stable_hash(fields)


def weights_path(model: str, model_path) -> Path | None:
    """The weights file of ``local_models.<model>`` (``embedded``/empty: the packaged Gemma).
    Raises ``IdentityError`` when the embedded model's package is missing."""
    if model_path in (None, "", "embedded"):
        from raydist.models.local import embedded_model_path

        try:
            return Path(embedded_model_path())
        except RuntimeError as exc:
            raise IdentityError(f"local_models.{model}: {exc}") from exc
    return Path(str(model_path)).expanduser()
