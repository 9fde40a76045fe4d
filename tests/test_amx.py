"""The AMX target (dla_targets/amx.py): tile shapes as a knob within the 8-register budget,
candidates that build for Sapphire Rapids with ``tdpbusd`` in their assembly, and (with
``-emulate``, on any CPU) the same schedules computing what numpy computes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from heronlike import ops
from heronlike.dla_targets import amx
from heronlike.errors import HostFeatureError
from heronlike.kernel import BuiltKernel

ROOT = Path(__file__).resolve().parents[1]


def test_target_file_uses_only_public_names() -> None:
    """A new accelerator is one file through the public interface: no private module or name
    of heronlike is imported."""
    tree = ast.parse((ROOT / "dla_targets" / "amx.py").read_text())
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("heronlike"):
            imported += [(node.module, a.name) for a in node.names]
    assert imported
    for module, name in imported:
        assert not any(part.startswith("_") for part in module.split(".")), module
        assert not name.startswith("_"), f"{module}.{name}"


def test_shape_knob_within_tile_budget() -> None:
    """Every sampled candidate holds at most 8 tiles; several shapes are sampled, and the
    members that need more than 8 tiles (1x4, 2x3, 4x4 …) never are."""
    from heronlike.sampler import RandSAT
    from heronlike.space import generate_space

    space = generate_space(ops.gemm(256, 256, 256, dtype="int8"), "amx")
    family = amx.tile_intrinsics()
    samples = RandSAT(space.csp, seed=0).sample(64)
    assert len(samples) == 64
    shapes = set()
    for s in samples:
        assert not space.csp.violations(s)
        member = family[s["C.intrinsic"]]
        tiles = member.register_tiles
        assert tiles["a"] + tiles["b"] + tiles["c"] == s["C.tiles"] <= amx.TILE_REGISTERS
        assert (s["C.v_i.T"], s["C.v_j.T"], s["C.v_k.T"]) == (member.m, member.n, member.k)
        shapes.add((member.m, member.n))
    assert {(16, 16), (32, 32)} <= shapes and len(shapes) >= 4
    over = {(i.m, i.n) for i in family if sum(i.register_tiles.values()) > amx.TILE_REGISTERS}
    assert over and not shapes & over


@pytest.mark.parametrize(
    "compute",
    [
        ops.gemm(128, 128, 256, dtype="int8"),
        ops.bmm(2, 64, 64, 128, dtype="int8"),
        ops.c2d(N=1, H=8, W=8, CI=64, CO=32, KH=3, KW=3, stride=1, pad=1, dtype="int8"),
        ops.gemm(64, 96, 64, dtype="bfloat16"),
        ops.bmm(2, 32, 48, 64, dtype="bfloat16"),
        ops.c2d(N=1, H=8, W=8, CI=64, CO=32, KH=1, KW=1, stride=1, pad=0, dtype="int8"),
        ops.scan(16, 64, 128, dtype="int8"),
    ],
    ids=["gemm", "bmm", "c2d", "gemm-bf16", "bmm-bf16", "c2d-1x1", "scan"],
)
def test_candidates_build_for_sapphirerapids(compute) -> None:  # noqa: ANN001
    """Sampled candidates build for ``-mcpu=sapphirerapids`` on any x86 host, and their
    assembly is the micro-kernel's: the C tiles zeroed once per register tile, only A and B
    tiles loaded in the reduction loop, ``tdpbusd`` into C tiles only, C stored once."""
    from heronlike.intrinsic import shape_family
    from heronlike.sampler import RandSAT
    from heronlike.space import generate_space

    space = generate_space(compute, "amx -mcpu=sapphirerapids")
    ((stage, match),) = space.matches.items()
    family = shape_family(space.target.intrinsics, match.intrinsic)
    for s in RandSAT(space.csp, seed=1).sample(3):
        member = family[s[f"{stage}.intrinsic"]]
        c_tiles = member.register_tiles["c"]
        asm = BuiltKernel(space, s, space.target.tvm_target()).assembly
        check = amx.check_tile_assembly(asm, c_tiles)
        assert check["ok"], check
        instruction = "tdpbf16ps" if match.intrinsic.a_dtype == "bfloat16" else "tdpbusd"
        assert re.search(rf"\b{instruction}\b", asm)


def _check_gemm(kernel, m: int, n: int, k: int, dtype: str, rng: np.random.Generator) -> None:  # noqa: ANN001
    """``kernel(X, W)`` on fresh inputs is numpy's ``X @ W.T``: bit-exact for int8 (u8 × s8 →
    s32), to float32 rounding for bf16 (fp32 accumulation)."""
    import ml_dtypes

    if dtype == "int8":
        x = rng.integers(0, 256, (m, k), dtype=np.uint8)
        w = rng.integers(-128, 128, (n, k), dtype=np.int8)
        want = x.astype(np.int32) @ w.astype(np.int32).T
        np.testing.assert_array_equal(kernel(x, w), want)
    else:
        x = rng.uniform(-1, 1, (m, k)).astype(ml_dtypes.bfloat16)
        w = rng.uniform(-1, 1, (n, k)).astype(ml_dtypes.bfloat16)
        want = x.astype(np.float32) @ w.astype(np.float32).T
        np.testing.assert_allclose(kernel(x, w), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int8", "bfloat16"])
def test_emulated_kernels_match_numpy(dtype: str, tmp_path: Path) -> None:
    """With ``-emulate`` the AMX schedule (padding of an odd shape, packing, tiles in the
    VNNI-4 / VNNI-2 layout, shape knob) runs on this CPU and computes numpy's product on fresh
    inputs: bit-exact for int8, to float32 rounding for bf16 (fp32 accumulation)."""
    import heronlike

    rng = np.random.default_rng(3)
    m, n, k = 40, 48, 100  # padded to 48 x 48 x 128 (int8) or x 128 (bf16, k 32) in the kernel
    result = heronlike.tune(
        ops.gemm(m, n, k, dtype=dtype),
        target="amx -emulate",
        trials=3,
        seed=0,
        records=tmp_path / "records.sqlite",
    )
    assert result.correct and result.valid == 3, result.errors
    _check_gemm(result.kernel, m, n, k, dtype, rng)


@pytest.mark.skipif(not amx.host_has_amx(), reason="needs a CPU with AMX tiles")
@pytest.mark.parametrize("dtype", ["int8", "bfloat16"])
def test_tuned_on_the_tiles_matches_numpy(dtype: str, tmp_path: Path) -> None:
    """On an AMX CPU: a few real tile kernels of an odd-shaped GEMM (padded in the kernel) are
    measured without a fault (the tile permission, the hoisted configuration) and compute
    numpy's product, bit-exact for int8; the kernel configures the tiles once per parallel
    task, not per micro-kernel."""
    import heronlike

    rng = np.random.default_rng(5)
    # bf16: only n may be padded in the kernel (test_bf16_operands_the_kernel_would_allocate)
    m, n, k = (72, 80, 200) if dtype == "int8" else (64, 80, 96)
    result = heronlike.tune(
        ops.gemm(m, n, k, dtype=dtype), target="amx", trials=4, seed=0,
        records=tmp_path / "records.sqlite",
    )  # fmt: skip
    assert result.correct and result.valid == 4, result.errors
    assert "heronlike_amx_" in result.trace and "_reference" not in result.trace
    program = result.space.program(result.assignment).script()
    assert program.count("ldtilecfg") == 1 and 'T.sblock("thread_setup")' in program
    _check_gemm(result.kernel, m, n, k, dtype, rng)


def test_emulated_convolution_matches_numpy(tmp_path: Path) -> None:
    """A padded 3x3 convolution becomes an implicit GEMM on the tiles and computes numpy's."""
    import heronlike

    compute = ops.c2d(N=1, H=6, W=6, CI=16, CO=16, KH=3, KW=3, stride=1, pad=1, dtype="int8")
    result = heronlike.tune(
        compute, target="amx -emulate", trials=3, seed=0, records=tmp_path / "records.sqlite"
    )
    assert result.correct and result.valid == 3
    assert "heronlike_amx_" in result.trace and "_reference" in result.trace


@pytest.mark.parametrize(
    "compute, why",
    [
        (ops.gemm(64, 64, 200, dtype="bfloat16"), "k = 200"),
        (ops.gemm(72, 64, 256, dtype="bfloat16"), "m = 72"),
        (
            ops.c2d(N=1, H=8, W=8, CI=32, CO=32, KH=3, KW=3, stride=1, pad=1, dtype="bfloat16"),
            "A operand Xp_reindex is computed by the kernel",
        ),
        (ops.scan(16, 64, 128, dtype="bfloat16"), "B operand .* is computed by the kernel"),
    ],
    ids=["k padded", "m padded", "im2col", "scan"],
)
def test_bf16_operands_the_kernel_would_allocate_are_refused(compute, why: str) -> None:  # noqa: ANN001
    """TVM stores bf16 buffers a kernel allocates as float32, which tile loads cannot read (on
    a Xeon with AMX every such candidate computed garbage): a bf16 A operand padded or
    materialised in the kernel is a typed error naming why; ``-emulate`` (loop nests) and int8
    are unaffected."""
    from heronlike.errors import UnsupportedShapeError
    from heronlike.space import generate_space

    with pytest.raises(UnsupportedShapeError, match=why):
        generate_space(compute, "amx -mcpu=sapphirerapids")
    generate_space(compute, "amx -emulate")


def test_mcpu_without_amx_is_a_clear_error() -> None:
    from heronlike import get_target

    with pytest.raises(HostFeatureError, match="amx-tile"):
        get_target("amx -mcpu=znver3").tvm_target()


@pytest.mark.skipif(amx.host_has_amx(), reason="this CPU has AMX")
def test_measuring_without_amx_names_the_missing_flags() -> None:
    """Before any tile instruction could kill the process with SIGILL: the tune's host check,
    and a library's or compiled model's first call (``prepare_process_for`` its target key),
    raise a HostFeatureError; ``-emulate`` and targets not installed here need nothing."""
    from heronlike import get_target
    from heronlike.target import prepare_process_for

    with pytest.raises(HostFeatureError, match="amx_tile"):
        get_target("amx").check_host()
    with pytest.raises(HostFeatureError, match="amx_int8"):
        amx.request_amx_permission()
    with pytest.raises(HostFeatureError, match="amx_bf16"):
        prepare_process_for("amx -mcpu=sapphirerapids -num-cores=2")
    prepare_process_for("amx -emulate -num-cores=2")
    prepare_process_for("some_npu -cores=4")


def test_computes_the_tiles_cannot_run_are_typed_errors() -> None:
    """A matrix-vector product has no row axis for the tiles, a float32 GEMM the wrong dtypes:
    each is a typed error naming why, before anything is built."""
    from heronlike.errors import NoTensorizableStageError, UnsupportedDtypeError
    from heronlike.space import generate_space

    with pytest.raises(NoTensorizableStageError, match="m axis"):
        generate_space(ops.gemv(256, 256, dtype="int8"), "amx")
    with pytest.raises(UnsupportedDtypeError, match="float32 x float32"):
        generate_space(ops.gemm(64, 64, 64, dtype="float32"), "amx")
