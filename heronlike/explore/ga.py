"""A classic genetic algorithm over concrete knob vectors (Heron's ``GA`` ablation baseline).

Heron (ASPLOS'23 Fig. 13; its ``GA`` tuner) contrasts its
constraint-based GA with a GA that crosses over and mutates the knob values themselves and then
checks the child: most children break a split's product or a capacity limit and are wasted. Per
:meth:`GAExplorer.propose` (a round, as :mod:`heronlike.explore.cga`):

1. population: ``pop_size`` RandSAT samples, the ``history_topk`` best measured programs and
   the previous round's population, the best ``pop_size`` by predicted score;
2. ``generations`` generations of: ``select_num`` parents by roulette on predicted score;
   ``pop_size`` children, each a ``crossover`` (``"one_point"`` over the knobs in CSP order, as
   Heron, or ``"uniform"``) of two parents, then with probability ``mutation_prob`` one knob set
   to a uniform value of its ``csp.candidates``; every child is *completed* (the non-knob
   variables derived from the knobs; :class:`Completer`) and checked against every range and
   constraint (what :meth:`CSP.violations` checks; Heron asks CP-SAT). Invalid children
   are discarded and counted in :attr:`GAExplorer.invalid_children` (Heron scores them 0 and
   keeps them). When at least ``restart_ratio`` of a generation's children are invalid the
   generation is topped up with fresh RandSAT samples (counted in :attr:`GAExplorer.restarts`).
   The next population is the best ``pop_size`` of the valid children and the ``elites`` best
   programs of the round;
3. ε-greedy selection of the ``n`` to measure.

While the cost model is untrained, ``propose`` returns RandSAT samples. Defaults are scaled
down from Heron's (200 / 5 generations) like those of the CGA, for the same reason: a round takes
well under a second on one core.

The helpers it shares with the other explorers on knob vectors live in
:mod:`heronlike.explore.common`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from heronlike.explore.base import Explorer, check_options
from heronlike.explore.common import (
    Assignment,
    Completer,
    ScoredPool,
    best_measured,
    roulette,
)

__all__ = ["GAExplorer", "GAOptions"]


@dataclass(frozen=True)
class GAOptions:
    """Options of :class:`GAExplorer`.

    Raises:
        ValueError: on an out-of-range option.
    """

    pop_size: int = field(default=64, metadata={"doc": "population and children per generation"})
    generations: int = field(default=3, metadata={"doc": "generations per propose()"})
    select_num: int = field(default=32, metadata={"doc": "parents drawn by roulette"})
    crossover: str = field(
        default="one_point", metadata={"doc": "'one_point' (Heron) or 'uniform' over the knobs"}
    )
    mutation_prob: float = field(
        default=0.2, metadata={"doc": "probability a child has one knob set to a random value"}
    )
    epsilon: float = field(default=0.6, metadata={"doc": "greedy share of the proposals"})
    history_topk: int = field(default=16, metadata={"doc": "best measured added to population"})
    elites: int = field(default=8, metadata={"doc": "best programs of the round kept"})
    restart_ratio: float = field(
        default=0.9,
        metadata={"doc": "invalid share of a generation that triggers fresh RandSAT samples"},
    )

    def __post_init__(self) -> None:
        check_options(
            self,
            positive=("pop_size", "select_num"),
            non_negative=("generations", "history_topk", "elites"),
            unit=("mutation_prob", "epsilon", "restart_ratio"),
        )
        if self.crossover not in ("one_point", "uniform"):
            raise ValueError(f"crossover must be 'one_point' or 'uniform', got {self.crossover!r}")


class GAExplorer(Explorer):
    """A GA on knob vectors whose invalid children are discarded (see the module docstring).

    Attributes:
        children: children built, over all calls.
        invalid_children: children that broke a constraint of the CSP.
        restarts: generations topped up with RandSAT samples.
    """

    name = "ga"
    counters = ("children", "invalid_children", "restarts")
    Options = GAOptions

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.knobs = self.csp.knobs
        self._candidates = {k: self.csp.candidates(k) for k in self.knobs}
        self.complete = Completer(self.csp, self.sampler)
        self._population: list[Assignment] = []
        self.children = 0
        self.invalid_children = 0
        self.restarts = 0

    def child(self, p1: Mapping[str, int], p2: Mapping[str, int]) -> dict[str, int]:
        """Knob values of a child of ``p1`` and ``p2``: crossover, then maybe one mutation."""
        knobs, rng = self.knobs, self.rng
        if self.options.crossover == "one_point":
            cut = int(rng.integers(1, len(knobs))) if len(knobs) > 1 else 0
            out = {k: int((p1 if i < cut else p2)[k]) for i, k in enumerate(knobs)}
        else:
            mask = rng.random(len(knobs)) < 0.5
            out = {k: int((p1 if m else p2)[k]) for k, m in zip(knobs, mask)}
        if knobs and rng.random() < self.options.mutation_prob:
            k = knobs[int(rng.integers(len(knobs)))]
            values = self._candidates[k]
            if values:
                out[k] = int(values[int(rng.integers(len(values)))])
        return out

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        excluded = set(exclude)
        if not self.cost_model.trained:
            return self.sampler.sample(n, exclude=excluded)
        opt = self.options
        key = self.sampler.key
        pool = ScoredPool(lambda batch: self.cost_model.predict(self.features(batch)), key)
        start = list(self.sampler.sample(opt.pop_size))
        start += best_measured(self.observations, opt.history_topk, key)
        start += self._population
        population = pool.top(pool.add(start), opt.pop_size)
        for _ in range(opt.generations):
            if not population:
                break
            picks = roulette(pool.score(population), opt.select_num, self.rng)
            parents = [population[int(i)] for i in picks]
            children: list[Assignment] = []
            invalid = 0
            for _ in range(opt.pop_size):
                i, j = self.rng.integers(len(parents), size=2)
                self.children += 1
                full = self.complete(self.child(parents[i], parents[j]))
                if full is None:
                    invalid += 1
                else:
                    children.append(full)
            self.invalid_children += invalid
            if invalid >= opt.restart_ratio * opt.pop_size:
                self.restarts += 1
                children += self.sampler.sample(opt.pop_size - len(children))
            population = pool.next_population(children, opt.elites, opt.pop_size)
        self._population = population
        return pool.select(n, excluded, opt.epsilon, self.rng, self.sampler)
