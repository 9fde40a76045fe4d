"""VTA hardware configuration: the ``vta_config.json`` keys plus clock and memory bus.

The ten ``LOG_*`` keys and their defaults are those of apache/tvm-vta ``config/vta_config.json``
(vta.md §2.1); every derived size follows ``config/pkg_config.py`` / ``hw_spec_const.h`` as
restated in vta.md §2.1 and §2.3. The clock (``fpga_freq``) and the AXI bus width
(``fpga_log_axi_bus_width``) come from ``pkg_config.py``'s PYNQ entry (100 MHz, 64 bits).

Peak compute (vta.md §2.1): one GEMM micro-op per cycle (II = 1) does BATCH × BLOCK_IN ×
BLOCK_OUT multiply-accumulates = 2 × that many ops, so the default peak is
1 × 16 × 16 MACs × 2 ops × 100 MHz = 51.2 GOPS. Peak DRAM bandwidth is bus bytes per cycle ×
clock = 8 B × 100 MHz = 800 MB/s, on one port shared by every DMA (vta.md §2.2).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from heronlike.errors import VTAConfigError

#: vta_config.json keys this model reads (TARGET and HW_VER are carried, not interpreted)
JSON_KEYS = (
    "TARGET",
    "HW_VER",
    "LOG_INP_WIDTH",
    "LOG_WGT_WIDTH",
    "LOG_ACC_WIDTH",
    "LOG_BATCH",
    "LOG_BLOCK",
    "LOG_UOP_BUFF_SIZE",
    "LOG_INP_BUFF_SIZE",
    "LOG_WGT_BUFF_SIZE",
    "LOG_ACC_BUFF_SIZE",
)
#: pkg_config.py names for the two FPGA parameters (accepted in JSON too)
FPGA_KEYS = {"fpga_freq": "clock_mhz", "fpga_log_axi_bus_width": "log_bus_width"}

#: fixed encoding widths (bits) from hw_spec_const.h as restated in vta.md §2.3
MEM_SRAM_BITS = 16
MEM_DRAM_BITS = 32
MEM_SIZE_BITS = 16
MEM_STRIDE_BITS = 16
MEM_PAD_BITS = 4
LOOP_ITER_BITS = 14
ALU_IMM_BITS = 16
UOP_WORD_BITS = 32
INSN_BITS = 128


@dataclass(frozen=True)
class VTAConfig:
    """One VTA configuration; defaults are the PYNQ-Z2 design Heron measured (vta.md §2.1).

    Fields named like ``vta_config.json`` are base-2 logarithms: widths in bits, buffer sizes in
    bytes. ``clock_mhz`` is the accelerator clock and ``log_bus_width`` the log2 of the DRAM bus
    width in bits (6: 64 bits = 8 bytes per cycle).

    Raises:
        VTAConfigError: from construction when a value is out of range (see :meth:`validate`).
    """

    LOG_INP_WIDTH: int = 3  # int8 inputs
    LOG_WGT_WIDTH: int = 3  # int8 weights
    LOG_ACC_WIDTH: int = 5  # int32 accumulators
    LOG_BATCH: int = 0  # BATCH = 1
    LOG_BLOCK: int = 4  # BLOCK_IN = BLOCK_OUT = 16
    LOG_UOP_BUFF_SIZE: int = 15  # 32 KiB
    LOG_INP_BUFF_SIZE: int = 15  # 32 KiB
    LOG_WGT_BUFF_SIZE: int = 18  # 256 KiB
    LOG_ACC_BUFF_SIZE: int = 17  # 128 KiB
    TARGET: str = "sim"
    HW_VER: str = "0.0.2"
    clock_mhz: float = 100.0
    log_bus_width: int = 6

    def __post_init__(self) -> None:
        self.validate()

    # -- validation --------------------------------------------------------------------------
    def validate(self) -> None:
        """Check every field; called on construction.

        Raises:
            VTAConfigError: a non-integer LOG_* value; an element width other than 8/16/32 bits
                (the model's numpy dtypes), accumulators narrower than inputs or weights; a
                buffer smaller than one element; a micro-op that does not fit 32 bits or an
                instruction that does not fit 128; a clock ≤ 0 or a bus narrower than 8 bits.
        """
        for f in fields(self):
            if f.name.startswith("LOG_"):
                v = getattr(self, f.name)
                if not isinstance(v, int | np.integer) or isinstance(v, bool) or v < 0:
                    raise VTAConfigError(f"{f.name} must be a non-negative integer, not {v!r}")
        for name in ("LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH"):
            if getattr(self, name) not in (3, 4, 5):
                raise VTAConfigError(
                    f"{name} = {getattr(self, name)}: the model runs 8-, 16- or 32-bit elements"
                    " (LOG width 3, 4 or 5)"
                )
        if self.LOG_ACC_WIDTH < max(self.LOG_INP_WIDTH, self.LOG_WGT_WIDTH):
            raise VTAConfigError("LOG_ACC_WIDTH must be at least LOG_INP_WIDTH and LOG_WGT_WIDTH")
        for kind in ("UOP", "INP", "WGT", "ACC"):
            size = 1 << getattr(self, f"LOG_{kind}_BUFF_SIZE")
            if size < self.elem_bytes(kind):
                raise VTAConfigError(
                    f"LOG_{kind}_BUFF_SIZE: {size} bytes hold no {self.elem_bytes(kind)}-byte "
                    "element"
                )
        uop_bits = self.acc_index_bits + self.uop_src_bits + self.wgt_index_bits
        if uop_bits > UOP_WORD_BITS:
            raise VTAConfigError(
                f"a micro-op needs {uop_bits} bits (dst {self.acc_index_bits}, src "
                f"{self.uop_src_bits}, wgt {self.wgt_index_bits}) > {UOP_WORD_BITS}"
            )
        gemm_bits = 8 + self.uop_index_bits + 1 + 2 * LOOP_ITER_BITS
        gemm_bits += 2 * (self.acc_index_bits + self.inp_index_bits + self.wgt_index_bits)
        alu_bits = 8 + self.uop_index_bits + 1 + 2 * LOOP_ITER_BITS + 4 * self.acc_index_bits
        alu_bits += 4 + ALU_IMM_BITS
        if max(gemm_bits, alu_bits) > INSN_BITS:
            raise VTAConfigError(
                f"GEMM/ALU instructions need {gemm_bits}/{alu_bits} bits > {INSN_BITS}"
            )
        if not self.clock_mhz > 0:
            raise VTAConfigError(f"clock_mhz must be positive, not {self.clock_mhz!r}")
        if not isinstance(self.log_bus_width, int) or not 3 <= self.log_bus_width <= 10:
            raise VTAConfigError(
                f"log_bus_width must be 3..10 (8..1024 bits), not {self.log_bus_width!r}"
            )

    # -- shapes and dtypes ----------------------------------------------------------------------
    @property
    def batch(self) -> int:
        """BATCH: rows of the input/accumulator tensor register (the intrinsic's m)."""
        return 1 << self.LOG_BATCH

    @property
    def block_in(self) -> int:
        """BLOCK_IN: the reduction length of one GEMM micro-op (the intrinsic's k)."""
        return 1 << self.LOG_BLOCK

    @property
    def block_out(self) -> int:
        """BLOCK_OUT: output lanes of one GEMM micro-op (the intrinsic's n)."""
        return 1 << self.LOG_BLOCK

    @property
    def inp_dtype(self) -> np.dtype:
        return np.dtype(f"int{1 << self.LOG_INP_WIDTH}")

    @property
    def wgt_dtype(self) -> np.dtype:
        return np.dtype(f"int{1 << self.LOG_WGT_WIDTH}")

    @property
    def acc_dtype(self) -> np.dtype:
        return np.dtype(f"int{1 << self.LOG_ACC_WIDTH}")

    @property
    def out_dtype(self) -> np.dtype:
        """OUT elements have the input width (vta.md §2.1: OUT width = INP width)."""
        return self.inp_dtype

    def elem_shape(self, kind: str) -> tuple[int, ...]:
        """Shape of one SRAM element ("tensor register") of buffer ``kind``.

        ``kind`` is one of ``"UOP"``, ``"INP"``, ``"WGT"``, ``"ACC"``, ``"OUT"``, ``"ACC_8BIT"``
        (the DRAM form of an ACC_8BIT load). UOP elements are scalar 32-bit words: shape ().
        """
        return {
            "UOP": (),
            "INP": (self.batch, self.block_in),
            "WGT": (self.block_out, self.block_in),
            "ACC": (self.batch, self.block_out),
            "OUT": (self.batch, self.block_out),
            "ACC_8BIT": (self.batch, self.block_out),
        }[kind]

    def elem_dtype(self, kind: str) -> np.dtype:
        """numpy dtype of one element of ``kind`` in DRAM (UOP: the packed uint32 word)."""
        return {
            "UOP": np.dtype(np.uint32),
            "INP": self.inp_dtype,
            "WGT": self.wgt_dtype,
            "ACC": self.acc_dtype,
            "OUT": self.out_dtype,
            "ACC_8BIT": np.dtype(np.int8),
        }[kind]

    def elem_bytes(self, kind: str) -> int:
        """Bytes of one element of ``kind`` (defaults: UOP 4, INP 16, WGT 256, ACC 64, OUT 16)."""
        cached = self.__dict__.get("_elem_bytes")
        if cached is None:  # derived once per (immutable) config; the simulator asks often
            cached = {
                k: math.prod(self.elem_shape(k)) * self.elem_dtype(k).itemsize
                for k in ("UOP", "INP", "WGT", "ACC", "OUT", "ACC_8BIT")
            }
            object.__setattr__(self, "_elem_bytes", cached)
        return cached[kind]

    # -- buffer depths (elements) and index widths (bits) ---------------------------------------
    def buffer_bytes(self, kind: str) -> int:
        """On-chip buffer size in bytes; OUT is sized so it has ACC's depth (vta.md §2.1)."""
        if kind == "OUT":
            return self.depth("ACC") * self.elem_bytes("OUT")
        return 1 << getattr(self, f"LOG_{kind}_BUFF_SIZE")

    def depth(self, kind: str) -> int:
        """Elements the buffer holds (defaults: UOP 8192, INP 2048, WGT 1024, ACC/OUT 2048)."""
        if kind == "OUT":
            kind = "ACC"
        return (1 << getattr(self, f"LOG_{kind}_BUFF_SIZE")) // self.elem_bytes(kind)

    @property
    def uop_index_bits(self) -> int:
        """Bits of a micro-op buffer index (uop_bgn; uop_end has one more): 13 by default."""
        return _log2(self.depth("UOP"))

    @property
    def inp_index_bits(self) -> int:
        return _log2(self.depth("INP"))

    @property
    def wgt_index_bits(self) -> int:
        return _log2(self.depth("WGT"))

    @property
    def acc_index_bits(self) -> int:
        return _log2(self.depth("ACC"))

    @property
    def uop_src_bits(self) -> int:
        """A micro-op's src_idx names an INP element (GEMM) or an ACC element (ALU)."""
        return max(self.inp_index_bits, self.acc_index_bits)

    # -- rates ----------------------------------------------------------------------------------
    @property
    def bus_bytes(self) -> int:
        """DRAM bus bytes per cycle (8 for the 64-bit PYNQ AXI port)."""
        return (1 << self.log_bus_width) // 8

    @property
    def macs_per_cycle(self) -> int:
        """Multiply-accumulates of one GEMM micro-op, issued one per cycle (256 by default)."""
        return self.batch * self.block_in * self.block_out

    @property
    def peak_gops(self) -> float:
        """Peak GEMM throughput in 1e9 ops/s: MACs/cycle × 2 ops × clock (51.2 by default)."""
        return self.macs_per_cycle * 2 * self.clock_mhz / 1e3

    @property
    def peak_dram_gbps(self) -> float:
        """Peak DRAM bandwidth in 1e9 bytes/s: bus bytes/cycle × clock (0.8 by default)."""
        return self.bus_bytes * self.clock_mhz / 1e3

    # -- JSON -----------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, source: str | Path | dict[str, Any]) -> VTAConfig:
        """Read a ``vta_config.json`` (a path, JSON text or a parsed dict).

        Accepts the ``vta_config.json`` keys (``LOG_BLOCK``, or equal ``LOG_BLOCK_IN`` and
        ``LOG_BLOCK_OUT`` as older files have) and the ``pkg_config.py`` names ``fpga_freq`` and
        ``fpga_log_axi_bus_width``. Missing keys take the defaults.

        Raises:
            VTAConfigError: unreadable JSON, an unknown key, unequal LOG_BLOCK_IN/OUT, or an
                invalid value.
        """
        if isinstance(source, dict):
            data = dict(source)
        else:
            text = str(source)
            try:
                if not text.lstrip().startswith("{"):
                    text = Path(text).read_text()
                data = json.loads(text)
            except (OSError, json.JSONDecodeError) as exc:
                raise VTAConfigError(f"cannot read a VTA config from {source!r}: {exc}") from exc
        if not isinstance(data, dict):
            raise VTAConfigError("a VTA config must be a JSON object")
        kw: dict[str, Any] = {}
        blocks = {k: data.pop(k) for k in ("LOG_BLOCK_IN", "LOG_BLOCK_OUT") if k in data}
        if blocks:
            values = set(blocks.values()) | ({data["LOG_BLOCK"]} if "LOG_BLOCK" in data else set())
            if len(values) != 1:
                raise VTAConfigError(f"the model needs BLOCK_IN == BLOCK_OUT, got {blocks}")
            kw["LOG_BLOCK"] = values.pop()
        for key, value in data.items():
            if key in JSON_KEYS:
                kw[key] = value
            elif key in FPGA_KEYS:
                kw[FPGA_KEYS[key]] = value
            else:
                known = ", ".join(JSON_KEYS + tuple(FPGA_KEYS))
                raise VTAConfigError(f"unknown VTA config key {key!r}; known: {known}")
        return cls(**kw)

    def to_json(self, path: str | Path | None = None) -> str:
        """The config as ``vta_config.json`` text (plus ``fpga_freq``/``fpga_log_axi_bus_width``);
        written to ``path`` too when given."""
        data = {k: v for k, v in asdict(self).items() if k in JSON_KEYS}
        data["fpga_freq"] = self.clock_mhz
        data["fpga_log_axi_bus_width"] = self.log_bus_width
        text = json.dumps(data, indent=2) + "\n"
        if path is not None:
            Path(path).write_text(text)
        return text


def _log2(n: int) -> int:
    """Bits of an index into ``n`` entries (n a power of two, as every VTA depth is)."""
    return max(int(n - 1).bit_length(), 1)
