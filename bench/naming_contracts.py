"""Count the naming contracts of SWE-bench Lite and the 50 shared Verified rows.

A naming contract is a name the FAIL_TO_PASS tests call that only the gold patch introduces
(``raydist.views.contracts``). These rows come without their repositories, so absence at
``base_commit`` is read from the diffs alone: the figures are upper bounds.

    python bench/naming_contracts.py [--data ../shared/data/swebench] [--examples 10]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from types import SimpleNamespace

from raydist.views.contracts import Contract, naming_contract

NAMED = "; in the statement"
FILES = {"Lite": "swebench_lite.jsonl", "Verified (50)": "swebench_verified_50.jsonl"}


def contracts(path: Path) -> list[tuple[Contract, str]]:
    """The contract of every row of the JSONL file ``path``, with the row's problem statement."""
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        tests = row["FAIL_TO_PASS"]
        out.append((naming_contract(SimpleNamespace(**{**row, "FAIL_TO_PASS": json.loads(tests)
                                                         if isinstance(tests, str) else tests})),
                    row["problem_statement"]))
    return out


def in_statement(name: str, statement: str) -> bool:
    """Whether the statement names ``name`` (a keyword ``f(p=)``: ``p``) as a whole word."""
    owner, _, param = name.partition("(")
    return re.search(rf"\b{re.escape(param[:-2] if param else owner)}\b", statement) is not None


def summary(name: str, found: list[tuple[Contract, str]]) -> str:
    """One line: instances, those with a contract, names (keywords, named by the statement),
    instances with a FAIL_TO_PASS test whose body is not in test_patch's hunks (not read)."""
    with_contract = [c for c, _ in found if c.names]
    names = [(n, s) for c, s in found for n in c.names]
    return (f"{name}: {len(with_contract)} of {len(found)} instances have a naming contract, "
            f"{len(names)} names ({sum(1 for n, _ in names if n.kind == 'keyword')} keyword arguments, "
            f"{sum(1 for n, s in names if in_statement(n.name, s))} named in the problem statement); "
            f"{sum(1 for c, _ in found if c.unread)} instances with a FAIL_TO_PASS test not in test_patch's hunks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/swebench")
    parser.add_argument("--examples", type=int, default=10, help="instances with a contract to print per file")
    args = parser.parse_args()
    for name, file in FILES.items():
        found = contracts(args.data / file)
        print(summary(name, found))
        for contract, statement in [(c, s) for c, s in found if c.names][: args.examples]:
            names = ", ".join(f"{n.name} ({n.defined_in}{NAMED if in_statement(n.name, statement) else ''})"
                              for n in contract.names)
            print(f"  {contract.instance_id}: {names}")


if __name__ == "__main__":
    main()
