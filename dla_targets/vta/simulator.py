"""Discrete-event VTA simulator: bit-exact numerics and a cycle model (vta.md §4.2–§4.3).

Structure (vta.md §2.2, §4.3):

* **fetch** reads the instruction stream in order, ``fetch_burst`` instructions per request on
  the memory port (16 bytes each), and routes each to its engine's command queue
  (:func:`~.isa.engine_of`); it stalls while the target queue holds ``cmd_queue_depth`` entries.
* **load**, **compute** and **store** are in-order engines. Each dequeues its next instruction,
  waits until every token it pops is available (FIFO: the k-th pop of a queue takes the k-th
  push), runs, and pushes its tokens when it finishes.
* **one memory port** is shared by fetch and every DMA (all AXI masters go through one ACP port
  on PYNQ): a DMA spends its fixed and per-row overhead off the port, then holds the port for its
  data beats; requests are served first come, first served.
* costs per instruction are :mod:`.timing`'s (every constant named and uncalibrated).

Each instruction's data effect (:mod:`.numerics`) runs when it starts, so a program with correct
tokens computes what hardware would; a racy program (a missing token) computes what this
schedule of events gives, and no race detector flags it. ``timing_only=True`` skips the data
effects (for tuning) and runs the same model in :mod:`.fast_timing` (columns of precomputed
costs, a lean event loop that skips repeated steady-state periods, micro-op checks once per
distinct GEMM/ALU); micro-op loads, index
bounds and the accumulator hazard are still checked, so both modes give the same cycles and
the same errors (``tests/test_vta_timing.py`` checks it over many programs). The event loop here
is the reference: readable, and what the fast one is tested against.

**Budget.** ``timeout_s`` (wall clock, checked every few events) and ``max_events`` (a count of
simulation events, deterministic) stop a run that is too long with :class:`VTATimeoutError`; the
runner reports it as a ``run_timeout``.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from heronlike.errors import (
    VTADeadlockError,
    VTAProgramError,
    VTATimeoutError,
    VTATokenError,
)

from .hazards import check_acc_hazard, check_bounds, expand
from .isa import (
    AluInsn,
    Engine,
    FinishInsn,
    GemmInsn,
    MemId,
    MemInsn,
    Opcode,
    TokenQueue,
    engine_of,
    token_io,
)
from .numerics import SRAM, execute
from .program import Program
from .report import EngineStats, SimReport
from .timing import Cost, TimingParams, cost

_EV_FETCH, _EV_FETCH_BUS, _EV_FETCH_DONE, _EV_BUS, _EV_DONE = range(5)
_PRODUCER = {
    TokenQueue.L2G: Engine.LOAD,
    TokenQueue.G2L: Engine.COMPUTE,
    TokenQueue.G2S: Engine.COMPUTE,
    TokenQueue.S2G: Engine.STORE,
}
_CONSUMER = {
    TokenQueue.L2G: Engine.COMPUTE,
    TokenQueue.G2L: Engine.LOAD,
    TokenQueue.G2S: Engine.STORE,
    TokenQueue.S2G: Engine.COMPUTE,
}


#: events between two wall-clock checks in the reference loop (its events can carry numerics)
_CLOCK_EVERY = 64


@dataclass
class SimResult:
    """What :func:`simulate` returns.

    Attributes:
        report: cycles and counters (:class:`~.report.SimReport`).
        outputs: every DRAM buffer after the run, by name, with its shape and dtype (empty in
            timing-only mode).
        dram: the final DRAM image (uint8), or None in timing-only mode.
    """

    report: SimReport
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    dram: np.ndarray | None = None


@dataclass(slots=True)
class _EngineState:
    pcs: list[int]
    pos: int = 0  # next instruction (index into pcs) to dequeue
    avail: int = 0  # instructions fetched into the command queue so far
    held: int = -1  # index into pcs of the dequeued instruction, -1 if none
    held_since: int = 0
    running: bool = False
    busy: int = 0
    token_stall: int = 0
    bus_stall: int = 0
    last_done: int = 0


def simulate(
    program: Program,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    timing: TimingParams | None = None,
    timing_only: bool = False,
    timeout_s: float | None = None,
    max_events: int | None = None,
) -> SimResult:
    """Run ``program`` to FINISH (vta.md §4.2 item 5, §4.3).

    Args:
        program: a program (e.g. from :class:`~.builder.ProgramBuilder`); validated statically
            first (:func:`~.program.validate_program`).
        inputs: arrays for DRAM buffers by name (shapes and dtypes of the buffers); others start
            zeroed. Ignored in timing-only mode.
        timing: cycle constants (default :meth:`TimingParams.pynq_hls`).
        timing_only: skip the data effects (no DRAM image, no outputs); same cycles, same
            checks, much faster (:func:`~.fast_timing.time_program_fast`).
        timeout_s: wall-clock budget in seconds, None for none.
        max_events: budget of simulation events (about 1–2 per instruction and 2 per fetch
            burst; deterministic, unlike ``timeout_s``), None for none.

    Returns:
        a :class:`SimResult` with the report and (unless timing-only) the final buffers.

    Raises:
        VTAFieldError, VTAProgramError: static checks, or an expanded micro-op index out of its
            buffer.
        VTAHazardError: a GEMM repeats an accumulator address within 2 micro-ops.
        VTADeadlockError: an engine waits for a token that never comes (or fetch for a
            command-queue slot that never frees).
        VTATokenError: tokens left over at FINISH, a token queue over its depth, or an engine
            still running after FINISH.
        VTATimeoutError: the run went over ``timeout_s`` or ``max_events``.
    """
    if timing_only:
        from .fast_timing import time_program_fast

        report = time_program_fast(program, timing, timeout_s=timeout_s, max_events=max_events)
        return SimResult(report)
    program.validate()
    t = timing or TimingParams.pynq_hls()
    return _Run(program, t, inputs, True, timeout_s=timeout_s, max_events=max_events).run()


def time_program(
    program: Program,
    timing: TimingParams | None = None,
    *,
    timeout_s: float | None = None,
    max_events: int | None = None,
) -> SimReport:
    """Timing-only simulation: the report of :func:`simulate` with ``timing_only=True``
    (cycles, per-engine busy and stall cycles, DMA bytes; see :class:`~.report.SimReport`).

    Raises:
        what :func:`simulate` raises.
    """
    return simulate(
        program, timing=timing, timing_only=True, timeout_s=timeout_s, max_events=max_events
    ).report


def _reference_timing(
    program: Program,
    t: TimingParams,
    *,
    timeout_s: float | None = None,
    max_events: int | None = None,
) -> SimReport:
    """The reference event loop in timing-only mode (what the fast path, report and errors, is
    tested against)."""
    program.validate()
    return _Run(program, t, None, False, timeout_s=timeout_s, max_events=max_events).run().report


class _Run:
    """One simulation: the event loop and its state."""

    def __init__(
        self,
        program: Program,
        t: TimingParams,
        inputs: Mapping[str, np.ndarray] | None,
        execute_data: bool,
        *,
        timeout_s: float | None = None,
        max_events: int | None = None,
    ) -> None:
        self.p, self.t, self.cfg = program, t, program.config
        self.deadline = None if timeout_s is None else time.perf_counter() + timeout_s
        self.max_events = max_events
        self.execute_data = execute_data
        self.sram = SRAM(program, data=execute_data)
        self.dram = program.make_dram(inputs) if execute_data else None
        insns = program.instructions
        self.engine = [engine_of(i) for i in insns]
        self.tokens_io = [token_io(i, e) for i, e in zip(insns, self.engine)]
        self.costs: list[Cost] = [cost(i, self.cfg, t) for i in insns]
        self.eng = [_EngineState([]) for _ in Engine]
        for pc, e in enumerate(self.engine):
            self.eng[e].pcs.append(pc)
        self.tokens = [0] * len(TokenQueue)
        self.pushed = [0] * len(TokenQueue)
        self.heap: list[tuple[int, int, int, int]] = []
        self.seq = 0
        self.bus_free = 0
        self.bus_beats = 0
        # fetch state
        self.fetch_pc = 0
        self.queued = [0] * len(Engine)  # fetched (or being fetched), not yet dequeued
        self.fetch_burst: tuple[int, int] | None = None  # [lo, hi) pcs in flight
        self.fetch_blocked: Engine | None = None
        self.fetch_stalled = True  # the next burst pays fetch_latency
        self.fetch_busy = self.fetch_block_cycles = self.fetch_bus_stall = 0
        self.fetch_block_since = 0
        self.finish_time: int | None = None
        self.expanded: dict[tuple[object, int], tuple[np.ndarray, ...]] = {}
        self.counters = dict.fromkeys(
            (
                "inp_load_nbytes",
                "wgt_load_nbytes",
                "acc_load_nbytes",
                "uop_load_nbytes",
                "out_store_nbytes",
            ),
            0,
        )
        self.gemm_uops = self.alu_uops = 0

    # -- event queue ------------------------------------------------------------------------
    def _at(self, time: int, kind: int, who: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, self.seq, kind, who))

    # -- fetch ------------------------------------------------------------------------------
    def _fetch(self, now: int) -> None:
        """Start the next burst if fetch is idle and instructions remain."""
        if self.fetch_burst is not None or self.fetch_pc >= len(self.engine):
            return
        lo = hi = self.fetch_pc
        extra = [0] * len(Engine)
        depth = self.t.cmd_queue_depth
        while hi < len(self.engine) and hi - lo < self.t.fetch_burst:
            e = self.engine[hi]
            if self.queued[e] + extra[e] >= depth:
                break
            extra[e] += 1
            hi += 1
        if hi == lo:  # the head's queue is full: wait for that engine to dequeue
            if self.fetch_blocked is None:
                self.fetch_blocked = self.engine[lo]
                self.fetch_block_since = now
            self.fetch_stalled = True
            return
        for e in Engine:
            self.queued[e] += extra[e]
        self.fetch_burst = (lo, hi)
        self.fetch_pc = hi
        latency = self.t.fetch_latency if self.fetch_stalled else 0
        self.fetch_stalled = False
        self.fetch_busy += latency
        self._at(now + latency, _EV_FETCH_BUS)

    def _fetch_bus(self, now: int) -> None:
        lo, hi = self.fetch_burst
        beats = -(-(hi - lo) * self.t.fetch_bytes_per_insn // self.cfg.bus_bytes)
        grant = max(now, self.bus_free)
        self.fetch_bus_stall += grant - now
        self.bus_free = grant + beats
        self.bus_beats += beats
        self.fetch_busy += beats
        self._at(self.bus_free, _EV_FETCH_DONE)

    def _fetch_done(self, now: int) -> None:
        lo, hi = self.fetch_burst
        self.fetch_burst = None
        for pc in range(lo, hi):
            self.eng[self.engine[pc]].avail += 1
        self._fetch(now)
        for e in Engine:
            self._try(e, now)

    # -- engines ----------------------------------------------------------------------------
    def _try(self, e: Engine, now: int) -> None:
        """Dequeue and/or start engine ``e``'s next instruction if it can."""
        st = self.eng[e]
        if st.running:
            return
        if st.held < 0:
            if st.pos >= st.avail:
                return
            st.held, st.held_since = st.pos, now
            st.pos += 1
            self.queued[e] -= 1
            if self.fetch_blocked == e:
                self.fetch_blocked = None
                self.fetch_block_cycles += now - self.fetch_block_since
                self._fetch(now)
        pc = st.pcs[st.held]
        pops, _ = self.tokens_io[pc]
        if any(self.tokens[q] == 0 for q in pops):
            return
        for q in pops:
            self.tokens[q] -= 1
        st.token_stall += now - st.held_since
        st.running = True
        self._start(pc, now)
        c = self.costs[pc]
        if c.beats:
            self._at(now + c.pre, _EV_BUS, e)
        else:
            self._at(now + c.pre, _EV_DONE, e)

    def _bus(self, e: Engine, now: int) -> None:
        st = self.eng[e]
        c = self.costs[st.pcs[st.held]]
        grant = max(now, self.bus_free)
        st.bus_stall += grant - now
        self.bus_free = grant + c.beats
        self.bus_beats += c.beats
        self._at(self.bus_free, _EV_DONE, e)

    def _done(self, e: Engine, now: int) -> None:
        st = self.eng[e]
        pc = st.pcs[st.held]
        st.busy += self.costs[pc].total
        st.held, st.running, st.last_done = -1, False, now
        for q in self.tokens_io[pc][1]:
            self.tokens[q] += 1
            self.pushed[q] += 1
            if self.tokens[q] > self.t.token_queue_depth:
                raise VTATokenError(
                    f"instruction {pc}: token queue {q.name} holds more than "
                    f"{self.t.token_queue_depth} tokens"
                )
            if _CONSUMER[q] != e:
                self._try(_CONSUMER[q], now)
        if isinstance(self.p.instructions[pc], FinishInsn):
            self.finish_time = now
        self._try(e, now)

    # -- data effects and checks --------------------------------------------------------------
    def _start(self, pc: int, now: int) -> None:
        insn = self.p.instructions[pc]
        expanded = None
        if isinstance(insn, GemmInsn | AluInsn):
            key = (insn, self.sram.uop_version)
            expanded = self.expanded.get(key)
            if expanded is None:
                expanded = expand(insn, self.sram.uop)
                try:
                    check_bounds(insn, *expanded, self.cfg)
                    if isinstance(insn, GemmInsn):
                        check_acc_hazard(expanded[0])
                except VTAProgramError as exc:
                    exc.args = (f"instruction {pc}: {exc.args[0]}",)
                    raise
                self.expanded[key] = expanded
            if isinstance(insn, GemmInsn):
                self.gemm_uops += 0 if insn.reset else insn.n_uops
            else:
                self.alu_uops += insn.n_uops
        elif isinstance(insn, MemInsn):
            c = self.costs[pc]
            if insn.opcode == Opcode.STORE:
                self.counters["out_store_nbytes"] += c.dma_bytes
            else:
                name = (
                    "acc" if insn.memory_type == MemId.ACC_8BIT else insn.memory_type.name.lower()
                )
                self.counters[f"{name}_load_nbytes"] += c.dma_bytes
            if insn.memory_type == MemId.UOP and not self.execute_data:
                self.sram.load_uops(insn)
        if self.execute_data and not isinstance(insn, FinishInsn):
            execute(self.sram, self.dram, insn, expanded)

    # -- main loop ------------------------------------------------------------------------------
    def run(self) -> SimResult:
        self._fetch(0)
        heap = self.heap
        events = 0
        while heap:
            now, _, kind, who = heapq.heappop(heap)
            events += 1
            self._check_budget(events, now)
            if kind == _EV_DONE:
                self._done(Engine(who), now)
            elif kind == _EV_BUS:
                self._bus(Engine(who), now)
            elif kind == _EV_FETCH_BUS:
                self._fetch_bus(now)
            elif kind == _EV_FETCH_DONE:
                self._fetch_done(now)
        self._check_end()
        report = self._report()
        if not self.execute_data:
            return SimResult(report)
        outputs = {
            name: self.p.read(self.dram, name)
            for name in self.p.buffers
            if not name.startswith("__")
        }
        return SimResult(report, outputs, self.dram)

    def _check_budget(self, events: int, now: int) -> None:
        """Raise :class:`VTATimeoutError` once ``events`` is over ``max_events`` or the wall
        clock past the deadline (read on the first event and every ``_CLOCK_EVERY``)."""
        over = self.max_events is not None and events > self.max_events
        if not over and self.deadline is not None and events % _CLOCK_EVERY == 1:
            over = time.perf_counter() > self.deadline
        if over:
            raise VTATimeoutError(
                f"VTA simulation stopped at cycle {now} after {events - 1} events "
                f"({len(self.engine)} instructions): over its budget"
            )

    def _check_end(self) -> None:
        stuck = []
        for e in Engine:
            st = self.eng[e]
            if st.held >= 0:
                pc = st.pcs[st.held]
                waits = [q for q in self.tokens_io[pc][0] if self.tokens[q] == 0]
                stuck.append(
                    f"the {e.name.lower()} engine waits at instruction {pc} "
                    f"({type(self.p.instructions[pc]).__name__}) for a token on "
                    + ", ".join(
                        f"{q.name} (the {_PRODUCER[q].name.lower()} engine pushed "
                        f"{self.pushed[q]} in all)"
                        for q in waits
                    )
                )
        if self.fetch_blocked is not None:
            stuck.append(
                f"fetch waits at instruction {self.fetch_pc} for a slot in the full "
                f"{self.fetch_blocked.name.lower()} command queue ({self.t.cmd_queue_depth} deep)"
            )
        if stuck or self.finish_time is None:
            raise VTADeadlockError("VTA deadlock: " + "; ".join(stuck or ["FINISH never ran"]))
        left = {q.name: n for q, n in zip(TokenQueue, self.tokens) if n}
        if left:
            raise VTATokenError(f"tokens left in queues at FINISH (pushed, never popped): {left}")
        late = [e.name.lower() for e in Engine if self.eng[e].last_done > self.finish_time]
        if late:
            raise VTATokenError(
                f"the {', '.join(late)} engine(s) still ran after FINISH at cycle "
                f"{self.finish_time}: the program does not wait for them before FINISH"
            )

    def _report(self) -> SimReport:
        total = self.finish_time
        engines = {
            "fetch": EngineStats(
                len(self.engine),
                self.fetch_busy,
                self.fetch_block_cycles,
                self.fetch_bus_stall,
                total - self.fetch_busy - self.fetch_block_cycles - self.fetch_bus_stall,
            )
        }
        work = {}
        for e in Engine:
            st = self.eng[e]
            engines[e.name.lower()] = EngineStats(
                len(st.pcs),
                st.busy,
                st.token_stall,
                st.bus_stall,
                total - st.busy - st.token_stall - st.bus_stall,
            )
            work[e] = sum(self.costs[pc].total for pc in st.pcs)
        ops = 2 * self.cfg.macs_per_cycle * self.gemm_uops
        seconds = total / (self.cfg.clock_mhz * 1e6)
        reads = sum(v for k, v in self.counters.items() if k.endswith("load_nbytes"))
        fetch_bytes = len(self.engine) * self.t.fetch_bytes_per_insn
        serial = self.fetch_busy + sum(work.values())  # fetch as it ran, then one at a time
        return SimReport(
            cycles=total,
            seconds=seconds,
            engines=engines,
            dram_read_bytes=reads,
            dram_write_bytes=self.counters["out_store_nbytes"],
            fetch_bytes=fetch_bytes,
            bytes_by_counter=dict(self.counters),
            gemm_uops=self.gemm_uops,
            alu_uops=self.alu_uops,
            ops=ops,
            gops=ops / seconds / 1e9 if seconds else 0.0,
            peak_gops=self.cfg.peak_gops,
            bus_busy_cycles=self.bus_beats,
            lower_bound_cycles=max(*work.values(), self.bus_beats),
            serial_cycles=serial,
            instructions=len(self.engine),
        )
