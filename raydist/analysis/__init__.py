"""Analysis of generated benchmarks (DyCodeEval §3.3, §4.4, §4.5): problem diversity, the
rule-based perturbation baselines, the collision bounds with their observed rates, and the
stability of Pass@1 across generated datasets. Pure Python on plain strings and numbers.

And the analysis stage of dynamic repositories (SchrodingerRepo §V) on launched run
directories: ``runs`` (reading runs.parquet, what is missing), ``repositories`` (Table I,
Figure 3, the case study of Figure 4) and ``significance`` (paired tests against L0, the
bootstrap interval of the drop, verdict stability, McNemar sample size).

And ``contamination``, the static-vs-dynamic fit of DyCodeEval §4.3 (Figure 5), beside
``problems_figures``, the DyCodeEval figures (plotly; not imported here), which
``raydist.problems.sections`` lays out."""

from raydist.analysis.baselines import PERTURBATIONS, RENAMING, NotApplicable, perturb
from raydist.analysis.collision import (
    collision_approximation,
    collision_bound,
    collision_probability,
    collision_rate,
    dataset_collision_bound,
    dataset_collision_probability,
    dataset_repeat_bound,
    dataset_repeat_probability,
    normalise,
    outcome_space,
    per_seed,
    problem_repeat_bound,
    problem_repeat_probability,
    repeat_bound,
    repeat_probability,
    repeat_rate,
    seed_collision_rate,
)
from raydist.analysis.contamination import ContaminationFit, FitPoint, contamination_fit
from raydist.analysis.diversity import (
    Embedder,
    bleu4,
    corpus_bleu4,
    default_embedder,
    diversity_table,
    external_diversity,
    internal_diversity,
    semantic_similarity,
    symmetric_bleu4,
)
from raydist.analysis.repositories import added_action_shares, case_study, level_table
from raydist.analysis.runs import finished_units, level_key, load_runs, short_cells, unfinished_run_dirs
from raydist.analysis.significance import (
    bootstrap_interval,
    connor_sample_size,
    holm,
    mcnemar_exact,
    mcnemar_exact_power,
    mcnemar_interval,
    mcnemar_sample_size,
    paired_significance,
    sign_flip_test,
    verdict_stability,
)
from raydist.analysis.stability import Stability, mean_interval, stability

__all__ = [
    "PERTURBATIONS", "RENAMING", "ContaminationFit", "Embedder", "FitPoint", "NotApplicable", "Stability",
    "added_action_shares", "bleu4", "bootstrap_interval", "case_study", "collision_approximation", "collision_bound",
    "collision_probability", "collision_rate", "contamination_fit", "corpus_bleu4", "dataset_collision_bound",
    "dataset_collision_probability", "dataset_repeat_bound", "dataset_repeat_probability", "default_embedder",
    "diversity_table", "external_diversity", "finished_units", "internal_diversity", "level_key", "level_table",
    "connor_sample_size", "holm", "load_runs", "mcnemar_exact", "mcnemar_exact_power", "mcnemar_interval",
    "mcnemar_sample_size", "mean_interval", "normalise", "outcome_space",
    "paired_significance", "per_seed", "perturb", "problem_repeat_bound", "problem_repeat_probability",
    "repeat_bound", "repeat_probability", "repeat_rate", "seed_collision_rate", "semantic_similarity", "short_cells",
    "sign_flip_test", "stability", "symmetric_bleu4", "unfinished_run_dirs", "verdict_stability",
]
