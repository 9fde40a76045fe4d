"""RandSAT sampling with ε-greedy selection by the cost model (Heron's ``CRAND`` baseline).

Heron (ASPLOS'23, §5; ``tuner/tuner.py::epsilon_select``) measures, each round, the top
ε share of its candidates by predicted score and fills the rest of the batch at random. Heron
fills that rest by roulette-wheel sampling *with* replacement, so duplicates shrink its batches;
here the rest is drawn uniformly *without* replacement, so a batch is always full while the pool
lasts.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from heronlike.explore.base import Explorer, Observation

__all__ = ["RandomExplorer"]


@dataclass(frozen=True)
class RandomOptions:
    """Options of :class:`RandomExplorer`.

    Raises:
        ValueError: if ``epsilon`` is outside ``[0, 1]`` or ``pool_factor`` < 1.
    """

    epsilon: float = field(
        default=0.6,
        metadata={"doc": "share of a batch chosen greedily by the trained cost model (Heron: 0.6)"},
    )
    pool_factor: int = field(
        default=4, metadata={"doc": "RandSAT candidates drawn per assignment proposed"}
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {self.epsilon}")
        if int(self.pool_factor) != self.pool_factor or self.pool_factor < 1:
            raise ValueError(f"pool_factor must be an integer >= 1, got {self.pool_factor}")


class RandomExplorer(Explorer):
    """Random valid programs, picked ε-greedily once the cost model is trained.

    ``propose(n)``: while the cost model is untrained, ``n`` RandSAT samples (Heron's round 0;
    ranked by the target's prior where it has one, :meth:`~heronlike.explore.base.Explorer.
    initial`). Once trained: a pool of ``pool_factor * n`` RandSAT samples; the
    ``ceil(epsilon * n)`` best by predicted score, then the rest of the batch uniformly at random
    without replacement (using ``rng``) from the remaining pool. Greedy picks come first.
    """

    name = "random"
    Options = RandomOptions

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        if not self.cost_model.trained:
            return self._fresh(self.initial(n, exclude=exclude), exclude)
        size = n * int(self.options.pool_factor)
        pool = self._fresh(self.sampler.sample(size, exclude=exclude), exclude)
        if len(pool) <= n:
            return pool[:n]
        scores = np.asarray(self.cost_model.predict(self.features(pool)), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")
        n_greedy = min(n, math.ceil(self.options.epsilon * n))
        greedy = [int(i) for i in order[:n_greedy]]
        rest = np.sort(order[n_greedy:])
        randoms = self.rng.choice(rest, size=n - n_greedy, replace=False) if n > n_greedy else []
        return [pool[i] for i in greedy] + [pool[int(i)] for i in randoms]

    def _fresh(
        self, pool: list[dict[str, int]], exclude: Collection[tuple[int, ...]]
    ) -> list[dict[str, int]]:
        """``pool`` without duplicates and excluded keys (the sampler promises both; cheap)."""
        seen = set(exclude)
        out = []
        for a in pool:
            key = self.sampler.key(a)
            if key not in seen:
                seen.add(key)
                out.append(a)
        return out


class RandSATExplorer(Explorer):
    """RAND, Heron's baseline (ASPLOS'23 Fig. 12): RandSAT samples only, no cost model.

    ``propose(n)`` returns ``n`` fresh RandSAT samples; ``observe`` remembers the results but
    trains nothing, so the explorer's time is CP-SAT's alone.
    """

    name = "rand"

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        return self.sampler.sample(n, exclude=exclude) if n > 0 else []

    def observe(self, observations: Sequence[Observation]) -> None:
        self.observations.extend(observations)
