"""Postprocessing (heronlike.postproc): the zero-padding reads a tensorized convolution skips,
and per-thread set-up hoisted out of the blocks that run many times.

The guarded program must equal the unguarded one bit for bit and numpy's result; the guards
must sit above the loops they do not depend on; and nothing may be guarded when skipping would
be wrong (a non-zero pad value, a reduction that still holds its initialisation)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, te, tirx
from tvm.sym.analyzer import Analyzer
from tvm.tirx.analysis import undefined_vars

from heronlike import ops
from heronlike.errors import UnknownTargetError
from heronlike.postproc import (
    GUARD_PLACES,
    SKIP_ZERO_READS,
    THREAD_SETUP,
    ZEROS_SUFFIX,
    _children,
    _path,
    _realizes,
    hoist_thread_setup,
    postprocess,
    skip_annotations,
    skip_zero_reads,
    with_guard_place,
    zero_share,
)
from heronlike.sampler import RandSAT
from heronlike.space import Space, generate_space
from heronlike.target import get_target

sys.path.insert(0, str(Path(__file__).parent))  # the shared reference helpers
from scan_reference import scan_ref  # noqa: E402
from t2d_reference import SUBPIXEL_SHAPES, rand_input, t2d_ref  # noqa: E402


def _conv1d(pad_value: int = 0, pad: int = 1, index: str = "int32") -> tirx.PrimFunc:
    """``Y[o, c] = sum_{r, k} Xp[o + r, k] * W[r, k, c]``, ``Xp`` = ``X`` (10 rows) padded by
    ``pad`` with ``pad_value`` (int32, exact), ``2 * pad + 1`` taps: 10 output rows. Shapes,
    loops and indices of type ``index`` (Relax's models index with int64)."""

    def ext(*extents: int) -> tuple[tirx.IntImm, ...]:
        return tuple(tirx.IntImm(index, e) for e in extents)

    X = te.placeholder(ext(10, 4), "int32", name="X")
    W = te.placeholder(ext(2 * pad + 1, 4, 8), "int32", name="W")
    Xp = te.compute(
        ext(10 + 2 * pad, 4),
        lambda i, k: tirx.if_then_else(
            tirx.all(i >= pad, i < 10 + pad), X[i - pad, k], tirx.const(pad_value, "int32")
        ),
        name="Xp",
    )
    r = te.reduce_axis(ext(0, 2 * pad + 1), "r")
    k = te.reduce_axis(ext(0, 4), "k")
    Y = te.compute(
        ext(10, 8), lambda o, c: te.sum(Xp[o + r, k] * W[r, k, c], axis=[r, k]), name="Y"
    )
    return te.create_prim_func([X, W, Y])


def _scheduled(
    func: tirx.PrimFunc,
    *,
    decompose: bool = True,
    value: str = "all:Xp",
    unroll: bool = False,
    inline: bool = False,
) -> tvm.IRModule:
    """Loops ``o, r, k, c`` (``c`` innermost; ``r`` unrolled if ``unroll``); the update
    annotated with ``value`` (none if empty); ``Xp`` inlined into it if ``inline``."""
    sch = s_tir.Schedule(func)
    if inline:
        sch.compute_inline(sch.get_sblock("Xp"))
    block = sch.get_sblock("Y")
    o, c, r, k = sch.get_loops(block)
    sch.reorder(o, r, k, c)
    if decompose:
        sch.decompose_reduction(block, r)
    if unroll:
        sch.unroll(r)
    if value:
        sch.annotate(block, SKIP_ZERO_READS, value)
    return sch.mod


def _conv1d_case(seed: int, pad: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random ``X``, ``W`` of :func:`_conv1d` and numpy's ``Y``."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-100, 100, (10, 4)).astype("int32")
    w = rng.integers(-100, 100, (2 * pad + 1, 4, 8)).astype("int32")
    xp = np.pad(x, ((pad, pad), (0, 0)))
    return x, w, sum(xp[r : r + 10] @ w[r] for r in range(2 * pad + 1))


def _run(mod: tvm.IRModule, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    ex = tvm.compile(mod, target="llvm")
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros((10, 8), "int32"), dev)
    ex["main"](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(w, dev), out)
    return out.numpy()


def _guards(stmt: object) -> list[tirx.IfThenElse]:
    out: list[tirx.IfThenElse] = []
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, tirx.IfThenElse):
            out.append(s)
        if isinstance(s, s_tir.SBlockRealize):
            stack.append(s.block.body)
        elif isinstance(s, tirx.For):
            stack.append(s.body)
        elif isinstance(s, tirx.SeqStmt):
            stack.extend(s.seq)
        elif isinstance(s, tirx.IfThenElse):
            stack.append(s.then_case)
    return out


@pytest.mark.parametrize("inline", [False, True], ids=["padding block", "padding inlined"])
@pytest.mark.parametrize("place", GUARD_PLACES)
def test_padding_reads_are_guarded_above_the_loops_they_do_not_depend_on(
    place: str, inline: bool
) -> None:
    mod = _scheduled(_conv1d(), value=f"{place}:Xp", inline=inline)
    guarded = postprocess(mod)
    guards = _guards(guarded["main"].body)
    # one guard per conjunct's loop: both conjuncts (1 <= o + r, o + r < 11) sit inside r,
    # above k and c, so a whole tap row of the update is skipped at once
    assert len(guards) == 1
    assert isinstance(guards[0].then_case, tirx.For)
    assert guards[0].then_case.loop_var.name == "k"
    x, w, expected = _conv1d_case(0)
    np.testing.assert_array_equal(_run(mod, x, w), expected)
    np.testing.assert_array_equal(_run(guarded, x, w), expected)


def test_outer_guards_stay_out_of_unrolled_loops() -> None:
    """``r`` unrolled: ``outer`` guards nothing (the only place is inside the unrolled
    loop)."""
    mod = _scheduled(_conv1d(), value="outer:Xp", unroll=True)
    assert postprocess(mod).same_as(mod)


def _tiled_rows(index: str, value: str) -> tvm.IRModule:
    """:func:`_conv1d` with pad 3 (7 taps), its rows tiled 2 at a time (``o = 2 * o0 + o1``,
    ``o1`` unrolled) under the tap loop ``r``, annotated with ``value``."""
    sch = s_tir.Schedule(_conv1d(pad=3, index=index))
    block = sch.get_sblock("Y")
    o, c, r, k = sch.get_loops(block)
    o0, o1 = sch.split(o, [5, 2])
    sch.reorder(o0, r, k, o1, c)
    sch.decompose_reduction(block, r)
    sch.unroll(o1)
    sch.annotate(block, SKIP_ZERO_READS, value)
    return sch.mod


@pytest.mark.parametrize("index", ["int32", "int64"])
def test_outer_guards_skip_the_taps_of_a_tile_that_reads_only_padding(index: str) -> None:
    """Pad 3, 7 taps, the rows tiled 2 at a time (``o = 2 * o0 + o1``, ``o1`` unrolled):
    ``outer`` guards cannot test a row of the tile, so the guard, above ``k`` inside the tap
    loop ``r``, holds where *some* row of the tile reads ``X`` (``3 <= o + r < 13`` for ``o``
    in ``[2 * o0, 2 * o0 + 1]``); tiles whose two rows both read padding at a tap skip it.
    Both programs equal numpy, with int32 and with int64 loops."""
    mod = _tiled_rows(index, "outer:Xp")
    guarded = postprocess(mod)
    (guard,) = _guards(guarded["main"].body)
    assert guard.then_case.loop_var.name == "k"
    holds = {
        (a, b): bool(Analyzer().simplify(_at_values(guard.condition, {"o_0": a, "r": b})))
        for a in range(5)
        for b in range(7)
    }
    assert holds == {(a, b): 2 * a + 1 + b >= 3 and 2 * a + b < 13 for a, b in holds}
    assert not all(holds.values())
    x, w, expected = _conv1d_case(3, pad=3)
    np.testing.assert_array_equal(_run(mod, x, w), expected)
    np.testing.assert_array_equal(_run(guarded, x, w), expected)


def _at_values(cond: object, values: dict[str, int]) -> object:
    """``cond`` with each of its variables (by name) set to its value in ``values``."""
    variables = list(undefined_vars(cond))
    consts = [tirx.const(values[v.name], v.ty) for v in variables]
    return tirx.IndexMap(variables, [cond], None).map_indices(consts)[0]


def _preorder(stmt: object) -> list[object]:
    """``stmt`` and every statement under it, depth first (postproc's own ``_children``)."""
    out, stack = [], [stmt]
    while stack:
        s = stack.pop()
        out.append(s)
        stack.extend(reversed(_children(s)))
    return out


def _versions(stmt: object) -> list[tuple[object, object]]:
    """The ``(condition, statement)`` pairs of the first chain of ``if ... else if ... else``
    in ``stmt`` (depth first), the last condition None."""
    s = next(
        (s for s in _preorder(stmt) if isinstance(s, tirx.IfThenElse) and s.else_case),
        None,
    )
    out = []
    while isinstance(s, tirx.IfThenElse) and s.else_case is not None:
        out.append((s.condition, s.then_case))
        s = s.else_case
    return [*out, (None, s)] if out else []


def _holds(cond: object) -> bool:
    return bool(Analyzer().simplify(cond))


def _loop(stmt: object, name: str) -> tirx.For:
    """The first loop named ``name`` in ``stmt`` (depth first)."""
    loops = (s for s in _preorder(stmt) if isinstance(s, tirx.For) and s.loop_var.name == name)
    loop = next(loops, None)
    assert loop is not None, f"no loop {name}"
    return loop


@pytest.mark.parametrize("index", ["int32", "int64"])
def test_all_guards_run_in_branch_free_versions_per_row_set(index: str) -> None:
    """``r`` unrolled under ``o``: with ``all`` guards the body of ``o`` is split by the taps
    that read only padding, one version each: an interior one where none does (``1 <= o <=
    8``: ``o + r`` in [1, 10] for every ``r`` in [0, 2]), one for ``o = 0`` without tap 0 and
    one for ``o = 9`` without tap 2. Each version's guards depend on the unrolled ``r`` alone,
    so that they are constants once it is unrolled; the versions' blocks are renamed and
    their loops are their own, and all compute the same as numpy (int32 or int64 loops)."""
    mod = _scheduled(_conv1d(index=index), value="all:Xp", unroll=True)
    guarded = postprocess(mod)
    versions = _versions(guarded["main"].body)
    assert len(versions) == 3
    chosen = [
        next(n for n, (c, _) in enumerate(versions) if c is None or _holds(_at(c, o)))
        for o in range(10)
    ]
    assert chosen == [1, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    taps = []
    for _, version in versions:
        guards = _guards(version)
        assert all({v.name for v in undefined_vars(g.condition)} == {"r"} for g in guards)
        taps.append([r for r in range(3) if all(_holds(_at(g.condition, r)) for g in guards)])
    assert taps == [[0, 1, 2], [1, 2], [0, 1]]
    loops = [_loop(v, "r").loop_var for _, v in versions]
    assert not loops[0].same_as(loops[1]) and not loops[1].same_as(loops[2])
    names = [r.block.name_hint for r in _realizes(guarded["main"].body)]
    for name in ("Y_update", "Y_update_boundary", "Y_update_boundary2"):
        assert names.count(name) == 1
    x, w, expected = _conv1d_case(2)
    np.testing.assert_array_equal(_run(guarded, x, w), expected)


@pytest.mark.parametrize("index", ["int32", "int64"])
def test_row_versions_are_split_above_the_tap_loop_and_unroll_it(index: str) -> None:
    """Pad 3, 7 taps, rows tiled 2 at a time (``o = 2 * o0 + o1``, ``o1`` unrolled) under the
    serial tap loop ``r``: the versions are split above ``r`` (under ``o0``, once per tile,
    so that no branch sits between the reduction loops around the tile), one per set of
    (tap, row) pairs read: the interior tile ``o0 = 2`` and the four others. A version that
    keeps a guard unrolls ``r``, its guards in ``r`` and ``o1`` alone (constants once
    unrolled); the interior one keeps ``r`` a loop, unguarded. All equal numpy."""
    guarded = postprocess(_tiled_rows(index, "all:Xp"))
    versions = _versions(guarded["main"].body)
    assert len(versions) == 5
    chosen = [
        next(n for n, (c, _) in enumerate(versions) if c is None or _holds(_at(c, t)))
        for t in range(5)
    ]
    assert chosen[2] == 0 and sorted(chosen) == [0, 1, 2, 3, 4]
    for n, (_, version) in enumerate(versions):
        tap = _loop(version, "r")
        guards = _guards(version)
        if n == 0:
            assert tap.kind == tirx.ForKind.SERIAL and not guards
            continue
        assert tap.kind == tirx.ForKind.UNROLLED and guards
        assert all({v.name for v in undefined_vars(g.condition)} <= {"r", "o_1"} for g in guards)
    x, w, expected = _conv1d_case(4, pad=3)
    np.testing.assert_array_equal(_run(guarded, x, w), expected)


@pytest.mark.parametrize("index", ["int32", "int64"])
def test_all_guards_fall_back_to_outer_guards_beyond_a_few_versions(
    index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the taps read the padding in more ways than
    :data:`~heronlike.postproc.MAX_ROW_VERSIONS`, ``all`` guards are ``outer`` ones (a branch
    per unrolled tap costs more than it skips), and still equal numpy."""
    from heronlike import postproc

    monkeypatch.setattr(postproc, "MAX_ROW_VERSIONS", 2)
    mod = _scheduled(_conv1d(index=index), value="all:Xp", unroll=True)
    guarded = postprocess(mod)
    outer = postprocess(with_guard_place(mod, "outer"))
    assert tvm_ffi.structural_equal(with_guard_place(guarded, "outer"), outer)
    x, w, expected = _conv1d_case(2)
    np.testing.assert_array_equal(_run(guarded, x, w), expected)


def test_guards_evaluate_in_numpy_as_tvm_folds_them() -> None:
    """``_evaluate`` (the guards' outcomes over a grid of loop values) agrees with TVM's own
    folding of the same expression at each point, negative floor division and modulo
    included; an expression it cannot evaluate gives None."""
    from heronlike.postproc import _evaluate

    a, b = tirx.Var("a", "int32"), tirx.Var("b", "int32")
    exprs = [
        tirx.And(tirx.LE(1, tirx.floordiv(a * 3 - b, 4)), tirx.LT(tirx.floormod(a - 5, 3), b)),
        tirx.Or(tirx.GE(tirx.max(a, b) - 2, 0), tirx.Not(tirx.EQ(tirx.min(a, b), -1))),
        tirx.GT(tirx.floormod(b * 2 - 7, 5) + a, 3),
    ]
    grid = np.meshgrid(np.arange(-6, 7), np.arange(-4, 5), indexing="ij")
    for expr in exprs:
        held = _evaluate(expr, {"a": grid[0], "b": grid[1]})
        for (i, j), value in np.ndenumerate(held):
            at = _at_values(expr, {"a": int(grid[0][i, j]), "b": int(grid[1][i, j])})
            assert bool(Analyzer().simplify(at)) == bool(value), (expr, i, j)
    assert _evaluate(tirx.LT(tirx.Cast("float32", a), 2.5), {"a": grid[0]}) is None


def test_a_copy_that_breaks_definitions_falls_back_to_outer_guards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were a version's copy to keep the interior's definitions (each loop and block defined
    twice), the program is not well-formed: the guards are then ``outer`` ones."""
    from heronlike import postproc

    mod = _scheduled(_conv1d(), value="all:Xp", unroll=True)
    monkeypatch.setattr(postproc, "_fresh_copy", lambda stmt, *_: stmt)
    outer = postprocess(with_guard_place(mod, "outer"))
    assert tvm_ffi.structural_equal(with_guard_place(postprocess(mod), "outer"), outer)
    assert "Y_update_boundary" not in postprocess(mod).script()


def _at(cond: object, value: int) -> object:
    """``cond`` with its one variable set to ``value``."""
    (var,) = undefined_vars(cond)
    return _at_values(cond, {var.name: value})


@pytest.mark.parametrize("start", GUARD_PLACES)
def test_guard_place_is_replaced_not_kept(start: str) -> None:
    """Re-placing the guards of an annotated schedule takes effect (TVM's ``annotate`` alone
    keeps a key's old value): ``r`` unrolled, ``all`` guards each tap and ``outer`` none,
    whichever place the schedule was annotated with first."""
    mod = _scheduled(_conv1d(), value=f"{start}:Xp", unroll=True)
    moved = {p: with_guard_place(mod, p) for p in GUARD_PLACES}
    for place, m in moved.items():
        assert skip_annotations(m["main"]) == [("Y_update", place, ["Xp"])]
    assert len(_guards(postprocess(moved["all"])["main"].body)) == 1
    assert not _guards(postprocess(moved["outer"])["main"].body)
    with pytest.raises(ValueError, match="unknown guard place"):
        with_guard_place(mod, "inner")


@pytest.mark.parametrize(
    "case", ["no annotation", "pad value 1", "pad value 1 inlined", "initialisation inside"]
)
def test_nothing_is_guarded_where_skipping_would_be_wrong(case: str) -> None:
    mod = {
        "no annotation": lambda: _scheduled(_conv1d(), value=""),
        "pad value 1": lambda: _scheduled(_conv1d(pad_value=1)),
        "pad value 1 inlined": lambda: _scheduled(_conv1d(pad_value=1), inline=True),
        "initialisation inside": lambda: _scheduled(_conv1d(), decompose=False),
    }[case]()
    assert postprocess(mod).same_as(mod)
    assert skip_zero_reads(mod["main"]).same_as(mod["main"])


def _conv3d_reference(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """``x`` (N, D, H, W, CI) and ``w`` (CO, KD, KH, KW, CI) -> (N, D', H', W', CO), int64
    (float64 for floating-point inputs)."""
    acc = np.float64 if np.issubdtype(x.dtype, np.floating) else np.int64
    xp = np.pad(x.astype(acc), ((0, 0), (pad, pad), (pad, pad), (pad, pad), (0, 0)))
    co, kd, kh, kw, _ = w.shape
    n, d, h, wd, _ = xp.shape
    out = np.zeros((n, d - kd + 1, h - kh + 1, wd - kw + 1, co), acc)
    for a in range(kd):
        for b in range(kh):
            for c in range(kw):
                win = xp[:, a : a + out.shape[1], b : b + out.shape[2], c : c + out.shape[3]]
                out += win @ w[:, a, b, c].astype(acc).T
    return out


def test_tensorized_convolution_skips_its_padding_taps_exactly() -> None:
    """Sampled programs of a padded 3-D convolution on this CPU's int8 intrinsic (VNNI, else
    vpmaddwd), with each value of the skip_padding knob, equal numpy (and so the unguarded
    program); with ``all`` every one is guarded."""
    target = get_target("llvm")
    if not target.intrinsics:
        pytest.skip("this CPU has no int8 dot-product intrinsic (AVX2 or later)")
    compute = ops.c3d(N=1, D=2, H=5, W=6, CI=8, CO=32, KD=3, KH=3, KW=3, pad=1, dtype="int8")
    space = generate_space(compute, "llvm")
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (1, 2, 5, 6, 8)).astype("uint8")
    w = rng.integers(-128, 128, (32, 3, 3, 3, 8)).astype("int8")
    expected = _conv3d_reference(x, w, 1)
    args = space.prepare_args([x, w, np.zeros(expected.shape, "int32")])
    for sample in RandSAT(space.csp, seed=3).sample(3):
        for out in _knob_outputs(space, sample, args):
            np.testing.assert_array_equal(out.astype(np.int64), expected)


def _knob_outputs(space: Space, sample: dict[str, int], args: list[np.ndarray]) -> list[np.ndarray]:
    """The output of ``sample``'s unguarded program, then of its program at each value of the
    ``Y.skip_padding`` knob (a knob of ``space``); the ``all`` program must hold a guard."""
    knob = "Y.skip_padding"
    assert space.csp.vars[knob].knob and space.csp.vars[knob].hi == len(GUARD_PLACES) - 1
    programs = [space.program({**sample, knob: v}) for v in range(len(GUARD_PLACES))]
    assert _guards(programs[GUARD_PLACES.index("all")]["main"].body), "nothing guarded"
    target = tvm.target.Target(space.target.tvm_target())
    outputs = []
    for mod in (space.apply(sample).mod, *programs):
        arrays = [tvm.runtime.tensor(arr, tvm.cpu()) for arr in args]
        tvm.compile(mod, target=target)["main"](*arrays)
        outputs.append(arrays[-1].numpy())
    return outputs


def test_little_padding_gets_outer_guards_and_no_knob() -> None:
    """A 2-D convolution whose padded input is 11 % padding: no knob, ``outer`` guards; one of
    36 %: a finish knob (settled by variant trials, held at ``outer`` while searching)."""
    space = generate_space(ops.c2d(1, 32, 32, 8, 16, 3, 3, pad=1, dtype="int8"), "llvm")
    assert zero_share(space.dag.func, "Xp") == pytest.approx(1 - 32**2 / 34**2)
    assert not [v for v in space.csp.vars if v.endswith(".skip_padding")]
    (a,) = RandSAT(space.csp, seed=0).sample(1)
    assert f'"{SKIP_ZERO_READS}": "outer:Xp"' in space.apply(a).mod.script()
    space = generate_space(ops.c2d(1, 8, 8, 8, 16, 3, 3, pad=1, dtype="int8"), "llvm")
    assert zero_share(space.dag.func, "Xp") == pytest.approx(0.36)
    assert space.csp.finish_knobs == ["Y.skip_padding"]


def test_all_guards_share_is_a_target_option() -> None:
    """``-all-guards=0.1`` makes ``all`` a knob of the 11 %-padding convolution and gives the
    space its own records key; a share outside [0, 1] is a typed error naming the option."""
    compute = ops.c2d(1, 32, 32, 8, 16, 3, 3, pad=1, dtype="int8")
    space = generate_space(compute, "llvm -all-guards=0.1")
    assert [v for v in space.csp.vars if v.endswith(".skip_padding")]
    assert "all-guards=0.1" in space.target.key
    assert "all-guards" not in get_target("llvm -all-guards=0.2").key  # the default
    with pytest.raises(UnknownTargetError, match="-all-guards"):
        get_target("llvm -all-guards=2")


def test_general_rule_set_skips_the_inlined_padding_taps_exactly() -> None:
    """A float32 3-D convolution on the general rule set (no intrinsic; the padding stage
    inlined into the update): every knob value's program equals the unguarded one bit for bit
    and numpy; with ``all`` every sampled program is guarded."""
    compute = ops.c3d(N=1, D=2, H=5, W=6, CI=8, CO=16, KD=3, KH=3, KW=3, pad=1, dtype="float32")
    space = generate_space(compute, "llvm")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 5, 6, 8)).astype("float32")
    w = rng.standard_normal((16, 3, 3, 3, 8)).astype("float32")
    expected = _conv3d_reference(x, w, 1)
    args = space.prepare_args([x, w, np.zeros(expected.shape, "float32")])
    for sample in RandSAT(space.csp, seed=4).sample(3):
        assert 'sblock("Xp")' not in space.apply(sample).mod.script()  # inlined into the update
        outputs = _knob_outputs(space, sample, args)
        for out in outputs[1:]:
            np.testing.assert_array_equal(out, outputs[0])
        np.testing.assert_allclose(outputs[0], expected, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------
# per-thread set-up (hoist_thread_setup)

_SETUP_SOURCE = """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 8), "int32"), B: T.Buffer((4, 8), "int32")):
    for i in T.{kind}(4):
        for j in range(8):
            with T.sblock("fill"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads()
                T.writes(A[vi, vj])
                with T.attr(0, "{key}", 1):
                    config = T.alloc_buffer((2,), "int32", scope="local")
                    config[0] = {value}
                    T.evaluate(T.call_extern("int32", "abs", config[0]))
                A[vi, vj] = vi * 8 + vj
        for j in range(8):
            with T.sblock("fill_again"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads()
                T.writes(B[vi, vj])
                with T.attr(0, "{key}", 1):
                    config = T.alloc_buffer((2,), "int32", scope="local")
                    config[0] = {other}
                    T.evaluate(T.call_extern("int32", "abs", config[0]))
                B[vi, vj] = vi * 8 + vj + 1
"""


def _with_setup(kind: str, value: str = "5", other: str = "5") -> tirx.PrimFunc:
    """Loops ``i`` (``kind``: ``parallel`` or ``serial``) and ``j`` around two blocks, each of
    which starts with a :data:`THREAD_SETUP` statement (setting ``value`` / ``other``) and then
    writes ``A[i, j] = 8 i + j`` / ``B[i, j] = 8 i + j + 1``."""
    from tvm.script import tirx as T

    source = _SETUP_SOURCE.format(kind=kind, key=THREAD_SETUP, value=value, other=other)
    return tvm.script.from_source(source, extra_vars={"T": T})


def _setup_blocks(stmt: object) -> list[tuple[list[object], s_tir.SBlockRealize]]:
    """``(statements above, realize)`` of every ``thread_setup`` block."""
    out = []
    stack: list[tuple[object, list[object]]] = [(stmt, [])]
    while stack:
        s, above = stack.pop()
        if isinstance(s, s_tir.SBlockRealize):
            if s.block.name_hint == "thread_setup":
                out.append((above, s))
            stack.append((s.block.body, [*above, s]))
        elif isinstance(s, (tirx.For, tirx.AttrStmt)):
            stack.append((s.body, [*above, s]))
        elif isinstance(s, tirx.SeqStmt):
            stack.extend((c, [*above, s]) for c in s.seq)
    return out


@pytest.mark.parametrize("kind", ["parallel", "serial"])
def test_thread_setup_runs_once_per_parallel_task(kind: str) -> None:
    """The set-up statement leaves the two blocks that run 8 times per task and runs once at
    the top of each task of the parallel loop (or of the function, without one); the program
    still computes the same."""
    func = _with_setup(kind)
    hoisted = hoist_thread_setup(func)
    ((above, realize),) = _setup_blocks(hoisted.body)
    assert "abs" in str(realize.block.body)
    loops = [s for s in above if isinstance(s, tirx.For)]
    if kind == "parallel":
        assert [lp.loop_var.name for lp in loops] == ["i"]
        assert loops[0].kind == tirx.ForKind.PARALLEL
        first = loops[0].body.seq[0]
        assert first.same_as(realize)
    else:
        assert not loops  # before every loop, in the function's root block
    for fill in _realizes(hoisted.body):
        if fill.block.name_hint.startswith("fill"):
            assert THREAD_SETUP not in str(fill.block.body)
    outs = []
    for f in (func, hoisted):
        args = [tvm.runtime.tensor(np.zeros((4, 8), "int32"), tvm.cpu()) for _ in range(2)]
        tvm.compile(tvm.IRModule({"main": f}), target="llvm")["main"](*args)
        outs.append([a.numpy() for a in args])
    np.testing.assert_array_equal(outs[0][0], np.arange(32).reshape(4, 8))
    np.testing.assert_array_equal(outs[1], outs[0])


@pytest.mark.parametrize(
    "value, other", [("5", "6"), ("vj", "vj")], ids=["copies differ", "depends on the block"]
)
def test_setups_that_cannot_be_shared_stay_where_they_are(value: str, other: str) -> None:
    """Copies that do not do the same, or a set-up that reads the block's own variables,
    cannot run once per task: nothing moves."""
    func = _with_setup("parallel", value, other)
    assert hoist_thread_setup(func).same_as(func)


def test_a_scan_skips_its_zero_triangle_exactly() -> None:
    """SCAN multiplies by a generated 0/1 triangle ``T[n, k] = k < n``, packed for this CPU's
    int8 intrinsic (``[n // 16, k // 4, n % 16, k % 4]`` for VNNI), the intrinsic reading a
    whole ``n × k`` tile of it: a guard skips every call whose tile is all zeros (``k >=`` the
    tile's largest ``n``), where 60 of the 64 calls of a row lie with N = 16, K = 256. Sampled
    programs equal the unguarded ones and numpy."""
    target = get_target("llvm")
    if not target.intrinsics:
        pytest.skip("this CPU has no int8 dot-product intrinsic (AVX2 or later)")
    space = generate_space(ops.scan(8, 16, 256, dtype="int8"), "llvm")
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (8, 256)).astype("uint8")
    expected = scan_ref(x, 16)
    args = space.prepare_args([x, np.zeros((8, 16), "int32")])
    tvm_target = tvm.target.Target(space.target.tvm_target())
    for sample in RandSAT(space.csp, seed=5).sample(3):
        program = space.program(sample)
        (guard,) = _guards(program["main"].body)
        loops = {v.name for v in undefined_vars(guard.condition)}
        # the guard tests a reduction loop against the tile's n; on AVX2 (8 x 2 tiles) N = 16
        # is two tiles, so the n (j) tile loop, perhaps fused with i, may appear in it too
        assert any(name.startswith("k") for name in loops), guard.condition
        assert all(name.startswith("k") or "j" in name for name in loops), guard.condition
        for mod in (space.apply(sample).mod, program):
            arrays = [tvm.runtime.tensor(arr, tvm.cpu()) for arr in args]
            tvm.compile(mod, target=tvm_target)["main"](*arrays)
            np.testing.assert_array_equal(arrays[-1].numpy(), expected)


@pytest.mark.parametrize(
    ("target", "tile"), [("dlboost", (16, 4)), ("llvm -mcpu=znver3", (8, 2))], ids=["vnni", "avx2"]
)
@pytest.mark.parametrize(("n", "parallel"), [(16, False), (512, True)], ids=["4KiB", "64KiB"])
def test_a_packed_generated_operand_is_written_one_tile_per_vector_store(
    target: str, tile: tuple[int, int], n: int, parallel: bool
) -> None:
    """SCAN's triangle is generated in the intrinsic's packed layout, so it is iterated in
    that layout's order (``follow_layout``): the innermost loop, vectorised, writes one
    ``n × k`` tile of consecutive bytes, rather than scattering single bytes along ``k``. It
    runs on one core when it is at most 16 KiB (a 16 × 256 matrix), ``parallel`` above."""
    space = generate_space(ops.scan(16, n, 256, dtype="int8"), target)
    (sample,) = RandSAT(space.csp, seed=0).sample(1)
    body = space.program(sample)["main"].body
    path = _path_to(body, "Tri")
    loops = [s for s in path if isinstance(s, tirx.For)]
    assert loops[-1].kind == tirx.ForKind.VECTORIZED
    assert int(loops[-1].extent) == tile[0] * tile[1]
    assert any(lp.kind == tirx.ForKind.PARALLEL for lp in loops) == parallel
    (realize,) = [r for r in _realizes(body) if r.block.name_hint == "Tri"]
    assert [int(d) for d in realize.block.writes[0].source.shape[-2:]] == list(tile)
    # the block's variables are the packed buffer's indices; the vector lane walks the last two
    lane = loops[-1].loop_var.name
    walks = [lane in {v.name for v in undefined_vars(e)} for e in realize.iter_values]
    assert walks == [False, False, True, True]


def _path_to(stmt: object, name: str) -> list[object]:
    from heronlike.postproc import _path

    path = _path(stmt, name)
    assert path is not None, name
    return path


@pytest.mark.parametrize("target, dtype", [("dlboost", "int8"), ("llvm", "float32")])
def test_placement_zeros_are_stored_between_the_reduction_steps(target: str, dtype: str) -> None:
    """The sub-pixel transposed convolution's placement ``Y`` computed at its product's register
    tile stores its zeros in a block of its own inside the product's reduction loops and only
    the products in ``Y``; the program equals the one with the zeros after the reduction and
    the scatter definition (bit for bit for int8). Placed elsewhere, nothing moves."""
    shape = SUBPIXEL_SHAPES[0]  # T4's form, 1 x 1 taps, stride 2
    compute = ops.t2d(*shape, dtype=dtype)
    space = generate_space(compute, target)
    rng = np.random.default_rng(2)
    inputs = [rand_input(rng, tuple(int(d) for d in t.shape), str(t.dtype)) for t in compute[:-1]]
    expected = t2d_ref(*inputs, *shape[7:])
    out_shape = tuple(int(d) for d in compute[-1].shape)
    tvm_target = space.target.tvm_target()
    zeros_name = "Y" + ZEROS_SUFFIX
    spread = 0
    for sample in RandSAT(space.csp, seed=3).sample(6):
        scheduled = space.apply(sample).mod
        program = postprocess(scheduled)
        body = program["main"].body
        if not any(r.block.name_hint == zeros_name for r in _realizes(body)):
            assert postprocess(scheduled, spread_zeros=False).same_as(program)
            continue
        spread += 1
        update = next(r.block.name_hint for r in _realizes(body) if "update" in r.block.name_hint)
        in_zeros, in_update, in_y = (
            [s for s in _path(body, name) if isinstance(s, tirx.For)]
            for name in (zeros_name, update, "Y")
        )
        reduction = [
            loop
            for loop in in_zeros
            if any(loop.same_as(u) for u in in_update) and not any(loop.same_as(y) for y in in_y)
        ]
        assert reduction, "the zeros are not inside the reduction's loops"
        y = next(r.block for r in _realizes(body) if r.block.name_hint == "Y")
        assert isinstance(y.body, tirx.IfThenElse) and y.body.else_case is None
        outputs = []
        for mod in (program, postprocess(scheduled, spread_zeros=False)):
            args = space.prepare_args([*inputs, np.zeros(out_shape, str(compute[-1].dtype))])
            arrays = [tvm.runtime.tensor(a, tvm.cpu()) for a in args]
            tvm.compile(mod, target=tvm_target)["main"](*arrays)
            outputs.append(arrays[-1].numpy())
        np.testing.assert_array_equal(outputs[0], outputs[1])
        np.testing.assert_allclose(outputs[0], expected, rtol=1e-4, atol=1e-4)
    assert spread >= 2  # the samples at the register tile (about half of them)
