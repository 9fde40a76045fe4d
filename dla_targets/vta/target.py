"""VTA as a heronlike target, written only against :class:`heronlike.target.DLATarget`.

Target string ``"vta"``, option ``-config=<vta_config.json path or JSON text>`` (default: the
PYNQ-Z2 design, :class:`~.config.VTAConfig`). Only BATCH = 1 configurations are scheduled.

* **Intrinsic**: the GEMM micro-op, ``BATCH × BLOCK_OUT × BLOCK_IN`` = 1 × 16 × 16,
  ``int8 × int8 → int32`` (signed × signed: ``dtype_names`` maps ``heronlike.ops``'s
  ``"int8"`` to ``"int8-int8"``, as on TensorCore). Its TVM ``TensorIntrin`` is implemented
  by a plain loop, so the scheduled TIR of every candidate still compiles for the CPU (the
  second numerical oracle); the VTA program itself comes from :mod:`.lowering`.
* **Memory** (capacities from the config): ``input`` 32 KB, ``weight`` 256 KB,
  ``accumulator`` 128 KB, ``uop`` 32 KB.
* **Rules**: :mod:`heronlike.rules.vta` (tiling, virtual threads, tile order, GEMM folding;
  buffer, micro-op, field-width and hazard constraints).
* **Measurement**: a :class:`~heronlike.measure.LocalBuilder` running
  :func:`~.lowering.build_vta` (program generated from the candidate's assignment, written as
  a columnar artifact),
  and :class:`~.runner.VTARunner` (simulated cycles at the configured clock, outputs checked
  bit-exactly). Nothing here needs the host to have anything: ``check_host`` accepts every
  host, and no kernel runs in the tuning process (``runs_in_process = False``).

Computes: int8 × int8 → int32 GEMM (``heronlike.ops.gemm``), batched GEMM (``ops.bmm``, one
GEMM per batch) and 2-D convolution (``ops.c2d``, NHWC, batch 1, any stride and dilation,
padding ≤ min(15, (kernel − 1)·dilation), lowered as an implicit GEMM with padded 2-D DMA
loads; see :mod:`.lowering`), each alone (an int32 result, stored as four byte planes) or
followed by a requantisation epilogue (``ops.requantize``: per-channel int32 bias, ``>>``,
clip, cast to int8) run by the ALU on the accumulator and stored once as int8. The
convolution's weight is pre-packed once into VTA's ``(CO/16, KH, KW, CI/16, 16, 16)`` tiles
(``Space.packed``), as VTA's runtime packed weights.

Computes VTA cannot run are typed errors from :meth:`DLATarget.match`: float or uint8 operands
are :class:`~heronlike.errors.UnsupportedDtypeError`, an N or K (CO or CI) that 16 does not
divide is :class:`~heronlike.errors.UnsupportedShapeError`, as are a convolution batch ≠ 1 and
padding a VTA LOAD cannot add; an epilogue result other than int8/int32 is an
``UnsupportedDtypeError``; anything else (an epilogue VTA's ALU cannot run, 1-D/3-D
convolutions) is :class:`~heronlike.errors.UnsupportedComputeError` (from the rules).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from heronlike.errors import UnknownTargetError, VTAConfigError
from heronlike.intrinsic import Intrinsic
from heronlike.rules.base import ConstraintRule, Rule
from heronlike.rules.inline import AlwaysInline
from heronlike.rules.tensorize import ApplyIntrinsic, Tensorize
from heronlike.rules.vta import VTABufferLimits, VTAGemmTiling, VTALimits
from heronlike.target import DLATarget, MemoryLevel

from .config import ALU_IMM_BITS, LOOP_ITER_BITS, MEM_SIZE_BITS, VTAConfig
from .hazards import ACC_WAW_MIN_DISTANCE


def _intrin_name(n: int, k: int) -> str:
    return f"heronlike_vta_gemm_1x{n}x{k}_s8s8s32"


@functools.cache
def register_vta_gemm(n: int = 16, k: int = 16) -> str:
    """Register the VTA GEMM tile ``C[n] += A[k] · B[n, k]`` with TVM (idempotent); its
    implementation is the same loop nest, so tensorized candidates compile for the CPU."""
    from tvm.s_tir import TensorIntrin
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def desc(
        A: T.Buffer((k,), "int8", offset_factor=1),
        B: T.Buffer((n, k), "int8", offset_factor=1),
        C: T.Buffer((n,), "int32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:n], A[0:k], B[0:n, 0:k])
            T.writes(C[0:n])
            for i in T.serial(0, n):
                for r in T.serial(0, k):
                    with T.sblock("update"):
                        vi, vr = T.axis.remap("SR", [i, r])
                        C[vi] = C[vi] + T.cast(A[vr], "int32") * T.cast(B[vi, vr], "int32")

    @T.prim_func(s_tir=True)
    def impl(
        A: T.Buffer((k,), "int8", offset_factor=1),
        B: T.Buffer((n, k), "int8", offset_factor=1),
        C: T.Buffer((n,), "int32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:n], A[0:k], B[0:n, 0:k])
            T.writes(C[0:n])
            for i in T.serial(0, n):
                for r in T.serial(0, k):
                    C[i] = C[i] + T.cast(A[r], "int32") * T.cast(B[i, r], "int32")

    name = _intrin_name(n, k)
    TensorIntrin.register(name, desc, impl, override=True)
    return name


class VTATarget(DLATarget):
    """The VTA accelerator, simulated (:mod:`heronlike.dla_targets.vta`)."""

    names = ("vta",)
    option_names = ("config",)
    pads_shapes = False
    #: TVM's device type of VTA (kDLExtDev); the simulator runner does not read it
    device = "ext_dev"
    runs_in_process = False
    #: ``"int8"`` means signed × signed on VTA (``heronlike.ops`` dtype names)
    dtype_names = {"int8": "int8-int8"}

    def __init__(self, **options: str | bool) -> None:
        super().__init__(**options)
        source = self.options.get("config")
        try:
            self.config = VTAConfig() if source in (None, True) else VTAConfig.from_json(source)
        except VTAConfigError as exc:
            raise UnknownTargetError(f"-config: {exc}") from None
        if self.config.batch != 1:
            raise UnknownTargetError(
                f"-config: the VTA rules schedule BATCH = 1 only, not {self.config.batch}"
            )

    @property
    def intrinsics(self) -> tuple[Intrinsic, ...]:
        n, k = self.config.block_out, self.config.block_in
        dtype = f"int{8 << (self.config.LOG_INP_WIDTH - 3)}"
        return (
            Intrinsic(
                name=_intrin_name(n, k),
                m=self.config.batch,
                n=n,
                k=k,
                a_dtype=dtype,
                b_dtype=f"int{8 << (self.config.LOG_WGT_WIDTH - 3)}",
                c_dtype=f"int{8 << (self.config.LOG_ACC_WIDTH - 3)}",
                register=functools.partial(register_vta_gemm, n, k),
            ),
        )

    @property
    def memory(self) -> tuple[MemoryLevel, ...]:
        cfg = self.config
        return (
            MemoryLevel("input", cfg.buffer_bytes("INP")),
            MemoryLevel("weight", cfg.buffer_bytes("WGT")),
            MemoryLevel("accumulator", cfg.buffer_bytes("ACC")),
            MemoryLevel("uop", cfg.buffer_bytes("UOP")),
        )

    @property
    def cores(self) -> int:
        return 1

    def tvm_target(self) -> dict[str, Any]:
        """The CPU target the scheduled TIR (the numerical oracle) is compiled for; VTA
        programs are generated by :func:`~.lowering.build_vta`, not by TVM."""
        return {"kind": "llvm"}

    def cycle_hz(self) -> float | None:
        """The configured VTA clock: trial latencies are simulated cycles at this clock."""
        return self.config.clock_mhz * 1e6

    def peak_ops_per_s(self) -> float | None:
        return self.config.peak_gops * 1e9

    def limits(self) -> VTALimits:
        """The hardware numbers :mod:`heronlike.rules.vta` constrains tiles with."""
        cfg = self.config
        return VTALimits(
            inp_bytes=cfg.buffer_bytes("INP"),
            wgt_bytes=cfg.buffer_bytes("WGT"),
            acc_bytes=cfg.buffer_bytes("ACC"),
            uop_depth=cfg.depth("UOP"),
            inp_elem_bytes=cfg.elem_bytes("INP"),
            wgt_elem_bytes=cfg.elem_bytes("WGT"),
            acc_elem_bytes=cfg.elem_bytes("ACC"),
            loop_iter_bits=LOOP_ITER_BITS,
            acc_index_bits=cfg.acc_index_bits,
            inp_index_bits=cfg.inp_index_bits,
            wgt_index_bits=cfg.wgt_index_bits,
            stride_bits=MEM_SIZE_BITS,
            hazard_distance=ACC_WAW_MIN_DISTANCE,
            block_in=cfg.block_in,
            block_out=cfg.block_out,
            alu_imm_bits=ALU_IMM_BITS,
            acc_bits=cfg.acc_dtype.itemsize * 8,
        )

    def schedule_rules(self) -> Sequence[Rule]:
        return (
            AlwaysInline(),
            Tensorize(),
            VTAGemmTiling(self.limits()),
            ApplyIntrinsic(vector_bytes=64),
        )

    def constraint_rules(self) -> Sequence[ConstraintRule]:
        return (VTABufferLimits(self.limits()),)

    def build_options(self) -> dict[str, Any]:
        return {"vta_config": self.config.to_json()}

    def make_builder(self, *, timeout_s: float = 60.0) -> Any:
        from heronlike.measure import LocalBuilder

        from .lowering import build_vta

        return LocalBuilder(max_workers=1, timeout_s=timeout_s, build_fn=build_vta, suffix=".npz")

    def make_runner(self, *, timeout_s: float = 30.0, **evaluator: Any) -> Any:
        from .runner import VTARunner

        return VTARunner(timeout_s=timeout_s, **evaluator)
