"""Heron's constraint-based genetic algorithm (CGA; ASPLOS'23 §5, Algorithms 2 and 3).

Each :meth:`CGAExplorer.propose` is one Heron round:

1. *Population* (``UpdatePopulation``): ``pop_size`` fresh RandSAT samples, the
   ``history_topk`` best programs measured so far and (``carry_population``) the previous round's
   population, re-predicted by the retrained cost model; the best ``pop_size`` by predicted score
   are kept.
2. ``generations`` generations of:

   * *key variables*: the top ``ceil(key_ratio * count)`` variables by the XGBoost cost model's
     feature importance (``Booster.get_score(importance_type=importance_kind)``, unused features
     after the used ones in CSP order), as the ASPLOS'23 artifact's ``anaCostModel``; random
     ones while the model is untrained, and always for :class:`CGARandomKeysExplorer` ("cga1",
     the CGA-1 ablation of Heron Fig. 13);
   * *selection*: ``select_num`` parents by roulette wheel on predicted score, with replacement
     (uniform while every score is 0, i.e. untrained);
   * *crossover* (:func:`crossover_constraints`): a child of parents ``p1``, ``p2`` is a solution
     of the child CSP ``CSP_initial + [IN(v, {p1[v], p2[v]}) for v in key variables]``;
   * *mutation* (:func:`mutate`): one of those IN constraints, at a random "mutation position",
     is dropped (with probability ``mutation_prob``; Heron always drops one), leaving that
     variable free;
   * RandSAT solves every child CSP (a child always exists: ``p1`` satisfies it);
   * the children are predicted; the next population is the best ``pop_size`` of the children
     and the ``elites`` best programs seen this round.
3. *ε-greedy* (Heron's ``epsilon_select``): from every program seen this round that is not in
   ``exclude``, the ``ceil(epsilon * n)`` best predicted, then the rest uniformly at random
   without replacement (Heron draws the rest by roulette *with* replacement and loses batch
   slots to duplicates).

Design decisions:

* **Key variables** range over *all* CSP variables (``key_scope="all"``), as the ASPLOS'23
  artifact did: the cost model's features are every variable, and a derived variable such as a
  tile's byte count is often the most informative split. ``key_scope="knobs"`` restricts them to
  knobs. Heron's HEAD picks them at random (that is "cga1" here).
* **Child solving** (``child_solver="draw"``, default) is the hint stage of RandSAT run on the
  child CSP: up to ``child_tries`` random split-consistent knob draws that honour the child's IN
  constraints on knobs (:class:`~heronlike.explore.ga.KnobDrawer`, the sampler's hints), each
  completed (derived variables computed from the knobs) and checked against CSP_initial and the
  IN constraints on derived variables; the first that holds is the child, found without a
  solver call. A child CSP no draw satisfies is dropped (``child_failures``: about 6 % of the
  children with importance keys, 24 % with random keys on the GEMM space). With
  ``child_time_limit_s > 0`` such a child is repaired by one CP-SAT solve hinted with the last
  draw instead; CP-SAT solves those in ~1.5 ms or needs seconds (about 2 %), so the limit sits in
  that gap, but it is wall-clock: under CPU load two same-seed runs then differ (observed), which
  is why it is off by default. ``child_solver="randsat"`` calls ``sampler.sample(1, extra=...)``
  (RandSAT's 128 draws, then CP-SAT with the sampler's time limit): 3-8x slower here, and not
  reproducible under load either.
* **Untrained model**: Heron skips the generations while the model is untrained (round 0 is pure
  RandSAT); so does this explorer unless ``optimize_untrained=True``.
* **Defaults** (deviation): Heron uses ``pop_size=200`` children per generation, 5 generations,
  ``select_num=100`` (ASPLOS: 32), ``key_ratio=0.2`` (ASPLOS: 0.14), 20 elites, top-32 history.
  A round of those takes seconds on one core here; the defaults below (64 children per
  generation, Heron's 5 generations, 32 parents, 8 elites, top-16 history, ASPLOS's 0.14) keep
  ``propose(16)`` on the GEMM 1024^3 DL Boost space at about 0.2-0.4 s.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

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
)

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


@dataclass(frozen=True)
class CGAOptions:
    """Options of :class:`CGAExplorer` (Heron's values in the docs; see the module docstring).

    Raises:
        ValueError: on an out-of-range option.
    """

    pop_size: int = field(
        default=64, metadata={"doc": "population kept and children per generation (Heron: 200)"}
    )
    generations: int = field(
        default=5, metadata={"doc": "generations per propose() (Heron: iter_walks=5)"}
    )
    select_num: int = field(
        default=32, metadata={"doc": "parents drawn by roulette per generation (Heron: 100/32)"}
    )
    key_ratio: float = field(
        default=0.14, metadata={"doc": "share of variables made key variables (ASPLOS: 0.14)"}
    )
    key_scope: str = field(
        default="all", metadata={"doc": "'all' CSP variables (ASPLOS artifact) or 'knobs'"}
    )
    importance_kind: str = field(
        default="weight", metadata={"doc": "XGBoost importance type ranking key variables"}
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
        default=8, metadata={"doc": "best programs of the round kept each generation (Heron: 20)"}
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
        metadata={
            "doc": "random split-consistent draws tried per child before CP-SAT (16: a child "
            "needing more is dropped; 64 took 2.5x the explorer time in a simulated BMM tune)"
        },
    )
    child_time_limit_s: float = field(
        default=0.0,
        metadata={"doc": "CP-SAT repair time limit per child after failed draws (0: no repair)"},
    )
    child_solver: str = field(
        default="draw",
        metadata={"doc": "'draw': draws, then one hinted CP-SAT solve; 'randsat': sampler.sample"},
    )

    def __post_init__(self) -> None:
        check_options(
            self,
            positive=("pop_size", "select_num"),
            non_negative=("generations", "history_topk", "elites", "child_tries"),
            unit=("key_ratio", "mutation_prob", "epsilon"),
        )
        if self.key_scope not in ("all", "knobs"):
            raise ValueError(f"key_scope must be 'all' or 'knobs', got {self.key_scope!r}")
        if self.child_solver not in ("draw", "randsat"):
            raise ValueError(f"child_solver must be 'draw' or 'randsat', got {self.child_solver!r}")
        kinds = ("weight", "gain", "cover", "total_gain", "total_cover")
        if self.importance_kind not in kinds:
            raise ValueError(f"importance_kind must be one of {kinds}, got {self.importance_kind}")


class CGAExplorer(Explorer):
    """Heron's constraint-based GA over child CSPs (see the module docstring).

    Attributes:
        children: child CSPs built, over all calls.
        child_solves: of them, solved by CP-SAT (no random draw satisfied them).
        child_failures: of them, dropped: no draw satisfied them (and CP-SAT, if enabled, timed
            out; a child CSP is never infeasible).
    """

    name = "cga"
    Options = CGAOptions
    counters = ("children", "child_failures", "child_solves")
    random_keys = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._names = list(self.featurizer.names)
        self._scope = (
            list(self.csp.vars) if self.options.key_scope == "all" else list(self.csp.knobs)
        )
        self._drawer = KnobDrawer(self.csp)
        self._complete = Completer(self.csp, self.sampler)
        self._knobs = set(self.csp.knobs)
        self._population: list[Assignment] = []
        self.child_failures = 0
        self.children = 0
        self.child_solves = 0

    # -- key variables ---------------------------------------------------------------------------

    def n_keys(self) -> int:
        """``ceil(key_ratio * count)`` over the key-variable scope."""
        return min(len(self._scope), math.ceil(self.options.key_ratio * len(self._scope)))

    def key_variables(self) -> list[str]:
        """The key variables for the next generation (model importance, or random)."""
        k = self.n_keys()
        importance_of = getattr(self.cost_model, "feature_importance", None)
        if self.random_keys or not self.cost_model.trained or importance_of is None:
            picks = self.rng.choice(len(self._scope), size=k, replace=False)
            return [self._scope[int(i)] for i in sorted(picks)]
        importance = importance_of(self._names, kind=self.options.importance_kind)
        order = sorted(range(len(self._scope)), key=lambda i: (-importance[self._scope[i]], i))
        return [self._scope[i] for i in order[:k]]

    # -- one round -------------------------------------------------------------------------------

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        excluded = set(exclude)
        if not self.cost_model.trained and not self.options.optimize_untrained:
            return self.sampler.sample(n, exclude=excluded)
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
            population = pool.next_population(children, opt.elites, opt.pop_size)
        self._population = population
        return pool.select(n, excluded, opt.epsilon, self.rng, self.sampler)

    def _solve_child(self, constraints: Sequence[In]) -> Assignment | None:
        """One solution of ``CSP_initial + constraints``, or None (counted) if none was found."""
        self.children += 1
        try:
            if self.options.child_solver == "randsat":
                got = self.sampler.sample(1, extra=list(constraints), max_draws=1)
                a = got[0] if got else None
            else:
                a = self._draw_child(constraints)
        except (InfeasibleSpaceError, SolverTimeoutError):
            a = None
        if a is None:
            self.child_failures += 1
        return a

    def _draw_child(self, constraints: Sequence[In]) -> Assignment | None:
        """RandSAT on the child CSP: random hints until one is a solution, else CP-SAT repair.

        Up to ``child_tries`` split-consistent random knob draws honouring the IN constraints on
        knobs (the hint stage of :mod:`heronlike.sampler`), each completed and checked against
        the IN constraints on derived variables; the first that holds is the child (no solver
        call: deterministic, ~30 us a draw). Otherwise, if ``child_time_limit_s > 0``, one
        CP-SAT solve of the child CSP hinted with the last draw; else None.
        """
        from heronlike.sampler import solve_one

        restrict = {c.var: c.values for c in constraints}
        options = self._drawer.options(restrict)
        hints: dict[str, int] | None = None
        if options is not None and self._complete.complete:
            derived = [c for c in constraints if c.var not in self._knobs]
            for _ in range(self.options.child_tries):
                hints = self._drawer.draw(options, self.rng)
                a = self._complete(hints)
                if a is not None and all(a[c.var] in c.values for c in derived):
                    return a
            if self.options.child_time_limit_s <= 0:
                return None
        self.child_solves += 1
        return solve_one(
            self.csp,
            seed=int(self.rng.integers(1 << 31)),
            hints=hints,
            extra=constraints,
            time_limit_s=self.options.child_time_limit_s,
        )


class CGARandomKeysExplorer(CGAExplorer):
    """CGA with random key variables: the CGA-1 ablation of Heron Fig. 13 (Heron HEAD's CGA)."""

    name = "cga1"
    random_keys = True
