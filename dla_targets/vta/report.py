"""What a simulation reports: cycles, per-engine busy and stall time, DMA bytes, ops, GOPS
(vta.md §4.2 item 7), and :func:`report_dict`, the same as a JSON-ready dict for records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class EngineStats:
    """One engine's time, in cycles, over the whole run (up to FINISH).

    Attributes:
        instructions: instructions it executed (for ``fetch``: instructions fetched).
        busy_cycles: cycles executing: fixed and per-row overheads, micro-ops, and memory-port
            beats (waits for the port excluded).
        token_stall_cycles: cycles holding a dequeued instruction whose dependency token has
            not arrived (for ``fetch``: cycles blocked on a full command queue).
        bus_stall_cycles: cycles waiting for the shared memory port held by another engine.
        idle_cycles: the rest: nothing fetched yet, or no work left.
    """

    instructions: int
    busy_cycles: int
    token_stall_cycles: int
    bus_stall_cycles: int
    idle_cycles: int


@dataclass(frozen=True)
class SimReport:
    """The result of :func:`~.simulator.simulate`.

    Attributes:
        cycles: cycles from launch until FINISH completes.
        seconds: ``cycles`` at the configured clock.
        engines: :class:`EngineStats` for ``"fetch"``, ``"load"``, ``"compute"``, ``"store"``.
        dram_read_bytes: payload bytes loaded (INP, WGT, ACC, UOP; padding and instruction fetch
            excluded, as fsim counts).
        dram_write_bytes: payload bytes stored.
        fetch_bytes: instruction bytes fetched.
        bytes_by_counter: fsim-named counters (``inp_load_nbytes``, ``wgt_load_nbytes``,
            ``acc_load_nbytes``, ``uop_load_nbytes``, ``out_store_nbytes``; vta.md §2.6).
        gemm_uops: non-reset GEMM micro-ops (fsim ``gemm_counter``).
        alu_uops: ALU micro-ops (fsim ``alu_counter``).
        ops: GEMM ops, 2 per multiply-accumulate (reset micro-ops do none).
        gops: ``ops`` per second / 1e9.
        peak_gops: the configuration's peak (:attr:`~.config.VTAConfig.peak_gops`).
        bus_busy_cycles: cycles the memory port carried data beats (fetch included).
        lower_bound_cycles: max of the compute, load and store engines' total cost and the
            port's total beats (vta.md §4.3 bounds); ``cycles`` is never below it.
        serial_cycles: the fully serialised sum: fetch's own time (latencies and beats), then
            every instruction alone at its uncontended cost; ``cycles`` never exceeds it.
        instructions: instructions executed (FINISH included).
    """

    cycles: int
    seconds: float
    engines: Mapping[str, EngineStats]
    dram_read_bytes: int
    dram_write_bytes: int
    fetch_bytes: int
    bytes_by_counter: Mapping[str, int]
    gemm_uops: int
    alu_uops: int
    ops: int
    gops: float
    peak_gops: float
    bus_busy_cycles: int
    lower_bound_cycles: int
    serial_cycles: int
    instructions: int

    @property
    def fraction_of_peak(self) -> float:
        """Achieved GOPS / peak GOPS (0..1)."""
        return self.gops / self.peak_gops if self.peak_gops else 0.0

    def summary(self) -> str:
        """A few lines for logs."""
        lines = [
            f"{self.cycles} cycles ({self.seconds * 1e6:.1f} us), {self.gops:.2f} GOPS "
            f"= {100 * self.fraction_of_peak:.1f}% of {self.peak_gops:.1f} peak; bounds "
            f"[{self.lower_bound_cycles}, {self.serial_cycles}]",
            f"DMA read {self.dram_read_bytes} B, write {self.dram_write_bytes} B, fetch "
            f"{self.fetch_bytes} B; GEMM uops {self.gemm_uops}, ALU uops {self.alu_uops}",
        ]
        for name, e in self.engines.items():
            lines.append(
                f"  {name:8s} insns {e.instructions:6d} busy {e.busy_cycles:8d} token-stall "
                f"{e.token_stall_cycles:8d} bus-stall {e.bus_stall_cycles:8d} "
                f"idle {e.idle_cycles:8d}"
            )
        return "\n".join(lines)


def report_dict(report: SimReport) -> dict[str, Any]:
    """``report`` as a JSON-ready dict (plain ints, floats, strings), for a trial's record.

    Keys: ``cycles``, ``seconds``, ``gops``, ``peak_gops``, ``fraction_of_peak`` (0..1),
    ``ops``, ``gemm_uops``, ``alu_uops``, ``instructions``, ``dram_read_bytes``,
    ``dram_write_bytes``, ``fetch_bytes``, ``bytes_by_counter`` (fsim names, bytes),
    ``bus_busy_cycles``, ``lower_bound_cycles``, ``serial_cycles`` and ``engines``: for
    ``fetch``, ``load``, ``compute``, ``store`` a dict of ``instructions``, ``busy_cycles``,
    ``token_stall_cycles``, ``bus_stall_cycles``, ``idle_cycles`` (vta.md §4.2 item 7).
    """
    out: dict[str, Any] = {
        "cycles": int(report.cycles),
        "seconds": float(report.seconds),
        "gops": float(report.gops),
        "peak_gops": float(report.peak_gops),
        "fraction_of_peak": float(report.fraction_of_peak),
        "ops": int(report.ops),
        "gemm_uops": int(report.gemm_uops),
        "alu_uops": int(report.alu_uops),
        "instructions": int(report.instructions),
        "dram_read_bytes": int(report.dram_read_bytes),
        "dram_write_bytes": int(report.dram_write_bytes),
        "fetch_bytes": int(report.fetch_bytes),
        "bytes_by_counter": {k: int(v) for k, v in report.bytes_by_counter.items()},
        "bus_busy_cycles": int(report.bus_busy_cycles),
        "lower_bound_cycles": int(report.lower_bound_cycles),
        "serial_cycles": int(report.serial_cycles),
        "engines": {
            name: {k: int(v) for k, v in asdict(e).items()} for name, e in report.engines.items()
        },
    }
    return out
