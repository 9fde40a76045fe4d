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
  ``position_topology="choice"`` it is categorical instead.
* ``choice`` (categorical): a knob declared with ``topology="categorical"`` (an unroll depth,
  a scope), a complete graph over its candidates (:func:`choice_graph`).
* ``perm``: knobs that together hold a permutation of their values (a loop order): the CSP's
  ``perm_groups`` (knobs declared with ``topology="perm:<group>"``) and those of the
  ``perm_groups`` option; an edge is a transposition (:func:`perm_graph`;
  ``adjacent_perm=True``: adjacent swaps only).

**Mutation** is the q-random walk of the paper's Eq. 3 (:func:`q_random_walk`): from the
current node, each step moves to a uniformly random neighbour with total probability ``q``
(``P_uv = q / |S(u)|``) and stops with probability ``1 - q``; *before every step, including the
first, the walk continues with probability* ``q`` (the paper's mutation rate, NNI's
``mutate_rate``, 0.5 in every shipped experiment). The number of steps ``K`` is geometric,
``P(K = k) = (1 - q) q^k``, mean ``q / (1 - q)`` (:func:`walk_length_distribution`); at
``q = 0.5`` half the parameters of a child keep their parent's value.

**A generation** (the paper's Algorithm 1, :meth:`OpEvoExplorer.propose`): the ``parents``
(λ) fittest measured programs; each of ``offspring`` (ρ) children takes each parameter from a
parent drawn with probability ∝ fitness (Eq. 2, uniform crossover), then every parameter is
mutated by a q-random walk. Failed trials have fitness 0. Until some measured fitness is > 0,
proposals are RandSAT samples (Algorithm 1 step 1: random configurations). A generation is bred
only once every child of the previous one has been measured (observed, or named in
``exclude``): its children are served across as many ``propose`` calls as it takes, and when a
batch asks for more than the unmeasured generation still holds, the rest of that batch is fresh
RandSAT samples (counted in ``fills``) rather than a second generation bred from the same
parents. ``offspring=0`` (default) makes ρ the batch size asked for, one generation per batch;
the paper's λ = ρ = 8 is ``tune(..., batch_size=8)`` (or ``offspring=8``).

**Model-free or model-guided**: the paper's OpEvo is model-free (``guided=False``, default):
fitness is measured throughput only and :meth:`OpEvoExplorer.observe` does not fit the cost
model. ``guided=True`` breeds ``guided_factor * ρ`` children and keeps the ρ the cost model
(refitted on every observation) predicts best (a deviation, not in the paper).

**Topologies** (Section 3; counted per q-random walk in the explorer stats ``walks_<kind>``
and, for walks that moved, ``moved_<kind>``): ``factor``, ``perm`` (loop orders: the CSP's
``perm_groups``, knobs declared with ``topology="perm:<group>"``, plus the ``perm_groups``
option), ``discrete`` and ``choice`` (categorical: knobs declared with
``topology="categorical"``, and SELECT positions with ``position_topology="choice"``).

**Validity** (heronlike's CSPs have capacity limits the topologies do not know): a walked point
is *completed* — its non-knob variables derived from the knobs, exactly what
``sampler.sample(1, extra=[Eq(k, v) for every knob])`` returns, without a CP-SAT call
(:class:`heronlike.explore.common.Completer`; CP-SAT is used when the CSP defines some variable
otherwise) — and checked with :meth:`CSP.violations`. The repair chosen is **walk again**: an
infeasible point is dropped, counted in :attr:`OpEvoExplorer.invalid_walks`, and the child is
bred again (recombination and walk), so every proposal stays on the topologies. A child already
measured or already proposed is also bred again (counted in ``duplicates``: the paper's "mutate
the child again until it is not already sampled"); after ``max_retries`` attempts the child is a
fresh RandSAT sample (``fallbacks``), bounding that loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from heronlike.csp import CSP
from heronlike.explore.base import Explorer, Observation, check_options
from heronlike.explore.common import TOPOLOGY_KINDS, Completer, factorizations, knob_topology

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
    """OpEvo's parameters of ``csp`` (Gao et al. AAAI'21 §3): perm groups, factor groups, then
    one per other knob (``choice`` for categorical knobs, else ``discrete``), as classified by
    :func:`heronlike.explore.common.knob_topology` (shared with the SA and GA explorers).

    The perm groups are the CSP's own (``CSP.perm_groups``, knobs declared with
    ``topology="perm:<group>"``) followed by ``perm_groups`` (those naming a knob already in a
    group are skipped). A perm group's values are ``perm_values[group]`` if given, else its
    first knob's candidates when each knob has the same ``len(group)`` candidates, else
    ``0 .. len(group) - 1``.

    Raises:
        ValueError: if a ``perm_groups`` group names a variable that is not a knob, or a knob
            twice.
    """
    topology = knob_topology(
        csp, position_topology=position_topology, extra_perm_groups=perm_groups
    )
    params: list[Parameter] = []
    for group in topology.perm:
        items = (perm_values or {}).get(group)
        if items is None:
            first = csp.candidates(group[0])
            same = all(csp.candidates(k) == first for k in group)
            items = first if same and len(first) == len(group) else range(len(group))
        params.append(Parameter("perm", group, perm_graph(list(items), adjacent_perm)))
    for names, total in topology.factor:
        graph = factor_graph(total, len(names), [set(csp.candidates(k)) for k in names])
        params.append(Parameter("factor", names, graph))
    for k in csp.knobs:
        kind = topology.kind(k)
        if kind == "choice":
            params.append(Parameter("choice", (k,), choice_graph(csp.candidates(k))))
        elif kind == "discrete":
            params.append(Parameter("discrete", (k,), discrete_graph(csp.candidates(k))))
    return params


# -- the explorer --------------------------------------------------------------------------------

KINDS = TOPOLOGY_KINDS


@dataclass(frozen=True)
class OpEvoOptions:
    """Options of :class:`OpEvoExplorer` (the paper's values: λ = ρ = 8, q = 0.5).

    Raises:
        ValueError: on an out-of-range option.
    """

    parents: int = field(default=8, metadata={"doc": "λ: fittest measured programs recombined"})
    offspring: int = field(
        default=0, metadata={"doc": "ρ: children per generation (0: the batch size; paper: 8)"}
    )
    q: float = field(
        default=0.5, metadata={"doc": "continue probability of the q-random walk (paper: 0.5)"}
    )
    max_retries: int = field(
        default=16,
        metadata={"doc": "breeding attempts per child before a RandSAT sample replaces it"},
    )
    position_topology: str = field(
        default="discrete", metadata={"doc": "SELECT position knobs: 'discrete' or 'choice'"}
    )
    perm_groups: tuple[tuple[str, ...], ...] = field(
        default=(), metadata={"doc": "knob groups holding a permutation, beside the CSP's own"}
    )
    adjacent_perm: bool = field(
        default=False, metadata={"doc": "perm steps swap adjacent positions only"}
    )
    guided: bool = field(
        default=False,
        metadata={"doc": "model-guided: keep the ρ best predicted of guided_factor * ρ children"},
    )
    guided_factor: int = field(
        default=8, metadata={"doc": "children bred per child kept when guided"}
    )

    def __post_init__(self) -> None:
        check_options(
            self,
            positive=("parents", "max_retries", "guided_factor"),
            non_negative=("offspring",),
        )
        if not 0.0 <= self.q < 1.0:
            raise ValueError(f"q must be in [0, 1), got {self.q}")
        if self.position_topology not in ("discrete", "choice"):
            raise ValueError(
                f"position_topology must be 'discrete' or 'choice', got {self.position_topology!r}"
            )


class OpEvoExplorer(Explorer):
    """OpEvo's evolutionary search on measured fitness (Gao et al. AAAI'21 §4, Algorithm 1;
    see the module docstring).

    Attributes:
        params: the :class:`Parameter` list built from the CSP.
        walks: children bred (recombination + walks); invalid_walks: of them, infeasible;
        duplicates: of them, already measured or proposed; fallbacks: children replaced by
        RandSAT samples after ``max_retries`` attempts; fills: RandSAT samples proposed because
        the current generation was not measured yet; generations: generations bred;
        walks_<kind> / moved_<kind>: q-random walks on parameters of that topology, and those
        that left their start node (kind: factor, perm, discrete, choice).
    """

    name = "opevo"
    counters = (
        "walks",
        "invalid_walks",
        "duplicates",
        "fallbacks",
        "fills",
        "generations",
        *(f"walks_{k}" for k in KINDS),
        *(f"moved_{k}" for k in KINDS),
    )
    Options = OpEvoOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
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
        self._pending: set[tuple[int, ...]] = set()
        self.walks = self.invalid_walks = self.duplicates = self.fallbacks = 0
        self.fills = self.generations = 0
        for kind in KINDS:
            setattr(self, f"walks_{kind}", 0)
            setattr(self, f"moved_{kind}", 0)

    @property
    def invalid_rate(self) -> float:
        """Share of bred children that were infeasible."""
        return self.invalid_walks / self.walks if self.walks else 0.0

    def observe(self, observations: Sequence[Observation]) -> None:
        """Record the fitness (throughput in op/s, 0 for a failed trial) of ``observations``;
        refit the cost model only when ``guided``."""
        if self.options.guided:
            super().observe(observations)
        else:
            self.observations.extend(observations)
        for o in observations:
            k = self.sampler.key(o.assignment)
            self._pending.discard(k)
            value = float(o.throughput) if o.throughput is not None else 0.0
            old = self.fitness.get(k)
            if old is None or value > old[1]:
                self.fitness[k] = (dict(o.assignment), value)

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        key = self.sampler.key
        taken = set(exclude) | set(self.fitness)
        self._pending -= taken  # measured by the loop (observed or about to be)
        out: list[Assignment] = []
        while self._queue and len(out) < n:
            a = self._queue.pop(0)
            if key(a) not in taken:
                taken.add(key(a))
                out.append(a)
        if len(out) < n and not self._queue and not self._pending and self._parents():
            rho = self.options.offspring or (n - len(out))
            self._queue = self._generation(rho, taken)
            while self._queue and len(out) < n:
                a = self._queue.pop(0)
                taken.add(key(a))
                out.append(a)
        if len(out) < n:  # no fitness yet (Algorithm 1 step 1), or the generation is unmeasured
            fresh = self.sampler.sample(n - len(out), exclude=taken)
            if self._parents():
                self.fills += len(fresh)
            out += fresh
        self._pending |= {key(a) for a in out}
        return out

    def _parents(self) -> list[tuple[Assignment, float]]:
        """The λ fittest measured programs with fitness > 0."""
        ranked = sorted(self.fitness.values(), key=lambda e: -e[1])[: self.options.parents]
        return [(a, f) for a, f in ranked if f > 0]

    def _generation(self, rho: int, taken: set[tuple[int, ...]]) -> list[Assignment]:
        """ρ new children of the λ parents, none in ``taken`` (model-guided: the ρ best
        predicted of ``guided_factor * ρ``)."""
        key = self.sampler.key
        ranked = self._parents()
        parents = [a for a, _ in ranked]
        weights = np.array([f for _, f in ranked])
        weights = weights / weights.sum()
        guided = self.options.guided and self.cost_model.trained
        size = rho * self.options.guided_factor if guided else rho
        self.generations += 1
        children: list[Assignment] = []
        local = set(taken)
        for _ in range(size):
            child = self._breed(parents, weights, local)
            if child is None:
                self.fallbacks += 1
                got = self.sampler.sample(1, exclude=local)
                child = got[0] if got else None
            if child is not None:
                local.add(key(child))
                children.append(child)
        if guided and len(children) > rho:
            scores = self.cost_model.predict(self.features(children))
            order = np.argsort(-np.asarray(scores), kind="stable")[:rho]
            children = [children[int(i)] for i in order]
        return children

    def _breed(
        self, parents: Sequence[Assignment], weights: np.ndarray, taken: set[tuple[int, ...]]
    ) -> Assignment | None:
        """A new valid child by recombination (Eq. 2) + q-random walks (Eq. 3), or None after
        ``max_retries`` attempts."""
        for _ in range(self.options.max_retries):
            self.walks += 1
            knobs: dict[str, int] = {}
            for p in self.params:
                parent = parents[int(self.rng.choice(len(parents), p=weights))]
                node = p.node(parent)
                if node in p.graph:  # always, unless a perm group holds other values
                    end = q_random_walk(p.graph, node, self.options.q, self.rng)
                    setattr(self, f"walks_{p.kind}", getattr(self, f"walks_{p.kind}") + 1)
                    if end != node:
                        setattr(self, f"moved_{p.kind}", getattr(self, f"moved_{p.kind}") + 1)
                    node = end
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
