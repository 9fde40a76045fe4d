"""OpEvo (Gao et al., AAAI'21): evolution with q-random-walk mutation on parameter topologies.

OpEvo (``microsoft/nni``, ``examples/trials/systems_auto_tuning/opevo/src/algorithms/opevo.py``)
tunes on *measured* fitness (throughput), without a cost model. Every tunable parameter has a
topology, a graph over its values, built here from the CSP (:func:`parameters`):

* ``factor``: the knobs of one split loop, i.e. a ``PROD`` with a constant target (or a fixed
  target variable) over knobs and fixed factors (constants, variables with one value), form ONE
  parameter. Nodes are the ordered factorisations of the target divided by the fixed part whose
  parts are candidates of their knobs (``IN``); an edge moves one prime factor from one part to
  another (:func:`factor_graph`).
* ``discrete``: any other knob, a path graph over its candidates in increasing order
  (:func:`discrete_graph`). A ``SELECT`` position knob is one too by default: its locations go
  from outer to inner, so neighbouring positions are similar schedules; with
  ``position_topology="choice"`` it is categorical instead (a complete graph,
  :func:`choice_graph`).
* ``perm``: knobs that together hold a permutation of their values (a loop order), declared with
  the ``perm_groups`` option since no rule creates order knobs yet; an edge is a transposition
  (:func:`perm_graph`; ``adjacent_perm=True``: adjacent swaps only).

**Mutation** is the q-random walk (:func:`q_random_walk`): from the current node, walk to a
uniformly random neighbour, and repeat; *before every step, including the first, the walk
continues with probability* ``q`` (NNI's ``mutate_rate``, the continue probability, 0.5 in
every shipped experiment). The number of steps ``K`` is geometric, ``P(K = k) = (1 - q) q^k``,
mean ``q / (1 - q)`` (:func:`walk_length_distribution`); at ``q = 0.5`` half the parameters of a
child keep their parent's value. (The paper and NNI's docstring read q the other way round, as
a stop probability; the code, followed here, makes it the continue probability.)

**A generation** (:meth:`OpEvoExplorer.propose`): parents are the ``parents`` (λ) fittest
measured programs; each of ``offspring`` (ρ) children takes each parameter from a parent drawn
with probability ∝ fitness (uniform crossover), then every parameter is mutated by a q-random
walk. Failed trials have fitness 0. Children are served from a queue across calls, as NNI's
steady-state tuner serves its batch: a new generation is bred only when the queue is empty. Until
some measured fitness is > 0, proposals are RandSAT samples.

**Validity** (heronlike's CSPs have capacity limits the topologies do not know): a walked point
is *completed* — its non-knob variables derived from the knobs, exactly what
``sampler.sample(1, extra=[Eq(k, v) for every knob])`` returns, without a CP-SAT call
(:class:`heronlike.explore.common.Completer`; CP-SAT is used when the CSP defines some variable
otherwise) — and checked with :meth:`CSP.violations`. The repair chosen is **walk again**: an
infeasible point is dropped, counted in :attr:`OpEvoExplorer.invalid_walks`, and the child is
bred again (recombination and walk), so every proposal stays on the topologies. A child already
measured or already proposed is also bred again (counted in ``duplicates``); after
``max_retries`` attempts the child is a fresh RandSAT sample (``fallbacks``), bounding NNI's
unbounded dedup loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from heronlike.csp import CSP, Select
from heronlike.explore.base import Explorer, Observation, check_options
from heronlike.explore.common import Completer, factorizations, split_groups

__all__ = [
    "OpEvoExplorer",
    "OpEvoOptions",
    "Parameter",
    "choice_graph",
    "discrete_graph",
    "factor_graph",
    "factorizations",
    "parameters",
    "perm_graph",
    "q_random_walk",
    "walk_length_distribution",
]

Assignment = dict[str, int]


# -- the q-random walk ---------------------------------------------------------------------------


def q_random_walk(graph: nx.Graph, start: Hashable, q: float, rng: np.random.Generator) -> Hashable:
    """The end node of a q-random walk on ``graph`` from ``start``.

    Before each step (the first included) the walk continues with probability ``q`` (the
    continue probability); a step moves to a uniformly random neighbour (successor, for a
    directed graph). A node without neighbours ends the walk. The number of steps is geometric:
    ``P(K = k) = (1 - q) * q**k``, mean ``q / (1 - q)``.

    Raises:
        ValueError: if ``q`` is not in ``[0, 1)`` or ``start`` is not a node of ``graph``.
    """
    if not 0.0 <= q < 1.0:
        raise ValueError(f"q must be in [0, 1), got {q}")
    if start not in graph:
        raise ValueError(f"{start!r} is not a node of the graph")
    node = start
    while rng.random() < q:
        nbrs = list(graph.neighbors(node))
        if not nbrs:
            break
        node = nbrs[int(rng.integers(len(nbrs)))]
    return node


def walk_length_distribution(q: float, max_steps: int) -> np.ndarray:
    """``P(K = k)`` for ``k = 0 .. max_steps - 1`` and ``P(K >= max_steps)`` last (sums to 1).

    ``K`` is the number of steps of :func:`q_random_walk` on a graph where no node is a dead
    end: ``P(K = k) = (1 - q) * q**k``.
    """
    if not 0.0 <= q < 1.0:
        raise ValueError(f"q must be in [0, 1), got {q}")
    k = np.arange(max_steps)
    return np.append((1.0 - q) * q**k, q**max_steps)


# -- topologies ----------------------------------------------------------------------------------


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def factor_graph(
    total: int, parts: int, allowed: Sequence[Collection[int]] | None = None
) -> nx.Graph:
    """OpEvo's factorisation topology: nodes = ordered factorisations of ``total``; an edge
    moves one prime factor ``p`` from part ``i`` to part ``j`` (part i / p, part j * p).

    ``allowed[i]`` restricts the values of part ``i`` (nodes outside are left out).
    """
    graph = nx.Graph()
    nodes = [
        f
        for f in factorizations(total, parts)
        if allowed is None or all(v in allowed[i] for i, v in enumerate(f))
    ]
    graph.add_nodes_from(nodes)
    primes = sorted(set(_prime_factors(total)))
    for f in nodes:
        for i, j in itertools.permutations(range(parts), 2):
            for p in primes:
                if f[i] % p == 0:
                    g = list(f)
                    g[i] //= p
                    g[j] *= p
                    g = tuple(g)
                    if g in graph:
                        graph.add_edge(f, g)
    return graph


def discrete_graph(values: Sequence[int]) -> nx.Graph:
    """A path graph over ``values`` in increasing order (OpEvo's ``discrete`` type)."""
    vs = sorted(set(values))
    graph = nx.Graph()
    graph.add_nodes_from(vs)
    graph.add_edges_from(zip(vs, vs[1:]))
    return graph


def choice_graph(values: Sequence[int]) -> nx.Graph:
    """A complete graph over ``values`` (OpEvo's categorical ``choice`` type)."""
    return nx.complete_graph(sorted(set(values)))


def perm_graph(items: Sequence[int], adjacent: bool = False) -> nx.Graph:
    """Permutations of ``items``; an edge swaps two positions (only neighbours if ``adjacent``)."""
    graph = nx.Graph()
    nodes = list(dict.fromkeys(itertools.permutations(items)))
    graph.add_nodes_from(nodes)
    m = len(items)
    pairs = [(i, i + 1) for i in range(m - 1)] if adjacent else itertools.combinations(range(m), 2)
    pairs = list(pairs)
    for f in nodes:
        for i, j in pairs:
            g = list(f)
            g[i], g[j] = g[j], g[i]
            g = tuple(g)
            if g != f:
                graph.add_edge(f, g)
    return graph


@dataclass
class Parameter:
    """One tunable parameter of OpEvo over some knobs: its kind and topology.

    A node is the tuple of the knobs' values (in ``knobs`` order) for ``factor`` and ``perm``,
    the knob's value for ``discrete`` and ``choice``.
    """

    kind: str
    knobs: tuple[str, ...]
    graph: nx.Graph

    def node(self, a: Mapping[str, int]) -> Hashable:
        if self.kind in ("factor", "perm"):
            return tuple(int(a[k]) for k in self.knobs)
        return int(a[self.knobs[0]])

    def values(self, node: Hashable) -> dict[str, int]:
        if self.kind in ("factor", "perm"):
            return dict(zip(self.knobs, node))  # type: ignore[arg-type]
        return {self.knobs[0]: int(node)}  # type: ignore[arg-type]


def parameters(
    csp: CSP,
    *,
    position_topology: str = "discrete",
    perm_groups: Sequence[Sequence[str]] = (),
    adjacent_perm: bool = False,
    perm_values: Mapping[tuple[str, ...], Sequence[int]] | None = None,
) -> list[Parameter]:
    """OpEvo's parameters of ``csp``: factor groups, perm groups, then one per other knob.

    A perm group's values are ``perm_values[group]`` if given, else ``0 .. len(group) - 1``.

    Raises:
        ValueError: if a perm group names a variable that is not a knob, or a knob twice.
    """
    knobs = csp.knobs
    knob_set = set(knobs)
    used: set[str] = set()
    params: list[Parameter] = []
    for group in perm_groups:
        group = tuple(group)
        bad = [k for k in group if k not in knob_set or k in used]
        if bad or len(set(group)) != len(group):
            raise ValueError(f"perm group {group} names non-knobs or repeats a knob: {bad}")
        items = list((perm_values or {}).get(group, range(len(group))))
        params.append(Parameter("perm", group, perm_graph(items, adjacent_perm)))
        used |= set(group)
    for names, total in split_groups(csp):
        if set(names) & used:
            continue
        graph = factor_graph(total, len(names), [set(csp.candidates(k)) for k in names])
        if graph.number_of_nodes() == 0:
            continue
        params.append(Parameter("factor", names, graph))
        used |= set(names)
    positions = {c.index for c in csp.constraints if isinstance(c, Select)}
    for k in knobs:
        if k in used:
            continue
        values = csp.candidates(k)
        if k in positions and position_topology == "choice":
            params.append(Parameter("choice", (k,), choice_graph(values)))
        else:
            params.append(Parameter("discrete", (k,), discrete_graph(values)))
    return params


# -- the explorer --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpEvoOptions:
    """Options of :class:`OpEvoExplorer` (defaults: every experiment shipped with OpEvo).

    Raises:
        ValueError: on an out-of-range option.
    """

    parents: int = field(default=8, metadata={"doc": "λ: fittest measured programs recombined"})
    offspring: int = field(default=8, metadata={"doc": "ρ: children bred per generation"})
    q: float = field(
        default=0.5, metadata={"doc": "continue probability of the q-random walk (NNI: 0.5)"}
    )
    max_retries: int = field(
        default=16,
        metadata={"doc": "breeding attempts per child before a RandSAT sample replaces it"},
    )
    position_topology: str = field(
        default="discrete", metadata={"doc": "SELECT position knobs: 'discrete' or 'choice'"}
    )
    perm_groups: tuple[tuple[str, ...], ...] = field(
        default=(), metadata={"doc": "knob groups that hold a permutation (loop orders)"}
    )
    adjacent_perm: bool = field(
        default=False, metadata={"doc": "perm steps swap adjacent positions only"}
    )

    def __post_init__(self) -> None:
        check_options(self, positive=("parents", "offspring", "max_retries"))
        if not 0.0 <= self.q < 1.0:
            raise ValueError(f"q must be in [0, 1), got {self.q}")
        if self.position_topology not in ("discrete", "choice"):
            raise ValueError(
                f"position_topology must be 'discrete' or 'choice', got {self.position_topology!r}"
            )


class OpEvoExplorer(Explorer):
    """OpEvo's evolutionary search on measured fitness (see the module docstring).

    ``observe`` also refits the cost model (the base class does), which OpEvo never reads.

    Attributes:
        params: the :class:`Parameter` list built from the CSP.
        walks: children bred (recombination + walks); invalid_walks: of them, infeasible;
        duplicates: of them, already measured or proposed; fallbacks: children replaced by
        RandSAT samples after ``max_retries`` attempts.
    """

    name = "opevo"
    counters = ("walks", "invalid_walks", "duplicates", "fallbacks")
    Options = OpEvoOptions

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        opt = self.options
        self.params = parameters(
            self.csp,
            position_topology=opt.position_topology,
            perm_groups=opt.perm_groups,
            adjacent_perm=opt.adjacent_perm,
        )
        self.complete = Completer(self.csp, self.sampler)
        self.fitness: dict[tuple[int, ...], tuple[Assignment, float]] = {}
        self._queue: list[Assignment] = []
        self.walks = self.invalid_walks = self.duplicates = self.fallbacks = 0

    @property
    def invalid_rate(self) -> float:
        """Share of bred children that were infeasible."""
        return self.invalid_walks / self.walks if self.walks else 0.0

    def observe(self, observations: Sequence[Observation]) -> None:
        super().observe(observations)
        for o in observations:
            k = self.sampler.key(o.assignment)
            value = float(o.throughput) if o.throughput is not None else 0.0
            old = self.fitness.get(k)
            if old is None or value > old[1]:
                self.fitness[k] = (dict(o.assignment), value)

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        key = self.sampler.key
        taken = set(exclude) | set(self.fitness)
        out: list[Assignment] = []
        while len(out) < n:
            while self._queue and len(out) < n:
                a = self._queue.pop(0)
                if key(a) not in taken:
                    taken.add(key(a))
                    out.append(a)
            if len(out) >= n:
                break
            batch = self._generation(taken)
            if not batch:
                break
            self._queue.extend(batch)
        return out

    def _generation(self, taken: set[tuple[int, ...]]) -> list[Assignment]:
        """ρ new children (or RandSAT samples while no fitness is > 0), none in ``taken``."""
        key = self.sampler.key
        rho = self.options.offspring
        ranked = sorted(self.fitness.values(), key=lambda e: -e[1])[: self.options.parents]
        ranked = [(a, f) for a, f in ranked if f > 0]
        if not ranked:
            return self.sampler.sample(rho, exclude=taken)
        parents = [a for a, _ in ranked]
        weights = np.array([f for _, f in ranked])
        weights = weights / weights.sum()
        children: list[Assignment] = []
        local = set(taken)
        for _ in range(rho):
            child = self._breed(parents, weights, local)
            if child is None:
                self.fallbacks += 1
                got = self.sampler.sample(1, exclude=local)
                child = got[0] if got else None
            if child is not None:
                local.add(key(child))
                children.append(child)
        return children

    def _breed(
        self, parents: Sequence[Assignment], weights: np.ndarray, taken: set[tuple[int, ...]]
    ) -> Assignment | None:
        """A new valid child by recombination + q-random walks, or None after max_retries."""
        for _ in range(self.options.max_retries):
            self.walks += 1
            knobs: dict[str, int] = {}
            for p in self.params:
                parent = parents[int(self.rng.choice(len(parents), p=weights))]
                node = p.node(parent)
                if node in p.graph:  # always, unless a perm group holds other values
                    node = q_random_walk(p.graph, node, self.options.q, self.rng)
                knobs.update(p.values(node))
            full = self.complete(knobs)
            if full is None:
                self.invalid_walks += 1
                continue
            if self.sampler.key(full) in taken:
                self.duplicates += 1
                continue
            return full
        return None
