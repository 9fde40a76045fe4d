"""Heron's constraint-based genetic algorithm (CGA; ASPLOS'23 §5, Algorithms 2 and 3).

Each Heron round (:meth:`CGAExplorer.propose`) is:

1. *First generation* (Alg. 2 step 1; the artifact's ``UpdatePopulation``): ``pop_size`` fresh
   RandSAT samples, the ``history_topk`` best programs measured so far and
   (``carry_population``) the previous round's population, re-predicted by the retrained cost
   model; the best ``pop_size`` by predicted score are kept.
2. ``generations`` generations (Alg. 2 step 2) of:

   * *key variables* (Alg. 3 step 1, :meth:`CGAExplorer.key_variables`): the top
     ``ceil(key_ratio * |scope|)`` quantities by the XGBoost cost model's feature importance,
     ``importance_kind`` (default ``"gain"``, the paper's "improvement of achieved
     performance"; the ASPLOS artifact's ``anaCostModel`` used ``"weight"``, the number of
     splits). Importance is summed over the *aliases* of one quantity
     (:func:`heronlike.features.alias_groups`: ``C.v_i.S2``, ``C.v_i@S1`` and ``C.v_i@R0`` are
     one quantity, so are ``C.L1.bytes`` and its derived ``C.L1.bytes.fill``), so that one
     quantity takes one key slot and aliases do not split its importance
     (``dealias=False``: per feature, as the artifact did). A quantity is represented by its
     first knob, else its first CSP variable in ``key_scope``; quantities that are only
     derived features (no CSP variable) cannot be keys. While the model is untrained the keys
     are random quantities, and always for :class:`CGARandomKeysExplorer` ("cga1", the CGA-1
     ablation of Heron Fig. 13: the same quantities, picked at random);
   * *selection*: ``select_num`` parents by roulette wheel on predicted score, with
     replacement (uniform while every score is 0, i.e. untrained);
   * *crossover* (:func:`crossover_constraints`): a child of parents ``p1``, ``p2`` is a
     solution of the child CSP ``CSP_initial + [IN(v, {p1[v], p2[v]}) for v in keys]``;
   * *mutation* (:func:`mutate`): one of those IN constraints, at a random "mutation
     position", is dropped (with probability ``mutation_prob``; Heron always drops one);
   * *solving the child CSP* (Alg. 2 line 11, ``RandSAT(CSPs)``): first the hint stage of
     RandSAT, up to ``child_tries`` random split- and order-consistent knob draws honouring the
     child's IN constraints on knobs (:class:`~heronlike.explore.common.KnobDrawer`), each
     completed and checked against CSP_initial and the INs on derived variables (no solver
     call, ~30 us a draw; counted in ``child_draws``). A child CSP that no draw satisfies is
     solved by CP-SAT, hinted with the last draw and bounded by ``child_cpsat_limit``
     deterministic seconds (``child_solves`` when solved); only when CP-SAT hits that bound is
     the child dropped (``child_failures``). A child CSP is never infeasible (``p1`` satisfies
     it). ``child_cpsat_limit=0`` drops such children without CP-SAT (the old behaviour);
   * *next generation*: ``survivors="union"`` (default, Alg. 2 line 11:
     ``Pop <- RandSAT(CSPs) ∪ Pop``, Pop being the roulette-selected parents), ``"elites"``
     (the artifact: the children and the ``elites`` best programs seen this round) or
     ``"cut"`` (the best ``pop_size`` of those: an extra cut the paper does not make).
3. *ε-greedy* (Heron's ``epsilon_select``): from every program seen this round that is not in
   ``exclude``, the ``ceil(epsilon * n)`` best predicted, then the rest uniformly at random
   without replacement (Heron draws the rest by roulette *with* replacement and loses batch
   slots to duplicates).

**Measurements per round**: Heron measures 32 programs per round (its ``Tuner.run``), then
retrains. Here the tune loop asks for its ``batch_size`` (16 by default) per round; with
``round_size=32`` one CGA round selects 32 and serves them over two batches, the second from the
queue without a new round (the cost model is refitted in between but the queued picks stay those
of the round, as in Heron).

**Incomplete CSP**: when some CSP variable is not derivable from the knobs by the CSP's
PROD/SUM/EQ/SELECT definitions, a random draw cannot be completed; every child CSP is then
solved by CP-SAT directly (hinted with a split-consistent draw), and the constructor raises
``ValueError`` if ``child_cpsat_limit`` is 0 (every child would be dropped and CGA would silently
become ε-greedy RandSAT).

**Untrained model**: Heron skips the generations while the model is untrained (round 0 is pure
RandSAT); so does this explorer unless ``optimize_untrained=True``, and its round 0 is
:meth:`~heronlike.explore.base.Explorer.initial`: RandSAT samples ranked by the target's prior
where it has one (:mod:`heronlike.prior`), else Heron's random ones.

**Heron's values** (heron_repo.md §4.4; ASPLOS-era values in brackets): population 200,
5 generations, 100 [32] parents, key ratio 0.2 [0.14] of all CSP variables, 20 elites, top-32
history, ε 0.6, 32 measurements per round. A round with those takes seconds on one core here;
the defaults (64 children per generation, 5 generations, 32 parents, 0.14, 8 elites, top-16
history, the tune loop's batch per round) keep ``propose(16)`` on the GEMM 1024^3 DL Boost space
at a fraction of a second. ``CGAOptions.heron()`` gives Heron's ASPLOS values.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heronlike.csp import CSP, In
from heronlike.errors import InfeasibleSpaceError, SolverTimeoutError
from heronlike.explore.base import Explorer, check_options
from heronlike.explore.common import (
    Completer,
    KnobDrawer,
    ScoredPool,
    best_measured,
    roulette,
    unique,
)
from heronlike.features import alias_groups

__all__ = [
    "CGAExplorer",
    "CGAOptions",
    "CGARandomKeysExplorer",
    "crossover_constraints",
    "mutate",
]

Assignment = dict[str, int]
Key = tuple[int, ...]


# -- functions shared by the model-guided explorers ----------------------------------------------


def crossover_constraints(
    csp: CSP,
    key_vars: Sequence[str],
    p1: Mapping[str, int],
    p2: Mapping[str, int],
    free: str | None = None,
) -> list[In]:
    """Heron's crossover (Algorithm 3): ``IN(v, {p1[v], p2[v]})`` for each key variable.

    The child CSP is ``csp.extend(result)``: CSP_initial plus these IN constraints only. ``free``
    names a key variable left without its IN (the mutation position), or None.

    Raises:
        ValueError: if a key variable (or ``free``) is not a variable of ``csp``.
    """
    unknown = [v for v in (*key_vars, *([free] if free is not None else [])) if v not in csp.vars]
    if unknown:
        raise ValueError(f"key variables {unknown} are not variables of the CSP")
    return [In(v, tuple(sorted({int(p1[v]), int(p2[v])}))) for v in key_vars if v != free]


def mutate(constraints: Sequence[In], rng: np.random.Generator, prob: float = 1.0) -> list[In]:
    """Heron's mutation: with probability ``prob``, drop one of ``constraints`` at random.

    The dropped IN's variable (the mutation position) is then free in the child CSP. With
    ``prob=1`` (Heron) exactly one is always dropped (none if ``constraints`` is empty).
    """
    out = list(constraints)
    if out and prob > 0 and (prob >= 1 or rng.random() < prob):
        del out[int(rng.integers(len(out)))]
    return out


# -- the explorer --------------------------------------------------------------------------------

_KINDS = ("weight", "gain", "cover", "total_gain", "total_cover")


@dataclass(frozen=True)
class CGAOptions:
    """Options of :class:`CGAExplorer` (Heron's values in the docs; see the module docstring).

    Raises:
        ValueError: on an out-of-range option.
    """

    pop_size: int = field(
        default=64, metadata={"doc": "first generation and children per generation (Heron: 200)"}
    )
    generations: int = field(
        default=5, metadata={"doc": "generations per round (Heron: iter_walks=5)"}
    )
    select_num: int = field(
        default=32, metadata={"doc": "parents drawn by roulette per generation (Heron: 100 [32])"}
    )
    key_ratio: float = field(
        default=0.14,
        metadata={"doc": "keys = ceil(key_ratio * variables in scope) (Heron: 0.2 [0.14])"},
    )
    key_scope: str = field(
        default="all", metadata={"doc": "'all' CSP variables (ASPLOS artifact) or 'knobs'"}
    )
    importance_kind: str = field(
        default="gain",
        metadata={
            "doc": "XGBoost importance ranking the key variables: 'gain' (the paper), 'weight' "
            "(the ASPLOS artifact), 'cover', 'total_gain' or 'total_cover'"
        },
    )
    dealias: bool = field(
        default=True,
        metadata={"doc": "rank quantities, importance summed over their aliases (else features)"},
    )
    mutation_prob: float = field(
        default=1.0, metadata={"doc": "probability a child CSP drops one IN (Heron: 1)"}
    )
    epsilon: float = field(
        default=0.6, metadata={"doc": "greedy share of the proposals (Heron: 0.6)"}
    )
    history_topk: int = field(
        default=16, metadata={"doc": "best measured programs added to the population (Heron: 32)"}
    )
    elites: int = field(
        default=8,
        metadata={"doc": "best programs of the round kept by survivors='elites'/'cut' (Heron: 20)"},
    )
    survivors: str = field(
        default="union",
        metadata={
            "doc": "next generation: 'union' children ∪ parents (paper, Alg. 2), 'elites' "
            "children + elites (artifact), 'cut' best pop_size of those"
        },
    )
    round_size: int = field(
        default=0,
        metadata={"doc": "programs selected per round, over batches (0: the batch; Heron: 32)"},
    )
    carry_population: bool = field(
        default=True, metadata={"doc": "start from the previous round's population too (Heron)"}
    )
    optimize_untrained: bool = field(
        default=False,
        metadata={"doc": "run the generations while the model is untrained (Heron: no)"},
    )
    child_tries: int = field(
        default=16,
        metadata={"doc": "random split-consistent draws tried per child CSP before CP-SAT"},
    )
    child_cpsat_limit: float = field(
        default=0.05,
        metadata={
            "doc": "CP-SAT bound per child CSP no draw solved, in deterministic seconds "
            "(reproducible under load; 0: drop such children)"
        },
    )
    probes: int = field(
        default=256, metadata={"doc": "random valid assignments that find the aliases"}
    )

    def __post_init__(self) -> None:
        check_options(
            self,
            positive=("pop_size", "select_num", "probes"),
            non_negative=("generations", "history_topk", "elites", "child_tries", "round_size"),
            unit=("key_ratio", "mutation_prob", "epsilon"),
        )
        if self.key_scope not in ("all", "knobs"):
            raise ValueError(f"key_scope must be 'all' or 'knobs', got {self.key_scope!r}")
        if self.survivors not in ("union", "elites", "cut"):
            raise ValueError(
                f"survivors must be 'union', 'elites' or 'cut', got {self.survivors!r}"
            )
        if self.importance_kind not in _KINDS:
            raise ValueError(f"importance_kind must be one of {_KINDS}, got {self.importance_kind}")
        if not self.child_cpsat_limit >= 0:
            raise ValueError(f"child_cpsat_limit must be >= 0, got {self.child_cpsat_limit}")

    @staticmethod
    def heron() -> dict[str, Any]:
        """Heron's ASPLOS-era values (heron_repo.md §4.4) as keyword options."""
        return dict(
            pop_size=200,
            generations=5,
            select_num=32,
            key_ratio=0.14,
            importance_kind="weight",
            history_topk=32,
            elites=20,
            survivors="elites",
            round_size=32,
        )


class CGAExplorer(Explorer):
    """Heron's constraint-based GA over child CSPs (see the module docstring).

    Attributes:
        children: child CSPs built, over all calls; each is counted once more in one of
        child_draws: solved by a random draw; child_solves: solved by CP-SAT after the draws
            failed; child_failures: dropped (CP-SAT hit ``child_cpsat_limit``, or it is 0).
        random_key_generations: generations whose key variables were random (untrained model,
            a cost model without feature importance, or "cga1").
        groups: the quantities key variables are chosen from: ``(representative CSP variable,
            feature names)``.

    Raises:
        ValueError: if the CSP has a variable the knobs do not define and
            ``child_cpsat_limit`` is 0.
    """

    name = "cga"
    Options = CGAOptions
    counters = (
        "children",
        "child_draws",
        "child_solves",
        "child_failures",
        "random_key_generations",
    )
    random_keys = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._names = list(self.featurizer.names)
        self._scope = (
            list(self.csp.vars) if self.options.key_scope == "all" else list(self.csp.knobs)
        )
        self._drawer = KnobDrawer(self.csp)
        self._complete = Completer(self.csp, self.sampler)
        self._knobs = set(self.csp.knobs)
        if not self._complete.complete and self.options.child_cpsat_limit <= 0:
            missing = sorted(set(self.csp.vars) - self._derivable())
            raise ValueError(
                f"CSP variables {missing[:5]} are not derivable from the knobs, so random draws "
                "cannot solve a child CSP; CGA needs child_cpsat_limit > 0 to solve them"
            )
        self._population: list[Assignment] = []
        self._queue: list[Assignment] = []
        self._groups: list[tuple[str, list[str]]] | None = None
        self.children = self.child_draws = self.child_solves = self.child_failures = 0
        self.random_key_generations = 0

    def _derivable(self) -> set[str]:
        steps, _ = self.csp.derivation(self.csp.knobs)
        fixed = {n for n, v in self.csp.vars.items() if v.lo == v.hi}
        return set(self.csp.knobs) | {n for n, _ in steps} | fixed

    # -- key variables ---------------------------------------------------------------------------

    @property
    def groups(self) -> list[tuple[str, list[str]]]:
        """``(representative, aliases)`` per quantity in scope, in CSP order of the
        representative; found once, on ``probes`` random valid assignments."""
        if self._groups is None:
            self._groups = self._find_groups()
        return self._groups

    def _probe(self) -> list[Assignment]:
        """Random valid assignments from a generator of their own (the explorer's random
        stream is left as it is)."""
        rng = np.random.default_rng(0x5EED)
        out: list[Assignment] = []
        options = self._drawer.options()
        if self._complete.complete and options is not None:
            for _ in range(20 * self.options.probes):
                a = self._complete(self._drawer.draw(options, rng))
                if a is not None:
                    out.append(a)
                    if len(out) >= self.options.probes:
                        break
        if len(out) < self.options.probes // 2:
            from heronlike.sampler import RandSAT

            out += RandSAT(self.csp, seed=0x5EED).sample(self.options.probes)
        return out

    def _find_groups(self) -> list[tuple[str, list[str]]]:
        in_scope = set(self._scope)
        order = {v: i for i, v in enumerate(self.csp.vars)}
        if self.options.dealias:
            probes = self._probe()
            raw = alias_groups(self._names, self.features(probes)) if probes else []
        else:
            raw = [[n] for n in self._names]
        out = []
        for names in raw:
            members = sorted((n for n in names if n in in_scope), key=order.__getitem__)
            if not members:
                continue  # only derived features: no CSP variable to constrain
            knobs = [n for n in members if n in self._knobs]
            out.append(((knobs or members)[0], list(names)))
        return sorted(out, key=lambda g: order[g[0]])

    def n_keys(self) -> int:
        """``ceil(key_ratio * |scope|)`` (Heron counts the variables of its scope, aliases
        included), at most the number of quantities in scope."""
        return min(len(self.groups), math.ceil(self.options.key_ratio * len(self._scope)))

    def key_variables(self) -> list[str]:
        """The key variables for the next generation: the representatives of the ``n_keys``
        most important quantities (Heron Alg. 3 step 1), or random ones (see module docs)."""
        groups, k = self.groups, self.n_keys()
        importance = self._importance()
        if importance is None:
            self.random_key_generations += 1
            picks = self.rng.choice(len(groups), size=k, replace=False)
            return [groups[int(i)][0] for i in sorted(picks)]
        order = sorted(range(len(groups)), key=lambda i: (-importance[i], i))
        return [groups[i][0] for i in order[:k]]

    def _importance(self) -> list[float] | None:
        """Importance per group (None: pick keys at random)."""
        model = self.cost_model
        if self.random_keys or not model.trained:
            return None
        kind = self.options.importance_kind
        members = [names for _, names in self.groups]
        grouped = getattr(model, "grouped_importance", None)
        if grouped is not None:
            return list(grouped(self._names, members, kind=kind))
        per_feature = getattr(model, "feature_importance", None)
        if per_feature is None:
            return None
        scores = per_feature(self._names, kind=kind)
        return [float(sum(scores[n] for n in names)) for names in members]

    # -- one round -------------------------------------------------------------------------------

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        excluded = set(exclude)
        key = self.sampler.key
        queue = [a for a in self._queue if key(a) not in excluded]
        out, self._queue = queue[:n], queue[n:]
        if len(out) >= n:
            return out
        need = n - len(out)
        picks = self._round(max(need, self.options.round_size), excluded | {key(a) for a in out})
        self._queue += picks[need:]
        return out + picks[:need]

    def _round(self, n: int, excluded: set[tuple[int, ...]]) -> list[Assignment]:
        """One Heron round: ``n`` programs selected from the population it evolves."""
        if not self.cost_model.trained and not self.options.optimize_untrained:
            return self.initial(n, exclude=excluded)
        opt = self.options
        key = self.sampler.key
        pool = ScoredPool(lambda batch: self.cost_model.predict(self.features(batch)), key)
        start = list(self.sampler.sample(opt.pop_size))
        start += best_measured(self.observations, opt.history_topk, key)
        if opt.carry_population:
            start += self._population
        population = pool.top(pool.add(start), opt.pop_size)
        for _ in range(opt.generations):
            if not population:
                break
            key_vars = self.key_variables()
            picks = roulette(pool.score(population), opt.select_num, self.rng)
            parents = [population[int(i)] for i in picks]
            children = []
            for _ in range(opt.pop_size):
                i, j = self.rng.integers(len(parents), size=2)
                cons = crossover_constraints(self.csp, key_vars, parents[i], parents[j])
                child = self._solve_child(mutate(cons, self.rng, opt.mutation_prob))
                if child is not None:
                    children.append(child)
            if opt.survivors == "union":
                population = unique(pool.add(children) + parents, key)
            else:
                size = opt.pop_size if opt.survivors == "cut" else None
                population = pool.next_population(children, opt.elites, size)
        self._population = population
        return pool.select(n, excluded, opt.epsilon, self.rng, self.sampler)

    def _solve_child(self, constraints: Sequence[In]) -> Assignment | None:
        """One solution of ``CSP_initial + constraints``, or None (counted) if none was found.

        Up to ``child_tries`` split-consistent random knob draws honouring the IN constraints
        on knobs (the hint stage of :mod:`heronlike.sampler`), each completed and checked
        against the IN constraints on derived variables; the first that holds is the child.
        Otherwise one CP-SAT solve of the child CSP hinted with the last draw, bounded by
        ``child_cpsat_limit`` deterministic seconds.
        """
        self.children += 1
        restrict = {c.var: c.values for c in constraints}
        options = self._drawer.options(restrict)
        hints: dict[str, int] | None = None
        if options is not None:
            if self._complete.complete:
                derived = [c for c in constraints if c.var not in self._knobs]
                for _ in range(self.options.child_tries):
                    hints = self._drawer.draw(options, self.rng)
                    a = self._complete(hints)
                    if a is not None and all(a[c.var] in c.values for c in derived):
                        self.child_draws += 1
                        return a
            else:
                hints = self._drawer.draw(options, self.rng)
        a = None
        if self.options.child_cpsat_limit > 0:
            try:
                a = _solve_bounded(
                    self.csp,
                    constraints,
                    hints,
                    seed=int(self.rng.integers(1 << 31)),
                    deterministic_s=self.options.child_cpsat_limit,
                )
            except (InfeasibleSpaceError, SolverTimeoutError):
                a = None
        if a is None:
            self.child_failures += 1
        else:
            self.child_solves += 1
        return a


def _solve_bounded(
    csp: CSP,
    extra: Sequence[In],
    hints: Mapping[str, int] | None,
    *,
    seed: int,
    deterministic_s: float,
) -> Assignment | None:
    """One RandSAT solve of ``csp + extra`` (Heron §5: shuffled model, presolve off, one
    worker, hinted) bounded by CP-SAT's *deterministic* time, so that the same seed gives the
    same child on a loaded machine; None when the bound is hit.

    Raises:
        InfeasibleSpaceError: CP-SAT proved the child CSP infeasible (never for a CGA child).
    """
    from heronlike.sampler import solve_one

    return solve_one(
        csp,
        seed=seed,
        hints=hints,
        extra=extra,
        time_limit_s=max(1.0, 100.0 * float(deterministic_s)),  # a safety net only
        deterministic_time_s=float(deterministic_s),
    )


class CGARandomKeysExplorer(CGAExplorer):
    """CGA with random key variables: the CGA-1 ablation of Heron Fig. 13 (Heron HEAD's CGA).

    The keys are random quantities of the same de-aliased scope as "cga" (when ``dealias``),
    so the two differ only in how the keys are ranked.
    """

    name = "cga1"
    random_keys = True
