"""The explorer seam: what to measure next (ask/tell).

Heron (ASPLOS'23, §5) alternates rounds of "propose a batch from the CSP, measure it, retrain the
cost model". Here the tune loop owns the budget, the measurement and the records, as
MetaSchedule's task scheduler does around its ``SearchStrategy``; an :class:`Explorer` only
proposes assignments (:meth:`Explorer.propose`) and learns from their results
(:meth:`Explorer.observe`).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from heronlike.cost_model import CostModel
from heronlike.csp import CSP
from heronlike.features import CSPFeatures, Featurizer

if TYPE_CHECKING:
    from heronlike.prior import LinearPrior
    from heronlike.sampler import RandSAT

__all__ = ["Explorer", "NoOptions", "Observation"]


def check_options(
    options: object,
    *,
    positive: tuple[str, ...] = (),
    non_negative: tuple[str, ...] = (),
    unit: tuple[str, ...] = (),
) -> None:
    """Validate explorer options: integers >= 1, integers >= 0, and fractions in [0, 1].

    Raises:
        ValueError: naming the first option out of range.
    """
    for names, low in ((positive, 1), (non_negative, 0)):
        for name in names:
            value = getattr(options, name)
            if int(value) != value or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value}")
    for name in unit:
        value = getattr(options, name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")


@dataclass(frozen=True)
class Observation:
    """The result of one trial: the assignment measured and its throughput in op/s.

    ``throughput`` is ``None`` for a failed trial (did not build, crashed, timed out, wrong
    result); failed trials never reach the cost model.
    """

    assignment: dict[str, int]
    throughput: float | None


@dataclass(frozen=True)
class NoOptions:
    """An explorer without options."""


class Explorer(ABC):
    """Proposes assignments of a CSP to measure; learns from what was measured.

    Subclasses set ``name`` (the key in :data:`heronlike.explore.EXPLORERS`), may set ``Options``
    to a frozen dataclass of their options (defaults and a ``metadata={"doc": ...}`` per field),
    and implement :meth:`propose`. The options given as keywords to ``__init__`` are checked
    against it and stored in ``self.options``.

    Args:
        csp: the schedule space.
        sampler: RandSAT over ``csp``; the only way an explorer draws valid assignments, and
            ``sampler.key`` is the identity of an assignment (its knob values).
        cost_model: scores features from :meth:`features`; refitted by :meth:`observe`.
        rng: the explorer's own random numbers (forked from the tune seed).
        featurizer: turns assignments into the cost model's features; default
            :class:`~heronlike.features.CSPFeatures` (Heron's: every CSP variable). The tune loop
            passes :class:`~heronlike.features.ScheduleFeatures`, which adds loop, footprint and
            parallelism features derived without compiling.
        prior: ranks the first, untrained round (:meth:`initial`; the target's
            :meth:`~heronlike.target.DLATarget.prior`); None: that round is random (Heron).
        **options: fields of ``Options``.

    Raises:
        TypeError: on an option ``Options`` does not have (the message names it).
    """

    name: ClassVar[str]
    Options: ClassVar[type] = NoOptions
    #: names of the integer counters :meth:`stats` reports (e.g. invalid children of a GA)
    counters: ClassVar[tuple[str, ...]] = ()
    #: :meth:`initial` with a prior: RandSAT samples drawn per assignment proposed
    prior_pool_factor: ClassVar[int] = 8
    #: :meth:`initial` with a prior: share of the assignments taken best-first by the prior (the
    #: rest are drawn at random from the pool, so the first fit still sees a spread)
    prior_share: ClassVar[float] = 0.75

    def __init__(
        self,
        csp: CSP,
        sampler: RandSAT,
        cost_model: CostModel,
        rng: np.random.Generator,
        *,
        featurizer: Featurizer | None = None,
        prior: LinearPrior | None = None,
        **options: Any,
    ) -> None:
        known = {f.name for f in dataclasses.fields(self.Options)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unknown option(s) {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(sorted(known)) or 'none'}"
            )
        self.csp = csp
        self.sampler = sampler
        self.cost_model = cost_model
        self.rng = rng
        self.featurizer: Featurizer = featurizer if featurizer is not None else CSPFeatures(csp)
        self.prior = prior
        self.options = self.Options(**options)
        self.observations: list[Observation] = []

    @abstractmethod
    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        """Up to ``n`` new assignments to measure.

        Each is a full, valid assignment of ``self.csp``; they are distinct, and none has a
        ``sampler.key`` in ``exclude`` (the keys already measured). Fewer than ``n`` come back
        only when the sampler cannot find more.
        """

    def initial(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        """``n`` new assignments to measure while the cost model is untrained.

        Without a prior: ``n`` RandSAT samples (Heron's first round). With one: a pool of
        ``prior_pool_factor * n`` RandSAT samples, of which the ``ceil(prior_share * n)`` best by
        the prior's score come first, then the rest of the batch uniformly at random without
        replacement from the remaining pool (``rng``).
        """
        if n <= 0:
            return []
        if self.prior is None:
            return self.sampler.sample(n, exclude=exclude)
        pool = self.sampler.sample(n * self.prior_pool_factor, exclude=exclude)
        if len(pool) <= n:
            return pool
        scores = self.prior.score(self.featurizer.names, self.features(pool))
        order = np.argsort(-scores, kind="stable")
        n_best = min(n, math.ceil(self.prior_share * n))
        rest = np.sort(order[n_best:])
        randoms = self.rng.choice(rest, size=n - n_best, replace=False) if n > n_best else []
        return [pool[int(i)] for i in order[:n_best]] + [pool[int(i)] for i in randoms]

    def observe(self, observations: Sequence[Observation]) -> None:
        """Remember ``observations`` and refit the cost model on every valid one seen so far."""
        self.observations.extend(observations)
        valid = [o for o in self.observations if o.throughput is not None]
        if not valid:
            return
        features = self.features([o.assignment for o in valid])
        throughput = np.array([o.throughput for o in valid], dtype=np.float64)
        self.cost_model.fit(features, throughput)

    def features(self, assignments: Sequence[Mapping[str, int]]) -> np.ndarray:
        """The cost model's features of ``assignments``: ``(n, len(featurizer.names))``."""
        return self.featurizer(assignments)

    def stats(self) -> dict[str, int]:
        """The explorer's counters (:attr:`counters`) so far, e.g. for an invalid rate."""
        return {name: int(getattr(self, name)) for name in self.counters}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options})"
