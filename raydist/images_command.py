"""``raydist images``: raydist's images on this node, their bytes and last use; and ``raydist
images prune --keep-gb N``, which removes the least recently used until they fit (issue 31, item 5).

raydist's images are those it made (a ``raydist/`` tag or a raydist label,
``raydist.sandbox.footprint.ImageInfo.is_raydist``) and those a launch pulled (the image ledger,
``raydist.sandbox.image_ledger``). An image's last use is the start of the last launch that used
it (the ledger), else when it was made. Sizes are the engine's (``docker system df``): one GB is
10^9 bytes, and the total counts a layer shared by several images once.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from fnmatch import fnmatchcase
from pathlib import Path

DEFAULT_CACHE = "RAYDIST_CACHE_DIR, else ~/.cache/raydist"
GB = 10**9


def add_parser(sub) -> None:
    """Add ``images`` (and ``images prune``) to ``raydist``'s subcommands ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    images = sub.add_parser(
        "images", allow_abbrev=False, formatter_class=fmt, usage="raydist images [prune --keep-gb N [--dry-run]] "
        "[--cache-dir DIR] [--provider NAME] [--docker-host URL] [--match GLOB] [--json]",
        help="List raydist's images on this node (size, shared bytes, last use, launches); prune the least "
             "recently used.",
        description="List raydist's images on this node: tag, id, size, the bytes it shares with another listed "
                    "image, its last use (the start of the last launch that used it, from the ledger in "
                    "<cache_dir>/images/ledger.json; else when it was made) and the launches that used it. The total "
                    "counts each shared layer once. A run's own images are in its run directory's images.json.",
        epilog="Exit status: 0 listed (or pruned to fit), 1 the engine cannot be reached, the ledger is damaged, or "
               "prune could not reach the size (images in use by a container are never removed), 2 a bad --keep-gb, "
               "--provider or --docker-host, or an empty --cache-dir.")
    _common(images)
    action = images.add_subparsers(dest="action", metavar="ACTION")
    prune = action.add_parser(
        "prune", allow_abbrev=False, formatter_class=fmt, prog="raydist images prune",
        usage="raydist images prune --keep-gb N [--dry-run] [--cache-dir DIR] [--provider NAME] [--docker-host URL] "
              "[--match GLOB]",
        help="Remove raydist's least recently used images until they take at most --keep-gb GB.",
        description="Remove raydist's images, least recently used first, until the rest take at most N GB on the "
                    "node (shared layers once). Never removes an image a container (running or stopped) was made "
                    "from, nor an image raydist did not make or pull.")
    prune.add_argument("--keep-gb", required=True, metavar="N", help="what raydist's images may take, in GB (10^9 B)")
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    _common(prune, suppress=True)


def _common(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument("--cache-dir", metavar="DIR", default=default,
                        help=f"the launches' cache_dir, where the ledger is ({DEFAULT_CACHE})")
    parser.add_argument("--provider", metavar="NAME", default=default,
                        help="the sandbox provider whose image store is listed (sandbox.provider: docker or podman; "
                             "default docker)")
    parser.add_argument("--docker-host", metavar="URL", default=default,
                        help="the engine's API address: Docker's (sandbox.docker_host; default DOCKER_HOST or the "
                             "local socket) or Podman's service (sandbox.podman_socket, e.g. "
                             "unix:///run/raydist-podman.sock), each engine a store of its own")
    parser.add_argument("--match", metavar="GLOB", default=default,
                        help="only images with a tag matching GLOB (fnmatch), e.g. 'raydist/instance:*' (which also "
                             "matches Podman's docker.io/raydist/instance:...)")
    parser.add_argument("--json", action="store_true", default=default if suppress else False,
                        help="print JSON (exact bytes) instead of the table")


def keep_bytes(text: str) -> int:
    """Bytes of ``--keep-gb`` ``text`` (a number of GB >= 0). Raises ``ValueError`` naming it."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"--keep-gb {text!r} is not a size: give a number of GB >= 0, e.g. --keep-gb 30")
    return round(value * GB)


def matches(tags, glob: str) -> bool:
    """Whether one of ``tags`` matches ``glob`` (fnmatch), as the engine names it or as Docker
    would (``raydist.sandbox.footprint.short_name``: Podman's ``docker.io/raydist/instance:k``
    matches ``raydist/instance:*``)."""
    from raydist.sandbox.footprint import short_name  # deferred: docker

    return any(fnmatchcase(tag, glob) or fnmatchcase(short_name(tag), glob) for tag in tags)


def images_main(args: argparse.Namespace) -> int:
    """Run ``raydist images`` / ``raydist images prune`` (module docstring); the exit status."""
    from raydist.sandbox import PROVIDERS, SandboxUnavailable, connect  # deferred: docker
    from raydist.sandbox.engine import address_problem  # deferred: docker
    from raydist.sandbox.image_ledger import read_ledger  # deferred: docker

    provider = getattr(args, "provider", None)
    try:
        keep = keep_bytes(args.keep_gb) if args.action == "prune" else None
        if args.cache_dir == "":
            raise ValueError("--cache-dir is empty: give the launches' cache_dir, or leave it out for "
                             f"{DEFAULT_CACHE}")
        if provider is not None and provider not in PROVIDERS:
            raise ValueError(f"--provider {provider!r} is not a sandbox provider; choose one of: "
                             f"{', '.join(sorted(PROVIDERS))}")
        if address_problem(args.docker_host):
            raise ValueError(f"--docker-host {args.docker_host!r} {address_problem(args.docker_host)}")
    except ValueError as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 2
    cache_dir = args.cache_dir or os.environ.get("RAYDIST_CACHE_DIR") or str(Path.home() / ".cache" / "raydist")
    try:
        # footprint reads the engine's image store
        client = connect(provider or "docker", address=args.docker_host).client
        ledger = read_ledger(cache_dir)
    except (SandboxUnavailable, ValueError) as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 1
    images = [i for i in _raydist_images(client, ledger) if args.match is None or matches(i.tags, args.match)]
    if keep is not None:
        return _prune(client, images, ledger, keep, dry_run=args.dry_run)
    _list(images, ledger, as_json=args.json)
    return 0


def _raydist_images(client, ledger: dict) -> list:
    from raydist.sandbox.footprint import node_images  # deferred: docker

    return [i for i in node_images(client)
            if i.is_raydist or ledger.get(i.id, {}).get("origin") in ("built", "pulled")]


def _last_use(image, ledger: dict) -> float:
    return float(ledger[image.id]["last_use"]) if image.id in ledger else image.created


def _list(images: list, ledger: dict, *, as_json: bool) -> None:
    from raydist.sandbox.footprint import shared_bytes, union_bytes  # deferred: docker

    rows = [{"tags": list(i.tags), "id": i.id, "bytes": i.size, "shared_bytes": shared_bytes(i, images),
             "last_use": _last_use(i, ledger), "launches": ledger.get(i.id, {}).get("launches", [])}
            for i in sorted(images, key=lambda i: -_last_use(i, ledger))]
    total = {"images": rows, "bytes_on_node": union_bytes(images), "bytes_each_in_full": sum(i.size for i in images)}
    if as_json:
        print(json.dumps(total, indent=1))
        return
    print(f"{'TAG':<48} {'ID':<12} {'SIZE':>10} {'SHARED':>10} {'LAST USE (UTC)':<19} LAUNCHES")
    for row in rows:
        launches = row["launches"]
        used = f"{len(launches)}: {launches[-1]}" if launches else "0"
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row["last_use"]))
        print(f"{(row['tags'] or ['<none>'])[0]:<48} {row['id'].split(':')[-1][:12]:<12} {_size(row['bytes']):>10} "
              f"{_size(row['shared_bytes']):>10} {when:<19} {used}")
        for tag in row["tags"][1:]:
            print(f"  {tag}")
    print(f"{len(rows)} images: {_size(total['bytes_on_node'])} on the node ({total['bytes_on_node']} B, each shared "
          f"layer once); {_size(total['bytes_each_in_full'])} if each were counted in full")


def _prune(client, images: list, ledger: dict, keep: int, *, dry_run: bool) -> int:
    from docker.errors import APIError  # deferred: docker

    from raydist.sandbox.footprint import containers_by_image, prune_plan, remove  # deferred: docker

    users = containers_by_image(client)
    removable = {i.id for i in images if i.id not in users}
    chosen, rest = prune_plan(images, {i.id: _last_use(i, ledger) for i in images}, removable, keep)
    by_id = {i.id: i for i in images}
    for image_id in chosen:
        image = by_id[image_id]
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(_last_use(image, ledger)))
        print(f"{'would remove' if dry_run else 'removing'} {' '.join(image.tags) or image.id} "
              f"({_size(image.size)}, last used {when})")
        if not dry_run:
            try:
                remove(client, image)
            except APIError as exc:
                print(f"raydist: error: {image_id} could not be removed ({exc.explanation or exc})", file=sys.stderr)
                return 1
    if rest > keep:
        kept = sorted(f"{' '.join(by_id[i].tags) or i} by {', '.join(users[i])}" for i in users if i in by_id)
        print(f"raydist: error: raydist's images still take {_size(rest)} ({rest} B) > --keep-gb {keep / GB:g}; "
              f"in use by a container: {'; '.join(kept) or 'none'}", file=sys.stderr)
        return 1
    print(f"raydist's images take {_size(rest)} ({rest} B) <= {keep / GB:g} GB"
          + (" after the removals above" if chosen and not dry_run else " (dry run)" if chosen else ""))
    return 0


def _size(size: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
