#!/usr/bin/env bash
# Build raydist's offline base image: a Debian bookworm root file system made with debootstrap
# (Python 3.11, venv, pip, pytest, git, patch), imported with `docker import`. No registry is needed.
# The tag carries a hash of this recipe, so a changed recipe builds a new image and an unchanged
# one is reused. Usage: raydist/sandbox/base_image.sh [--print-tag]
# RAYDIST_ENGINE=podman builds it into Podman's store instead (the same recipe, `podman import`).
set -euo pipefail

SUITE=bookworm
MIRROR=${RAYDIST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-venv,python3-pip,python3-pytest,python-is-python3,git,patch,procps,ca-certificates
RECIPE="suite=$SUITE;variant=minbase;packages=$PACKAGES;env=v1"
HASH=$(printf '%s' "$RECIPE" | sha256sum | cut -c1-12)
TAG="raydist/base:$SUITE-$HASH"
ENGINE=${RAYDIST_ENGINE:-docker}
case "$ENGINE" in
  docker|podman) ;;
  *) echo "base_image.sh: RAYDIST_ENGINE=$ENGINE is not an engine; use docker or podman" >&2; exit 2 ;;
esac

if [ "${1:-}" = "--print-tag" ]; then echo "$TAG"; exit 0; fi

if "$ENGINE" image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG present"
  exit 0
fi

command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }

ROOT=$(mktemp -d /var/tmp/raydist-rootfs.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
echo "debootstrap $SUITE into $ROOT (a few minutes)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || {
  echo "debootstrap failed; last lines of $ROOT.log:" >&2; tail -20 "$ROOT.log" >&2; exit 1; }
rm -f "$ROOT.log"
# Slim the image: package caches and docs are not needed to run tests.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/*
mkdir -p "$ROOT/testbed"

tar -C "$ROOT" -c . | "$ENGINE" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
  --change 'WORKDIR /testbed' \
  --change "LABEL raydist.recipe=$HASH" \
  --change 'CMD ["sleep", "infinity"]' \
  - "$TAG" >/dev/null
echo "base image $TAG built ($ENGINE)"
