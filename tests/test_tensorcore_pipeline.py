"""The TensorCore space's pipelining and split-K knobs (``<stage>.stages``, ``<stage>.split_k``):
the CSP constraints, the launch manifest, the split-K partial-sum arithmetic on the CPU, the
offline bundle's manifest check, and cubins whose SASS has ``LDGSTS`` (cp.async) exactly when
pipelined (skipped without nvcc, and the SASS part without cuobjdump).

The first test that applies a schedule imports TVM's WMMA intrinsic generators (about 20 s,
once per session).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm

from heronlike import ops
from heronlike.measure.cuda import cuobjdump_path
from heronlike.measure.run_bundle import check_manifest
from heronlike.offline import bundle_assignments
from heronlike.space import generate_space

sys.path.insert(0, str(Path(__file__).parent))  # the shared TensorCore test helpers
from tensorcore_helpers import build_checked, sample, source_and_launches  # noqa: E402

TC = "cuda -tensorcore"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


# -- stages ---------------------------------------------------------------------------------------


def test_stages_count_shared_memory_per_stage_and_use_cp_async() -> None:
    space = generate_space(ops.gemm(256, 256, 256, dtype="float16"), TC)
    csp = space.csp
    assert csp.candidates("C.stages") == (1, 2, 3, 4)
    assert space.target.build_options()["pass_config"]["tirx.use_async_copy"] is True
    capacity = space.target.memory_level("shared").capacity_bytes
    for stages in (1, 2, 3, 4):
        for a in sample(space, 1, seed=stages, **{"C.stages": stages, "C.split_k": 1}):
            assert csp.violations(a) == []
            assert a["C.shared.bytes"] == stages * a["C.shared.bytes_per_stage"] <= capacity
            if stages > 1:  # cp.async moves 4, 8 or 16 bytes: 2-byte fetches stay synchronous
                assert a["C.a.shared.vector"] * 2 >= 4 and a["C.b.shared.vector"] * 2 >= 4
            src, launches = source_and_launches(space, a)
            (launch,) = launches
            assert launch["dynamic_shared_bytes"] == a["C.shared.bytes"]
            assert ("cp.async.c" in src) == (stages > 1), stages  # .cg (16 B) or .ca (4, 8 B)
            assert ("cp.async.wait_group" in src) == (stages > 1)


def test_no_cp_async_before_sm80() -> None:
    space = generate_space(ops.gemm(128, 128, 128, dtype="float16"), TC + " -arch=sm_75")
    assert space.csp.candidates("C.stages") == (1, 2)  # 2: the synchronous double buffer
    assert space.target.build_options()["pass_config"]["tirx.use_async_copy"] is False
    (a,) = sample(space, 1, seed=1, **{"C.stages": 2, "C.split_k": 1})
    src, (launch,) = source_and_launches(space, a)
    assert "cp.async" not in src
    assert launch["dynamic_shared_bytes"] == 2 * a["C.shared.bytes_per_stage"]


# -- split-K --------------------------------------------------------------------------------------


def test_split_k_factors_divide_k_and_respect_the_sms() -> None:
    skinny = ops.gemm(32, 1000, 4096, dtype="float16")
    csp = generate_space(skinny, TC).csp
    assert csp.candidates("C.split_k") == (1, 2, 4, 8, 16, 32)  # whole 16-deep steps of K
    assert generate_space(skinny, TC + " -sms=8").csp.candidates("C.split_k") == (1, 2, 4, 8)
    odd = generate_space(ops.gemm(64, 64, 48, dtype="float16"), TC).csp
    assert odd.candidates("C.split_k") == (1, 3)
    # not offered: a single reduction step, or an operand computed by another stage
    assert "C.split_k" not in generate_space(ops.gemm(64, 64, 16, dtype="float16"), TC).csp.vars
    conv = generate_space(ops.c2d(2, 8, 8, 16, 32, 3, 3, 1, 1, dtype="float16"), TC).csp
    assert not any(v.endswith(".split_k") for v in conv.vars)


def test_split_k_candidates_have_two_launches_and_a_workspace() -> None:
    space = generate_space(ops.gemm(32, 1000, 4096, dtype="float16"), TC)
    sms = space.target.cores
    for split in (2, 32):
        for a in sample(space, 1, seed=split, **{"C.split_k": split}):
            assert space.csp.violations(a) == []
            assert 4096 % (16 * split) == 0
            assert a["C.v_k.per_split"] * split == 4096
            assert a["C.split_k.grid"] == a["C.blockIdx"] * split <= 2 * sms
            src, launches = source_and_launches(space, a)
            partial, total = launches
            assert partial["grid"] == [a["C.blockIdx"], split, 1]
            assert partial["block"] == [32, a["C.warps"], 1]
            assert partial["dynamic_shared_bytes"] == a["C.shared.bytes"]
            assert sorted(i for i in partial["args"] if i is not None) == [0, 1]  # X, W
            workspace = {"name": "C.rf", "shape": [split * 32 * 1008], "dtype": "float32"}
            (ws,) = [w for w in partial["workspaces"] if w is not None]
            assert ws == {**workspace, "bytes": split * 32 * 1008 * 4}
            assert total["args"] == [2, None] and total["workspaces"][1] == ws  # C, partials
            assert total["grid"][0] * total["block"][0] == 32 * 1008
            assert ("wmma::mma_sync" in src or "mma.sync.aligned" in src) and "blockIdx.y" in src
    # factor 1 is today's single kernel
    (a,) = sample(space, 1, seed=1, **{"C.split_k": 1})
    _, launches = source_and_launches(space, a)
    assert len(launches) == 1 and launches[0]["grid"][1] == 1


@pytest.mark.parametrize("split", [2, 4, 16])
def test_split_k_partial_sums_are_exact_on_the_cpu(split: int) -> None:
    """The split and ``rfactor`` the ``split_k`` step makes (without its GPU bindings, so LLVM
    builds it): ``split`` partial sums over K slices, then their ordered sum, equal the GEMM
    (integers: exactly)."""
    from tvm import s_tir, te

    from heronlike.template import split_k

    m, n, k = 16, 24, 256
    x = te.placeholder((m, k), "int32", name="X")
    w = te.placeholder((n, k), "int32", name="W")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="C")
    sch = s_tir.Schedule(te.create_prim_func([x, w, c]))
    part, total, *loops = split_k(sch, sch.get_sblock("C"), split, bind=False)
    assert sch.get(part).name_hint == "C_rf" and len(loops) == 3
    assert [int(sch.get(lp).extent) for lp in loops] == [m, n, k // split]
    ex = tvm.compile(sch.mod, target="llvm")
    rng = np.random.default_rng(split)
    xa = rng.integers(-100, 100, (m, k)).astype("int32")
    wa = rng.integers(-100, 100, (n, k)).astype("int32")
    out = tvm.runtime.tensor(np.zeros((m, n), "int32"))
    ex["main"](tvm.runtime.tensor(xa), tvm.runtime.tensor(wa), out)
    np.testing.assert_array_equal(out.numpy(), xa @ wa.T)


def test_bundle_manifest_check_accepts_workspaces_only_when_well_formed() -> None:
    workload = {
        "params": [
            {"shape": [32, 64], "dtype": "float16"},
            {"shape": [16, 64], "dtype": "float16"},
            {"shape": [32, 16], "dtype": "float32"},
        ]
    }
    ws = {"name": "C.rf", "shape": [4 * 32 * 16], "dtype": "float32", "bytes": 4 * 32 * 16 * 4}
    manifest = {
        "params": workload["params"],
        "launches": [
            {"kernel": "a", "grid": [2, 4, 1], "block": [32, 1, 1], "args": [None, 1, 0]},
            {"kernel": "b", "grid": [4, 1, 1], "block": [128, 1, 1], "args": [2, None]},
        ],
    }
    manifest["launches"][0]["workspaces"] = [ws, None, None]
    manifest["launches"][1]["workspaces"] = [None, ws]
    assert check_manifest(manifest, workload) is None
    manifest["launches"][1]["workspaces"] = [None, {**ws, "bytes": 7}]
    assert "workspace" in check_manifest(manifest, workload)
    manifest["launches"][1]["workspaces"] = [None, None]
    assert "not a parameter index" in check_manifest(manifest, workload)


# -- rasterised block order ----------------------------------------------------------------------


def _block_tile(space, a, block: int) -> tuple[int, int]:  # noqa: ANN001
    """(m tile, n tile) that thread block ``block`` computes, from the X and W fetch indices:
    the built schedule's own arithmetic, evaluated with every thread index 0."""
    import re

    txt = space.apply(a).mod["main"].script()
    bx = re.search(r"for (\w+) in T\.thread_binding\([^)]*blockIdx\.x", txt)
    assert bx
    rows = []
    for buffer in ("X_shared.dyn", "W_shared.dyn"):
        blk = txt[txt.index(f'T.sblock("{buffer}")') :]
        v0 = re.search(r"v0 = T\.axis\.spatial\(\d+, (.*)\)\n", blk).group(1)
        env = {bx.group(1): block}
        env.update({name: 0 for name in re.findall(r"ax\d_ax\d_fused_\d", v0)})
        rows.append(eval(v0, {}, env))  # noqa: S307 - TVMScript index arithmetic
    return rows[0] // a["C.v_i@S0"], rows[1] // a["C.v_j@S0"]


def test_blocks_are_rasterised_in_groups_of_m_tiles() -> None:
    """``C.v_i.SR`` splits the m tiles into groups; consecutive blocks walk a group's m tiles
    (``C.v_i.S0`` of them) for one n tile, then the next n tile: SR = 1 is column-major."""
    space = generate_space(ops.gemm(512, 512, 256, dtype="float16"), TC)
    assert "C.v_i.SR" in space.csp.knobs
    for sr in (1, 2, 4):
        (a,) = sample(space, 1, seed=sr, **{"C.v_i.SR": sr, "C.split_k": 1})
        group, n_tiles = a["C.v_i.S0"], a["C.v_j.S0"]
        m_tiles = sr * group
        assert a["C.blockIdx"] == m_tiles * n_tiles
        for b in range(0, a["C.blockIdx"], max(1, a["C.blockIdx"] // 17)):
            g, rest = divmod(b, n_tiles * group)
            assert _block_tile(space, a, b) == (g * group + rest % group, rest // group), b


def test_fragment_double_buffering_pipelines_the_inner_loop() -> None:
    """``fragment_stages`` 2 pipelines the fragment step (R1) too: the inner loop gets stages
    [0, 0, 1], the outer loop (when pipelined) counts the inner prologue and epilogue among
    its children, each operand's fragment registers double, and it needs two R1 steps."""
    import re

    space = generate_space(ops.gemm(64, 128, 512, dtype="float16"), TC)
    for seed, stages in ((0, 1), (1, 3)):
        (a,) = sample(space, 1, seed, **{"C.fragment_stages": 2, "C.stages": stages})
        assert a["C.v_k.R1"] >= 2
        for role in ("a", "b"):
            held = a[f"C.{role}.fragments"] * a[f"C.{role}.fragment_registers"]
            assert a[f"C.{role}.registers"] == 2 * held
        script = space.apply(a).mod.script()
        found = re.findall(r'"software_pipeline_stage": \[([0-9, ]+)\]', script)
        want = ["0, 0, 1"] if stages == 1 else [f"0, 0, {stages - 1}, {stages - 1}, {stages - 1}"]
        assert sorted(found) == sorted(want + (["0, 0, 1"] if stages > 1 else [])), found
    with pytest.raises(Exception, match="infeasible|no solution|Infeasible"):
        sample(space, 1, 0, **{"C.fragment_stages": 2, "C.v_k.R1": 1})


# -- cubins and SASS ------------------------------------------------------------------------------


@needs_nvcc
def test_pipelined_and_split_k_cubins_build_without_spills(tmp_path: Path) -> None:
    """A handful of candidates of a small GEMM (1, 2 and 4 stages; 3 stages with split-K 4;
    fragment double buffering with 2 stages, and with split-K 2), built by nvcc for sm_90:
    none spills; with cuobjdump, the SASS has ``LDGSTS`` (cp.async) exactly
    when pipelined and ``HMMA`` always; the split-K ones have a partial-sum and a sum kernel."""
    space = generate_space(ops.gemm(64, 128, 512, dtype="float16"), TC)
    # (stages, split_k, fragment_stages)
    wanted = [(1, 1, 1), (2, 1, 1), (4, 1, 1), (3, 4, 1), (2, 1, 2), (1, 2, 2)]
    samples = [
        sample(space, 1, seed=10 + i, **{"C.stages": s, "C.split_k": f, "C.fragment_stages": r})[0]
        for i, (s, f, r) in enumerate(wanted)
    ]
    built = build_checked(space, samples, [f for _, f, _ in wanted])
    for (info, sass), (stages, split, _) in zip(built, wanted, strict=True):
        assert len(info["kernels"]) == (1 if split == 1 else 2)
        if sass is not None:
            assert sass.get("HMMA", 0) > 0
            assert (sass.get("LDGSTS", 0) > 0) == (stages > 1), (stages, sass)
    if cuobjdump_path() is None:
        pytest.skip("cuobjdump not found: the SASS part was not checked")


@needs_nvcc
def test_split_k_bundle_passes_the_runner_checks(tmp_path: Path, run_standin) -> None:  # noqa: ANN001
    """A bundle holding split-K candidates (two launches, a partial-sum workspace) is accepted
    by ``run_bundle.py``'s manifest and workload checks (the stand-in, no GPU); on a GPU the
    same runner allocates the workspace and checks the output against the reference."""
    compute = ops.gemm(32, 64, 512, dtype="float16")
    space = generate_space(compute, TC)
    a, b = (sample(space, 1, seed=s, **{"C.split_k": f})[0] for s, f in ((1, 4), (2, 8)))
    path, failed = bundle_assignments(compute, TC, tmp_path / "b", {"k4": a, "k8": b}, repeat=3)
    assert path is not None and not failed
    for cid, split in (("k4", 4), ("k8", 8)):
        manifest = json.loads((path / "cands" / cid / "manifest.json").read_text())
        assert [launch["grid"][1] for launch in manifest["launches"]] == [split, 1]
    results = run_standin(path)
    assert {r["error_kind"] for r in results["candidates"].values()} == {"standin"}
