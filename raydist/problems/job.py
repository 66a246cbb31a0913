"""One DyCodeEval launch, resolved: its checked settings, seed selection and run directory."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from raydist._util.hashing import stable_hash
from raydist._util.storage import CACHE_FOLDER, JsonCache, Storage, mirror_of
from raydist.cluster.scheduler import RayOptions
from raydist.problems.agents import load_dyc_prompts
from raydist.problems.config import Analysis, Evaluation, Execution, Generation, ProblemsSettings, Requests, as_data
from raydist.problems.records import RUN_SETTINGS
from raydist.sandbox.settings import sandbox_at as _sandbox_at

__all__ = ["ProblemsJob"]


@dataclass(frozen=True)
class ProblemsJob:
    """Everything one launch needs (``raydist.launch_problems.job_from_config`` builds it).

    Attributes:
        settings: the checked settings (``raydist.problems.config``).
        run_dir: where the records and tables go (one per benchmark, generator and sweep job).
        cache_dir: ``<cache_dir>/problems``: the LLM answer cache lives in its ``llm`` folder,
            unless ``storage`` is set.
        ids: the seed problems selected by id, None for the first ``benchmark.limit``.
        storage: the checked ``storage=`` URI (``raydist._util.storage.open_storage``), None for
            the driver's disk: the run directory is mirrored to ``<storage>/<run dir below
            output_root>`` and the answer cache is ``<storage>/_cache/problems/llm``.
    """

    settings: ProblemsSettings
    run_dir: Path
    cache_dir: Path
    ids: tuple | None = None
    storage: str | None = None

    def answers(self):
        """The LLM answer cache (``raydist._util.storage.JsonCache``): ``<cache_dir>/problems/llm``
        on the driver's disk, or ``<storage>/_cache/problems/llm``."""
        if self.storage:
            return JsonCache(Storage(self.storage).child(f"{CACHE_FOLDER}/problems/llm"))
        return JsonCache(self.cache_dir / "llm")

    def mirror(self):
        """The ``Storage`` the run directory is mirrored to, None without ``storage``. Raises
        ``ValueError`` when the run directory is not below ``output_root``."""
        return mirror_of(self.storage, self.run_dir, self.settings.output_root)

    @property
    def pipeline(self) -> str:
        return self.settings.pipeline

    @property
    def generation(self) -> Generation:
        return self.settings.generation

    @property
    def evaluation(self) -> Evaluation:
        return self.settings.evaluation

    @property
    def execution(self) -> Execution:
        return self.settings.execution

    @property
    def requests(self) -> Requests:
        return self.settings.requests

    @property
    def analysis(self) -> Analysis:
        return self.settings.analysis

    @property
    def dataset(self) -> str:
        return str(self.settings.benchmark["dataset"])

    @property
    def source(self) -> str | None:
        return self.settings.benchmark.get("source")

    @property
    def limit(self) -> int | None:
        return self.settings.benchmark.get("limit")

    @property
    def sandbox_at(self) -> tuple[str, str | None]:
        """``(sandbox.provider, its address)``: where programs run (``raydist.sandbox.connect``;
        ``raydist.sandbox.settings.sandbox_at``)."""
        return _sandbox_at(self.settings.sandbox)

    @property
    def base_image(self) -> str | None:
        return self.settings.sandbox.get("base_image")

    @property
    def ray(self) -> RayOptions:
        """The cluster group: Ray address, ``max_concurrency``, ``cpus_per_unit``..."""
        return RayOptions(**self.settings.cluster)

    def local_model(self, name: str) -> dict | None:
        """The ``local_models`` entry of ``name``; None for a hosted litellm model."""
        return self.settings.local_models.get(name)

    def run_settings(self) -> dict:
        """What the variants of the run directory depend on besides their ids: the generation
        settings of ``RUN_SETTINGS``, the agents' prompt templates (a digest) and the seed source."""
        gen = as_data(self.generation)
        prompts = load_dyc_prompts(self.generation.prompts_dir)
        return {**{k: gen[k] for k in RUN_SETTINGS}, "dataset": self.dataset,
                "source": None if self.source is None else str(self.source),
                "prompts": stable_hash(asdict(prompts), 16)}
