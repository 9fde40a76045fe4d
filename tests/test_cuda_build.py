"""Real CUDA builds through ``LocalBuilder(build_fn=build_cuda)``: TVM codegen + the real nvcc.

No GPU is needed (kernels are compiled, not run) except for the one test that runs them, which
skips without a CUDA device. Every candidate of the module is built in one batch (a
module-scoped fixture): a tiled fp32 GEMM with ``shared`` staging, a WMMA fp16->fp32 GEMM with
``shared.dyn`` staging, and real failures (a thread tile that spills, register and shared
memory limits, an arch nvcc rejects, garbage JSON).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import s_tir, te  # noqa: E402

from heronlike.measure import BuildInput, LocalBuilder, LocalRunner, RunInput  # noqa: E402
from heronlike.measure.cuda import (  # noqa: E402
    build_cuda,
    cuda_arch_supported,
    launch_manifest,
    nvcc_version,
    one_block_launch_bounds,
    parse_ptxas,
)

cloudpickle.register_pickle_by_value(sys.modules[__name__])

NVCC = nvcc_version()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) not found on PATH")
ARCH = "sm_90" if NVCC is not None and cuda_arch_supported("sm_90") else "sm_80"
TARGET = {
    "kind": "cuda",
    "arch": ARCH,
    "max_shared_memory_per_block": 49152,
    "max_threads_per_block": 1024,
    "thread_warp_size": 32,
    "registers_per_block": 65536,
    "host": {"kind": "llvm"},
}
OPTIONS = {"arch": ARCH, "pass_config": {"tirx.disable_storage_rewrite": True}}
N = 256
# WMMA GEMM tiling: block tile BM x BN x BK, 2 x 2 warps, 2 x 2 fragments of 16 x 16 per warp
BM = BN = 64
BK = 32


def _gemm(dtype: str, out_dtype: str) -> tuple[te.Tensor, ...]:
    a = te.placeholder((N, N), dtype, name="A")
    b = te.placeholder((N, N), dtype, name="B")
    k = te.reduce_axis((0, N), name="k")
    c = te.compute(
        (N, N),
        lambda i, j: te.sum(a[i, k].astype(out_dtype) * b[k, j].astype(out_dtype), axis=k),
        name="C",
    )
    return a, b, c


def fp32_gemm(thread_tile: int = 1) -> s_tir.Schedule:
    """Grid (16, 16) of 16 x 16 threads (x = columns); A and B tiles staged in ``shared``.

    ``thread_tile`` > 1 gives each thread a ``thread_tile``^2 local accumulator (block tile
    16 * thread_tile), which spills once it exceeds the register file.
    """
    sch = s_tir.Schedule(te.create_prim_func(list(_gemm("float32", "float32"))))
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    i0, i1, i2 = sch.split(i, [None, 16, thread_tile])
    j0, j1, j2 = sch.split(j, [None, 16, thread_tile])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    if thread_tile > 1:
        acc = sch.cache_write(blk, 0, "local")
        sch.reverse_compute_at(acc, j1)
        sch.unroll(i2)
        sch.unroll(j2)
    for idx in (0, 1):
        shared = sch.cache_read(blk, idx, "shared")
        sch.compute_at(shared, k0)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx = sch.split(fused, [None, 16, 16])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    return sch


def wmma_gemm() -> s_tir.Schedule:
    """fp16 x fp16 -> fp32 on TensorCores (WMMA 16x16x16): grid (N/BN, N/BM), block (32, 2, 2)
    (threadIdx.x = lane, y/z = warps), A and B tiles in ``shared.dyn``."""
    from heronlike.intrinsic import import_tvmscript_module

    cuda = import_tvmscript_module("tvm.s_tir.tensor_intrin.cuda")  # once per process
    get_wmma_intrin_group = cuda.get_wmma_intrin_group

    intrin = get_wmma_intrin_group("shared.dyn", "global", "float16", "float32", False)
    sch = s_tir.Schedule(te.create_prim_func(list(_gemm("float16", "float32"))))
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    i, i_tc = sch.split(i, [None, 16])
    j, j_tc = sch.split(j, [None, 16])
    k, k_tc = sch.split(k, [None, 16])
    sch.reorder(i, j, k, i_tc, j_tc, k_tc)
    outer = sch.blockize(i_tc)
    i0, i1, i2 = sch.split(i, [N // BM, 2, 2])
    j0, j1, j2 = sch.split(j, [N // BN, 2, 2])
    k0, k1 = sch.split(k, [None, BK // 16])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.z")
    for idx in (0, 1):
        shared = sch.cache_read(outer, idx, "shared.dyn")
        sch.compute_at(shared, k0)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, tz, ty, tx, vec = sch.split(fused, [None, 2, 2, 32, 8])
        sch.bind(tz, "threadIdx.z")
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)
    frag_a = sch.cache_read(outer, 0, "wmma.matrix_a")
    frag_b = sch.cache_read(outer, 1, "wmma.matrix_b")
    sch.compute_at(frag_a, k1)
    sch.compute_at(frag_b, k1)
    acc = sch.cache_write(outer, 0, "wmma.accumulator")
    sch.reverse_compute_at(acc, j1)
    sch.decompose_reduction(outer, k0)

    def tile16(block: s_tir.SBlockRV) -> s_tir.LoopRV:
        a, b = sch.get_loops(block)[-2:]
        a0, a1 = sch.split(a, [None, 16])
        b0, b1 = sch.split(b, [None, 16])
        sch.reorder(a0, b0, a1, b1)
        return a1

    sch.tensorize(tile16(frag_a), intrin["load_a"])
    sch.tensorize(tile16(frag_b), intrin["load_b"])
    sch.tensorize(tile16(acc), intrin["store"])
    sch.tensorize(sch.get_loops(blk)[-3], intrin["compute"])
    sch.tensorize(sch.get_loops(sch.get_sblock("C_init"))[-2], intrin["init"])
    return sch


def permuted_add() -> s_tir.Schedule:
    """``M = Z + 2 A`` with parameters ``(Z, A, M)``; TVM passes kernel arguments sorted by
    name (``A, M, Z``), so the launch's argument order is ``[1, 2, 0]``."""
    z = te.placeholder((1024,), "float32", name="Z")
    a = te.placeholder((1024,), "float32", name="A")
    m = te.compute((1024,), lambda i: z[i] + a[i] * 2.0, name="M")
    sch = s_tir.Schedule(te.create_prim_func([z, a, m]))
    (i,) = sch.get_loops(sch.get_sblock("M"))
    bx, tx = sch.split(i, [None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


CASES = {
    "fp32": (lambda: fp32_gemm(), {}),
    "wmma": (wmma_gemm, {}),
    "permuted": (permuted_add, {}),
    "spill": (lambda: fp32_gemm(thread_tile=16), {}),
    # this WMMA kernel spills 16 bytes at ptxas register-usage level 10 and none at 5 (nvcc 13)
    "wmma_level10": (wmma_gemm, {"ptxas_levels": (10,)}),
    "wmma_10_then_5": (wmma_gemm, {"ptxas_levels": (10, 5)}),
    "registers": (lambda: fp32_gemm(), {"max_registers_per_thread": 16}),
    "shared_memory": (wmma_gemm, {"max_shared_bytes": 4096}),
    "nvcc": (lambda: fp32_gemm(), {"arch": "sm_10"}),
    "garbage": (None, {}),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    """Build every case in one batch; yields ``{case: (BuildResult, scheduled mod or None)}``."""
    if NVCC is None:
        pytest.skip("nvcc (CUDA toolkit) not found on PATH")
    mods = {name: make().mod if make else None for name, (make, _) in CASES.items()}
    inputs = [
        BuildInput(
            mod_json=tvm.ir.save_json(mod) if mod is not None else "{not json",
            target=TARGET,
            options={**OPTIONS, **extra},
        )
        for (name, (_, extra)), mod in zip(CASES.items(), mods.values(), strict=True)
    ]
    work = tmp_path_factory.mktemp("cuda_build")
    with LocalBuilder(
        max_workers=2, timeout_s=120, work_dir=work, build_fn=build_cuda, suffix=".cuda"
    ) as builder:
        results = builder.build(inputs)
        yield {name: (res, mods[name]) for name, res in zip(CASES, results, strict=True)}


def _check_artifacts(res, kernel_marker: str) -> dict:
    assert res.ok, (res.error_kind, res.error_msg)
    folder = Path(res.artifact_path)
    assert folder.is_dir() and folder.name.endswith(".cuda")
    assert (folder / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"
    assert (folder / "kernel.so").stat().st_size > 0
    assert kernel_marker in (folder / "kernel.cu").read_text()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest == json.loads(json.dumps(res.info))
    for kernel in manifest["kernels"].values():
        assert kernel["registers"] > 0
        assert kernel["spill_stores_bytes"] == kernel["spill_loads_bytes"] == 0
    return manifest


@needs_nvcc
def test_fp32_gemm_with_shared_staging(built):
    res, _ = built["fp32"]
    manifest = _check_artifacts(res, "__shared__")
    assert manifest["arch"] == ARCH
    (launch,) = manifest["launches"]
    assert launch["grid"] == [N // 16, N // 16, 1]
    assert launch["block"] == [16, 16, 1]
    assert launch["dynamic_shared_bytes"] == 0
    assert sorted(launch["args"]) == [0, 1, 2]
    kernel = manifest["kernels"][launch["kernel"]]
    assert kernel["static_shared_bytes"] == 2 * 16 * 16 * 4  # A and B tiles, fp32
    assert manifest["shared_bytes_per_block"] == {launch["kernel"]: 2 * 16 * 16 * 4}
    assert manifest["params"] == [
        {"name": n, "shape": [N, N], "dtype": "float32"} for n in ("A", "B", "C")
    ]


@needs_nvcc
def test_wmma_gemm_with_dynamic_shared_memory(built):
    res, _ = built["wmma"]
    manifest = _check_artifacts(res, "wmma::mma_sync")
    (launch,) = manifest["launches"]
    assert launch["grid"] == [N // BN, N // BM, 1]
    assert launch["block"] == [32, 2, 2]
    dyn = (BM * BK + BK * BN) * 2  # fp16 A and B tiles
    assert launch["dynamic_shared_bytes"] == dyn
    assert manifest["kernels"][launch["kernel"]]["static_shared_bytes"] == 0
    assert manifest["shared_bytes_per_block"][launch["kernel"]] == dyn
    assert sorted(launch["args"]) == [0, 1, 2]
    assert [p["dtype"] for p in manifest["params"]] == ["float16", "float16", "float32"]


@needs_nvcc
def test_a_spilling_ptxas_level_is_retried_at_the_next(built):
    """The builder tries ptxas register-usage levels in order until no kernel spills: a kernel
    that spills at level 10 alone is a ``spill`` failure, and with (10, 5) it builds at 5."""
    only10, _ = built["wmma_level10"]
    if only10.ok:
        pytest.skip(f"this nvcc ({NVCC}) does not spill the WMMA kernel at level 10")
    assert only10.error_kind == "spill" and only10.info["ptxas_level"] == 10
    then5, _ = built["wmma_10_then_5"]
    manifest = _check_artifacts(then5, "wmma::mma_sync")
    assert manifest["ptxas_level"] == 5
    default, _ = built["wmma"]
    assert default.info["ptxas_level"] == 5  # the first of PTXAS_LEVELS that does not spill


@needs_nvcc
def test_argument_order_is_the_launch_order(built):
    res, mod = built["permuted"]
    manifest = _check_artifacts(res, "__global__")
    (launch,) = manifest["launches"]
    assert [p["name"] for p in manifest["params"]] == ["Z", "A", "M"]
    assert launch["args"] == [1, 2, 0]  # (A, M, Z): not the PrimFunc's order
    assert launch["grid"] == [8, 1, 1] and launch["block"] == [128, 1, 1]
    assert launch_manifest(mod, TARGET) == manifest["launches"]  # also callable directly


@needs_nvcc
@pytest.mark.parametrize("case", ["spill", "registers", "shared_memory", "nvcc", "garbage"])
def test_failures_are_data(built, case):
    res, _ = built[case]
    assert not res.ok
    assert res.artifact_path is None
    assert res.error_kind == ("build" if case == "garbage" else case), res.error_msg
    assert res.error_msg
    if case in ("spill", "registers", "shared_memory"):
        assert res.info["kernels"]  # what was gathered is still returned
        assert "main_kernel" in res.error_msg
    work = Path(built["fp32"][0].artifact_path).parent
    built_ok = sum(res.ok for res, _ in built.values())
    assert sorted(p.suffix for p in work.iterdir()) == [".cuda"] * built_ok  # failures removed


@needs_nvcc
def test_spill_reports_bytes(built):
    res, _ = built["spill"]
    kernel = res.info["kernels"]["main_kernel"]
    assert kernel["spill_stores_bytes"] > 0 and kernel["spill_loads_bytes"] > 0
    assert f"{kernel['spill_stores_bytes']} bytes stores" in res.error_msg


@needs_nvcc
def test_nvcc_helpers():
    assert NVCC is not None and NVCC[0].isdigit()
    assert cuda_arch_supported(ARCH)
    assert not cuda_arch_supported("sm_10")
    assert not cuda_arch_supported("not-an-arch")
    if int(NVCC.split(".")[0]) >= 13:
        assert not cuda_arch_supported("sm_70")


def test_nvcc_helpers_without_nvcc():
    assert nvcc_version("/nonexistent/nvcc") is None
    assert not cuda_arch_supported("sm_90", "/nonexistent/nvcc")


def test_parse_ptxas():
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'k1' for 'sm_90'
ptxas info    : Function properties for k1
    24 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 384 bytes cmem[0]
ptxas info    : Compiling entry function 'k2' for 'sm_90'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 90 registers, used 1 barriers
"""
    assert parse_ptxas(text) == {
        "k1": {
            "registers": 255,
            "spill_stores_bytes": 16,
            "spill_loads_bytes": 12,
            "static_shared_bytes": 2048,
            "stack_bytes": 24,
        },
        "k2": {
            "registers": 90,
            "spill_stores_bytes": 0,
            "spill_loads_bytes": 0,
            "static_shared_bytes": 0,
            "stack_bytes": 0,
        },
    }
    assert parse_ptxas("") == {}


def test_runner_loads_kernel_so_from_a_build_folder(tmp_path):
    folder = tmp_path / "cand.cuda"
    folder.mkdir()
    np.savez(tmp_path / "args.npz", arg0=np.zeros(4, "float32"))
    with LocalRunner(num_threads=1, timeout_s=30) as runner:
        (res,) = runner.run([RunInput(str(folder), str(tmp_path / "args.npz"), None)])
    assert res.error_kind == "run"
    assert os.path.join(str(folder), "kernel.so") in res.error_msg


@needs_nvcc
def test_run_on_gpu(built, tmp_path):
    if not tvm.cuda(0).exist:
        pytest.skip("no CUDA device: kernels were compiled but cannot run here")
    rng = np.random.default_rng(0)
    for case, dtype, rtol in (("fp32", "float32", 1e-4), ("wmma", "float16", 1e-2)):
        a = rng.uniform(-1, 1, (N, N)).astype(dtype)
        b = rng.uniform(-1, 1, (N, N)).astype(dtype)
        expected = a.astype("float32") @ b.astype("float32")
        np.savez(tmp_path / f"{case}.npz", arg0=a, arg1=b, arg2=np.zeros((N, N), "float32"))
        np.savez(tmp_path / f"{case}_expected.npz", arg2=expected)
        with LocalRunner(num_threads=1, timeout_s=60) as runner:
            (res,) = runner.run(
                [
                    RunInput(
                        built[case][0].artifact_path,
                        str(tmp_path / f"{case}.npz"),
                        str(tmp_path / f"{case}_expected.npz"),
                        rtol=rtol,
                        device="cuda",
                    )
                ]
            )
        assert res.ok, (case, res.error_kind, res.error_msg)


def test_one_block_launch_bounds() -> None:
    src = (
        'extern "C" __global__ void __launch_bounds__(256) main_kernel(float* C);\n'
        'extern "C" __global__ void __launch_bounds__(64) main_kernel_1(float* C) {}\n'
    )
    out, changed = one_block_launch_bounds(src)
    assert changed
    assert "__launch_bounds__(256, 1) main_kernel(" in out
    assert "__launch_bounds__(64, 1) main_kernel_1(" in out
    assert one_block_launch_bounds("__global__ void k() {}") == ("__global__ void k() {}", False)
