"""The TensorCore space's ``ldmatrix`` + ``mma.sync`` choice and its XOR swizzle
(``<stage>.intrinsic``, ``<stage>.swizzle``): which families offer them, the CSP rules that
tie the swizzle to the ldmatrix group and to unpadded rows of 32-element groups, the register
layout against TVM's, CUDA source (``ldmatrix``/``mma.sync``; permuted shared addresses on
both sides of the swizzled tiles), and cubins for sm_90 whose SASS has ``LDSM`` and ``HMMA``
(skipped without nvcc, and the SASS part without cuobjdump). No GPU: these kernels' numbers
are checked against the fp32 reference by the bundle runner on a GPU machine.

The first test that builds an mma candidate imports TVM's CUDA tensor intrinsics in its build
worker (20-50 s, once per worker, outside the candidate's timeout).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from dla_targets.tensorcore import _ldmatrix_16x16
from heronlike import ops
from heronlike.errors import InfeasibleSpaceError
from heronlike.measure.cuda import cuobjdump_path
from heronlike.space import generate_space

sys.path.insert(0, str(Path(__file__).parent))  # the shared TensorCore test helpers
from tensorcore_helpers import build_checked, sample, source_and_launches  # noqa: E402

TC = "cuda -tensorcore"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
MMA = 3  # the ldmatrix + mma.sync member of an fp16 family: after WMMA's three shapes


def _family(space, stage: str = "C") -> list:  # noqa: ANN001
    sig = space.matches[stage].intrinsic.signature
    return [i for i in space.target.intrinsics if i.group and i.signature == sig]


def _ldmatrix_addresses(src: str) -> list[str]:
    """The shared-memory address expression of each ``ldmatrix`` in a CUDA source."""
    lines = src.splitlines()
    return [
        lines[i - 2]
        for i, line in enumerate(lines)
        if "ldmatrix.sync" in line and "__cvta_generic_to_shared" in lines[i - 2]
    ]


def test_the_register_layout_is_tvms_and_a_bijection() -> None:
    from heronlike.intrinsic import import_tvmscript_module

    cuda = import_tvmscript_module("tvm.s_tir.tensor_intrin.cuda")
    tvm_layout = cuda.shared_16x16_to_ldmatrix_32x8_layout

    places = {_ldmatrix_16x16(i, j) for i in range(16) for j in range(16)}
    assert places == {(t, e) for t in range(32) for e in range(8)}
    assert all(
        _ldmatrix_16x16(i, j) == tuple(tvm_layout(i, j)) for i in range(16) for j in range(16)
    )


def test_mma_joins_the_fp16_families_from_sm80() -> None:
    gemm = ops.gemm(256, 256, 256, dtype="float16")
    space = generate_space(gemm, TC)
    family = _family(space)
    assert [i.fragment_layout is not None for i in family] == [False, False, False, True]
    assert family[MMA].scopes["a"] == "warp" and family[MMA].group["compute"].startswith("mma_")
    assert space.csp.candidates("C.intrinsic") == (0, 1, 2, 3)
    assert "C.swizzle" in space.csp.knobs
    # Turing has no m16n8k16 with fp32 accumulation in TVM's groups; int8's group has k = 32
    old = generate_space(gemm, TC + " -arch=sm_75")
    assert len(_family(old)) == 3 and "C.swizzle" not in old.csp.vars
    s8 = generate_space(ops.gemm(128, 128, 128, dtype="int8-int8"), TC)
    assert len(_family(s8)) == 3 and "C.swizzle" not in s8.csp.vars
    f16 = generate_space(ops.gemm(128, 128, 128, dtype="float16-float16"), TC)
    assert _family(f16)[MMA].group["store"] == "mma_store_16x16_f16_global_"


def test_swizzle_needs_the_ldmatrix_group_and_unpadded_rows_of_32() -> None:
    space = generate_space(ops.gemm(256, 256, 512, dtype="float16"), TC)
    csp = space.csp
    samples = sample(space, 12, seed=4, **{"C.swizzle": 1})
    assert samples
    for a in samples:
        assert csp.violations(a) == []
        assert a["C.intrinsic"] == MMA
        assert a["C.a.shared.align_offset"] == a["C.b.shared.align_offset"] == 0
        assert a["C.v_k@R0"] % 32 == 0  # the staged row: k elements per shared-memory step
    bad = dict(samples[0], **{"C.intrinsic": 0, "C.intrin_m": 16, "C.intrin_n": 16})
    assert csp.violations(bad)  # WMMA's fragment loads cannot read swizzled rows
    with pytest.raises(InfeasibleSpaceError):  # a staged row of 16 elements cannot swizzle
        sample(space, 1, seed=1, **{"C.swizzle": 1, "C.v_k.R1": 1})


@pytest.mark.parametrize("swizzle", [0, 1])
def test_mma_source_and_its_swizzled_addresses(swizzle: int) -> None:
    """ldmatrix + mma.sync, no WMMA; the launch's shared bytes are the CSP's; swizzled, every
    ldmatrix address is XOR-permuted and so are the fetch's stores, unswizzled none is."""
    space = generate_space(ops.gemm(128, 256, 256, dtype="float16"), TC)
    for a in sample(space, 2, seed=7 + swizzle, **{"C.intrinsic": MMA, "C.swizzle": swizzle}):
        src, launches = source_and_launches(space, a)
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in src
        assert "wmma::" not in src
        assert launches[0]["dynamic_shared_bytes"] == a["C.shared.bytes"]
        addresses = _ldmatrix_addresses(src)
        assert addresses
        assert all(("^" in line) == bool(swizzle) for line in addresses), addresses
        others = [line for line in src.splitlines() if "^" in line and line not in addresses]
        assert bool(others) == bool(swizzle)


@needs_nvcc
def test_mma_cubins_build_without_spills_and_use_ldsm_and_hmma() -> None:
    """mma candidates of a small GEMM (1 and 3 stages, swizzled or padded, split-K 4), built by
    nvcc for sm_90: none spills, the shared bytes are the CSP's; with cuobjdump, the SASS has
    ``LDSM`` and ``HMMA`` and ``LDGSTS`` exactly when pipelined."""
    space = generate_space(ops.gemm(64, 128, 512, dtype="float16"), TC)
    wanted = [(1, 0, 1), (3, 1, 1), (2, 1, 4)]  # (stages, swizzle, split_k)
    samples = [
        sample(
            space,
            1,
            seed=20 + i,
            **{"C.intrinsic": MMA, "C.stages": s, "C.swizzle": w, "C.split_k": f},
        )[0]
        for i, (s, w, f) in enumerate(wanted)
    ]
    built = build_checked(space, samples, [f for _, _, f in wanted])
    for (_, sass), (stages, _, _) in zip(built, wanted, strict=True):
        if sass is not None:
            assert sass.get("HMMA", 0) > 0 and sass.get("LDSM", 0) > 0
            assert (sass.get("LDGSTS", 0) > 0) == (stages > 1), (stages, sass)
    if cuobjdump_path() is None:
        pytest.skip("cuobjdump not found: the SASS part was not checked")
