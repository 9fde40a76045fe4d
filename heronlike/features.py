"""Cost-model features of a candidate program, derived from its assignment without compiling.

Heron (ASPLOS'23 §5) feeds XGBoost the values of every CSP variable. Those already hold the split
factors, fused extents and the footprints the constraint rules declared, but not quantities that
are products or ratios *across* variables, which trees approximate poorly: how many times each
tiling level iterates, how much work and data one tile holds, how well the parallel loop divides
over the cores. :class:`ScheduleFeatures` adds them, computed with numpy from the assignment and
the loop nests the rules built (:attr:`heronlike.space.Space.nests`), so ranking thousands of
candidates costs microseconds each; nothing is lowered or compiled (as in Ansor's/TVM
MetaSchedule's per-store features, but from the schedule template instead of the lowered TIR).

Features of one assignment, per tiled stage ``s`` and per tiling level ``L`` (``S0``, ``R0``...):

=============================  =================================================================
``s.L.trips``                  iterations of level ``L``: product of its loop extents (loop extents)
``s.L.volume``                 loop-body instances inside one iteration of ``L`` (tile volume)
``s.L.bytes``                  bytes of every buffer the stage touches inside one iteration of ``L``
                               (per-buffer footprint, plain-indexed dimensions; others count 1)
``s.L.intensity``              ``volume / bytes``: work per byte at that tile (arithmetic intensity)
``s.L.run``                    contiguous elements of the output's last dimension inside ``L``
``s.vector``                   widest vectorised loop of the stage, in lanes (vector length)
``s.unroll``                   product of the extents of the unrolled loops
``s.tile.loads``               ``1/V + 1/P``: vector loads per innermost body instance of the
                               register tile (the innermost spatial level: ``V`` its extent along
                               the output's last axis, ``P`` along the others)
``parallel.extent``            product of the extents of every parallel loop
``parallel.balance``           ``extent / (ceil(extent / cores) * cores)``: 1.0 when it divides
``<var>.fill``                 ``var / capacity`` for every ``LE var <= capacity`` of the CSP
=============================  =================================================================

A derived name that is also a CSP variable's (``s.unroll`` beside an unroll-depth knob named
``s.unroll``) gets the suffix ``.derived``.

Counts and extents enter as ``log2(x + 1)``; ratios (``balance``, ``fill``) as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from heronlike.cost_model import assignment_features, feature_names
from heronlike.csp import CSP, Le

if TYPE_CHECKING:  # pragma: no cover
    from heronlike.space import Space

__all__ = ["CSPFeatures", "Featurizer", "ScheduleFeatures", "alias_groups"]

Values = Callable[[Any], np.ndarray]


@runtime_checkable
class Featurizer(Protocol):
    """Turns assignments into the cost model's feature matrix.

    ``names`` labels the columns; the first ``len(csp.vars)`` are the CSP variables in creation
    order (so an explorer can read a variable's importance by its name).
    """

    names: list[str]

    def __call__(self, assignments: Sequence[Mapping[str, int]]) -> np.ndarray: ...


class CSPFeatures:
    """Heron's features: every CSP variable (:func:`heronlike.cost_model.assignment_features`)."""

    def __init__(self, csp: CSP) -> None:
        self.csp = csp
        self.names = feature_names(csp)

    def __call__(self, assignments: Sequence[Mapping[str, int]]) -> np.ndarray:
        """A ``(len(assignments), len(names))`` float64 matrix."""
        return assignment_features(self.csp, assignments)


def _log(x: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(x, 0.0) + 1.0)


class ScheduleFeatures:
    """Heron's CSP-variable features plus the derived loop, footprint and parallelism features
    in the module docstring.

    Args:
        space: the schedule space; its ``nests`` (final loop nest of every scheduled stage),
            ``template`` (which loops are parallel, vectorised, unrolled), ``dag`` (buffer
            accesses, dtypes) and ``target.cores`` are read once here.

    Raises:
        KeyError: from ``__call__`` when an assignment misses a CSP variable.
    """

    def __init__(self, space: Space) -> None:
        self.csp = space.csp
        self._base = CSPFeatures(space.csp)
        derived: list[tuple[str, Callable[[Values], np.ndarray]]] = []
        annotated = _annotations(space)
        parallel: list[Any] = []
        for stage_name, nest in space.nests.items():
            stage = space.dag.stage(stage_name)
            derived += _level_features(stage, list(nest))
            derived += _tile_loads(stage, list(nest))
            vector = [lp.extent for lp in nest if annotated.get(lp.sym) == "vectorize"]
            vector += [lanes for _, lanes in annotated.get(("block", stage_name), [])]
            if vector:
                derived.append((f"{stage_name}.vector", _max_fn(vector)))
            unrolled = [lp.extent for lp in nest if annotated.get(lp.sym) == "unroll"]
            if unrolled:
                derived.append((f"{stage_name}.unroll", _product_fn(unrolled, log=True)))
            parallel += [lp.extent for lp in nest if annotated.get(lp.sym) == "parallel"]
        if parallel:
            cores = max(1, int(space.target.cores))
            derived.append(("parallel.extent", _product_fn(parallel, log=True)))
            derived.append(("parallel.balance", _balance_fn(parallel, cores)))
        for c in space.csp.constraints:
            if isinstance(c, Le) and isinstance(c.a, str) and isinstance(c.b, int) and c.b > 0:
                derived.append((f"{c.a}.fill", _ratio_fn(c.a, c.b)))
        # a derived name that is also a CSP variable (a stage's ``unroll`` knob and its
        # unrolled-extent feature) gets the suffix ``.derived``: names stay unique
        taken = set(self._base.names)
        derived = [(n + ".derived" if n in taken else n, fn) for n, fn in derived]
        self._derived = derived
        self.names = self._base.names + [name for name, _ in derived]

    def __call__(self, assignments: Sequence[Mapping[str, int]]) -> np.ndarray:
        """A ``(len(assignments), len(names))`` float64 matrix."""
        base = self._base(assignments)
        if not self._derived:
            return base
        cache: dict[str, np.ndarray] = {}

        def values(op: Any) -> np.ndarray:
            if isinstance(op, int):
                return np.full(len(assignments), float(op))
            if op not in cache:
                cache[op] = np.array([a[op] for a in assignments], dtype=np.float64)
            return cache[op]

        extra = np.stack([fn(values) for _, fn in self._derived], axis=1)
        return np.concatenate([base, extra.reshape(len(assignments), -1)], axis=1)


def _annotations(space: Space) -> dict[Any, Any]:
    """Loop symbol -> "parallel" / "vectorize" / "unroll", and ("block", stage) -> [(block,
    lanes)] for ``vectorize_innermost`` steps, from the template."""
    out: dict[Any, Any] = {}
    blocks = {f"b_{name}": name for name in space.nests}
    for step in space.template.steps:
        if step.op in ("parallel", "vectorize", "unroll") and step.args:
            out[getattr(step.args[0], "name", None)] = step.op
        elif step.op == "vectorize_innermost" and len(step.args) == 2:
            block = getattr(step.args[0], "name", "")
            stage = blocks.get(block) or blocks.get(block.rsplit(".", 1)[0])
            if stage is not None:
                out.setdefault(("block", stage), []).append((block, int(step.args[1])))
    return out


def _product_fn(factors: Sequence[Any], *, log: bool) -> Callable[[Values], np.ndarray]:
    def fn(values: Values) -> np.ndarray:
        out = values(1)
        for f in factors:
            out = out * values(f)
        return _log(out) if log else out

    return fn


def _max_fn(operands: Sequence[Any]) -> Callable[[Values], np.ndarray]:
    return lambda values: _log(np.max(np.stack([values(op) for op in operands]), axis=0))


def _balance_fn(factors: Sequence[Any], cores: int) -> Callable[[Values], np.ndarray]:
    raw = _product_fn(factors, log=False)

    def fn(values: Values) -> np.ndarray:
        extent = raw(values)
        return extent / (np.ceil(extent / cores) * cores)

    return fn


def _ratio_fn(var: str, capacity: int) -> Callable[[Values], np.ndarray]:
    return lambda values: values(var) / float(capacity)


Feature = tuple[str, Callable[[Values], np.ndarray]]


def _level_features(stage: Any, nest: list[Any]) -> list[Feature]:
    """``trips``, ``volume``, ``bytes``, ``intensity`` and ``run`` of every tiling level."""
    out: list[Feature] = []
    levels = list(dict.fromkeys(lp.level for lp in nest if lp.level))
    accesses = [stage.write, *stage.reads]
    last_axis = stage.write.axes[-1] if stage.write.axes else None
    for level in levels:
        at = [i for i, lp in enumerate(nest) if lp.level == level]
        trips = [nest[i].extent for i in at]
        out.append((f"{stage.name}.{level}.trips", _product_fn(trips, log=True)))
        inner = nest[at[-1] + 1 :]
        if not inner:
            continue

        def below(axis: str | None, inner: list[Any] = inner) -> list[Any]:
            return [lp.extent for lp in inner if axis is not None and axis in lp.axis.split("+")]

        volume = [lp.extent for lp in inner]
        footprints = [(acc.itemsize, [f for ax in acc.axes for f in below(ax)]) for acc in accesses]
        out.append((f"{stage.name}.{level}.volume", _product_fn(volume, log=True)))
        out.append((f"{stage.name}.{level}.bytes", _bytes_fn(footprints, log=True)))
        out.append((f"{stage.name}.{level}.intensity", _intensity_fn(volume, footprints)))
        out.append((f"{stage.name}.{level}.run", _product_fn(below(last_axis), log=True)))
    return out


def _tile_loads(stage: Any, nest: list[Any]) -> list[Feature]:
    """``s.tile.loads`` of the register tile, the innermost spatial tiling level (its loops sit
    around the intrinsic or the vectorised body, unrolled). Per reduction step each of its
    ``V`` output vectors (its extent along the output's last axis, which the intrinsic
    vectorises) loads the weight once and each of its ``P`` other output points broadcasts
    the input once, for ``P * V`` body instances: ``(P + V) / (P * V) = 1/V + 1/P`` loads per
    instance (a 4 x 4 tile 0.5, a 4 x 1 one 1.25; the fewer, the closer to the intrinsic's
    peak, as in oneDNN's register blocking). No feature when the stage has no spatial level."""
    spatial = [lp.level for lp in nest if lp.level and lp.level.startswith("S")]
    if not spatial or not stage.write.axes:
        return []
    last = stage.write.axes[-1]
    loops = [lp for lp in nest if lp.level == spatial[-1]]
    vector = [lp.extent for lp in loops if last in lp.axis.split("+")]
    points = [lp.extent for lp in loops if last not in lp.axis.split("+")]
    v, p = _product_fn(vector, log=False), _product_fn(points, log=False)
    return [(f"{stage.name}.tile.loads", lambda values: 1.0 / v(values) + 1.0 / p(values))]


def _bytes_fn(
    footprints: Sequence[tuple[int, Sequence[Any]]], *, log: bool
) -> Callable[[Values], np.ndarray]:
    def fn(values: Values) -> np.ndarray:
        total = values(0)
        for itemsize, factors in footprints:
            total = total + itemsize * _product_fn(factors, log=False)(values)
        return _log(total) if log else total

    return fn


def _intensity_fn(
    volume: Sequence[Any], footprints: Sequence[tuple[int, Sequence[Any]]]
) -> Callable[[Values], np.ndarray]:
    vol, nbytes = _product_fn(volume, log=False), _bytes_fn(footprints, log=False)

    def fn(values: Values) -> np.ndarray:
        return _log(vol(values) / np.maximum(nbytes(values), 1.0))

    return fn


def alias_groups(names: Sequence[str], x: np.ndarray) -> list[list[str]]:
    """The features of ``x`` grouped by the quantity they measure: one group per quantity.

    Two columns are one quantity when each is a strictly monotone function of the other on the
    rows of ``x`` (their dense ranks agree, in the same or the reverse order): ``C.v_i.S2``,
    ``C.v_i@S1`` and ``C.v_i@R0`` (equal by a one-factor PROD), ``C.register.bytes`` and
    ``4 * C.C@R0.elems + 320`` (an affine SUM), ``C.L1.bytes.fill`` and ``C.L1.bytes`` (a ratio
    to a constant capacity), ``C.v_i.S0`` and ``C.v_i@S0`` (``S0 = 256 / @S0``). A tree splits
    them identically, so XGBoost's importance of one quantity is spread over its aliases
    (Heron ASPLOS'23 §5 ranks key variables by that importance; :class:`heronlike.explore.cga.
    CGAExplorer` sums it per group). Columns constant on ``x`` are left out (no tree splits on
    them).

    Args:
        names: one name per column of ``x``.
        x: ``(n, len(names))`` feature matrix of ``n`` probe assignments (e.g. a few hundred
            random valid ones: two distinct quantities then coincide only by a vanishing chance).

    Returns:
        Groups of names, each in column order, ordered by their first column.

    Raises:
        ValueError: if ``x`` is not ``(n, len(names))``.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(names):
        raise ValueError(f"x must be (n, {len(names)}), got shape {x.shape}")
    groups: dict[bytes, list[str]] = {}
    for i, name in enumerate(names):
        _, rank = np.unique(x[:, i], return_inverse=True)
        top = int(rank.max()) if rank.size else 0
        if top == 0:
            continue  # constant
        rank = rank.astype(np.int64)
        # the same quantity increasing or reversed: {rank, top - rank} is the same pair
        key = min(rank.tobytes(), (top - rank).tobytes())
        groups.setdefault(key, []).append(name)
    return list(groups.values())
