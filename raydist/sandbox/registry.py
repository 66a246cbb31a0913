"""The sandbox providers by name (``sandbox.provider``), and the one ``connect`` everyone uses.

``PROVIDERS`` maps a name to its ``SandboxProvider`` class; a provider module adds its class with
``register``. Issue 31: ``sandbox.provider=docker|podman``.
"""
from __future__ import annotations

from raydist.sandbox.provider import DockerProvider, SandboxProvider

__all__ = ["PROVIDERS", "connect", "provider_class", "register"]

PROVIDERS: dict[str, type[SandboxProvider]] = {}


def register(cls: type[SandboxProvider]) -> type[SandboxProvider]:
    """Add ``cls`` under ``cls.name`` (usable as a class decorator); returns ``cls``. Raises
    ``ValueError`` when another class already holds the name."""
    held = PROVIDERS.get(cls.name)
    if held is not None and held is not cls:
        raise ValueError(f"sandbox provider {cls.name!r} is already {held.__qualname__}")
    PROVIDERS[cls.name] = cls
    return cls


def provider_class(name: str) -> type[SandboxProvider]:
    """The provider class named ``name``. Raises ``ValueError`` naming ``sandbox.provider``, the
    value and the choices, e.g. "sandbox.provider='nope' is not a sandbox provider; choose one of:
    docker"."""
    try:
        return PROVIDERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"sandbox.provider={name!r} is not a sandbox provider; choose one of: "
                         f"{', '.join(sorted(PROVIDERS))}") from None


def connect(provider: str = "docker", address: str | None = None, timeout: float = 10) -> SandboxProvider:
    """The provider named ``provider`` at ``address`` (``None``: its default), after a ping
    bounded by ``timeout`` seconds (``SandboxProvider.connect``). Raises ``ValueError`` for an
    unknown name, ``SandboxUnavailable`` when its engine cannot be reached."""
    return provider_class(provider).connect(address, timeout)


register(DockerProvider)
