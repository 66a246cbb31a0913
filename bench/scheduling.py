"""Scheduling at scale, side by side in one run:

1. overhead: per-unit scheduling overhead of the Ray path (``raydist.cluster.scheduler.run_units``,
   i.e. ``run_bounded``) against a ``concurrent.futures.ThreadPoolExecutor`` running the same
   units at the same concurrency (goal: Ray at most 50 ms per unit more). A unit sleeps
   ``--pause`` seconds (``bench/cheap_sweep.py`` ``sleeping_execute``); overhead per unit is
   (wall - the ideal ceil(N / C) x pause) x C / N: slot time lost per unit.
2. nodes: throughput of the same sweep on 1, 2 and 3 Ray worker nodes
   (``ray.cluster_utils.Cluster``, loopback), each node given one equal share (1 CPU, 1
   ``sandbox`` slot; the head node runs only the driver, which joins through the product's
   ``init_ray``), against a thread pool of 1 worker; scaling efficiency = (throughput / 1-node
   throughput) / (resources / 1-node resources) (goal >= 0.9), and the 1-node Ray path within
   10% of the pool. Strong scaling: the same ``--node-units`` at every node count, the stricter
   choice, since what a sweep pays once (the first leases, the last result's way back) weighs
   3x more against 12 rounds of units on 3 nodes than against 36 on 1; "lost s" is the wall
   above the ideal ceil(N / nodes) x pause. Two units per slot are in flight (one running, one
   waiting in Ray's queue), as ``cluster.max_concurrency`` advises, so a slot never waits for
   the driver to submit. Warm-up, on every side alike and reported apart: before timing, each
   side runs 2 units per slot (Ray: until every node has run one, so its worker process has
   started, ~1 s per node; the pool: its thread); the timed walls are the best of
   ``--repeat`` warm runs.
3. driver: the real driver (``raydist.driver.drive.run_job``) on 1k / 3k / 10k cheap units
   (``cheap_sweep.cheap_execute``: ``execute_unit`` with a scripted run, no container), each
   size in a fresh process: wall seconds of planning, running and resuming, ms per unit, and
   the driver's peak resident memory (``ru_maxrss``) after each phase (goal: < 1 GB, per-unit
   times flat across sizes).

Usage: python bench/scheduling.py [--pause 0.2] [--units 40] [--concurrency 4]
       [--node-units 36] [--node-pause 0.5] [--worker-lease-s 60] [--sizes 1000 3000 10000]
       [--skip overhead nodes driver]
The machine's load average is printed first: on a busy machine every figure is slower.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cheap_sweep

from raydist.cluster.scheduler import RayOptions, hold_worker_leases, run_units
from raydist.cluster.unit_key import RunUnit


def units_of(n: int, pause: float) -> tuple[list[RunUnit], dict]:
    """``n`` units of distinct synthetic instances whose body sleeps ``pause`` seconds."""
    instances = {f"cheap-{i:05d}": SimpleNamespace(instance_id=f"cheap-{i:05d}", extra={"pause_s": pause})
                 for i in range(n)}
    return [RunUnit(iid, "h", "-", "null", "L0", 0, "c") for iid in instances], instances


def ray_run(units, instances, concurrency: int, cpus_per_unit: float) -> tuple[float, list[dict]]:
    """Seconds ``run_units`` takes for ``units`` (Ray already connected), and its rows."""
    rows: list[dict] = []
    started = time.perf_counter()
    run_units(units, instances, None, None, RayOptions(max_concurrency=concurrency, cpus_per_unit=cpus_per_unit),
              rows.append, execute=cheap_sweep.sleeping_execute)
    seconds = time.perf_counter() - started
    assert len(rows) == len(units)
    return seconds, rows


def ray_wall(units, instances, concurrency: int, cpus_per_unit: float) -> float:
    """Seconds ``run_units`` takes for ``units`` (Ray already connected)."""
    return ray_run(units, instances, concurrency, cpus_per_unit)[0]


def pool_wall(units, instances, concurrency: int) -> float:
    """Seconds a thread pool of ``concurrency`` takes for the same unit bodies."""
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        rows = list(pool.map(lambda u: cheap_sweep.sleeping_execute(u, instances[u.instance_id], None), units))
    assert len(rows) == len(units)
    return time.perf_counter() - started


def warm_up(units, instances, count: int) -> float:
    """Run 2 units per node until every one of the ``count`` worker nodes has run one (its
    worker process started); returns the seconds it took, rounds included."""
    import ray

    nodes = {n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("sandbox")}
    assert len(nodes) == count, nodes
    seen: set = set()
    started = time.perf_counter()
    while seen != nodes:
        seen |= {row["node"] for row in ray_run(units[:count * 2], instances, count * 2, 1)[1]}
    return time.perf_counter() - started


def overhead(args) -> list[str]:
    import ray

    n, c, pause = args.units, args.concurrency, args.pause
    # One logical CPU per slot: Ray keeps about one idle worker per CPU, so fractional CPUs per
    # unit (more units than CPUs) make it kill and start workers between units (see the notes).
    hold_worker_leases(RayOptions())  # as init_ray does (which takes no num_cpus)
    ray.init(address="local", num_cpus=c, resources={"sandbox": c}, include_dashboard=False, log_to_driver=False)
    try:
        cheap_sweep.ship_by_value()
        units, instances = units_of(n, pause)
        cpus = 1
        ray_wall(units[:c * 2], instances, c, cpus)  # warm-up: start the workers
        ideal = math.ceil(n / c) * pause
        walls = {"thread pool": min(pool_wall(units, instances, c) for _ in range(args.repeat)),
                 "Ray run_units": min(ray_wall(units, instances, c, cpus) for _ in range(args.repeat))}
    finally:
        ray.shutdown()
    per_unit = {k: (w - ideal) * c / n * 1000 for k, w in walls.items()}
    lines = [(f"## 1. Scheduling overhead: {n} units of {pause:g} s, {c} in flight (ideal wall {ideal:.2f} s; "
             f"best of {args.repeat})"), "",
             "| path | wall s | units/s | overhead ms/unit |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {w:.2f} | {n / w:.1f} | {per_unit[k]:.1f} |" for k, w in walls.items()]
    extra = per_unit["Ray run_units"] - per_unit["thread pool"]
    lines += ["", f"Ray - thread pool: {extra:+.1f} ms per unit (goal <= 50): {'met' if extra <= 50 else 'NOT met'}",
              ""]
    return lines


def nodes(args) -> list[str]:
    import ray
    from ray.cluster_utils import Cluster

    from raydist.cluster.scheduler import init_ray

    n, pause = args.node_units, args.node_pause
    units, instances = units_of(n, pause)
    pool_cold = pool_wall(units[:2], instances, 1)
    pool = min(pool_wall(units, instances, 1) for _ in range(args.repeat))
    rows = []
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        for count in (1, 2, 3):
            cluster.add_node(num_cpus=1, resources={"sandbox": 1})
            cluster.wait_for_nodes()
            if not ray.is_initialized():
                init_ray(RayOptions(address=cluster.address, worker_lease_s=args.worker_lease_s))
                cheap_sweep.ship_by_value()
            while ray.cluster_resources().get("sandbox", 0) < count:
                time.sleep(0.2)
            cold = warm_up(units, instances, count)
            wall = min(ray_wall(units, instances, count * 2, 1) for _ in range(args.repeat))
            rows.append((count, cold, wall))
    finally:
        ray.shutdown()
        cluster.shutdown()
    base = n / rows[0][2]
    lines = [(f"## 2. Nodes: {n} units of {pause:g} s; each worker node 1 CPU + 1 sandbox slot, one unit at a time, "
              f"2 in flight per slot, worker lease {args.worker_lease_s:g} s (best of {args.repeat} warm runs; "
              "warm-up: 2 units per slot, apart)"), "",
             ("| path | resources | warm-up s | wall s | ideal s | lost s | units/s | throughput ratio | "
              "resource ratio | scaling efficiency |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
             (f"| thread pool, 1 worker | 1 | {pool_cold:.2f} | {pool:.2f} | {n * pause:.2f} | {pool - n * pause:.2f} "
              f"| {n / pool:.2f} | {n / pool / base:.3f} | 1 | — |")]
    for count, cold, wall in rows:
        ratio, ideal = n / wall / base, math.ceil(n / count) * pause
        lines.append(f"| Ray, {count} node(s) | {count} | {cold:.2f} | {wall:.2f} | {ideal:.2f} | {wall - ideal:.2f} "
                     f"| {n / wall:.2f} | {ratio:.3f} | {count} | {ratio / count:.3f} |")
    gap = rows[0][2] / pool - 1
    worst = min(n / wall / base / count for count, _, wall in rows)
    lines += ["", (f"1-node Ray vs thread pool: {100 * gap:+.1f}% wall (goal within 10%): "
                   f"{'met' if abs(gap) <= 0.10 else 'NOT met'}; lowest scaling efficiency {worst:.3f} (goal >= 0.9): "
                   f"{'met' if worst >= 0.9 else 'NOT met'}"), ""]
    return lines


def driver_child(n: int, out: str) -> None:
    """Plan, run and resume ``n`` cheap units through ``run_job`` in this process; print one
    JSON line of seconds and peak RSS (MiB) after each phase."""
    from raydist.driver.drive import run_job

    def peak() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    figures = {"start_mib": peak()}
    source = cheap_sweep.write_instances(Path(out) / "instances.jsonl", n)
    started = time.perf_counter()
    job = cheap_sweep.plan_sweep(source, out, "cluster.max_concurrency=6", "cluster.cpus_per_unit=0.25")
    figures |= {"plan_s": time.perf_counter() - started, "plan_mib": peak()}
    cheap_sweep.ship_by_value()
    with open(os.devnull, "w") as quiet:
        for phase in ("run", "resume"):
            saved = os.dup(1), os.dup(2)
            os.dup2(quiet.fileno(), 1)  # the summary and the progress bar, n lines of them
            os.dup2(quiet.fileno(), 2)
            try:
                started = time.perf_counter()
                status = run_job(job, execute=cheap_sweep.cheap_execute)
                seconds = time.perf_counter() - started
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
            figures |= {f"{phase}_s": seconds, f"{phase}_mib": peak(), f"{phase}_status": status}
    print(json.dumps(figures), flush=True)


def driver(args) -> list[str]:
    results = {}
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="raydist-bench-") as out:
            done = subprocess.run([sys.executable, __file__, "--driver-child", str(n), out], capture_output=True,
                                  text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"driver at {n} units failed:\n{done.stderr[-3000:]}")
        results[n] = json.loads(done.stdout.strip().splitlines()[-1])
    base = args.sizes[0]
    lines = [("## 3. The driver (run_job) on cheap units: wall and peak RSS per phase "
             "(run includes Ray's start; per-unit ratio = ms/unit relative to the first size)"), "",
             ("| units | plan s | plan ms/unit | run s | run ms/unit | resume s | resume ms/unit | "
             "RSS after plan MiB | after run MiB | after resume MiB | exit |"),
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, r in results.items():
        lines.append(f"| {n} | {r['plan_s']:.2f} | {1000 * r['plan_s'] / n:.2f} | {r['run_s']:.1f} "
                     f"| {1000 * r['run_s'] / n:.2f} | {r['resume_s']:.1f} | {1000 * r['resume_s'] / n:.2f} "
                     f"| {r['plan_mib']:.0f} | {r['run_mib']:.0f} | {r['resume_mib']:.0f} "
                     f"| {r['run_status']}/{r['resume_status']} |")
    lines += ["", "| units | plan per-unit ratio | run per-unit ratio | resume per-unit ratio |",
              "|---:|---:|---:|---:|"]
    for n, r in results.items():
        b = results[base]
        lines.append(" | ".join([f"| {n}"] + [f"{(r[k] / n) / (b[k] / base):.2f}" for k in ("plan_s", "run_s",
                                                                                            "resume_s")]) + " |")
    peak = max(r["resume_mib"] for r in results.values())
    lines += ["", f"peak driver RSS {peak:.0f} MiB (goal < 1024): {'met' if peak < 1024 else 'NOT met'}", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pause", type=float, default=0.2, help="seconds per unit in the overhead comparison")
    parser.add_argument("--units", type=int, default=40, help="units in the overhead comparison")
    parser.add_argument("--concurrency", type=int, default=4, help="units in flight in the overhead comparison")
    parser.add_argument("--node-units", type=int, default=36, help="units of the 1/2/3-node sweep")
    parser.add_argument("--node-pause", type=float, default=0.5, help="seconds per unit of the 1/2/3-node sweep")
    parser.add_argument("--worker-lease-s", type=float, default=RayOptions().worker_lease_s,
                        help="cluster.worker_lease_s of the 1/2/3-node sweep (0.5: Ray's own default)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000], help="driver sweep sizes")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of each timing (best kept)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["overhead", "nodes", "driver"])
    parser.add_argument("--driver-child", nargs=2, metavar=("N", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.driver_child:
        driver_child(int(args.driver_child[0]), args.driver_child[1])
        return 0
    load = os.getloadavg()
    print(f"# bench/scheduling.py on {os.cpu_count()} CPUs; load average at start {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}\n", flush=True)
    for name, section in (("overhead", overhead), ("nodes", nodes), ("driver", driver)):
        if name not in args.skip:
            print("\n".join(section(args)), flush=True)
    load = os.getloadavg()
    print(f"load average at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
