"""The settings of a DyCodeEval launch, their defaults and what each means: the one source of
them. ``raydist/conf/problems.yaml`` only selects config groups (benchmark, sandbox, cluster)
and may override a value; Hydra composes, then :func:`settings_from` checks the result.

Each node is a frozen dataclass with one default and one docstring per field, as the main job's
settings (``raydist.driver.config``) and the recall probe's are; ``budget`` is
``raydist.models.admission.Budget`` itself. Their defaults are registered in Hydra's
ConfigStore (:func:`register`) as the node ``problems_defaults``, so every key below exists for
a command-line override (``generation.variants_per_seed=5``) without a ``+``. Groups shared with the repository
launcher (``benchmark``, ``sandbox``, ``cluster``, ``local_models``) are passed through as
mappings: their defaults are the repository launcher's, given to :func:`register` by the
entry (``raydist.launch_problems``), which also checks ``sandbox`` and ``cluster`` by that
launcher's own schema; the others are checked where they are used.

A wrong type or an unknown key is a :class:`SettingError` naming the key and what it takes;
the launcher prints it and exits 2 before anything starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from raydist._util.folders import CACHE_DIR, DATA_ROOT, OUTPUT_ROOT
from raydist._util.settings import node_types
from raydist._util.storage import StorageError, check_storage_uri
from raydist.models.admission import Budget, BudgetError

__all__ = ["Analysis", "Evaluation", "Execution", "Generation", "ProblemsSettings", "Requests", "SettingError",
           "defaults", "register", "settings_from"]

PIPELINES = ("full", "generate", "evaluate")
BASELINES = ("char_noise", "token_noise", "demo_deletion", "doc_to_comments", "variable_rename", "function_rename")


class SettingError(ValueError):
    """A setting of the launch is wrong; ``str()`` names the key, the value and what to give."""


def _refuse(key: str, value: Any, give: str) -> SettingError:
    value = list(value) if isinstance(value, tuple) else value
    return SettingError(f"{key}={value!r}: {give}")


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_whole(node: str, name: str, value: Any, least: int) -> None:
    if not _is_whole(value) or value < least:
        raise _refuse(f"{node}.{name}", value, f"give a whole number of at least {least}")


def _check_number(node: str, name: str, value: Any, *, positive: bool) -> None:
    if not _is_number(value) or (value <= 0 if positive else value < 0):
        raise _refuse(f"{node}.{name}", value, f"give a number {'above' if positive else 'of at least'} 0")


def _check_text(node: str, name: str, value: Any, give: str) -> None:
    if not isinstance(value, str):
        raise _refuse(f"{node}.{name}", value, give)


def _as_tuple(owner: Any, name: str, give: str, node: str) -> tuple:
    """``owner.name`` as a tuple: one name given alone counts as a list of one."""
    value = getattr(owner, name)
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = (value,)
    elif isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise _refuse(f"{node}.{name}", value, give)
    object.__setattr__(owner, name, value)
    return value


@dataclass(frozen=True)
class Generation:
    """The variant generator: DyCodeEval's four agents (§3.2) on one LLM."""

    model: str = "gemma3-270m"
    """The LLM behind the four agents: a ``local_models`` entry or any litellm model name."""
    variants_per_seed: int = 2
    """Variants per seed problem (generation seeds 0..N-1); §4.1 uses many more with a large model."""
    scenarios: int = 12
    """Size of the scenario pool the proposer grows from ``domains`` (§3.2)."""
    domains: tuple[str, ...] = ("retail", "healthcare", "logistics", "education", "finance", "gaming",
                                "agriculture", "social media")
    """Seed domains of the scenario pool; they are its first scenarios."""
    temperature: float = 0.7
    """Sampling temperature of every agent call."""
    seed: int = 0
    """Request seed of the scenario proposer."""
    prompts_dir: str = "conf/prompts"
    """Folder of the agents' prompt templates; a relative path is taken from the package folder."""

    def __post_init__(self) -> None:
        _check_text("generation", "model", self.model, "give a model name")
        _check_whole("generation", "variants_per_seed", self.variants_per_seed, 1)
        _check_whole("generation", "scenarios", self.scenarios, 1)
        domains = _as_tuple(self, "domains", "give a list", "generation")
        if not domains or not all(isinstance(d, str) and d.strip() for d in domains):
            raise SettingError(f"generation.domains={list(domains)!r}: give at least one seed domain, e.g. [retail]")
        _check_number("generation", "temperature", self.temperature, positive=False)
        _check_whole("generation", "seed", self.seed, 0)
        _check_text("generation", "prompts_dir", self.prompts_dir, "give a folder")


@dataclass(frozen=True)
class Evaluation:
    """The models under test and their sampling (§5)."""

    models: tuple[str, ...] = ("gemma3-270m",)
    """Models under test: ``local_models`` entries or litellm names; [] evaluates nothing."""
    n: int = 2
    """Completions per prompt (seed or variant)."""
    temperature: float = 0.8
    """Sampling temperature of the models under test."""
    max_tokens: int = 320
    """Longest answer asked of a model under test, in tokens."""
    k: tuple[int, ...] = (1,)
    """The k of pass@k and DyPass@k (each at most ``n``)."""

    def __post_init__(self) -> None:
        models = _as_tuple(self, "models", "give a list, e.g. [a,b]", "evaluation")
        for model in models:
            _check_text("evaluation", "models", model, "give a list, e.g. [a,b]")
        _check_whole("evaluation", "n", self.n, 1)
        _check_number("evaluation", "temperature", self.temperature, positive=False)
        _check_whole("evaluation", "max_tokens", self.max_tokens, 1)
        ks = _as_tuple(self, "k", "give a whole number of at least 1", "evaluation")
        for k in ks:
            _check_whole("evaluation", "k", k, 1)
        if not ks:
            raise SettingError("evaluation.k=[]: give the k of pass@k and DyPass@k, e.g. evaluation.k=[1]")
        if any(k > self.n for k in ks):
            raise SettingError(f"evaluation.k={list(ks)} asks for more samples than evaluation.n={self.n}; raise n "
                               "or lower k")


@dataclass(frozen=True)
class Execution:
    """Limits of one model-written program in the sandbox (``raydist.problems.execute.ExecLimits``)."""

    cpu_seconds: int = 5
    """CPU seconds (RLIMIT_CPU): busy loops."""
    wall_seconds: float = 10.0
    """Wall-clock seconds: sleeping or blocked programs."""
    memory_mb: int = 512
    """Address space in MB (RLIMIT_AS): huge allocations."""
    max_processes: int = 64
    """Processes and threads of the program's user (RLIMIT_NPROC): fork bombs."""
    workers: int = 1
    """Sandboxes one evaluation task runs its programs in, side by side."""

    def __post_init__(self) -> None:
        _check_whole("execution", "cpu_seconds", self.cpu_seconds, 1)
        _check_number("execution", "wall_seconds", self.wall_seconds, positive=True)
        _check_whole("execution", "memory_mb", self.memory_mb, 1)
        _check_whole("execution", "max_processes", self.max_processes, 1)
        _check_whole("execution", "workers", self.workers, 1)

    def limits(self) -> dict[str, Any]:
        """The ``ExecLimits`` keyword arguments."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "workers"}


@dataclass(frozen=True)
class Requests:
    """Time one model request may take: ``timeout_base_s + max_tokens / min_tokens_per_s``
    seconds (``raydist.models.completion.request_timeout``); a request that times out is
    retried, then recorded as a failed call."""

    timeout_base_s: float = 120.0
    """Seconds every request may take, whatever its length."""
    min_tokens_per_s: float = 4.0
    """The slowest generation speed waited for (a CPU server answering a long rewrite)."""

    def __post_init__(self) -> None:
        _check_number("requests", "timeout_base_s", self.timeout_base_s, positive=True)
        _check_number("requests", "min_tokens_per_s", self.min_tokens_per_s, positive=True)


@dataclass(frozen=True)
class Analysis:
    """The tables beyond pass@k: human check export and diversity baselines (§4.4)."""

    human_check: int = 10
    """Seed/variant pairs exported to ``human_check.csv`` for human verification (Appendix D)."""
    baselines: tuple[str, ...] = BASELINES
    """Rule-based perturbations compared in the diversity table (``raydist.analysis.baselines``)."""

    def __post_init__(self) -> None:
        _check_whole("analysis", "human_check", self.human_check, 0)
        baselines = _as_tuple(self, "baselines", "give a list", "analysis")
        unknown = [b for b in baselines if b not in BASELINES]
        if unknown:
            raise SettingError(f"analysis.baselines: unknown perturbation(s) {', '.join(map(str, unknown))}; "
                               f"choose from {', '.join(BASELINES)}")


@dataclass(frozen=True)
class ProblemsSettings:
    """Everything a DyCodeEval launch is configured by."""

    pipeline: str = "full"
    """Which phases run: ``full`` (generate, validate, execute, report), ``generate``
    (variants only), ``evaluate`` (variants of an earlier run, then the models and the report)."""
    generation: Generation = field(default_factory=Generation)
    """The variant generator."""
    evaluation: Evaluation = field(default_factory=Evaluation)
    """The models under test."""
    execution: Execution = field(default_factory=Execution)
    """Sandbox limits of one program."""
    requests: Requests = field(default_factory=Requests)
    """Model request time limits."""
    analysis: Analysis = field(default_factory=Analysis)
    """Extra tables."""
    budget: Budget = field(default_factory=Budget)
    """What the launch's model calls may spend (``raydist.models.admission.Budget``: ``usd`` in
    litellm's prices, local models cost 0; ``tokens``, prompt plus completion; null: no bound).
    Once spent, no new item starts; the summary counts the items not started, and the same
    command with a larger budget runs them."""
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
    benchmark: dict = field(default_factory=dict)
    """The benchmark group (``conf/benchmark``): name, kind, dataset, source, ids, limit."""
    sandbox: dict = field(default_factory=dict)
    """The sandbox group (``conf/sandbox``): docker_host, base_image..."""
    cluster: dict = field(default_factory=dict)
    """The cluster group (``conf/cluster``): Ray address, max_concurrency, cpus_per_unit."""
    local_models: dict = field(default_factory=dict)
    """Models raydist serves itself (``conf/local_models.yaml``)."""

    def __post_init__(self) -> None:
        if self.pipeline not in PIPELINES:
            raise _refuse("pipeline", self.pipeline, f"choose one of {', '.join(PIPELINES)}")
        for name in ("data_root", "cache_dir", "output_root"):
            _check_text("", name, getattr(self, name), "give a folder")
        if not self.output_root.strip():
            raise SettingError("output_root is empty: give a folder for the run directories (default: runs)")
        if self.storage is not None:
            _check_text("", "storage", self.storage, "give a folder or a URI, or null")
            try:
                check_storage_uri(self.storage)
            except StorageError as exc:
                raise SettingError(str(exc)) from None
        for name in SHARED_GROUPS + ("local_models",):
            if not isinstance(getattr(self, name), dict):
                raise _refuse(name, getattr(self, name), "give a mapping")


SECTIONS = ("generation", "evaluation", "execution", "requests", "analysis", "budget")
SHARED_GROUPS = ("benchmark", "sandbox", "cluster")
FOLDERS = ("data_root", "cache_dir", "output_root", "storage")


def as_data(value: Any) -> Any:
    """A settings dataclass (or a node of it) as the plain data Hydra holds: dataclasses as
    dicts, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [as_data(v) for v in value]
    if isinstance(value, dict):
        return {k: as_data(v) for k, v in value.items()}
    return value


def defaults(shared: dict | None = None) -> dict:
    """The problems settings with their defaults, as the plain data Hydra's ConfigStore holds;
    ``shared`` gives the defaults of the groups ``SHARED_GROUPS`` and of ``FOLDERS`` (the
    repository launcher's, from the entry), whose files then only select and override."""
    values = as_data(ProblemsSettings())
    values = {k: v for k, v in values.items() if k in {"pipeline", *SECTIONS, *SHARED_GROUPS, *FOLDERS}}
    return {**values, **(shared or {})}


def register(shared: dict | None = None) -> None:
    """Store :func:`defaults` (``shared`` as there) in Hydra's ConfigStore as
    ``problems_defaults`` (problems.yaml lists it first in its defaults)."""
    ConfigStore.instance().store(name="problems_defaults", node=defaults(shared))


def unknown_key(path: list[str]) -> str | None:
    """The message for the dotted settings key ``path`` when the settings have no such key
    (naming the keys allowed where it stops), else None. Keys below a group that is a plain
    mapping (``benchmark``, ``sandbox``...) are not checked here."""
    node: type = ProblemsSettings
    for depth, part in enumerate(path):
        names = [f.name for f in dataclasses.fields(node)]
        if part not in names:
            where = ".".join(path[:depth]) or "the launch"
            return f"{'.'.join(path)}: unknown setting; {where} takes {', '.join(names)}"
        child = node_types(node).get(part)
        if child is None:
            return None
        node = child
    return None


def settings_from(data: dict) -> ProblemsSettings:
    """Check the composed, resolved config ``data`` (a plain dict; Hydra's own ``hydra`` node
    excluded). Raises :class:`SettingError` with one line for the first wrong setting: an
    unknown key (naming the keys allowed there), a value of the wrong type or out of range
    (``key=value: what to give``)."""
    nodes = node_types(ProblemsSettings)
    values: dict[str, Any] = {}
    for key, value in data.items():
        problem = unknown_key([key])
        if problem:
            raise SettingError(problem)
        node = nodes.get(key)
        if node is None:
            values[key] = value
            continue
        names = [f.name for f in dataclasses.fields(node)]
        if not isinstance(value, dict):
            raise _refuse(key, value, f"give a mapping of {', '.join(names)}")
        for name in value:
            problem = unknown_key([key, name])
            if problem:
                raise SettingError(problem)
        try:
            values[key] = node(**value)
        except BudgetError as exc:
            raise SettingError(str(exc)) from None
    return ProblemsSettings(**values)
