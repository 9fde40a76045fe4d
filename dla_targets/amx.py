"""Intel AMX (Advanced Matrix Extensions, Sapphire Rapids and newer Xeons): int8 and bf16
matrix tiles, written only against heronlike's public interface (:class:`heronlike.target.
DLATarget`, the rules of :mod:`heronlike.rules` and the DL Boost target it extends).

Hardware (Intel SDM vol. 1 ch. 18; Intel optimisation manual ch. 20): eight tile registers
``tmm0``-``tmm7``, each at most 16 rows × 64 bytes (1 KiB), shaped by ``ldtilecfg`` from a
64-byte configuration (palette 1). ``tdpbusd tmmC, tmmA, tmmB`` multiplies a ``16 × 64`` uint8
tile A by an int8 tile B held in the VNNI-4 layout (16 rows, one per 4 values of ``k``, of
``16 × 4`` bytes) and adds the ``16 × 16`` int32 products into C: 16 × 16 × 64 multiply-adds
per instruction. ``tdpbf16ps`` is the same on ``16 × 32`` bf16 tiles (VNNI-2: rows of ``16 × 2``
values) into fp32.

Intrinsics: per dtype (:class:`TileKind`) a family of micro-kernels ``C[16·a, 16·b] +=
A[16·a, k] · B[k, 16·b]``, ``a, b`` in 1-4 tiles, each a group of three members that keep C in
tile registers ``tmm0 … tmm(a·b-1)``: ``fill`` (``tilezero``; its ``ldtilecfg`` is per-thread
set-up, hoisted to once per parallel task by :func:`heronlike.postproc.hoist_thread_setup`),
``compute``
(``a`` A and ``b`` B tile loads, ``a·b`` products) and ``store`` (``tilestored``).
:class:`~heronlike.rules.tensorize.AccumulateInTiles` caches one micro-kernel's accumulator at
the innermost cache-tile loop (tiling ``S0 S1 R0 R1 T``), so C is zeroed, accumulated over the
whole reduction and stored once per tile: per step of ``k``, ``a + b`` tile loads feed ``a·b``
products (oneDNN's batch-reduce GEMM structure). The shape is a knob (``<stage>.intrinsic``) and
:class:`~heronlike.rules.tensorize.RegisterTileBudget` keeps ``a·b + a + b`` within the 8 tile
registers, so only 1×1, 1×2, 2×1, 2×2, 1×3 and 3×1 are sampled. B's tile is a run of 16 of
DL Boost's packed ``16 × 4`` (bf16: ``16 × 2``) tiles (the weight layout ``W[n/16, k/4, 16,
4]``, whatever W's own order: :attr:`Intrinsic.pack_tile`), so the one-time pre-packing, the
padding of any shape to the tile multiples (in the kernel) and the cache tiling above the tiles
are DL Boost's rules; channels-last convolutions become implicit GEMMs (:meth:`AMXTarget.
normalize`).

Target string: ``"amx"`` with ``-mcpu`` (default: LLVM's name for the host CPU when it has
AMX and LLVM knows it does, else ``sapphirerapids``, so candidates build on any x86 host),
``-num-cores`` and ``-emulate``. ``-emulate`` replaces each member by the loop nest it computes
(its description), compiled for this CPU: the schedule, packing, padding and fused epilogues of
an AMX candidate then run and can be checked against numpy on a CPU without AMX. Its records
key differs, and its timings say nothing of AMX.

Measuring (without ``-emulate``) needs :data:`HOST_FLAGS` in ``/proc/cpuinfo``
(:class:`~heronlike.errors.HostFeatureError` otherwise) and Linux's permission to use the tile
data state, which :func:`request_amx_permission` asks for (``arch_prctl(ARCH_REQ_XCOMP_PERM)``,
:meth:`AMXTarget.prepare_process`) in the tuning process, in the measuring worker, and before
the first kernel of a loaded library or compiled model runs.

Measured on an Emerald Rapids Xeon (``benchmarks/amx.py compare``, docs/results.md): bit-exact,
faster than oneDNN on the same tiles and than the VNNI target on GEMM, BMM and convolutions.
Not yet: direct convolutions (the tiles reading the padded input without an im2col matrix), a
register level above the micro-kernel (two micro-kernels sharing loaded A or B tiles), and
bf16 operands the kernel allocates (:func:`check_bf16_operand`).
"""

from __future__ import annotations

import collections
import ctypes
import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from heronlike.dla_targets.dlboost import VECTOR_BYTES, DLBoostTarget, host_cpu
from heronlike.errors import HostFeatureError, UnsupportedShapeError
from heronlike.host import cpu_flags
from heronlike.intrinsic import Intrinsic, IntrinsicMatch, match_intrinsic
from heronlike.postproc import THREAD_SETUP
from heronlike.rules.base import ConstraintRule, Rule
from heronlike.rules.general import (
    FuseEpilogue,
    PackVectorOperand,
    ScheduleInjective,
    VectorizeGeneral,
)
from heronlike.rules.gpu import implicit_gemm
from heronlike.rules.inline import AlwaysInline, MaterializeOperand
from heronlike.rules.mem_limit import AddMemLimit, Footprint
from heronlike.rules.pad import PadToIntrinsic
from heronlike.rules.parallel import ParallelizeOuter, UnrollDepth, UseAllCores
from heronlike.rules.tensorize import AccumulateInTiles, RegisterTileBudget, Tensorize
from heronlike.rules.tiling import MultiLevelTiling

if TYPE_CHECKING:  # pragma: no cover
    from heronlike.measure import Runner

#: tile registers and the largest tile: 16 rows of 64 bytes
TILE_REGISTERS = 8
TILE_ROWS = 16
TILE_BYTES_PER_ROW = 64


@dataclass(frozen=True)
class TileKind:
    """One AMX multiply instruction and its operands.

    Attributes:
        name: the dtype signature in intrinsic names (``u8s8s32``).
        instruction: the LLVM intrinsic / mnemonic (``tdpbusd``).
        a_dtype, b_dtype, c_dtype: operand dtypes.
        k: reduction values per A row of 64 bytes (64 int8, 32 bf16).
        pack_k: values of k per 4-byte group of the B tile (VNNI-4: 4, VNNI-2: 2).
        ops_per_cycle: operations (2 per multiply-add) per cycle per core: one 16x16xk
            instruction per 16 cycles on Sapphire Rapids.
    """

    name: str
    instruction: str
    a_dtype: str
    b_dtype: str
    c_dtype: str
    k: int
    pack_k: int
    ops_per_cycle: int


#: u8 x s8 -> s32 (``tdpbusd``, AMX-INT8) and bf16 x bf16 -> fp32 (``tdpbf16ps``, AMX-BF16)
INT8 = TileKind("u8s8s32", "tdpbusd", "uint8", "int8", "int32", 64, 4, 2048)
BF16 = TileKind("bf16bf16f32", "tdpbf16ps", "bfloat16", "bfloat16", "float32", 32, 2, 1024)
KINDS = (INT8, BF16)
#: the tile counts (A tiles along m, B tiles along n) of the micro-kernel family; the
#: register budget leaves 1x1, 1x2, 2x1, 2x2, 1x3 and 3x1
MAX_TILES_PER_AXIS = 4
#: CPU flags (``/proc/cpuinfo``) and LLVM features the int8 tile kernels need
HOST_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")
LLVM_FEATURES = ("amx-tile", "amx-int8", "amx-bf16")

_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18
_SYS_ARCH_PRCTL = 158  # x86-64


def intrinsic_name(
    a_tiles: int,
    b_tiles: int,
    role: str = "compute",
    emulate: bool = False,
    kind: TileKind = INT8,
) -> str:
    """The registered name of one member (``"fill"``, ``"compute"``, ``"store"``) of the
    ``16·a_tiles × 16·b_tiles × k`` micro-kernel of ``kind`` (``_reference``: the loop nests
    ``-emulate`` runs)."""
    m, n = TILE_ROWS * a_tiles, TILE_ROWS * b_tiles
    suffix = "" if role == "compute" else f"_{role}"
    tail = "_reference" if emulate else ""
    return f"heronlike_amx_{m}x{n}x{kind.k}_{kind.name}{suffix}{tail}"


def _tile_functions(
    a_tiles: int, b_tiles: int, kind: TileKind = INT8
) -> dict[str, tuple[Any, Any]]:
    """Description and AMX implementation (TVMScript PrimFuncs) of each member of one
    micro-kernel, by role. Tile registers: C ``tmm0`` … ``tmm(a·b-1)`` (row-major over the
    ``a × b`` tiles), then the ``a`` A tiles, then the ``b`` B tiles; every tile 16 rows × 64
    bytes.

    * ``fill``: ``C = 0`` on the accumulator (scope ``local``, never in memory): ``ldtilecfg``
      (marked :data:`~heronlike.postproc.THREAD_SETUP`, so hoisted)
      and ``tilezero`` of the C tiles.
    * ``compute``: ``C += A · B``, A ``[16·a, 64]`` uint8 rows ``sa`` bytes apart, B the packed
      weight's ``[b, 16, 16, 4]`` int8 (``B[n/16, k/4, n%16, k%4]``: each ``[16, 16, 4]`` block
      one VNNI-4 tile of 16 rows × 64 bytes, blocks ``sb`` bytes apart): ``a + b`` tile loads
      and ``a · b`` ``tdpbusd``.
    * ``store``: ``D = C``, D int32 rows ``sd`` values apart: ``tilestored`` of the C tiles.
    """
    from tvm.script import tirx as T

    m, n, k = TILE_ROWS * a_tiles, TILE_ROWS * b_tiles, kind.k
    rows = TILE_ROWS
    c_tiles = a_tiles * b_tiles
    at, bt, ct = kind.a_dtype, kind.b_dtype, kind.c_dtype
    pk = kind.pack_k  # values of k per 4-byte group of a B row
    groups = k // pk  # rows of a B tile

    def intrin(name: str, *args: Any) -> Any:
        return T.call_llvm_intrin("void", f"llvm.x86.{name}", *args)

    @T.prim_func(s_tir=True)
    def fill_desc(c: T.handle) -> None:
        sc = T.int32()
        C = T.match_buffer(c, (m, n), ct, offset_factor=1, strides=[sc, 1], scope="local")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:m, 0:n])
            for i, j in T.grid(m, n):
                with T.sblock("fill"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.cast(0, ct)

    @T.prim_func(s_tir=True)
    def fill_impl(c: T.handle) -> None:
        sc = T.int32()
        C = T.match_buffer(c, (m, n), ct, offset_factor=1, strides=[sc, 1], scope="local")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:m, 0:n])
            # palette 1; every tile 16 rows x 64 bytes (colsb: u16 at byte 16 + 2t; rows: u8
            # at byte 48 + t); the same for every member, so set once per thread and task
            # (heronlike.postproc.hoist_thread_setup)
            with T.attr(0, THREAD_SETUP, 1):
                config = T.alloc_buffer((64,), "uint8", scope="local")
                for byte in T.serial(64):
                    config[byte] = T.uint8(0)
                config[0] = T.uint8(1)
                for t in T.serial(TILE_REGISTERS):
                    config[16 + 2 * t] = T.uint8(TILE_BYTES_PER_ROW)
                    config[48 + t] = T.uint8(rows)
                T.evaluate(intrin("ldtilecfg", T.address_of(config[0])))
            for t in T.unroll(c_tiles):
                T.evaluate(intrin("tilezero", T.int8(t)))

    @T.prim_func(s_tir=True)
    def compute_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb, sc = T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, (m, k), at, offset_factor=1, strides=[sa, 1])
        B = T.match_buffer(
            b, (b_tiles, groups, 16, pk), bt, offset_factor=1, strides=[sb, 16 * pk, pk, 1]
        )
        C = T.match_buffer(c, (m, n), ct, offset_factor=1, strides=[sc, 1], scope="local")
        with T.sblock("root"):
            T.reads(C[0:m, 0:n], A[0:m, 0:k], B[0:b_tiles, 0:groups, 0:16, 0:pk])
            T.writes(C[0:m, 0:n])
            for i, j, kk in T.grid(m, n, k):
                with T.sblock("update"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, kk])
                    C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], ct) * T.cast(
                        B[vj // 16, vk // pk, vj % 16, vk % pk], ct
                    )

    @T.prim_func(s_tir=True)
    def compute_impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb, sc = T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, (m, k), at, offset_factor=1, strides=[sa, 1])
        B = T.match_buffer(
            b, (b_tiles, groups, 16, pk), bt, offset_factor=1, strides=[sb, 16 * pk, pk, 1]
        )
        C = T.match_buffer(c, (m, n), ct, offset_factor=1, strides=[sc, 1], scope="local")
        with T.sblock("root"):
            T.reads(C[0:m, 0:n], A[0:m, 0:k], B[0:b_tiles, 0:groups, 0:16, 0:pk])
            T.writes(C[0:m, 0:n])
            for t in T.unroll(a_tiles):
                T.evaluate(
                    intrin(
                        "tileloadd64",
                        T.int8(c_tiles + t),
                        T.address_of(A[t * rows, 0]),
                        T.int64(sa * (TILE_BYTES_PER_ROW // k)),
                    )
                )
            for t in T.unroll(b_tiles):
                T.evaluate(
                    intrin(
                        "tileloadd64",
                        T.int8(c_tiles + a_tiles + t),
                        T.address_of(B[t, 0, 0, 0]),
                        T.int64(TILE_BYTES_PER_ROW),
                    )
                )
            for t in T.unroll(c_tiles):
                T.evaluate(
                    intrin(
                        kind.instruction,
                        T.int8(t),
                        T.int8(c_tiles + t // b_tiles),
                        T.int8(c_tiles + a_tiles + t % b_tiles),
                    )
                )

    @T.prim_func(s_tir=True)
    def store_desc(c: T.handle, d: T.handle) -> None:
        sc, sd = T.int32(), T.int32()
        C = T.match_buffer(c, (m, n), ct, offset_factor=1, strides=[sc, 1], scope="local")
        D = T.match_buffer(d, (m, n), ct, offset_factor=1, strides=[sd, 1])
        with T.sblock("root"):
            T.reads(C[0:m, 0:n])
            T.writes(D[0:m, 0:n])
            for i, j in T.grid(m, n):
                with T.sblock("store"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    D[vi, vj] = C[vi, vj]

    @T.prim_func(s_tir=True)
    def store_impl(c: T.handle, d: T.handle) -> None:
        sc, sd = T.int32(), T.int32()
        C = T.match_buffer(c, (m, n), ct, offset_factor=1, strides=[sc, 1], scope="local")
        D = T.match_buffer(d, (m, n), ct, offset_factor=1, strides=[sd, 1])
        with T.sblock("root"):
            T.reads(C[0:m, 0:n])
            T.writes(D[0:m, 0:n])
            for t in T.unroll(c_tiles):
                T.evaluate(
                    intrin(
                        "tilestored64",
                        T.int8(t),
                        T.address_of(D[(t // b_tiles) * rows, (t % b_tiles) * 16]),
                        T.int64(sd * 4),  # int32 / float32
                    )
                )

    return {
        "fill": (fill_desc, fill_impl),
        "compute": (compute_desc, compute_impl),
        "store": (store_desc, store_impl),
    }


ROLES = ("fill", "compute", "store")


@functools.cache
def register_tile_kernel(
    a_tiles: int, b_tiles: int, emulate: bool = False, kind: TileKind = INT8
) -> str:
    """Register the members of one micro-kernel with TVM (idempotent) and return the compute
    member's name; with ``emulate`` each implementation is its description (loop nests for
    any CPU)."""
    from tvm.s_tir import TensorIntrin

    for role, (desc, impl) in _tile_functions(a_tiles, b_tiles, kind).items():
        name = intrinsic_name(a_tiles, b_tiles, role, emulate, kind)
        TensorIntrin.register(name, desc, desc if emulate else impl)
    return intrinsic_name(a_tiles, b_tiles, "compute", emulate, kind)


def tile_intrinsics(emulate: bool = False) -> tuple[Intrinsic, ...]:
    """The micro-kernel families, int8 then bf16, each with 16×16 (the preferred, padding
    tile) first."""
    shapes = sorted(
        itertools.product(range(1, MAX_TILES_PER_AXIS + 1), repeat=2),
        key=lambda ab: (ab[0] * ab[1], ab),
    )
    return tuple(
        Intrinsic(
            name=intrinsic_name(a, b, "compute", emulate, kind),
            m=TILE_ROWS * a,
            n=TILE_ROWS * b,
            k=kind.k,
            a_dtype=kind.a_dtype,
            b_dtype=kind.b_dtype,
            c_dtype=kind.c_dtype,
            pack_b=True,
            register=functools.partial(register_tile_kernel, a, b, emulate, kind),
            group={role: intrinsic_name(a, b, role, emulate, kind) for role in ROLES},
            scopes={"c": "local"},
            pack_tile=(16, kind.pack_k),
            register_tiles={"a": a, "b": b, "c": a * b},
        )
        for kind in KINDS
        for a, b in shapes
    )


def check_tile_assembly(asm: str, c_tiles: int) -> dict[str, Any]:
    """Check x86 assembly (AT&T) of an AMX candidate whose micro-kernel holds ``c_tiles``
    accumulator tiles: the tiles are configured (``ldtilecfg``, once per thread's task: the
    set-up is hoisted), each fill zeroes ``c_tiles`` C tiles (``tilezero``), a product
    (``tdpbusd``, ``tdpbf16ps``) writes only C tiles (``tmm0`` … ``tmm(c_tiles-1)``) and reads
    only others, ``tileloadd`` loads only A and B tiles (C never goes through memory in the
    reduction loop), and each C tile zeroed is stored once (``tilestored``). Counts are of
    instructions in the code, not executed. Returns the counts and ``"ok"``."""

    def tiles(line: str) -> list[int]:
        return [int(t) for t in re.findall(r"%tmm(\d)", line)]

    counts = collections.Counter()
    ok = True
    for line in asm.splitlines():
        op = line.split()[0] if line.split() else ""
        op = "tdp" if op in {kind.instruction for kind in KINDS} else op
        if op in ("ldtilecfg", "tilezero", "tileloadd", "tdp", "tilestored"):
            counts[op] += 1
            regs = tiles(line)
            if op in ("tilezero", "tilestored"):
                ok &= regs[0] < c_tiles
            elif op == "tileloadd":
                ok &= regs[-1] >= c_tiles
            elif op == "tdp":  # tdpbusd B, A, C
                ok &= regs[2] < c_tiles and min(regs[:2]) >= c_tiles
    zeroed = counts["tilezero"]
    ok &= counts["ldtilecfg"] > 0 and zeroed > 0 and zeroed % c_tiles == 0
    ok &= counts["tilestored"] == zeroed and counts["tdp"] % c_tiles == 0
    ok &= counts["tdp"] >= zeroed
    return {**counts, "ok": bool(ok)}


@functools.cache
def _llvm_features(mcpu: str) -> tuple[str, ...]:
    from tvm.target import Target, codegen

    target = Target({"kind": "llvm", "mcpu": mcpu})
    return tuple(f for f in LLVM_FEATURES if codegen.target_has_features(f, target))


def host_has_amx() -> bool:
    """Whether this CPU reports AMX tiles with int8 and bf16 (:data:`HOST_FLAGS`)."""
    flags = cpu_flags()
    return all(flag in flags for flag in HOST_FLAGS)


def request_amx_permission() -> None:
    """Ask Linux for the AMX tile data state for this process (``arch_prctl(
    ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, Linux 5.16+); without it the first tile
    instruction kills the process with SIGILL. Idempotent.

    Raises:
        HostFeatureError: the CPU has no AMX or the kernel refuses (errno in the message).
    """
    if not host_has_amx():
        raise HostFeatureError(
            f"this CPU has no AMX tiles ({', '.join(HOST_FLAGS)} in /proc/cpuinfo); use a "
            "Sapphire Rapids or newer Xeon, or the target 'amx -emulate' to check schedules"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) != 0:
        errno = ctypes.get_errno()
        raise HostFeatureError(
            f"Linux refused the AMX tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM: "
            f"errno {errno}); AMX needs Linux 5.16 or newer"
        )


def check_bf16_operand(dag: Any, match: IntrinsicMatch) -> None:
    """Refuse a bf16 tile stage whose A or B operand would live in a buffer the kernel
    allocates.

    TVM 0.27 stores every bf16 buffer a kernel allocates as float32 (its
    ``BF16ComputeLegalize`` pass runs for every CPU target), while a tile load reads 16-bit
    elements: an A operand padded in the kernel (``m`` not a multiple of 16, ``k`` of 32), or
    an operand materialised by a stage (a convolution's im2col matrix as A, SCAN's generated
    matrix as B), would compute garbage on the tiles. Measured on a Xeon with
    AMX: every such candidate fails the output check. int8, and weights pre-packed outside the
    kernel, are not affected.

    Raises:
        UnsupportedShapeError: such a stage, naming why and what runs instead.
    """
    if match.intrinsic.a_dtype != "bfloat16":
        return
    why = []
    for role, operand in (("A", match.a), ("B", match.b)):
        if any(st.write.buffer == operand.buffer for st in dag.stages):
            why.append(f"its {role} operand {operand.buffer} is computed by the kernel")
    for role, axis, size in (("m", match.m_axis, TILE_ROWS), ("k", match.k_axis, BF16.k)):
        extent = match.stage.axis(axis).extent if axis else size
        if extent % size:
            why.append(f"{role} = {extent} is not a multiple of {size} (A padded in the kernel)")
    if why:
        raise UnsupportedShapeError(
            f"amx bf16: stage {match.stage.name}: " + "; ".join(why) + ". TVM 0.27 stores bf16 "
            "buffers a kernel allocates as float32, which the tile loads cannot read; run "
            "bf16 GEMM/BMM with m a multiple of 16 and k of 32 on amx, pad A yourself, or use "
            "int8, or the target dlboost -general for bf16"
        )


class AMXTarget(DLBoostTarget):
    """Intel AMX int8 and bf16 tiles: DL Boost's rules, tiled ``S0 S1 R0 R1 T`` with the tile
    micro-kernels as the intrinsic and their accumulators kept in tile registers."""

    names = ("amx",)
    option_names = ("mcpu", "num-cores", "emulate")
    name_options = {}

    def __init__(self, **options: str | bool) -> None:
        super().__init__(**options)
        self.requires_intrinsic = True

    @property
    def general(self) -> bool:
        return False

    def prior(self) -> None:
        """None: DL Boost's prior was fitted on its own tiling (registers, not tile registers),
        and no AMX tunes exist to fit one on; the first round is random."""
        return None

    def general_hint(self) -> str:
        return (
            "; amx runs only u8 x s8 -> s32 and bf16 x bf16 -> fp32 reductions over rows of A "
            "(in a model, the other layers get TVM's lowering); tune such a compute with the "
            'target "llvm"'
        )

    @property
    def emulate(self) -> bool:
        """Whether the tile micro-kernels are replaced by their loop nests (any CPU)."""
        value = self.options.get("emulate", False)
        return value is True or str(value).lower() in ("1", "true", "yes", "on")

    @property
    def mcpu(self) -> str:
        if self.options.get("mcpu"):
            return str(self.options["mcpu"])
        if self.emulate:
            return host_cpu()
        # LLVM's guess of the host (a virtual machine may hide the model) if it has AMX
        if host_has_amx() and set(_llvm_features(host_cpu())) == set(LLVM_FEATURES):
            return host_cpu()
        return "sapphirerapids"

    def resolved_options(self) -> dict[str, str | bool]:
        out: dict[str, str | bool] = {"mcpu": self.mcpu, "num-cores": str(self.cores)}
        if self.emulate:
            out["emulate"] = True
        return out

    @property
    def intrinsics(self) -> tuple[Intrinsic, ...]:
        return tile_intrinsics(self.emulate)

    @property
    def memory(self) -> tuple[Any, ...]:
        # the tile registers are counted by RegisterTileBudget; the C tiles go through L1
        return tuple(level for level in super().memory if level.name != "register")

    def normalize(self, dag: Any) -> Any:
        """Channels-last convolutions become implicit GEMMs
        (:func:`heronlike.rules.gpu.implicit_gemm`): a tile's rows are 16 values of the
        output's fused ``n·oh·ow`` axis, whose im2col operand the rules then materialise
        before the tiles run (:class:`~heronlike.rules.inline.MaterializeOperand`)."""
        preferred = {(i.a_dtype, i.b_dtype): i for i in reversed(self.intrinsics)}
        for stage in dag.stages:
            for intrinsic in preferred.values():  # the 16x16 member of each dtype
                match = match_intrinsic(stage, intrinsic)
                if match is not None:
                    return implicit_gemm(match, dag.func)
        return None

    def match(self, dag: Any) -> list[IntrinsicMatch]:
        """DL Boost's matching, then :func:`check_bf16_operand` on each match (not with
        ``-emulate``, whose loop nests read what TVM stores)."""
        matches = super().match(dag)
        if not self.emulate:
            for m in matches:
                check_bf16_operand(dag, m)
        return matches

    def tvm_target(self) -> dict[str, Any]:
        if not self.emulate:
            missing = sorted(set(LLVM_FEATURES) - set(_llvm_features(self.mcpu)))
            if missing:
                raise HostFeatureError(
                    f"-mcpu={self.mcpu} has no {', '.join(missing)}; AMX needs "
                    "sapphirerapids, emeraldrapids, graniterapids or newer"
                )
        return {"kind": "llvm", "mcpu": self.mcpu, "num-cores": self.cores}

    def check_host(self) -> None:
        if self.emulate:
            # the loop nests use what -mcpu may emit (AVX-512 on an Intel -mcpu)
            DLBoostTarget(mcpu=self.mcpu, general=True).check_host()
            return
        self.prepare_process()

    def prepare_process(self) -> None:
        """Ask Linux for the tile state (:func:`request_amx_permission`); nothing with
        ``-emulate``."""
        if not self.emulate:
            request_amx_permission()

    def ops_per_cycle(self) -> int | None:
        """AMX int8: 2048 ops per cycle per core (one 16×16×64 ``tdpbusd`` per 16 cycles);
        None with ``-emulate``, whose timings say nothing of AMX."""
        return None if self.emulate else INT8.ops_per_cycle

    def make_runner(self, *, timeout_s: float = 30.0, **evaluator: Any) -> Runner:
        """The local runner, whose worker asks for the AMX permission before its first
        kernel (none with ``-emulate``)."""
        from heronlike.measure import LocalRunner

        setup = None if self.emulate else request_amx_permission
        return LocalRunner(num_threads=self.cores, timeout_s=timeout_s, setup=setup, **evaluator)

    def schedule_rules(self) -> Sequence[Rule]:
        # DL Boost's rules, with the tile micro-kernel as the register tile: tiling
        # S0 S1 R0 R1 T (no S2), and the accumulator in tile registers across the reduction,
        # stored by the tiles straight into the output (no cache stage in memory) unless an
        # epilogue or the padding needs a write-back
        return (
            AlwaysInline(),
            MaterializeOperand(vector_bytes=VECTOR_BYTES, at_parallel_task=True),
            FuseEpilogue(),
            PadToIntrinsic(vector_bytes=VECTOR_BYTES),
            Tensorize(shape_knob=True),
            MultiLevelTiling(
                spatial=("S0", "S1"),
                order=("S0", "S1", "R0", "R1", "T"),
                vector_level="V",
                order_level="S1",
            ),
            ParallelizeOuter(),
            UnrollDepth(),
            AccumulateInTiles(vector_bytes=VECTOR_BYTES),
            PackVectorOperand(),
            VectorizeGeneral(vector_bytes=VECTOR_BYTES),
            ScheduleInjective(vector_bytes=VECTOR_BYTES, knobs=False),
        )

    def constraint_rules(self) -> Sequence[ConstraintRule]:
        return (
            RegisterTileBudget(TILE_REGISTERS),
            AddMemLimit(
                [
                    # one iteration of R0 streams A and B tiles and updates the C tiles
                    Footprint("L1", "R0"),
                    # one iteration of S1 reuses its A and B panels over the whole reduction
                    Footprint("L2", "S1"),
                ]
            ),
            UseAllCores(),
        )
