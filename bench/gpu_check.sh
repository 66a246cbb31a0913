#!/usr/bin/env bash
# Proof that a machine with a GPU serves a model with vLLM through raydist's ModelServer actor:
# starts the local_models entry (default qwen2.5-coder-0.5b-vllm, raydist/conf/local_models.yaml)
# as a launch does (raydist.cluster.serving.serve_model, on a Ray of its own on loopback), sends
# N requests constrained by the agent's action grammar and N unconstrained ones (the baseline),
# prints tokens/s of both side by side, and exits 0 only if every constrained answer kept to
# the grammar. Installs nothing: it needs the `gpu` extra (pip install '.[gpu]') and vLLM's
# weights reachable (the Hugging Face cache, or the network); on a machine without a GPU the
# launch's own check refuses the entry and the script exits 1 saying so.
#
#   bash bench/gpu_check.sh [ENTRY] [N]        # PYTHON=... to use another interpreter
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" - "${1:-qwen2.5-coder-0.5b-vllm}" "${2:-5}" <<'PYTHON'
import re
import sys
import time

import ray
from omegaconf import OmegaConf

from raydist.cluster.serving import serve_model
from raydist.models import ModelServerError, action_grammar, litellm_complete
from raydist.models.grammar import FENCE

name, n = sys.argv[1], int(sys.argv[2])
entries = OmegaConf.load("raydist/conf/local_models.yaml").local_models
if name not in entries:
    sys.exit(f"gpu_check: no local_models entry {name!r}; the entries are {sorted(entries)}")
entry = OmegaConf.to_container(entries[name], resolve=True)
grammar = action_grammar()
shape = re.compile(r"THOUGHT: [^\n`]+\n\n```" + FENCE + r"\n[^\n`]+\n```")
messages = [{"role": "system", "content": "You are a shell expert. Answer with one THOUGHT line and one "
                                          f"```{FENCE} block holding one bash command."},
            {"role": "user", "content": "List the Python files below the current directory, largest first."}]

ray.init(address="local", include_dashboard=False, log_to_driver=False)
try:
    with serve_model(name, entry) as endpoint:
        print(f"gpu_check: {name} served at {endpoint.api_base} ({ray.cluster_resources().get('GPU', 0):g} GPUs)")
        rates, held = {}, 0
        for label, constraint in (("unconstrained", None), ("grammar", grammar)):
            complete = litellm_complete(endpoint, temperature=0.7, timeout=600, retries=2)
            started = time.monotonic()
            for seed in range(n):
                answer = complete(messages, seed=seed, max_tokens=160, grammar=constraint)
                if constraint is not None:
                    ok = shape.fullmatch(answer.strip()) is not None
                    held += ok
                    print(f"  seed {seed}: grammar {'held' if ok else 'BROKEN'}: {answer.strip()[:120]!r}")
            rates[label] = complete.usage["output_tokens"] / (time.monotonic() - started)
except ModelServerError as exc:
    sys.exit(f"gpu_check: {name} was not served: {str(exc).splitlines()[0]}")
finally:
    ray.shutdown()

print(f"{'requests':>13} {'tokens/s':>10}  ratio to unconstrained")
for label, rate in rates.items():
    print(f"{label:>13} {rate:10.1f}  {rate / rates['unconstrained']:.2f}")
print(f"gpu_check: the grammar held in {held}/{n} answers")
sys.exit(0 if held == n else 1)
PYTHON
