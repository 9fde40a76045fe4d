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
``s.tile.widens``              ``1/P`` (+ ``1/V``): operand widenings per instance of the register
                               tile, for an intrinsic that widens B (and A) in every call
``s.write_back.outside``       ``log2(write-back tile / innermost one)``: elements of the output
                               tile the write-back copies at its chosen place over those of
                               the innermost place it could take; 0 there, ``k`` when the
                               accumulators go through a buffer ``2**k`` times larger that is
                               copied to the output after it
``s.padding.skipped``          ``log2(all / executed)`` body instances, where the padding guards
                               (:mod:`heronlike.postproc`) skip those whose reads lie in a
                               zero padding (:func:`_padding_skipped`); 0 when none are skipped
``parallel.extent``            product of the extents of every parallel loop
``parallel.balance``           ``extent / (ceil(extent / cores) * cores)``: 1.0 when it divides
``parallel.speedup``           ``ln(busy) - ln(1 + launches * launch_ops * busy / ops)``: the
                               natural log of the speedup over one core that a program whose
                               time is ``ops / busy`` plus one launch per parallel region
                               would get (``busy = extent / ceil(extent / cores)`` cores,
                               ``launches`` the stages whose parallel loops run more than one
                               iteration, ``ops`` 2 per body instance of every stage,
                               ``launch_ops`` the target's
                               :attr:`~heronlike.target.DLATarget.parallel_launch_ops`); 0 for
                               a program on one core
``<var>.fill``                 ``var / capacity`` for every ``LE var <= capacity`` of the CSP
=============================  =================================================================

A derived name that is also a CSP variable's (``s.unroll`` beside an unroll-depth knob named
``s.unroll``) gets the suffix ``.derived``.

Counts and extents enter as ``log2(x + 1)``; ratios (``balance``, ``fill``) as they are;
``speedup`` in natural log, so that a prior may weigh it 1 (:mod:`heronlike.prior`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from heronlike.cost_model import assignment_features, feature_names
from heronlike.csp import CSP, Le, Select

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
        regions: list[list[Any]] = []
        ops = 0
        for stage_name, nest in space.nests.items():
            stage = space.dag.stage(stage_name)
            ops += 2 * math.prod(int(a.extent) for a in stage.axes)
            derived += _level_features(stage, list(nest))
            derived += _tile_features(stage, list(nest), space.matches.get(stage_name))
            derived += _padding_skipped(space, stage, list(nest), annotated)
            derived += _write_back_outside(space.csp, stage_name)
            vector = [lp.extent for lp in nest if annotated.get(lp.sym) == "vectorize"]
            vector += [lanes for _, lanes in annotated.get(("block", stage_name), [])]
            if vector:
                derived.append((f"{stage_name}.vector", _max_fn(vector)))
            unrolled = [lp.extent for lp in nest if annotated.get(lp.sym) == "unroll"]
            if unrolled:
                derived.append((f"{stage_name}.unroll", _product_fn(unrolled, log=True)))
            region = [lp.extent for lp in nest if annotated.get(lp.sym) == "parallel"]
            parallel += region
            if region:
                regions.append(region)
        if parallel:
            cores = max(1, int(space.target.cores))
            derived.append(("parallel.extent", _product_fn(parallel, log=True)))
            derived.append(("parallel.balance", _balance_fn(parallel, cores)))
            launch = float(space.target.parallel_launch_ops) / max(ops, 1)
            derived.append(("parallel.speedup", _speedup_fn(parallel, regions, cores, launch)))
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


def _speedup_fn(
    factors: Sequence[Any], regions: Sequence[Sequence[Any]], cores: int, launch: float
) -> Callable[[Values], np.ndarray]:
    """``parallel.speedup`` (module docstring); ``launch`` is the launch's operations over the
    program's."""
    balance = _balance_fn(factors, cores)
    sizes = [_product_fn(region, log=False) for region in regions]

    def fn(values: Values) -> np.ndarray:
        busy = balance(values) * cores  # extent / ceil(extent / cores): the cores kept busy
        launches = sum((size(values) > 1).astype(np.float64) for size in sizes)
        return np.log(busy) - np.log1p(launches * launch * busy)

    return fn


def _ratio_fn(var: str, capacity: int) -> Callable[[Values], np.ndarray]:
    return lambda values: values(var) / float(capacity)


def _write_back_outside(csp: CSP, stage: str) -> list[Feature]:
    """``s.write_back.outside`` for a stage whose write-back block a knob attaches (the C4
    AddStageFuse SELECT of ``<stage>.write_back.elems`` among the candidate places' tile
    sizes, :meth:`heronlike.rules.base.RuleContext.attach`): ``log2`` of the chosen tile's
    elements over the smallest candidate's. Attached outside the innermost place, every
    accumulator is stored to a buffer of the chosen tile and copied to the output after it,
    an extra pass over the output that the further out, the larger (and the farther from the
    core) the buffer. On a Zen 4's records of random programs the prior's fit weighs it
    -0.0154 per unit (docs/results.md, "The Zen 4 prior in a replay")."""
    size = f"{stage}.write_back.elems"
    select = next((c for c in csp.constraints if isinstance(c, Select) and c.target == size), None)
    if select is None or len(select.options) < 2:
        return []
    options = select.options

    def fn(values: Values) -> np.ndarray:
        smallest = np.min(np.stack([values(op) for op in options]), axis=0)
        return np.log2(np.maximum(values(size), 1.0) / np.maximum(smallest, 1.0))

    return [(f"{stage}.write_back.outside", fn)]


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


def _tile_features(stage: Any, nest: list[Any], match: Any = None) -> list[Feature]:
    """``s.tile.loads`` (and ``s.tile.widens``) of the register tile, the innermost spatial
    tiling level (its loops sit around the intrinsic or the vectorised body, unrolled). Per
    reduction step each of its ``V`` output vectors (its extent along the output's last axis,
    which the intrinsic vectorises) loads the weight once and each of its ``P`` other output
    points broadcasts the input once, for ``P * V`` body instances:
    ``(P + V) / (P * V) = 1/V + 1/P`` loads per instance (a 4 x 4 tile 0.5, a 4 x 1 one 1.25;
    the fewer, the closer to the intrinsic's peak, as in oneDNN's register blocking). No
    feature when the stage has no spatial level.

    For a stage tensorized onto an intrinsic that widens operands in every call
    (:attr:`heronlike.intrinsic.Intrinsic.widened_in_call`: AVX2's ``vpmaddwd`` widens B, and
    A unless it reads a pre-widened copy), also ``s.tile.widens``: the widening instructions
    per instance, ``1/P`` for B (one per loaded vector) plus ``1/V`` for A (one per
    broadcast). The loads alone do not tell a ``2 × 4`` tile from a ``4 × 2`` one, but on a
    Zen 1 the ``4 × 2`` one widens half as many vectors and ran 1.08× faster (docs/results.md,
    "The prior of vpmaddwd spaces")."""
    spatial = [lp.level for lp in nest if lp.level and lp.level.startswith("S")]
    if not spatial or not stage.write.axes:
        return []
    last = stage.write.axes[-1]
    loops = [lp for lp in nest if lp.level == spatial[-1]]
    vector = [lp.extent for lp in loops if last in lp.axis.split("+")]
    points = [lp.extent for lp in loops if last not in lp.axis.split("+")]
    v, p = _product_fn(vector, log=False), _product_fn(points, log=False)
    out: list[Feature] = [
        (f"{stage.name}.tile.loads", lambda values: 1.0 / v(values) + 1.0 / p(values))
    ]
    widened = set(match.intrinsic.widened_in_call) if match is not None else set()
    if widened:
        per_b = 1.0 if "b" in widened else 0.0
        per_a = 1.0 if "a" in widened else 0.0
        out.append(
            (
                f"{stage.name}.tile.widens",
                lambda values: per_b / p(values) + per_a / v(values),
            )
        )
    return out


#: grid points (products of the axis extents of one padded dimension's conditions) above which
#: :func:`_padding_skipped` leaves a dimension out (counted as skipping nothing), as it leaves
#: out one whose axes a relaxed loop fuses with others
MAX_PADDING_GRID = 1 << 16


def _padding_skipped(space: Space, stage: Any, nest: list[Any], annotated: dict) -> list[Feature]:
    """``s.padding.skipped``: ``log2`` of the stage's body instances over those the padding
    guards of :mod:`heronlike.postproc` let run, for a stage the rules annotated to skip the
    zero reads of a padding stage (:data:`~heronlike.postproc.SKIP_ZERO_READS`; its guard place
    fixed or a knob). A 3 × 3 × 3 convolution over a depth of 2 padded by 1 skips a third of
    its taps when its depth and depth-tap loops lie outside the unrolled register tile: 0.58;
    with the depth inside the tile, none of them (the guard must hold for some row of it).

    Each conjunct ``lo <= e`` / ``e < hi`` of the padding condition (``e``: the stage's read
    index, affine in its axes) is tested, as the postprocessing does, for every value of the
    loops it can sit inside and *some* value of the loops it cannot: vector lanes and the
    intrinsic's own loops, and with ``outer`` guards the unrolled loops (a conjunct that would
    sit under an unrolled loop is left out there). Each axis's relaxed loops are its
    innermost, so an axis value ``x`` is tested at ``x - x % E`` (``E``: their product) with
    ``e`` widened by the relaxed range. Conjuncts over common axes are counted on their
    joint grid, the others multiply. With ``all`` guards (row versions) nothing is relaxed
    but lanes and the intrinsic. Latency of a compute-bound stage scales with what runs, so a
    prior weighs this ``ln 2`` per unit (:mod:`heronlike.prior`). No feature when nothing is
    annotated or no conjunct is a comparison of one padded index with a constant."""
    from heronlike.postproc import GUARD_PLACES, SKIP_ZERO_READS, conjuncts, zero_padding
    from heronlike.template import Choice

    places: Any = None
    for step in space.template.steps:
        if step.op != "annotate" or len(step.args) != 3 or step.args[1] != SKIP_ZERO_READS:
            continue
        block = getattr(step.args[0], "name", "")
        if block.removeprefix("b_").split(".", 1)[0] == stage.name:
            places = step.args[2]
    if places is None:
        return []
    if isinstance(places, Choice):
        knob, options = places.index, [str(o) for o in places.options]
    else:
        knob, options = None, [str(places)]
    parsed = [(o.split(":", 1)[0], o.split(":", 1)[1].split(",")) for o in options]
    buffers = {b for _, bs in parsed for b in bs}
    bounds: list[tuple[dict[str, int], int, int | None, int | None]] = []
    for buf in sorted(buffers):
        found = zero_padding(space.dag.func, buf)
        reads = [r for r in stage.reads if r.buffer == buf]
        if found is None or len(reads) != 1 or len(reads[0].index) != len(found[0]):
            continue
        pad_vars, condition = found
        for part in conjuncts(condition):
            bound = _var_bound(part, pad_vars)
            idx = None if bound is None else reads[0].index[bound[0]]
            if idx is not None:
                bounds.append((dict(idx.terms), idx.const, bound[1], bound[2]))
    if not bounds:
        return []
    extents = {a.name: int(a.extent) for a in stage.axes}
    first_unrolled = next(
        (i for i, lp in enumerate(nest) if annotated.get(lp.sym) == "unroll"), len(nest)
    )

    def relaxed(i: int, lp: Any, place: str) -> bool:
        return (
            lp.level == "T"
            or annotated.get(lp.sym) == "vectorize"
            or (place == "outer" and i >= first_unrolled)
        )

    place_names = [p for p, _ in parsed]
    if any(p not in GUARD_PLACES for p in place_names):
        return []

    def countable(group: list[Any]) -> bool:  # no fused loop among the relaxed ones
        axes = {a for c in group for a in c[0]}
        return math.prod(extents[a] for a in axes) <= MAX_PADDING_GRID and not any(
            "+" in lp.axis and axes & set(lp.axis.split("+")) and relaxed(i, lp, p)
            for i, lp in enumerate(nest)
            for p in place_names
        )

    groups = [g for g in _joint_groups(bounds) if countable(g)]
    if not groups:
        return []

    def fn(values: Values) -> np.ndarray:
        n = len(values(0))
        place_at = values(knob).astype(int) if knob is not None else np.zeros(n, dtype=int)
        skipped = np.zeros(n)
        for group in groups:
            axes = sorted({a for c in group for a in c[0]})
            columns = []
            for a in axes:  # per axis: product of its relaxed loops, per place
                for p in place_names:
                    e = values(1)
                    late = values(0)  # a loop it cannot sit in nor relax: no guard
                    for i, lp in enumerate(nest):
                        if a not in lp.axis.split("+"):
                            continue
                        if relaxed(i, lp, p):
                            e = e * values(lp.extent)
                        elif p == "outer" and i >= first_unrolled:
                            late = np.maximum(late, values(lp.extent) > 1)
                    columns += [e, late]
            keys = np.stack(columns, axis=1)
            uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
            shares = np.array(
                [_group_share(group, axes, extents, row, len(place_names)) for row in uniq]
            )
            share = shares[inverse.reshape(-1), place_at]
            skipped += -np.log2(np.maximum(share, 1e-9))
        return skipped

    return [(f"{stage.name}.padding.skipped", fn)]


def _var_bound(expr: Any, pad_vars: Sequence[Any]) -> tuple[int, int | None, int | None] | None:
    """``(dimension, lo, hi)`` of a conjunct ``lo <= v_d`` or ``v_d <= hi`` (either side, ``<``
    and ``>`` too) over the padding stage's index variable ``v_d``; None for anything else."""
    from tvm import tirx

    if isinstance(expr, tirx.GT | tirx.GE):  # a > b is b < a
        expr = (tirx.LT if isinstance(expr, tirx.GT) else tirx.LE)(expr.b, expr.a)
    if not isinstance(expr, tirx.LT | tirx.LE):
        return None
    shift = -1 if isinstance(expr, tirx.LT) else 0  # a < b is a <= b - 1
    names = [v.name for v in pad_vars]

    def const(x: Any) -> int | None:
        return int(x.value) if isinstance(x, tirx.IntImm) else None

    a, b = expr.a, expr.b
    if isinstance(a, tirx.Var) and a.name in names and const(b) is not None:
        return names.index(a.name), None, const(b) + shift
    if isinstance(b, tirx.Var) and b.name in names and const(a) is not None:
        return names.index(b.name), const(a) - shift, None
    return None


def _joint_groups(bounds: list[Any]) -> list[list[Any]]:
    """The bounds (conjuncts) grouped so that no two groups share an axis."""
    groups: list[list[Any]] = []
    for c in bounds:
        joined = [g for g in groups if any(set(c[0]) & set(o[0]) for o in g)]
        merged = [c] + [o for g in joined for o in g]
        groups = [g for g in groups if g not in joined] + [merged]
    return groups


def _group_share(
    group: list[Any], axes: list[str], extents: dict[str, int], row: np.ndarray, places: int
) -> list[float]:
    """Per guard place, the share of the ``axes`` grid whose guards hold for some value of the
    relaxed loops; ``row`` holds per axis and place the relaxed extent and whether a loop
    leaves the guards out."""
    grids = np.meshgrid(*[np.arange(extents[a]) for a in axes], indexing="ij")
    out = []
    for p in range(places):
        inner = {a: int(row[2 * (k * places + p)]) for k, a in enumerate(axes)}
        late = {a: bool(row[2 * (k * places + p) + 1]) for k, a in enumerate(axes)}
        runs = np.ones(grids[0].shape, dtype=bool)
        for terms, const, lo, hi in group:
            if any(late[a] for a in terms):
                continue  # the guard would sit under an unrolled loop: left out
            exact = np.full(grids[0].shape, const)
            low = high = 0
            for a, coeff in terms.items():
                x = grids[axes.index(a)]
                exact = exact + coeff * (x - x % inner[a])
                span = coeff * (inner[a] - 1)
                low, high = low + min(span, 0), high + max(span, 0)
            if lo is not None:
                runs &= exact + high >= lo
            if hi is not None:
                runs &= exact + low <= hi
        out.append(float(runs.mean()))
    return out


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
