"""The recall probe's settings as a structured config: one field, one default, one docstring.
``conf/recall.yaml`` only selects the groups (benchmark, cluster, local_models); the schema is
registered in Hydra's ConfigStore as ``recall_schema``. The groups shared with the main job
(``benchmark``, ``cluster``) are mappings here; the entry (``raydist.launch_recall``) checks
them by that job's own schema."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from raydist._util.folders import CACHE_DIR, DATA_ROOT, OUTPUT_ROOT
from raydist.recall.rounds import DEFAULT_ROUNDS

__all__ = ["AnswerLimits", "RecallConfig", "register"]


@dataclass
class AnswerLimits:
    """``answer``: how long each part of a grammar-constrained answer may be
    (``raydist.recall.answer.answer_grammar``); the grammar keeps a reply whole JSON within
    ``max_tokens``."""

    grammar: bool = True
    """Constrain a local model's reply to the answer's JSON with a GBNF grammar (hosted models get none)."""
    max_items: int = 5
    """Names per list (files, symbols, tests)."""
    max_name_chars: int = 100
    """Characters per name."""
    max_text_chars: int = 300
    """Characters of ``repair_logic``."""
    max_patch_chars: int = 1200
    """Characters of ``patch`` (JSON-escaped newlines count one each)."""


@dataclass
class RecallConfig:
    """``python -m raydist.launch_recall``: the recall probe of one model over one benchmark's instances."""

    model: str = "gemma3-270m"
    """A ``local_models`` entry (served for the probe's duration) or any litellm model name."""
    rounds: list[Any] = field(default_factory=lambda: [asdict(r) for r in DEFAULT_ROUNDS])
    """The rounds, in order: ``{name, reveals: [fields]}`` (``raydist.recall.rounds``)."""
    max_tokens: int = 512
    """Longest reply asked for, in tokens."""
    temperature: float = 0.0
    """Sampling temperature (0: the model's most likely answer)."""
    seed: int = 0
    """Request seed."""
    answer: AnswerLimits = field(default_factory=AnswerLimits)
    prompts_dir: str = "conf/prompts"
    """Folder of ``recall_system.j2`` and ``recall_round.j2``; relative to the package folder."""
    timeout_base_s: float = 120.0
    """Seconds one request may take whatever its length (``raydist.models.completion.request_timeout``)."""
    min_tokens_per_s: float = 4.0
    """The slowest generation speed waited for: a request may take ``timeout_base_s + max_tokens / this``."""
    benchmark: dict[str, Any] = field(default_factory=dict)
    """The benchmark group (``conf/benchmark``; ``raydist.driver.benchmark.BenchmarkConfig``)."""
    cluster: dict[str, Any] = field(default_factory=dict)
    """The cluster group (``conf/cluster``; ``raydist.cluster.scheduler.RayOptions``)."""
    local_models: dict[str, Any] = field(default_factory=dict)
    """Models raydist serves itself (``conf/local_models.yaml``)."""
    data_root: str = DATA_ROOT
    """Data sets that no package ships; the ``benchmark`` group reads files below it."""
    cache_dir: str = CACHE_DIR
    """The model answers are cached in ``<cache_dir>/recall/llm``, by request."""
    output_root: str = OUTPUT_ROOT
    """The run directory is ``<output_root>/recall/<benchmark>/<model>``."""


def register(shared: dict | None = None) -> None:
    """Store the schema in Hydra's ConfigStore as ``recall_schema`` (idempotent); ``shared``
    gives the defaults of the groups shared with the main job (``benchmark``, ``cluster``),
    from the entry, so their files only select and override."""
    node = OmegaConf.merge(OmegaConf.structured(RecallConfig), shared or {})
    ConfigStore.instance().store(name="recall_schema", node=node)
