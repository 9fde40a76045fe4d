"""The benchmark suite: heronlike against TVM MetaSchedule, PyTorch and numpy, one fair table.

For each case of Heron's DL Boost shape tables (ASPLOS'23 artifact ``tests/figure8/configs``;
notes heron_repo.md §7.2: GEMM, BMM, C1D, C2D, C3D, DIL, T2D, GEMV, SCAN), on this machine, one
step after the other (no two tuners or timings overlap):

1. **heronlike**: ``heronlike.tune(compute, target, trials=T, explorer="cga", batch_size=B)``.
2. **TVM MetaSchedule** (:mod:`benchmarks.metaschedule`): the same compute with the weight in
   the layout heronlike's kernel takes (its one-time pre-packing, ``Space.packed``: the VNNI
   tile layout on DL Boost, the vector axis innermost with the general rule set), the same
   trial budget ``T``, rounds of ``B`` candidates (as heronlike's batches), the same per-trial
   ``time_evaluator`` settings, its default rules for the same TVM target, heronlike's working
   VNNI intrinsic registered as ``dot_16x4_vnni``.
3. **PyTorch** (CPU, oneDNN; the faster of the int8 paths PyTorch has for the operator, weights
   pre-packed where PyTorch can pre-pack them: ``torch.ao.nn.quantized.Linear`` / ``Conv*d``
   under the ``onednn`` and ``x86`` engines, and ``torch._int_mm``, whose weight cannot be
   pre-packed; ``torch._int_mm`` and ``torch.cumsum`` also into preallocated outputs,
   ``out=``, as the tuned kernels write theirs) and **numpy** (float32 BLAS,
   :mod:`heronlike.baselines`).

**One harness times every column**: each of the four runs in a fresh process with the same
environment (``measure_env(cores)``: the thread counts of TVM, OpenMP and BLAS, and glibc's
allocator policy ``ALLOCATOR_ENV``, so an output allocated per call is not faulted in again on
every call), 3 warm-up calls, then the median
of 9 samples of at least 10 ms each (:func:`heronlike.baselines.interleaved_samples`); the
tuned kernels are loaded from their exported libraries, called from Python like the libraries,
and their outputs checked against the numpy reference first (outputs poisoned before the run),
then timed in one process with their samples taken in turn (each after one untimed call), in
``HARNESS_ROUNDS`` (5) such processes with their order rotated, the median over all their
samples; beside it, each column's fastest process (the lowest of its per-process medians,
``*_fastest_process_ms``, and the ratios and % of peak from those), since the VM's slow state
can hold a whole process. That state is the two vCPUs running on distant cores: before each
turn the harness measures the core-to-core round trip (:func:`benchmarks.peak.
core_round_trip_ns`), and each tuned column also gets its median over the turns with the cores
near and over those with them far (``*_near_ms``, ``*_far_ms``, ``speedup_vs_ms_near`` /
``_far``; far: above twice the run's lowest round trip; :func:`add_core_state_columns`).
Taking turns matters on a cloud VM: its shared L3 cache and memory have slow spells of 0.1 s to
several seconds, invisible from inside the guest (no steal time, no other process; 1.2-1.9x on
an L3-sized stream, none on a register or L2 loop; Zen 4, 2026-11-28), which had read one
kernel at up to twice its latency when its samples were taken back to back. ``harness_log``
gives every round's readings (median, fastest and slowest sample) and what else used the CPUs
meanwhile; ``harness_children`` the suite's live child processes at timing time.
PyTorch gets as many processes, interleaved with those (after the kernels' process in even
rounds, before it in odd ones), and the median over them, so that a slow stretch of the
machine meets both alike; its fastest path's samples are labelled near or far the same way
(``pytorch_near_ms``, ``pytorch_far_ms``, ``speedup_vs_pytorch_near`` / ``_far``); numpy, the
reference, one process.

**Same shape for everyone (padding).** Where heronlike would pad a shape to the VNNI tile
(``n % 16``, ``k % 4``: G3 and G5 with N = 1000), the case runs the padded shape for *every*
column, as Heron's artifact did (N = 1008): the simplest honest option. ``shape_run`` gives the
shape that ran and ``padded`` what was padded (empty: the case's own shape). With the general
rule set (no intrinsic) nothing is padded.

**VNNI or not.** On a CPU with AVX512-VNNI both tuners target DL Boost (heronlike ``"dlboost"``).
On a CPU without it (such as an AVX2 Zen 3) the suite switches itself to the general mode:
heronlike ``"llvm"`` (= ``"dlboost -general"``), MetaSchedule on the same plain LLVM target
(its rules then have no VNNI intrinsic), int8 computed without VNNI by both; every row and the
summary then say that the VNNI figures are unmeasured (``--mode`` forces a mode). The columns
``heronlike_vnni`` / ``ms_vnni`` say whether the best kernel's assembly holds ``vpdpbusd``; the
geometric means are printed over all rows and over the rows where both sides used VNNI.

**Curves.** Beside the latency at equal trials, each tuner's curve (after every batch: trials,
seconds since the tune call, best tuning-time latency) and its trials one by one in the order it
measured them (``*_trial_ms``: heronlike's records in trial-index order, MetaSchedule's database
in commit order; empty = a failed trial): the trials until its best reached 95% of its own final
best (counted one by one, both tuners alike), the seconds until the batch holding that trial
was measured. Since a tuner whose best stops improving early reads few trials there, the
rows also count both tuners against **one target**, 95 % of the better of the two final bests
(``target_95_ms``): the trials and seconds until each first reached it (``*_to_target``;
empty: not within its budget). **Equal wall time** (``eq_wall_s``) is MetaSchedule's search
time, the longer one: heronlike's tune is continued on a copy of its records until its own
search seconds reach it (``--no-equal-wall`` skips this), and that kernel is timed by the
harness beside the others (``heronlike_eq_wall_ms``, ``speedup_vs_ms_at_eq_wall``);
``ms_best_at_heronlike_s_ms`` is MetaSchedule's tuning-time best within heronlike's search time
(empty: none by then).

**% of peak**: of the compute peak measured on this machine by :func:`benchmarks.peak.
measure_peaks` on all cores, the VNNI ``vpdpbusd`` kernel in VNNI mode, the fp32 FMA kernel
(AVX-512, else AVX2) in the general mode. Beside it, TVM's parallel launch and join
(:func:`time_launch`, ``launch_us``) and the most of the peak a kernel of one parallel region
can reach after paying it, ``launch_ceiling_pct`` = compute floor / (compute floor + launch):
below 90 % for a kernel whose compute floor is under nine launches. That launch is timed by
TVM's ``time_evaluator`` (a loop in C++) in fresh processes; the harness also times an empty
parallel kernel in every turn of the kernels, called from Python like them
(``launch_harness_us``, ``launch_near_us`` / ``launch_far_us``), with the ceilings these leave
(``launch_ceiling_harness_pct``, ``_near_pct``, ``_far_pct``: :data:`LAUNCH_CEILINGS`).
Since a VM's peak moves with its speed state (the Zen 1 VM read 71-95 G op/s within one
night, each state holding seconds to minutes), the harness also reads the peak kernel before
every turn of the tuned kernels' and PyTorch's samples, in their own processes
(:func:`benchmarks.peak.peak_probe`, about 10 ms): ``*_pct_peak_turns`` is each column's
median over its samples of its op/s against the peak of its own turn, ``peak_turns_gops``
those readings' median (:func:`add_peak_turn_columns`).

**Requantised outputs** (``--requantize``): PyTorch has no int8 convolution with an int32
output; its quantised ``Conv*d`` / ``ConvTranspose2d`` requantise into a u8 output, a quarter of
the bytes the int32 output of the table's compute takes. With ``--requantize`` every
convolution case (:data:`REQUANTIZE_OPS`) runs, for heronlike and MetaSchedule alike, the
compute followed by heronlike's requantisation epilogue (:func:`heronlike.ops.requantize`:
``clip(C >> shift, -128, 127)`` cast to int8, one output byte per element, as PyTorch writes),
so that every tuned column and PyTorch write outputs of the same size
(:func:`requantized_compute`); other cases get a skipped row. ``gop`` and every % of peak stay
those of the multiply-adds (the epilogue's one operation per output element is not counted).

**Budget**: ``--trials`` per tuner in batches of ``--batch`` (heronlike's batch = MetaSchedule's
round); ``--time-limit`` caps each tuner's search time per case (once spent, neither starts a new
batch; the trials each measured are in the CSV). ``--quick`` is the 2-core budget (16 trials,
batches of 8, 120 s) on :data:`QUICK_CASES`; ``--table`` runs every case but gives G2 and B5
(over ``--max-gop-per-core``) a "too large" row unless ``--full``.

**Output**: ``<out>/suite-<cpu>-<mode>-<budget>-<date>.csv`` (one row per case, written as each
case finishes), ``suite_summary-….csv`` (geometric means, both ways), ``suite-….png`` (CPU and
date in the title), and per-case work folders (records, MetaSchedule's database and logs, each
best kernel's ``best.so`` and ``best.s``). **Resumable**: re-running the same command continues
the newest CSV of the same CPU, mode and budget in ``--out`` (``--fresh`` starts a new one,
``--csv`` names one): cases already in it are skipped, so a killed run loses at most the case in
progress, which starts over from scratch.

    python benchmarks/suite.py --quick                # 16 cases, 16 trials per tuner
    python benchmarks/suite.py --table --quick        # the whole table at the same budget
    python benchmarks/suite.py --cases G1,C2D2 --trials 32
    python benchmarks/suite.py --cases gemm:128,128,128 --trials 8   # any shape, our API order
    python benchmarks/suite.py --full --no-metaschedule
    python benchmarks/suite.py --quick --cases C3D1,T4 --requantize   # int8 outputs
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from heronlike.baselines import VNNI_ONEDNN_ISA
from heronlike.ops import OPERATORS

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: make ``benchmarks.*`` importable
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.csv_rows import write_rows  # noqa: E402

#: the argument names of each heronlike.ops builder, in its positional order (dtype excluded)
API_ARGS: dict[str, tuple[str, ...]] = {name: args for name, (_, args) in OPERATORS.items()}

# Heron's DL Boost cases, each as (operator, arguments in *Heron's* order for that operator),
# converted to heronlike's API order by heron_to_params. Heron's orders differ per operator:
#   GEMM (M, K, N)                 -> gemm(M, N, K)
#   BMM  (B, M, K, N)              -> bmm(B, M, N, K)
#   C1D  (N, W, CO, CI, KW, s, p, d)             -> c1d(N, W, CI, CO, KW, s, p, d)  (CO first!)
#   C2D / DIL (N, H, W, CI, CO, KH, KW, s, p, d) -> same order
#   C3D  (N, D, H, W, CO, CI, KD, KH, KW, s, p, d) -> c3d(N, D, H, W, CI, CO, ...)  (CO first!)
#   T2D  (N, H, W, CI, CO, KH, KW, s, p, d, output_padding) -> same order
#   GEMV (M, K), SCAN (M, N, K)    -> same order
# G3 and G5 have the true N = 1000 (Heron rounded it up to 1008 to fit its 16-wide tiles); in
# VNNI mode the suite runs them padded to 1008 for every column (see pad_to_intrinsic).
HERON_CASES: dict[str, tuple[str, tuple[int, ...]]] = {
    "G1": ("gemm", (1024, 1024, 1024)),
    "G2": ("gemm", (4096, 4096, 4096)),
    "G3": ("gemm", (32, 2048, 1000)),
    "G4": ("gemm", (32, 4096, 4096)),
    "G5": ("gemm", (32, 4096, 1000)),
    "B1": ("bmm", (12, 512, 64, 512)),
    "B2": ("bmm", (12, 512, 512, 64)),
    "B3": ("bmm", (16, 512, 64, 512)),
    "B4": ("bmm", (16, 512, 512, 64)),
    "B5": ("bmm", (96, 2048, 128, 2048)),
    "C1D1": ("c1d", (1, 892, 512, 1024, 1, 1, 0, 1)),
    "C1D2": ("c1d", (1, 892, 1024, 512, 1, 1, 0, 1)),
    "C1D3": ("c1d", (1, 892, 512, 512, 3, 1, 4, 2)),
    "C1D4": ("c1d", (1, 892, 512, 512, 3, 1, 8, 4)),
    "C1D5": ("c1d", (1, 892, 512, 512, 3, 1, 16, 8)),
    "C2D1": ("c2d", (1, 56, 56, 64, 64, 3, 3, 1, 1, 1)),
    "C2D2": ("c2d", (1, 56, 56, 64, 64, 1, 1, 1, 0, 1)),
    "C2D3": ("c2d", (1, 28, 28, 128, 128, 3, 3, 1, 1, 1)),
    "C2D4": ("c2d", (1, 28, 28, 128, 256, 1, 1, 2, 0, 1)),
    "C2D5": ("c2d", (1, 14, 14, 256, 256, 3, 3, 1, 1, 1)),
    "C2D6": ("c2d", (1, 14, 14, 256, 512, 1, 1, 2, 0, 1)),  # all 512 channels (Heron: 480)
    "C3D1": ("c3d", (1, 8, 56, 56, 64, 64, 3, 3, 3, 1, 1, 1)),
    "C3D2": ("c3d", (1, 8, 56, 56, 64, 128, 1, 1, 1, 2, 0, 1)),
    "C3D3": ("c3d", (1, 4, 28, 28, 128, 128, 3, 3, 3, 1, 1, 1)),
    "C3D4": ("c3d", (1, 4, 28, 28, 128, 256, 1, 1, 1, 2, 0, 1)),
    "C3D5": ("c3d", (1, 2, 14, 14, 256, 256, 3, 3, 3, 1, 1, 1)),
    "C3D6": ("c3d", (1, 2, 14, 14, 256, 512, 1, 1, 1, 2, 0, 1)),
    "D1": ("dil", (1, 56, 56, 64, 64, 3, 3, 1, 1, 2)),
    "D2": ("dil", (1, 56, 56, 64, 64, 1, 1, 1, 0, 2)),
    "D3": ("dil", (1, 28, 28, 128, 128, 3, 3, 1, 1, 2)),
    "D4": ("dil", (1, 28, 28, 128, 256, 1, 1, 2, 0, 2)),
    "D5": ("dil", (1, 14, 14, 256, 256, 3, 3, 1, 1, 2)),
    "D6": ("dil", (1, 14, 14, 256, 512, 1, 1, 2, 0, 2)),
    "T1": ("t2d", (1, 56, 56, 64, 64, 3, 3, 1, 1, 1, 0)),
    "T2": ("t2d", (1, 56, 56, 64, 64, 1, 1, 1, 0, 1, 0)),
    "T3": ("t2d", (1, 28, 28, 128, 128, 3, 3, 1, 1, 1, 0)),
    "T4": ("t2d", (1, 28, 28, 128, 256, 1, 1, 2, 0, 1, 0)),
    "T5": ("t2d", (1, 14, 14, 256, 256, 3, 3, 1, 1, 1, 0)),
    "T6": ("t2d", (1, 14, 14, 256, 512, 1, 1, 2, 0, 1, 0)),
    "GV1": ("gemv", (512, 16)),
    "GV2": ("gemv", (1024, 256)),
    "GV3": ("gemv", (256, 1024)),
    "GV4": ("gemv", (512, 256)),
    "GV5": ("gemv", (1024, 1024)),
    "S1": ("scan", (16, 512, 128)),
    "S2": ("scan", (1024, 16, 256)),
    "S3": ("scan", (256, 1024, 256)),
    "S4": ("scan", (512, 256, 16)),
    "S5": ("scan", (1024, 1024, 1024)),
}

#: the default subset (issue 4): GEMM G1, G3, G5, BMM B1, C2D1, C2D2, one C1D, one GEMV
DEFAULT_CASES = ("G1", "G3", "G5", "B1", "C2D1", "C2D2", "C1D3", "GV5")
#: budget of each tuner without --quick / --trials
DEFAULT_TRIALS = 100
#: --quick: trials per tuner, batch (heronlike batch = MetaSchedule round) and search time limit
#: per tuner (s), for a table of QUICK_CASES in about 50 minutes on 2 cores (benchmarks/README.md)
QUICK_TRIALS, QUICK_BATCH, QUICK_TIME_LIMIT_S = 16, 8, 120.0
#: --quick's cases (unless --cases / --table / --full): two per operator of Heron's table (one
#: each for GEMV and SCAN), G3 being the padded one, at most a few GOP each
QUICK_CASES = ("G1", "G3", "B1", "B4", "C1D1", "C1D3", "C2D1", "C2D6", "C3D2", "C3D5", "D1",
               "D4", "T1", "T4", "GV5", "S3")  # fmt: skip
#: --table skips (as a row saying so) cases of more giga-operations than this per core: G2
#: (137 GOP) and B5 (103 GOP) on 2 cores; --full or --max-gop-per-core runs them
MAX_GOP_PER_CORE = 10.0
#: --requantize: the operators whose PyTorch path writes a requantised u8 output (its quantised
#: ``Conv*d`` / ``ConvTranspose2d``), which get heronlike's requantisation epilogue
REQUANTIZE_OPS = ("c1d", "c2d", "c3d", "dil", "t2d")
#: --requantize: the epilogue's right shift leaves this many distinct values in a standard
#: deviation of the int32 output, so that few outputs saturate and the check stays strong
REQUANTIZE_SPREAD = 32

# time_evaluator settings of every tuning trial (both tuners), and the builders' limit per
# candidate (both tuners)
TRIAL_NUMBER, TRIAL_REPEAT, MIN_REPEAT_MS = 3, 5, 10.0
BUILD_TIMEOUT_S = 30.0
#: heronlike's finish: finalists re-measured with number = 10, repeat = FINAL_REPEAT
FINALISTS, FINAL_REPEAT = 2, 5
#: heronlike's finish: calls averaged into one measurement (the runner raises it to >= 10)
FINAL_NUMBER = 10
#: the one timing harness: this many samples (each >= 10 ms) of each kernel after 3 warm-up
#: calls, the kernels' samples taken in turn
HARNESS_SAMPLES = 9
#: ... in this many fresh processes, the tuned kernels' order rotated, the median over all the
#: samples (a slow spell of the machine lasts up to seconds: spread over rounds and kernels),
#: and beside it the fastest process's median (a whole process can run slow: more, shorter
#: processes than the 3 of 15 samples before 2026-12-02, the same number of samples)
HARNESS_ROUNDS = 5
#: a tuner has "converged" when its best reaches this fraction of its own final best
CONVERGED = 0.95


def heron_to_params(op: str, heron_args: Sequence[int]) -> dict[str, int]:
    """Keyword arguments of ``heronlike.ops.<op>`` from Heron's argument order (see above)."""
    a = list(heron_args)
    if op == "gemm":
        M, K, N = a
        return {"M": M, "N": N, "K": K}
    if op == "bmm":
        B, M, K, N = a
        return {"B": B, "M": M, "N": N, "K": K}
    if op == "c1d":
        a[2], a[3] = a[3], a[2]  # (.., CO, CI, ..) -> (.., CI, CO, ..)
    elif op == "c3d":
        a[4], a[5] = a[5], a[4]
    return dict(zip(API_ARGS[op], a, strict=True))


def split_cases(text: str) -> list[str]:
    """A ``--cases`` value as case specs: comma-separated names (``G1,C2D1``), or
    semicolon-separated when any is a shape (``gemm:64,64,64;C2D1``)."""
    sep = ";" if ";" in text or ":" in text else ","
    return [c.strip() for c in text.split(sep) if c.strip()]


def parse_case(spec: str) -> tuple[str, str, dict[str, int], str]:
    """``(name, op, params, source)`` for a Heron case name or ``op:a,b,c`` in our API order.

    Raises:
        ValueError: for an unknown case name, operator or a wrong number of arguments.
    """
    if ":" in spec:
        op, _, rest = spec.partition(":")
        if op not in API_ARGS:
            raise ValueError(f"unknown operator {op!r}; known: {', '.join(API_ARGS)}")
        values = [int(v) for v in rest.split(",") if v.strip()]
        if len(values) != len(API_ARGS[op]):
            names = ",".join(API_ARGS[op])
            raise ValueError(f"{spec!r}: {op} takes {len(API_ARGS[op])} arguments ({names})")
        return spec, op, dict(zip(API_ARGS[op], values, strict=True)), "custom"
    if spec not in HERON_CASES:
        raise ValueError(f"unknown case {spec!r}; known: {', '.join(HERON_CASES)}")
    op, heron_args = HERON_CASES[spec]
    return spec, op, heron_to_params(op, heron_args), "heron " + ",".join(map(str, heron_args))


# ------------------------------------------------------------------------------------------------
# mode (VNNI or general) and the shape that runs


@dataclass(frozen=True)
class Mode:
    """How the table runs on this CPU.

    Attributes:
        name: ``"vnni"`` (DL Boost; the intrinsic's figures are measured) or ``"general"``.
        target: heronlike's target (``"dlboost"`` or ``"llvm"`` = ``"dlboost -general"``); its
            ``tvm_target()`` is MetaSchedule's target too.
        note: one sentence for every row and the summary.
        intrinsic: the heronlike intrinsic MetaSchedule is given as well
            (:func:`benchmarks.metaschedule.intrinsic_space`): in general mode on a CPU
            without VNNI, the exact ``vpmaddwd`` one heronlike tensorizes int8 onto; ``None``
            (VNNI mode: MetaSchedule's own x86 rules take the VNNI intrinsic).
        mnemonic: the instruction whose presence in a best kernel's assembly says it used
            the mode's intrinsic (``vpdpbusd``, ``vpmaddwd``; ``None``: no intrinsic).
        tile: the intrinsic's ``(n, k)``: a case whose ``n`` or ``k`` it does not divide runs
            padded to it in every column (``None``: nothing padded).
    """

    name: str
    target: str
    note: str
    intrinsic: str | None = None
    mnemonic: str | None = "vpdpbusd"
    tile: tuple[int, int] | None = (16, 4)

    @property
    def vnni_measured(self) -> bool:
        return self.name == "vnni"


def resolve_mode(mode: str = "auto", target: str | None = None) -> Mode:
    """The mode for ``--mode`` (``auto``: ``vnni`` when this CPU has AVX512-VNNI, else
    ``general``) or an explicit heronlike ``--target`` (general when it is a general target).
    """
    from heronlike.dla_targets.dlboost import VNNI, host_has_vnni
    from heronlike.target import get_target

    has_vnni = host_has_vnni()
    if target is not None:
        tgt = get_target(target)
        name = "general" if getattr(tgt, "general", False) else "vnni"
    else:
        name = mode if mode != "auto" else ("vnni" if has_vnni else "general")
        target = "dlboost" if name == "vnni" else "llvm"
        tgt = get_target(target)
    if name == "vnni":
        note = "VNNI: both tuners target DL Boost (AVX512-VNNI vpdpbusd)"
        return Mode(name, target, note)
    intrinsics = [i for i in tgt.intrinsics if i.a_dtype == "uint8"]
    if has_vnni and (not intrinsics or intrinsics[0].name == VNNI.name):
        note = (
            "general: heronlike's general rule set (target llvm = dlboost -general) and "
            "MetaSchedule on plain llvm; this CPU has VNNI, so either may still use it"
        )
        return Mode(name, target, note)
    # no VNNI here, or a target whose -mcpu has none (an AVX2 target timed on a VNNI CPU)
    cpu = f"the target's CPU (-mcpu={tgt.mcpu}) has" if has_vnni else "this CPU has"
    if not intrinsics:
        note = (
            f"general: {cpu} no AVX512-VNNI and no AVX2, so both tuners run without an "
            "int8 intrinsic (heronlike target llvm = dlboost -general, MetaSchedule on plain "
            "llvm); VNNI figures are unmeasured"
        )
        return Mode(name, target, note, mnemonic=None, tile=None)
    intrin = intrinsics[0]
    note = (
        f"general: {cpu} no AVX512-VNNI, so both tuners tensorize int8 onto heronlike's "
        f"exact vpmaddwd intrinsic ({intrin.n} x {intrin.k}; heronlike target {target}"
        f"{' = dlboost -general' if target == 'llvm' else ''}; "
        "MetaSchedule through MultiLevelTilingWithIntrin, in union with its plain "
        "LLVM space, on the same llvm target); "
        "VNNI figures are unmeasured"
    )
    return Mode(name, target, note, intrin.name, "vpmaddwd", (intrin.n, intrin.k))


def cap_pytorch_isa(mode: Mode) -> Mode:
    """On a CPU with AMX, cap PyTorch's oneDNN at AVX512-VNNI for the VNNI table and say so in
    the mode's note: every column then runs on the instructions heronlike's ``dlboost`` and
    MetaSchedule use (PyTorch with its AMX kernels is the ``amx`` target's peer, in
    ``benchmarks/amx.py compare``). oneDNN reads ``ONEDNN_MAX_CPU_ISA`` at its first use; every
    timing process inherits this process's environment. A cap the user set is kept and named.
    Without AMX, or in general mode, nothing changes."""
    from heronlike.host import cpu_flags

    if mode.name != "vnni" or "amx_int8" not in cpu_flags():
        return mode
    isa = os.environ.setdefault("ONEDNN_MAX_CPU_ISA", VNNI_ONEDNN_ISA)
    note = f"{mode.note}; this CPU has AMX: PyTorch's oneDNN capped at {isa} (ONEDNN_MAX_CPU_ISA)"
    return replace(mode, note=note)


#: operator -> (the parameter that is the VNNI tile's n, the one that is its k)
PAD_PARAMS: dict[str, tuple[str, str]] = {
    "gemm": ("N", "K"),
    "bmm": ("N", "K"),
    "gemv": ("M", "K"),
    "c1d": ("CO", "CI"),
    "c2d": ("CO", "CI"),
    "dil": ("CO", "CI"),
    "t2d": ("CO", "CI"),
    "c3d": ("CO", "CI"),
}


def pad_to_intrinsic(op: str, params: dict[str, int], mode: Mode) -> tuple[dict[str, int], str]:
    """The shape every column runs, and what was padded (``""``: nothing).

    In VNNI mode a case whose VNNI ``n`` (output features) is not a multiple of 16 or whose
    ``k`` (reduction channels) is not a multiple of 4 is rounded up (Heron's N = 1008 for
    N = 1000), so heronlike, MetaSchedule, PyTorch and numpy all compute the same padded
    shape; in general mode the same to the vpmaddwd tile (``Mode.tile``), and nothing
    without an intrinsic.
    """
    if mode.tile is None or op not in PAD_PARAMS:
        return dict(params), ""
    out, notes = dict(params), []
    for name, tile in zip(PAD_PARAMS[op], mode.tile, strict=True):
        value = out[name]
        if value % tile:
            out[name] = -(-value // tile) * tile
            notes.append(f"{name} {value}->{out[name]}")
    return out, ", ".join(notes)


def _params_text(params: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


@dataclass(frozen=True)
class CaseCompute:
    """One case as a per-case benchmark runs it (:func:`case_compute`)."""

    name: str
    op: str
    #: the shape run (padded to the intrinsic in int8 mode), the operator's API arguments
    params: dict[str, int]
    #: what :func:`heronlike.tune` and :func:`heronlike.space.generate_space` are given
    target: str
    #: the ``te`` / TIR compute of ``op`` on ``params`` in the case's dtype
    compute: Any


def requantized_compute(compute: list, int32_output: Any) -> tuple[list, int]:
    """``compute`` (``[inputs..., C]``, ``C`` int32) followed by heronlike's requantisation
    epilogue to int8 (:func:`heronlike.ops.requantize`: ``clip(C >> shift, -128, 127)``), and
    the shift: the largest that leaves :data:`REQUANTIZE_SPREAD` steps in the standard
    deviation of ``int32_output`` (the reference output on the suite's random inputs), so that
    most outputs do not saturate.

    Raises:
        heronlike.errors.UnsupportedDtypeError: ``C`` is not int32.
    """
    import numpy as np

    from heronlike import ops

    spread = float(np.std(np.asarray(int32_output, dtype=np.float64)))
    shift = int(min(31, max(0, np.floor(np.log2(max(spread, 1.0) / REQUANTIZE_SPREAD)))))
    return ops.requantize(list(compute), shift), shift


def case_compute(spec: str, dtype: str, mode: Mode) -> CaseCompute:
    """The compute a per-case benchmark (``benchmarks/padding_skip.py``, ``loop_order.py``, …)
    runs for the case ``spec``.

    ``dtype`` ``"int8"``: the shape padded to the intrinsic of ``mode``
    (:func:`pad_to_intrinsic`) on ``mode.target``; ``"float32"``: the shape as is on ``"llvm"``
    (the general rule set: no intrinsic, nothing padded to one).

    Raises:
        ValueError: an unknown case (:func:`parse_case`) or dtype.
    """
    import heronlike

    name, op, params, _ = parse_case(spec)
    if dtype == "int8":
        params, _ = pad_to_intrinsic(op, params, mode)
        target = mode.target
    elif dtype == "float32":
        target = "llvm"
    else:
        raise ValueError(f"unsupported dtype {dtype!r}: int8 or float32")
    return CaseCompute(name, op, params, target, getattr(heronlike.ops, op)(**params, dtype=dtype))


# ------------------------------------------------------------------------------------------------
# tuning curves


def curve_metrics(curve: Sequence[tuple[int, float, float | None]]) -> dict[str, Any]:
    """From a curve of ``(trials, seconds, best latency so far)`` points: the final best
    latency, the search time (the last point's seconds), and the trials and seconds of the first
    point whose best reached :data:`CONVERGED` of the final best throughput."""
    pts = [(int(n), float(s), lat) for n, s, lat in curve]
    final = min((lat for _, _, lat in pts if lat), default=None)
    out: dict[str, Any] = {
        "best_s": final,
        "search_s": pts[-1][1] if pts else None,
        "trials_to_95": None,
        "s_to_95": None,
    }
    if final is None:
        return out
    for n, s, lat in pts:
        if lat and final / lat >= CONVERGED:
            out["trials_to_95"], out["s_to_95"] = n, s
            break
    return out


def trials_to_converge(latencies: Sequence[float | None]) -> int | None:
    """Trials (1-based, in the order measured) until the best so far reached
    :data:`CONVERGED` of the final best throughput; ``None`` when no trial succeeded.

    Args:
        latencies: each trial's tuning-time latency in seconds, ``None`` for a failed one.
    """
    final = min((lat for lat in latencies if lat), default=None)
    if final is None:
        return None
    return next(i for i, lat in enumerate(latencies, 1) if lat and final / lat >= CONVERGED)


def trials_to_target(latencies: Sequence[float | None], target_s: float) -> int | None:
    """The first trial (1-based, in the order measured) whose latency is at most ``target_s``
    seconds; ``None`` when none is (failed trials, ``None``, never are)."""
    return next((i for i, lat in enumerate(latencies, 1) if lat and lat <= target_s), None)


def seconds_to_target(
    curve: Sequence[tuple[int, float, float | None]], target_s: float
) -> float | None:
    """The seconds of a curve's first point whose best latency is at most ``target_s``
    seconds; ``None`` when no point's is."""
    return next((s for _, s, lat in curve if lat and lat <= target_s), None)


def add_target_columns(row: dict[str, Any]) -> None:
    """One target for both tuners: ``target_95_ms``, the latency at :data:`CONVERGED` of the
    better of their final tuning-time bests (best / 0.95), and for each tuner the trials
    (``*_trials_to_target``, counted from ``*_trial_ms``) and seconds (``*_s_to_target``, from
    ``*_curve``, at batch resolution) until it first reached it, empty when it did not within
    its budget. Left unset unless both tuners have trials. Derived only from the row's own
    columns, so a row of an older CSV gets them without measuring anything.

    Why beside each tuner's own 95 %: that one rewards a tuner whose best stops improving
    early (its own final best is then reached at once), this one asks how soon each had a
    kernel as good as the best either found.
    """
    lats = {who: parse_trials(row.get(f"{who}_trial_ms")) for who in ("heronlike", "ms")}
    finals = [min((x for x in v if x), default=None) for v in lats.values()]
    if None in finals:
        return
    target = min(finals) / CONVERGED  # type: ignore[type-var]
    row["target_95_ms"] = target * 1e3
    for who, latencies in lats.items():
        row[f"{who}_trials_to_target"] = trials_to_target(latencies, target)
        curve = parse_curve(str(row.get(f"{who}_curve") or ""))
        row[f"{who}_s_to_target"] = seconds_to_target(curve, target)
    add_half_target_columns(row, lats)


def add_half_target_columns(row: dict[str, Any], lats: dict[str, list[float | None]]) -> None:
    """The target of :func:`add_target_columns` taken at half of MetaSchedule's budget:
    ``half_target_95_ms`` is the better of both tuners' tuning-time bests after ``ms_trials //
    2`` trials, over :data:`CONVERGED`, and ``*_trials_to_half_target`` each tuner's trials
    until it first reached it within its whole budget (empty when it did not).

    Why: at the table's 16 trials, a row where heronlike reached the better final best after
    more than 8 trials and MetaSchedule never did leaves open whether heronlike took at most
    half of MetaSchedule's trials. A run with twice the budget answers it for the 16-trial
    target: MetaSchedule's trials to it are then counted up to 32.
    """
    half = int(row.get("ms_trials") or 0) // 2
    bests = [min((x for x in v[:half] if x), default=None) for v in lats.values()]
    if not half or None in bests:
        return
    target = min(bests) / CONVERGED  # type: ignore[type-var]
    row["half_target_95_ms"] = target * 1e3
    for who, latencies in lats.items():
        row[f"{who}_trials_to_half_target"] = trials_to_target(latencies, target)


def trial_latencies(case_dir: Path) -> dict[str, list[float | None]]:
    """Each tuner's trials of one case in the order it measured them, as tuning-time latencies
    (seconds; ``None`` for a failed trial): ``"heronlike"`` from its records (trial-index
    order), ``"ms"`` from MetaSchedule's JSON database (commit order, median of its run
    seconds). A tuner whose files are missing is left out."""
    import json

    import heronlike
    from benchmarks.metaschedule import FAILED_RUN_SECS

    out: dict[str, list[float | None]] = {}
    records = case_dir / "heronlike" / "records.sqlite"
    if records.exists():
        db = heronlike.Records(records)
        try:
            for w in db.workloads():  # one workload per case folder
                trials = db.trials(w["workload_key"], w["target_key"])
                out["heronlike"] = [t.latency_s if t.ok else None for t in trials]
        finally:
            db.close()
    database = case_dir / "metaschedule" / "database_tuning_record.json"
    if database.exists():
        lats: list[float | None] = []
        for line in database.read_text().splitlines():
            if line.strip():
                secs = [float(x) for x in json.loads(line)[1][1] or []]
                lat = statistics.median(secs) if secs else None
                lats.append(lat if lat is not None and lat < FAILED_RUN_SECS / 10 else None)
        out["ms"] = lats
    return out


def trials_text(latencies: Sequence[float | None]) -> str:
    """Trial latencies in one CSV cell: milliseconds, ``;``-separated, empty = failed."""
    return ";".join("" if lat is None else f"{lat * 1e3:.6g}" for lat in latencies)


def parse_trials(text: str | None) -> list[float | None]:
    """Inverse of :func:`trials_text` (latencies back in seconds)."""
    return [float(v) / 1e3 if v else None for v in (text or "").split(";")] if text else []


def add_trial_columns(row: dict[str, Any], case_dir: Path) -> None:
    """``*_trial_ms`` from the case's work folder and ``*_trials_to_95`` counted from them,
    one trial at a time (rows measured before the column existed keep their per-batch count
    when the folder is gone)."""
    for who, lats in trial_latencies(case_dir).items():
        if lats and row.get(f"{who}_trials") in (None, len(lats)):
            row[f"{who}_trial_ms"] = trials_text(lats)
            row[f"{who}_trials_to_95"] = trials_to_converge(lats)


def best_at(curve: Sequence[tuple[int, float, float | None]], seconds: float) -> float | None:
    """The best latency a curve had reached within ``seconds`` (``None``: none by then)."""
    lats = [lat for _, s, lat in curve if s <= seconds + 1e-9 and lat]
    return min(lats) if lats else None


def curve_text(curve: Sequence[tuple[int, float, float | None]]) -> str:
    """A curve in one CSV cell: ``trials@seconds:best_ms`` per point, ``;``-separated."""
    return ";".join(
        f"{n}@{s:.1f}:{'' if lat is None else f'{lat * 1e3:.4g}'}" for n, s, lat in curve
    )


def parse_curve(text: str) -> list[tuple[int, float, float | None]]:
    """Inverse of :func:`curve_text` (latencies back in seconds)."""
    out = []
    for item in filter(None, (text or "").split(";")):
        head, _, ms = item.partition(":")
        n, _, s = head.partition("@")
        out.append((int(n), float(s), float(ms) / 1e3 if ms else None))
    return out


# ------------------------------------------------------------------------------------------------
# the one timing harness (every column: fresh process, same threads, same warm-up and samples)


def _cpu_counters() -> tuple[float, float, dict[int, tuple[str, float]]]:
    """The machine's CPU counters in seconds (:mod:`psutil`): busy time of all CPUs (everything
    but idle and I/O wait, steal included), the hypervisor's steal time alone, and each
    process's ``(name, user + system seconds)``."""
    import psutil

    t = psutil.cpu_times()
    steal = getattr(t, "steal", 0.0)
    busy = sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0)
    busy -= getattr(t, "guest_nice", 0.0)  # guest time is counted in user time already
    procs = {}
    for p in psutil.process_iter(["name", "cpu_times"]):
        times = p.info["cpu_times"]
        if times is not None:
            procs[p.pid] = (p.info["name"] or "?", times.user + times.system)
    return busy, steal, procs


def cpu_share(
    before: tuple[float, float, dict[int, tuple[str, float]]],
    after: tuple[float, float, dict[int, tuple[str, float]]],
    own_s: float,
) -> dict[str, Any]:
    """What else used the CPUs between two :func:`_cpu_counters`: ``others_s`` (busy seconds of
    every CPU minus ``own_s``, this process's own CPU seconds), ``steal_s`` (taken by the
    hypervisor) and ``top`` (the other process that used most, ``"name[pid] seconds"``)."""
    me = os.getpid()
    used = {
        pid: (name, cpu - before[2].get(pid, (name, 0.0))[1])
        for pid, (name, cpu) in after[2].items()
        if pid != me
    }
    top = max(used.items(), key=lambda kv: kv[1][1], default=None)
    return {
        "others_s": max(0.0, after[0] - before[0] - own_s),
        "steal_s": after[1] - before[1],
        "top": f"{top[1][0]}[{top[0]}] {top[1][1]:.2f}" if top and top[1][1] > 0 else "",
    }


def placed_tensors(arrays: Sequence[Any], dev: Any, seed: int | None) -> tuple[list, list]:
    """TVM tensors of ``arrays`` on ``dev``, each allocated after a spacer of a random size
    (1 to 64 cache lines, ``numpy.random.default_rng(seed)``), so the arguments' offsets
    within a 4 KiB page, and against each other, change with ``seed``: a kernel whose output
    and input alias modulo 4 KiB runs up to 3x slower (docs/results.md, "Matrix-vector
    products: the streaming order, measured and left off"), and one placement in every harness
    process would time only that case. ``seed`` None: no spacers. Returns ``(tensors,
    spacers)``: the tensors' addresses do not depend on the spacers afterwards, but a caller
    that keeps them alive keeps later allocations (the next kernel's arguments) off their
    memory, as the harness worker does."""
    import numpy as np
    import tvm

    rng = np.random.default_rng(seed) if seed is not None else None
    tensors, spacers = [], []
    for a in arrays:
        if rng is not None:
            lines = int(rng.integers(1, 65))
            spacers.append(tvm.runtime.empty((lines * 64,), "uint8", dev))
        tensors.append(tvm.runtime.tensor(a, dev))
    return tensors, spacers


def poisoned_arguments(args_path: str, expected: dict[int, Any]) -> list[Any]:
    """The arrays of ``args_path`` (``arg0``, ``arg1`` … of an ``.npz``) with every output (an
    index of ``expected``) filled with poison, NaN or ``0x5A5A5A5A``: a kernel that skips
    writing part of its output then fails :func:`output_problems`."""
    import numpy as np

    with np.load(args_path) as z:
        arrays = [z[f"arg{i}"] for i in range(len(z.files))]
    for i, a in list(enumerate(arrays)):
        if i in expected:
            poison = np.nan if np.issubdtype(a.dtype, np.floating) else 0x5A5A5A5A
            arrays[i] = np.full(a.shape, poison).astype(a.dtype)
    return arrays


def output_problems(tensors: Sequence[Any], expected: dict[int, Any]) -> list[str]:
    """A ``"wrong_result: …"`` message for each output of ``tensors`` (TVM tensors in the
    kernel's layout, read back in the logical one) that differs from ``expected`` (index ->
    numpy's output; floats within 1e-3, integers exact); empty when all match."""
    import numpy as np

    from heronlike.library.runtime import to_logical

    bad = []
    for i, want in expected.items():
        got = to_logical(tensors[i].numpy(), want.shape)
        if np.issubdtype(want.dtype, np.floating):
            ok = np.allclose(got, want, rtol=1e-3, atol=1e-3)
        else:
            ok = np.array_equal(got, want)
        if not ok:
            bad.append(f"wrong_result: output {i} differs from the reference")
    return bad


def _tvm_kernels_worker(
    kernels: list[tuple[str, str]],
    expected_path: str,
    samples: int,
    prepare: Sequence[str] = (),
    torch_case: tuple[str, dict[str, int], int] | None = None,
    placement: int | None = None,
    launch_threads: int | None = None,
    peak: tuple[str, int] | None = None,
):
    """Harness worker for the tuned kernels, in this process: prepare the process for each
    target key of ``prepare`` (:func:`heronlike.target.prepare_process_for`: AMX's tile
    permission); for each ``(library, arguments .npz)`` load the library, place its arguments
    (:func:`placed_tensors` with seed ``placement``), poison the outputs, run once and compare
    with the reference; then time ``main`` of every correct one on its arrays, their samples
    taken in turn (:func:`heronlike.baselines.interleaved_samples`, ``samples`` each). With
    ``torch_case`` ``(op, params, threads)``, PyTorch's int8 paths for that case
    (:func:`heronlike.baselines.torch_paths`) take their samples in the same turns, after the
    kernels in the list of callables. With ``launch_threads``, so does an empty parallel
    kernel on that many threads (:func:`benchmarks.peak.parallel_launch_kernel`): TVM's
    launch and join as the harness times it, called from Python like the kernels, in the same
    turns (the state of the machine that slows a small kernel slows it too). With ``peak``
    ``(kernel, threads)``, one reading of that peak kernel (:func:`benchmarks.peak.peak_probe`)
    is taken before each turn, after the core-to-core round trip.

    Returns:
        ``(results, share)``: one ``(samples in seconds or None, correct, message)`` per kernel,
        and what else used the CPUs while they were timed (a :func:`cpu_share` dict with the
        timing's wall seconds ``wall_s``; empty if nothing was timed). With ``torch_case``,
        ``share["torch"]`` maps each PyTorch path to its samples and ``share["torch_failed"]``
        lists the paths that could not be built; with ``launch_threads``, ``share["launch"]``
        holds the empty kernel's samples (absent where it could not be built); with ``peak``,
        ``share["peak_ops"]`` the peak's reading in op/s before each turn (absent, and
        ``share["peak_failed"]`` saying why, where it could not be read).
    """
    import numpy as np
    import tvm

    from heronlike.baselines import interleaved_samples
    from heronlike.target import prepare_process_for

    for key in prepare:
        prepare_process_for(key)
    with np.load(expected_path) as z:
        expected = {int(k[3:]): z[k] for k in z.files}
    dev = tvm.cpu()
    out: list[tuple[list[float] | None, bool, str]] = []
    calls: dict[int, Callable[[], object]] = {}
    kept: list[list] = []  # the placement spacers: later kernels' arguments stay off them
    for so_path, args_path in kernels:
        try:
            fn = tvm.runtime.load_module(so_path)["main"]
            arrays = poisoned_arguments(args_path, expected)
            tensors, spacers = placed_tensors(arrays, dev, placement)
            kept.append(spacers)
            fn(*tensors)
            bad = output_problems(tensors, expected)
            if bad:
                out.append((None, False, "; ".join(bad)))
                continue
            calls[len(out)] = lambda fn=fn, t=tensors: fn(*t)
            out.append((None, True, ""))
        except Exception as err:  # noqa: BLE001 - the next kernel is still checked
            out.append((None, False, f"harness: {_short(err)}"))
    paths: dict[str, Callable[[], object]] = {}
    extra: dict[str, Any] = {}
    if torch_case is not None:
        from heronlike.baselines import torch_paths

        try:
            built, extra["torch_failed"] = torch_paths(*torch_case)
        except Exception as err:  # noqa: BLE001 - the kernels are still timed
            built, extra["torch_failed"] = {}, [f"PyTorch: {_short(err)}"]
        for name, fn in built.items():  # a path that fails its first call is left out
            try:
                with _no_grad():
                    fn()
                paths[name] = fn
            except Exception as err:  # noqa: BLE001
                extra["torch_failed"].append(f"{name} failed ({_short(err)})")
    if not calls and not paths:
        return out, extra
    fns = list(calls.values()) + list(paths.values())
    if launch_threads:
        try:
            from benchmarks.peak import parallel_launch_kernel

            lib, launch_args = parallel_launch_kernel(launch_threads)
            fns.append(lambda fn=lib["main"], a=launch_args: fn(*a))
        except Exception as err:  # noqa: BLE001 - the kernels are still timed
            extra["launch_failed"] = _short(err)
    trips: list[float] = []
    readings: list[float] = []
    peak_failed: list[str] = []
    probe = _turn_probe(_round_trip_probe(trips), _peak_probe(readings, peak, peak_failed))
    before, own, wall = _cpu_counters(), time.process_time(), time.perf_counter()
    try:
        with _no_grad() if paths else contextlib.nullcontext():
            timed = interleaved_samples(fns, samples, before_turn=probe)
    except Exception as err:  # noqa: BLE001 - reported for every kernel of the round
        return [(None, False, f"harness: {_short(err)}") if k in calls else r
                for k, r in enumerate(out)], extra  # fmt: skip
    own, wall = time.process_time() - own, time.perf_counter() - wall
    for k, seconds in zip(calls, timed[: len(calls)], strict=True):
        out[k] = (seconds, True, "")
    if paths:
        extra["torch"] = dict(zip(paths, timed[len(calls) : len(calls) + len(paths)], strict=True))
    if len(fns) > len(calls) + len(paths):
        extra["launch"] = timed[-1]
    if len(trips) == samples:
        extra["round_trip_ns"] = trips
    if len(readings) == samples:
        extra["peak_ops"] = readings
    if peak_failed:
        extra["peak_failed"] = peak_failed[0]
    return out, {**cpu_share(before, _cpu_counters(), own), "wall_s": wall, **extra}


def _peak_probe(
    readings: list[float], peak: tuple[str, int] | None, failed: list[str]
) -> Callable[[], None] | None:
    """What the harness worker runs before each turn besides the round trip: one reading of
    the peak kernel ``peak`` ``(kernel, threads)`` (:func:`benchmarks.peak.peak_probe`, about
    10 ms) appended to ``readings`` (op/s); None without ``peak``. A peak that cannot be read
    ends the probing, not the timing (:func:`_reading_probe`): ``failed`` then says why and
    ``readings`` stays short, so the caller leaves it out."""
    if peak is None:
        return None
    try:
        from benchmarks.peak import peak_probe

        read = peak_probe(*peak)
    except Exception as err:  # noqa: BLE001 - the kernels are still timed
        failed.append(_short(err))
        return None
    return _reading_probe(read, readings, failed)


def _reading_probe(
    read: Callable[[], float], sink: list[float], failed: list[str]
) -> Callable[[], None]:
    """A probe appending ``read()`` to ``sink`` each time it runs, until a reading raises:
    that error's text goes to ``failed`` and the probe does nothing from then on (the kernels
    are still timed; ``sink`` stays short)."""

    def probe() -> None:
        if failed:
            return
        try:
            sink.append(read())
        except Exception as err:  # noqa: BLE001 - the kernels are still timed
            failed.append(_short(err))

    return probe


def _turn_probe(*probes: Callable[[], None] | None) -> Callable[[], None] | None:
    """One probe running each of ``probes`` that is not None, in order; None when none is."""
    run = [p for p in probes if p is not None]
    if not run:
        return None

    def probe() -> None:
        for p in run:
            p()

    return probe


def _round_trip_probe(trips: list[float]) -> Callable[[], None] | None:
    """What the harness worker runs before each turn of its samples: the core-to-core round
    trip between its first two CPUs (:func:`benchmarks.peak.core_round_trip_ns`, about 1-7 ms)
    appended to ``trips``; None on one CPU. A round trip that cannot be measured (no gcc) ends
    the probing, not the timing: ``trips`` then stays short and the caller leaves it out."""
    from benchmarks.peak import core_round_trip_ns, round_trip_cpus

    pair = round_trip_cpus()
    if pair is None:
        return None
    return _reading_probe(lambda: core_round_trip_ns(pair), trips, [])


def _no_grad() -> Any:
    """PyTorch's ``no_grad`` context (imported only when PyTorch paths are timed)."""
    import torch

    return torch.no_grad()


def descendants() -> list[str]:
    """The live descendant processes of this one as ``"name[pid]"`` (:mod:`psutil`)."""
    import psutil

    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            out.append(f"{p.name()}[{p.pid}]")
        except psutil.Error:  # it ended meanwhile
            continue
    return out


def harness_log_text(log: Sequence[dict[str, Any]]) -> str:
    """The harness's readings round by round (:func:`time_tvm_kernels`' ``log``) as one CSV
    cell: ``"r<round>: <kernel> <median> ms (<fastest>-<slowest>), ...; others <%> steal <%>
    [<top process>]"``, the rounds joined by ``" | "``; the percentages are of all CPUs over
    the round's timing (``others``: processes besides the harness; ``steal``: the
    hypervisor)."""
    cpus = os.cpu_count() or 1
    rounds: dict[int, list[dict[str, Any]]] = {}
    for e in log:
        rounds.setdefault(e["round"], []).append(e)
    parts = []
    for r, entries in rounds.items():
        kernels = []
        for e in entries:
            ms = "failed" if e["seconds"] is None else f"{e['seconds'] * 1e3:.5g} ms"
            if e.get("low") is not None:
                ms += f" ({e['low'] * 1e3:.5g}-{e['high'] * 1e3:.5g})"
            kernels.append(f"{e['kernel']} {ms}")
        text = f"r{r}: " + ", ".join(kernels)
        e = entries[0]
        if e.get("wall_s"):
            machine = e["wall_s"] * cpus
            text += f"; others {100 * e['others_s'] / machine:.0f}%"
            text += f" steal {100 * e['steal_s'] / machine:.0f}%"
            if e.get("top"):
                text += f" [{e['top']}]"
        parts.append(text)
    return " | ".join(parts)


#: a harness turn is "far" when its core-to-core round trip is above this many times the run's
#: lowest: on the Zen 5 VM the two states read about 100-140 ns and 360-420 ns
FAR_ROUND_TRIP_RATIO = 2.0

#: the tuned-kernel columns that get near / far medians
STATE_COLUMNS = ("heronlike", "ms", "heronlike_eq_wall")


def add_core_state_columns(
    row: dict[str, Any],
    turns: dict[str, list[tuple[float, float]]],
    reference_ns: float | None = None,
    pytorch: Sequence[tuple[float, float]] = (),
) -> None:
    """The row's columns for the distance between the cores during the harness's turns
    (``turns``: :func:`time_tvm_kernels`' ``(round trip ns, seconds)`` per sample and kernel;
    ``pytorch``: the same pairs of PyTorch's fastest path in its own processes,
    :func:`time_pytorch`).

    ``round_trip_ns_low`` / ``_median`` / ``_high`` over the kernels' turns;
    ``round_trip_ns_reference``: the lowest of ``reference_ns`` and every round trip of the
    row (PyTorch's too); a turn is far when its round trip exceeds
    :data:`FAR_ROUND_TRIP_RATIO` times that, and ``far_turn_share`` is the share of the
    kernels' far samples (``pytorch_far_turn_share``: PyTorch's). For each of
    :data:`STATE_COLUMNS` timed, and PyTorch: ``<who>_near_ms`` and ``<who>_far_ms``, the median
    of its samples in near and in far turns (None where it had none), and the ratios
    ``speedup_vs_ms_near`` / ``_far`` and ``speedup_vs_pytorch_near`` / ``_far`` from them. A
    kernel that splits its work into a few contiguous blocks per thread can run up to 2x slower
    in far turns while another keeps its speed (``docs/results.md``, "Parallel kernels and the
    distance between the cores"), so a row whose turns were mostly far compares other kernels
    than a mostly near one."""
    trips = [t for pairs in turns.values() for t, _ in pairs]
    if not trips:
        return
    ref, _ = turn_reference(trips + [t for t, _ in pytorch], reference_ns)
    _, row["far_turn_share"] = turn_reference(trips, ref)
    row["round_trip_ns_low"] = min(trips)
    row["round_trip_ns_median"] = statistics.median(trips)
    row["round_trip_ns_high"] = max(trips)
    row["round_trip_ns_reference"] = ref
    labelled = {w: turns[w] for w in STATE_COLUMNS if row.get(f"{w}_status") == "ok" and w in turns}
    if pytorch and row.get("pytorch_ms"):
        labelled["pytorch"] = list(pytorch)
        _, row["pytorch_far_turn_share"] = turn_reference([t for t, _ in pytorch], ref)
    for who, pairs in labelled.items():
        for state, sec in zip(("near", "far"), state_medians(pairs, ref), strict=True):
            row[f"{who}_{state}_ms"] = sec * 1e3 if sec is not None else None
    for state in ("near", "far"):
        h = row.get(f"heronlike_{state}_ms")
        row[f"speedup_vs_ms_{state}"] = _ratio(row.get(f"ms_{state}_ms"), h)
        if "pytorch" in labelled:
            row[f"speedup_vs_pytorch_{state}"] = _ratio(row.get(f"pytorch_{state}_ms"), h)


def turn_reference(trips: Sequence[float], reference_ns: float | None) -> tuple[float, float]:
    """``(reference, far share)`` of the round trips ``trips`` (ns, one per sample; not
    empty): the lower of ``reference_ns`` (None: none) and their lowest, and the share of them
    above :data:`FAR_ROUND_TRIP_RATIO` times that (the far samples)."""
    ref = min([t for t in (reference_ns,) if t] + list(trips))
    far = FAR_ROUND_TRIP_RATIO * ref
    return ref, sum(t > far for t in trips) / len(trips)


def state_medians(
    pairs: Sequence[tuple[float, float]], reference_ns: float
) -> tuple[float | None, float | None]:
    """The median (``median_low``) seconds of ``pairs`` (``(round trip ns, seconds)`` per
    sample, :func:`time_tvm_kernels`' ``turns``) in near and in far turns: far when the round
    trip exceeds :data:`FAR_ROUND_TRIP_RATIO` times ``reference_ns``; None for a state without
    samples."""
    far = FAR_ROUND_TRIP_RATIO * reference_ns
    out = []
    for keep in (lambda t: t <= far, lambda t: t > far):
        got = [sec for t, sec in pairs if keep(t)]
        out.append(statistics.median_low(got) if got else None)
    return out[0], out[1]


def lowest_round_trip(
    rows: Sequence[dict[str, Any]], known: float | None = None, probes: int = 5
) -> float | None:
    """The lowest core-to-core round trip in ns among ``known``, the rows' ``round_trip_ns_low``
    and, when ``known`` is None, ``probes`` fresh measurements in this process
    (:func:`benchmarks.peak.core_round_trip_ns`, a few ms each): the reference of
    :func:`add_core_state_columns`. None when nothing could be measured (one CPU, no gcc)."""
    seen = [float(r["round_trip_ns_low"]) for r in rows if r.get("round_trip_ns_low")]
    if known:
        seen.append(known)
    else:
        from benchmarks.peak import core_round_trip_ns, round_trip_cpus

        pair = round_trip_cpus()
        try:
            seen += [core_round_trip_ns(pair) for _ in range(probes)] if pair else []
        except Exception as err:  # noqa: BLE001 - the table is still timed, without states
            print(f"core-to-core round trip not measured: {_short(err)}", flush=True)
    return min(seen) if seen else None


def fastest_process(log: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each timed column's fastest process in the harness's ``log`` (:func:`time_tvm_kernels`):
    the lowest of its per-round medians, in seconds (``kernel -> seconds``). A column that
    failed in any round is left out. Beside the median over all rounds' samples, this is the
    reading of a column in the machine's best state; every column gets the same statistic, so
    the ratios between them stay fair (a VM's slow state can hold one whole process: the Zen 5
    run of 2026-12-02 read G4's kernel at 0.72, 0.79 and 0.98 ms in its three)."""
    per: dict[str, list[float | None]] = {}
    for entry in log:
        per.setdefault(entry["kernel"], []).append(entry["seconds"])
    out = {}
    for kernel, seconds in per.items():
        timed = [t for t in seconds if t is not None]
        if timed and len(timed) == len(seconds):
            out[kernel] = min(timed)
    return out


def time_tvm_kernels(
    kernels: dict[str, tuple[Path, list]],
    expected: dict,
    work: Path,
    threads: int,
    rounds: int = HARNESS_ROUNDS,
    also: Callable[[int], Any] | None = None,
    log: list[dict[str, Any]] | None = None,
    prepare: Sequence[str] = (),
    torch_case: tuple[str, dict[str, int]] | None = None,
    turns: dict[str, list[tuple[float, float]]] | None = None,
    launch: list[float] | None = None,
    peak_kernel: str | None = None,
    peaks: dict[str, list[tuple[float, float]]] | None = None,
) -> dict[str, tuple[float | None, bool, str]]:
    """Time exported kernels (``name -> (library, arrays in the kernel's layout)``) with the
    harness: ``rounds`` fresh processes, one after the other, each checking every kernel's
    output and then taking ``HARNESS_SAMPLES`` samples of each, the kernels in turn
    (:func:`_tvm_kernels_worker`), so a slow spell of the machine falls on all of them alike;
    ``name -> (median seconds over all its samples of all rounds or None, correct in every
    round, message)``. The kernels' order is rotated by one from round to round, and round
    ``r`` places every kernel's arguments with seed ``r`` (:func:`placed_tensors`), so the
    rounds time five placements in memory, not one.

    ``also(r)``, if given, times another column in round ``r`` (PyTorch's process,
    :func:`time_pytorch`): after the kernels' process in even rounds, before it in odd ones, so
    that both meet the same stretches of a noisy machine. ``log``, if given, receives one dict
    per round and kernel: ``round``, ``kernel``, ``seconds`` (its median in that round; None:
    failed), ``low`` and ``high`` (its fastest and slowest sample), and what else used the CPUs
    during the round (:func:`cpu_share`). ``prepare``: target keys the kernels' process is
    prepared for first (``("amx",)``: Linux's permission for the tile state). ``torch_case``
    ``(op, params)``: PyTorch's int8 paths for the case are timed in the kernels' processes,
    their samples in the same turns (:func:`_tvm_kernels_worker`), and the result has a
    ``"pytorch"`` entry: the fastest path's median over all its samples, and a text naming
    it, the others' medians and the paths that failed. ``turns``, if given, receives for each
    timed kernel one ``(core-to-core round trip in ns, seconds)`` per sample: the round trip
    measured just before the sample's turn (:func:`_round_trip_probe`); processes that could not
    measure it add nothing. ``launch``, if given, receives the samples (seconds per call) of an
    empty parallel kernel on ``threads`` threads timed in the same turns (TVM's launch and join
    as the harness times it, :func:`_tvm_kernels_worker`), and ``turns["launch"]`` its pairs.
    ``peaks``, if given with ``peak_kernel`` (a kernel of :data:`benchmarks.peak.KERNELS`),
    receives for each timed kernel one ``(peak op/s, seconds)`` per sample: that peak kernel's
    reading taken just before the sample's turn (:func:`_peak_probe`); a process that could not
    read it adds nothing, and its log entries say why (``peak_failed``)."""

    import numpy as np

    from heronlike.measure import run_in_subprocess

    if not kernels and torch_case is None:
        if also is not None:
            for r in range(max(1, rounds)):
                also(r)
        return {}
    exp_path = work / "harness_expected.npz"
    np.savez(exp_path, **{f"arg{i}": a for i, a in expected.items()})
    items = {}
    for name, (so, arrays) in kernels.items():
        args_path = work / f"harness_args_{name}.npz"
        np.savez(args_path, **{f"arg{i}": a for i, a in enumerate(arrays)})
        items[name] = (str(so), str(args_path))
    names = list(kernels)
    seen: dict[str, list[tuple[list[float] | None, bool, str]]] = {k: [] for k in names}
    torch_seen: dict[str, list[float]] = {}
    torch_failed: list[str] = []
    worker_torch = (*torch_case, threads) if torch_case is not None else None
    try:
        for r in range(max(1, rounds)):
            if also is not None and r % 2:
                also(r)
            order = names[r % len(names) :] + names[: r % len(names)]
            try:
                results, share = run_in_subprocess(
                    _worker("_tvm_kernels_worker"),
                    [items[k] for k in order],
                    str(exp_path),
                    HARNESS_SAMPLES,
                    tuple(prepare),
                    worker_torch,
                    r,  # each process places the arguments its own way
                    threads if launch is not None else None,
                    (peak_kernel, threads) if peak_kernel and peaks is not None else None,
                    timeout_s=600,
                    num_threads=threads,
                )
            except Exception as err:  # noqa: BLE001 - a kernel that crashes the process is data
                results, share = [(None, False, f"harness: {_short(err)}")] * len(order), {}
            round_torch = share.pop("torch", {})
            trips = share.pop("round_trip_ns", None)
            readings = share.pop("peak_ops", None)
            round_launch = share.pop("launch", None)
            timed_turns = [(name, res[0]) for name, res in zip(order, results, strict=True)]
            if launch is not None and round_launch:
                launch.extend(round_launch)
                timed_turns.append(("launch", round_launch))
            for name, samples in timed_turns:
                if turns is not None and trips and samples:
                    turns.setdefault(name, []).extend(zip(trips, samples, strict=True))
                if peaks is not None and readings and samples and name in kernels:
                    peaks.setdefault(name, []).extend(zip(readings, samples, strict=True))
            torch_failed += [f for f in share.pop("torch_failed", []) if f not in torch_failed]
            for path, samples in round_torch.items():
                torch_seen.setdefault(path, []).extend(samples)
            timed_here = timed_turns + [
                (f"pytorch {path}", samples) for path, samples in round_torch.items()
            ]
            for name, (samples, correct, msg) in zip(order, results, strict=True):
                seen[name].append((samples, correct, msg))
            for name, samples in timed_here if log is not None else ():
                got = {"seconds": None}
                if samples:
                    low, high = min(samples), max(samples)
                    got = {"seconds": statistics.median_low(samples), "low": low, "high": high}
                log.append({"round": r, "kernel": name, **got, **share})
            if also is not None and not r % 2:
                also(r)
    finally:
        exp_path.unlink(missing_ok=True)
        for _, args_path in items.values():
            Path(args_path).unlink(missing_ok=True)
    out = {}
    for name, results in seen.items():
        bad = next((res for res in results if not res[0] or not res[1]), None)
        if bad is not None:
            out[name] = (None, False, bad[2])
        else:
            pooled = [t for samples, _, _ in results for t in samples]
            out[name] = (statistics.median_low(pooled), True, "")
    if torch_case is not None:
        from heronlike.baselines import fastest_path

        medians = {p: statistics.median_low(t) for p, t in torch_seen.items() if t}
        try:
            seconds, what = fastest_path(medians, torch_failed, torch_case[0])
            out["pytorch"] = (seconds, True, what + " [timed in the kernels' processes]")
        except RuntimeError as err:
            out["pytorch"] = (None, False, f"PyTorch failed: {err}")
    return out


def build_programs(
    programs: dict[str, Any], space: Any, work: Path
) -> tuple[dict[str, tuple[Path, list]], dict[int, Any]]:
    """Each program (``name -> tvm.IRModule`` of ``space``'s layout) built into
    ``work/<name>.so`` for ``space``'s target, with the arguments to time it on: ``(name ->
    (library, arrays in the kernel's layout), output index -> reference output)``, the inputs
    random (seed 0) and the outputs numpy's, as :func:`time_tvm_kernels` takes them."""
    import numpy as np
    import tvm

    from heronlike.reference import random_inputs, reference_outputs

    target = tvm.target.Target(space.target.tvm_target())
    arrays = random_inputs(space.logical, np.random.default_rng(0))
    expected = reference_outputs(space.logical, arrays)
    args = space.prepare_args(arrays)
    kernels = {}
    for name, mod in programs.items():
        path = work / f"{name}.so"
        tvm.compile(mod, target=target).export_library(str(path))
        kernels[name] = (path, args)
    return kernels, expected


def time_programs(
    programs: dict[str, Any],
    space: Any,
    rounds: int,
    work: Path,
    torch_case: tuple[str, dict[str, int]] | None = None,
    notes: dict[str, str] | None = None,
    turns: dict[str, list[tuple[float, float]]] | None = None,
) -> dict[str, float]:
    """Median seconds of each program (``name -> tvm.IRModule`` of ``space``'s layout) over
    ``rounds`` rounds of the harness (:func:`time_tvm_kernels`: fresh processes, every output
    checked against the reference first, the order rotated from round to round), each built
    into ``work/<name>.so`` for ``space``'s target.

    ``torch_case`` ``(op, params)``: PyTorch's int8 paths are timed in the same processes and
    turns, its fastest under ``"pytorch"`` (left out when none ran); ``notes``, if given,
    receives the text naming that path and the others; ``turns``, if given, each program's
    ``(core round trip ns, seconds)`` per sample (:func:`time_tvm_kernels`).

    Raises:
        RuntimeError: a program failed or differs from the reference.
    """
    kernels, expected = build_programs(programs, space, work)
    results = time_tvm_kernels(
        kernels, expected, work, space.target.cores, rounds, torch_case=torch_case, turns=turns
    )
    out = {}
    for name, (seconds, correct, message) in results.items():
        if name == "pytorch" and name not in programs:
            if notes is not None:
                notes[name] = message
            if seconds is not None:
                out[name] = seconds
            continue
        if seconds is None or not correct:
            raise RuntimeError(f"{name}: {message or 'wrong result'}")
        out[name] = seconds
    return out


def _torch_worker(
    op: str,
    params: dict[str, int],
    samples: int,
    threads: int,
    peak_kernel: str | None = None,
) -> tuple[float, str, list[tuple[float, float]], list[tuple[float, float]]]:
    """The harness's PyTorch process: every int8 CPU path PyTorch has for the case, each timed
    on its own (:func:`heronlike.baselines.torch_path_samples`), with the core-to-core round
    trip measured before each sample (:func:`_round_trip_probe`), and with ``peak_kernel`` one
    reading of that peak kernel after it (:func:`_peak_probe`). Returns ``(seconds, text,
    pairs, peaks)``: the fastest path's median (``median_low``) and the text naming it and the
    others (:func:`heronlike.baselines.fastest_path`), that path's ``(round trip ns, seconds)``
    per sample (empty where the round trip could not be measured), and its ``(peak op/s,
    seconds)`` per sample (empty without ``peak_kernel`` or where the peak could not be read).

    Raises:
        RuntimeError: no path ran (each failure named).
        ModuleNotFoundError: PyTorch is not installed.
    """
    from heronlike.baselines import fastest_path, torch_path_samples

    trips: dict[str, list[float]] = {}
    readings: dict[str, list[float]] = {}
    probes: dict[str, Callable[[], None] | None] = {}
    peak = (peak_kernel, threads) if peak_kernel else None
    failed_peak: list[str] = []

    def before_sample(name: str) -> None:
        if name not in probes:
            probes[name] = _turn_probe(
                _round_trip_probe(trips.setdefault(name, [])),
                _peak_probe(readings.setdefault(name, []), peak, failed_peak),
            )
        probe = probes[name]
        if probe is not None:
            probe()

    timed, failed = torch_path_samples(op, params, samples, threads, before_sample)
    medians = {name: statistics.median_low(got) for name, got in timed.items()}
    seconds, what = fastest_path(medians, failed, op)
    best = min(medians, key=medians.__getitem__)

    def paired(got: list[float]) -> list[tuple[float, float]]:
        return list(zip(got, timed[best], strict=True)) if len(got) == samples else []

    return seconds, what, paired(trips.get(best, [])), paired(readings.get(best, []))


def time_pytorch(
    op: str,
    params: dict[str, int],
    threads: int,
    turns: list[tuple[float, float]] | None = None,
    peak_kernel: str | None = None,
    peaks: list[tuple[float, float]] | None = None,
) -> tuple[float | None, str]:
    """PyTorch's fastest int8 path through the harness, in a process of its own
    (:func:`_torch_worker`); ``(seconds or None, what ran)``. ``turns``, if given, receives
    that path's ``(core-to-core round trip ns, seconds)`` per sample
    (:func:`add_core_state_columns`' ``pytorch``); ``peaks``, if given with ``peak_kernel``,
    its ``(peak op/s, seconds)`` per sample (:func:`add_peak_turn_columns`)."""
    from heronlike.measure import run_in_subprocess

    try:
        seconds, what, pairs, peak_pairs = run_in_subprocess(
            _worker("_torch_worker"),
            op,
            params,
            HARNESS_SAMPLES,
            threads,
            peak_kernel if peaks is not None else None,
            timeout_s=600,
            num_threads=threads,
        )
    except ModuleNotFoundError:
        return None, "PyTorch is not installed (pip install 'heronlike[bench]')"
    except Exception as err:  # noqa: BLE001
        return None, f"PyTorch failed: {_short(err)}"
    if turns is not None:
        turns.extend(pairs)
    if peaks is not None:
        peaks.extend(peak_pairs)
    return seconds, what


def median_run(runs: Sequence[tuple[float | None, str]]) -> tuple[float | None, str]:
    """The median of several :func:`time_pytorch` runs (the lower middle one for an even count)
    with what ran in it, and how many runs it is the median of; a failed run is left out, and
    when every run failed, the first failure's message."""
    ok = sorted((t, what) for t, what in runs if t)
    if not ok:
        return None, runs[0][1] if runs else "not timed"
    t, what = ok[(len(ok) - 1) // 2]
    failed = len(runs) - len(ok)
    return t, f"{what} [median of {len(ok)} processes" + (f"; {failed} failed]" if failed else "]")


def _worker(name: str) -> Any:
    """A worker function of this module as ``benchmarks.suite.<name>``, so the harness's child
    process imports it by name (also when this file runs as ``__main__``)."""
    import importlib

    return getattr(importlib.import_module("benchmarks.suite"), name)


# ------------------------------------------------------------------------------------------------
# peak


def measure_peak(mode: Mode, threads: int) -> tuple[str | None, float | None, str]:
    """``(kernel, op/s, note)``: this machine's measured peak for the mode on ``threads``
    threads (:func:`benchmarks.peak.measure_peaks`): the VNNI kernel in VNNI mode, the
    ``vpmaddwd`` kernel in general mode with that intrinsic, else the fp32 FMA kernel (AVX-512
    if the CPU has it, else AVX2)."""
    from heronlike.host import cpu_flags

    if mode.name == "vnni":
        wanted = ["vnni_u8s8_avx512", "vnni_u8s8_avx"]
    elif mode.mnemonic == "vpmaddwd":
        wanted = ["pmaddwd_s16_avx512", "pmaddwd_s16_avx2"]
    else:
        wanted = ["fma_f32_avx512", "fma_f32_avx2"] if "avx512f" in cpu_flags() else []
        wanted = wanted or ["fma_f32_avx2"]
    try:
        from benchmarks.peak import measure_peaks

        rows = measure_peaks(threads=[threads], repeats=3, kernels=wanted)
    except Exception as err:  # noqa: BLE001 - % of peak is then unknown
        return None, None, f"peak not measured: {_short(err)}"
    by_kernel = {str(r["kernel"]): float(r["ops_per_s"]) for r in rows}
    for name in wanted:
        if name in by_kernel:
            return name, by_kernel[name], ""
    return None, None, f"peak not measured: no {'/'.join(wanted)} kernel on this CPU"


# ------------------------------------------------------------------------------------------------
# one case


def _short(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:300]


def _pct(flop: float, latency_ms: float | None, peak: float | None) -> float | None:
    return 100.0 * flop / (latency_ms / 1e3) / peak if latency_ms and peak else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num and den else None


def _dirname(name: str) -> str:
    """A folder name for a case (``gemm:128,128,128`` -> ``gemm_128_128_128``)."""
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in name)


def run_heronlike(
    compute: Any,
    args,
    mode: Mode,
    work: Path,
    arrays,
    who: str = "heronlike",
):
    """Tune with heronlike for ``args.trials`` trials (None: no limit) and at most
    ``args.time_limit`` seconds (records ``work/records.sqlite``, resumed if there); CSV fields
    (named ``<who>_…``), its best kernel as ``(library, arrays in its layout)`` or None, and the
    tune's space (whose ``packed`` layouts MetaSchedule gets too)."""
    import heronlike
    from benchmarks.metaschedule import asm_uses, executable_asm, library_uses_vnni

    curve: list[tuple[int, float, float | None]] = []
    t0 = time.perf_counter()

    def progress(p: Any) -> None:
        curve.append((p.trials_done, time.perf_counter() - t0, p.best_latency_s))

    try:
        r = heronlike.tune(
            compute,
            mode.target,
            trials=args.trials,
            time_budget_s=args.time_limit,
            explorer=args.explorer,
            seed=args.seed,
            records=work / "records.sqlite",
            work_dir=work,
            batch_size=args.batch,
            number=TRIAL_NUMBER,
            repeat=TRIAL_REPEAT,
            min_repeat_ms=MIN_REPEAT_MS,
            build_timeout_s=BUILD_TIMEOUT_S,
            finalists=FINALISTS,
            final_repeat=FINAL_REPEAT,
            progress=progress,
        )
    except heronlike.UnsupportedShapeError as err:
        return {f"{who}_status": f"skipped: {_short(err)}"}, None, None
    except Exception as err:  # noqa: BLE001 - one failing case must not stop the suite
        return {f"{who}_status": f"error: {_short(err)}"}, None, None
    row: dict[str, Any] = {
        f"{who}_trials": r.trials_run,
        f"{who}_valid_rate": r.valid / r.trials_run if r.trials_run else None,
        f"{who}_tune_s": time.perf_counter() - t0,
        f"{who}_curve": curve_text(curve),
        f"_{who}_curve": curve,
        f"{who}_correct": r.correct,
    }
    if r.kernel is None or not r.latency_s:
        row[f"{who}_status"] = "no valid kernel"
        return row, None, r.space
    if not r.correct:
        row[f"{who}_status"] = "wrong_result in heronlike's own check"
        return row, None, r.space
    so = r.kernel.export_library(work / "best.so")
    asm = executable_asm(r.kernel.executable)
    if asm is not None:
        (work / "best.s").write_text(asm)
    row[f"{who}_vnni"] = asm_uses(asm) if asm is not None else library_uses_vnni(so)
    if mode.mnemonic is not None and asm is not None:
        row[f"{who}_uses_intrinsic"] = asm_uses(asm, mode.mnemonic)
    return row, (so, r.space.prepare_args(arrays)), r.space


def run_heronlike_equal_wall(
    compute: Any, args, mode: Mode, case_dir: Path, arrays, row: dict[str, Any]
) -> tuple[dict[str, Any], Any]:
    """heronlike given MetaSchedule's search time: its tune of ``case_dir/heronlike``
    continued (on a copy of its records, in ``case_dir/heronlike_eq_wall``) until its search
    seconds, counted from the first tune's start, reach MetaSchedule's: no batch starts later
    than one batch's time (the first tune's mean) before them, so the last ends about then
    (``heronlike_eq_wall_search_s`` says when it did). CSV fields ``heronlike_eq_wall_*`` and
    its kernel as in :func:`run_heronlike` (None when it was not run: MetaSchedule's search was
    not the longer, or a tuner has no curve)."""
    import sqlite3

    who = "heronlike_eq_wall"
    h = row.get("_heronlike_curve") or parse_curve(row.get("heronlike_curve") or "")
    m = row.get("_ms_curve") or parse_curve(row.get("ms_curve") or "")
    if not h or not m or m[-1][1] <= h[-1][1]:
        why = "no curve" if not h or not m else "MetaSchedule's search was not the longer"
        return {f"{who}_status": f"not run: {why}"}, None
    first_s, target_s = h[-1][1], m[-1][1]
    # no batch should start that would end past MetaSchedule's time: stop one batch early
    batch_s = (h[-1][1] - h[0][1]) / (len(h) - 1) if len(h) > 1 else 0.0
    work = case_dir / who
    work.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(case_dir / "heronlike" / "records.sqlite")
    dst = sqlite3.connect(work / "records.sqlite")
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    budget = max(target_s - first_s - batch_s, 1e-3)
    more_args = argparse.Namespace(**{**vars(args), "trials": None, "time_limit": budget})
    out, kernel, _ = run_heronlike(compute, more_args, mode, work, arrays, who=who)
    more = out.get(f"_{who}_curve") or []
    out[f"_{who}_curve"] = h + [(n, first_s + s, lat) for n, s, lat in more]
    out[f"{who}_curve"] = curve_text(out[f"_{who}_curve"])
    out[f"{who}_search_s"] = out[f"_{who}_curve"][-1][1]
    out[f"{who}_trials"] = (row.get("heronlike_trials") or 0) + (out.get(f"{who}_trials") or 0)
    return out, kernel


def ms_layouts(space: Any, func: Any) -> dict[int, Any]:
    """heronlike's packed parameter layouts (``space.packed``) by parameter position, for the
    parameters whose kernel shape is the compute's own (not reshaped or padded by the target)."""
    out = {}
    names = [p.name for p in space.logical.params]
    for name, layout in (space.packed or {}).items():
        if name not in names:
            continue
        pos = names.index(name)
        logical = tuple(int(d) for d in func.params[pos].ty.shape)
        if tuple(int(d) for d in space.template.func.params[pos].shape) == logical:
            out[pos] = layout
    return out


def run_metaschedule(dag, compute, space, args, mode: Mode, tgt, worker, work: Path, arrays):
    """Tune with MetaSchedule (heronlike's weight layouts with ``--ms-weights packed``); CSV
    fields and its best kernel as ``(library, arrays in its layout)`` or None."""
    import tvm

    from benchmarks.metaschedule import pack_func_layouts, widen_func_operands
    from heronlike.space import generate_space

    func, layouts = dag.func, {}
    if args.ms_weights == "packed":
        if space is None:  # heronlike failed: its layouts still come from its rules
            try:
                space = generate_space(compute, mode.target)
            except Exception:  # noqa: BLE001
                space = None
        layouts = ms_layouts(space, dag.func) if space is not None else {}
        if layouts:
            func = pack_func_layouts(dag.func, layouts)
    if mode.intrinsic is not None:  # the int16 copy of A heronlike's kernel reads, if any
        func = widen_func_operands(func, tgt.match(dag))
    names = [p.name for p in dag.params]
    layout_text = "; ".join(f"{names[i]}: {layouts[i]}" for i in sorted(layouts))
    layout_text = f"packed as heronlike's kernel takes it: {layout_text}" if layouts else "plain"
    res = worker.tune(
        tvm.IRModule({"main": func}),
        tgt.tvm_target(),
        trials=args.trials,
        work_dir=work,
        seed=args.seed,
        trials_per_iter=args.batch,
        number=TRIAL_NUMBER,
        repeat=TRIAL_REPEAT,
        min_repeat_ms=MIN_REPEAT_MS,
        build_timeout_s=BUILD_TIMEOUT_S,
        time_limit_s=args.time_limit,
        intrinsic=mode.intrinsic,
    )
    curve = [tuple(p) for p in res.curve]
    row: dict[str, Any] = {
        "ms_weights": layout_text,
        "ms_trials": res.trials_run,
        "ms_valid_rate": res.valid / res.trials_run if res.trials_run else None,
        "ms_tune_s": res.wall_s,
        "ms_vnni": res.uses_vnni,
        "ms_curve": curve_text(curve),
        "_ms_curve": curve,
    }
    best_s = work / "best.s"
    if mode.mnemonic is not None and best_s.exists():
        from benchmarks.metaschedule import asm_uses

        row["ms_uses_intrinsic"] = asm_uses(best_s.read_text(), mode.mnemonic)
    if res.artifact_path is None:
        row["ms_status"] = f"error: {res.error}"
        return row, None
    packed = [layouts[i].pack(a) if i in layouts else a for i, a in enumerate(arrays)]
    return row, (Path(res.artifact_path), packed)


def case_gop(spec: str, mode: Mode) -> float:
    """Giga-operations of a case in the shape it runs (no tuning; for the size guard)."""
    from heronlike import ops
    from heronlike.dag import ComputeDAG

    _, op, params, _ = parse_case(spec)
    params, _ = pad_to_intrinsic(op, params, mode)
    return ComputeDAG.from_compute(getattr(ops, op)(**params, dtype="int8")).flop() / 1e9


def dag_bytes(dag: Any) -> tuple[int, int]:
    """``(bytes read, bytes written)`` by a kernel of ``dag`` that reads each input once and
    writes each output once (its parameters' sizes: inputs, outputs)."""
    import numpy as np

    sizes = {
        p.name: math.prod(int(d) for d in p.shape) * np.dtype(p.dtype).itemsize for p in dag.params
    }
    written = sum(n for name, n in sizes.items() if name in dag.outputs)
    return sum(sizes.values()) - written, written


def case_bytes(spec: str, mode: Mode) -> tuple[int, int]:
    """:func:`dag_bytes` of a case in the shape it runs (no tuning; for a resumed CSV)."""
    from heronlike import ops
    from heronlike.dag import ComputeDAG

    _, op, params, _ = parse_case(spec)
    params, _ = pad_to_intrinsic(op, params, mode)
    return dag_bytes(ComputeDAG.from_compute(getattr(ops, op)(**params, dtype="int8")))


def _memory_floor_worker(read_bytes: int, write_bytes: int, threads: int, samples: int) -> float:
    """Harness worker: :func:`benchmarks.peak.measure_memory_floor` on 1 and on ``threads``
    threads, the faster (a one-thread pass pays no fork and join, which a microsecond kernel
    may avoid the same way)."""
    from benchmarks.peak import measure_memory_floor

    counts = sorted({1, threads})
    return min(measure_memory_floor(read_bytes, write_bytes, t, samples) for t in counts)


def time_memory_floor(read_bytes: int, write_bytes: int, threads: int) -> float | None:
    """The memory floor of a case (seconds) in a fresh harness process, ``None`` when it could
    not be measured (no gcc)."""
    from heronlike.measure import run_in_subprocess
    from heronlike.measure.runner import WORKER_BLOCKED_MODULES

    try:
        return run_in_subprocess(
            _worker("_memory_floor_worker"),
            read_bytes,
            write_bytes,
            threads,
            HARNESS_SAMPLES,
            timeout_s=600,
            num_threads=threads,
            blocked=WORKER_BLOCKED_MODULES,  # no PyTorch here: it would add 2 s of start-up
        )
    except Exception as err:  # noqa: BLE001 - a figure left empty, not a lost case
        print(f"memory floor not measured: {_short(err)}", flush=True)
        return None


def _launch_worker(threads: int) -> float:
    """Harness worker: :func:`benchmarks.peak.measure_parallel_launch` on ``threads`` threads."""
    from benchmarks.peak import measure_parallel_launch

    return measure_parallel_launch(threads)


def time_launch(threads: int, processes: int = HARNESS_ROUNDS) -> tuple[float, float] | None:
    """TVM's parallel launch and join on ``threads`` threads, in microseconds, measured in
    ``processes`` fresh harness processes (it holds for a whole process, and differs between
    them): ``(fastest process, median process)``; ``None`` when it could not be measured.

    Every tuned kernel of a case pays it once per call (one parallel region), so a row's
    ``launch_ceiling_pct`` (:func:`set_roofline`) is the most of the peak its compute floor
    leaves room for, with the fastest process's launch (the bound least in the kernel's way).
    """
    from heronlike.measure import run_in_subprocess
    from heronlike.measure.runner import WORKER_BLOCKED_MODULES

    got = []
    for _ in range(processes):
        try:
            got.append(
                run_in_subprocess(
                    _worker("_launch_worker"),
                    threads,
                    timeout_s=120,
                    num_threads=threads,
                    blocked=WORKER_BLOCKED_MODULES,
                )
                * 1e6
            )
        except Exception as err:  # noqa: BLE001 - a figure left empty, not a lost case
            print(f"parallel launch not measured: {_short(err)}", flush=True)
            return None
    return min(got), statistics.median(got)


def add_memory_floor(row: dict[str, Any], read_bytes: int, write_bytes: int, note: str) -> None:
    """The row's measured memory floor (:func:`time_memory_floor`) and the roofline figures
    derived from it (:func:`set_roofline`)."""
    row["bytes_read"], row["bytes_written"] = read_bytes, write_bytes
    floor = time_memory_floor(read_bytes, write_bytes, int(row.get("threads") or 1))
    row["memory_floor_ms"] = floor * 1e3 if floor else None
    row["memory_floor_note"] = note if floor else None
    set_roofline(row)


#: the launch columns (µs) and the ceiling each leaves a row (% of the peak, :func:`set_roofline`)
LAUNCH_CEILINGS = (
    ("launch_us", "launch_ceiling_pct"),
    ("launch_harness_us", "launch_ceiling_harness_pct"),
    ("launch_near_us", "launch_ceiling_near_pct"),
    ("launch_far_us", "launch_ceiling_far_pct"),
)


def add_harness_launch_columns(
    row: dict[str, Any], samples: Sequence[float], pairs: Sequence[tuple[float, float]]
) -> None:
    """The row's launch as its harness timed it (:func:`time_tvm_kernels`' ``launch``: an empty
    parallel kernel called from Python in the kernels' turns): ``launch_harness_us``, the median
    of ``samples``, and, from ``pairs`` (its ``(round trip ns, seconds)`` per sample),
    ``launch_near_us`` / ``launch_far_us`` split like the kernels' samples
    (:func:`add_core_state_columns`, whose ``round_trip_ns_reference`` it needs), with the
    ceilings they leave (:data:`LAUNCH_CEILINGS`, :func:`set_roofline`). Nothing where the
    launch was not timed."""
    if not samples:
        return
    row["launch_harness_us"] = statistics.median_low(samples) * 1e6
    ref = row.get("round_trip_ns_reference")
    if pairs and ref:
        for state, sec in zip(("near", "far"), state_medians(pairs, float(ref)), strict=True):
            row[f"launch_{state}_us"] = sec * 1e6 if sec is not None else None
    set_roofline(row)


def set_roofline(row: dict[str, Any]) -> None:
    """``compute_floor_ms`` (operations / measured peak), ``roofline_ms`` (the larger of it and
    ``memory_floor_ms``), ``bound`` (which one) and every column's ``*_pct_roofline`` (roofline
    time / its latency, in %; 100 % = as fast as this machine can run the case)."""
    gop, peak, floor = row.get("gop"), row.get("peak_gops"), row.get("memory_floor_ms")
    compute = float(gop) / float(peak) * 1e3 if gop and peak else None
    row["compute_floor_ms"] = compute
    bounds = [(v, k) for v, k in ((compute, "compute"), (floor, "memory")) if v]
    roof, row["bound"] = max(bounds) if bounds else (None, None)
    row["roofline_ms"] = roof
    for launch, ceiling in LAUNCH_CEILINGS:
        us = row.get(launch)
        if launch == "launch_us" or us is not None:
            row[ceiling] = (
                100.0 * compute / (compute + float(us) * 1e-3) if compute and us else None
            )
    for who in ("heronlike", "ms", "pytorch", "numpy"):
        row[f"{who}_pct_roofline"] = _ratio(100.0 * roof, row.get(f"{who}_ms")) if roof else None


def per_case_parser(doc: str, cases: Sequence[str]) -> argparse.ArgumentParser:
    """The command line every per-case benchmark shares (:func:`run_per_case`): ``--cases``
    (default ``cases``), ``--trials`` and ``--batch`` (the suite's quick budget), ``--out``
    (``benchmarks/results``); its description is ``doc``'s first line."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--cases", default=",".join(cases))
    p.add_argument("--trials", type=int, default=QUICK_TRIALS)
    p.add_argument("--batch", type=int, default=QUICK_BATCH)
    p.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results")
    p.add_argument(
        "--target",
        default=None,
        help="heronlike target (default: this CPU's mode, dlboost or llvm); e.g. "
        '"llvm -mcpu=znver3" for the AVX2 kernels on a newer CPU',
    )
    return p


def run_per_case(
    args: argparse.Namespace, one_case: Any, stem: str
) -> tuple[list[dict[str, Any]], Path | None]:
    """A per-case benchmark's run (``padding_skip.py``, ``prior_effect.py``,
    ``fused_placement.py``): ``one_case(spec, args, mode, work)`` for each of ``args.cases``
    (comma-separated), each in a fresh work folder, on this CPU's mode; its rows (a dict or a
    list of them per case) written to ``<args.out>/<stem>-<cpu>-<date>.csv``. Returns the rows
    and the CSV's path (``None`` when no row came back)."""
    import datetime as dt
    import tempfile

    from heronlike.host import machine_slug

    mode = resolve_mode("auto", getattr(args, "target", None))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in split_cases(args.cases):
            work = Path(tmp) / _dirname(spec)
            work.mkdir()
            found = one_case(spec, args, mode, work)
            rows += found if isinstance(found, list) else [found]
    if not rows:
        return rows, None
    path = write_rows(args.out / f"{stem}-{machine_slug()}-{dt.date.today()}.csv", rows)
    print(f"wrote {path}")
    return rows, path


def _unrun(row: dict, status: str) -> dict:
    """``row`` with ``status`` (``skipped: …`` or ``error: …``) in every column's status: the
    case was not run by any tuner or library."""
    row.update(heronlike_status=status, ms_status=status, pytorch_impl=status, numpy_impl=status)
    return row


def run_case(
    spec: str,
    args,
    mode: Mode,
    tgt,
    worker,
    peak,
    work_root: Path,
    launch_us: tuple[float, float] | None = None,
    round_trip_ref_ns: float | None = None,
) -> dict[str, Any]:
    """Every measurement of one case, as one CSV row (work files in a fresh folder);
    ``round_trip_ref_ns``: the lowest core-to-core round trip of the run so far, against which
    the harness's turns are called near or far (:func:`add_core_state_columns`)."""
    import numpy as np

    from heronlike import ops
    from heronlike.baselines import numpy_op
    from heronlike.dag import ComputeDAG
    from heronlike.reference import random_inputs, reference_outputs

    t_case = time.perf_counter()
    name, op, params, source = parse_case(spec)
    run_params, padded = pad_to_intrinsic(op, params, mode)
    rounds = getattr(args, "harness_rounds", HARNESS_ROUNDS)
    row: dict[str, Any] = {
        "case": name,
        "op": op,
        "params": _params_text(params),
        "shape_run": _params_text(run_params),
        "padded": padded,
        "source": source,
        "dtype": "int8 (u8 x s8 -> s32)",
        "mode": mode.name,
        "vnni_note": mode.note,
        "intrinsic": mode.mnemonic,
        "heronlike_target": mode.target,
        "ms_target": str(tgt.tvm_target()),
        "trials": args.trials,
        "batch": args.batch,
        "time_limit_s": args.time_limit,
        "explorer": args.explorer,
        "seed": args.seed,
        "threads": tgt.cores,  # every tuner and every timing of the case runs on this many
        "peak_kernel": peak[0] or peak[2],
        "peak_gops": peak[1] / 1e9 if peak[1] else None,
        "launch_us": launch_us[0] if launch_us else None,
        "launch_us_median": launch_us[1] if launch_us else None,
        "timing": f"harness: fresh process, {tgt.cores} threads, 3 warm-up calls, median of "
        f"{HARNESS_SAMPLES} samples >= 10 ms; tuned kernels: samples in turn, in "
        f"{rounds} such processes, the median of all samples; PyTorch: median of "
        f"{rounds} processes, interleaved with the kernels'; *_fastest_process_ms: "
        "each column's fastest process's median",
    }
    if not hasattr(ops, op):
        return _unrun(row, "skipped: operator not available")
    if getattr(args, "requantize", False) and op not in REQUANTIZE_OPS:
        ops_list = ", ".join(REQUANTIZE_OPS)
        return _unrun(row, f"skipped: --requantize covers the convolutions ({ops_list})")
    try:
        compute = getattr(ops, op)(**run_params, dtype="int8")
        dag = ComputeDAG.from_compute(compute)
    except Exception as err:  # noqa: BLE001 - e.g. an extent the operator rejects
        return _unrun(row, f"error: {_short(err)}")
    flop = dag.flop()
    row["gop"] = flop / 1e9
    limit = args.max_gop_per_core * tgt.cores
    if args.size_guard and row["gop"] > limit:
        return _unrun(
            row,
            f"skipped: too large for a {tgt.cores}-core run ({row['gop']:.0f} GOP > "
            f"{limit:.0f}; --full runs it)",
        )
    case_dir = work_root / _dirname(name)
    shutil.rmtree(case_dir, ignore_errors=True)  # a case killed before starts over
    (case_dir / "heronlike").mkdir(parents=True)
    (case_dir / "metaschedule").mkdir(parents=True)
    arrays = random_inputs(dag, np.random.default_rng(args.seed))
    expected = reference_outputs(dag, arrays)
    if getattr(args, "requantize", False):
        (int32_output,) = expected.values()
        compute, shift = requantized_compute(compute, int32_output)
        dag = ComputeDAG.from_compute(compute)  # flop stays the multiply-adds'
        arrays = random_inputs(dag, np.random.default_rng(args.seed))
        expected = reference_outputs(dag, arrays)
        row["dtype"] = "int8 (u8 x s8 -> s32 -> requantised s8)"
        row["epilogue"] = (
            f"requantize: clip(C >> {shift}, -128, 127) as int8, in heronlike's and "
            "MetaSchedule's compute; PyTorch's u8 requantisation"
        )

    print(f"[{name}] {op} {row['shape_run']}: heronlike ({args.trials} trials) ...", flush=True)
    h_row, h_kernel, space = run_heronlike(compute, args, mode, case_dir / "heronlike", arrays)
    row.update(h_row)
    kernels = {"heronlike": h_kernel} if h_kernel else {}
    if args.no_metaschedule:
        row["ms_status"] = "not run (--no-metaschedule)"
    else:
        print(f"[{name}] MetaSchedule ({args.trials} trials) ...", flush=True)
        try:
            ms_row, ms_kernel = run_metaschedule(
                dag, compute, space, args, mode, tgt, worker, case_dir / "metaschedule", arrays
            )
            row.update(ms_row)
            if ms_kernel:
                kernels["ms"] = ms_kernel
        except Exception as err:  # noqa: BLE001
            row["ms_status"] = f"error: {_short(err)}"
        if args.equal_wall and h_kernel and row.get("ms_curve"):
            print(f"[{name}] heronlike again, for MetaSchedule's search time ...", flush=True)
            eq_row, eq_kernel = run_heronlike_equal_wall(compute, args, mode, case_dir, arrays, row)
            row.update(eq_row)
            if eq_kernel:
                kernels["heronlike_eq_wall"] = eq_kernel
    print(f"[{name}] timing: tuned kernels, PyTorch, numpy ...", flush=True)
    torch_runs: list[tuple[float | None, str]] = []
    torch_turns: list[tuple[float, float]] = []
    torch_peaks: list[tuple[float, float]] = []
    row["harness_children"] = " ".join(descendants())
    log: list[dict[str, Any]] = []
    turns: dict[str, list[tuple[float, float]]] = {}
    peaks: dict[str, list[tuple[float, float]]] = {}
    launch: list[float] = []
    timed = time_tvm_kernels(
        kernels,
        expected,
        case_dir,
        tgt.cores,
        rounds,
        also=lambda _: torch_runs.append(
            time_pytorch(
                op, run_params, tgt.cores, torch_turns, peak_kernel=peak[0], peaks=torch_peaks
            )
        ),
        log=log,
        turns=turns,
        launch=launch,
        peak_kernel=peak[0],
        peaks=peaks,
    )
    row["harness_log"] = harness_log_text(log)
    for who, (lat, correct, msg) in timed.items():
        row[f"{who}_correct"] = bool(correct and row.get(f"{who}_correct", True))
        if lat is not None and correct:
            row[f"{who}_ms"], row[f"{who}_status"] = lat * 1e3, "ok"
        else:
            row[f"{who}_status"] = msg or "wrong_result"
    t, row["pytorch_impl"] = median_run(torch_runs)
    row["pytorch_ms"] = t * 1e3 if t else None
    add_core_state_columns(row, turns, round_trip_ref_ns, pytorch=torch_turns)
    add_harness_launch_columns(row, launch, turns.get("launch", []))
    for who, seconds in fastest_process(log).items():
        if row.get(f"{who}_status") == "ok":
            row[f"{who}_fastest_process_ms"] = seconds * 1e3
    ok = [t for t, _ in torch_runs if t]
    row["pytorch_fastest_process_ms"] = min(ok) * 1e3 if ok else None
    t, row["numpy_impl"] = numpy_op(op, run_params, threads=tgt.cores, repeat=HARNESS_SAMPLES)
    row["numpy_ms"] = t * 1e3 if t else None
    derive(row, flop, peak[1])
    add_peak_turn_columns(row, flop, {**peaks, "pytorch": torch_peaks}, log)
    add_memory_floor(row, *dag_bytes(dag), "measured with the case")
    add_trial_columns(row, case_dir)
    add_target_columns(row)
    row["case_s"] = time.perf_counter() - t_case
    print(f"[{name}] {_summary(row)}", flush=True)
    return row


def _set_pct_peak(row: dict[str, Any], flop: float, peak: float | None) -> None:
    """Every column's ``*_pct_peak``: its latency's operations per second over ``peak``."""
    for who in ("heronlike", "ms", "pytorch", "numpy"):
        row[f"{who}_pct_peak"] = _pct(flop, row.get(f"{who}_ms"), peak)
    for who in ("heronlike", "ms", "pytorch"):
        ms = row.get(f"{who}_fastest_process_ms")
        row[f"{who}_pct_peak_fastest_process"] = _pct(flop, ms, peak)


#: the columns whose samples get a % of the peak read in their own turns
PEAK_TURN_COLUMNS = ("heronlike", "ms", "heronlike_eq_wall", "pytorch")


def add_peak_turn_columns(
    row: dict[str, Any],
    flop: float,
    peaks: dict[str, Sequence[tuple[float, float]]],
    log: Sequence[dict[str, Any]] = (),
) -> None:
    """The row's % of the peak read in the harness's own turns: ``peaks`` maps each timed
    column to its ``(peak op/s, seconds)`` per sample (:func:`time_tvm_kernels`' and
    :func:`time_pytorch`'s ``peaks``: the peak kernel read just before the sample's turn, in
    the same process).

    ``<who>_pct_peak_turns`` (for each of :data:`PEAK_TURN_COLUMNS` timed, status ok or
    PyTorch with a latency): the median over its samples of ``flop / seconds / peak``, in %,
    each sample against the peak of its own turn, so a VM that changes its speed state between
    the run's peak measurement and a case (the Zen 1 VM: 71-95 G op/s within one night)
    moves both alike. ``peak_turns_gops`` (median), ``peak_turns_low_gops`` and
    ``peak_turns_high_gops``: the readings of the tuned kernels' turns (PyTorch's when no
    kernel was timed), in G op/s. ``peak_turns_note``: why a column has none (the peak could
    not be read, from ``log``'s ``peak_failed``). Beside the run's one peak (``*_pct_peak``),
    not instead of it."""
    for who in PEAK_TURN_COLUMNS:
        timed = row.get(f"{who}_ms") if who == "pytorch" else row.get(f"{who}_status") == "ok"
        pairs = peaks.get(who) or []
        if timed and pairs:
            row[f"{who}_pct_peak_turns"] = statistics.median(
                100.0 * flop / seconds / rate for rate, seconds in pairs
            )
    kernels = [pairs for who, pairs in peaks.items() if who != "pytorch" and pairs]
    readings = [rate for rate, _ in (kernels[0] if kernels else peaks.get("pytorch") or [])]
    if readings:
        row["peak_turns_gops"] = statistics.median(readings) / 1e9
        row["peak_turns_low_gops"] = min(readings) / 1e9
        row["peak_turns_high_gops"] = max(readings) / 1e9
    failed = {e["peak_failed"] for e in log if e.get("peak_failed")}
    if failed:
        row["peak_turns_note"] = "peak not read in some turns: " + "; ".join(sorted(failed))


def settle_peak(rows: list[dict[str, Any]], first: float, again: float) -> None:
    """Rows measured against the peak ``first`` (op/s) get the higher re-measure ``again``:
    ``peak_gops`` and every ``*_pct_peak`` recomputed, and ``peak_note`` saying so."""
    for row in rows:
        if not row.get("gop"):
            continue
        row["peak_gops"] = again / 1e9
        _set_pct_peak(row, float(row["gop"]) * 1e9, again)
        set_roofline(row)
        row["peak_note"] = (
            f"the higher of peak.py's readings before ({first / 1e9:.0f} G op/s) and after "
            f"({again / 1e9:.0f}) the cases"
        )


def derive(row: dict[str, Any], flop: float, peak: float | None) -> None:
    """The row's derived columns: speedups, % of peak, both-VNNI flag, curve figures."""
    h = row.get("heronlike_ms")
    row["speedup_vs_ms"] = _ratio(row.get("ms_ms"), h)
    row["speedup_vs_pytorch"] = _ratio(row.get("pytorch_ms"), h)
    row["speedup_vs_numpy"] = _ratio(row.get("numpy_ms"), h)
    fast = {who: row.get(f"{who}_fastest_process_ms") for who in ("heronlike", "ms", "pytorch")}
    row["speedup_vs_ms_fastest_process"] = _ratio(fast["ms"], fast["heronlike"])
    row["speedup_vs_pytorch_fastest_process"] = _ratio(fast["pytorch"], fast["heronlike"])
    _set_pct_peak(row, flop, peak)
    hv, mv = row.get("heronlike_vnni"), row.get("ms_vnni")
    row["both_vnni"] = None if hv is None or mv is None else bool(hv and mv)
    curves = {who: row.pop(f"_{who}_curve", None) for who in ("heronlike", "ms")}
    for who, curve in curves.items():
        if curve is None:
            continue
        m = curve_metrics(curve)
        row[f"{who}_tuning_best_ms"] = m["best_s"] * 1e3 if m["best_s"] else None
        row[f"{who}_search_s"] = m["search_s"]
        row[f"{who}_trials_to_95"] = m["trials_to_95"]
        row[f"{who}_s_to_95"] = m["s_to_95"]
    eq_curve = row.pop("_heronlike_eq_wall_curve", None)
    if curves["heronlike"] and curves["ms"]:
        # equal wall time = MetaSchedule's search time: what MetaSchedule had by heronlike's
        # (the shorter) one, and heronlike's kernel when given MetaSchedule's (harness-timed)
        row["eq_wall_s"] = row["ms_search_s"]
        lat = best_at(curves["ms"], row["heronlike_search_s"])
        row["ms_best_at_heronlike_s_ms"] = lat * 1e3 if lat else None
        if eq_curve:
            row["heronlike_eq_wall_tuning_best_ms"] = curve_metrics(eq_curve)["best_s"] * 1e3
        row["speedup_vs_ms_at_eq_wall"] = _ratio(row.get("ms_ms"), row.get("heronlike_eq_wall_ms"))


# ------------------------------------------------------------------------------------------------
# output

COLUMNS = (
    "case", "op", "params", "shape_run", "padded", "source", "dtype", "mode", "trials", "batch",
    "time_limit_s", "explorer", "seed", "gop", "threads",
    "heronlike_ms", "ms_ms", "pytorch_ms", "numpy_ms",
    "speedup_vs_ms", "speedup_vs_pytorch", "speedup_vs_numpy",
    "heronlike_vnni", "ms_vnni", "both_vnni",
    "intrinsic", "heronlike_uses_intrinsic", "ms_uses_intrinsic",
    "peak_kernel", "peak_gops", "peak_note",
    "heronlike_pct_peak", "ms_pct_peak", "pytorch_pct_peak", "numpy_pct_peak",
    "heronlike_fastest_process_ms", "ms_fastest_process_ms", "pytorch_fastest_process_ms",
    "heronlike_eq_wall_fastest_process_ms",
    "speedup_vs_ms_fastest_process", "speedup_vs_pytorch_fastest_process",
    "heronlike_pct_peak_fastest_process", "ms_pct_peak_fastest_process",
    "pytorch_pct_peak_fastest_process",
    "peak_turns_gops", "peak_turns_low_gops", "peak_turns_high_gops", "peak_turns_note",
    "heronlike_pct_peak_turns", "ms_pct_peak_turns", "heronlike_eq_wall_pct_peak_turns",
    "pytorch_pct_peak_turns",
    "round_trip_ns_low", "round_trip_ns_median", "round_trip_ns_high", "round_trip_ns_reference",
    "far_turn_share", "heronlike_near_ms", "ms_near_ms", "heronlike_eq_wall_near_ms",
    "heronlike_far_ms", "ms_far_ms", "heronlike_eq_wall_far_ms", "speedup_vs_ms_near",
    "speedup_vs_ms_far", "pytorch_far_turn_share", "pytorch_near_ms", "pytorch_far_ms",
    "speedup_vs_pytorch_near", "speedup_vs_pytorch_far",
    "bytes_read", "bytes_written", "memory_floor_ms", "memory_floor_note", "compute_floor_ms",
    "roofline_ms", "bound", "launch_us", "launch_us_median", "launch_ceiling_pct",
    "launch_harness_us", "launch_near_us", "launch_far_us", "launch_ceiling_harness_pct",
    "launch_ceiling_near_pct", "launch_ceiling_far_pct",
    "heronlike_pct_roofline", "ms_pct_roofline", "pytorch_pct_roofline", "numpy_pct_roofline",
    "heronlike_tuning_best_ms", "ms_tuning_best_ms",
    "heronlike_search_s", "ms_search_s",
    "heronlike_trials_to_95", "ms_trials_to_95", "heronlike_s_to_95", "ms_s_to_95",
    "target_95_ms", "heronlike_trials_to_target", "ms_trials_to_target",
    "heronlike_s_to_target", "ms_s_to_target",
    "half_target_95_ms", "heronlike_trials_to_half_target", "ms_trials_to_half_target",
    "eq_wall_s", "heronlike_eq_wall_ms", "speedup_vs_ms_at_eq_wall", "heronlike_eq_wall_trials",
    "heronlike_eq_wall_search_s", "heronlike_eq_wall_tuning_best_ms", "heronlike_eq_wall_vnni",
    "heronlike_eq_wall_correct", "heronlike_eq_wall_status", "ms_best_at_heronlike_s_ms",
    "heronlike_valid_rate", "ms_valid_rate", "heronlike_trials", "ms_trials",
    "heronlike_tune_s", "ms_tune_s", "heronlike_correct", "ms_correct",
    "heronlike_status", "ms_status", "ms_weights", "pytorch_impl", "numpy_impl",
    "heronlike_target", "ms_target", "timing", "vnni_note", "epilogue",
    "heronlike_curve", "ms_curve", "heronlike_eq_wall_curve", "heronlike_trial_ms",
    "ms_trial_ms", "case_s", "harness_children", "harness_log",
    "cpu_model", "cpu_signature", "date",
)  # fmt: skip

#: columns read back as numbers / booleans when a CSV is resumed
_BOOL_COLUMNS = (
    "heronlike_vnni",
    "ms_vnni",
    "both_vnni",
    "heronlike_uses_intrinsic",
    "ms_uses_intrinsic",
    "heronlike_correct",
    "ms_correct",
    "heronlike_eq_wall_vnni",
    "heronlike_eq_wall_correct",
)
_TEXT_COLUMNS = {
    "case", "op", "params", "shape_run", "padded", "source", "dtype", "mode", "peak_kernel",
    "intrinsic", "memory_floor_note", "bound", "peak_turns_note",
    "explorer",
    "heronlike_status", "ms_status", "heronlike_eq_wall_status", "ms_weights", "pytorch_impl",
    "numpy_impl", "heronlike_target", "ms_target", "timing", "vnni_note", "epilogue",
    "heronlike_curve",
    "ms_curve", "heronlike_eq_wall_curve", "heronlike_trial_ms", "ms_trial_ms", "harness_children",
    "harness_log", "cpu_model", "cpu_signature", "date",
}  # fmt: skip


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _summary(row: dict[str, Any]) -> str:
    return (
        f"heronlike {_fmt(row.get('heronlike_ms'))} ms ({row.get('heronlike_status')}, VNNI "
        f"{_fmt(row.get('heronlike_vnni'))}), MetaSchedule {_fmt(row.get('ms_ms'))} ms "
        f"({row.get('ms_status')}, VNNI {_fmt(row.get('ms_vnni'))}), PyTorch "
        f"{_fmt(row.get('pytorch_ms'))} ms, numpy {_fmt(row.get('numpy_ms'))} ms; % of the "
        f"peak in the same turns: heronlike {_fmt(row.get('heronlike_pct_peak_turns'))}, "
        f"PyTorch {_fmt(row.get('pytorch_pct_peak_turns'))}"
    )


def geomean(values: Sequence[float | None]) -> float | None:
    """Geometric mean of the positive values (None when there are none)."""
    xs = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in xs) / len(xs)) if xs else None


def read_csv(path: Path) -> list[dict[str, Any]]:
    """Rows of a suite CSV with numbers and booleans parsed back (empty cell = None)."""
    rows = []
    with path.open(newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, Any] = {}
            for k, v in raw.items():
                if v is None or v == "":
                    row[k] = None
                elif k in _BOOL_COLUMNS:
                    row[k] = v == "True"
                elif k in _TEXT_COLUMNS:
                    row[k] = v
                else:
                    try:
                        row[k] = float(v) if any(c in v for c in ".eE") else int(v)
                    except ValueError:
                        row[k] = v
            rows.append(row)
    return rows


def stamped(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the machine (CPU model and family/model/stepping) and the date of
    :func:`heronlike.host.machine_stamp` wherever it has none of its own."""
    from heronlike.host import machine_stamp

    return {**machine_stamp(), **{k: v for k, v in row.items() if v is not None}}


def date_span(rows: Sequence[dict[str, Any]]) -> str:
    """The dates of ``rows`` as a title gives them: ``2026-12-02``, or ``2026-12-02 to
    2026-12-03`` for a CSV resumed on a later day (today where no row has a date)."""
    dates = sorted({str(r["date"]) for r in rows if r.get("date")}) or [time.strftime("%Y-%m-%d")]
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """One row per case, :data:`COLUMNS` in order (empty cell = not measured); every row names
    the machine (CPU model and family/model/stepping, threads) and the date. Written to a
    temporary file and renamed, so a kill never leaves half a file."""
    write_rows(path, (stamped(row) for row in rows), COLUMNS)


#: the geometric means of the summary: (label, column)
SUMMARY_METRICS = (
    ("vs MetaSchedule (equal trials)", "speedup_vs_ms"),
    ("vs MetaSchedule (equal wall time: MetaSchedule's search time)", "speedup_vs_ms_at_eq_wall"),
    ("vs PyTorch", "speedup_vs_pytorch"),
    ("vs numpy", "speedup_vs_numpy"),
    ("vs MetaSchedule (equal trials), fastest process", "speedup_vs_ms_fastest_process"),
    ("vs PyTorch, fastest process", "speedup_vs_pytorch_fastest_process"),
    ("vs MetaSchedule (equal trials), turns with the cores near", "speedup_vs_ms_near"),
    ("vs MetaSchedule (equal trials), turns with the cores far apart", "speedup_vs_ms_far"),
    ("vs PyTorch, turns with the cores near", "speedup_vs_pytorch_near"),
    ("vs PyTorch, turns with the cores far apart", "speedup_vs_pytorch_far"),
)


def summarize(rows: list[dict[str, Any]], mode: Mode) -> list[dict[str, Any]]:
    """Geometric-mean speedups of heronlike over all rows and over the rows where both tuned
    kernels use VNNI (``both_vnni``); in general mode the second is marked unmeasured."""
    both = [r for r in rows if r.get("both_vnni")]
    out = []
    for label, key in SUMMARY_METRICS:
        for subset, sel in (("all rows", rows), ("rows where both sides use VNNI", both)):
            values = [r.get(key) for r in sel if r.get(key)]
            notes = []
            if subset != "all rows" and not values:
                notes.append(
                    "unmeasured: no VNNI on this CPU"
                    if not mode.vnni_measured
                    else "no row where both best kernels use vpdpbusd"
                )
            if key == "speedup_vs_ms_at_eq_wall":
                empty = sum(1 for r in sel if r.get("ms_ms") and not r.get(key))
                if empty:
                    notes.append(f"{empty} rows left out: heronlike was not run again (or failed)")
            note = "; ".join(notes)
            out.append(
                {
                    "metric": f"geomean speedup of heronlike {label}",
                    "column": key,
                    "over": subset,
                    "geomean": geomean(values),
                    "cases": len(values),
                    "note": note,
                }
            )
    return out


def write_summary(summary: list[dict[str, Any]], path: Path, header: dict[str, Any]) -> None:
    """The summary CSV: one row per (metric, subset), each with the run's header fields."""
    fields = ["metric", "column", "over", "geomean", "cases", "note", *header]
    write_rows(path, ({**s, **header} for s in summary), fields)


def write_chart(rows: list[dict[str, Any]], path: Path, title: str) -> bool:
    """Top: heronlike's speedup over each baseline per case (log scale); bottom: each column's
    % of the measured peak."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        return False
    rows = [r for r in rows if r.get("heronlike_ms")]
    if not rows:
        return False
    cases = [str(r["case"]) for r in rows]
    fig, (ax, ax2) = plt.subplots(
        2, 1, figsize=(max(9.0, 0.5 * len(cases) + 2.0), 6.5), dpi=100, sharex=True
    )
    series = (("MetaSchedule", "speedup_vs_ms"), ("PyTorch", "speedup_vs_pytorch"),
              ("numpy", "speedup_vs_numpy"))  # fmt: skip
    width = 0.8 / len(series)
    for i, (label, key) in enumerate(series):
        xs = [j + (i - 1) * width for j in range(len(cases))]
        ys = [r.get(key) or float("nan") for r in rows]
        ax.bar(xs, ys, width, label=f"vs {label}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("heronlike speedup (×)")
    ax.legend(fontsize=7)
    cols = (("heronlike", "heronlike_pct_peak"), ("MetaSchedule", "ms_pct_peak"),
            ("PyTorch", "pytorch_pct_peak"), ("numpy", "numpy_pct_peak"))  # fmt: skip
    width = 0.8 / len(cols)
    for i, (label, key) in enumerate(cols):
        xs = [j + (i - 1.5) * width for j in range(len(cases))]
        ax2.bar(xs, [r.get(key) or float("nan") for r in rows], width, label=label)
    ax2.set_ylabel(f"% of measured peak ({rows[0].get('peak_kernel')})", fontsize=8)
    ax2.legend(fontsize=7)
    ax2.set_xticks(range(len(cases)), cases, rotation=60, fontsize=7)
    import textwrap

    wrapped = "\n".join(textwrap.fill(line, 140) for line in title.splitlines())
    ax.set_title(wrapped, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def print_table(rows: list[dict[str, Any]], summary: list[dict[str, Any]]) -> None:
    """Print the results and the geometric means (both ways)."""
    head = ("case", "padded", "heronlike ms", "MS ms", "PyTorch ms", "numpy ms", "×MS",
            "×PyTorch", "×numpy", "VNNI H/MS", "%peak H/MS", "%roofline H/MS/PT", "95% trials H/MS",
            "95% s H/MS", "eq-wall ms H/MS", "tune s H/MS")  # fmt: skip
    lines = [head]
    for r in rows:
        lines.append(
            (
                str(r["case"]),
                r.get("padded") or "-",
                _fmt(r.get("heronlike_ms")),
                _fmt(r.get("ms_ms")),
                _fmt(r.get("pytorch_ms")),
                _fmt(r.get("numpy_ms")),
                _fmt(r.get("speedup_vs_ms")),
                _fmt(r.get("speedup_vs_pytorch")),
                _fmt(r.get("speedup_vs_numpy")),
                f"{_fmt(r.get('heronlike_vnni'))}/{_fmt(r.get('ms_vnni'))}",
                f"{_fmt(r.get('heronlike_pct_peak'), 2)}/{_fmt(r.get('ms_pct_peak'), 2)}",
                "/".join(
                    _fmt(r.get(f"{who}_pct_roofline"), 2) for who in ("heronlike", "ms", "pytorch")
                )
                + (f" ({r['bound'][0]})" if r.get("bound") else ""),
                f"{_fmt(r.get('heronlike_trials_to_95'))}/{_fmt(r.get('ms_trials_to_95'))}",
                f"{_fmt(r.get('heronlike_s_to_95'), 2)}/{_fmt(r.get('ms_s_to_95'), 2)}",
                f"{_fmt(r.get('heronlike_eq_wall_ms'))}/{_fmt(r.get('ms_ms'))}",
                f"{_fmt(r.get('heronlike_tune_s'), 3)}/{_fmt(r.get('ms_tune_s'), 3)}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
    for s in summary:
        print(
            f"{s['metric']}, over {s['over']}: {_fmt(s['geomean'])} ({s['cases']} cases)"
            + (f" [{s['note']}]" if s["note"] else "")
        )
    for r in rows:
        notes = [f"{k}: {r[k]}" for k in ("heronlike_status", "ms_status") if r.get(k) != "ok"]
        notes += [f"pytorch: {r.get('pytorch_impl')}", f"numpy: {r.get('numpy_impl')}"]
        print(f"  {r['case']}: " + "; ".join(str(n) for n in notes))


# ------------------------------------------------------------------------------------------------
# command line


def budget_tag(args: argparse.Namespace) -> str:
    """The budget in a file name: ``<trials>t<batch>b`` plus ``<limit>s`` with a time limit."""
    tag = f"{args.trials}t{args.batch}b"
    return tag + (f"{args.time_limit:g}s" if args.time_limit is not None else "")


def output_stem(mode: Mode, budget: str, date: str) -> str:
    """``suite-<cpu model>-<family/model>-<mode>-<budget>-<date>`` (the CPU as
    :func:`heronlike.host.machine_slug` names it)."""
    from heronlike.host import machine_slug

    return f"suite-{machine_slug()}-{mode.name}-{budget}-{date}"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases",
        default=None,
        help="comma-separated Heron case names (G1, B1, C2D1, C1D3, GV5, ...) or op:a,b,c "
        "in heronlike.ops argument order (e.g. gemm:128,128,128); separate op specs by ';' "
        f"(default: {','.join(DEFAULT_CASES)}; with --quick: {','.join(QUICK_CASES)})",
    )
    p.add_argument(
        "--table",
        action="store_true",
        help="every case of Heron's DL Boost tables (notes heron_repo.md §7.2); cases above "
        f"--max-gop-per-core (default {MAX_GOP_PER_CORE:g}) get a 'too large' row",
    )
    p.add_argument("--full", action="store_true", help="every case, the large ones included")
    p.add_argument(
        "--max-gop-per-core",
        type=float,
        default=MAX_GOP_PER_CORE,
        help="--table's size guard: giga-operations per core above which a case is skipped",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"the budget of a 2-core table: {QUICK_TRIALS} trials per tuner, batches of "
        f"{QUICK_BATCH}, at most {QUICK_TIME_LIMIT_S:g} s of search per tuner (unless --trials "
        "/ --batch / --time-limit say otherwise), and its case list unless --cases / --table "
        "/ --full",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="search seconds per tuner and case: once spent, neither starts a new batch "
        f"(default: none; --quick: {QUICK_TIME_LIMIT_S:g})",
    )
    p.add_argument("--trials", type=int, default=None, help="budget of each tuner")
    p.add_argument(
        "--batch",
        type=int,
        default=None,
        help="heronlike's batch size and MetaSchedule's round size (default 16, --quick 8)",
    )
    p.add_argument("--explorer", default=None, help="heronlike explorer (default: cga)")
    p.add_argument("--no-metaschedule", action="store_true", help="skip the MetaSchedule tunes")
    p.add_argument(
        "--no-equal-wall",
        dest="equal_wall",
        action="store_false",
        help="skip heronlike's second tune, continued until MetaSchedule's search time (the "
        "equal-wall-time column)",
    )
    p.add_argument(
        "--ms-trials-per-iter", type=int, default=None, help="alias of --batch (old name)"
    )
    p.add_argument(
        "--ms-weights",
        choices=("packed", "plain"),
        default="packed",
        help="weight layout of MetaSchedule's compute: packed = the layout heronlike's kernel "
        "takes (the VNNI tile layout on DL Boost), plain = the operator's own",
    )
    p.add_argument(
        "--ms-unguarded",
        action="store_true",
        help="register heronlike's VNNI intrinsic for MetaSchedule without the compact-tile "
        "guard (MetaSchedule may then tensorize strided weight tiles into wrong kernels)",
    )
    p.add_argument(
        "--mode",
        choices=("auto", "vnni", "general"),
        default="auto",
        help="auto: vnni on a CPU with AVX512-VNNI, else general (both tuners without VNNI)",
    )
    p.add_argument(
        "--target", default=None, help="heronlike target (overrides --mode; default: by mode)"
    )
    p.add_argument(
        "--requantize",
        action="store_true",
        help="convolutions with heronlike's int8 requantisation epilogue for both tuners, so "
        "that every column writes one byte per output, as PyTorch's quantised convolutions do; "
        "other cases are skipped (CSV name: -requantize after the budget)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "out"), help="output folder")
    p.add_argument("--csv", default=None, help="the CSV to write and resume (default: by name)")
    p.add_argument("--fresh", action="store_true", help="start a new CSV instead of resuming")
    p.add_argument(
        "--harness-rounds",
        type=int,
        default=HARNESS_ROUNDS,
        help=f"fresh timing processes per case, each column's samples in each (default "
        f"{HARNESS_ROUNDS}; fewer for a quick look, not for a table)",
    )
    p.add_argument(
        "--redo",
        default="",
        help="comma-separated cases to run again although the resumed CSV has them",
    )
    args = p.parse_args(argv)
    if args.trials is None:
        args.trials = QUICK_TRIALS if args.quick else DEFAULT_TRIALS
    if args.batch is None:
        args.batch = args.ms_trials_per_iter or (QUICK_BATCH if args.quick else 16)
    if args.time_limit is None and args.quick:
        args.time_limit = QUICK_TIME_LIMIT_S
    if args.trials < 1 or args.batch < 1 or args.harness_rounds < 1:
        p.error("--trials, --batch and --harness-rounds must be at least 1")
    if args.explorer is None:
        from heronlike.explore import EXPLORERS

        args.explorer = "cga" if "cga" in EXPLORERS else "random"
    args.size_guard = args.table and not args.full
    if args.full or args.table:
        args.case_list = list(HERON_CASES)
    elif args.cases is None:
        args.case_list = list(QUICK_CASES if args.quick else DEFAULT_CASES)
    else:
        args.case_list = split_cases(args.cases)
    args.redo = split_cases(args.redo)
    for spec in [*args.case_list, *args.redo]:
        try:
            parse_case(spec)
        except ValueError as err:
            p.error(str(err))
    return args


def _csv_path(args: argparse.Namespace, mode: Mode, out: Path) -> tuple[Path, bool]:
    """The CSV of this run and whether it resumes one: ``--csv``, else (unless ``--fresh``)
    the newest ``suite-<cpu>-<mode>-<budget>-*.csv`` in ``out`` (same CPU, mode, trials, batch
    and time limit), else a new one dated today."""
    if args.csv:
        path = Path(args.csv)
        return path, path.exists()
    budget = budget_tag(args) + ("-requantize" if getattr(args, "requantize", False) else "")
    stem = output_stem(mode, budget, time.strftime("%Y-%m-%d"))
    if not args.fresh:
        prefix = stem.rsplit("-", 3)[0] + "-"  # without the date
        found = sorted(out.glob(prefix + "*.csv"), key=lambda q: q.stat().st_mtime)
        if found:
            return found[-1], True
    return out / f"{stem}.csv", False


def summary_path(csv_path: Path) -> Path:
    """Where the summary of the rows CSV ``csv_path`` goes: ``suite-X.csv`` ->
    ``suite_summary-X.csv``, any other ``X.csv`` -> ``X_summary.csv`` (never the rows CSV
    itself, which a ``--csv`` without the ``suite-`` prefix had been overwritten by)."""
    stem = csv_path.stem
    if stem.startswith("suite-"):
        return csv_path.with_name(stem.replace("suite-", "suite_summary-", 1) + ".csv")
    return csv_path.with_name(stem + "_summary.csv")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite; returns the process exit status."""
    args = parse_args(argv)
    import heronlike
    from benchmarks.metaschedule import MetaScheduleWorker
    from heronlike.host import cpu_model, cpu_signature

    os.environ["PYTHONPATH"] = str(REPO_ROOT) + (
        os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""
    )  # the harness's worker processes import benchmarks.suite
    mode = cap_pytorch_isa(resolve_mode(args.mode, args.target))
    tgt = heronlike.get_target(mode.target)
    tgt.check_host()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, resuming = _csv_path(args, mode, out)
    paths = {
        "csv": csv_path,
        "work": csv_path.with_suffix(""),
        "png": csv_path.with_suffix(".png"),
        "summary": summary_path(csv_path),
    }
    rows = read_csv(csv_path) if resuming else []
    old = [r for r in rows if not r.get("heronlike_trial_ms") and not r.get("ms_trial_ms")]
    for row in old:  # a CSV written before the per-trial columns: fill them from its folders
        add_trial_columns(row, paths["work"] / _dirname(str(row["case"])))
    if any(r.get("heronlike_trial_ms") or r.get("ms_trial_ms") for r in old):
        write_csv(rows, csv_path)
    untargeted = [r for r in rows if r.get("half_target_95_ms") in (None, "")]
    for row in untargeted:  # a CSV written before the one-target columns: derive them
        add_target_columns(row)
    if any(r.get("half_target_95_ms") not in (None, "") for r in untargeted):
        write_csv(rows, csv_path)
    unfloored = [
        r for r in rows if r.get("gop") and r.get("heronlike_ms") and not r.get("memory_floor_ms")
    ]
    if unfloored:  # a CSV written before the roofline columns: measure the floor now, here
        day = time.strftime("%Y-%m-%d")
        note = f"backfilled: measured {day} on {cpu_signature()}, later than the case"
        for row in unfloored:
            add_memory_floor(row, *case_bytes(str(row["case"]), mode), note)
        write_csv(rows, csv_path)
    redo = {parse_case(c)[0] for c in args.redo}
    done = {
        str(r["case"])
        for r in rows
        if str(r["case"]) not in redo
        and not (args.full and str(r.get("heronlike_status", "")).startswith("skipped: too large"))
    }
    todo = [c for c in args.case_list if parse_case(c)[0] not in done]
    print(f"{cpu_model()} ({cpu_signature()}); mode {mode.name}: {mode.note}", flush=True)
    print(
        f"heronlike target {mode.target}, {tgt.cores} cores, {args.trials} trials per tuner in "
        f"batches of {args.batch}, explorer {args.explorer}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    if resuming:
        print(f"resuming {csv_path}: {len(rows)} cases done, {len(todo)} to run", flush=True)
    else:
        print(f"writing {csv_path}: {len(todo)} cases", flush=True)
    t0 = time.perf_counter()
    peak = measure_peak(mode, tgt.cores) if todo else (None, None, "")
    if todo:
        print(
            f"peak: {peak[0]} {peak[1] / 1e9:.1f} G op/s on {tgt.cores} threads"
            if peak[1]
            else peak[2],
            flush=True,
        )
    launch = time_launch(tgt.cores) if todo else None
    if launch:
        print(
            f"parallel launch and join: {launch[0]:.2f} µs in the fastest of {HARNESS_ROUNDS} "
            f"processes, {launch[1]:.2f} µs in the median one",
            flush=True,
        )
    round_trip_ref = lowest_round_trip(rows) if todo else None
    if round_trip_ref:
        print(f"core-to-core round trip: {round_trip_ref:.0f} ns, the lowest so far", flush=True)
    worker = (
        None
        if args.no_metaschedule or not todo
        else MetaScheduleWorker(cores=tgt.cores, guard=not args.ms_unguarded)
    )
    try:
        for spec in todo:
            try:
                row = run_case(
                    spec, args, mode, tgt, worker, peak, paths["work"], launch, round_trip_ref
                )
                round_trip_ref = lowest_round_trip([row], round_trip_ref)
            except Exception as err:  # noqa: BLE001 - a crashed case is a row saying so
                bad = f"error: {_short(err)}"
                row = {"case": parse_case(spec)[0], "heronlike_status": bad, "ms_status": bad}
            # stamped now, not only in the file: the summary's date spans the resumed days
            rows = [r for r in rows if r["case"] != row["case"]] + [stamped(row)]
            order = {parse_case(c)[0]: i for i, c in enumerate(args.case_list)}
            rows.sort(key=lambda r: order.get(str(r["case"]), len(order)))
            write_csv(rows, paths["csv"])  # the case is done: a later kill keeps it
    finally:
        if worker is not None:
            worker.close()
    if todo and peak[1]:
        # a peak read low while something else ran (or a clock dip) inflates every % of peak:
        # measure again after the cases and keep the higher reading for this invocation's rows
        again = measure_peak(mode, tgt.cores)
        if again[1] and again[1] > peak[1]:
            ran = {parse_case(c)[0] for c in todo}
            settle_peak([r for r in rows if str(r["case"]) in ran], peak[1], again[1])
            write_csv(rows, paths["csv"])
            print(f"peak re-measured after the cases: {again[1] / 1e9:.1f} G op/s", flush=True)
    print()
    summary = summarize(rows, mode)
    print_table(rows, summary)
    date = date_span(rows)
    header = {
        "mode": mode.name,
        "vnni_note": mode.note,
        "trials": args.trials,
        "threads": tgt.cores,
        "cpu_model": cpu_model(),
        "cpu_signature": cpu_signature(),
        "date": date,
        "csv": paths["csv"].name,
    }
    write_summary(summary, paths["summary"], header)
    means = {(s["column"], s["over"]): s for s in summary}
    both = means[("speedup_vs_ms", "rows where both sides use VNNI")]
    both_note = f" ({both['note']})" if both["note"] else ""
    mode_note = mode.note.split(": ", 1)[-1]
    title = (
        f"heronlike ({args.explorer}) vs MetaSchedule, {args.trials} trials each "
        f"({budget_tag(args)}), {tgt.cores} threads of {cpu_model()} ({cpu_signature()}), "
        f"{date}\nmode {mode.name}: {mode_note}\ngeomean speedup vs MetaSchedule: all rows "
        f"{_fmt(means[('speedup_vs_ms', 'all rows')]['geomean'])}, both-VNNI rows "
        f"{_fmt(both['geomean'])}{both_note}; vs PyTorch "
        f"{_fmt(means[('speedup_vs_pytorch', 'all rows')]['geomean'])}"
    )
    chart = write_chart(rows, paths["png"], title)
    print(f"wrote {paths['csv']}, {paths['summary']}" + (f" and {paths['png']}" if chart else ""))
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
