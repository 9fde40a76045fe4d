"""RandSAT: random valid assignments of a :class:`~heronlike.csp.CSP` from OR-Tools CP-SAT.

Heron (ASPLOS'23, §5 "RandSAT") samples a schedule space by solving its CSP many times, each time
with the variables created and the constraints added in a fresh random order and with a random
solution hint, keeping the first feasible solution of every solve. Changing only CP-SAT's random
seed yields about one new solution in a hundred; the shuffles and the hints supply the diversity.

This module is a re-design of that method and the only module of heronlike that imports OR-Tools.
Its hints are made to be feasible most of the time: each ``PROD`` whose target is a constant and
whose factors are knobs gets a uniformly random ordered factorisation of that constant (counted
exactly by dynamic programming over the divisors, honouring ``IN``/``EQ``-to-constant
restrictions and ranges), and every other knob a uniform value from :meth:`CSP.candidates`. The
solver then only has to repair hints that break a capacity (``LE``) or a location (``SELECT``).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model
from ortools.util.python import sorted_interval_list

from .csp import CSP, Constraint, Eq, In, Le, Operand, Prod, Select, Sum
from .errors import InfeasibleSpaceError, SolverTimeoutError

__all__ = ["RandSAT", "SamplerStats", "solve_one"]

_CAP = 1 << 40  # bound for temporaries of a PROD chain whose operands have no tighter bound
_Vars = dict[str, cp_model.IntVar]
_Encoder = Callable[[cp_model.CpModel, _Vars], None]


@dataclass
class SamplerStats:
    """Counters of one :class:`RandSAT` over all its :meth:`RandSAT.sample` calls.

    Attributes:
        draws: sampling attempts (one solve, plus its retries after a timeout).
        solutions: feasible solutions found, duplicates included.
        duplicates: solutions dropped because their knob tuple was already returned or excluded.
        timeouts: solves that hit ``time_limit_s`` without a solution.
        retries: extra solves after a timeout (each with a fresh shuffle and hint).
        solve_seconds: total wall-clock seconds spent in model building and solving.
    """

    draws: int = 0
    solutions: int = 0
    duplicates: int = 0
    timeouts: int = 0
    retries: int = 0
    solve_seconds: float = 0.0


def _divisors(n: int) -> list[int]:
    small, large = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    return small + large[::-1]


class _Factorizer:
    """Uniform random ordered factorisations ``total == f_0 * ... * f_{k-1}``.

    ``allowed[i]`` is a predicate on the values of factor ``i``. ``ways[i][r]`` counts the ways
    factors ``i..k-1`` multiply to the divisor ``r`` of ``total``; drawing each factor with weight
    ``ways[i+1][r // d]`` makes every valid tuple equally likely.
    """

    def __init__(self, total: int, allowed: Sequence[Callable[[int], bool]]) -> None:
        self.divs = _divisors(total)
        self.total = total
        k = len(allowed)
        self.choices: list[dict[int, list[int]]] = []  # choices[i][r] = allowed divisors of r
        for i in range(k):
            self.choices.append(
                {r: [d for d in self.divs if r % d == 0 and allowed[i](d)] for r in self.divs}
            )
        ways: list[dict[int, int]] = [{}] * (k + 1)
        ways[k] = {r: int(r == 1) for r in self.divs}
        for i in range(k - 1, -1, -1):
            nxt = ways[i + 1]
            ways[i] = {r: sum(nxt[r // d] for d in self.choices[i][r]) for r in self.divs}
        self.ways = ways
        # cumulative weights per (i, r), built lazily
        self._cum: dict[tuple[int, int], tuple[list[int], list[int]]] = {}

    @property
    def feasible(self) -> bool:
        return self.ways[0][self.total] > 0

    def draw(self, rng: np.random.Generator) -> list[int]:
        out, r = [], self.total
        for i in range(len(self.choices)):
            key = (i, r)
            if key not in self._cum:
                ds = [d for d in self.choices[i][r] if self.ways[i + 1][r // d] > 0]
                self._cum[key] = (ds, list(np.cumsum([self.ways[i + 1][r // d] for d in ds])))
            ds, cum = self._cum[key]
            d = ds[bisect.bisect_right(cum, int(rng.integers(cum[-1])))]
            out.append(d)
            r //= d
        return out


class _Model(cp_model.CpModel):
    """A CpModel without OR-Tools' per-instance CamelCase aliases (about 0.5 ms per model)."""

    def _add_pre_pep8_methods(self) -> None:
        pass


def _affine(op: Operand, v: _Vars) -> cp_model.IntVar | int:
    return op if isinstance(op, int) else v[op]


class _Plan:
    """Everything about a CSP that does not change between draws: domains, encoders, hints."""

    def __init__(self, csp: CSP) -> None:
        self.csp = csp
        self.names = list(csp.vars)
        self.knobs = csp.knobs
        self.domains: dict[str, sorted_interval_list.Domain] = {}
        in_vars = {c.var for c in csp.constraints if isinstance(c, In)}
        self.candidates = {name: csp.candidates(name) for name in set(self.knobs) | in_vars}
        for name, var in csp.vars.items():
            if name in in_vars:  # IN is encoded as the variable's domain
                values = self.candidates[name]
                if not values:
                    raise InfeasibleSpaceError(
                        f"CSP variable {name!r} has no value in its range and IN constraints "
                        f"({_size(csp)})"
                    )
                self.domains[name] = sorted_interval_list.Domain.from_values(list(values))
            else:
                self.domains[name] = sorted_interval_list.Domain(var.lo, var.hi)
        self.encoders: list[_Encoder] = []
        for c in csp.constraints:
            if all(isinstance(op, int) for op in c.operands()):
                if not c.holds({}):
                    raise InfeasibleSpaceError(f"constant constraint {c} is false ({_size(csp)})")
                continue
            if not isinstance(c, In):
                self.encoders.append(self._encoder(c))
        self._hint_plan()
        self._definitions()

    # -- encoding ------------------------------------------------------------------------------

    def _bounds(self, op: Operand) -> tuple[int, int]:
        if isinstance(op, int):
            return op, op
        var = self.csp.vars[op]
        return var.lo, var.hi

    def _encoder(self, c: Constraint) -> _Encoder:
        if isinstance(c, Prod):
            return self._prod_encoder(c)
        if isinstance(c, Sum):
            target, terms, coeffs = c.target, c.terms, c.weights()
            return lambda m, v: m.add(
                _affine(target, v) == sum(k * _affine(t, v) for k, t in zip(coeffs, terms))
            )
        if isinstance(c, Eq):
            a, b = c.a, c.b
            return lambda m, v: m.add(_affine(a, v) == _affine(b, v))
        if isinstance(c, Le):
            a, b = c.a, c.b
            return lambda m, v: m.add(_affine(a, v) <= _affine(b, v))
        if isinstance(c, Select):
            target, index, options = c.target, c.index, c.options
            return lambda m, v: m.add_element(
                v[index], [_affine(o, v) for o in options], _affine(target, v)
            )
        raise TypeError(f"unknown constraint type {type(c).__name__}")

    def _prod_encoder(self, c: Prod) -> _Encoder:
        const = math.prod(f for f in c.factors if isinstance(f, int))
        names = [f for f in c.factors if isinstance(f, str)]
        target = c.target
        if len(names) <= 1:
            return lambda m, v: m.add(_affine(target, v) == const * math.prod(v[n] for n in names))
        # Chain: t_1 = x_0 * x_1, t_2 = t_1 * x_2, ..., target = const * t_{k-1}.
        tmp_bounds = []
        lo, hi = self._bounds(names[0])
        t_lo, t_hi = self._bounds(target)
        positive = const > 0 and all(self._bounds(n)[0] >= 1 for n in names)
        for n in names[1:]:
            n_lo, n_hi = self._bounds(n)
            corners = (lo * n_lo, lo * n_hi, hi * n_lo, hi * n_hi)
            lo, hi = max(min(corners), -_CAP), min(max(corners), _CAP)
            if positive and t_hi >= 1:
                hi = min(hi, t_hi // const)
                lo = min(lo, hi)
            tmp_bounds.append((lo, hi))

        def encode(m: cp_model.CpModel, v: _Vars) -> None:
            acc: cp_model.IntVar = v[names[0]]
            for n, (lo, hi) in zip(names[1:-1], tmp_bounds[:-1]):
                nxt = m.new_int_var(lo, hi, "")
                m.add_multiplication_equality(nxt, [acc, v[n]])
                acc = nxt
            if const == 1:
                m.add_multiplication_equality(_affine(target, v), [acc, v[names[-1]]])
            else:
                last = m.new_int_var(*tmp_bounds[-1], "")
                m.add_multiplication_equality(last, [acc, v[names[-1]]])
                m.add(_affine(target, v) == const * last)

        return encode

    # -- hints ---------------------------------------------------------------------------------

    def _fixed(self) -> dict[str, int]:
        """Variables with a single possible value: by their range or an EQ to a constant."""
        fixed = {name: var.lo for name, var in self.csp.vars.items() if var.lo == var.hi}
        for c in self.csp.constraints:
            if isinstance(c, Eq):
                if isinstance(c.a, str) and isinstance(c.b, int):
                    fixed[c.a] = c.b
                elif isinstance(c.b, str) and isinstance(c.a, int):
                    fixed[c.b] = c.a
        return fixed

    def _hint_plan(self) -> None:
        knobs = set(self.knobs)
        fixed = self.fixed = self._fixed()
        self.factorizers: list[tuple[list[str], _Factorizer]] = []
        for c in self.csp.constraints:
            if not isinstance(c, Prod):
                continue
            total = c.target if isinstance(c.target, int) else fixed.get(c.target)
            names = [f for f in c.factors if isinstance(f, str)]
            const = math.prod(f for f in c.factors if isinstance(f, int))
            if total is None or total <= 0 or const <= 0 or total % const or not names:
                continue
            if not all(n in knobs or n in fixed for n in names):
                continue  # a factor is derived from other knobs: leave it to the solver
            allowed = [self._allowed(n, fixed) for n in names]
            fz = _Factorizer(total // const, allowed)
            if fz.feasible:
                self.factorizers.append((names, fz))

    def _allowed(self, name: str, fixed: Mapping[str, int]) -> Callable[[int], bool]:
        if name in fixed:
            value = fixed[name]
            return lambda d: d == value
        values = frozenset(self.candidates[name])
        return values.__contains__

    def _random_knobs(self, rng: np.random.Generator) -> dict[str, int]:
        hint: dict[str, int] = {}
        for names, fz in self.factorizers:
            if any(n in hint for n in names):
                continue  # a knob shared with an earlier PROD keeps its first hint
            hint.update(zip(names, fz.draw(rng)))
        for name in self.knobs:
            if name in self.fixed:
                hint.setdefault(name, self.fixed[name])
            elif name not in hint:
                values = self.candidates[name]
                if values:
                    hint[name] = values[int(rng.integers(len(values)))]
        return hint

    def _definitions(self) -> None:
        """Order the constraints that compute every non-knob variable from the knobs."""
        self.steps, self.complete = self.csp.derivation(self.knobs)

    def hints(self, rng: np.random.Generator, tries: int = 128) -> dict[str, int]:
        """A random hint: factorisations for PROD knobs, uniform candidates for the others.

        When the derived variables can be computed from the knobs, knob hints are redrawn (up
        to ``tries`` times) until the full assignment they imply is valid, and that assignment
        is the hint; otherwise the last knob hint is returned for CP-SAT to repair.
        """
        hint = self._random_knobs(rng)
        if not self.complete:
            return hint
        for _ in range(tries - 1):
            full = self.csp.complete(hint, self.steps)
            if full is not None:
                return full
            hint = self._random_knobs(rng)
        return self.csp.complete(hint, self.steps) or hint


def _size(csp: CSP) -> str:
    return f"CSP of {len(csp.vars)} variables, {len(csp.constraints)} constraints"


class RandSAT:
    """Random distinct valid assignments of a CSP (Heron ASPLOS'23 §5 "RandSAT").

    Every draw builds a fresh CP-SAT model, creating the variables and adding the constraints in a
    random order, hints every knob with a random (mostly feasible) value, and solves it with
    presolve off, one worker, a random seed and a time limit, keeping the first solution. All
    randomness comes from ``numpy.random.default_rng(seed)``, so the same CSP, seed and call
    sequence give the same results (unless a solve hits its wall-clock time limit).

    Args:
        csp: the space; it is never modified, and it is read once here (constraints added to it
            later are not seen; pass them as ``extra`` or build a new sampler).
        seed: seed of the sampler's random generator.
        time_limit_s: wall-clock limit of one solve, in seconds.
        max_retries: solves to retry, each with a fresh shuffle, after a timeout.

    Raises:
        InfeasibleSpaceError: at construction, if an ``IN`` leaves a variable no value or a
            constraint on constants is false.

    Attributes:
        stats: :class:`SamplerStats` accumulated over all calls.
    """

    def __init__(
        self, csp: CSP, *, seed: int, time_limit_s: float = 1.0, max_retries: int = 4
    ) -> None:
        self.csp = csp
        self.time_limit_s = float(time_limit_s)
        self.max_retries = int(max_retries)
        self.stats = SamplerStats()
        self._rng = np.random.default_rng(seed)
        self._plan = _Plan(csp)
        self._extra_plans: dict[tuple[Constraint, ...], _Plan] = {}
        self._solver = cp_model.CpSolver()
        params = self._solver.parameters
        params.cp_model_presolve = False
        params.num_workers = 1
        params.max_time_in_seconds = self.time_limit_s

    def key(self, assignment: Mapping[str, int]) -> tuple[int, ...]:
        """The knob values of ``assignment`` in ``csp.knobs`` order (the identity of a sample)."""
        return tuple(int(assignment[k]) for k in self._plan.knobs)

    def sample(
        self,
        n: int,
        *,
        extra: Sequence[Constraint] = (),
        exclude: Collection[tuple[int, ...]] = (),
        max_draws: int | None = None,
    ) -> list[dict[str, int]]:
        """Up to ``n`` distinct valid full assignments (variable name -> int).

        Samples are distinct by :meth:`key`, and none has a key in ``exclude``. ``extra``
        constraints (e.g. the GA's crossover ``IN`` restrictions) hold for this call only; the CSP
        is not modified. After ``max_draws`` draws (default ``4 * n + 16``) the samples found so
        far are returned, possibly fewer than ``n``; :attr:`stats` says why.

        Raises:
            InfeasibleSpaceError: CP-SAT proved the CSP (with ``extra``) has no solution.
            SolverTimeoutError: a draw found no solution in ``max_retries + 1`` solves.
            ValueError: ``extra`` names an unknown variable.
        """
        plan = self._plan_for(tuple(extra))
        budget = 4 * n + 16 if max_draws is None else max_draws
        seen = set(exclude)
        out: list[dict[str, int]] = []
        draws = 0
        while len(out) < n and draws < budget:
            draws += 1
            self.stats.draws += 1
            a = self._draw(plan)
            self.stats.solutions += 1
            k = self.key(a)
            if k in seen:
                self.stats.duplicates += 1
                continue
            seen.add(k)
            out.append(a)
        return out

    def _plan_for(self, extra: tuple[Constraint, ...]) -> _Plan:
        if not extra:
            return self._plan
        plan = self._extra_plans.get(extra)
        if plan is None:
            if len(self._extra_plans) >= 64:
                self._extra_plans.clear()
            plan = self._extra_plans[extra] = _Plan(self.csp.extend(extra))
        return plan

    def _draw(self, plan: _Plan) -> dict[str, int]:
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.stats.retries += 1
            a = _solve(plan, self._rng, self._solver, self.stats)
            if a is not None:
                return a
            self.stats.timeouts += 1
        raise SolverTimeoutError(
            f"CP-SAT found no solution of the {_size(plan.csp)} within {self.time_limit_s} s, "
            f"{self.max_retries + 1} times"
        )


def _solve(
    plan: _Plan,
    rng: np.random.Generator,
    solver: cp_model.CpSolver,
    stats: SamplerStats | None = None,
    hint: Mapping[str, int] | None = None,
) -> dict[str, int] | None:
    """One shuffled, hinted solve; the assignment, or None on a timeout."""
    start = time.perf_counter()
    if hint is None:
        hint = plan.hints(rng)
    model = _Model()
    v: _Vars = {}
    for i in rng.permutation(len(plan.names)):
        name = plan.names[i]
        v[name] = model.new_int_var_from_domain(plan.domains[name], name)
    for i in rng.permutation(len(plan.encoders)):
        plan.encoders[i](model, v)
    for name, value in hint.items():
        model.add_hint(v[name], value)
    solver.parameters.random_seed = int(rng.integers(1 << 31))
    status = solver.solve(model)
    if stats is not None:
        stats.solve_seconds += time.perf_counter() - start
    if status == cp_model.INFEASIBLE:
        raise InfeasibleSpaceError(f"the {_size(plan.csp)} has no solution (CP-SAT proved it)")
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"heronlike built an invalid CP-SAT model: {model.validate()}")
    if status not in (cp_model.FEASIBLE, cp_model.OPTIMAL):
        return None
    solution = solver.response_proto.solution
    a = {name: int(solution[v[name].index]) for name in plan.names}
    bad = plan.csp.violations(a)
    if bad:  # a wrong encoding must never pass silently
        raise RuntimeError(f"CP-SAT returned an assignment that breaks {bad[:3]}")
    return a


def solve_one(
    csp: CSP,
    *,
    seed: int,
    hints: Mapping[str, int] | None = None,
    extra: Sequence[Constraint] = (),
    time_limit_s: float = 1.0,
    deterministic_time_s: float | None = None,
) -> dict[str, int] | None:
    """One valid assignment of ``csp`` (plus ``extra``), near ``hints`` if given.

    A single RandSAT draw (Heron ASPLOS'23 §5) with the given hints (variable name -> value; any
    variable, knob or not) instead of random ones. Returns None if CP-SAT times out after
    ``time_limit_s`` seconds, or after ``deterministic_time_s`` of CP-SAT's deterministic time
    (a work measure, the same on a loaded machine: the same seed gives the same answer).

    Raises:
        InfeasibleSpaceError: the CSP has no solution.
        ValueError: ``extra`` names an unknown variable, or ``hints`` an unknown variable.
    """
    plan = _Plan(csp.extend(extra) if extra else csp)
    rng = np.random.default_rng(seed)
    if hints is not None:
        unknown = set(hints) - set(plan.names)
        if unknown:
            raise ValueError(f"hints name unknown variables {sorted(unknown)}")
    solver = cp_model.CpSolver()
    solver.parameters.cp_model_presolve = False
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    if deterministic_time_s is not None:
        solver.parameters.max_deterministic_time = float(deterministic_time_s)
    return _solve(plan, rng, solver, hint=hints if hints is not None else plan.hints(rng))
