"""The constraint satisfaction problem (CSP) of a schedule space.

Heron (ASPLOS'23, §4.2, Table 7) describes a schedule space by integer variables and six kinds
of constraints: PROD, SUM, EQ, LE, IN and SELECT. This module holds them as small, frozen,
printable records, independent of any solver: :mod:`heronlike.sampler` is the only module that
turns a :class:`CSP` into an OR-Tools CP-SAT model, and :meth:`CSP.violations` re-checks any
assignment in plain Python.

An *operand* is either the name of a variable (``str``) or an integer constant (``int``).
An *assignment* maps every variable name to an ``int``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Operand = str | int
Assignment = Mapping[str, int]


def _value(op: Operand, a: Assignment) -> int:
    return op if isinstance(op, int) else a[op]


def _text(op: Operand) -> str:
    return str(op)


@dataclass(frozen=True)
class Var:
    """An integer variable with the inclusive range ``[lo, hi]``.

    ``knob`` marks a tunable parameter (a split factor, a compute location, an unroll depth):
    explorers vary knobs; every other variable is derived from knobs by constraints.

    ``topology`` tells explorers how a knob's values relate (OpEvo's parameter topologies,
    Gao et al. AAAI'21 §3): ``""`` ordered values (a split factor, a compute location);
    ``"categorical"`` unordered alternatives (an unroll depth, a scope); ``"perm:<group>"`` one
    position of a loop order, the knobs of one group together holding a permutation of
    ``1 .. n`` (:meth:`CSP.perm_groups`).

    ``finish`` marks a knob that is not searched but settled at the end of a tune: explorers
    see it held at ``lo`` (:meth:`CSP.search`), and the session measures the best candidates
    with its other values (variant trials, :class:`heronlike.session.TuneSession`). For a choice
    that changes a program's speed without changing which tiles are good (where padding guards
    go), so that the search does not spend trials on a space twice the size.
    """

    name: str
    lo: int
    hi: int
    knob: bool = False
    doc: str = ""
    topology: str = ""
    finish: bool = False

    def __str__(self) -> str:
        kind = ("finish knob" if self.finish else "knob") if self.knob else "var"
        note = f"  # {self.doc}" if self.doc else ""
        return f"{kind} {self.name} in [{self.lo}, {self.hi}]{note}"


@dataclass(frozen=True)
class Prod:
    """PROD: ``target == factors[0] * factors[1] * ...``."""

    target: Operand
    factors: tuple[Operand, ...]

    def operands(self) -> tuple[Operand, ...]:
        return (self.target, *self.factors)

    def holds(self, a: Assignment) -> bool:
        return _value(self.target, a) == math.prod(_value(f, a) for f in self.factors)

    def __str__(self) -> str:
        return f"PROD {_text(self.target)} == " + " * ".join(map(_text, self.factors))


@dataclass(frozen=True)
class Sum:
    """SUM: ``target == sum(coeffs[i] * terms[i])`` (coefficients default to 1)."""

    target: Operand
    terms: tuple[Operand, ...]
    coeffs: tuple[int, ...] | None = None

    def operands(self) -> tuple[Operand, ...]:
        return (self.target, *self.terms)

    def weights(self) -> tuple[int, ...]:
        return self.coeffs if self.coeffs is not None else (1,) * len(self.terms)

    def holds(self, a: Assignment) -> bool:
        total = sum(c * _value(t, a) for c, t in zip(self.weights(), self.terms, strict=True))
        return _value(self.target, a) == total

    def __str__(self) -> str:
        parts = [
            f"{c}*{_text(t)}" if c != 1 else _text(t) for c, t in zip(self.weights(), self.terms)
        ]
        return f"SUM {_text(self.target)} == " + " + ".join(parts)


@dataclass(frozen=True)
class Eq:
    """EQ: ``a == b``."""

    a: Operand
    b: Operand

    def operands(self) -> tuple[Operand, ...]:
        return (self.a, self.b)

    def holds(self, a: Assignment) -> bool:
        return _value(self.a, a) == _value(self.b, a)

    def __str__(self) -> str:
        return f"EQ {_text(self.a)} == {_text(self.b)}"


@dataclass(frozen=True)
class Le:
    """LE: ``a <= b``."""

    a: Operand
    b: Operand

    def operands(self) -> tuple[Operand, ...]:
        return (self.a, self.b)

    def holds(self, a: Assignment) -> bool:
        return _value(self.a, a) <= _value(self.b, a)

    def __str__(self) -> str:
        return f"LE {_text(self.a)} <= {_text(self.b)}"


@dataclass(frozen=True)
class In:
    """IN: ``var`` takes one of ``values`` (candidates, Heron's AddCandidates)."""

    var: str
    values: tuple[int, ...]

    def operands(self) -> tuple[Operand, ...]:
        return (self.var,)

    def holds(self, a: Assignment) -> bool:
        return a[self.var] in self.values

    def __str__(self) -> str:
        return f"IN {self.var} in {{{', '.join(map(str, self.values))}}}"


@dataclass(frozen=True)
class Select:
    """SELECT: ``target == options[index]`` (Heron's AddStageFuse picks a compute location)."""

    target: Operand
    index: str
    options: tuple[Operand, ...]

    def operands(self) -> tuple[Operand, ...]:
        return (self.target, self.index, *self.options)

    def holds(self, a: Assignment) -> bool:
        i = a[self.index]
        return 0 <= i < len(self.options) and _value(self.target, a) == _value(self.options[i], a)

    def __str__(self) -> str:
        opts = ", ".join(map(_text, self.options))
        return f"SELECT {_text(self.target)} == [{opts}][{self.index}]"


Constraint = Prod | Sum | Eq | Le | In | Select


def defined_by(c: Constraint, known: set[str]) -> str | None:
    """The one variable constraint ``c`` computes from the ``known`` ones, or None.

    PROD, SUM and SELECT define their target once every other operand is known; EQ defines
    whichever side is unknown.
    """
    if isinstance(c, Prod | Sum | Select):
        if isinstance(c.target, str) and c.target not in known:
            if all(isinstance(o, int) or o in known for o in c.operands()[1:]):
                return c.target
        return None
    if isinstance(c, Eq):
        unknown = [o for o in (c.a, c.b) if isinstance(o, str) and o not in known]
        return unknown[0] if len(unknown) == 1 else None
    return None


def derive(c: Constraint, name: str, a: Assignment) -> int | None:
    """The value of ``name`` that makes ``c`` hold given the other operands in ``a``; None for
    a SELECT whose index is out of range."""
    if isinstance(c, Prod):
        return math.prod(_value(f, a) for f in c.factors)
    if isinstance(c, Sum):
        return sum(k * _value(t, a) for k, t in zip(c.weights(), c.terms, strict=True))
    if isinstance(c, Select):
        i = a[c.index]
        return _value(c.options[i], a) if 0 <= i < len(c.options) else None
    if isinstance(c, Eq):
        return _value(c.b, a) if c.a == name else _value(c.a, a)
    raise TypeError(f"{c} defines no variable")


@dataclass
class CSP:
    """Variables and constraints of one schedule space (Heron §4.2).

    Build it with :meth:`var` and :meth:`add`; print it with ``str(csp)``; check an assignment
    with :meth:`violations`. Variable order is creation order, which is also the feature order of
    the cost model.

    Raises:
        ValueError: on a duplicate variable name, an empty range, or a constraint that names an
            unknown variable.
    """

    vars: dict[str, Var] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)

    def var(
        self,
        name: str,
        lo: int,
        hi: int,
        *,
        knob: bool = False,
        doc: str = "",
        topology: str = "",
        finish: bool = False,
    ) -> str:
        """Declare the integer variable ``name`` in ``[lo, hi]`` and return its name
        (``topology``, ``finish``: see :class:`Var`).

        Raises:
            ValueError: a duplicate name, an empty range, or ``finish`` on a non-knob.
        """
        if name in self.vars:
            raise ValueError(f"duplicate CSP variable {name!r}")
        if lo > hi:
            raise ValueError(f"empty range [{lo}, {hi}] for CSP variable {name!r}")
        if finish and not knob:
            raise ValueError(f"CSP variable {name!r}: only a knob can be settled at the finish")
        self.vars[name] = Var(name, int(lo), int(hi), knob, doc, topology, finish)
        return name

    def add(self, constraint: Constraint) -> Constraint:
        """Append ``constraint`` after checking that its variables exist."""
        for op in constraint.operands():
            if isinstance(op, str) and op not in self.vars:
                raise ValueError(f"constraint {constraint} names unknown variable {op!r}")
        self.constraints.append(constraint)
        return constraint

    def extend(self, constraints: Iterable[Constraint]) -> CSP:
        """A new CSP holding this one's variables and constraints plus ``constraints``.

        This is how the constraint-based GA (Heron §5, Algorithm 3) derives a child CSP from
        CSP_initial: the original is never modified.
        """
        child = CSP(dict(self.vars), list(self.constraints))
        for c in constraints:
            child.add(c)
        return child

    @property
    def knobs(self) -> list[str]:
        """Names of the tunable variables, in creation order."""
        return [v.name for v in self.vars.values() if v.knob]

    @property
    def finish_knobs(self) -> list[str]:
        """Knobs settled at the end of a tune rather than searched (``finish=True``, see
        :class:`Var`), in creation order."""
        return [v.name for v in self.vars.values() if v.knob and v.finish]

    def search(self) -> CSP:
        """The CSP explorers search: this one with every :attr:`finish_knobs` held at its
        ``lo`` (an IN constraint of one value, so that samplers draw only it and mutations
        see one candidate); this very CSP when it has none."""
        pinned = [In(k, (self.vars[k].lo,)) for k in self.finish_knobs]
        return self.extend(pinned) if pinned else self

    @property
    def perm_groups(self) -> tuple[tuple[str, ...], ...]:
        """Knob groups that hold a loop order: each group's knobs take the values ``1 .. n``
        in some permutation (``topology="perm:<group>"``), in creation order."""
        groups: dict[str, list[str]] = {}
        for v in self.vars.values():
            if v.knob and v.topology.startswith("perm:"):
                groups.setdefault(v.topology[5:], []).append(v.name)
        return tuple(tuple(g) for g in groups.values())

    @property
    def categorical(self) -> tuple[str, ...]:
        """Knobs whose values are unordered alternatives (``topology="categorical"``)."""
        return tuple(v.name for v in self.vars.values() if v.knob and v.topology == "categorical")

    def candidates(self, name: str) -> tuple[int, ...]:
        """The values ``name`` may take by its range and its IN constraints (not the others)."""
        var = self.vars[name]
        allowed: set[int] | None = None
        for c in self.constraints:
            if isinstance(c, In) and c.var == name:
                allowed = set(c.values) if allowed is None else allowed & set(c.values)
        if allowed is None:
            return tuple(range(var.lo, var.hi + 1))
        return tuple(sorted(v for v in allowed if var.lo <= v <= var.hi))

    def derivation(self, known: Iterable[str]) -> tuple[list[tuple[str, Constraint]], bool]:
        """An order of ``(variable, constraint)`` steps that computes variables from ``known``
        ones (with :func:`derive`), and whether every variable is then known. Variables with a
        one-value range count as known."""
        have = set(known) | {n for n, v in self.vars.items() if v.lo == v.hi}
        steps: list[tuple[str, Constraint]] = []
        todo = [c for c in self.constraints if isinstance(c, Prod | Sum | Eq | Select)]
        progress = True
        while progress:
            progress = False
            for c in list(todo):
                out = defined_by(c, have)
                if out is not None:
                    steps.append((out, c))
                    have.add(out)
                    todo.remove(c)
                    progress = True
        return steps, have >= set(self.vars)

    def complete(
        self,
        knobs: Mapping[str, int],
        steps: Sequence[tuple[str, Constraint]] | None = None,
    ) -> dict[str, int] | None:
        """The full assignment that ``knobs`` (knob name -> value) imply, every derived
        variable computed by :meth:`derivation`'s ``steps`` (computed here when not given); None
        when the knobs do not determine every variable or the assignment breaks a range or a
        constraint. How a stored record's knobs are re-read in today's space (whose derived
        variables may have changed, e.g. a larger register reserve). A :attr:`finish_knobs`
        knob not given takes its ``lo``, the value the search holds."""
        held = {k: self.vars[k].lo for k in self.finish_knobs if k not in knobs}
        knobs = {**knobs, **held} if held else knobs
        if steps is None:
            steps, determined = self.derivation(knobs)
            if not determined:
                return None
        a = dict(knobs)
        for name, var in self.vars.items():
            if var.lo == var.hi and name not in a:
                a[name] = var.lo
        for name, c in steps:
            value = derive(c, name, a)
            if value is None:
                return None
            a[name] = value
        if set(a) != set(self.vars):
            return None
        return None if self.violations(a) else a

    def violations(self, a: Assignment) -> list[str]:
        """Every range or constraint that ``a`` breaks, as text; empty when ``a`` is valid.

        Raises:
            KeyError: if ``a`` misses a variable.
        """
        bad = [str(v) for v in self.vars.values() if not v.lo <= a[v.name] <= v.hi]
        bad += [str(c) for c in self.constraints if not c.holds(a)]
        return bad

    def __str__(self) -> str:
        lines = [
            f"# CSP: {len(self.vars)} variables ({len(self.knobs)} knobs), "
            f"{len(self.constraints)} constraints"
        ]
        lines += [str(v) for v in self.vars.values()]
        lines += [str(c) for c in self.constraints]
        return "\n".join(lines)
