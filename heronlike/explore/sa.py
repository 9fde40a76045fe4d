"""Simulated annealing on the cost model with a real Metropolis acceptance.

Heron's ``SA`` ablation baseline computes a Metropolis probability and
then overwrites it with "accept only if better", which is hill climbing. Here a worse move is
accepted with probability ``exp(Δ / T)`` (:func:`acceptance_probability`), ``Δ`` being the
difference of predicted scores (the ``reg`` cost model's scores are normalised throughput,
about ``[0, 1]``, so ``t0`` is in those units).

Per :meth:`SAExplorer.propose`: ``chains`` chains start from the best measured programs (up to
half of them) and RandSAT samples; each of ``steps`` steps proposes one neighbour per chain,
scores all neighbours in one cost-model call and accepts by Metropolis at temperature
``T = t0 * cooling**step``. Every program visited is a candidate; the ``n`` proposed are chosen
ε-greedily among those not in ``exclude``. While the cost model is untrained, ``propose``
returns RandSAT samples.

**Neighbours** change one knob ``k``: a RandSAT draw with ``extra`` = ``EQ`` constraints fixing
every other knob and ``IN(k, candidates - {current})``, so each neighbour is valid and differs
in ``k``. A split knob cannot change alone (its loop's ``PROD`` fixes it once the other factors
are fixed), so a knob ``k`` that shares a constant-target ``PROD`` with other knobs is freed
together with one of them chosen at random (the "partner" that absorbs the change). When that
CSP has no solution another knob is tried (``neighbour_tries`` times), else the chain stays.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import numpy as np

from heronlike.csp import Eq, In, Prod
from heronlike.errors import InfeasibleSpaceError, SolverTimeoutError
from heronlike.explore.base import Explorer, check_options
from heronlike.explore.common import best_measured, select_batch

__all__ = ["SAExplorer", "SAOptions", "acceptance_probability"]

Assignment = dict[str, int]


def acceptance_probability(delta: float, temperature: float) -> float:
    """Metropolis: 1 for a move that is not worse (``delta >= 0``), else ``exp(delta / T)``.

    ``delta`` is new score minus current score (higher is better); at ``T <= 0`` a worse move is
    never accepted.
    """
    if delta >= 0:
        return 1.0
    if temperature <= 0:
        return 0.0
    return math.exp(delta / temperature)


@dataclass(frozen=True)
class SAOptions:
    """Options of :class:`SAExplorer`.

    Raises:
        ValueError: on an out-of-range option.
    """

    chains: int = field(default=8, metadata={"doc": "parallel annealing chains"})
    steps: int = field(default=16, metadata={"doc": "steps per chain per propose()"})
    t0: float = field(default=0.05, metadata={"doc": "initial temperature (score units)"})
    cooling: float = field(default=0.85, metadata={"doc": "T is multiplied by this every step"})
    epsilon: float = field(default=0.6, metadata={"doc": "greedy share of the proposals"})
    neighbour_tries: int = field(
        default=4, metadata={"doc": "knobs tried before a chain gives up a step"}
    )

    def __post_init__(self) -> None:
        check_options(self, positive=("chains", "steps", "neighbour_tries"))
        if not self.t0 >= 0:
            raise ValueError(f"t0 must be >= 0, got {self.t0}")
        if not 0.0 < self.cooling <= 1.0:
            raise ValueError(f"cooling must be in (0, 1], got {self.cooling}")
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {self.epsilon}")


class SAExplorer(Explorer):
    """Simulated annealing over valid assignments, scored by the cost model.

    Attributes:
        moves: neighbours proposed; accepted: of them, accepted; stuck: steps without a
        neighbour.
    """

    name = "sa"
    counters = ("moves", "accepted", "stuck")
    Options = SAOptions

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.knobs = self.csp.knobs
        self._candidates = {k: self.csp.candidates(k) for k in self.knobs}
        self._movable = [k for k in self.knobs if len(self._candidates[k]) > 1]
        knobs = set(self.knobs)
        self.partners: dict[str, list[str]] = {k: [] for k in self.knobs}
        for c in self.csp.constraints:
            if isinstance(c, Prod) and isinstance(c.target, int):
                group = [f for f in c.factors if isinstance(f, str) and f in knobs]
                for k in group:
                    self.partners[k] += [o for o in group if o != k and o not in self.partners[k]]
        self.moves = self.accepted = self.stuck = 0

    def neighbour(self, a: Mapping[str, int]) -> Assignment | None:
        """A valid assignment differing from ``a`` in one knob (and its split partner)."""
        for _ in range(self.options.neighbour_tries):
            if not self._movable:
                return None
            k = self._movable[int(self.rng.integers(len(self._movable)))]
            free = {k}
            if self.partners[k]:
                free.add(self.partners[k][int(self.rng.integers(len(self.partners[k])))])
            others = tuple(v for v in self._candidates[k] if v != a[k])
            extra = [Eq(o, int(a[o])) for o in self.knobs if o not in free] + [In(k, others)]
            try:
                got = self.sampler.sample(1, extra=extra, max_draws=1)
            except (InfeasibleSpaceError, SolverTimeoutError):
                continue
            if got:
                return got[0]
        return None

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        excluded = set(exclude)
        if not self.cost_model.trained:
            return self.sampler.sample(n, exclude=excluded)
        opt = self.options
        key = self.sampler.key
        chains = best_measured(self.observations, opt.chains // 2, key)
        chains += self.sampler.sample(opt.chains - len(chains), exclude={key(a) for a in chains})
        current = self.cost_model.predict(self.features(chains)).astype(np.float64)
        seen: dict[tuple[int, ...], tuple[Assignment, float]] = {
            key(a): (a, float(s)) for a, s in zip(chains, current)
        }
        temperature = opt.t0
        for _ in range(opt.steps):
            moves = [(i, self.neighbour(a)) for i, a in enumerate(chains)]
            moves = [(i, b) for i, b in moves if b is not None]
            self.stuck += len(chains) - len(moves)
            if moves:
                new = self.cost_model.predict(self.features([b for _, b in moves]))
                for (i, b), s in zip(moves, new):
                    self.moves += 1
                    seen.setdefault(key(b), (b, float(s)))
                    p = acceptance_probability(float(s) - current[i], temperature)
                    if p >= 1.0 or self.rng.random() < p:
                        self.accepted += 1
                        chains[i], current[i] = b, float(s)
            temperature *= opt.cooling
        pool = [(a, s) for k, (a, s) in seen.items() if k not in excluded]
        assignments, pool_scores = [a for a, _ in pool], np.array([s for _, s in pool])
        return select_batch(
            assignments, pool_scores, n, opt.epsilon, self.rng, self.sampler, excluded
        )
