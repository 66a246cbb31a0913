"""The main job: ``python -m raydist.launch [hydra overrides]``.

config -> plan -> images -> model server -> units on Ray -> rows -> runs.parquet, preds.jsonl,
summary.md. Re-running the same command resumes: finished units are skipped.

Examples::

    python -m raydist.launch                                   # Gemma agent, built-in set, L0 + L3
    python -m raydist.launch +sweep=full_levels agent=oracle   # every level x seeds 0,1,2
    python -m raydist.launch benchmark=realfix agent=null
    python -m raydist.launch --multirun model=gemma3-270m,openai/gpt-4o-mini
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from raydist.job import Job, JobError, run_job  # noqa: E402

OmegaConf.register_new_resolver("agent_name", lambda a: "null" if a is None else str(a), replace=True)


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Build the job from the config and hand it on; user errors exit 2 with one clear line."""
    try:
        job = Job.from_config(cfg, run_dir=HydraConfig.get().runtime.output_dir)
        run_job(job)
    except JobError as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
