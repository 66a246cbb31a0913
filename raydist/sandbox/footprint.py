"""How many bytes images take on a node, shared layers counted once, and which to remove first.

An image is a chain of layers (its ``RootFS.Layers`` diff ids). A layer is stored once however
many images hold it, and the engine keys it by its chain id (the OCI image spec's ``ChainID``:
the digest of the diff ids up to it), so two images share a layer exactly when they share a
prefix of diff ids. A layer's size is what the engine's image history reports for the history
entry that made it (Docker's ``DiffSize``, the figure ``docker system df`` adds up), so the
bytes of a set of images on a node are the sizes of the union of their chain ids.

Every function that asks the engine takes a docker-SDK client (``client.images``,
``client.api.history``, ``client.containers``), so it works on Docker and on Podman's
Docker-compatible API alike. The arithmetic (``chain_ids``, ``layer_sizes``, ``union_bytes``,
``shared_bytes``, ``prune_plan``) takes plain values and asks no engine (issue 31, item 5).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from docker.errors import ImageNotFound, NotFound

#: The image repositories raydist makes (``raydist.sandbox.images``: ``raydist/base``, ``raydist/instance``).
RAYDIST_PREFIX = "raydist/"
#: Labels an image raydist built carries (the base recipe, the instance build steps, the official layout).
RAYDIST_LABELS = ("raydist.recipe", "raydist.build", "raydist.role")
#: The registries Podman names a short image name with (a pulled or committed one, a built one).
PODMAN_REGISTRIES = ("docker.io/", "localhost/")

# A history entry of a metadata instruction makes no layer (classic builder: "#(nop)" without
# ADD/COPY; BuildKit: the bare instruction).
_METADATA = re.compile(r"^(/bin/sh -c #\(nop\)\s+(?!(ADD|COPY)\b)|(ENV|LABEL|CMD|ENTRYPOINT|USER|WORKDIR|EXPOSE|ARG|"
                       r"STOPSIGNAL|HEALTHCHECK|SHELL|VOLUME|ONBUILD|MAINTAINER)\b)")


@dataclass(frozen=True)
class Layer:
    """One stored layer: its ``chain_id`` (``sha256:<hex>``) and ``size`` in bytes."""

    chain_id: str
    size: int


@dataclass(frozen=True)
class ImageInfo:
    """One image on the node: ``id`` (``sha256:<hex>``), its ``tags``, its ``layers`` (base
    first), ``size`` (bytes, the sum of its layers), ``created`` (Unix seconds) and ``labels``."""

    id: str
    tags: tuple[str, ...]
    layers: tuple[Layer, ...]
    size: int
    created: float
    labels: Mapping[str, str]

    @property
    def is_raydist(self) -> bool:
        """Whether raydist made it: a ``raydist/`` tag or one of ``RAYDIST_LABELS``."""
        return (any(short_name(t).startswith(RAYDIST_PREFIX) for t in self.tags)
                or any(k in self.labels for k in RAYDIST_LABELS))


def short_name(tag: str) -> str:
    """``tag`` as Docker names it: without the registry Podman puts before a short name
    (``docker.io/raydist/instance:k`` and ``localhost/raydist/base:t`` are ``raydist/instance:k``
    and ``raydist/base:t``; ``docker.io/library/debian:12`` is ``debian:12``). Any other tag is
    returned as it is."""
    for registry in PODMAN_REGISTRIES:
        if tag.startswith(registry):
            rest = tag[len(registry):]
            return rest.removeprefix("library/") if registry == "docker.io/" else rest
    return tag


def chain_ids(diff_ids: Sequence[str]) -> list[str]:
    """The chain id of each layer of ``diff_ids`` (base first): the first is its diff id, each next
    ``sha256(<previous chain id> + " " + <diff id>)`` (OCI image spec, "Layer ChainID")."""
    chains: list[str] = []
    for diff_id in diff_ids:
        chains.append(diff_id if not chains else
                      "sha256:" + hashlib.sha256(f"{chains[-1]} {diff_id}".encode()).hexdigest())
    return chains


def layer_sizes(history: Sequence[tuple[int, str]], count: int) -> list[int]:
    """The size of each of an image's ``count`` layers (base first) from its ``history``
    (``(size, created_by)`` per entry, base first). An entry with a size made a layer; one without
    made a layer unless it is a metadata instruction (``ENV``, ``LABEL``, ``#(nop) CMD`` ...). When
    that does not give ``count`` layers, zero-size entries are taken (or dropped) from the base up
    until it does: a zero-size layer adds nothing wherever it sits. Raises ``ValueError`` when more
    entries have a size than the image has layers (a history that is not this image's)."""
    carries = [size > 0 or not _METADATA.match(created_by.strip()) for size, created_by in history]
    sized = sum(size > 0 for size, _ in history)
    if sized > count:
        raise ValueError(f"{sized} history entries have a size but the image has {count} layers")
    extra = sum(carries) - count
    for i, (size, _) in enumerate(history):
        if extra == 0:
            break
        if size == 0 and carries[i] == (extra > 0):
            carries[i] = not carries[i]
            extra += -1 if extra > 0 else 1
    return [size for (size, _), carries_layer in zip(history, carries, strict=True) if carries_layer]


def union_bytes(images: Iterable[ImageInfo]) -> int:
    """Bytes the ``images`` take together: each distinct layer (chain id) counted once."""
    return sum({layer.chain_id: layer.size for image in images for layer in image.layers}.values())


def shared_bytes(image: ImageInfo, others: Iterable[ImageInfo]) -> int:
    """Bytes of ``image``'s layers that one of ``others`` (another image) holds too."""
    theirs = {layer.chain_id for other in others if other.id != image.id for layer in other.layers}
    return sum(layer.size for layer in image.layers if layer.chain_id in theirs)


def prune_plan(images: Sequence[ImageInfo], last_use: Mapping[str, float], removable: set[str],
               keep_bytes: int) -> tuple[list[str], int]:
    """Which of ``images`` to remove so that the rest take at most ``keep_bytes`` (union, each
    layer once): the least recently used first (``last_use``: image id -> Unix seconds; ties by
    id), only ids in ``removable``, one at a time until the rest fit. Returns ``(ids to remove in
    that order, bytes the rest take)``; the bytes exceed ``keep_bytes`` when the removable ones
    were not enough."""
    kept = {image.id: image for image in images}
    total = union_bytes(kept.values())
    chosen: list[str] = []
    for image in sorted((i for i in images if i.id in removable), key=lambda i: (last_use.get(i.id, 0.0), i.id)):
        if total <= keep_bytes:
            break
        del kept[image.id]
        chosen.append(image.id)
        total = union_bytes(kept.values())
    return chosen, total


def inspect(client, ref: str) -> ImageInfo | None:
    """The ``ImageInfo`` of image ``ref`` (a tag or an id) on ``client``'s engine, None when absent."""
    try:
        image = client.images.get(ref)
    except ImageNotFound:
        return None
    return _info(client, image.attrs)


def _info(client, attrs: Mapping) -> ImageInfo:
    diff_ids = list((attrs.get("RootFS") or {}).get("Layers") or [])
    entries = reversed(client.api.history(attrs["Id"]))  # newest first from the engine
    history = [(int(h.get("Size") or 0), str(h.get("CreatedBy") or "")) for h in entries]
    sizes = layer_sizes(history, len(diff_ids))
    layers = tuple(Layer(chain, size) for chain, size in zip(chain_ids(diff_ids), sizes, strict=True))
    return ImageInfo(attrs["Id"], tuple(attrs.get("RepoTags") or ()), layers, int(attrs.get("Size") or 0),
                     _seconds(attrs.get("Created")), dict((attrs.get("Config") or {}).get("Labels") or {}))


def _seconds(created) -> float:
    """Unix seconds of an inspect ``Created`` (RFC 3339 with nanoseconds, or a number)."""
    if isinstance(created, (int, float)):
        return float(created)
    from datetime import datetime

    text = re.sub(r"(\.\d{6})\d*", r"\1", str(created or "1970-01-01T00:00:00Z")).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


def node_images(client) -> list[ImageInfo]:
    """Every tagged or top-level image on ``client``'s engine (``docker images``), as ``ImageInfo``."""
    infos = []
    for image in client.images.list():
        try:
            infos.append(_info(client, image.attrs))
        except (ImageNotFound, NotFound):
            continue  # removed while listing
    return infos


def containers_by_image(client) -> dict[str, list[str]]:
    """Image id -> ``"<name> (<state>)"`` of every container (running or not) made from it."""
    users: dict[str, list[str]] = {}
    for container in client.containers.list(all=True, sparse=True):
        attrs = container.attrs
        names = attrs.get("Names") or [container.id[:12]]
        users.setdefault(attrs.get("ImageID") or "", []).append(f"{names[0].lstrip('/')} ({attrs.get('State')})")
    return users


def node_layers(client) -> frozenset[str]:
    """The chain ids of every layer of ``node_images``: what is on the node now, to tell later
    which layers a run added."""
    return frozenset(layer.chain_id for image in node_images(client) for layer in image.layers)


def run_record(client, tags: Iterable[str], before: frozenset[str] | None) -> dict:
    """What a run's images take (``images.json``): for each of ``tags`` present on the node its
    ``tag``, ``id``, ``bytes`` and ``new`` (whether any of its layers came after ``before``, the
    ``node_layers`` taken when the run started: built or pulled by the run); ``bytes_used`` (each
    image in full, shared layers counted again), ``bytes_on_node`` (their layers, each once),
    ``bytes_built_or_pulled`` (their layers absent from ``before``, each once; None when
    ``before`` is None) and ``missing`` (tags not on the node)."""
    images, missing = [], []
    for tag in sorted(set(tags)):
        info = inspect(client, tag)
        (images.append((tag, info)) if info else missing.append(tag))
    new_layers = {layer.chain_id: layer.size for _, info in images for layer in info.layers
                  if before is not None and layer.chain_id not in before}
    return {
        "images": [{"tag": tag, "id": info.id, "bytes": info.size,
                    "new": before is not None and any(layer.chain_id in new_layers for layer in info.layers)}
                   for tag, info in images],
        "bytes_used": sum(info.size for _, info in images),
        "bytes_on_node": union_bytes(info for _, info in images),
        "bytes_built_or_pulled": sum(new_layers.values()) if before is not None else None,
        "missing": missing,
    }


def remove(client, image: ImageInfo) -> None:
    """Remove ``image`` from the node: each of its tags (an image under several tags goes with the
    last), or its id when it has none. Never forced: the engine refuses an image a container uses
    (``docker.errors.APIError``, 409)."""
    for ref in image.tags or (image.id,):
        try:
            client.images.remove(ref)
        except ImageNotFound:
            pass  # removed meanwhile
