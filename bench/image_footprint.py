"""Bytes of images per instance: raydist's built-in, realfix and offline SWE-bench sets against
the official SWE-bench images (issue 31, item 5).

For each set, the instance images of its rows (``raydist/instance:<recipe key>``) that are on
this node are measured with ``raydist.sandbox.footprint``: each image in full, and the set
together with the base image, each shared layer once (what the set takes on a node). With
``--build`` the missing ones are built first (offline, from PyPI sdists and a host wheelhouse:
minutes per recipe).

The official figures, per SWE-bench Verified instance (500 instances), from the issue's sources
(SWE-bench #144/#247/#311, OpenHands #690/#695):
  env cache       about 100 GB for Verified   -> 200 MB per instance
  instance cache  up to 2 TB for Verified     -> 4 GB per instance
  Epoch AI's images 30 GiB for Verified       -> 64.4 MB per instance
  LogicStar's images 5 GiB for Verified       -> 10.7 MB per instance

Usage: python bench/image_footprint.py [--build] [--data-root ../shared/data] [--cache-dir DIR]
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from raydist.driver.benchmark import load_benchmark
from raydist.sandbox import base_image_tag, connect, ensure_instance_image
from raydist.sandbox.footprint import inspect, union_bytes
from raydist.sandbox.images import instance_tag

VERIFIED = 500
OFFICIAL = {  # bytes per Verified instance
    "official env cache (100 GB / 500)": 100e9 / VERIFIED,
    "official instance cache (2 TB / 500)": 2e12 / VERIFIED,
    "Epoch (30 GiB / 500)": 30 * 2**30 / VERIFIED,
    "LogicStar (5 GiB / 500)": 5 * 2**30 / VERIFIED,
}
SETS = {"builtin": "builtin", "realfix": "{data}/tasks/realfix.jsonl",
        "swebench_offline": "{data}/swebench/offline.jsonl"}


def measure(client, name: str, source: str, base, *, build: bool, cache_dir: Path) -> dict | None:
    """The figures of one instance set, None when none of its images is on the node."""
    instances = [i for i in load_benchmark({"source": source}) if i.recipe is not None]
    if build:
        for instance in instances:
            ensure_instance_image(client, instance.recipe, cache_dir=cache_dir, label=instance.instance_id)
    images = [info for info in (inspect(client, instance_tag(i.recipe)) for i in instances) if info]
    if not images:
        print(f"{name}: 0 of {len(instances)} instance images on this node (--build builds them)")
        return None
    n = len(images)
    together = union_bytes(images)
    # An instance image is its base image's layers plus its own. The base's layers are the first
    # len(base.layers) of an image with the same base recipe label; a base rebuilt from the same
    # recipe is new layers (debootstrap is not reproducible), so a set may sit on several builds.
    k, recipe = len(base.layers), base.labels.get("raydist.recipe")
    bases = {i.layers[k - 1].chain_id: sum(layer.size for layer in i.layers[:k]) for i in images
             if i.labels.get("raydist.recipe") == recipe and len(i.layers) > k}
    own = together - sum(bases.values())
    return {"set": name, "instances": len(instances), "measured": n, "base_builds": len(bases),
            "base_is_current": set(bases) == {base.layers[-1].chain_id},
            "full_per_instance": sum(i.size for i in images) / n,
            "node_per_instance": together / n, "own_per_instance": own / n,
            "at_500": base.size / VERIFIED + own / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="store_true", help="build the missing instance images first")
    parser.add_argument("--data-root", default=os.environ.get("RAYDIST_DATA_ROOT")
                        or str(Path(__file__).resolve().parents[2] / "shared" / "data"),
                        help="folder of the instance files (RAYDIST_DATA_ROOT, else shared/data beside the checkout)")
    parser.add_argument("--cache-dir", default=os.environ.get("RAYDIST_CACHE_DIR")
                        or str(Path.home() / ".cache" / "raydist"),
                        help="the launches' cache_dir, for --build (RAYDIST_CACHE_DIR, else ~/.cache/raydist)")
    args = parser.parse_args()
    client = connect().client
    base = inspect(client, base_image_tag())
    if base is None:
        raise SystemExit(f"base image {base_image_tag()} is absent: bash launch/setup.sh")
    rows = [row for name, source in SETS.items()
            if (row := measure(client, name, source.format(data=args.data_root), base, build=args.build,
                               cache_dir=Path(args.cache_dir)))]
    mb = 1e6
    print(f"base image {base.tags[0]}: {base.size / mb:.1f} MB")
    for r in rows:
        on = "the base tagged now" if r["base_is_current"] else "not only the base tagged now (a rebuilt base)"
        print(f"{r['set']}: its images sit on {r['base_builds']} build(s) of the base, {on}")
    print(f"{'set':<18} {'images':>9} {'full/inst MB':>13} {'node/inst MB':>13} {'own/inst MB':>12} {'at 500 MB':>10}")
    for r in rows:
        print(f"{r['set']:<18} {r['measured']:>4}/{r['instances']:<4} {r['full_per_instance'] / mb:>13.1f} "
              f"{r['node_per_instance'] / mb:>13.1f} {r['own_per_instance'] / mb:>12.2f} {r['at_500'] / mb:>10.2f}")
    print("full: each image counted in full; node: the set's images, each layer once; "
          "own: what an instance adds to its base;\n"
          "at 500: per instance of a 500-instance set like Verified (one base shared by 500, plus own)")
    print("\nratio official/raydist bytes per instance (raydist at 500):")
    print(f"{'set':<18} " + " ".join(f"{k.split(' (')[0][:22]:>24}" for k in OFFICIAL))
    print(f"{'(official MB)':<18} " + " ".join(f"{v / mb:>24.1f}" for v in OFFICIAL.values()))
    for r in rows:
        print(f"{r['set']:<18} " + " ".join(f"{v / r['at_500']:>23.1f}x" for v in OFFICIAL.values()))


if __name__ == "__main__":
    main()
