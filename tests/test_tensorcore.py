"""The TensorCore target without a GPU: target strings, the CSP, schedules that tensorize onto
WMMA groups, CUDA source, the launch manifest against the constraint model, cubins through
nvcc (skipped without it), an offline bundle round trip with the stand-in runner, and a tune
replayed from a committed results fixture.

The first test that applies a schedule imports TVM's WMMA intrinsic generators (about 20 s,
once per session).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import tvm

import heronlike
from heronlike import ops
from heronlike.csp import Le
from heronlike.errors import UnknownTargetError, UnsupportedShapeError
from heronlike.measure.bundle import import_results
from heronlike.measure.cuda import launch_manifest
from heronlike.offline import bundle_assignments, prepare_bundle
from heronlike.records import Records
from heronlike.sampler import RandSAT
from heronlike.space import generate_space
from heronlike.target import get_target

TC = "cuda -tensorcore"
FIXTURE = Path(__file__).parent / "data" / "tensorcore_gemm256"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def _compile_source(space, assignment) -> str:  # noqa: ANN001
    sch = space.apply(assignment)
    with tvm.transform.PassContext(config=space.target.build_options()["pass_config"]):
        ex = tvm.compile(sch.mod, target=tvm.target.Target(space.target.tvm_target()))
    return ex.mod.imports[0].inspect_source()


def _family(space, stage: str) -> list:  # noqa: ANN001
    """The intrinsic groups the ``<stage>.intrinsic`` knob chooses among, in knob order."""
    sig = space.matches[stage].intrinsic.signature
    return [i for i in space.target.intrinsics if i.group and i.signature == sig]


# -- target strings ---------------------------------------------------------------------------


def test_target_strings() -> None:
    t = get_target(TC)
    assert t.arch == "sm_90" and t.key == "cuda -tensorcore -arch=sm_90"
    assert t.memory_level("shared").capacity_bytes == 48 * 1024
    assert get_target("cuda -tensorcore -arch=sm_80").arch == "sm_80"
    assert get_target("tensorcore -arch=sm_90 -max-shared-memory=227").shared_kb == 227
    assert get_target({"kind": "cuda", "tensorcore": True}).tvm_target()["arch"] == "sm_90"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cuda", "cuda -tensorcore"),
        ("cuda -tensorcore -arch=sm_70", "sm_75 or newer"),
        ("cuda -tensorcore -arch=volta", "not an NVIDIA arch"),
        ("cuda -tensorcore -max-shared-memory=300", "1 to 227 KB"),
        ("cuda -tensorcore -max-shared-memory=100 -arch=sm_75", "1 to 64 KB"),
        ("cuda -tensorcore -warp=64", "no option warp"),
    ],
)
def test_bad_target_strings(spec: str, message: str) -> None:
    with pytest.raises(UnknownTargetError, match=message):
        get_target(spec)


def test_int8_is_signed_on_tensorcore() -> None:
    assert ops.target_dtype("int8", TC) == "int8-int8"
    assert ops.target_dtype("int8", "dlboost -mcpu=znver4") == "int8"
    space = generate_space(ops.gemm(64, 64, 64, dtype="int8-int8"), TC)
    assert space.matches["C"].intrinsic.signature == "int8 x int8 -> int32"


def test_a_layout_wmma_cannot_load_is_a_typed_error() -> None:
    from tvm import te

    X = te.placeholder((64, 64), "float16", name="X")
    W = te.placeholder((64, 64), "float16", name="W")  # K x N: not a column-major B
    k = te.reduce_axis((0, 64), name="k")
    C = te.compute(
        (64, 64), lambda i, j: te.sum(X[i, k].astype("float32") * W[k, j].astype("float32"), k)
    )
    with pytest.raises(UnsupportedShapeError, match="last two dimensions"):
        generate_space([X, W, C], TC)


CONVS = {
    "C1-like": (2, 8, 8, 16, 32, 3, 3, 1, 1),
    "C4-like": (2, 16, 16, 32, 64, 1, 1, 2, 0),
    "dilated": (1, 16, 16, 16, 16, 3, 3, 2, 2, 2),
}


NORMALIZED = {**{k: lambda a=a: ops.c2d(*a, dtype="float16") for k, a in CONVS.items()}}
NORMALIZED["G3-like"] = lambda: ops.gemm(32, 1000, 64, dtype="float16")


@pytest.mark.parametrize("compute", NORMALIZED.values(), ids=NORMALIZED.keys())
def test_normalized_compute_computes_the_same(compute) -> None:  # noqa: ANN001
    """The target's rewrite (a convolution as an implicit GEMM with a reshaped weight and
    output and an im2col gather; a GEMM with n padded) gives the logical compute's result:
    both run unscheduled on the CPU, the kernel's arrays made by ``prepare_args`` and its
    output viewed back by the same check the runners use."""
    import numpy as np

    from heronlike.measure.check import compare
    from heronlike.reference import random_inputs, reference_outputs

    space = generate_space(compute(), TC)
    assert space.dag is not space.logical
    (main,) = [s for s in space.dag.stages if s.mac]
    assert main.mac.a.is_plain and main.mac.b.is_plain and main.write.is_plain
    arrays = random_inputs(space.logical, np.random.default_rng(0))
    ((out, expected),) = reference_outputs(space.logical, arrays).items()
    kernel_args = space.prepare_args(arrays)
    ex = tvm.compile(tvm.IRModule({"main": space.dag.func}), target="llvm")
    tensors = [tvm.runtime.tensor(a, tvm.cpu()) for a in kernel_args]
    ex["main"](*tensors)
    # the expected output in the kernel's layout, as the tune loop hands it to the runners
    in_kernel = space.prepare_args([expected if i == out else a for i, a in enumerate(arrays)])
    assert compare(tensors[out].numpy(), in_kernel[out], 1e-3) is None


def test_convolution_reference_spec() -> None:
    from heronlike.reference import reference_spec

    spec = reference_spec(space_logical(ops.c2d(2, 9, 9, 16, 32, 3, 3, 2, 1, 2)))
    assert spec == {
        "kind": "conv2d_nhwc",
        "input": 0,
        "weight": 1,
        "output": 2,
        "stride": [2, 2],
        "padding": [1, 1],
        "dilation": [2, 2],
    }


def test_a_convolution_with_an_epilogue_has_no_conv2d_reference_spec() -> None:
    # the product writes an intermediate the epilogue reads: no parameter holds its output, so
    # the spec is not conv2d_nhwc (a KeyError here stopped every tune of a padding-free
    # convolution with a requantisation epilogue, such as a strided 1 x 1 one)
    from heronlike.reference import reference_spec

    compute = ops.requantize(ops.c2d(1, 8, 8, 16, 32, 1, 1, 2, 0, 1, dtype="int8"), 4)
    assert reference_spec(space_logical(compute)) is None


def space_logical(compute):  # noqa: ANN001, ANN201
    from heronlike.dag import ComputeDAG

    return ComputeDAG.from_compute(compute)


# -- CSP and schedules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("compute", "dtype_tag"),
    [
        (lambda: ops.gemm(256, 256, 256, dtype="float16"), "half"),
        (lambda: ops.bmm(4, 128, 128, 64, dtype="float16"), "half"),
        (lambda: ops.gemm(128, 128, 128, dtype="int8-int8"), "signed char"),
        (lambda: ops.gemm(128, 128, 128, dtype="bfloat16"), "nv_bfloat16"),
        (lambda: ops.gemm(128, 128, 128, dtype="float16-float16"), "half"),
        (lambda: ops.c2d(4, 14, 14, 64, 64, 3, 3, 1, 1, dtype="float16"), "half"),
    ],
    ids=["gemm-f16f32", "bmm-f16f32", "gemm-s8s32", "gemm-bf16f32", "gemm-f16f16", "c2d"],
)
def test_sampled_programs_tensorize_onto_wmma(compute, dtype_tag: str) -> None:  # noqa: ANN001
    space = generate_space(compute(), TC)
    stage = next(iter(space.matches))
    knobs = set(space.csp.knobs)
    assert {f"{stage}.intrinsic", f"{stage}.unroll", f"{stage}.a.shared.vector"} <= knobs
    assert f"{stage}.stages" in knobs
    assert any(isinstance(c, Le) and c.b == 48 * 1024 for c in space.csp.constraints)
    family = _family(space, stage)
    samples = RandSAT(space.csp, seed=3).sample(3)
    for a in samples:
        assert space.csp.violations(a) == []
        m, n = a[f"{stage}.intrin_m"], a[f"{stage}.intrin_n"]
        assert m * n * 16 == 4096 and {m, n} <= {8, 16, 32}
        src = _compile_source(space, a)
        if family[a[f"{stage}.intrinsic"]].fragment_layout is not None:
            assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix.sync" in src
            assert "wmma::" not in src
            continue
        assert "wmma::mma_sync" in src
        assert f"fragment<nvcuda::wmma::matrix_a, {m}, {n}, 16, {dtype_tag}" in src
        assert f"fragment<nvcuda::wmma::accumulator, {m}, {n}, 16," in src
        threads = re.search(r"__launch_bounds__\((\d+)\)", src)
        assert threads and int(threads.group(1)) % 32 == 0 and int(threads.group(1)) <= 1024


@pytest.mark.parametrize(
    "compute",
    [
        lambda: ops.gemm(256, 256, 256, dtype="float16"),
        lambda: ops.gemm(32, 1000, 256, dtype="float16"),  # n padded to 1008 (G3's N)
        lambda: ops.bmm(4, 128, 128, 64, dtype="float16"),
        lambda: ops.gemm(128, 128, 128, dtype="int8-int8"),
        lambda: ops.c2d(16, 14, 14, 256, 256, 3, 3, 1, 1, dtype="float16"),  # C5
    ],
    ids=["gemm", "gemm-padded", "bmm", "gemm-int8", "c2d"],
)
def test_manifest_shared_memory_equals_the_constraint_model(compute) -> None:  # noqa: ANN001
    space = generate_space(compute(), TC)
    stage = next(iter(space.matches))
    target = space.target
    for a in RandSAT(space.csp, seed=5).sample(4):
        mod = space.apply(a).mod
        with tvm.transform.PassContext(config=target.build_options()["pass_config"]):
            launches = launch_manifest(mod, target.tvm_target())
        # one kernel (no host-side loops, no intermediate buffers), or with split-K a
        # partial-sum kernel and a kernel summing the partials from a workspace
        split = a.get(f"{stage}.split_k", 1)
        assert len(launches) == (1 if split == 1 else 2), launches
        tensor = launches[0]
        params = sorted({i for launch in launches for i in launch["args"] if i is not None})
        assert params == list(range(len(space.logical.params))), launches
        assert tensor["dynamic_shared_bytes"] == a[f"{stage}.shared.bytes"], launches
        assert tensor["block"] == [32, a[f"{stage}.warps"], 1]
        assert tensor["grid"] == [a[f"{stage}.blockIdx"], split, 1]


@needs_nvcc
def test_cubins_build_without_spills() -> None:
    from heronlike.measure import BuildInput

    space = generate_space(ops.gemm(512, 512, 512, dtype="float16"), TC)
    target = space.target
    samples = RandSAT(space.csp, seed=11).sample(6)
    inputs = [
        BuildInput(tvm.ir.save_json(space.program(a)), target.tvm_target(), target.build_options())
        for a in samples
    ]
    with target.make_builder(timeout_s=120) as builder:
        results = builder.build(inputs)
        ok = [r for r in results if r.ok]
        assert len(ok) >= 5, [(r.error_kind, r.error_msg) for r in results]
        for r, a in zip(results, samples, strict=True):
            if not r.ok:
                continue
            art = Path(r.artifact_path)
            assert (art / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"
            for kernel in r.info["kernels"].values():  # two with split-K
                assert 0 < kernel["registers"] <= 255
                assert kernel["spill_stores_bytes"] == 0 and kernel["spill_loads_bytes"] == 0
            assert len(r.info["launches"]) == (1 if a["C.split_k"] == 1 else 2)
            assert r.info["launches"][0]["dynamic_shared_bytes"] == a["C.shared.bytes"]


def test_padded_gathers_unroll_at_most_16_steps() -> None:
    """A padded convolution's block loop unrolls at most 16 steps (its unrolled im2col gathers
    spilled at any ptxas register-usage level), a plain GEMM's up to 64."""
    padded = generate_space(ops.c2d(2, 8, 8, 16, 16, 3, 3, 1, 1, dtype="float16"), TC).csp
    plain = generate_space(ops.gemm(64, 64, 64, dtype="float16"), TC).csp
    assert padded.candidates("Y.unroll") == (0, 1)
    assert plain.candidates("C.unroll") == (0, 1, 2)
    assert padded.candidates("Y.a.shared.vector") == plain.candidates("C.a.shared.vector")


# -- offline bundles and replay -----------------------------------------------------------------


@needs_nvcc
def test_bundle_round_trip_with_the_stand_in_runner(tmp_path: Path, run_standin) -> None:  # noqa: ANN001
    compute = ops.gemm(128, 128, 128, dtype="float16")
    records = tmp_path / "records.sqlite"
    first = prepare_bundle(compute, TC, tmp_path / "b1", batch_size=4, records=records, seed=2)
    assert first.bundle is not None and first.candidates + first.build_failures == 4
    bundle = json.loads((first.bundle / "bundle.json").read_text())
    (workload,) = bundle["workloads"]
    assert workload["reference"] == {
        "kind": "einsum",
        "spec": "ac,bc->ab",
        "operands": [0, 1],
        "output": 2,
    }
    run_standin(first.bundle)
    summary = import_results(first.bundle, records, allow_standin=True)
    assert summary.imported == first.candidates
    with Records(records) as db:
        done = db.trials(first.workload_key, first.target_key)
    assert len(done) == 4
    # the next round resumes from the records and proposes other candidates
    second = prepare_bundle(compute, TC, tmp_path / "b2", batch_size=4, records=records, seed=2)
    assert second.trials == 4
    seen = {json.dumps(t.assignment, sort_keys=True) for t in done}
    nxt = json.loads((second.bundle / "bundle.json").read_text())["candidates"]
    assert not seen & {json.dumps(c["assignment"], sort_keys=True) for c in nxt}


@needs_nvcc
def test_given_assignments_become_one_bundle(tmp_path: Path, run_standin) -> None:  # noqa: ANN001
    """``bundle_assignments`` (used to re-measure the bests of simulated searches): the given
    ids and assignments, built, in one bundle the runner accepts; a broken one is reported."""
    compute = ops.gemm(128, 128, 128, dtype="float16")
    space = generate_space(compute, TC)
    a, b = RandSAT(space.csp, seed=5).sample(2)
    broken = {**a, "C.unroll": 99}  # not one of the CSP's candidate values
    path, failed = bundle_assignments(
        compute, TC, tmp_path / "given", {"cga-s0": a, "rand-s0": b, "bad-s0": broken}, repeat=3
    )
    assert path is not None and set(failed) == {"bad-s0"}
    assert "not a valid assignment" in failed["bad-s0"] and "C.unroll" in failed["bad-s0"]
    bundle = json.loads((path / "bundle.json").read_text())
    got = {c["id"]: c["assignment"] for c in bundle["candidates"]}
    assert got["cga-s0"] == a and got["rand-s0"] == b
    assert bundle["policy"]["repeat"] == 3
    results = run_standin(path)
    assert {"cga-s0", "rand-s0"} <= set(results["candidates"])


def test_tune_replays_a_committed_results_fixture(tmp_path: Path) -> None:
    """``tests/data/tensorcore_gemm256`` is a bundle (bundle.json, no cubins) of 24 candidates
    of a 256³ fp16 GEMM and a results.json whose latencies are *synthetic* (made by
    ``make_fixture.py`` beside it, not measured on a GPU): the fixture tests the import and
    simulation-mode plumbing on a TensorCore space, not GPU speed."""
    records = tmp_path / "fixture.sqlite"
    summary = import_results(FIXTURE, records)
    assert summary.imported == 24 and not summary.standin
    compute = ops.gemm(256, 256, 256, dtype="float16")
    result = heronlike.tune(
        compute, TC, trials=12, explorer="random", seed=0, simulate=records, batch_size=4
    )
    assert result.simulated and result.trials_run == 12
    assert result.latency_s is not None and result.errors.get("not_recorded", 0) < 12
    assert "mma" in (result.trace or "")  # the tensorized group: WMMA or ldmatrix + mma.sync


@needs_nvcc
def test_convolution_bundle_round_trip(tmp_path: Path, run_standin) -> None:  # noqa: ANN001
    """A conv2d bundle carries the kernel's reshaped parameters beside the logical shapes and
    a conv2d_nhwc reference; the stand-in validates it."""
    compute = ops.c2d(2, 8, 8, 16, 32, 3, 3, 1, 1, dtype="float16")
    rnd = prepare_bundle(compute, TC, tmp_path / "b", batch_size=2, records=tmp_path / "r.db")
    assert rnd.bundle is not None
    (workload,) = json.loads((rnd.bundle / "bundle.json").read_text())["workloads"]
    assert workload["reference"]["kind"] == "conv2d_nhwc"
    shapes = {p["name"]: (p["shape"], p["logical_shape"]) for p in workload["params"]}
    assert shapes["W"] == ([32, 144], [32, 3, 3, 16])
    assert shapes["Y"] == ([128, 32], [2, 8, 8, 32])
    results = run_standin(rnd.bundle)
    assert all(r["error_kind"] == "standin" for r in results["candidates"].values())


def test_tvm_tensor_intrinsics_import_registers_them_and_restores_inspect() -> None:
    """``import_tvmscript_module`` (TVM's intrinsic generators, imported with a memo of
    ``inspect.getmodule`` for non-file frames), in a fresh process: the generators and TVM's
    registered groups are there, and ``inspect.getmodule`` is the standard one again."""
    import subprocess
    import sys

    code = (
        "import inspect\n"
        "from heronlike.intrinsic import import_tvmscript_module\n"
        "from tvm.s_tir import TensorIntrin\n"
        "gen = import_tvmscript_module('tvm.s_tir.tensor_intrin.cuda')\n"
        "assert callable(gen.get_wmma_sync_intrin)\n"
        "assert TensorIntrin.get('mma_fill_16x16_f16') is not None\n"
        "assert TensorIntrin.get('dot_16x4_vnni') is not None\n"
        "assert inspect.getmodule.__qualname__ == 'getmodule'\n"
        "assert inspect.getmodule is inspect.__dict__['getmodule']\n"
        "assert inspect.getmodule.__code__.co_filename == inspect.__file__\n"
        "try:\n"
        "    import_tvmscript_module('tvm.s_tir.tensor_intrin.no_such')\n"
        "except ModuleNotFoundError:\n"
        "    print('ok')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
