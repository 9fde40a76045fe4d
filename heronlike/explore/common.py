"""What the explorers on knob vectors share (GA, CGA, SA, OpEvo, FlexTensor).

:class:`Completer` (knob values -> the full assignment, or None if invalid), :func:`split_groups`
and :class:`KnobDrawer` (random split-consistent knob values), the knob topologies
(:func:`knob_topology`: which knobs form a loop order, a split, a categorical or an ordered knob,
OpEvo's parameter kinds; the moves that keep a topology: :func:`swap_move` and
:func:`choice_move`), and the selection helpers (:func:`roulette`, :func:`epsilon_select`,
:func:`best_measured`, :func:`top`, :func:`unique`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from heronlike.csp import CSP, Constraint, Eq, Prod, Select, derive
from heronlike.errors import InfeasibleSpaceError, SolverTimeoutError
from heronlike.explore.base import Observation

__all__ = [
    "TOPOLOGY_KINDS",
    "Completer",
    "KnobDrawer",
    "KnobTopology",
    "choice_move",
    "knob_topology",
    "swap_move",
    "best_measured",
    "categorical_knobs",
    "epsilon_select",
    "perm_groups",
    "ScoredPool",
    "select_batch",
    "factorizations",
    "fixed_values",
    "roulette",
    "split_groups",
    "top",
    "unique",
]

Assignment = dict[str, int]
Key = tuple[int, ...]


class Completer:
    """The full assignment that given knob values imply, or None if it is invalid.

    The non-knob variables of Heron's CSPs are defined by PROD, SUM, EQ and SELECT constraints
    from the knobs (tile products, byte counts, selected locations). The definitions are ordered
    once; :meth:`__call__` evaluates them and checks the ranges and the other constraints (what
    :meth:`CSP.violations` checks; ~30 us on the GEMM space). When some variable is not defined
    that way (``complete`` is False), a call falls back to one CP-SAT solve with every knob fixed
    by an EQ (``sampler.sample(1, extra=[Eq(k, v), ...])``), which is ~100x slower.
    """

    def __init__(self, csp: CSP, sampler=None) -> None:
        self.csp = csp
        self.sampler = sampler
        self.knobs = csp.knobs
        self.steps, self.complete = csp.derivation(self.knobs)
        self.constants = {n: v.lo for n, v in csp.vars.items() if v.lo == v.hi and v.knob is False}
        # a definition holds by construction: check the other constraints and every range, each
        # as soon as its operands are known, so that a bad draw is rejected early
        defining = {id(c) for _, c in self.steps}
        pending = [c for c in csp.constraints if id(c) not in defining]
        known = set(self.knobs) | set(self.constants)

        def ready() -> list[Constraint]:
            now = [
                c for c in pending if all(isinstance(o, int) or o in known for o in c.operands())
            ]
            for c in now:
                pending.remove(c)
            return now

        given = [n for n in csp.vars if n in known]
        self.first = ([(n, csp.vars[n].lo, csp.vars[n].hi) for n in given], ready())
        self.plan = []
        for name, c in self.steps:
            known.add(name)
            self.plan.append((name, c, csp.vars[name].lo, csp.vars[name].hi, ready()))
        self.last = pending  # constraints on variables no step defines (only when incomplete)

    def __call__(self, knobs: Mapping[str, int]) -> Assignment | None:
        if not self.complete:
            return self._solve(knobs)
        a = dict(self.constants)
        for k in self.knobs:
            a[k] = int(knobs[k])
        ranges, checks = self.first
        for name, lo, hi in ranges:
            if not lo <= a[name] <= hi:
                return None
        for c in checks:
            if not c.holds(a):
                return None
        for name, c, lo, hi, checks in self.plan:
            value = derive(c, name, a)
            if value is None or not lo <= value <= hi:
                return None
            a[name] = value
            for check in checks:
                if not check.holds(a):
                    return None
        for c in self.last:
            if not c.holds(a):
                return None
        return {name: a[name] for name in self.csp.vars}

    def _solve(self, knobs: Mapping[str, int]) -> Assignment | None:
        if self.sampler is None:
            raise ValueError("this CSP needs a sampler to complete knob values")
        try:
            got = self.sampler.sample(
                1, extra=[Eq(k, int(knobs[k])) for k in self.knobs], max_draws=1
            )
        except (InfeasibleSpaceError, SolverTimeoutError):
            return None
        return got[0] if got else None


# -- split groups and random knob draws ----------------------------------------------------------


def perm_groups(csp: CSP) -> tuple[tuple[str, ...], ...]:
    """The loop-order knob groups of ``csp`` (``CSP.perm_groups``: knobs declared with
    ``topology="perm:<group>"``, together a permutation); empty for a CSP without them."""
    return tuple(tuple(g) for g in getattr(csp, "perm_groups", ()))


def categorical_knobs(csp: CSP) -> tuple[str, ...]:
    """The knobs of ``csp`` whose values are unordered alternatives (``topology=
    "categorical"``, ``CSP.categorical``); empty for a CSP without them."""
    return tuple(getattr(csp, "categorical", ()))


def split_groups(csp: CSP) -> list[tuple[tuple[str, ...], int]]:
    """The split loops of ``csp``: ``(knobs, total)`` with ``prod(knobs) == total``.

    A split is a ``PROD`` whose target is a constant (or a variable with one value) and whose
    factors are at least two distinct knobs and otherwise constants or one-valued variables
    (range ``lo == hi`` or an ``EQ`` to a constant); ``total`` is the target divided by that
    fixed part. A knob belongs to the first split that names it only. The knobs of a loop
    order (:func:`perm_groups`; their PROD ``== n!`` is no split) are left out.
    """
    knob_set = set(csp.knobs)
    fixed = fixed_values(csp)
    used: set[str] = {k for g in perm_groups(csp) for k in g}
    out = []
    for c in csp.constraints:
        if not isinstance(c, Prod):
            continue
        target = c.target if isinstance(c.target, int) else fixed.get(c.target)
        names = [f for f in c.factors if isinstance(f, str) and f in knob_set]
        rest = [f for f in c.factors if not (isinstance(f, str) and f in knob_set)]
        if target is None or target <= 0 or len(names) < 2 or set(names) & used:
            continue
        if len(set(names)) != len(names):
            continue
        if any(isinstance(f, str) and f not in fixed for f in rest):
            continue
        const = 1
        for f in rest:
            const *= f if isinstance(f, int) else fixed[f]
        if const <= 0 or target % const:
            continue
        out.append((tuple(names), target // const))
        used |= set(names)
    return out


def fixed_values(csp: CSP) -> dict[str, int]:
    """Non-knob variables with a single value: by their range or an ``EQ`` to a constant."""
    knobs = set(csp.knobs)
    fixed = {n: v.lo for n, v in csp.vars.items() if v.lo == v.hi}
    for c in csp.constraints:
        if isinstance(c, Eq):
            if isinstance(c.a, str) and isinstance(c.b, int) and c.a not in knobs:
                fixed[c.a] = c.b
            elif isinstance(c.b, str) and isinstance(c.a, int) and c.b not in knobs:
                fixed[c.b] = c.a
    return fixed


def factorizations(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every ordered tuple of ``parts`` positive integers whose product is ``total``."""
    if parts == 0:
        return [()] if total == 1 else []
    if parts == 1:
        return [(total,)]
    return [
        (d, *rest)
        for d in range(1, total + 1)
        if total % d == 0
        for rest in factorizations(total // d, parts - 1)
    ]


# -- knob topologies: which knobs move together, and moves that keep them valid -----------------

#: the topologies of a knob (OpEvo's parameter types, Gao et al. AAAI'21 §3)
TOPOLOGY_KINDS: tuple[str, ...] = ("factor", "perm", "discrete", "choice")


@dataclass(frozen=True)
class KnobTopology:
    """How the knobs of a CSP relate: OpEvo's parameter topologies (Gao et al. AAAI'21 §3),
    read from the CSP by :func:`knob_topology` for every explorer that moves knobs.

    Attributes:
        perm: the loop orders, each a group of position knobs that together hold a
            permutation (one knob per loop).
        factor: the splits ``(knobs, total)`` (:func:`split_groups`) outside the loop orders
            that have at least one ordered factorisation whose parts are candidates.
        kinds: every knob's kind (:data:`TOPOLOGY_KINDS`): ``"perm"``, ``"factor"``,
            ``"choice"`` (categorical: unordered alternatives) or ``"discrete"`` (any other
            knob, its values ordered).
        groups: a perm or factor knob's group (the knobs of its loop order or split).
    """

    perm: tuple[tuple[str, ...], ...]
    factor: tuple[tuple[tuple[str, ...], int], ...]
    kinds: Mapping[str, str]
    groups: Mapping[str, tuple[str, ...]]

    def kind(self, knob: str) -> str:
        """The topology of ``knob`` (one of :data:`TOPOLOGY_KINDS`)."""
        return self.kinds[knob]

    def group(self, knob: str) -> tuple[str, ...]:
        """The loop order or split that holds ``knob``, else ``(knob,)``."""
        return self.groups.get(knob, (knob,))


def knob_topology(
    csp: CSP,
    *,
    position_topology: str = "discrete",
    extra_perm_groups: Sequence[Sequence[str]] = (),
) -> KnobTopology:
    """The topology of every knob of ``csp`` (OpEvo's classification, Gao et al. AAAI'21 §3).

    Loop orders: the CSP's own (:func:`perm_groups`: knobs declared ``topology="perm:<g>"``)
    followed by ``extra_perm_groups`` (a group naming a knob already in one is skipped).
    Splits: those of :func:`split_groups` that share no knob with a loop order and have some
    ordered factorisation whose parts are candidates of their knobs (``IN``). Categorical:
    the CSP's categorical knobs (``topology="categorical"``), and the index knobs of ``SELECT``
    constraints (compute locations) when ``position_topology == "choice"``. Every other knob is
    ``discrete``.

    Raises:
        ValueError: if a group names a variable that is not a knob or a knob twice.
    """
    knob_set = set(csp.knobs)
    used: set[str] = set()
    perms: list[tuple[str, ...]] = []
    for group in [*perm_groups(csp), *(tuple(g) for g in extra_perm_groups)]:
        bad = [k for k in group if k not in knob_set]
        if bad or len(set(group)) != len(group):
            raise ValueError(f"perm group {group} names non-knobs or repeats a knob: {bad}")
        if set(group) & used:
            continue
        perms.append(group)
        used |= set(group)
    factors: list[tuple[tuple[str, ...], int]] = []
    for names, total in split_groups(csp):
        if set(names) & used:
            continue
        allowed = [set(csp.candidates(k)) for k in names]
        if not any(
            all(v in allowed[i] for i, v in enumerate(f)) for f in factorizations(total, len(names))
        ):
            continue
        factors.append((names, total))
        used |= set(names)
    choice = set(categorical_knobs(csp))
    if position_topology == "choice":
        choice |= {c.index for c in csp.constraints if isinstance(c, Select)}
    kinds: dict[str, str] = {}
    groups: dict[str, tuple[str, ...]] = {}
    for kind, grouped in (("perm", perms), ("factor", [n for n, _ in factors])):
        for names in grouped:
            for k in names:
                kinds[k], groups[k] = kind, names
    for k in csp.knobs:
        if k not in kinds:
            kinds[k] = "choice" if k in choice else "discrete"
    return KnobTopology(tuple(perms), tuple(factors), kinds, groups)


def swap_move(
    values: Mapping[str, int],
    group: Sequence[str],
    rng: np.random.Generator,
    knob: str | None = None,
) -> dict[str, int] | None:
    """One transposition of a loop order: the values of ``group`` with the positions of two of
    its loops swapped, so a permutation stays one.

    The loops are ``knob`` (uniform over ``group`` when None) and another one drawn uniformly
    among those at a different position; with ``knob=None`` every pair is equally likely, i.e. a
    uniform step on OpEvo's permutation graph (Gao et al. AAAI'21 §3, :func:`~heronlike.explore.
    opevo.perm_graph`; FlexTensor's swap direction, Zheng et al. ASPLOS'20 §4.3). None when no
    other loop of the group holds a different value.
    """
    if knob is None:
        knob = group[int(rng.integers(len(group)))]
    others = [o for o in group if o != knob and values[o] != values[knob]]
    if not others:
        return None
    other = others[int(rng.integers(len(others)))]
    out = {k: int(values[k]) for k in group}
    out[knob], out[other] = out[other], out[knob]
    return out


def choice_move(value: int, candidates: Sequence[int], rng: np.random.Generator) -> int | None:
    """A categorical knob's move: another of its ``candidates`` than ``value``, uniformly (a
    step on OpEvo's complete ``choice`` graph, Gao et al. AAAI'21 §3); None if there is none."""
    others = [int(v) for v in candidates if v != value]
    return others[int(rng.integers(len(others)))] if others else None


class KnobDrawer:
    """Random knob values consistent with the splits, loop orders and ``IN`` restrictions of
    a CSP.

    Each split gets a uniform ordered factorisation whose parts are candidates of their knobs,
    each loop order (:func:`perm_groups`) a uniform permutation of its values, every other knob
    a uniform candidate (the hints of Heron's RandSAT, made split-consistent as
    :mod:`heronlike.sampler` does). Capacity limits are not checked: complete and check the
    result with :class:`Completer`.
    """

    def __init__(self, csp: CSP) -> None:
        self.groups = []
        grouped: set[str] = set()
        for names in perm_groups(csp):
            values = sorted(set(csp.candidates(names[0])))
            if len(values) != len(names) or any(
                sorted(set(csp.candidates(k))) != values for k in names
            ):
                continue  # not a plain permutation of shared values: drawn knob by knob
            rows = np.array(list(itertools.permutations(values)), dtype=np.int64)
            self.groups.append((names, rows))
            grouped |= set(names)
        for names, total in split_groups(csp):
            allowed = [set(csp.candidates(k)) for k in names]
            rows = [
                f
                for f in factorizations(total, len(names))
                if all(v in allowed[i] for i, v in enumerate(f))
            ]
            if rows:
                self.groups.append((names, np.array(rows, dtype=np.int64)))
                grouped |= set(names)
        self.singles = {
            k: np.array(csp.candidates(k), dtype=np.int64) for k in csp.knobs if k not in grouped
        }

    def options(self, restrict: Mapping[str, Collection[int]] = {}) -> list | None:
        """The rows/values left by ``restrict`` (knob -> allowed values); None if one is empty."""
        out = []
        for names, rows in self.groups:
            mask = np.ones(len(rows), dtype=bool)
            for i, k in enumerate(names):
                if k in restrict:
                    mask &= np.isin(rows[:, i], list(restrict[k]))
            if not mask.any():
                return None
            out.append((names, rows[mask]))
        for k, values in self.singles.items():
            if k in restrict:
                values = values[np.isin(values, list(restrict[k]))]
            if values.size == 0:
                return None
            out.append(((k,), values[:, None]))
        return out

    @staticmethod
    def draw(options: list, rng: np.random.Generator) -> dict[str, int]:
        """One random knob assignment from :meth:`options`."""
        knobs: dict[str, int] = {}
        for names, rows in options:
            row = rows[int(rng.integers(len(rows)))]
            knobs.update(zip(names, (int(v) for v in row)))
        return knobs


# -- selection helpers shared by the model-guided explorers --------------------------------------


def roulette(scores: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` indices drawn with replacement, each with probability ∝ its score.

    Scores are shifted to be >= 0 when some are negative; when they sum to 0 (an untrained model
    predicts zeros) the draw is uniform.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return np.zeros(0, dtype=np.int64)
    w = s - s.min() if s.min() < 0 else s.copy()
    total = w.sum()
    if not np.isfinite(total) or total <= 0:
        return rng.integers(s.size, size=k)
    return rng.choice(s.size, size=k, replace=True, p=w / total)


def epsilon_select(
    pool: Sequence[Assignment], scores: np.ndarray, n: int, epsilon: float, rng: np.random.Generator
) -> list[Assignment]:
    """Heron's ε-greedy: the ``ceil(epsilon * n)`` best of ``pool``, then random others.

    The rest is drawn uniformly without replacement; greedy picks come first, best first.
    ``pool`` must already be free of duplicates and excluded assignments.
    """
    if n <= 0 or not pool:
        return []
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    if len(pool) <= n:
        return [pool[int(i)] for i in order]
    n_greedy = min(n, math.ceil(epsilon * n))
    greedy = [int(i) for i in order[:n_greedy]]
    rest = np.sort(order[n_greedy:])
    picks = rng.choice(rest, size=n - n_greedy, replace=False) if n > n_greedy else []
    return [pool[i] for i in greedy] + [pool[int(i)] for i in picks]


def select_batch(
    pool: Sequence[Assignment],
    scores: np.ndarray,
    n: int,
    epsilon: float,
    rng: np.random.Generator,
    sampler,
    excluded: Collection[Key],
) -> list[Assignment]:
    """End of a round: :func:`epsilon_select` ``n`` of ``pool``; when the pool holds fewer,
    fill the batch with RandSAT samples that are neither excluded nor already picked."""
    picks = epsilon_select(pool, scores, n, epsilon, rng)
    if len(picks) < n:
        taken = set(excluded) | {sampler.key(a) for a in picks}
        picks += sampler.sample(n - len(picks), exclude=taken)
    return picks


def best_measured(observations: Sequence[Observation], k: int, key) -> list[Assignment]:
    """The ``k`` distinct measured assignments of highest throughput (failed ones left out)."""
    valid = sorted(
        (o for o in observations if o.throughput is not None),
        key=lambda o: -float(o.throughput),  # type: ignore[arg-type]
    )
    out, seen = [], set()
    for o in valid:
        if len(out) >= k:
            break
        kk = key(o.assignment)
        if kk not in seen:
            seen.add(kk)
            out.append(dict(o.assignment))
    return out


class ScoredPool:
    """Every assignment one round of a population-based explorer (CGA, GA) has seen, each scored
    once by the cost model, and the steps such a round takes on them.

    Args:
        predict: cost-model scores of a list of assignments (higher is better).
        key: the identity of an assignment (``sampler.key``).
    """

    def __init__(self, predict, key) -> None:
        self.predict = predict
        self.key = key
        self.seen: dict[Key, Assignment] = {}
        self.scores: dict[Key, float] = {}

    def add(self, batch: Sequence[Assignment]) -> list[Assignment]:
        """Score the new ones of ``batch``; return ``batch`` without duplicates."""
        key = self.key
        fresh = [a for a in unique(batch, key) if key(a) not in self.seen]
        if fresh:
            for a, s in zip(fresh, self.predict(fresh), strict=True):
                self.seen[key(a)] = a
                self.scores[key(a)] = float(s)
        return [self.seen[k] for k in dict.fromkeys(key(a) for a in batch)]

    def score(self, batch: Sequence[Assignment]) -> np.ndarray:
        """The scores of ``batch`` (all added before), as an array."""
        return np.array([self.scores[self.key(a)] for a in batch])

    def top(self, batch: Sequence[Assignment], k: int) -> list[Assignment]:
        """:func:`top` ``k`` of ``batch`` (added before) by score."""
        return top(batch, self.scores, self.key, k)

    def next_population(
        self, children: Sequence[Assignment], elites: int, size: int | None
    ) -> list[Assignment]:
        """End of a generation: score ``children``; the best ``size`` of them and of the
        ``elites`` best assignments seen this round (``size=None``: all of them, no cut)."""
        children = self.add(children)
        best = self.top(list(self.seen.values()), elites)
        if size is None:
            return unique(children + best, self.key)
        return self.top(children + best, size)

    def select(
        self,
        n: int,
        excluded: Collection[Key],
        epsilon: float,
        rng: np.random.Generator,
        sampler,
    ) -> list[Assignment]:
        """End of a round: :func:`select_batch` ``n`` of the assignments seen and not excluded."""
        pool = [a for k, a in self.seen.items() if k not in excluded]
        return select_batch(pool, self.score(pool), n, epsilon, rng, sampler, excluded)


def unique(batch: Sequence[Assignment], key) -> list[Assignment]:
    """``batch`` without later duplicates by ``key``."""
    out, seen = [], set()
    for a in batch:
        k = key(a)
        if k not in seen:
            seen.add(k)
            out.append(a)
    return out


def top(batch: Sequence[Assignment], scores: Mapping[Key, float], key, k: int) -> list[Assignment]:
    """The ``k`` best distinct assignments of ``batch`` by score (stable on ties)."""
    uniq = unique(batch, key)
    order = sorted(range(len(uniq)), key=lambda i: -scores[key(uniq[i])])
    return [uniq[i] for i in order[:k]]
