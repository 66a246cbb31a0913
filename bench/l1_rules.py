"""How far L1's rule restatement (raydist.views.l1.rules) moves a statement's text: per set
of statements, the mean token-level edit distance to the canonical statement (Levenshtein over
whitespace tokens, as a share of the canonical's tokens) and the mean sentence BLEU against it
(sacrebleu, 0-100), over --seeds seeds, beside the check that every protected span was kept.

Sets: the built-in instances, and from --data (default ../shared/data) the real-fix tasks and
the offline SWE-bench rows when present.

Usage: python bench/l1_rules.py [--seeds 3] [--data ../shared/data]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import sacrebleu

from raydist.tasks import load_instances
from raydist.views.l1.rules import rule_paraphrase
from raydist.views.l1.statement import missing_spans


def token_distance(a: str, b: str) -> int:
    """Levenshtein distance between the whitespace tokens of ``a`` and ``b``."""
    x, y = a.split(), b.split()
    previous = list(range(len(y) + 1))
    for i, token in enumerate(x, 1):
        current = [i]
        for j, other in enumerate(y, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (token != other)))
        previous = current
    return previous[-1]


def measure(statements: list[str], seeds: int) -> dict:
    distances, bleus, kept = [], [], 0
    for statement in statements:
        for seed in range(seeds):
            text = rule_paraphrase(statement, seed)
            distances.append(token_distance(statement, text) / max(1, len(statement.split())))
            bleus.append(sacrebleu.sentence_bleu(text, [statement]).score)
            kept += not missing_spans(statement, text)
    return {"statements": len(statements), "restatements": len(distances), "spans kept": kept,
            "token edit distance": statistics.fmean(distances), "BLEU": statistics.fmean(bleus)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    sets = {"built-in": [i.problem_statement for i in load_instances("builtin")]}
    for name, path in (("realfix", args.data / "tasks" / "realfix.jsonl"),
                       ("offline SWE-bench", args.data / "swebench" / "offline.jsonl")):
        if path.is_file():
            sets[name] = [json.loads(line)["problem_statement"] for line in path.read_text().splitlines() if line]
    print(f"{'set':<20}{'statements':>11}{'spans kept':>16}{'token edit distance':>21}{'BLEU':>8}")
    for name, statements in sets.items():
        r = measure(statements, args.seeds)
        print(f"{name:<20}{r['statements']:>11}{r['spans kept']:>9}/{r['restatements']:<6}"
              f"{r['token edit distance']:>21.3f}{r['BLEU']:>8.1f}")


if __name__ == "__main__":
    main()
