"""Admission control of model calls: how many calls may be in flight towards one model (AIMD,
adapting to 429/503), and a launch's budget of tokens and USD over every model call.

Model calls run in Ray workers on any node, so both live in Ray actors named per launch (like
the model server actor of ``raydist.cluster.serving``): one ``Ledger`` that every call reports
its usage to and that the driver asks before it submits each unit, and one limiter per model
that every call asks for a slot. A ``ModelEndpoint`` carries an ``AdmissionRef`` naming them;
``raydist.models.retry.call_with_retries`` does the asking, so every call site (agents, L1/L4
view building, DyCodeEval's agents and evaluation) is covered without knowing it.

The rules themselves (``AIMDLimit``, ``Budget``, ``UsageTotals``) are plain Python, tested
without Ray.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Self

from raydist.models.pricing import UnknownPrice, completion_cost

if TYPE_CHECKING:  # annotations only: the endpoint module loads litellm
    from raydist.models.endpoint import ModelEndpoint

OK, THROTTLED, FAILED = "ok", "throttled", "failed"
"""How one call attempt ended, as the limiter counts it: answered, refused with 429/503
(overloaded or rate limited), or failed otherwise (neither grows nor shrinks the limit)."""

PURPOSES = ("agent", "view", "judge", "generation", "evaluation")
"""What a model call is for; the ledger keeps its totals per purpose."""

LEASE_S = 1800.0
"""A slot not released within this many seconds is taken back (its worker died mid-call): a
lost release must not keep a model at a limit of 1 forever. Longer than any request timeout."""


class BudgetError(ValueError):
    """A budget setting that is not allowed; the message names the key."""


@dataclass(frozen=True)
class Budget:
    """``budget``: the most one launch may spend on model calls; None: no bound.

    Raises:
        BudgetError: a negative amount (names ``budget.usd`` or ``budget.tokens``).
    """

    usd: float | None = None
    """US dollars (litellm's price of each response; local models cost 0)."""
    tokens: int | None = None
    """Prompt plus completion tokens, as the servers report them in ``usage``."""

    def __post_init__(self) -> None:
        for key, value in (("usd", self.usd), ("tokens", self.tokens)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise BudgetError(f"budget.{key}={value!r}: give a number of at least 0, or null for no bound")

    @property
    def bounded(self) -> bool:
        """Whether any bound is set."""
        return self.usd is not None or self.tokens is not None

    def spent_by(self, totals: UsageTotals) -> str | None:
        """Why ``totals`` used the budget up (``"budget.tokens=1000 spent (1012 tokens)"``), or
        None while some is left. A bound is spent when the totals reach it."""
        if self.tokens is not None and totals.tokens >= self.tokens:
            return f"budget.tokens={self.tokens} spent ({totals.tokens} tokens)"
        if self.usd is not None and totals.usd >= self.usd:
            return f"budget.usd={self.usd:g} spent ({totals.usd:.6f} USD)"
        return None


@dataclass
class UsageTotals:
    """Running totals of model calls: ``calls`` (responses), ``input_tokens``,
    ``output_tokens``, ``usd`` and ``unpriced`` (responses litellm could not price, counted
    at 0 USD), overall and per purpose (``by_purpose``: purpose -> the same fields)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    unpriced: int = 0
    by_purpose: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, purpose: str, input_tokens: int, output_tokens: int, usd: float | None) -> None:
        """Count one response of ``purpose``; ``usd`` None: it could not be priced."""
        self.calls += 1
        self.input_tokens += int(input_tokens)
        self.output_tokens += int(output_tokens)
        self.usd += float(usd or 0.0)
        self.unpriced += usd is None
        mine = self.by_purpose.setdefault(purpose, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0.0})
        mine["calls"] += 1
        mine["input_tokens"] += int(input_tokens)
        mine["output_tokens"] += int(output_tokens)
        mine["usd"] += float(usd or 0.0)

    def as_dict(self) -> dict:
        """The totals as plain data (``tokens`` included)."""
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "tokens": self.tokens, "usd": self.usd, "unpriced": self.unpriced,
                "by_purpose": {k: dict(v) for k, v in sorted(self.by_purpose.items())}}


class AIMDLimit:
    """Additive-increase, multiplicative-decrease limit of the calls in flight towards one model
    (TCP's congestion rule, Chiu & Jain 1989): a throttled call halves the limit, a run of
    ``increase_after`` answered calls since the last change raises it by one; always between 1
    and ``maximum``. It starts at ``maximum``: a model that never refuses is never slowed.

    ``trace`` lists the limit after each change, starting with the initial one.

    Raises:
        ValueError: ``maximum`` or ``increase_after`` below 1.
    """

    def __init__(self, maximum: int, increase_after: int = 4, lease_s: float = LEASE_S):
        if int(maximum) < 1 or int(increase_after) < 1:
            raise ValueError(f"the calls in flight need maximum >= 1 and increase_after >= 1, got {maximum} and "
                             f"{increase_after}")
        self.maximum, self.increase_after, self.lease_s = int(maximum), int(increase_after), float(lease_s)
        self.limit = self.maximum
        self.leases: dict[str, float] = {}  # lease id -> when it was granted (monotonic seconds)
        self.successes = 0
        self.trace = [self.limit]

    @property
    def in_flight(self) -> int:
        return len(self.leases)

    def try_acquire(self, now: float | None = None) -> str | None:
        """A lease id when a call may start now (under the limit), else None. Leases older
        than ``lease_s`` are taken back first."""
        now = time.monotonic() if now is None else now
        for lease, since in list(self.leases.items()):
            if now - since > self.lease_s:
                del self.leases[lease]
        if len(self.leases) >= self.limit:
            return None
        lease = uuid.uuid4().hex
        self.leases[lease] = now
        return lease

    def release(self, lease: str | None, outcome: str) -> None:
        """End ``lease`` with ``outcome`` (``OK``, ``THROTTLED`` or ``FAILED``), adapting the limit."""
        self.leases.pop(lease, None)
        if outcome == THROTTLED:
            self.successes = 0
            self._set(max(1, self.limit // 2))
        elif outcome == OK:
            self.successes += 1
            if self.successes >= self.increase_after and self.limit < self.maximum:
                self.successes = 0
                self._set(self.limit + 1)

    def _set(self, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            self.trace.append(limit)


@dataclass(frozen=True)
class AdmissionRef:
    """What a model call needs to find its launch's admission actors (picklable; carried by
    ``ModelEndpoint.admission``): their Ray ``namespace``, the ``ledger``'s name, this
    model's ``limiter`` name (None: no limit) and the ``purpose`` its usage is booked under."""

    namespace: str
    ledger: str
    limiter: str | None
    purpose: str = "agent"


def _actors():
    """The two actor classes, made on first use (Ray is imported only where admission runs)."""
    import asyncio

    import ray

    @ray.remote(num_cpus=0, max_restarts=0)
    class Ledger:
        def __init__(self, budget: Budget):
            self.budget, self.totals = budget, UsageTotals()

        def record(self, purpose: str, input_tokens: int, output_tokens: int, usd: float | None) -> None:
            self.totals.add(purpose, input_tokens, output_tokens, usd)

        def spent(self) -> str | None:
            return self.budget.spent_by(self.totals)

        def totals_dict(self) -> dict:
            return self.totals.as_dict()

    @ray.remote(num_cpus=0, max_restarts=0)
    class Limiter:
        def __init__(self, maximum: int, increase_after: int):
            self.limit = AIMDLimit(maximum, increase_after)
            self.changed = None

        async def acquire(self) -> str:
            if self.changed is None:
                self.changed = asyncio.Condition()
            async with self.changed:
                lease = self.limit.try_acquire()
                while lease is None:
                    try:  # a lease may also expire: look again now and then
                        await asyncio.wait_for(self.changed.wait(), timeout=5.0)
                    except TimeoutError:
                        pass
                    lease = self.limit.try_acquire()
                return lease

        async def release(self, lease: str, outcome: str) -> None:
            if self.changed is None:
                self.changed = asyncio.Condition()
            async with self.changed:
                self.limit.release(lease, outcome)
                self.changed.notify_all()

        async def trace(self) -> list[int]:
            return list(self.limit.trace)

    return Ledger, Limiter


_CLASSES: list = []


def _classes():
    if not _CLASSES:
        _CLASSES.extend(_actors())
    return _CLASSES


class Admission:
    """The admission actors of one launch (driver side): a ``Ledger`` holding ``budget`` and a
    limiter per model, each allowing ``max_calls`` calls in flight (``increase_after``: see
    ``AIMDLimit``). Names are unique per launch, so launches sharing a cluster never share
    them. Needs Ray initialised; ``close()`` (or the ``with`` block's end) kills the actors.

    Raises:
        ValueError: ``max_calls`` or ``increase_after`` below 1.
    """

    def __init__(self, budget: Budget, *, max_calls: int, increase_after: int = 4):
        import ray

        AIMDLimit(max_calls, increase_after)  # refuses bad bounds here, not inside an actor
        self.budget, self.max_calls, self.increase_after = budget, int(max_calls), int(increase_after)
        self.launch = uuid.uuid4().hex[:12]
        self.namespace = ray.get_runtime_context().namespace
        ledger_cls, _ = _classes()
        self._ledger_name = f"raydist-ledger-{self.launch}"
        self.ledger = ledger_cls.options(name=self._ledger_name, namespace=self.namespace).remote(budget)
        self.limiters: dict[str, object] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def attach(self, endpoint: ModelEndpoint | None, purpose: str) -> ModelEndpoint | None:
        """``endpoint`` (a ``ModelEndpoint``; None passes through) with this launch's ledger and
        its model's limiter, booking usage under ``purpose`` (one of ``PURPOSES``)."""
        if endpoint is None:
            return None
        if purpose not in PURPOSES:
            raise ValueError(f"purpose {purpose!r}: one of {', '.join(PURPOSES)}")
        return replace(endpoint, admission=AdmissionRef(self.namespace, self._ledger_name,
                                                        self._limiter(endpoint.litellm_model), purpose))

    def _limiter(self, model: str) -> str:
        _, limiter_cls = _classes()
        if model not in self.limiters:
            name = f"raydist-limiter-{self.launch}-{len(self.limiters)}"
            self.limiters[model] = (name, limiter_cls.options(name=name, namespace=self.namespace)
                                    .remote(self.max_calls, self.increase_after))
        return self.limiters[model][0]

    def spent(self) -> str | None:
        """Why the budget is used up, or None while some is left (always None unbounded)."""
        import ray

        return ray.get(self.ledger.spent.remote()) if self.budget.bounded else None

    def totals(self) -> dict:
        """``UsageTotals.as_dict()`` of every call reported so far."""
        import ray

        return ray.get(self.ledger.totals_dict.remote())

    def trace(self, model: str) -> list[int]:
        """The limit of ``model``'s calls in flight after each change (``AIMDLimit.trace``)."""
        import ray

        return ray.get(self.limiters[model][1].trace.remote())

    def close(self) -> None:
        """Kill the ledger and the limiters (their totals are gone: read ``totals()`` first)."""
        import ray

        for handle in [self.ledger, *(h for _, h in self.limiters.values())]:
            with suppress(Exception):  # already gone with its Ray
                ray.kill(handle)
        self.limiters.clear()


# --- the worker side: what each call does --------------------------------------------------

_HANDLES: dict[tuple[str, str], object] = {}


def _handle(namespace: str, name: str):
    """The actor ``name`` (cached per process; looked up again after its Ray restarted)."""
    import ray

    key = (namespace, name)
    if key not in _HANDLES:
        _HANDLES[key] = ray.get_actor(name, namespace=namespace)
    return _HANDLES[key]


@contextmanager
def slot(ref: AdmissionRef | None, throttled: type | tuple) -> Iterator[None]:
    """Hold one of the model's slots while the block runs (waiting for one first); the block
    raising ``throttled`` releases it as ``THROTTLED``, any other exception as ``FAILED``,
    none as ``OK``. ``ref`` None (or no limiter): no limit."""
    if ref is None or ref.limiter is None:
        yield
        return
    import ray

    limiter = _handle(ref.namespace, ref.limiter)
    lease = ray.get(limiter.acquire.remote())
    outcome = FAILED
    try:
        yield
        outcome = OK
    except throttled:
        outcome = THROTTLED
        raise
    finally:
        ray.get(limiter.release.remote(lease, outcome))


def record_usage(ref: AdmissionRef | None, response, endpoint: ModelEndpoint) -> None:
    """Report ``response``'s usage (litellm's ``response.usage``; its price by
    ``raydist.models.pricing.completion_cost``, None when litellm cannot price it) to the
    launch's ledger, waiting until it is booked so the driver's next look sees it. ``ref``
    None: nothing to report to."""
    if ref is None:
        return
    import ray

    usage = getattr(response, "usage", None)
    try:
        usd = completion_cost(response, endpoint.litellm_model, local=endpoint.local)
    except UnknownPrice:
        usd = None
    ledger = _handle(ref.namespace, ref.ledger)
    ray.get(ledger.record.remote(ref.purpose, int(getattr(usage, "prompt_tokens", 0) or 0),
                                 int(getattr(usage, "completion_tokens", 0) or 0), usd))
