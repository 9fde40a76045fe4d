"""Simulated annealing (Kirkpatrick, Gelatt & Vecchi, *Optimization by Simulated Annealing*,
Science 1983) on the cost model, with a real Metropolis acceptance (Metropolis et al. 1953).

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
returns RandSAT samples (ranked by the target's prior where it has one:
:meth:`~heronlike.explore.base.Explorer.initial`).

**Neighbours** (:meth:`SAExplorer.neighbour`) change one knob ``k``, drawn uniformly among the
knobs with more than one candidate, by a move that keeps its topology
(:func:`heronlike.explore.common.knob_topology`, OpEvo's topologies, Gao et al. AAAI'21 §3):

* ``perm`` (a loop-order position, ``topology="perm:<group>"``): ``k``'s loop swaps positions
  with another loop of its order, drawn uniformly (:func:`~heronlike.explore.common.swap_move`),
  so the order stays a permutation;
* ``choice`` (a categorical knob, ``topology="categorical"``): another of its values, uniformly
  (:func:`~heronlike.explore.common.choice_move`);
* any other knob: a RandSAT draw with ``extra`` = ``EQ`` constraints fixing every other knob and
  ``IN(k, candidates - {current})``, so the neighbour is valid and differs in ``k``. A split
  knob cannot change alone (its loop's ``PROD`` fixes it once the other factors are fixed), so a
  knob ``k`` that shares a constant-target ``PROD`` with other knobs is freed together with one
  of them chosen at random (the "partner" that absorbs the change): a ``factor`` move; a knob
  without partner makes a ``discrete`` move.

A swapped or re-drawn point is completed and checked by
:class:`~heronlike.explore.common.Completer` (no CP-SAT call where the CSP defines every
non-knob variable from the knobs). When a move gives no valid neighbour (a broken capacity
limit, an infeasible draw) it is counted in ``invalid_moves`` and another knob is tried
(``neighbour_tries`` times), else the chain stays (``stuck``). The stats count the neighbours
of each kind (``moves_factor``, ``moves_perm``, ``moves_discrete``, ``moves_choice``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heronlike.csp import Eq, In, Prod
from heronlike.errors import InfeasibleSpaceError, SolverTimeoutError
from heronlike.explore.base import Explorer, check_options
from heronlike.explore.common import (
    TOPOLOGY_KINDS,
    Completer,
    best_measured,
    choice_move,
    knob_topology,
    select_batch,
    swap_move,
)

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
        topology: the knobs' topologies (:func:`~heronlike.explore.common.knob_topology`).
        moves: neighbours proposed; accepted: of them, accepted; stuck: steps without a
        neighbour; invalid_moves: moves that gave no valid neighbour (tried again);
        moves_<kind>: valid neighbours made by a move of that kind (factor, perm, discrete,
        choice).
    """

    name = "sa"
    counters = (
        "moves",
        "accepted",
        "stuck",
        "invalid_moves",
        *(f"moves_{k}" for k in TOPOLOGY_KINDS),
    )
    Options = SAOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.knobs = self.csp.knobs
        self.topology = knob_topology(self.csp)
        self.complete = Completer(self.csp, self.sampler)
        self._candidates = {k: self.csp.candidates(k) for k in self.knobs}
        self._movable = [k for k in self.knobs if len(self._candidates[k]) > 1]
        solved = {k for k in self.knobs if self.topology.kind(k) in ("factor", "discrete")}
        self.partners: dict[str, list[str]] = {k: [] for k in self.knobs}
        for c in self.csp.constraints:
            if isinstance(c, Prod) and isinstance(c.target, int):
                group = [f for f in c.factors if isinstance(f, str) and f in solved]
                for k in group:
                    self.partners[k] += [o for o in group if o != k and o not in self.partners[k]]
        self.moves = self.accepted = self.stuck = self.invalid_moves = 0
        for kind in TOPOLOGY_KINDS:
            setattr(self, f"moves_{kind}", 0)

    def neighbour(self, a: Mapping[str, int]) -> Assignment | None:
        """A valid assignment differing from ``a`` by one move on one knob (see the module
        docstring): a swap in a loop order, a categorical re-draw, or a RandSAT draw of the knob
        (and its split partner); None after ``neighbour_tries`` moves without one."""
        for _ in range(self.options.neighbour_tries):
            if not self._movable:
                return None
            k = self._movable[int(self.rng.integers(len(self._movable)))]
            kind = self.topology.kind(k)
            if kind == "perm":
                swapped = swap_move(a, self.topology.group(k), self.rng, knob=k)
                got = self._with(a, swapped) if swapped is not None else None
            elif kind == "choice":
                value = choice_move(int(a[k]), self._candidates[k], self.rng)
                got = self._with(a, {k: value}) if value is not None else None
            else:
                kind, got = self._draw(a, k)
            if got is None:
                self.invalid_moves += 1
                continue
            setattr(self, f"moves_{kind}", getattr(self, f"moves_{kind}") + 1)
            return got
        return None

    def _with(self, a: Mapping[str, int], values: Mapping[str, int]) -> Assignment | None:
        """``a``'s knobs with ``values`` changed, completed; None if that is invalid."""
        knobs = {k: int(a[k]) for k in self.knobs}
        knobs.update(values)
        return self.complete(knobs)

    def _draw(self, a: Mapping[str, int], k: str) -> tuple[str, Assignment | None]:
        """A RandSAT neighbour changing ``k`` (and a split partner, if it has one): the move's
        kind (``factor`` with a partner, else ``discrete``) and the neighbour or None."""
        free = {k}
        if self.partners[k]:
            free.add(self.partners[k][int(self.rng.integers(len(self.partners[k])))])
        kind = "factor" if len(free) > 1 else "discrete"
        others = tuple(v for v in self._candidates[k] if v != a[k])
        extra = [Eq(o, int(a[o])) for o in self.knobs if o not in free] + [In(k, others)]
        try:
            got = self.sampler.sample(1, extra=extra, max_draws=1)
        except (InfeasibleSpaceError, SolverTimeoutError):
            return kind, None
        return kind, (got[0] if got else None)

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        excluded = set(exclude)
        if not self.cost_model.trained:
            return self.initial(n, exclude=excluded)
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
