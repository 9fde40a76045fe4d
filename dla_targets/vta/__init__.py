"""Our own model of VTA, the TVM Versatile Tensor Accelerator (numpy only, no TVM).

apache-tvm 0.27 has no VTA and no package provides it (vta.md §1), so this package restates
the public ISA and semantics in our own code (vta.md §4.2 option (a)):

* :mod:`.config` — :class:`VTAConfig`, the ``vta_config.json`` keys, derived sizes and peaks;
* :mod:`.isa` — opcodes, instructions, micro-ops, engines and token queues;
* :mod:`.encoding` — field widths, range checks, 128-bit instruction / 32-bit micro-op codes;
* :mod:`.table` — :class:`~.table.InsnTable`, a program's instructions as columns, and their
  128-bit encodings, vectorised;
* :mod:`.program` — :class:`Program` (instructions, DRAM buffers, micro-op table), static checks;
* :mod:`.builder` — :class:`ProgramBuilder`, a Python "JIT runtime" to assemble programs;
* :mod:`.numerics` — bit-exact instruction semantics; :mod:`.hazards` — micro-op expansion,
  bounds and the accumulator hazard;
* :mod:`.timing` — per-instruction cycle costs (:class:`TimingParams`, uncalibrated);
* :mod:`.simulator` — :func:`simulate`, the discrete-event model (the reference);
  :mod:`.fast_timing` — the same model, timing only, for tuning (:func:`time_program`);
  :mod:`.report` — :class:`SimReport`, :func:`report_dict`;
* :mod:`.examples` — hand-written reference GEMM programs;
* :mod:`.lowering` — VTA programs from a tuned GEMM candidate's parameters, the build function;
* :mod:`.runner` — :class:`VTARunner`, simulated cycles behind the Runner protocol;
* :mod:`.target` — :class:`VTATarget`, the ``"vta"`` target.

Target discovery (:func:`heronlike.target.available_targets`) scans the modules of
``dla_targets/`` and registers the :class:`~heronlike.target.DLATarget` subclasses defined in
each, or in a target package's submodules: importing :class:`VTATarget` here registers it.
"""

from .builder import ProgramBuilder, UopKernel
from .config import VTAConfig
from .encoding import check_fields, decode, decode_uop, encode, encode_uop
from .isa import (
    AluInsn,
    AluOp,
    Engine,
    FinishInsn,
    GemmInsn,
    Instruction,
    MemId,
    MemInsn,
    Opcode,
    TokenQueue,
    Uop,
    engine_of,
)
from .program import DramBuffer, Program, validate_program
from .report import EngineStats, SimReport, report_dict
from .simulator import SimResult, VTATimeoutError, simulate, time_program
from .target import VTATarget
from .timing import PLAUSIBLE_RANGES, UNCALIBRATED, TimingParams

__all__ = [
    "AluInsn",
    "AluOp",
    "DramBuffer",
    "Engine",
    "EngineStats",
    "FinishInsn",
    "GemmInsn",
    "Instruction",
    "MemId",
    "MemInsn",
    "Opcode",
    "PLAUSIBLE_RANGES",
    "Program",
    "ProgramBuilder",
    "SimReport",
    "SimResult",
    "TimingParams",
    "TokenQueue",
    "UNCALIBRATED",
    "Uop",
    "UopKernel",
    "VTATarget",
    "VTAConfig",
    "VTATimeoutError",
    "check_fields",
    "decode",
    "decode_uop",
    "encode",
    "encode_uop",
    "report_dict",
    "engine_of",
    "simulate",
    "time_program",
    "validate_program",
]
