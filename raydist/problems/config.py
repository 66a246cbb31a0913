"""The settings of a DyCodeEval launch, their defaults and what each means: the one source of
them. ``raydist/conf/problems.yaml`` only selects config groups (benchmark, sandbox, cluster)
and may override a value; Hydra composes, then :func:`settings_from` checks the result.

The models are registered in Hydra's ConfigStore (:func:`register`) as the node
``problems_defaults``, so every key below exists for a command-line override
(``generation.variants_per_seed=5``) without a ``+``. Groups shared with the repository
launcher (``benchmark``, ``sandbox``, ``cluster``, ``local_models``) are passed through as
mappings: their defaults are the repository launcher's, given to :func:`register` by the
entry (``raydist.launch_problems``), which also checks ``sandbox`` and ``cluster`` by that
launcher's own schema; the others are checked where they are used.

A wrong type or an unknown key is a :class:`SettingError` naming the key and what it takes;
the launcher prints it and exits 2 before anything starts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from hydra.core.config_store import ConfigStore
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from raydist._util.folders import CACHE_DIR, DATA_ROOT, OUTPUT_ROOT
from raydist._util.storage import StorageError, check_storage_uri

__all__ = ["Analysis", "BudgetSection", "Evaluation", "Execution", "Generation", "ProblemsSettings", "Requests",
           "SettingError", "defaults", "register", "settings_from"]

PIPELINES = ("full", "generate", "evaluate")
BASELINES = ("char_noise", "token_noise", "demo_deletion", "doc_to_comments", "variable_rename", "function_rename")


class SettingError(ValueError):
    """A setting of the launch is wrong; ``str()`` names the key, the value and what to give."""


def _whole(default: int, least: int) -> Any:
    return Field(default, ge=least, json_schema_extra={"give": f"give a whole number of at least {least}"})


def _number(default: float, *, positive: bool) -> Any:
    bound = {"gt": 0} if positive else {"ge": 0}
    return Field(default, **bound, json_schema_extra={
        "give": f"give a number {'above' if positive else 'of at least'} 0"})


def _own(message: str) -> PydanticCustomError:
    """An error whose text is the whole message the user sees."""
    return PydanticCustomError("raydist", "{message}", {"message": message})


def _as_tuple(value: Any) -> Any:
    """One name given alone counts as a list of one; a list becomes a tuple (the models are frozen)."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return (value,)
    return tuple(value) if isinstance(value, list) else value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True)


class Generation(_Section):
    """The variant generator: DyCodeEval's four agents (§3.2) on one LLM."""

    model: str = Field("gemma3-270m", json_schema_extra={"give": "give a model name"})
    """The LLM behind the four agents: a ``local_models`` entry or any litellm model name."""
    variants_per_seed: int = _whole(2, 1)
    """Variants per seed problem (generation seeds 0..N-1); §4.1 uses many more with a large model."""
    scenarios: int = _whole(12, 1)
    """Size of the scenario pool the proposer grows from ``domains`` (§3.2)."""
    domains: tuple[str, ...] = Field(("retail", "healthcare", "logistics", "education", "finance", "gaming",
                                      "agriculture", "social media"), json_schema_extra={"give": "give a list"})
    """Seed domains of the scenario pool; they are its first scenarios."""
    temperature: float = _number(0.7, positive=False)
    """Sampling temperature of every agent call."""
    seed: int = _whole(0, 0)
    """Request seed of the scenario proposer."""
    prompts_dir: str = Field("conf/prompts", json_schema_extra={"give": "give a folder"})
    """Folder of the agents' prompt templates; a relative path is taken from the package folder."""

    @field_validator("domains", mode="before")
    @classmethod
    def _domains(cls, value: Any) -> Any:
        value = _as_tuple(value)
        if isinstance(value, tuple) and (not value or not all(isinstance(d, str) and d.strip() for d in value)):
            raise _own(f"generation.domains={list(value)!r}: give at least one seed domain, e.g. [retail]")
        return value


class Evaluation(_Section):
    """The models under test and their sampling (§5)."""

    models: tuple[str, ...] = Field(("gemma3-270m",), json_schema_extra={"give": "give a list, e.g. [a,b]"})
    """Models under test: ``local_models`` entries or litellm names; [] evaluates nothing."""
    n: int = _whole(2, 1)
    """Completions per prompt (seed or variant)."""
    temperature: float = _number(0.8, positive=False)
    """Sampling temperature of the models under test."""
    max_tokens: int = _whole(320, 1)
    """Longest answer asked of a model under test, in tokens."""
    k: tuple[Annotated[int, Field(ge=1)], ...] = Field((1,), json_schema_extra={
        "give": "give a whole number of at least 1"})
    """The k of pass@k and DyPass@k (each at most ``n``)."""

    @field_validator("models", "k", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return _as_tuple(value)

    @field_validator("k")
    @classmethod
    def _some_k(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value:
            raise _own("evaluation.k=[]: give the k of pass@k and DyPass@k, e.g. evaluation.k=[1]")
        return value

    @model_validator(mode="after")
    def _k_within_n(self) -> Evaluation:
        if any(k > self.n for k in self.k):
            raise _own(f"evaluation.k={list(self.k)} asks for more samples than evaluation.n={self.n}; raise n or "
                       "lower k")
        return self


class Execution(_Section):
    """Limits of one model-written program in the sandbox (``raydist.problems.execute.ExecLimits``)."""

    cpu_seconds: int = _whole(5, 1)
    """CPU seconds (RLIMIT_CPU): busy loops."""
    wall_seconds: float = _number(10.0, positive=True)
    """Wall-clock seconds: sleeping or blocked programs."""
    memory_mb: int = _whole(512, 1)
    """Address space in MB (RLIMIT_AS): huge allocations."""
    max_processes: int = _whole(64, 1)
    """Processes and threads of the program's user (RLIMIT_NPROC): fork bombs."""
    workers: int = _whole(1, 1)
    """Sandboxes one evaluation task runs its programs in, side by side."""

    def limits(self) -> dict[str, Any]:
        """The ``ExecLimits`` keyword arguments."""
        return self.model_dump(exclude={"workers"})


class Requests(_Section):
    """Time one model request may take: ``timeout_base_s + max_tokens / min_tokens_per_s``
    seconds (``raydist.models.completion.request_timeout``); a request that times out is
    retried, then recorded as a failed call."""

    timeout_base_s: float = _number(120.0, positive=True)
    """Seconds every request may take, whatever its length."""
    min_tokens_per_s: float = _number(4.0, positive=True)
    """The slowest generation speed waited for (a CPU server answering a long rewrite)."""


class BudgetSection(_Section):
    """The most one launch may spend on model calls (generation and evaluation); null: no
    bound (``raydist.models.admission.Budget``). Once spent, no new item starts; the summary
    counts the items not started, and the same command with a larger budget runs them."""

    usd: float | None = Field(None, ge=0, json_schema_extra={"give": "give a number of at least 0, or null"})
    """US dollars (litellm's prices; local models cost 0)."""
    tokens: int | None = Field(None, ge=0, json_schema_extra={"give": "give a whole number of at least 0, or null"})
    """Prompt plus completion tokens as the model servers report them."""


class Analysis(_Section):
    """The tables beyond pass@k: human check export and diversity baselines (§4.4)."""

    human_check: int = _whole(10, 0)
    """Seed/variant pairs exported to ``human_check.csv`` for human verification (Appendix D)."""
    baselines: tuple[str, ...] = Field(BASELINES, json_schema_extra={"give": "give a list"})
    """Rule-based perturbations compared in the diversity table (``raydist.analysis.baselines``)."""

    @field_validator("baselines", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        value = _as_tuple(value)
        unknown = [b for b in value if b not in BASELINES] if isinstance(value, tuple) else []
        if unknown:
            raise _own(f"analysis.baselines: unknown perturbation(s) {', '.join(map(str, unknown))}; choose from "
                       f"{', '.join(BASELINES)}")
        return value


class ProblemsSettings(_Section):
    """Everything a DyCodeEval launch is configured by."""

    pipeline: Literal["full", "generate", "evaluate"] = "full"
    """Which phases run: ``full`` (generate, validate, execute, report), ``generate``
    (variants only), ``evaluate`` (variants of an earlier run, then the models and the report)."""
    generation: Generation = Generation()
    """The variant generator."""
    evaluation: Evaluation = Evaluation()
    """The models under test."""
    execution: Execution = Execution()
    """Sandbox limits of one program."""
    requests: Requests = Requests()
    """Model request time limits."""
    analysis: Analysis = Analysis()
    """Extra tables."""
    budget: BudgetSection = BudgetSection()
    """What the launch's model calls may spend."""
    data_root: str = DATA_ROOT
    """Folder of shared reference data (MBPP's file); an interpolation Hydra resolves."""
    cache_dir: str = CACHE_DIR
    """Folder of the LLM answer cache (``<cache_dir>/problems/llm``), shared by every launch."""
    output_root: str = OUTPUT_ROOT
    """Folder of the run directories (``<output_root>/problems/<benchmark>/<generator>``)."""
    storage: str | None = None
    """Where run directories and the answer cache are kept besides this disk: a folder or a URI
    ``pyarrow.fs`` opens (the main job's ``storage``; ``raydist._util.storage``): the run
    directory is mirrored to ``<storage>/problems/...`` and answers are cached in
    ``<storage>/_cache/problems/llm``. null: the driver's disk only."""
    benchmark: dict = Field(default_factory=dict, strict=False)
    """The benchmark group (``conf/benchmark``): name, kind, dataset, source, ids, limit."""
    sandbox: dict = Field(default_factory=dict, strict=False)
    """The sandbox group (``conf/sandbox``): docker_host, base_image..."""
    cluster: dict = Field(default_factory=dict, strict=False)
    """The cluster group (``conf/cluster``): Ray address, max_concurrency, cpus_per_unit."""
    local_models: dict = Field(default_factory=dict, strict=False)
    """Models raydist serves itself (``conf/local_models.yaml``)."""

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_storage_uri(value)
            except StorageError as exc:
                raise _own(str(exc)) from None
        return value

    @field_validator("output_root")
    @classmethod
    def _output_root(cls, value: str) -> str:
        if not value.strip():
            raise _own("output_root is empty: give a folder for the run directories (default: runs)")
        return value


SECTIONS = ("generation", "evaluation", "execution", "requests", "analysis", "budget")
SHARED_GROUPS = ("benchmark", "sandbox", "cluster")
FOLDERS = ("data_root", "cache_dir", "output_root", "storage")


def defaults(shared: dict | None = None) -> dict:
    """The problems settings with their defaults, as the plain data Hydra's ConfigStore holds;
    ``shared`` gives the defaults of the groups ``SHARED_GROUPS`` and of ``FOLDERS`` (the
    repository launcher's, from the entry), whose files then only select and override."""
    values = ProblemsSettings().model_dump(mode="json", include={"pipeline", *SECTIONS, *SHARED_GROUPS, *FOLDERS})
    return {**values, **(shared or {})}


def register(shared: dict | None = None) -> None:
    """Store :func:`defaults` (``shared`` as there) in Hydra's ConfigStore as
    ``problems_defaults`` (problems.yaml lists it first in its defaults)."""
    ConfigStore.instance().store(name="problems_defaults", node=defaults(shared))


def settings_from(data: dict) -> ProblemsSettings:
    """Check the composed, resolved config ``data`` (a plain dict; Hydra's own ``hydra`` node
    excluded). Raises :class:`SettingError` with one line for the first wrong setting."""
    try:
        return ProblemsSettings.model_validate(data)
    except ValidationError as exc:
        raise SettingError(_message(exc.errors()[0])) from None


def _message(error: dict) -> str:
    """One line for a pydantic error: our own text, or ``key=value: what to give``."""
    if error["type"] == "raydist":
        return error["ctx"]["message"]
    loc = [part for part in error["loc"] if isinstance(part, str)]
    key = ".".join(loc)
    model, info = ProblemsSettings, None
    for part in loc:
        fields = model.model_fields if isinstance(model, type) and issubclass(model, BaseModel) else {}
        if part not in fields:
            allowed = ", ".join(fields)
            where = ".".join(loc[:-1]) or "the launch"
            return f"{key}: unknown setting; {where} takes {allowed}"
        info = fields[part]
        model = info.annotation
    value = error.get("input")
    value = list(value) if isinstance(value, tuple) else value
    if error["type"] == "literal_error":
        return f"{key}={value!r}: choose one of {', '.join(PIPELINES)}"
    extra = info.json_schema_extra if info is not None and isinstance(info.json_schema_extra, dict) else {}
    if isinstance(model, type) and issubclass(model, BaseModel):
        return f"{key}={value!r}: give a mapping of {', '.join(model.model_fields)}"
    return f"{key}={value!r}: {extra.get('give') or error['msg']}"
