"""The fair DL Boost table (``benchmarks/suite.py``, issue 25): padding, curves, VNNI detection,
the layouts MetaSchedule gets, the geometric means both ways, and one tiny end-to-end run that
resumes.

The end-to-end test runs the suite as the user does on an int8 GEMM 32×32×32 with 2 heronlike
trials (``--no-metaschedule``; about 30 s on 2 cores); the one with MetaSchedule is marked slow
(about 80 s: MetaSchedule's import and set-up).
"""

from __future__ import annotations

import csv
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import peak, suite  # noqa: E402
from heronlike.host import cpu_flags  # noqa: E402

VNNI = suite.Mode("vnni", "dlboost", "VNNI")
GENERAL = suite.Mode(
    "general", "llvm", "general: no VNNI; VNNI figures are unmeasured", mnemonic=None, tile=None
)
PMADDWD = suite.Mode(
    "general", "llvm", "general: vpmaddwd", "heronlike_avx2_pmaddwd_8x2_u8s8s32", "vpmaddwd", (8, 2)
)


def test_vnni_mode_pads_every_column_to_the_tile() -> None:
    _, op, params, _ = suite.parse_case("G3")  # N = 1000
    run, padded = suite.pad_to_intrinsic(op, params, VNNI)
    assert run == {"M": 32, "N": 1008, "K": 2048} and padded == "N 1000->1008"
    assert suite.pad_to_intrinsic(op, params, GENERAL) == (params, "")
    _, op, params, _ = suite.parse_case("C2D1")  # 64 channels: nothing to pad
    assert suite.pad_to_intrinsic(op, params, VNNI) == (params, "")
    run, padded = suite.pad_to_intrinsic("gemv", {"M": 30, "K": 10}, VNNI)
    assert run == {"M": 32, "K": 12} and padded == "M 30->32, K 10->12"
    # general mode with vpmaddwd: the same, to its 8 x 2 tile
    run, padded = suite.pad_to_intrinsic("gemv", {"M": 30, "K": 9}, PMADDWD)
    assert run == {"M": 32, "K": 10} and padded == "M 30->32, K 9->10"


def test_per_case_benchmarks_run_the_padded_int8_or_the_plain_float32_compute() -> None:
    int8 = suite.case_compute("G3", "int8", VNNI)
    assert (int8.name, int8.op, int8.target) == ("G3", "gemm", "dlboost")
    assert int8.params == {"M": 32, "N": 1008, "K": 2048}
    shapes = {tuple(int(d) for d in t.shape): str(t.dtype) for t in int8.compute}
    assert shapes[(32, 1008)] == "int32" and shapes[(32, 2048)] in ("uint8", "int8")
    f32 = suite.case_compute("G3", "float32", VNNI)
    assert (f32.target, f32.params) == ("llvm", {"M": 32, "N": 1000, "K": 2048})
    assert {str(t.dtype) for t in f32.compute} == {"float32"}
    with pytest.raises(ValueError, match="unsupported dtype 'int4'"):
        suite.case_compute("G3", "int4", VNNI)


def test_mode_follows_the_cpu() -> None:
    from heronlike.dla_targets.dlboost import host_has_vnni
    from heronlike.host import cpu_flags

    mode = suite.resolve_mode()
    assert mode.name == ("vnni" if host_has_vnni() else "general")
    if not host_has_vnni():
        assert mode.target == "llvm" and "unmeasured" in mode.note
        if "avx2" in cpu_flags():  # both tuners get the vpmaddwd intrinsic, padded to it
            assert mode.mnemonic == "vpmaddwd" and mode.tile in ((8, 2), (16, 2))
            assert mode.intrinsic and "vpmaddwd" in mode.note
    assert suite.resolve_mode("general").target == "llvm"
    assert suite.resolve_mode(target="dlboost").name == "vnni"


def test_mode_of_an_older_cpus_target() -> None:
    """An AVX2 target (timed on any AVX2 CPU, one with VNNI too) is the vpmaddwd mode, its
    note naming the target's CPU, MetaSchedule given the same intrinsic."""
    from heronlike.dla_targets.dlboost import PMADDWD_AVX2_A16

    mode = suite.resolve_mode(target="llvm -mcpu=znver3")
    assert (mode.name, mode.mnemonic, mode.tile) == ("general", "vpmaddwd", (8, 2))
    assert mode.intrinsic == PMADDWD_AVX2_A16.name and "unmeasured" in mode.note
    assert "-mcpu=znver3" in mode.note  # named on any host: a VNNI one says why


#: a quantized Linear under PyTorch's onednn engine: oneDNN's verbose log names the kernel it ran
_ONEDNN_LINEAR = """
import torch
from torch.ao.nn.quantized import Linear
torch.backends.quantized.engine = "onednn"
lin = Linear(256, 256)
lin.set_weight_bias(torch.quantize_per_tensor(torch.randn(256, 256), 0.1, 0, torch.qint8), None)
lin(torch.quantize_per_tensor(torch.rand(64, 256), 0.1, 0, torch.quint8))
"""


def test_pytorch_is_capped_at_vnni_in_the_vnni_table_on_an_amx_cpu(monkeypatch) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    monkeypatch.setattr(os, "environ", environ)
    general = suite.Mode("general", "llvm", "general")
    assert suite.cap_pytorch_isa(general) == general and "ONEDNN_MAX_CPU_ISA" not in environ
    vnni = suite.Mode("vnni", "dlboost", "VNNI")
    capped = suite.cap_pytorch_isa(vnni)
    if "amx_int8" not in cpu_flags():
        assert capped == vnni and "ONEDNN_MAX_CPU_ISA" not in environ
        return
    assert environ["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE_VNNI" and "AVX512_CORE_VNNI" in capped.note
    run = subprocess.run(
        [sys.executable, "-c", _ONEDNN_LINEAR],
        env={**environ, "ONEDNN_VERBOSE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    kernels = [
        ln for ln in run.stdout.splitlines() if ln.startswith("onednn_verbose") and "exec" in ln
    ]
    assert kernels and not any("amx" in ln for ln in kernels), run.stdout[-2000:]
    assert any("avx512_core_vnni" in ln for ln in kernels)


def test_curve_figures() -> None:
    curve = [(8, 10.0, None), (16, 20.0, 2e-3), (24, 30.0, 1.04e-3), (32, 40.0, 1e-3)]
    m = suite.curve_metrics(curve)
    assert m["best_s"] == 1e-3 and m["search_s"] == 40.0
    assert (m["trials_to_95"], m["s_to_95"]) == (24, 30.0)  # 1/1.04 >= 0.95
    assert suite.best_at(curve, 5.0) is None and suite.best_at(curve, 25.0) == 2e-3
    back = suite.parse_curve(suite.curve_text(curve))
    assert [p[:2] for p in back] == [p[:2] for p in curve]
    assert back[0][2] is None and back[-1][2] == pytest.approx(1e-3)


def test_trials_to_95_counts_trials_one_by_one() -> None:
    lats = [None, 3e-3, 1.04e-3, 2e-3, 1e-3]  # None: a failed trial
    assert suite.trials_to_converge(lats) == 3  # 1/1.04 >= 0.95
    assert suite.trials_to_converge([None, None]) is None
    back = suite.parse_trials(suite.trials_text(lats))
    assert back[0] is None and back[1:] == pytest.approx(lats[1:])


def test_one_target_for_both_tuners() -> None:
    """``target_95_ms`` is 95 % of the better final best; each tuner's trials and seconds until
    it first reached it, empty for the one that never did; own-best counts stay as they were."""
    row = {
        # heronlike: 2.0, 1.0 (its best) ... MetaSchedule: a flat curve, best 1.5 at trial 1
        "heronlike_trial_ms": suite.trials_text([2e-3, None, 1.04e-3, 1e-3]),
        "ms_trial_ms": suite.trials_text([1.5e-3, 1.6e-3, None, 1.5e-3]),
        "heronlike_curve": suite.curve_text([(2, 3.0, 2e-3), (4, 6.0, 1e-3)]),
        "ms_curve": suite.curve_text([(2, 9.0, 1.5e-3), (4, 20.0, 1.5e-3)]),
    }
    suite.add_target_columns(row)
    assert row["target_95_ms"] == pytest.approx(1.0 / 0.95)
    assert row["heronlike_trials_to_target"] == 3  # 1.04 <= 1.0526
    assert row["heronlike_s_to_target"] == 6.0  # the batch holding trial 3
    assert row["ms_trials_to_target"] is None and row["ms_s_to_target"] is None
    # by its own final best MetaSchedule converged at once, heronlike at trial 3
    assert suite.trials_to_converge(suite.parse_trials(row["ms_trial_ms"])) == 1
    assert suite.trials_to_converge(suite.parse_trials(row["heronlike_trial_ms"])) == 3
    one_sided = {"heronlike_trial_ms": row["heronlike_trial_ms"], "ms_trial_ms": ""}
    suite.add_target_columns(one_sided)  # no MetaSchedule trials: nothing to compare
    assert "target_95_ms" not in one_sided


def test_target_at_half_the_budget() -> None:
    """``half_target_95_ms`` is 95 % of the better best after half of MetaSchedule's budget;
    trials to it count over each tuner's whole budget, so a run with twice the table's budget
    says how many trials MetaSchedule needed for the table's target."""
    # after 4 trials: heronlike 1.0 (trial 2), MetaSchedule 1.5; target 1 / 0.95
    heronlike = [2e-3, 1e-3, None, 1.2e-3, 0.5e-3, 1e-3, 1e-3, 1e-3]
    ms = [1.5e-3, 1.6e-3, None, 1.5e-3, 1.2e-3, 1.05e-3, 0.9e-3, 1e-3]
    row = {
        "ms_trials": 8,
        "heronlike_trial_ms": suite.trials_text(heronlike),
        "ms_trial_ms": suite.trials_text(ms),
    }
    suite.add_target_columns(row)
    assert row["half_target_95_ms"] == pytest.approx(1.0 / 0.95)
    assert row["heronlike_trials_to_half_target"] == 2
    assert row["ms_trials_to_half_target"] == 6  # 1.05 <= 1.0526: after the half
    assert row["target_95_ms"] == pytest.approx(0.5 / 0.95)  # the whole budget's target
    row["ms_trial_ms"] = suite.trials_text([1.5e-3] * 8)  # never reached
    suite.add_target_columns(row)
    assert row["ms_trials_to_half_target"] is None
    no_budget = {k: v for k, v in row.items() if not k.startswith(("half", "ms_trials"))}
    suite.add_target_columns(no_budget)  # an older row without ms_trials: no half target
    assert "half_target_95_ms" not in no_budget


def test_launch_ceiling_is_the_compute_floor_over_it_plus_the_launch() -> None:
    """6 µs of compute and a 0.65-µs launch leave room for 6 / 6.65 = 90.2 % of the peak."""
    row = {"gop": 0.012, "peak_gops": 2000.0, "memory_floor_ms": 0.001, "launch_us": 0.65}
    suite.set_roofline(row)
    assert row["compute_floor_ms"] == pytest.approx(0.006)
    assert row["launch_ceiling_pct"] == pytest.approx(100 * 6 / 6.65)
    row.pop("launch_us")  # not measured (an older CSV): no ceiling
    suite.set_roofline(row)
    assert row["launch_ceiling_pct"] is None


def test_derive_equal_wall_time() -> None:
    row = {
        "heronlike_ms": 1.0,
        "ms_ms": 2.0,
        "heronlike_eq_wall_ms": 0.8,  # the harness's time of heronlike's longer tune
        "heronlike_vnni": True,
        "ms_vnni": False,
        "_heronlike_curve": [(8, 5.0, 2e-3), (16, 10.0, 1e-3)],
        "_ms_curve": [(8, 12.0, 3e-3), (16, 30.0, 2e-3)],
        "_heronlike_eq_wall_curve": [(8, 5.0, 2e-3), (16, 10.0, 1e-3), (40, 29.0, 0.9e-3)],
    }
    suite.derive(row, flop=2e9, peak=1e12)
    assert row["speedup_vs_ms"] == 2.0 and row["both_vnni"] is False
    assert row["heronlike_pct_peak"] == pytest.approx(100 * 2e9 / 1e-3 / 1e12)
    assert row["eq_wall_s"] == 30.0  # MetaSchedule's search time, the longer one
    assert row["speedup_vs_ms_at_eq_wall"] == pytest.approx(2.0 / 0.8)
    assert row["heronlike_eq_wall_tuning_best_ms"] == pytest.approx(0.9)
    assert row["ms_best_at_heronlike_s_ms"] is None  # MetaSchedule had nothing by 10 s
    assert row["ms_trials_to_95"] == 16 and row["heronlike_s_to_95"] == 10.0
    assert not any(k.startswith("_") for k in row)


def test_equal_wall_time_continues_the_tune_on_a_copy_of_its_records(tmp_path: Path) -> None:
    """heronlike given MetaSchedule's search time: a real 2-trial tune, then its continuation
    for a MetaSchedule that searched 4 s longer; the first tune's records stay as they were."""
    import argparse

    import heronlike
    from heronlike import ops
    from heronlike.dag import ComputeDAG
    from heronlike.reference import random_inputs

    mode = suite.resolve_mode()
    compute = ops.gemm(M=32, N=32, K=32, dtype="int8")
    arrays = random_inputs(ComputeDAG.from_compute(compute), np.random.default_rng(0))
    args = argparse.Namespace(trials=2, batch=2, time_limit=None, explorer="random", seed=0)
    (tmp_path / "heronlike").mkdir()
    row, kernel, _ = suite.run_heronlike(compute, args, mode, tmp_path / "heronlike", arrays)
    assert kernel is not None and row["heronlike_trials"] == 2
    first_s = row["_heronlike_curve"][-1][1]
    row["_ms_curve"] = [(2, first_s + 4.0, 1e-3)]
    eq, eq_kernel = suite.run_heronlike_equal_wall(compute, args, mode, tmp_path, arrays, row)
    assert eq_kernel is not None and "heronlike_eq_wall_status" not in eq  # no failure
    assert eq["heronlike_eq_wall_trials"] > 2  # the 2 trials resumed, more measured
    assert eq["heronlike_eq_wall_search_s"] >= first_s + 4.0 - 1e-6  # it searched until then
    curve = eq["_heronlike_eq_wall_curve"]
    assert curve[: len(row["_heronlike_curve"])] == row["_heronlike_curve"]
    db = heronlike.Records(tmp_path / "heronlike" / "records.sqlite")
    try:
        (w,) = db.workloads()
        assert len(db.trials(w["workload_key"], w["target_key"])) == 2  # untouched
    finally:
        db.close()
    # MetaSchedule finished first: nothing to continue
    row["_ms_curve"] = [(2, first_s / 2, 1e-3)]
    eq, eq_kernel = suite.run_heronlike_equal_wall(compute, args, mode, tmp_path, arrays, row)
    assert eq_kernel is None and eq["heronlike_eq_wall_status"].startswith("not run")


def test_pytorch_is_the_median_of_its_harness_rounds() -> None:
    runs = [(3e-3, "x86"), (1e-3, "onednn"), (None, "PyTorch failed: boom"), (2e-3, "onednn")]
    t, what = suite.median_run(runs)
    assert t == 2e-3 and what == "onednn [median of 3 processes; 1 failed]"
    assert suite.median_run([(1e-3, "a"), (2e-3, "b")]) == (1e-3, "a [median of 2 processes]")
    assert suite.median_run([(None, "PyTorch failed: boom")]) == (None, "PyTorch failed: boom")
    # the harness times the other column in every round, with or without tuned kernels
    seen: list[int] = []
    assert suite.time_tvm_kernels({}, {}, Path("."), 1, rounds=3, also=seen.append) == {}
    assert seen == [0, 1, 2]


@pytest.mark.parametrize(
    "op, params",
    [("scan", {"M": 64, "N": 64, "K": 256}), ("bmm", {"B": 2, "M": 32, "N": 64, "K": 128})],
)
def test_pytorch_gets_preallocated_outputs_where_its_call_takes_one(op, params) -> None:  # noqa: ANN001
    # the tuned kernels write preallocated outputs; PyTorch's calls that take ``out=`` are
    # timed that way too, beside the allocating ones, and the fastest is its column
    pytest.importorskip("torch")
    turns: list[tuple[float, float]] = []
    peaks: list[tuple[float, float]] = []
    kernel = _peak_kernel_here()
    t, what = suite.time_pytorch(op, params, 1, turns, peak_kernel=kernel, peaks=peaks)
    assert t is not None and t > 0, what
    if kernel is not None:  # the fastest path's samples, each with the peak read before it
        assert len(peaks) == suite.HARNESS_SAMPLES and all(r > 1e9 for r, _ in peaks), peaks
        assert statistics.median_low(sec for _, sec in peaks) == t
    assert "failed" not in what, what
    assert what.count("out=)") == 1, what
    # the fastest path's samples, each with the round trip measured before it (none where the
    # round trip cannot be measured: one CPU, no gcc); their median is the column
    assert len(turns) in (0, suite.HARNESS_SAMPLES), turns
    if turns:
        assert all(trip > 0 and sec > 0 for trip, sec in turns)
        assert statistics.median_low(sec for _, sec in turns) == t


def test_geomean_over_all_rows_and_both_vnni_rows() -> None:
    rows = [
        {"speedup_vs_ms": 4.0, "both_vnni": True},
        {"speedup_vs_ms": 1.0, "both_vnni": True},
        {"speedup_vs_ms": 8.0, "both_vnni": False},  # e.g. MetaSchedule fell back
    ]
    by = {(s["column"], s["over"]): s for s in suite.summarize(rows, VNNI)}
    assert by[("speedup_vs_ms", "all rows")]["geomean"] == pytest.approx(32 ** (1 / 3))
    both = by[("speedup_vs_ms", "rows where both sides use VNNI")]
    assert both["geomean"] == pytest.approx(2.0) and both["cases"] == 2
    general = suite.summarize([{"speedup_vs_ms": 2.0, "both_vnni": False}], GENERAL)
    both = next(s for s in general if s["over"] != "all rows")
    assert both["geomean"] is None and "unmeasured" in both["note"]


def test_vnni_is_read_from_the_assembly() -> None:
    """A DL Boost kernel built for a VNNI CPU (built, never run here) holds vpdpbusd; the
    general target's kernel for an AVX2 CPU does not, and holds vpmaddwd instead."""
    import tvm

    from benchmarks.metaschedule import asm_uses, executable_asm
    from heronlike import ops
    from heronlike.sampler import RandSAT
    from heronlike.space import generate_space

    found = {}
    for kind, mcpu in (("dlboost", "cascadelake"), ("llvm", "haswell")):
        space = generate_space(ops.gemm(32, 32, 32, dtype="int8"), {"kind": kind, "mcpu": mcpu})
        (assignment,) = RandSAT(space.csp, seed=0).sample(1)
        target = tvm.target.Target(space.target.tvm_target())
        asm = executable_asm(tvm.compile(space.program(assignment), target=target))
        assert asm is not None
        found[mcpu] = (asm_uses(asm), asm_uses(asm, "vpmaddwd"))
    assert found == {"cascadelake": (True, False), "haswell": (False, True)}


@pytest.mark.skipif("avx2" not in cpu_flags(), reason="runs a haswell kernel")
def test_metaschedule_gets_the_vpmaddwd_intrinsic() -> None:
    """MetaSchedule's design space with heronlike's vpmaddwd intrinsic (in union with its
    plain one) tensorizes a GEMM whose weight is in heronlike's packed layout, and its sampled
    kernel is exact."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from benchmarks.metaschedule import (
        _register_heronlike_intrinsic,
        asm_uses,
        executable_asm,
        intrinsic_space,
        pack_func_layouts,
        widen_func_operands,
    )
    from heronlike import ops
    from heronlike.dag import ComputeDAG
    from heronlike.dla_targets.dlboost import PMADDWD_AVX2_A16 as PMADDWD_AVX2
    from heronlike.reference import random_inputs, reference_outputs
    from heronlike.space import generate_space

    compute = ops.gemm(64, 64, 64, dtype="int8")
    dag = ComputeDAG.from_compute(compute)
    space = generate_space(compute, {"kind": "llvm", "mcpu": "haswell"})
    layouts = suite.ms_layouts(space, dag.func)
    # heronlike's int16 copy of X too: the intrinsic reads A pre-widened
    func = widen_func_operands(pack_func_layouts(dag.func, layouts), space.target.match(dag))
    assert "X_global" in func.script()
    _register_heronlike_intrinsic(PMADDWD_AVX2.name)
    target = tvm.target.Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})

    def first_built(seed: int):  # noqa: ANN202 - a TVM executable or None
        # MetaSchedule's own draws: some fail to build (a vectorized loop around the
        # tensorized block), which its tuning skips as it skips any failed candidate
        ctx = ms.TuneContext(
            tvm.IRModule({"main": func}),
            target=target,
            space_generator=intrinsic_space(PMADDWD_AVX2.name),
            task_name="gemm",
            rand_state=seed,
        )
        spaces = ctx.generate_design_space()
        tensorized = [sch for sch in spaces if PMADDWD_AVX2.name in str(sch.trace)]
        # the union: tensorized design spaces and MetaSchedule's plain ones
        assert tensorized and len(tensorized) < len(spaces)
        for sch in tensorized:
            if all(postproc.apply(sch) for postproc in ctx.space_generator.postprocs):
                try:
                    return tvm.compile(sch.mod, target=target)
                except tvm.error.InternalError:
                    continue
        return None

    ex = next(ex for ex in map(first_built, range(1, 9)) if ex is not None)
    assert asm_uses(executable_asm(ex), "vpmaddwd")
    arrays = random_inputs(dag, np.random.default_rng(0))
    (out,) = expected = reference_outputs(dag, arrays)
    packed = [layouts[i].pack(a) if i in layouts else a for i, a in enumerate(arrays)]
    tensors = [tvm.runtime.tensor(a) for a in packed]
    ex["main"](*tensors)
    np.testing.assert_array_equal(tensors[out].numpy(), expected[out])


@pytest.mark.slow  # about 50 s: MetaSchedule's import, builder and runner pools
def test_metaschedule_time_limit_on_its_last_round(tmp_path: Path) -> None:
    """A time limit spent in the round that also reaches the trial budget: TVM has terminated
    the task already, and the harness's callback must not terminate it again (TVM's check
    failed there, losing the MetaSchedule column of D5 and T1 at 32 trials)."""
    import tvm

    from benchmarks.metaschedule import _tune
    from heronlike import ops
    from heronlike.dag import ComputeDAG

    func = ComputeDAG.from_compute(ops.gemm(16, 16, 16, dtype="float32")).func
    mod_json = tvm.ir.save_json(tvm.IRModule({"main": func}))
    result = _tune(
        mod_json, {"kind": "llvm", "num-cores": 1}, trials=2, trials_per_iter=2,
        work_dir=str(tmp_path), seed=0, cores=1, number=1, repeat=1, min_repeat_ms=0,
        time_limit_s=0.0,
    )  # fmt: skip
    assert result.error is None and result.trials_run == 2 and result.valid >= 1
    assert [n for n, _, _ in result.curve] == [2]


@pytest.mark.parametrize(
    ("target", "op", "params"),
    [
        ({"kind": "dlboost", "mcpu": "cascadelake"}, "gemm", {"M": 8, "N": 32, "K": 16}),
        ({"kind": "llvm", "mcpu": "haswell"}, "gemm", {"M": 8, "N": 32, "K": 16}),
        (
            {"kind": "dlboost", "mcpu": "cascadelake"},
            "c2d",
            dict(N=1, H=6, W=6, CI=8, CO=16, KH=3, KW=3, stride=1, pad=1, dilation=1),
        ),
    ],
)
def test_metaschedule_gets_heronlikes_layout(target, op, params) -> None:  # noqa: ANN001
    """The weight layout heronlike's kernel takes, applied to MetaSchedule's compute
    (``transform_layout``) and to its arrays (``pack``), computes the reference (the packed,
    unscheduled function built for this CPU)."""
    import tvm

    from benchmarks.metaschedule import pack_func_layouts
    from heronlike import ops
    from heronlike.dag import ComputeDAG
    from heronlike.reference import random_inputs, reference_outputs
    from heronlike.space import generate_space

    compute = getattr(ops, op)(**params, dtype="int8")
    dag = ComputeDAG.from_compute(compute)
    layouts = suite.ms_layouts(generate_space(compute, target), dag.func)
    assert list(layouts) == [1]  # the weight
    func = pack_func_layouts(dag.func, layouts)
    arrays = random_inputs(dag, np.random.default_rng(0))
    expected = reference_outputs(dag, arrays)
    packed = [layouts[i].pack(a) if i in layouts else a for i, a in enumerate(arrays)]
    assert packed[1].shape == tuple(int(d) for d in func.params[1].ty.shape)
    ex = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    tensors = [tvm.runtime.tensor(a) for a in packed]
    ex["main"](*tensors)
    (out,) = expected
    np.testing.assert_array_equal(tensors[out].numpy(), expected[out])


def _peak_kernel_here() -> str | None:
    """A peak kernel of :mod:`benchmarks.peak` this CPU runs (the AVX2 FMA one first), or
    None."""
    flags = cpu_flags()
    return next((n for n, k in peak.KERNELS.items() if set(k[0]) <= flags), None)


def _run_suite(tmp_path: Path, *extra: str, trials: int = 2) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--cases", "gemm:32,32,32",
           "--trials", str(trials), "--batch", "2", "--out", str(tmp_path), *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _check_outputs(
    tmp_path: Path, proc: subprocess.CompletedProcess, trials: int = 2
) -> dict[str, str]:
    from heronlike.host import cpu_model, machine_slug

    (csv_path,) = tmp_path.glob("suite-*.csv")
    (summary_path,) = tmp_path.glob("suite_summary-*.csv")
    if importlib.util.find_spec("matplotlib") is not None:  # the plot needs the bench extra
        assert csv_path.with_suffix(".png").exists()
    assert machine_slug() in csv_path.name
    (row,) = list(csv.DictReader(csv_path.open()))
    assert row["date"] in csv_path.name and row["cpu_model"] == cpu_model()
    assert row["heronlike_status"] == "ok" and row["heronlike_correct"] == "True"
    assert int(row["heronlike_trials"]) == trials
    assert row["heronlike_vnni"] in ("True", "False")
    assert row["mode"] == suite.resolve_mode().name and row["vnni_note"]
    for col in ("heronlike_curve", "heronlike_search_s", "heronlike_trials_to_95"):
        assert row[col], col
    lats = suite.parse_trials(row["heronlike_trial_ms"])  # every trial, in the order measured
    assert len(lats) == trials
    assert int(row["heronlike_trials_to_95"]) == suite.trials_to_converge(lats)
    assert min(lat for lat in lats if lat) * 1e3 == pytest.approx(
        float(row["heronlike_tuning_best_ms"]), rel=1e-4
    )
    assert float(row["heronlike_ms"]) > 0 and float(row["numpy_ms"]) > 0
    assert row["padded"] == "" and row["shape_run"] == row["params"]
    if row["peak_gops"]:
        assert float(row["heronlike_pct_peak"]) > 0
        # the peak read in every turn of the harness: kernels and PyTorch against their own
        low, mid, high = (float(row[f"peak_turns{k}_gops"]) for k in ("_low", "", "_high"))
        assert 0 < low <= mid <= high, row
        assert float(row["heronlike_pct_peak_turns"]) > 0 and not row["peak_turns_note"]
    _check_roofline(row)
    summary = list(csv.DictReader(summary_path.open()))
    overs = {(s["column"], s["over"]) for s in summary}
    assert ("speedup_vs_ms", "all rows") in overs
    assert ("speedup_vs_ms", "rows where both sides use VNNI") in overs
    assert "over rows where both sides use VNNI" in proc.stdout
    return row


def _check_roofline(row: dict[str, str]) -> None:
    """The roofline columns of a ``gemm:32,32,32`` row (u8 and s8 in, int32 out), and the
    parallel launch's ceiling."""
    assert 0 < float(row["launch_us"]) <= float(row["launch_us_median"]) < 1000
    if row["peak_gops"]:
        c = float(row["compute_floor_ms"])
        assert float(row["launch_ceiling_pct"]) == pytest.approx(
            100 * c / (c + float(row["launch_us"]) * 1e-3), rel=1e-6
        )
    assert (int(row["bytes_read"]), int(row["bytes_written"])) == (2 * 32 * 32, 4 * 32 * 32)
    floor, roof = float(row["memory_floor_ms"]), float(row["roofline_ms"])
    assert floor > 0 and row["memory_floor_note"]
    if row["peak_gops"]:
        assert float(row["compute_floor_ms"]) == pytest.approx(
            float(row["gop"]) / float(row["peak_gops"]) * 1e3, rel=1e-6
        )
    assert roof == max(floor, float(row["compute_floor_ms"] or 0))
    assert row["bound"] == ("memory" if roof == floor else "compute")
    pct = float(row["heronlike_pct_roofline"])
    assert pct == pytest.approx(100 * roof / float(row["heronlike_ms"]), rel=1e-6)
    # no kernel beats the floor of reading its inputs and writing its output: a floor read far
    # too high (a mis-sized buffer, a mis-counted pass) fails here
    assert 0 < pct < 150, row


def _wait_until_children_idle(timeout_s: float = 20.0) -> None:
    """Wait until this process's other children (workers an earlier test left starting, e.g.
    importing TVM) use no CPU, so they cannot outrun the busy child below."""
    import psutil

    me, deadline = psutil.Process(), time.monotonic() + timeout_s

    def used() -> float:
        total = 0.0
        for p in me.children(recursive=True):
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
        return total

    while time.monotonic() < deadline:
        start = used()
        time.sleep(0.2)
        if used() - start < 0.02:
            return


def test_the_harness_sees_what_else_runs() -> None:
    _wait_until_children_idle()
    busy = "import time\nt = time.time()\nwhile time.time() - t < 0.6: pass"
    child = subprocess.Popen([sys.executable, "-c", busy])
    try:
        assert f"[{child.pid}]" in " ".join(suite.descendants())
        before, own = suite._cpu_counters(), time.process_time()
        time.sleep(0.8)
        share = suite.cpu_share(before, suite._cpu_counters(), time.process_time() - own)
    finally:
        child.wait()
    assert share["others_s"] >= 0.3 and f"[{child.pid}]" in share["top"]
    assert f"[{child.pid}]" not in " ".join(suite.descendants())


def test_harness_log_is_one_cell_per_case() -> None:
    log = [
        {"round": 0, "kernel": "heronlike", "seconds": 2e-5, "low": 1.9e-5, "high": 4e-5,
         "others_s": 0.02, "steal_s": 0.0, "top": "kswapd0[7] 0.01", "wall_s": 1.0},
        {"round": 0, "kernel": "ms", "seconds": None, "others_s": 0.02, "steal_s": 0.0,
         "top": "kswapd0[7] 0.01", "wall_s": 1.0},
        {"round": 1, "kernel": "ms", "seconds": None},
    ]  # fmt: skip
    cpus = os.cpu_count() or 1
    assert suite.harness_log_text(log) == (
        f"r0: heronlike 0.02 ms (0.019-0.04), ms failed; others {2 / cpus:.0f}% steal 0% "
        "[kswapd0[7] 0.01] | r1: ms failed"
    )


def test_fastest_process_is_each_columns_lowest_round_median() -> None:
    log = [
        {"round": 0, "kernel": "heronlike", "seconds": 3e-3},
        {"round": 0, "kernel": "ms", "seconds": 2e-3},
        {"round": 1, "kernel": "heronlike", "seconds": 1e-3},
        {"round": 1, "kernel": "ms", "seconds": None},  # failed once: no figure
        {"round": 2, "kernel": "heronlike", "seconds": 2e-3},
    ]
    assert suite.fastest_process(log) == {"heronlike": 1e-3}
    row = {"heronlike_ms": 2.0, "pytorch_ms": 3.0, "heronlike_fastest_process_ms": 1.0,
           "pytorch_fastest_process_ms": 2.5}  # fmt: skip
    suite.derive(row, flop=2e9, peak=4e12)
    assert row["speedup_vs_pytorch"] == 1.5 and row["speedup_vs_pytorch_fastest_process"] == 2.5
    assert row["heronlike_pct_peak_fastest_process"] == 50.0  # 2 GOP in 1 ms of 4 T op/s
    assert row["speedup_vs_ms_fastest_process"] is None  # no MetaSchedule column


def test_a_case_run_on_a_later_day_widens_the_runs_dates() -> None:
    today = time.strftime("%Y-%m-%d")
    earlier = {"case": "G1", "date": "2000-01-01", "cpu_model": "some CPU"}
    later = suite.stamped({"case": "G3", "heronlike_ms": 1.0})
    assert later["date"] == today and later["heronlike_ms"] == 1.0
    assert suite.stamped(earlier) == {**suite.stamped({}), **earlier}  # its own fields kept
    assert suite.date_span([earlier, later]) == f"2000-01-01 to {today}"
    assert suite.date_span([earlier]) == "2000-01-01"
    assert suite.date_span([]) == today


def test_tiny_suite_run_and_resume(tmp_path: Path) -> None:
    # two timing processes, not the table's five: what is checked is that each is logged
    proc = _run_suite(tmp_path, "--no-metaschedule", "--harness-rounds", "2")
    row = _check_outputs(tmp_path, proc)
    assert row["ms_status"].startswith("not run")
    # beside the median over every process's samples, each column's fastest process: never
    # slower than that median (over processes of 9 samples each, the pooled median lies at or
    # above some process's median)
    for who in ("heronlike", "pytorch"):
        assert 0 < float(row[f"{who}_fastest_process_ms"]) <= float(row[f"{who}_ms"])
    # every harness round's reading, and what ran beside it
    assert [part.split(" ms ")[0].split(" ")[:2] for part in row["harness_log"].split(" | ")] == [
        [f"r{r}:", "heronlike"] for r in range(2)
    ]
    assert "in 2 such processes" in row["timing"] and "median of 2 processes" in row["timing"]
    assert "others" in row["harness_log"] and "steal" in row["harness_log"]
    if not suite.resolve_mode().vnni_measured:
        assert "unmeasured" in proc.stdout
    (csv_path,) = tmp_path.glob("suite-*.csv")
    (before,) = list(csv.DictReader(csv_path.open()))
    # the same command resumes: the case is not run again. A CSV written before the per-trial
    # columns gets them back from the case's work folder, and one written before the roofline
    # columns gets a memory floor measured on resume; nothing else changes
    rows = suite.read_csv(csv_path)
    rows[0]["heronlike_trial_ms"] = rows[0]["heronlike_trials_to_95"] = None
    roofline = ("memory_floor_ms", "memory_floor_note", "roofline_ms", "heronlike_pct_roofline")
    for col in roofline:
        rows[0][col] = None
    suite.write_csv(rows, csv_path)
    again = _run_suite(tmp_path, "--no-metaschedule", "--harness-rounds", "2")
    assert "1 cases done, 0 to run" in again.stdout
    (row,) = list(csv.DictReader(csv_path.open()))
    measured_again = {*roofline, "bound", *(k for k in row if k.endswith("_pct_roofline"))}
    assert {k: v for k, v in row.items() if k not in measured_again} == {
        k: v for k, v in before.items() if k not in measured_again
    }
    assert row["memory_floor_note"].startswith("backfilled")
    _check_roofline(row)


@pytest.mark.slow
def test_tiny_suite_run_with_metaschedule(tmp_path: Path) -> None:
    # four trials: MetaSchedule's search is not reproducible and a third to two thirds of its
    # candidates fail, so two trials sometimes leave it with no valid kernel at all
    proc = _run_suite(tmp_path, trials=4)
    row = _check_outputs(tmp_path, proc, trials=4)
    assert row["ms_status"] == "ok" and row["ms_correct"] == "True"
    assert row["ms_vnni"] in ("True", "False") and row["ms_curve"] and row["eq_wall_s"]
    lats = suite.parse_trials(row["ms_trial_ms"])  # MetaSchedule's database, commit order
    assert len(lats) == int(row["ms_trials"])
    assert int(row["ms_trials_to_95"]) == suite.trials_to_converge(lats)
    target = float(row["target_95_ms"]) / 1e3  # 95 % of the better final best
    h_lats = suite.parse_trials(row["heronlike_trial_ms"])
    assert min(x for x in h_lats + lats if x) / 0.95 == pytest.approx(target, rel=1e-4)
    for who, ls in (("heronlike", h_lats), ("ms", lats)):
        got = row[f"{who}_trials_to_target"]
        assert (int(got) if got else None) == suite.trials_to_target(ls, target * (1 + 1e-5))
    assert float(row["speedup_vs_ms"]) == pytest.approx(
        float(row["ms_ms"]) / float(row["heronlike_ms"])
    )
    assert row["ms_weights"] != "plain"  # heronlike's packed weight layout
    # equal wall time: heronlike's tune continued until MetaSchedule's search time, its kernel
    # timed by the harness (MetaSchedule's search, with its start-up, is the longer one)
    assert row["heronlike_eq_wall_status"] == "ok", row["heronlike_eq_wall_status"]
    assert int(row["heronlike_eq_wall_trials"]) > int(row["heronlike_trials"])
    assert float(row["eq_wall_s"]) == pytest.approx(float(row["ms_search_s"]))
    assert float(row["speedup_vs_ms_at_eq_wall"]) == pytest.approx(
        float(row["ms_ms"]) / float(row["heronlike_eq_wall_ms"])
    )


def test_a_peak_read_low_is_replaced_by_the_higher_reading_after_the_cases() -> None:
    """% of peak against a peak that read low at the start would flatter every row: the rows
    of the invocation get the higher reading taken after the cases, and say so."""
    rows = [
        {"case": "G1", "gop": 2.0, "heronlike_ms": 1.0, "ms_ms": 2.0, "peak_gops": 1900.0},
        {"case": "S1", "gop": None, "heronlike_ms": 0.01},
    ]
    suite.settle_peak(rows, 1900e9, 2000e9)
    assert rows[0]["peak_gops"] == 2000.0
    assert rows[0]["heronlike_pct_peak"] == pytest.approx(100.0)  # 2 GOP in 1 ms = 2000 G op/s
    assert rows[0]["ms_pct_peak"] == pytest.approx(50.0)
    assert "1900" in rows[0]["peak_note"] and "2000" in rows[0]["peak_note"]
    assert "peak_gops" not in rows[1] and "peak_note" not in rows[1]


def test_pytorch_can_be_timed_in_the_kernels_processes(tmp_path: Path) -> None:
    """With ``torch_case`` every PyTorch path takes its samples in the kernels' processes, in
    the same turns: ``"pytorch"`` names the fastest path and the others, and each round logs
    every path beside the kernel."""
    pytest.importorskip("torch")
    import heronlike
    from heronlike import ops
    from heronlike.dag import ComputeDAG
    from heronlike.reference import random_inputs, reference_outputs

    params = {"M": 32, "N": 32, "K": 64}
    compute = ops.gemm(**params, dtype="int8")
    tuned = heronlike.tune(compute, "llvm", trials=2, seed=0, records=tmp_path / "r.sqlite")
    dag = ComputeDAG.from_compute(compute)
    arrays = random_inputs(dag, np.random.default_rng(0))
    kernel = (tuned.kernel.export_library(tmp_path / "k.so"), tuned.space.prepare_args(arrays))
    log: list[dict] = []
    turns: dict[str, list[tuple[float, float]]] = {}
    peaks: dict[str, list[tuple[float, float]]] = {}
    launch: list[float] = []
    timed = suite.time_tvm_kernels(
        {"heronlike": kernel},
        reference_outputs(dag, arrays),
        tmp_path,
        1,
        rounds=2,
        log=log,
        torch_case=("gemm", params),
        turns=turns,
        launch=launch,
        peak_kernel=_peak_kernel_here(),
        peaks=peaks,
    )
    assert timed["heronlike"][1] and timed["heronlike"][0] > 0, timed
    if _peak_kernel_here() is not None:  # one peak reading before each turn, in the process
        assert len(peaks["heronlike"]) == 2 * suite.HARNESS_SAMPLES, peaks
        if turns:  # the same samples as the round trips label
            assert [s for _, s in peaks["heronlike"]] == [s for _, s in turns["heronlike"]]
        assert all(rate > 1e9 and sec > 0 for rate, sec in peaks["heronlike"])
        assert set(peaks) == {"heronlike"}  # the empty launch kernel gets no peak pairs
    assert "launch" not in timed  # the empty kernel is no column
    # the empty parallel kernel took its samples in the same turns, and costs less than a GEMM
    assert len(launch) == 2 * suite.HARNESS_SAMPLES and all(t > 0 for t in launch), launch
    assert statistics.median_low(launch) < timed["heronlike"][0]
    assert {e["round"] for e in log if e["kernel"] == "launch"} == {0, 1}, log
    if peak.round_trip_cpus() is not None:  # every sample knows its turn's round trip
        assert len(turns["heronlike"]) == 2 * suite.HARNESS_SAMPLES, turns
        assert all(t > 0 and sec > 0 for t, sec in turns["heronlike"])
        samples = sorted(sec for _, sec in turns["heronlike"])
        assert samples[len(samples) // 2 - 1] <= timed["heronlike"][0] <= samples[-1]
        trips = [t for t, _ in turns["heronlike"]]
        assert [t for t, _ in turns["launch"]] == trips and [
            s for _, s in turns["launch"]
        ] == launch
    seconds, ok, what = timed["pytorch"]
    assert ok and seconds > 0, what
    assert "timed in the kernels' processes" in what and "also:" in what, what
    paths = [e for e in log if e["kernel"].startswith("pytorch ")]
    assert {e["round"] for e in paths} == {0, 1} and len(paths) >= 2 * 3, log
    assert all(e["seconds"] > 0 for e in paths)


def test_each_sample_is_read_against_the_peak_of_its_own_turn() -> None:
    """A kernel that runs at 90 % of the peak in every turn reads 90 % although the peak
    halves in some turns (a VM's slow state slowing both alike), where the run's one peak
    would read it far lower; PyTorch's samples are read against their own turns' peaks; a
    column that did not run gets nothing; a peak that could not be read is named."""
    flop = 1e9
    peaks = [80e9, 80e9, 40e9, 80e9, 40e9]
    kernel = [(rate, flop / (0.9 * rate)) for rate in peaks]
    torch = [(rate, flop / (0.8 * rate)) for rate in (80e9, 40e9, 40e9)]
    row = {"heronlike_status": "ok", "ms_status": "error: x", "pytorch_ms": 20.0}
    log = [{"round": 0, "kernel": "heronlike"}, {"round": 1, "peak_failed": "no gcc"}]
    suite.add_peak_turn_columns(
        row, flop, {"heronlike": kernel, "ms": kernel, "pytorch": torch}, log
    )
    assert row["heronlike_pct_peak_turns"] == pytest.approx(90.0)
    assert row["pytorch_pct_peak_turns"] == pytest.approx(80.0)
    assert "ms_pct_peak_turns" not in row and "heronlike_eq_wall_pct_peak_turns" not in row
    assert (row["peak_turns_low_gops"], row["peak_turns_gops"], row["peak_turns_high_gops"]) == (
        40.0, 80.0, 80.0,
    )  # fmt: skip
    assert row["peak_turns_note"] == "peak not read in some turns: no gcc"
    # against the median peak alone, the slow turns' samples would read the kernel at 45 %
    assert statistics.median(100 * flop / sec / 80e9 for _, sec in kernel) == pytest.approx(90)
    assert min(100 * flop / sec / 80e9 for _, sec in kernel) == pytest.approx(45)
    empty: dict = {"heronlike_status": "ok"}
    suite.add_peak_turn_columns(empty, flop, {"heronlike": [], "pytorch": []})
    assert not any(k.startswith("peak_turns") or k.endswith("_turns") for k in empty)


def test_the_harness_launch_gives_each_core_state_its_ceiling() -> None:
    """The empty kernel's samples in the harness's turns: its median, its near and far medians
    (split at the row's reference round trip) and the most of the peak each leaves the row's
    compute floor; a row timed without it keeps only the process-level launch ceiling."""
    row = {"gop": 0.012, "peak_gops": 2000.0, "launch_us": 0.6, "round_trip_ns_reference": 100.0}
    pairs = [(100, 0.7e-6), (110, 0.8e-6), (400, 1.6e-6), (120, 0.75e-6), (390, 1.8e-6)]
    suite.add_harness_launch_columns(row, [s for _, s in pairs], pairs)
    assert row["launch_harness_us"] == pytest.approx(0.8)
    assert row["launch_near_us"] == pytest.approx(0.75)
    assert row["launch_far_us"] == pytest.approx(1.6)
    floor_us = 0.012 / 2000.0 * 1e6  # 12 M operations: 6 µs at the peak
    for col, us in (("", 0.6), ("_harness", 0.8), ("_near", 0.75), ("_far", 1.6)):
        assert row[f"launch_ceiling{col}_pct"] == pytest.approx(100 * floor_us / (floor_us + us))
    assert row["launch_ceiling_far_pct"] < 80 < 88 < row["launch_ceiling_near_pct"]

    row = {"gop": 0.012, "peak_gops": 2000.0, "launch_us": 0.6}
    suite.add_harness_launch_columns(row, [], [])  # not timed in the harness
    suite.set_roofline(row)
    assert row["launch_ceiling_pct"] == pytest.approx(100 * 6 / 6.6)
    assert not any(
        k.startswith(("launch_harness", "launch_near", "launch_ceiling_far")) for k in row
    )


def test_core_state_columns_split_the_samples_by_their_turns_round_trip() -> None:
    """Near and far medians per column from ``(round trip ns, seconds)`` samples: far above
    twice the run's lowest round trip, which may come from an earlier row; a row whose turns
    were all far is still called far."""
    turns = {
        "heronlike": [(100, 1e-3), (120, 1.1e-3), (390, 2e-3), (400, 2.2e-3), (110, 1.2e-3)],
        "ms": [(100, 1.5e-3), (120, 1.5e-3), (390, 1.6e-3), (400, 1.6e-3), (110, 1.4e-3)],
    }
    row = {"heronlike_status": "ok", "ms_status": "ok", "heronlike_eq_wall_status": "ok"}
    suite.add_core_state_columns(row, turns, reference_ns=150.0)
    assert row["round_trip_ns_reference"] == 100  # the row's lowest, below the run's
    assert (row["round_trip_ns_low"], row["round_trip_ns_high"]) == (100, 400)
    assert row["far_turn_share"] == pytest.approx(0.4)
    assert row["heronlike_near_ms"] == pytest.approx(1.1) and row["ms_near_ms"] == 1.5
    assert row["heronlike_far_ms"] == pytest.approx(2.0) and row["ms_far_ms"] == 1.6
    assert row["speedup_vs_ms_near"] == pytest.approx(1.5 / 1.1)
    assert row["speedup_vs_ms_far"] == pytest.approx(0.8)
    assert "heronlike_eq_wall_near_ms" not in row  # not timed
    assert "pytorch_near_ms" not in row and "speedup_vs_pytorch_near" not in row

    # PyTorch's own processes: its turns join the reference (here the lowest, 90 ns) and get
    # their own far share; the ratios pair heronlike's near (far) median with PyTorch's
    row = {"heronlike_status": "ok", "ms_status": "ok", "pytorch_ms": 1.2}
    pytorch = [(90, 1.2e-3), (95, 1.3e-3), (300, 2.4e-3)]
    suite.add_core_state_columns(row, turns, reference_ns=150.0, pytorch=pytorch)
    assert row["round_trip_ns_reference"] == 90 and row["round_trip_ns_low"] == 100
    assert row["far_turn_share"] == pytest.approx(0.4)  # the kernels' turns alone
    assert row["pytorch_far_turn_share"] == pytest.approx(1 / 3)
    assert row["pytorch_near_ms"] == pytest.approx(1.2) and row["pytorch_far_ms"] == 2.4
    assert row["speedup_vs_pytorch_near"] == pytest.approx(1.2 / 1.1)
    assert row["speedup_vs_pytorch_far"] == pytest.approx(1.2)
    row = {"heronlike_status": "ok", "pytorch_ms": None}  # PyTorch failed: no PyTorch column
    suite.add_core_state_columns(row, turns, pytorch=pytorch)
    assert "pytorch_near_ms" not in row and "speedup_vs_pytorch_far" not in row

    far_only = {"heronlike": [(390, 2e-3), (400, 2e-3)]}
    row = {"heronlike_status": "ok"}
    suite.add_core_state_columns(row, far_only, reference_ns=105.0)
    assert row["far_turn_share"] == 1.0 and row["heronlike_near_ms"] is None
    assert row["heronlike_far_ms"] == pytest.approx(2.0) and row["speedup_vs_ms_far"] is None

    row = {"heronlike_status": "ok"}
    suite.add_core_state_columns(row, {})  # nothing measured: no column
    assert row == {"heronlike_status": "ok"}
    assert suite.lowest_round_trip([{"round_trip_ns_low": 130.0}, {}], 150.0) == 130.0


def test_each_harness_round_places_the_arguments_its_own_way() -> None:
    """``placed_tensors``: the same values whatever the seed; a spacer before each argument
    moves the arguments' offsets against each other within a 4 KiB page from seed to seed
    (a kernel whose output aliases an input modulo 4 KiB is then not timed in that one
    placement only); seed None allocates no spacer."""
    tvm = pytest.importorskip("tvm")
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 256, 256, dtype=np.uint8), rng.integers(0, 9, 1024, dtype=np.int32)]
    dev = tvm.cpu()
    offsets = set()
    for seed in range(8):
        tensors, spacers = suite.placed_tensors(arrays, dev, seed)
        assert len(spacers) == 2
        for t, a in zip(tensors, arrays, strict=True):
            np.testing.assert_array_equal(t.numpy(), a)
        x, y = (np.from_dlpack(t).ctypes.data for t in tensors)
        offsets.add((y - x) % 4096)
    assert len(offsets) > 1, offsets
    assert suite.placed_tensors(arrays, dev, None)[1] == []


def test_the_summary_never_overwrites_the_rows_csv() -> None:
    """``--csv`` names the rows CSV; its summary goes beside it under another name, whatever
    the name (``suite_x.csv`` had been overwritten by its own summary at the end of a run)."""
    for name, summary in (
        ("suite-amd-vnni-2026-12-05.csv", "suite_summary-amd-vnni-2026-12-05.csv"),
        ("suite_table_rule.csv", "suite_table_rule_summary.csv"),
        ("x.csv", "x_summary.csv"),
    ):
        path = Path("out") / name
        assert suite.summary_path(path) == Path("out") / summary != path


def test_requantized_compute_writes_int8_that_mostly_does_not_saturate() -> None:
    from heronlike import ops
    from heronlike.dag import ComputeDAG
    from heronlike.reference import random_inputs, reference_outputs

    compute = ops.c2d(1, 8, 8, 16, 32, 3, 3, 1, 1, 1, dtype="int8")
    dag = ComputeDAG.from_compute(compute)
    arrays = random_inputs(dag, np.random.default_rng(0))
    (int32_out,) = reference_outputs(dag, arrays).values()
    requantized, shift = suite.requantized_compute(compute, int32_out)
    assert str(requantized[-1].dtype) == "int8" and 0 < shift < 32
    rdag = ComputeDAG.from_compute(requantized)
    assert rdag.flop() - dag.flop() == int32_out.size  # one epilogue operation per output
    (out,) = reference_outputs(rdag, random_inputs(rdag, np.random.default_rng(0))).values()
    np.testing.assert_array_equal(out, np.clip(int32_out >> shift, -128, 127).astype(np.int8))
    # REQUANTIZE_SPREAD steps in a standard deviation: a few percent reach the clip at most
    assert np.mean(np.abs(out.astype(int)) >= 127) < 0.05
    assert np.std(out.astype(float)) >= suite.REQUANTIZE_SPREAD / 2


def test_requantize_runs_the_convolutions_with_int8_outputs(tmp_path: Path) -> None:
    # the suite as the user runs it: the convolution gets the epilogue and its output is
    # checked against the requantised reference; a GEMM (PyTorch's _int_mm writes int32) is
    # skipped with a row that says why; the CSV's name says --requantize
    cmd = [sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--cases",
           "c1d:1,32,16,16,3,1,1,1;gemm:32,32,32", "--trials", "2", "--batch", "2",
           "--no-metaschedule", "--harness-rounds", "1", "--requantize", "--out",
           str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (csv_path,) = tmp_path.glob("suite-*.csv")
    assert "-requantize-" in csv_path.name
    conv, gemm = csv.DictReader(csv_path.open())
    assert conv["heronlike_status"] == "ok" and conv["heronlike_correct"] == "True"
    assert conv["dtype"].endswith("requantised s8)") and "clip(C >> " in conv["epilogue"]
    assert float(conv["gop"]) == pytest.approx(2 * 32 * 16 * 16 * 3 / 1e9)  # multiply-adds
    assert gemm["heronlike_status"].startswith("skipped: --requantize")
