"""Intel/AMD DL Boost: AVX512-VNNI int8 on x86 CPUs, written only against
:class:`heronlike.target.DLATarget`.

Intrinsic: ``vpdpbusd`` on 512-bit registers as a ``1 × 16 × 4`` tile,
``C[n] += A[k] * B[n, k]`` with ``A`` uint8 (4 bytes broadcast), ``B`` int8 (a contiguous
16 × 4 tile, hence the packed weight layout ``W[n // 16, k // 4, n % 16, k % 4]``) and ``C``
int32. TVM's built-in ``dot_16x4_vnni`` fails LLVM 22's verifier (the intrinsic now takes byte
vectors); the implementation below passes ``uint8x64``/``int8x64`` operands.

Limits as data: 32 vector registers of 64 bytes, the L1 and L2 data caches per core (read from
``/sys``), the cores this process may run on. Target strings: ``"dlboost"``, ``"llvm"``,
``"x86"``, with options ``-mcpu=<llvm cpu>`` (default: the host's), ``-num-cores=<n>``,
``-general``, ``-accumulators[=auto|<n>]`` (a register tile of at least that many
``vpdpbusd`` accumulators: :attr:`DLBoostTarget.accumulators`) and ``-all-guards=<share>``
(where the padding taps may also be skipped inside the register tile:
:attr:`DLBoostTarget.all_guards_min_share`), ``-widen-a[=0|1|root]`` (whether ``vpmaddwd`` reads
A from an int16 copy: :attr:`DLBoostTarget.widen_a`; ``root``: a copy written before the
stage, never inside its parallel loop) and ``-split-axis-ops=<n>`` (the stages
whose cache tile keeps an axis split over the threads out of its innermost loop:
:attr:`DLBoostTarget.split_axis_max_ops`). ``"llvm"`` and ``"x86"``
mean ``"dlboost -general"`` (:attr:`name_options`; the same space and records key): the CPU
target for any compute TVM can build.

Any shape: a stage whose extents VNNI's 16 × 4 tile does not divide (``N = 1000``, primes) is
padded inside the kernel (:class:`heronlike.rules.pad.PadToIntrinsic`, measured).

``-general`` (or ``{"kind": "dlboost", "general": True}``, or the name ``"llvm"``) also runs on
a CPU without VNNI (u8 × s8 stages are then tensorized onto the exact ``vpmaddwd`` intrinsic of
AVX2 or AVX-512BW, :data:`PMADDWD_AVX2_A16` / :data:`PMADDWD_AVX512_A16`, which read A from
an int16 copy the kernel writes first; every other stage goes to the
general rule set, and the target key names that CPU), and allows computes with no stage that
maps onto VNNI (float32/float16 reductions,
depthwise convolution, softmax, normalisation, element-wise, transposes): such stages are tuned
with the general rule set (multi-level tiling with a vector level, cache write, vectorise,
parallel, unroll: :mod:`heronlike.rules.general`; row-wise reductions computed per row of their
consumer and vectorised: :mod:`heronlike.rules.rows`).
Without it such a compute is a :class:`~heronlike.errors.NoTensorizableStageError` (or
``UnsupportedDtypeError``), because ``"dlboost"`` is about the intrinsic. Element-wise
epilogues of a reduction (bias, ReLU, requantize) are fused into its tile loops with or
without the option. A general target checks that this CPU runs what ``-mcpu`` may emit
(``"llvm -mcpu=cascadelake"`` on a CPU without AVX-512 is a ``HostFeatureError``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from heronlike.errors import HostFeatureError, UnknownTargetError
from heronlike.host import cpu_flags
from heronlike.intrinsic import Intrinsic
from heronlike.prior import PADDING_SKIPPED_WEIGHT, PARALLEL_SPEEDUP_WEIGHT, LinearPrior
from heronlike.rules.base import ConstraintRule, Rule
from heronlike.rules.cache_stage import AddCacheStage
from heronlike.rules.general import (
    FuseEpilogue,
    PackVectorOperand,
    ScheduleInjective,
    VectorizeGeneral,
)
from heronlike.rules.inline import AlwaysInline, MaterializeOperand
from heronlike.rules.latency import HideLatency
from heronlike.rules.mem_limit import AddMemLimit, Footprint
from heronlike.rules.pad import PadToIntrinsic
from heronlike.rules.parallel import (
    SPLIT_AXIS_MAX_OPS,
    ParallelizeOuter,
    SplitAxisNotInnermost,
    UnrollDepth,
    UnrollRegisterTile,
    UseAllCores,
)
from heronlike.rules.rows import FuseIntoRow, ParallelizeReduction
from heronlike.rules.skip_padding import ALL_GUARDS_MIN_ZERO_SHARE
from heronlike.rules.tensorize import ApplyIntrinsic, Tensorize
from heronlike.rules.tiling import MultiLevelTiling
from heronlike.rules.widen import PlaceWidenedCopy, WidenOperand
from heronlike.target import DLATarget, MemoryLevel

VNNI_INTRIN_NAME = "heronlike_vnni_16x4_u8s8s32"
VECTOR_BYTES = 64  # one zmm register
VECTOR_REGISTERS = 32
#: the least number of vector registers a register tile leaves free of accumulators
MIN_RESERVED_REGISTERS = 4


def reserved_registers(registers: int) -> int:
    """Vector registers a register tile must leave free of accumulators on a file of
    ``registers`` (C5's ``reserve_bytes`` of the ``register`` level).

    An ``m × n`` tile of accumulators innermost below ``R1`` (the micro-kernel order of
    :mod:`heronlike.rules.tiling`) also holds, at every ``R1`` step, the ``min(m, n)`` operand
    vectors reused across the tile and one more it streams. The reserve is the smallest
    ``r >= MIN_RESERVED_REGISTERS`` with ``m·n + min(m, n) + 1 <= registers`` for every tile of
    ``m·n <= registers - r`` accumulators: 5 of 32 (AVX-512; with 4, a 7 × 4 tile of 28
    accumulators needs 33 registers and spilled: measured, docs/results.md), 4 of 16 (AVX2).
    """
    for reserve in range(MIN_RESERVED_REGISTERS, registers):
        cap = registers - reserve
        tiles = ((m, n) for m in range(1, cap + 1) for n in range(1, cap // m + 1))
        if all(m * n + min(m, n) + 1 <= registers for m, n in tiles):
            return reserve
    return registers


#: :func:`reserved_registers` of the 32 AVX-512 registers
RESERVED_REGISTERS = reserved_registers(VECTOR_REGISTERS)
#: VNNI int8 operations (2 per multiply-accumulate) per cycle per core, by LLVM CPU name:
#: two 512-bit VNNI ports on Intel server cores, one (double-pumped) on AMD Zen 4/5
_OPS_PER_CYCLE = {"znver4": 128, "znver5": 256}
_DEFAULT_OPS_PER_CYCLE = 256
#: ``vpdpbusd``'s latency in cycles, by LLVM CPU name: 5 on Intel server cores (uops.info, Ice
#: Lake-SP and Sapphire Rapids), 4 on Zen 4 (Zen 5's assumed equal). Times the instructions
#: issued per cycle (:data:`_OPS_PER_CYCLE` over :data:`_VNNI_OPS`), the accumulators that keep
#: the units busy (C6.HideLatency): 10 on Intel, 4 on Zen 4, 8 on Zen 5.
_VNNI_LATENCY = {"znver4": 4, "znver5": 4}
_DEFAULT_VNNI_LATENCY = 5
#: int8 operations of one ``vpdpbusd`` on zmm registers: 16 lanes × 4 multiply-adds × 2
_VNNI_OPS = 128


def _vnni_functions(compact_b: bool = False) -> tuple[Any, Any]:
    """The VNNI intrinsic's description and implementation (TVMScript PrimFuncs).

    ``compact_b`` declares the implementation's ``B`` tile compact (``strides=[4, 1]``): it
    loads the 16 × 4 tile as 64 contiguous bytes, and the declaration makes ``tensorize`` reject
    a strided tile instead of accepting it (heronlike always packs B, so only schedulers that do
    not, like MetaSchedule on a plain weight, need it).
    """
    from tvm.script import tirx as T

    b_strides = [4, 1] if compact_b else None

    @T.prim_func(s_tir=True)
    def desc(
        A: T.Buffer((4,), "uint8", offset_factor=1),
        B: T.Buffer((16, 4), "int8", offset_factor=1),
        C: T.Buffer((16,), "int32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:16], A[0:4], B[0:16, 0:4])
            T.writes(C[0:16])
            for i in T.serial(0, 16):
                for k in T.serial(0, 4):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        C[vi] = C[vi] + T.cast(A[vk], "int32") * T.cast(B[vi, vk], "int32")

    @T.prim_func(s_tir=True)
    def impl(
        A: T.Buffer((4,), "uint8", offset_factor=1),
        B: T.Buffer((16, 4), "int8", offset_factor=1, strides=b_strides),
        C: T.Buffer((16,), "int32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:16], A[0:4], B[0:16, 0:4])
            T.writes(C[0:16])
            a_i32 = T.reinterpret(A.vload([0], "uint8x4"), dtype="int32")
            C[T.ramp(T.int32(0), 1, 16)] = T.call_llvm_pure_intrin(
                T.llvm_lookup_intrinsic_id("llvm.x86.avx512.vpdpbusd.512"),
                C.vload([0], dtype="int32x16"),
                T.reinterpret(T.broadcast(a_i32, 16), dtype="uint8x64"),
                B.vload([0, 0], dtype="int8x64"),
                dtype="int32x16",
            )

    return desc, impl


@functools.cache
def register_vnni(name: str = VNNI_INTRIN_NAME, override: bool = False) -> str:
    """Register the LLVM-22-safe VNNI intrinsic with TVM under ``name`` (idempotent).

    ``register_vnni("dot_16x4_vnni", override=True)`` replaces TVM's broken built-in, which
    lets MetaSchedule's VNNI rule use it (the benchmark baseline does this).
    """
    from tvm.s_tir import TensorIntrin

    desc, impl = _vnni_functions()
    TensorIntrin.register(name, desc, impl, override=override)
    return name


VNNI = Intrinsic(
    name=VNNI_INTRIN_NAME,
    m=1,
    n=16,
    k=4,
    a_dtype="uint8",
    b_dtype="int8",
    c_dtype="int32",
    pack_b=True,
    register=register_vnni,
)


PMADDWD_INTRIN_NAMES = {
    32: "heronlike_avx2_pmaddwd_8x2_u8s8s32",
    64: "heronlike_avx512bw_pmaddwd_16x2_u8s8s32",
}
#: the ``vpmaddwd`` intrinsics that read A pre-widened to int16
PMADDWD_A16_INTRIN_NAMES = {
    32: "heronlike_avx2_pmaddwd_8x2_s16s8s32",
    64: "heronlike_avx512bw_pmaddwd_16x2_s16s8s32",
}
_PMADDWD_LLVM = {32: "llvm.x86.avx2.pmadd.wd", 64: "llvm.x86.avx512.pmaddw.d.512"}


def _pmaddwd_functions(vector_bytes: int, a_dtype: str = "uint8") -> tuple[Any, Any]:
    """The exact u8 × s8 → s32 dot product of CPUs without VNNI, on ``vpmaddwd`` (AVX2 ymm or
    AVX-512BW zmm): description and implementation (TVMScript PrimFuncs) of the
    ``1 × lanes × 2`` tile ``C[n] += A[k] * B[n, k]`` (``lanes`` = ``vector_bytes / 4`` int32).

    Both operands are widened to int16 and ``vpmaddwd`` sums each pair of 16-bit products into
    a 32-bit lane, which is then added to ``C``: 2 multiply-adds per lane per instruction, and
    exact (``|u8 · s8| · 2 ≤ 65 280`` fits int32). B is widened in the call (sign-extended,
    ``vpmovsxbw``). A is zero-extended in the call (``vpmovzxbw``, then broadcast) when
    ``a_dtype`` is ``"uint8"``; with ``"int16"`` the call reads a pre-widened copy of A (the
    stage's own, :class:`~heronlike.rules.widen.WidenOperand`) and broadcasts each pair with
    one ``vpbroadcastd`` from memory: on a Zen 3 that loop runs 1.06-3.2× faster
    (``benchmarks/pmaddwd_loops.py``, docs/results.md). TVM's own ``dot_16x4_avx512`` uses
    ``vpmaddubsw`` instead, which saturates at int16 and is not exact for u8 × s8 operands
    (oneDNN and FBGEMM use it on AVX2 too, and keep activations to 7 bits where exactness
    matters).
    """
    from tvm.script import tirx as T

    lanes = vector_bytes // 4
    intrin = _PMADDWD_LLVM[vector_bytes]

    @T.prim_func(s_tir=True)
    def desc(
        A: T.Buffer((2,), a_dtype, offset_factor=1),
        B: T.Buffer((lanes, 2), "int8", offset_factor=1),
        C: T.Buffer((lanes,), "int32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:2], B[0:lanes, 0:2])
            T.writes(C[0:lanes])
            for i in T.serial(0, lanes):
                for k in T.serial(0, 2):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        C[vi] = C[vi] + T.cast(A[vk], "int32") * T.cast(B[vi, vk], "int32")

    def a_pair(A: Any) -> Any:
        """A's two values as one int32 holding two int16."""
        if a_dtype == "int16":
            return T.reinterpret(A.vload([0], "int16x2"), dtype="int32")
        return T.reinterpret(T.Cast("int16x2", A.vload([0], "uint8x2")), dtype="int32")

    @T.prim_func(s_tir=True)
    def impl(
        A: T.Buffer((2,), a_dtype, offset_factor=1),
        B: T.Buffer((lanes, 2), "int8", offset_factor=1),
        C: T.Buffer((lanes,), "int32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:lanes], A[0:2], B[0:lanes, 0:2])
            T.writes(C[0:lanes])
            C[T.ramp(T.int32(0), 1, lanes)] = C.vload([0], dtype=f"int32x{lanes}") + (
                T.call_llvm_pure_intrin(
                    T.llvm_lookup_intrinsic_id(intrin),
                    T.reinterpret(T.broadcast(a_pair(A), lanes), dtype=f"int16x{2 * lanes}"),
                    T.Cast(f"int16x{2 * lanes}", B.vload([0, 0], dtype=f"int8x{2 * lanes}")),
                    dtype=f"int32x{lanes}",
                )
            )

    return desc, impl


@functools.cache
def register_pmaddwd(vector_bytes: int, a_dtype: str = "uint8") -> str:
    """Register the ``vpmaddwd`` intrinsic for ``vector_bytes`` (32: AVX2, 64: AVX-512BW) and
    A in ``a_dtype`` (``"uint8"``, or ``"int16"`` pre-widened) with TVM under
    :data:`PMADDWD_INTRIN_NAMES` / :data:`PMADDWD_A16_INTRIN_NAMES` (idempotent); returns its
    name."""
    from tvm.s_tir import TensorIntrin

    name = _pmaddwd_name(vector_bytes, a_dtype)
    TensorIntrin.register(name, *_pmaddwd_functions(vector_bytes, a_dtype))
    return name


def _pmaddwd_name(vector_bytes: int, a_dtype: str) -> str:
    names = PMADDWD_A16_INTRIN_NAMES if a_dtype == "int16" else PMADDWD_INTRIN_NAMES
    return names[vector_bytes]


def _pmaddwd_intrinsic(vector_bytes: int, a_dtype: str = "uint8") -> Intrinsic:
    return Intrinsic(
        name=_pmaddwd_name(vector_bytes, a_dtype),
        m=1,
        n=vector_bytes // 4,
        k=2,
        a_dtype="uint8",
        b_dtype="int8",
        c_dtype="int32",
        pack_b=True,
        register=functools.partial(register_pmaddwd, vector_bytes, a_dtype),
        a_storage_dtype=None if a_dtype == "uint8" else a_dtype,
        # B (int8) is widened to int16 in every call; A too unless it is read pre-widened
        widened_in_call=("a", "b") if a_dtype == "uint8" else ("b",),
    )


#: u8 × s8 → s32 without VNNI: ``vpmaddwd`` on widened operands, ``1 × 8 × 2`` (AVX2) and
#: ``1 × 16 × 2`` (AVX-512BW); what a ``-general`` target tensorizes int8 stages onto on a CPU
#: without AVX512-VNNI. These widen A in every call (``-widen-a=0``).
PMADDWD_AVX2 = _pmaddwd_intrinsic(32)
PMADDWD_AVX512 = _pmaddwd_intrinsic(64)
#: the same, reading A pre-widened to int16 (a copy the kernel writes first,
#: :class:`~heronlike.rules.widen.WidenOperand`; ``-widen-a``, the default: measured faster,
#: :attr:`DLBoostTarget.widen_a`)
PMADDWD_AVX2_A16 = _pmaddwd_intrinsic(32, "int16")
PMADDWD_AVX512_A16 = _pmaddwd_intrinsic(64, "int16")


def _flag(value: str | bool) -> bool:
    """A boolean target option's value: ``-x``, ``-x=1``/``true``/``yes``/``on``."""
    return value is True or str(value).lower() in ("1", "true", "yes", "on")


def _count(value: str | bool | int, option: str, meaning: str) -> int:
    """A non-negative integer target option's value.

    Raises:
        UnknownTargetError: ``value`` is not one, naming ``-option`` and what 0 means.
    """
    try:
        count = int(str(value))
    except ValueError:
        count = -1
    if count < 0:
        raise UnknownTargetError(f"-{option} must be {meaning}, got {value!r}")
    return count


def _cache_bytes(level: int, default: int) -> int:
    """Per-core data/unified cache size of ``level`` from sysfs, in bytes."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(root.glob("index*")):
            if int((index / "level").read_text()) != level:
                continue
            if (index / "type").read_text().strip() == "Instruction":
                continue
            text = (index / "size").read_text().strip().upper()
            scale = {"K": 1024, "M": 1024**2}.get(text[-1], 1)
            return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return default


def host_has_vnni() -> bool:
    """Whether this CPU reports ``avx512_vnni`` (Linux ``/proc/cpuinfo``)."""
    return "avx512_vnni" in cpu_flags()


@functools.cache
def host_cpu() -> str:
    """LLVM's name for the host CPU, or ``cascadelake`` when LLVM's guess lacks VNNI but the
    CPU has it (virtual machines often hide the model)."""
    from tvm.target import codegen

    cpu = str(codegen.llvm_get_system_cpu())
    if host_has_vnni() and not _has_vnni(cpu):
        return "cascadelake"
    return cpu


def _has_vnni(mcpu: str) -> bool:
    return _has_feature(mcpu, "avx512vnni")


@functools.cache
def _has_feature(mcpu: str, feature: str) -> bool:
    from tvm.target import Target, codegen

    return bool(codegen.target_has_features(feature, Target({"kind": "llvm", "mcpu": mcpu})))


#: LLVM feature -> its /proc/cpuinfo flag, for the features whose absence makes a kernel
#: built for ``-mcpu`` die of an illegal instruction on this CPU
_CPU_FLAGS = (
    ("avx512vnni", "avx512_vnni"),
    ("avx512f", "avx512f"),
    ("avx2", "avx2"),
    ("fma", "fma"),
)


def missing_host_features(mcpu: str) -> list[str]:
    """The LLVM features of ``-mcpu`` (of :data:`_CPU_FLAGS`) this CPU does not report; empty
    when ``/proc/cpuinfo`` has no flags (nothing to compare with)."""
    flags = cpu_flags()
    if not flags:
        return []
    return [feat for feat, flag in _CPU_FLAGS if flag not in flags and _has_feature(mcpu, feat)]


#: The DL Boost schedule prior (:mod:`heronlike.prior`), fitted by ``python
#: benchmarks/prior_fit.py`` on random programs of the micro-kernel loop order (heronlike 0.2.0):
#: ``benchmarks/prior_records.py`` records of 46 workloads of Heron's table (28 int8 on the DL
#: Boost rules, 18 float32 on the general ones; 24 RandSAT trials each, 2 threads) on an Intel
#: Xeon (Emerald Rapids, KVM), 2026-11-29, less the 14 of the nine cases the Xeon's lost-rows
#: table tunes (G1 G3 B1 C1D5 C2D1 C2D4 C3D1 C3D3 D1, held out). Leave-one-workload-out on the
#: 46: Spearman median 0.75 (int8) and 0.88 (float32) between score and speed, against 0.15 and
#: 0.34 for the prior fitted on the old order's tunes; on the 14 held out, 0.85.
#: ``padding.skipped`` (2026-12-06) is not fitted: ``ln 2`` per unit (:mod:`heronlike.prior`).
PRIOR = LinearPrior(
    {
        "parallel.balance": +0.0958,
        "parallel.extent": +0.0067,
        "register.fill": -0.7736,
        "L1.fill": +0.0083,
        "L2.fill": -1.1398,
        "P.intensity": +0.0499,
        "S1.volume": +0.3897,
        "S1.bytes": -0.1335,
        "S1.intensity": -0.2576,
        "R0.trips": +0.0723,
        "R0.intensity": +0.0765,
        "S2.trips": +0.0106,
        "S2.volume": +0.4166,
        "R1.trips": +0.0673,
        "unroll.depth": -0.0037,
        "tile.loads": -0.4732,
        "padding.skipped": PADDING_SKIPPED_WEIGHT,  # not fitted: heronlike.prior's docstring
    },
    source=(
        "benchmarks/prior_fit.py, 32 workloads (int8 and float32) of random programs in the "
        "micro-kernel order, Intel Xeon Emerald Rapids, 2026-11-29"
    ),
)

#: The schedule prior of spaces whose stages are tensorized onto ``vpmaddwd`` (``-general`` on a
#: CPU without VNNI: :data:`PMADDWD_AVX2_A16` and kin, operands widened in the call), fitted by
#: ``python benchmarks/prior_fit.py`` on ``benchmarks/prior_records.py --dtype int8`` records
#: of 16 cases of Heron's table (G1 G4 B2 B3 B4 C1D3 C2D1-C2D5 C3D2 D1 D4 T1 T4), seeds 0 and
#: 1, 24 RandSAT trials each, 2 threads of an AMD EPYC Zen 1 (AVX2), 2026-12-06; B1 G3 C1D1
#: C2D6 held out. :data:`PRIOR`, fitted where int8 stages run ``vpdpbusd``, ranked these
#: records at Spearman median 0.58 (0.64 on the held out); this fit 0.68
#: leave-one-workload-out and 0.81 on the held out, its top 8 of 32 random programs 1.053×
#: faster than a random 8 there (1.018× by :data:`PRIOR`). On float32 spaces it would rank
#: backwards (-0.44 against :data:`PRIOR`'s 0.92), so only ``vpmaddwd`` spaces get it
#: (:meth:`DLBoostTarget.prior_for`). ``padding.skipped`` was fitted here too: +0.72, near the
#: ``ln 2`` = 0.69 that :data:`PRIOR` holds from first principles.
PRIOR_PMADDWD = LinearPrior(
    {
        "parallel.balance": +1.4543,
        "parallel.extent": +0.0039,
        "register.fill": +0.0827,
        "L1.fill": +0.0090,
        "L2.fill": +0.1589,
        "P.intensity": +0.0094,
        "S1.volume": +0.0026,
        "S1.bytes": -0.1588,
        "S1.intensity": -0.0409,
        "R0.trips": +0.0038,
        "R0.intensity": +0.0115,
        "S2.trips": +0.1155,
        "R1.trips": +0.0025,
        "unroll.depth": +0.0019,
        "tile.loads": -0.2099,
        "tile.widens": +0.1043,
        "padding.skipped": +0.7189,
    },
    source=(
        "benchmarks/prior_fit.py, 32 workloads (int8 on vpmaddwd) of random programs, "
        "AMD EPYC Zen 1, 2026-12-06"
    ),
)


#: The schedule prior of spaces with a stage on VNNI's ``vpdpbusd`` when ``-mcpu`` is
#: ``znver4`` (AMD Zen 4), fitted by ``python benchmarks/prior_fit.py --fixed
#: parallel.speedup=1 --fixed padding.skipped=0.6931`` on ``benchmarks/prior_records.py
#: --dtype int8`` records of 35 of the fair table's cases (seeds 0 and 1, 24 RandSAT trials
#: each, 2 threads of an AMD EPYC Zen 4 under KVM, 2026-12-07), 12 held out (B1 B3 C2D2 D2 T2
#: T4 T6 C2D4 C3D2 G3 C1D1 GV3): ``benchmarks/priors/dlboost-zen4-speedup-2026-12-07.json``.
#: ``parallel.speedup`` (the cores a parallel loop keeps busy against TVM's launch of it,
#: :mod:`heronlike.prior`) is weighed 1 from first principles; with it, ``parallel.balance``
#: fits to +0.0001. Before it, the balance weight mixed the idle core of odd extents with the
#: launch (a 512 × 16 matrix-vector product's serial programs run 10× faster than its parallel
#: ones), and no value of it ranked both: held at +1 it put every serial program last, fitted
#: it came out -1.69 (docs/results.md, "The fair table on a Zen 4 with its own prior").
#: Replayed on recorded random programs of cases it was not fitted on
#: (``benchmarks/prior_margin.py``, no timing noise between the arms): docs/results.md, "A
#: parallel loop's launch in the prior".
PRIOR_ZEN4 = LinearPrior(
    {
        "parallel.balance": +0.0001,
        "parallel.extent": -0.0201,
        "register.fill": -0.9839,
        "L1.fill": +0.1129,
        "L2.fill": -0.2886,
        "P.intensity": -0.0028,
        "S1.volume": -0.0297,
        "S1.bytes": -0.0068,
        "S1.intensity": +0.2999,
        "R0.trips": -0.0092,
        "R0.intensity": +0.0116,
        "S2.trips": -0.0924,
        "R1.trips": -0.0147,
        "unroll.depth": +0.0017,
        "tile.loads": -0.8221,
        "write_back.outside": -0.0159,
        "parallel.speedup": PARALLEL_SPEEDUP_WEIGHT,  # not fitted: heronlike.prior's docstring
        "padding.skipped": PADDING_SKIPPED_WEIGHT,  # not fitted: heronlike.prior's docstring
    },
    source=(
        "benchmarks/prior_fit.py, 70 workloads (int8 on vpdpbusd) of random programs, "
        "AMD EPYC Zen 4, 2026-12-07, with write_back.outside and parallel.speedup"
    ),
)

#: ``-mcpu`` -> the prior of its VNNI spaces, where one was fitted on that CPU and beat
#: :data:`PRIOR` on cases it was not fitted on; every other CPU's VNNI spaces take :data:`PRIOR`
VNNI_PRIORS_BY_MCPU: dict[str, LinearPrior] = {"znver4": PRIOR_ZEN4}


class DLBoostTarget(DLATarget):
    """AVX512-VNNI ("DL Boost") on the x86 CPU, tensorizing onto ``vpdpbusd``; with
    ``-general`` on a CPU without VNNI, onto ``vpmaddwd`` (AVX2 / AVX-512BW)."""

    names = ("dlboost", "llvm", "x86")
    option_names = (
        "mcpu",
        "num-cores",
        "general",
        "accumulators",
        "all-guards",
        "widen-a",
        "split-axis-ops",
    )
    #: ``"llvm"`` and ``"x86"`` tune any compute: VNNI where a stage maps onto it and the CPU
    #: has it, the general rule set for the rest (``"llvm -general=0"`` is ``"dlboost"``)
    name_options = {"llvm": {"general": True}, "x86": {"general": True}}
    pads_shapes = True

    def __init__(self, **options: str | bool) -> None:
        super().__init__(**options)
        self.requires_intrinsic = not self.general
        self.accumulators  # noqa: B018 (a bad -accumulators fails here, not at tuning)
        self.all_guards_min_share  # noqa: B018 (as is a bad -all-guards)
        self.split_axis_max_ops  # noqa: B018 (and a bad -split-axis-ops)

    @property
    def general(self) -> bool:
        """Whether computes without a VNNI stage may be tuned by the general rule set."""
        return _flag(self.options.get("general", False))

    @property
    def widen_a(self) -> bool:
        """Whether stages tensorized onto ``vpmaddwd`` (a general target on a CPU without VNNI)
        read A pre-widened to int16 (:data:`PMADDWD_AVX2_A16`, :data:`PMADDWD_AVX512_A16`: a
        copy the kernel writes first) rather than widening it in every call
        (:data:`PMADDWD_AVX2`, :data:`PMADDWD_AVX512`): ``-widen-a[=0|1]``, default on. The
        loop alone ran 1.06-3.2× faster on a Zen 3 (``benchmarks/pmaddwd_loops.py``), one G1
        schedule 1.10-1.70× (AVX2) and 1.10-1.63× (AVX-512BW) on a Zen 5 by register tile
        (docs/results.md, "Pre-widened A"). A distinct space from the in-call one: the records
        key names it. ``-widen-a=root`` reads it pre-widened too, from a copy always written
        at the root (:attr:`widened_copy_at_root`)."""
        return self.widened_copy_at_root or _flag(self.options.get("widen-a", True))

    @property
    def widened_copy_at_root(self) -> bool:
        """Whether a new widened copy of A is always a root-level pass (``-widen-a=root``, as
        before 2026-12-06: no knob) rather than placed by the finish knob
        ``<stage>.widened_copy`` (:class:`~heronlike.rules.widen.PlaceWidenedCopy`: at the
        root or in the stage's parallel loop, settled by variant trials), the default."""
        return str(self.options.get("widen-a", "")).lower() == "root"

    def prior(self) -> LinearPrior:
        """:data:`PRIOR`, fitted on VNNI and general-rule-set tunes of this target."""
        return PRIOR

    def prior_for(self, space: Any) -> LinearPrior:
        """The prior fitted on spaces like ``space`` on a CPU like ``-mcpu``'s:

        * :data:`PRIOR_PMADDWD` for a space with a stage tensorized onto an intrinsic that
          widens its operands in the call (``vpmaddwd`` on a CPU without VNNI);
        * the ``-mcpu``'s prior in :data:`VNNI_PRIORS_BY_MCPU` (:data:`PRIOR_ZEN4` on a Zen 4)
          for a space with a stage on VNNI;
        * :data:`PRIOR` for the rest (VNNI on other CPUs, float32 and other general stages).
        """
        if any(m.intrinsic.widened_in_call for m in space.matches.values()):
            return PRIOR_PMADDWD
        if space.matches:
            return VNNI_PRIORS_BY_MCPU.get(self.mcpu, PRIOR)
        return PRIOR

    def general_hint(self) -> str:
        return (
            "; to tune it without the intrinsic (general rule set: tiling, vectorize, parallel) "
            'use the target "llvm" (the same as "dlboost -general" or {"kind": "dlboost", '
            '"general": True})'
        )

    @property
    def mcpu(self) -> str:
        return str(self.options.get("mcpu") or host_cpu())

    @property
    def cores(self) -> int:
        if "num-cores" in self.options:
            return int(self.options["num-cores"])
        return len(os.sched_getaffinity(0))

    @property
    def accumulators(self) -> int:
        """The least number of independent ``vpdpbusd`` accumulators a VNNI stage's register
        tile must hold (:class:`~heronlike.rules.latency.HideLatency`): 0 (no such constraint)
        unless ``-accumulators`` is given: ``-accumulators`` or ``-accumulators=auto`` takes
        the latency × issue rate of ``-mcpu``'s cores, ``-accumulators=N`` the count ``N``.

        Off by default: on the Xeon the search already picked tiles of 10 or more accumulators
        in 25 of 27 tunes without it, and it did not make 16-trial tunes faster (0.98× over 27;
        docs/results.md, "Latency-hiding register tiles").

        Raises:
            UnknownTargetError: ``-accumulators`` is neither ``auto`` nor a non-negative
                integer (raised when the target is built).
        """
        value = self.options.get("accumulators", 0)
        if value is True or str(value).lower() == "auto":
            latency = _VNNI_LATENCY.get(self.mcpu, _DEFAULT_VNNI_LATENCY)
            return latency * self.ops_per_cycle() // _VNNI_OPS
        return _count(value, "accumulators", "auto or a non-negative integer (0: no constraint)")

    @property
    def all_guards_min_share(self) -> float:
        """The share of zeros in a convolution's padded input from which a tune also measures
        its best candidates with the padding taps guarded inside the register tile (the
        ``<stage>.skip_padding`` finish knob, :mod:`heronlike.rules.skip_padding`):
        ``-all-guards=<share>`` (0 to 1; 0: on every padded convolution), default
        :data:`~heronlike.rules.skip_padding.ALL_GUARDS_MIN_ZERO_SHARE`.

        Raises:
            UnknownTargetError: ``-all-guards`` is not a number from 0 to 1 (raised when the
                target is built).
        """
        value = self.options.get("all-guards")
        if value is None:
            return ALL_GUARDS_MIN_ZERO_SHARE
        try:
            share = float(str(value))
        except ValueError:
            share = -1.0
        if not 0.0 <= share <= 1.0:
            raise UnknownTargetError(f"-all-guards must be a share from 0 to 1, got {value!r}")
        return share

    @property
    def split_axis_max_ops(self) -> int:
        """The largest stage, in operations, whose cache tile never walks an axis split over
        the threads in its innermost loop
        (:class:`~heronlike.rules.parallel.SplitAxisNotInnermost`): ``-split-axis-ops=<n>``
        (0: no stage), default :data:`~heronlike.rules.parallel.SPLIT_AXIS_MAX_OPS`.

        Raises:
            UnknownTargetError: ``-split-axis-ops`` is not a non-negative integer (raised when
                the target is built).
        """
        value = self.options.get("split-axis-ops", SPLIT_AXIS_MAX_OPS)
        return _count(value, "split-axis-ops", "a non-negative integer (0: no stage)")

    def resolved_options(self) -> dict[str, str | bool]:
        out: dict[str, str | bool] = {"mcpu": self.mcpu, "num-cores": str(self.cores)}
        if self.general:
            out["general"] = True
        if self.accumulators:  # a smaller space: its own records key
            out["accumulators"] = str(self.accumulators)
        if self.all_guards_min_share != ALL_GUARDS_MIN_ZERO_SHARE:  # another space
            out["all-guards"] = f"{self.all_guards_min_share:g}"
        if self.split_axis_max_ops != SPLIT_AXIS_MAX_OPS:  # another space
            out["split-axis-ops"] = str(self.split_axis_max_ops)
        if self.intrinsics and self.intrinsics[0].a_storage_dtype:  # pre-widened A
            out["widen-a"] = "root" if self.widened_copy_at_root else True
        return out

    @property
    def intrinsics(self) -> tuple[Intrinsic, ...]:
        # with -general on a CPU without VNNI, u8 x s8 stages go onto vpmaddwd (exact, 2
        # products per 32-bit lane) and every other stage to the general rule set
        if not self.general or _has_vnni(self.mcpu):
            return (VNNI,)
        if _has_feature(self.mcpu, "avx512bw"):
            return (PMADDWD_AVX512_A16 if self.widen_a else PMADDWD_AVX512,)
        if not _has_feature(self.mcpu, "avx2"):
            return ()
        return (PMADDWD_AVX2_A16 if self.widen_a else PMADDWD_AVX2,)

    @property
    def vector_bytes(self) -> int:
        """Vector register width for ``-mcpu``: 64 (AVX-512; always for strict DL Boost,
        whose CPUs have it), 32 (AVX2) or 16 (SSE) for a general target on other CPUs."""
        if not self.general or _has_feature(self.mcpu, "avx512f"):
            return VECTOR_BYTES
        return 32 if _has_feature(self.mcpu, "avx") else 16

    @property
    def vector_registers(self) -> int:
        """Vector registers: 32 with AVX-512, 16 without."""
        return VECTOR_REGISTERS if self.vector_bytes == VECTOR_BYTES else 16

    @property
    def memory(self) -> tuple[MemoryLevel, ...]:
        return (
            MemoryLevel("register", self.vector_registers * self.vector_bytes),
            MemoryLevel("L1", _cache_bytes(1, 32 * 1024)),
            MemoryLevel("L2", _cache_bytes(2, 1024 * 1024)),
        )

    def tvm_target(self) -> dict[str, Any]:
        if not _has_vnni(self.mcpu) and not self.general:
            raise HostFeatureError(f"-mcpu={self.mcpu} has no AVX512-VNNI (avx512vnni)")
        return {"kind": "llvm", "mcpu": self.mcpu, "num-cores": self.cores}

    def check_host(self) -> None:
        if not self.general:
            if not host_has_vnni():
                raise HostFeatureError(
                    "this CPU has no AVX512-VNNI (avx512_vnni in /proc/cpuinfo), so DL Boost "
                    "kernels cannot be measured here; use a Cascade Lake or newer Intel CPU or "
                    "an AMD Zen 4 or newer"
                )
            return
        missing = missing_host_features(self.mcpu)
        if missing:
            raise HostFeatureError(
                f"-mcpu={self.mcpu} lets LLVM emit {', '.join(missing)}, which this CPU lacks "
                f"(/proc/cpuinfo), so its kernels cannot be measured here; leave -mcpu out "
                f"(this CPU is {host_cpu()}) or measure on such a CPU"
            )

    def ops_per_cycle(self) -> int | None:
        """The intrinsic's operations (2 per multiply-add) per cycle per core: VNNI's by CPU
        family; None when unknown."""
        return _OPS_PER_CYCLE.get(self.mcpu, _DEFAULT_OPS_PER_CYCLE)

    def peak_ops_per_s(self) -> float | None:
        """Nominal peak: :meth:`ops_per_cycle` × cores × the CPU's maximum clock from
        ``/sys`` (None when either is unknown)."""
        per_cycle = self.ops_per_cycle()
        try:
            khz = int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
        except (OSError, ValueError):
            return None
        return per_cycle * self.cores * khz * 1e3 if per_cycle else None

    def schedule_rules(self) -> Sequence[Rule]:
        # the rules for stages without an intrinsic (FuseEpilogue on element-wise outputs,
        # the V level, VectorizeGeneral, ScheduleInjective) and PadToIntrinsic do not apply to
        # a divisible compute whose reductions are all tensorized and that has no epilogue:
        # its space is the same as without them
        vb = self.vector_bytes
        rules: tuple[Rule, ...] = (
            AlwaysInline(),
            MaterializeOperand(vector_bytes=vb),
            FuseEpilogue(),
            # an intrinsic that reads A pre-widened (AVX2's vpmaddwd) gets an int16 copy
            WidenOperand(vector_bytes=vb),
            PadToIntrinsic(vector_bytes=vb),
            Tensorize(),
            AddCacheStage(scope="global"),
            MultiLevelTiling(vector_level="V", order_level="S1"),
            ParallelizeOuter(),
            # A's widened copy at the root or in the parallel loop: settled at the finish
            PlaceWidenedCopy(settle=not self.widened_copy_at_root),
            UnrollRegisterTile(),
            UnrollDepth(),
            ApplyIntrinsic(vector_bytes=vb),
            PackVectorOperand(),
            VectorizeGeneral(vector_bytes=vb),
            # with -general a stand-alone element-wise output gets vector-width and unroll
            # knobs; strict DL Boost keeps its single program
            ScheduleInjective(vector_bytes=vb, knobs=self.general),
        )
        if not self.general:
            return rules  # strict DL Boost: the rule set its records were tuned with
        # row-wise stages (softmax, normalisation); a no-op on computes without them
        return (FuseIntoRow(vector_bytes=vb), *rules, ParallelizeReduction(vector_bytes=vb))

    def constraint_rules(self) -> Sequence[ConstraintRule]:
        return (
            AddMemLimit(
                [
                    # accumulators of the register tile live across the R1 loop
                    Footprint(
                        "register",
                        "R0",
                        outputs_only=True,
                        reserve_bytes=reserved_registers(self.vector_registers) * self.vector_bytes,
                        # a general stage's accumulators: one register each, whatever V
                        vector_level="V",
                        vector_bytes=self.vector_bytes,
                    ),
                    # one iteration of R0 streams A and B tiles and updates the C tile
                    Footprint("L1", "R0"),
                    # one iteration of S1 reuses its A and B panels over the whole reduction
                    Footprint("L2", "S1"),
                ]
            ),
            UseAllCores(),
            SplitAxisNotInnermost(self.split_axis_max_ops),
            # vpmaddwd's chain is its 1-cycle add: only VNNI needs a latency-hiding tile
            HideLatency(self.accumulators if VNNI in self.intrinsics else 0),
        )
