"""A classic genetic algorithm over concrete knob vectors (Heron's ``GA`` ablation baseline).

Heron (ASPLOS'23 Fig. 13; its ``GA`` tuner) contrasts its
constraint-based GA with a GA that crosses over and mutates the knob values themselves and then
checks the child: most children break a split's product or a capacity limit and are wasted. It
is AutoTVM's GA tuner (Chen et al., *Learning to Optimize Tensor Programs*, NeurIPS'18 §5;
``tvm/autotvm/tuner/ga_tuner.py``) on heronlike's knobs. Per :meth:`GAExplorer.propose` (a
round, as :mod:`heronlike.explore.cga`):

1. population: ``pop_size`` RandSAT samples, the ``history_topk`` best measured programs and
   the previous round's population, the best ``pop_size`` by predicted score;
2. ``generations`` generations of: ``select_num`` parents by roulette on predicted score;
   ``pop_size`` children, each a ``crossover`` of two parents, then with probability
   ``mutation_prob`` one mutation (below); every child is *completed* (the non-knob
   variables derived from the knobs; :class:`Completer`) and checked against every range and
   constraint (what :meth:`CSP.violations` checks; Heron asks CP-SAT). Invalid children
   are discarded and counted in :attr:`GAExplorer.invalid_children` (Heron scores them 0 and
   keeps them). When at least ``restart_ratio`` of a generation's children are invalid the
   generation is topped up with fresh RandSAT samples (counted in :attr:`GAExplorer.restarts`).
   The next population is the best ``pop_size`` of the valid children and the ``elites`` best
   programs of the round;
3. ε-greedy selection of the ``n`` to measure.

**Genes** are the knobs in CSP order, except that a loop order (the position knobs of one
``perm`` group, :func:`heronlike.explore.common.knob_topology`) is ONE gene, at its first knob's
place: ``crossover`` (``"one_point"``: a cut between genes, as Heron and AutoTVM; or
``"uniform"``: each gene from either parent) takes a loop order whole from one parent, so a
child's order is always a permutation. This is how AutoTVM's GA treats an order: its
``reorder`` knob (``ReorderEntity``) is one gene, an index into the permutations. (An order
crossover such as Davis's OX (1985), which can make an order neither parent has, is not used:
the mutation's swap explores orders.)

**Mutation** changes one knob ``k`` drawn uniformly among all knobs, by its topology:

* ``perm``: ``k``'s loop swaps positions with another loop of its order, drawn uniformly
  (:func:`~heronlike.explore.common.swap_move`; AutoTVM re-draws the whole order instead);
* ``choice`` (categorical, e.g. an unroll depth): another of its values, uniformly
  (:func:`~heronlike.explore.common.choice_move`);
* ``factor`` (a split knob) and ``discrete`` (any other): a uniform value of its
  ``csp.candidates`` (as AutoTVM; a split knob changed alone breaks its product, which is what
  Heron's comparison measures).

The mutations of each kind are counted (``mutations_factor``, ``mutations_perm``,
``mutations_discrete``, ``mutations_choice``).

While the cost model is untrained, ``propose`` returns RandSAT samples (ranked by the target's
prior where it has one: :meth:`~heronlike.explore.base.Explorer.initial`). Defaults are scaled
down from Heron's (200 / 5 generations) like those of the CGA, for the same reason: a round takes
well under a second on one core.

The helpers it shares with the other explorers on knob vectors live in
:mod:`heronlike.explore.common`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from heronlike.explore.base import Explorer, check_options
from heronlike.explore.common import (
    TOPOLOGY_KINDS,
    Assignment,
    Completer,
    ScoredPool,
    best_measured,
    choice_move,
    knob_topology,
    roulette,
    swap_move,
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
        default="one_point",
        metadata={"doc": "'one_point' (Heron) or 'uniform' over the genes (a loop order is one)"},
    )
    mutation_prob: float = field(
        default=0.2, metadata={"doc": "probability a child has one knob mutated (by its topology)"}
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
        topology: the knobs' topologies (:func:`~heronlike.explore.common.knob_topology`).
        genes: the units of crossover: one knob, or the knobs of one loop order.
        children: children built, over all calls.
        invalid_children: children that broke a constraint of the CSP.
        restarts: generations topped up with RandSAT samples.
        mutations_<kind>: mutations of a knob of that kind (factor, perm, discrete, choice).
    """

    name = "ga"
    counters = (
        "children",
        "invalid_children",
        "restarts",
        *(f"mutations_{k}" for k in TOPOLOGY_KINDS),
    )
    Options = GAOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.knobs = self.csp.knobs
        self.topology = knob_topology(self.csp)
        self.genes: list[tuple[str, ...]] = []
        for k in self.knobs:
            if self.topology.kind(k) != "perm":
                self.genes.append((k,))
            elif k == self.topology.group(k)[0]:
                self.genes.append(self.topology.group(k))
        self._candidates = {k: self.csp.candidates(k) for k in self.knobs}
        self.complete = Completer(self.csp, self.sampler)
        self._population: list[Assignment] = []
        self.children = 0
        self.invalid_children = 0
        self.restarts = 0
        for kind in TOPOLOGY_KINDS:
            setattr(self, f"mutations_{kind}", 0)

    def child(self, p1: Mapping[str, int], p2: Mapping[str, int]) -> dict[str, int]:
        """Knob values of a child of ``p1`` and ``p2``: crossover over :attr:`genes`, then with
        probability ``mutation_prob`` one mutation (see the module docstring)."""
        genes, rng = self.genes, self.rng
        if self.options.crossover == "one_point":
            cut = int(rng.integers(1, len(genes))) if len(genes) > 1 else 0
            take = [i < cut for i in range(len(genes))]
        else:
            take = list(rng.random(len(genes)) < 0.5)
        out: dict[str, int] = {}
        for gene, first in zip(genes, take):
            parent = p1 if first else p2
            out.update((k, int(parent[k])) for k in gene)
        if self.knobs and rng.random() < self.options.mutation_prob:
            self._mutate(out, self.knobs[int(rng.integers(len(self.knobs)))])
        return out

    def _mutate(self, out: dict[str, int], k: str) -> None:
        """Mutate knob ``k`` of ``out`` in place by its topology; count the mutation."""
        kind = self.topology.kind(k)
        if kind == "perm":
            swapped = swap_move(out, self.topology.group(k), self.rng, knob=k)
            if swapped is not None:
                out.update(swapped)
        elif kind == "choice":
            value = choice_move(out[k], self._candidates[k], self.rng)
            if value is not None:
                out[k] = value
        else:
            values = self._candidates[k]
            if values:
                out[k] = int(values[int(self.rng.integers(len(values)))])
        setattr(self, f"mutations_{kind}", getattr(self, f"mutations_{kind}") + 1)

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        excluded = set(exclude)
        if not self.cost_model.trained:
            return self.initial(n, exclude=excluded)
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
