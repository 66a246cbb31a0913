"""Analysis of generated benchmarks (DyCodeEval §3.3, §4.4, §4.5): problem diversity, the
rule-based perturbation baselines, the collision bounds with their observed rates, and the
stability of Pass@1 across generated datasets. Pure Python on plain strings and numbers."""

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
from raydist.analysis.stability import Stability, stability

__all__ = [
    "PERTURBATIONS", "RENAMING", "Embedder", "NotApplicable", "Stability", "bleu4", "collision_approximation",
    "collision_bound", "collision_probability", "collision_rate", "corpus_bleu4", "dataset_collision_bound",
    "dataset_collision_probability", "dataset_repeat_bound", "dataset_repeat_probability", "default_embedder",
    "diversity_table", "external_diversity", "internal_diversity", "normalise", "outcome_space", "per_seed",
    "perturb", "problem_repeat_bound", "problem_repeat_probability", "repeat_bound", "repeat_probability",
    "repeat_rate", "seed_collision_rate", "semantic_similarity", "stability", "symmetric_bleu4",
]
