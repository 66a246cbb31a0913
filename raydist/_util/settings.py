"""How a setting is declared once, on the field of the dataclass that uses it.

Every setting is a field of a runtime dataclass (``raydist.views.ViewOptions``,
``raydist.sandbox.Limits``, ``raydist.agents.settings.AgentSettings``...), and those
dataclasses are the structured configs Hydra composes (``raydist.driver.config``). Whether a
field can change a unit's result, and so is part of its key, is declared on the field:
:func:`keyless` marks one that cannot (how long a call may wait, where and how fast units run);
every other field is keyed. The lists that leave such fields out (of a unit's key, of a
``--multirun`` job's directory name) derive from that mark: :func:`keyless_fields`,
:func:`keyless_paths`, :func:`keyed_fields`.

:func:`structured` makes a Hydra-composable node of a dataclass (a frozen runtime dataclass's
node is read-only in OmegaConf, so overrides could not reach it); :func:`build` turns a
composed node back into the dataclasses, running each one's own checks and naming the node
of the first that fails.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = ["KEY", "SettingsError", "build", "is_keyed", "keyed_fields", "keyless", "keyless_fields",
           "keyless_paths", "node_types", "structured"]

KEY = "key"
"""The field metadata entry saying whether a field is part of a unit's key (default True)."""


class SettingsError(ValueError):
    """A value a dataclass's own checks refuse; ``str()`` starts with the dotted key of its node."""


def keyless(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field that is part of no unit key: it bounds how long or where something
    runs, never what it computes (e.g. a request timeout). Use as ``name: float = keyless(120.0)``."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={KEY: False})


def is_keyed(f: dataclasses.Field) -> bool:
    """Whether dataclass field ``f`` is part of a unit's key (not marked :func:`keyless`)."""
    return bool(f.metadata.get(KEY, True))


def keyless_fields(cls: type) -> tuple[str, ...]:
    """The names of ``cls``'s fields marked :func:`keyless`, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if not is_keyed(f))


def keyed_fields(value: Any) -> dict[str, Any]:
    """The keyed fields of ``value`` (a dataclass instance) as plain data:
    ``dataclasses.asdict`` without the fields marked :func:`keyless`, at every depth (a nested
    dataclass gives its own keyed fields). E.g. of a ``ViewOptions``: every field but the
    request timing; of a ``LaunchConfig``: no ``cluster``, ``resume``, ``budget``,
    ``dry_run``, ``sandbox.docker_host``. What a unit's key hashes of the settings is made of
    these (``raydist.cluster.unit_key.unit_config_hash``)."""
    return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if is_keyed(f)}


def node_types(cls: type) -> dict[str, type]:
    """The fields of dataclass ``cls`` whose type is itself a dataclass (a node of the schema),
    by name; annotations written as strings (``from __future__ import annotations``) resolved."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)
            if isinstance(hints.get(f.name), type) and dataclasses.is_dataclass(hints[f.name])}


def _plain(value: Any) -> Any:
    return keyed_fields(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value


def keyless_paths(cls: type, prefix: str = "") -> Iterator[str]:
    """The dotted paths of the keyless settings of schema ``cls``: a keyless field that is a
    node gives ``<path>`` and ``<path>.*``; a keyed node's own keyless fields are listed below it.
    E.g. ``view.request_timeout_base_s``, ``cluster``, ``cluster.*``."""
    nodes = node_types(cls)
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        node = nodes.get(f.name)
        if not is_keyed(f):
            yield path
            if node is not None:
                yield f"{path}.*"
        elif node is not None:
            yield from keyless_paths(node, f"{path}.")


def structured(cls: type) -> Any:
    """``OmegaConf.structured(cls)`` with every node writable: OmegaConf makes the node of a
    frozen dataclass read-only, and Hydra could then not merge a group or an override into it.
    The frozen class is built again by :func:`build`."""
    def writable(node: Any) -> None:
        node._set_flag("readonly", None)
        if isinstance(node, DictConfig) and not node._is_none() and not node._is_missing():
            for key in node.keys():
                writable(node._get_node(key))

    node = OmegaConf.structured(cls)
    writable(node)
    return node


def build(cls: type, values: Any, path: str = "") -> Any:
    """``cls`` built from ``values`` (a mapping, e.g. a resolved DictConfig node), its
    dataclass fields built first, each by its own constructor so its own checks run. Raises
    :class:`SettingsError` ``"<path>: <the check's message>"`` for the first node refused
    (the node's dotted ``path``; no prefix at the root, nor for a message that starts with
    the key it names, e.g. ``cluster.address=...``)."""
    kwargs, nodes = {}, node_types(cls)
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        value = values[f.name]
        node = nodes.get(f.name)
        if node is not None and value is not None and not isinstance(value, node):
            value = build(node, value, f"{path}.{f.name}" if path else f.name)
        kwargs[f.name] = value
    try:
        return cls(**kwargs)
    except SettingsError:
        raise
    except (TypeError, ValueError) as exc:
        named = not path or str(exc).startswith((f"{path}.", f"{path}=", f"{path}:"))  # the check names its key
        raise SettingsError(str(exc) if named else f"{path}: {exc}") from exc
