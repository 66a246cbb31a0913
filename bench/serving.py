"""The model server's own throughput, against what a launch's agent fleet got from it.

Replays, with a raw HTTP client (no agent, no Docker, no Ray), every model request a finished
run made: for each trajectory under RUN_DIR/trajectories, the messages each step sent (also
the steps whose answer was cut off and never entered the conversation), with the run's
decoding settings and grammar, ``--concurrency`` conversations at a time (each one's requests
in order, as its agent sent them), against a server started from a ``local_models`` entry.

It prints, for each server configuration side by side:
  - requests, prompt tokens, generated tokens (the server's own ``usage``), wall seconds;
  - prompt and generation tokens per second, and all tokens per second;
  - the fleet's efficiency: (tokens the run's units used / the run's unit-phase wall time) divided
    by (the same for the replay on that server), i.e. the share of the server's throughput the
    agents got. The unit phase spans the first unit's start to the last unit's end
    (``runs.parquet``: ``finished_at - wall_seconds`` to ``finished_at``).

``--load N`` runs N busy processes (one core each) beside the server during every replay: what
a node's containers, graders and other workers do to it during a launch. A server with more
compute threads than free cores stalls at llama.cpp's per-layer barrier, which an idle
machine never shows.

Usage:
  python bench/serving.py RUN_DIR [--entry gemma3-270m] [--entry NAME ...]
                          [--local-models FILE.yaml] [--concurrency 2] [--limit N] [--load N]

``--local-models`` adds entries (a YAML file with a ``local_models:`` mapping, as
``raydist/conf/local_models.yaml``) to compare server commands, e.g. more parallel slots.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import queue
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx
import pyarrow.parquet as pq
from omegaconf import OmegaConf

from raydist.cluster.serving import server_arguments, server_command
from raydist.models.process import ServerProcess

PACKAGE_MODELS = Path(__file__).resolve().parents[1] / "raydist" / "conf" / "local_models.yaml"


def conversation_requests(trajectory: dict) -> list[dict]:
    """The chat requests one trajectory's agent sent, in order: ``{"messages", "kwargs"}``.

    A request precedes every assistant message, and every user message that follows another
    user message after the instance prompt (a format error: the answer was cut off or off
    format and the agent asked again without keeping it). ``kwargs`` are the decoding
    settings the agent used (temperature, max_tokens, seed-free; the grammar from
    ``extra_body``)."""
    messages = [{"role": m["role"], "content": m["content"]} for m in trajectory["messages"]
                if m["role"] in ("system", "user", "assistant")]
    model_kwargs = trajectory["info"]["config"]["model"]["model_kwargs"]
    kwargs = {key: model_kwargs[key] for key in ("temperature", "max_tokens") if key in model_kwargs}
    kwargs.update(model_kwargs.get("extra_body") or {})
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    requests = []
    for i, message in enumerate(messages):
        asked_again = message["role"] == "user" and i > first_user and messages[i - 1]["role"] == "user"
        if message["role"] == "assistant" or asked_again:
            requests.append({"messages": messages[:i], "kwargs": kwargs})
    return requests


def fleet_figures(run_dir: Path) -> dict:
    """``{"units", "tokens", "seconds"}`` of a run's unit phase, from its ``runs.parquet``."""
    rows = pq.read_table(run_dir / "runs.parquet",
                         columns=["input_tokens", "output_tokens", "wall_seconds", "finished_at"]).to_pylist()
    ends = [datetime.fromisoformat(r["finished_at"]).timestamp() for r in rows]
    starts = [end - (r["wall_seconds"] or 0.0) for end, r in zip(ends, rows)]
    tokens = sum((r["input_tokens"] or 0) + (r["output_tokens"] or 0) for r in rows)
    return {"units": len(rows), "tokens": tokens, "seconds": max(ends) - min(starts)}


def replay(api_base: str, model: str, conversations: list[list[dict]], concurrency: int) -> dict:
    """Send every conversation's requests, ``concurrency`` conversations at once; returns
    ``{"requests", "prompt_tokens", "completion_tokens", "seconds"}`` from the server's usage."""
    work: queue.Queue = queue.Queue()
    for conversation in conversations:
        work.put(conversation)
    totals = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
    lock = threading.Lock()
    errors: list[str] = []

    def worker() -> None:
        with httpx.Client(base_url=api_base, timeout=600) as client:
            while True:
                try:
                    conversation = work.get_nowait()
                except queue.Empty:
                    return
                for request in conversation:
                    reply = client.post("/chat/completions", json={"model": model, "messages": request["messages"],
                                                                   **request["kwargs"]})
                    if reply.status_code != 200:
                        errors.append(f"{reply.status_code}: {reply.text[:300]}")
                        return
                    usage = reply.json()["usage"]
                    with lock:
                        totals["requests"] += 1
                        totals["prompt_tokens"] += usage["prompt_tokens"]
                        totals["completion_tokens"] += usage["completion_tokens"]

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"the server refused a replayed request: {errors[0]}")
    return {**totals, "seconds": time.perf_counter() - start}


@contextlib.contextmanager
def busy_processes(count: int):
    """``count`` processes that each spin one core until the block ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run directory (runs.parquet, trajectories/)")
    parser.add_argument("--entry", action="append", help="local_models entry to serve (repeatable; "
                                                         "default gemma3-270m)")
    parser.add_argument("--local-models", type=Path, help="YAML with more local_models entries")
    parser.add_argument("--concurrency", type=int, default=2, help="conversations at once (default 2, "
                                                                    "the default cluster.max_concurrency)")
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N conversations")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the server (default 0)")
    args = parser.parse_args()

    entries = OmegaConf.to_container(OmegaConf.load(PACKAGE_MODELS))["local_models"]
    if args.local_models:
        entries.update(OmegaConf.to_container(OmegaConf.load(args.local_models))["local_models"])
    names = args.entry or ["gemma3-270m"]
    for name in names:
        if name not in entries:
            parser.error(f"--entry {name}: no such local_models entry (known: {', '.join(sorted(entries))})")
    paths = sorted((args.run_dir / "trajectories").glob("*.traj.json"))
    if not paths:
        parser.error(f"{args.run_dir}/trajectories holds no *.traj.json: give a finished model run's directory")
    conversations = [conversation_requests(json.loads(p.read_text())) for p in paths][: args.limit]
    fleet = fleet_figures(args.run_dir) if args.limit is None else None

    results = {}
    for name in names:
        cfg = entries[name]
        kwargs = server_arguments(name, cfg)
        kwargs.pop("policy", None)
        with ServerProcess(server_command(cfg), host="127.0.0.1", health_path=kwargs["health_path"],
                           liveness_path=kwargs["liveness_path"], startup_timeout=kwargs["startup_timeout"],
                           model_path=kwargs["model_path"]) as server:
            model = cfg["litellm_model"].split("/", 1)[-1]
            with busy_processes(args.load):
                replay(server.api_base, model, conversations[:1], 1)  # warm-up: load pages, build graphs
                results[name] = replay(server.api_base, model, conversations, args.concurrency)

    requests = sum(len(c) for c in conversations)
    print(f"replay of {len(conversations)} conversations ({requests} requests) from {args.run_dir}, "
          f"{args.concurrency} at a time, {args.load} busy processes beside the server")
    print(f"{'server':24}{'requests':>9}{'prompt tok':>11}{'gen tok':>9}{'wall s':>8}{'prompt/s':>10}"
          f"{'gen/s':>8}{'all/s':>8}{'fleet eff':>10}")
    for name, r in results.items():
        all_tokens = r["prompt_tokens"] + r["completion_tokens"]
        rate = all_tokens / r["seconds"]
        eff = f"{fleet['tokens'] / fleet['seconds'] / rate:10.2f}" if fleet else f"{'-':>10}"
        print(f"{name:24}{r['requests']:9d}{r['prompt_tokens']:11d}{r['completion_tokens']:9d}{r['seconds']:8.1f}"
              f"{r['prompt_tokens'] / r['seconds']:10.1f}{r['completion_tokens'] / r['seconds']:8.1f}"
              f"{rate:8.1f}{eff}")
    if fleet:
        print(f"fleet: {fleet['units']} units, {fleet['tokens']} tokens in {fleet['seconds']:.0f} s of unit phase "
              f"({fleet['tokens'] / fleet['seconds']:.1f} tokens/s)")
    if len(results) > 1:
        base, *others = names
        for name in others:
            print(f"speed-up of {name} over {base}: {results[base]['seconds'] / results[name]['seconds']:.2f}x")


if __name__ == "__main__":
    main()
