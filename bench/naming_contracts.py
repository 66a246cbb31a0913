"""Count the naming contracts of SWE-bench Lite and the 50 shared Verified rows.

A naming contract is a name the FAIL_TO_PASS tests call that only the gold patch introduces
(``raydist.views.contracts``). These rows come without their repositories, so absence at
``base_commit`` is read from the diffs alone: the figures are upper bounds.

    python bench/naming_contracts.py [--data ../shared/data/swebench] [--examples 10]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

from raydist.views.contracts import Contract, naming_contract

FILES = {"Lite": "swebench_lite.jsonl", "Verified (50)": "swebench_verified_50.jsonl"}


def contracts(path: Path) -> list[Contract]:
    """The contract of every row of the JSONL file ``path``."""
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        tests = row["FAIL_TO_PASS"]
        out.append(naming_contract(SimpleNamespace(**{**row, "FAIL_TO_PASS": json.loads(tests)
                                                        if isinstance(tests, str) else tests})))
    return out


def summary(name: str, found: list[Contract]) -> str:
    """One line: instances, those with a contract, names, FAIL_TO_PASS ids whose test was not read."""
    with_contract = [c for c in found if c.names]
    return (f"{name}: {len(with_contract)} of {len(found)} instances have a naming contract, "
            f"{sum(len(c.names) for c in found)} names "
            f"({sum(1 for c in found for n in c.names if n.kind == 'keyword')} keyword arguments); "
            f"{sum(1 for c in found if c.unread)} instances with a FAIL_TO_PASS test not in test_patch's hunks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/swebench")
    parser.add_argument("--examples", type=int, default=10, help="instances with a contract to print per file")
    args = parser.parse_args()
    for name, file in FILES.items():
        found = contracts(args.data / file)
        print(summary(name, found))
        for contract in [c for c in found if c.names][: args.examples]:
            names = ", ".join(f"{n.name} ({n.defined_in})" for n in contract.names)
            print(f"  {contract.instance_id}: {names}")


if __name__ == "__main__":
    main()
