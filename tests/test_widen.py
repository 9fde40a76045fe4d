"""Pre-widened A on AVX2 (:mod:`heronlike.rules.widen`): the general target's ``vpmaddwd``
intrinsic reads an int16 copy of A that the kernel writes first (a convolution's padded input
stored as int16 instead of a second copy), the stage's accesses and footprints see 2-byte
elements, and tuned kernels stay bit-exact over the whole u8 × s8 range."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import s_tir, te

import heronlike
from heronlike import ops
from heronlike.dla_targets.dlboost import (
    PMADDWD_AVX2,
    PMADDWD_AVX2_A16,
    PMADDWD_AVX512,
    PMADDWD_AVX512_A16,
)
from heronlike.host import cpu_flags
from heronlike.kernel import BuiltKernel
from heronlike.reference import reference_outputs
from heronlike.rules.widen import retype_buffer, widen_operand
from heronlike.sampler import RandSAT
from heronlike.space import generate_space

needs_avx2 = pytest.mark.skipif("avx2" not in cpu_flags(), reason="needs an AVX2 CPU")
AVX2 = "dlboost -general -mcpu=haswell"


def _blocks(func) -> dict[str, str]:
    """Block name -> the dtype of the buffer it writes."""
    sch = s_tir.Schedule(func)
    root = sch.get_sblock("root")
    return {
        sch.get(b).name_hint: str(sch.get(b).writes[0].source.dtype)
        for b in sch.get_child_blocks(root)
    }


def test_intrinsics_read_a_as_declared() -> None:
    assert PMADDWD_AVX2_A16.a_storage_dtype == "int16"
    assert PMADDWD_AVX2.a_storage_dtype is None and PMADDWD_AVX512.a_storage_dtype is None
    assert PMADDWD_AVX512_A16.a_storage_dtype == "int16"
    assert PMADDWD_AVX2.name != PMADDWD_AVX2_A16.name


def test_a_parameter_gets_an_int16_copy() -> None:
    func = te.create_prim_func(ops.gemm(32, 16, 8))
    out, name, copied = widen_operand(func, "C", "X", "int16")
    assert copied and _blocks(out) == {name: "int16", "C": "int32"}
    # the parameters are untouched: the caller passes the same u8 array
    assert [str(p.name) for p in out.params] == [str(p.name) for p in func.params]


def _allocated_shapes(func) -> dict[str, tuple[int, ...]]:
    sch = s_tir.Schedule(func)
    return {
        str(b.name): tuple(int(d) for d in b.shape)
        for b in sch.get(sch.get_sblock("root")).alloc_buffers
    }


def test_strided_operand_copies_only_what_the_stage_reads() -> None:
    """A 1 x 1 convolution of stride 2 reads every other row and column of X: its int16 copy
    holds those (4 x 4 x 16, indexed by the stage's iterators), not all 8 x 8 x 16 elements; a
    GEMM's A, read whole, is copied whole."""
    func = te.create_prim_func(ops.c2d(1, 8, 8, 16, 16, 1, 1, 2, 0, 1))
    out, name, copied = widen_operand(func, "Y", "X", "int16")
    assert copied and _allocated_shapes(out)[name] == (1, 4, 4, 16)
    assert sorted(_blocks(out).values()) == ["int16", "int32"]  # the copy, the convolution
    gemm = te.create_prim_func(ops.gemm(32, 16, 8))
    out, name, _ = widen_operand(gemm, "C", "X", "int16")
    assert _allocated_shapes(out)[name] == (32, 8)


def test_materialized_operand_is_retyped_in_place() -> None:
    """A convolution's zero padding Xp is read by the convolution alone: it is stored as int16
    itself, no second copy."""
    func = te.create_prim_func(ops.c2d(1, 8, 8, 16, 16, 3, 3, 1, 1, 1))
    before = _blocks(func)
    out, name, copied = widen_operand(func, "Y", "Xp", "int16")
    assert (name, copied) == ("Xp", None)
    assert _blocks(out) == {**before, "Xp": "int16"}


def test_operand_read_by_two_stages_is_copied() -> None:
    """A producer another stage also reads keeps its dtype; the tensorized stage gets a copy."""
    a = te.placeholder((16, 8), "uint8", name="A")
    w = te.placeholder((16, 8), "int8", name="W")
    x = te.compute((16, 8), lambda i, k: a[i, k] + tvm.tirx.const(1, "uint8"), name="X")
    r = te.reduce_axis((0, 8), name="k")
    c = te.compute(
        (16, 16),
        lambda i, j: te.sum(x[i, r].astype("int32") * w[j, r].astype("int32"), axis=r),
        name="C",
    )
    s = te.compute((16,), lambda i: x[i, 0].astype("int32"), name="S")
    func = te.create_prim_func([a, w, c, s])
    out, name, copied = widen_operand(func, "C", "X", "int16")
    assert copied and _blocks(out)["X"] == "uint8" and _blocks(out)[name] == "int16"


def test_retype_rejects_a_parameter() -> None:
    with pytest.raises(KeyError, match="X is not an intermediate buffer"):
        retype_buffer(te.create_prim_func(ops.gemm(8, 8, 8)), "X", "int16")


def test_space_reads_and_counts_a_as_int16() -> None:
    """The tensorized stage's A access is int16 and the L1 / L2 footprints count 2 bytes per
    element of it; VNNI (strict or general) keeps reading u8, as does ``-widen-a=0``."""
    space = generate_space(ops.gemm(64, 64, 64), AVX2)
    (match,) = space.matches.values()
    assert (match.a.buffer, match.a.dtype) == ("X_global", "int16")
    sums = [c for c in space.csp.constraints if getattr(c, "target", None) == "C.L1.bytes"]
    (l1,) = sums
    assert dict(zip(l1.terms, l1.coeffs))["C.X_global@R0.elems"] == 2
    for target in ("dlboost -mcpu=znver4", "dlboost -general -mcpu=znver4", f"{AVX2} -widen-a=0"):
        (match,) = generate_space(ops.gemm(64, 64, 64), target).matches.values()
        assert (match.a.buffer, match.a.dtype) == ("X", "uint8")


#: a 32-bit broadcast into a vector register (LLVM emits either for the same broadcast)
BROADCAST_32 = re.compile(r"\b(vpbroadcastd|vbroadcastss)\b")


@pytest.mark.parametrize(
    "compute", [ops.gemm(64, 48, 64), ops.c2d(1, 8, 8, 16, 32, 3, 3, 1, 1, 1)], ids=["gemm", "c2d"]
)
def test_calls_broadcast_a_from_memory(compute) -> None:
    """Every sampled candidate builds; its tensorized loops broadcast A's int16 pairs straight
    from memory (every 32-bit broadcast, ``vpbroadcastd`` or the ``vbroadcastss`` LLVM picks for
    some tiles, has a memory operand), where ``-widen-a=0`` widens each pair in a register
    first (``vpmovzxbw``, then ``vpbroadcastd`` from that register)."""

    def broadcasts(target: str) -> list[tuple[int, int]]:
        space = generate_space(compute, target)
        counts = []
        for assignment in RandSAT(space.csp, seed=2).sample(3):
            asm = BuiltKernel(space, assignment, space.target.tvm_target()).assembly
            ops = [ln.split(None, 1) for ln in asm.splitlines() if BROADCAST_32.search(ln)]
            assert "vpmaddwd" in asm
            counts.append((sum("(" in op[1] for op in ops), sum("(" not in op[1] for op in ops)))
        return counts

    assert all(mem and not reg for mem, reg in broadcasts(AVX2))
    assert all(reg for _, reg in broadcasts(f"{AVX2} -widen-a=0"))


needs_avx512bw = pytest.mark.skipif("avx512bw" not in cpu_flags(), reason="needs AVX-512BW")


@pytest.mark.parametrize(
    "compute, target, shape",
    [
        pytest.param(ops.gemm(16, 24, 15), AVX2, "gemm 16x24x15 (K padded)", marks=needs_avx2),
        pytest.param(
            ops.c2d(1, 7, 7, 16, 16, 3, 3, 1, 1, 1), AVX2, "c2d 7x7x16 3x3", marks=needs_avx2
        ),
        pytest.param(
            ops.c3d(1, 4, 8, 8, 16, 32, 1, 1, 1, 2, 0, 1),
            AVX2,
            "c3d 1x1x1 stride 2 (strided copy)",
            marks=needs_avx2,
        ),
        pytest.param(
            ops.c2d(1, 14, 14, 33, 16, 1, 1, 2, 0, 1),
            AVX2,
            "c2d 1x1 stride 2, odd CI (strided copy, padded)",
            marks=needs_avx2,
        ),
        pytest.param(
            ops.gemm(8, 48, 30),
            "dlboost -general -mcpu=skylake-avx512",
            "gemm 8x48x30 on AVX-512BW",
            marks=needs_avx512bw,
        ),
    ],
    ids=["gemm-odd-k", "c2d", "c3d-strided", "c2d-strided-odd-ci", "gemm-avx512bw"],
)
def test_widened_kernels_are_exact(tmp_path: Path, compute, target: str, shape: str) -> None:
    """A real tune on this CPU, then the extreme operands (u8 255 by s8 -128, where the
    saturating vpmaddubsw would be wrong) against numpy's int64 result."""
    result = heronlike.tune(compute, target, trials=4, batch_size=4, records=tmp_path / "r.sqlite")
    assert result.space.target.widen_a  # the default
    assert result.valid == 4 and result.correct, shape
    copies = [ln for ln in result.script.splitlines() if "alloc_buffer" in ln and "int16" in ln]
    assert len(copies) == 1, copies  # one int16 A, also where A is padded (odd K)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, [int(d) for d in compute[0].shape], dtype=np.uint8)
    w = rng.integers(-128, 128, [int(d) for d in compute[1].shape], dtype=np.int8)
    x.reshape(-1)[:64], w.reshape(-1)[:64] = 255, -128
    y = np.zeros([int(d) for d in compute[-1].shape], np.int32)
    (expected,) = reference_outputs(result.space.dag, [x, w, y]).values()
    np.testing.assert_array_equal(result.kernel(x, w), expected)


def _copy_in_the_stage_nest(script: str, copy: str) -> bool:
    """Whether the block writing buffer ``copy`` (named after it: ``X_global``, or
    ``X_reindex_reindex`` for a reindexed copy) of a TVMScript program sits in the root-level
    loop nest that also runs the tensorized update (the stage's parallel loop: ``T.parallel``,
    or ``T.serial`` where it has one task), rather than in a loop nest of its own."""
    nests: list[list[str]] = []
    root = None
    for ln in script.splitlines():
        depth = len(ln) - len(ln.lstrip())
        if ln.lstrip().startswith("for ") and (root is None or depth <= root):
            root = depth
            nests.append([])
        elif nests and depth > (root or 0):
            nests[-1].append(ln)
    blocks = [" ".join(n) for n in nests]
    return any(f'T.sblock("{copy}' in b and "_update" in b for b in blocks)


def test_widened_copy_is_placed_by_a_finish_knob() -> None:
    """A GEMM's new int16 copy of A is written at the root (knob 0, what the search holds) or
    inside the stage's parallel loop (1), each task widening only its rows (a task-sized
    buffer once TVM compacts it); a record from before the knob existed is the root program.
    A convolution's padded input, retyped in place, has no such knob."""
    space = generate_space(ops.gemm(64, 48, 64), AVX2)
    knob = "C.widened_copy"
    assert space.csp.finish_knobs == [knob] and space.csp.vars[knob].hi == 1
    (a,) = RandSAT(space.csp.search(), seed=0).sample(1)
    assert a[knob] == 0
    root, task = (str(space.program({**a, knob: v})) for v in (0, 1))
    assert not _copy_in_the_stage_nest(root, "X_global")
    assert _copy_in_the_stage_nest(task, "X_global")
    old = {k: v for k, v in a.items() if k != knob}
    assert space.fit(old) == a and not space.misfits(old)
    conv = generate_space(ops.c2d(1, 8, 8, 16, 32, 3, 3, 1, 1, 1), AVX2)
    assert not any(k.endswith(".widened_copy") for k in conv.csp.vars)
    # -widen-a=root: the copy always at the root, no knob, a records key of its own
    pinned = generate_space(ops.gemm(64, 48, 64), f"{AVX2} -widen-a=root")
    assert not pinned.csp.finish_knobs and pinned.target.widen_a
    assert "-widen-a=root" in pinned.target.key and pinned.target.key != space.target.key
    assert str(pinned.program(old)) == root


@needs_avx2
@pytest.mark.parametrize(
    "compute",
    [ops.gemm(32, 48, 40), ops.bmm(2, 16, 24, 32), ops.c2d(1, 14, 14, 16, 16, 1, 1, 2, 0, 1)],
    ids=["gemm", "bmm", "c2d-strided-copy"],
)
def test_copy_in_the_parallel_loop_is_exact(compute) -> None:
    """Three sampled programs per compute with the copy in the parallel loop, run on the
    extreme operands (u8 255 by s8 -128) against numpy's int64 result."""
    space = generate_space(compute, AVX2)
    (knob,) = space.csp.finish_knobs
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, [int(d) for d in compute[0].shape], dtype=np.uint8)
    w = rng.integers(-128, 128, [int(d) for d in compute[1].shape], dtype=np.int8)
    x.reshape(-1)[:64], w.reshape(-1)[:64] = 255, -128
    y = np.zeros([int(d) for d in compute[-1].shape], np.int32)
    (expected,) = reference_outputs(space.dag, [x, w, y]).values()
    for a in RandSAT(space.csp.search(), seed=4).sample(3):
        kernel = BuiltKernel(space, {**a, knob: 1}, space.target.tvm_target())
        assert _copy_in_the_stage_nest(kernel.script, _int16_copies(kernel.script)[0])
        np.testing.assert_array_equal(kernel(x, w), expected)


def _int16_copies(script: str) -> list[str]:
    """Names of the int16 buffers a TVMScript program allocates (A's widened copy)."""
    return re.findall(r"(\w+) = T\.sblock_alloc_buffer\([^)]*\), \"int16\"", script)
