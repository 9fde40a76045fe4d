"""Timing-only VTA simulation for tuning: the cycle model of :mod:`.simulator`, no numerics.

Same model, same answer (vta.md §4.3): three in-order engines (load, compute, store), four
dependency-token FIFOs, fetch in bursts, one shared memory port served first come, first
served, and the per-instruction costs of :mod:`.timing`. :func:`time_program_fast` gives the
:class:`~.report.SimReport` that ``simulate(program, timing_only=True)`` of the reference event
loop (:class:`.simulator._Run`) gives, cycle for cycle, and rejects exactly the programs it
rejects, with the same error. It is faster because:

* **one vectorised pass** turns the instruction tuple into columns (numpy, one read per field)
  and computes every instruction's engine, token pops and pushes, cost (``pre`` cycles off the
  port, ``beats`` on it) and DMA bytes at once, with the formulas of :func:`.timing.mem_cost`
  and :func:`.timing.loop_cost`;
* **micro-op checks run once per distinct GEMM/ALU**: the compute engine runs in program order,
  so the micro-op buffer each GEMM/ALU sees is known statically (the number of UOP loads before
  it); the expanded-stream bounds and accumulator-hazard checks (:mod:`.hazards`) run once per
  distinct (instruction fields, micro-op buffer) pair, never per micro-op in Python;
* **the event loop is lean**: flat lists indexed by instruction, events as single integers on a
  heap (``time``, then scheduling order, then the event code: the same order as the reference's
  ``(time, seq)`` tuples), no per-event objects, no numerics.

Errors: when any check fails (a hazard, an index out of bounds, a deadlock, leftover tokens, an
over-full token queue, an engine running past FINISH) the reference event loop is re-run in
timing-only mode so that the error raised is the reference's, word for word. Only the run
budget (:class:`~.simulator.VTATimeoutError`) is raised here directly.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from heronlike.errors import VTAProgramError

from .hazards import check_acc_hazard, check_bounds, expand
from .isa import AluInsn, FinishInsn, GemmInsn, MemId, MemInsn, Opcode
from .program import UOP_BUFFER, Program
from .report import EngineStats, SimReport
from .timing import TimingParams

__all__ = ["ProgramColumns", "program_columns", "time_program_fast"]

#: events between two checks of the wall-clock budget
_CLOCK_EVERY = 1024

# heap entries are ints: (time << _T_SHIFT) | (seq << 3) | code
_SEQ_BITS = 40
_T_SHIFT = _SEQ_BITS + 3
_CODE_MASK = 7
_EV_BUS = 3  # + engine: 3, 4, 5 (codes 0, 1, 2: an engine's instruction is done)
_EV_FETCH_BUS = 6
_EV_FETCH_DONE = 7

# token queues (TokenQueue values): L2G 0, G2L 1, G2S 2, S2G 3; consumer engine of each
_CONSUMER = (1, 0, 2, 1)
# (engine, flag) -> queue (isa.TOKEN_QUEUES): -1 where the engine has no such queue
_POP_PREV = np.array([-1, 0, 2])
_POP_NEXT = np.array([1, 3, -1])
_PUSH_PREV = np.array([-1, 1, 3])
_PUSH_NEXT = np.array([0, 2, -1])


class _Fallback(Exception):
    """A check failed: the reference simulator is re-run to raise its own error."""


@dataclass(frozen=True)
class ProgramColumns:
    """Per-instruction timing data of one program under one :class:`TimingParams`, as columns.

    Every array has one entry per instruction (length ``n``, program order), int64.

    Attributes:
        engine: 0 load, 1 compute, 2 store (:func:`~.isa.engine_of`).
        pre: cycles off the memory port (fixed and per-row overhead, padding, micro-ops).
        beats: cycles on the memory port (data beats), 0 for non-DMA instructions.
        pop_prev, pop_next, push_prev, push_next: the token queue of each flag
            (:class:`~.isa.TokenQueue` value) or -1 when the flag is clear.
        dma_bytes: payload bytes moved (padding excluded).
        counter: index into :data:`COUNTERS` of the byte counter the instruction adds to, -1
            for none.
        gemm_uops, alu_uops: non-reset GEMM micro-ops and ALU micro-ops it executes.
    """

    engine: np.ndarray
    pre: np.ndarray
    beats: np.ndarray
    pop_prev: np.ndarray
    pop_next: np.ndarray
    push_prev: np.ndarray
    push_next: np.ndarray
    dma_bytes: np.ndarray
    counter: np.ndarray
    gemm_uops: np.ndarray
    alu_uops: np.ndarray

    @property
    def total(self) -> np.ndarray:
        """Uncontended cycles per instruction (``pre + beats``)."""
        return self.pre + self.beats


#: fsim-named byte counters, in :attr:`SimReport.bytes_by_counter` order (vta.md §2.6)
COUNTERS = (
    "inp_load_nbytes",
    "wgt_load_nbytes",
    "acc_load_nbytes",
    "uop_load_nbytes",
    "out_store_nbytes",
)
_KIND_OF = {MemInsn: 0, GemmInsn: 1, AluInsn: 2, FinishInsn: 3}
_COUNTER_OF_MEM = {MemId.INP: 0, MemId.WGT: 1, MemId.ACC: 2, MemId.ACC_8BIT: 2, MemId.UOP: 3}


def _col(objs: list, name: str) -> np.ndarray:
    return np.fromiter(map(attrgetter(name), objs), np.int64, len(objs))


def program_columns(
    program: Program, t: TimingParams, *, check_uops: bool = True
) -> ProgramColumns:
    """Engine, tokens, cost and counters of every instruction, vectorised (vta.md §4.3).

    Costs are those of :func:`.timing.cost` (tested equal instruction by instruction).

    Args:
        program: a validated program (:meth:`Program.validate`).
        t: the cycle constants.
        check_uops: run the expanded micro-op checks (bounds, accumulator hazard) once per
            distinct GEMM/ALU and micro-op buffer state.

    Raises:
        _Fallback: a micro-op check failed (the caller re-runs the reference simulator).
    """
    cfg = program.config
    insns = program.instructions
    n = len(insns)
    kind = np.fromiter(map(_KIND_OF.__getitem__, map(type, insns)), np.int8, n)
    flags = {
        f: np.fromiter(map(attrgetter(f), insns), np.bool_, n)
        for f in ("pop_prev", "pop_next", "push_prev", "push_next")
    }
    engine = np.ones(n, np.int64)  # compute unless routed elsewhere
    pre = np.full(n, t.sync_cycles, np.int64)  # FINISH, token-only no-ops
    beats = np.zeros(n, np.int64)
    dma_bytes = np.zeros(n, np.int64)
    counter = np.full(n, -1, np.int64)
    gemm_uops = np.zeros(n, np.int64)
    alu_uops = np.zeros(n, np.int64)
    is_mem, is_gemm, is_alu = kind == 0, kind == 1, kind == 2

    uop_load_at = np.zeros(n, np.bool_)  # non-no-op UOP loads (they change the micro-op buffer)
    mem_idx = np.flatnonzero(is_mem)
    if mem_idx.size:
        mems = [insns[i] for i in mem_idx]
        opcode = _col(mems, "opcode")
        mtype = _col(mems, "memory_type")
        y = _col(mems, "y_size")
        x = _col(mems, "x_size")
        y0, y1 = _col(mems, "y_pad_0"), _col(mems, "y_pad_1")
        x0, x1 = _col(mems, "x_pad_0"), _col(mems, "x_pad_1")
        store = opcode == Opcode.STORE
        engine[mem_idx] = np.where(
            store, 2, np.where((mtype == MemId.INP) | (mtype == MemId.WGT), 0, 1)
        )
        elem = np.zeros(len(mems), np.int64)
        for m in MemId:
            elem[mtype == m] = cfg.elem_bytes(m.name)
        elem[store] = cfg.elem_bytes("OUT")
        row = np.where(
            store,
            t.write_row_overhead,
            np.where(mtype == MemId.UOP, t.uop_row_overhead, t.read_row_overhead),
        )
        nop = (y == 0) | (x == 0)
        row_bytes = x * elem
        m_beats = y * (-(-row_bytes // cfg.bus_bytes))
        n_pad = (y0 + y + y1) * (x0 + x + x1) - y * x
        m_pre = t.dma_latency + y * row + n_pad * t.pad_cycles_per_elem
        pre[mem_idx] = np.where(nop, t.sync_cycles, m_pre)
        beats[mem_idx] = np.where(nop, 0, m_beats)
        dma_bytes[mem_idx] = np.where(nop, 0, y * row_bytes)
        cnt = np.full(len(mems), -1, np.int64)
        for m, c in _COUNTER_OF_MEM.items():
            cnt[(mtype == m) & ~store] = c
        cnt[store] = COUNTERS.index("out_store_nbytes")
        counter[mem_idx] = cnt
        uop_load_at[mem_idx] = (mtype == MemId.UOP) & ~store & ~nop

    loops: dict[str, tuple[np.ndarray, list, np.ndarray]] = {}
    for kind, mask in (("gemm", is_gemm), ("alu", is_alu)):
        idx = np.flatnonzero(mask)
        if not idx.size:
            continue
        objs = [insns[i] for i in idx]
        bgn, end = _col(objs, "uop_bgn"), _col(objs, "uop_end")
        io, ii = _col(objs, "iter_out"), _col(objs, "iter_in")
        reset = _col(objs, "reset")
        n_uops = io * ii * np.maximum(end - bgn, 0)
        refill = t.loop_refill * (io * ii - 1)
        if kind == "gemm":
            cost = t.gemm_fill + t.gemm_cycles_per_uop * n_uops + refill
            gemm_uops[idx] = np.where(reset == 0, n_uops, 0)
            extra = ("wgt_factor_out", "wgt_factor_in")
        else:
            use_imm = _col(objs, "use_imm")
            per = np.where(use_imm != 0, t.alu_imm_cycles_per_uop, t.alu_cycles_per_uop)
            cost = t.alu_fill + per * n_uops + refill
            alu_uops[idx] = n_uops
            extra = ("use_imm",)
        pre[idx] = np.where(n_uops == 0, t.sync_cycles, cost)
        if check_uops:
            names = ("dst_factor_out", "dst_factor_in", "src_factor_out", "src_factor_in")
            key = np.stack(
                [reset, bgn, end, io, ii, *(_col(objs, f) for f in names + extra)], axis=1
            )
            loops[kind] = (idx, objs, key)

    if check_uops and loops:
        _check_uops(program, loops, uop_load_at)

    e = engine
    return ProgramColumns(
        engine=engine,
        pre=pre,
        beats=beats,
        pop_prev=np.where(flags["pop_prev"], _POP_PREV[e], -1),
        pop_next=np.where(flags["pop_next"], _POP_NEXT[e], -1),
        push_prev=np.where(flags["push_prev"], _PUSH_PREV[e], -1),
        push_next=np.where(flags["push_next"], _PUSH_NEXT[e], -1),
        dma_bytes=dma_bytes,
        counter=counter,
        gemm_uops=gemm_uops,
        alu_uops=alu_uops,
    )


def _distinct_rows(rows: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct row of an int64 ``(n, k)`` array.

    Rows are hashed to one uint64 each (a 1-D unique is much faster than ``unique(axis=0)``);
    every row is then compared with its hash's representative, and a collision falls back to
    the exact ``np.unique(axis=0)``.
    """
    mult = np.uint64(0x9E3779B97F4A7C15) ** np.arange(1, rows.shape[1] + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = (rows.astype(np.uint64) * mult).sum(axis=1, dtype=np.uint64)
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    if np.array_equal(rows, rows[first[inverse]]):
        return first
    return np.unique(rows, axis=0, return_index=True)[1]


def _check_uops(
    program: Program,
    loops: dict[str, tuple[np.ndarray, list, np.ndarray]],
    uop_load_at: np.ndarray,
) -> None:
    """The expanded micro-op checks of the reference (``_Run._start``), once per distinct
    (GEMM/ALU fields, micro-op buffer state). The micro-op buffer a GEMM/ALU sees is the one
    left by the UOP loads before it in program order: they run on the same in-order engine."""
    cfg = program.config
    insns = program.instructions
    loads = np.flatnonzero(uop_load_at).tolist()
    version = np.cumsum(uop_load_at) - uop_load_at  # UOP loads before each instruction
    # (version, kind, first pc) of every distinct key, in version order
    todo = []
    for kind, (idx, objs, key) in loops.items():
        full = np.concatenate([version[idx][:, None], key], axis=1)
        first = _distinct_rows(full)
        todo += [(int(version[idx[j]]), kind, int(idx[j]), objs[j]) for j in first]
    todo.sort(key=lambda r: (r[0], r[2]))
    uop = np.zeros((cfg.depth("UOP"), 3), np.int64)
    ubase = program.buffers[UOP_BUFFER].elem_base
    applied = 0
    for ver, kind, _pc, insn in todo:
        while applied < ver:
            ld = insns[loads[applied]]
            lo = ld.dram_base - ubase
            uop[ld.sram_base : ld.sram_base + ld.x_size] = program.uops[lo : lo + ld.x_size]
            applied += 1
        dst, src, wgt = expand(insn, uop)
        try:
            check_bounds(insn, dst, src, wgt, cfg)
            if kind == "gemm":
                check_acc_hazard(dst)
        except VTAProgramError as exc:
            raise _Fallback from exc


def time_program_fast(
    program: Program,
    timing: TimingParams | None = None,
    *,
    timeout_s: float | None = None,
    max_events: int | None = None,
) -> SimReport:
    """Timing-only simulation: the report ``simulate(program, timing_only=True)`` gives.

    Args:
        program: the program; validated first (:meth:`Program.validate`, cached).
        timing: cycle constants (default :meth:`TimingParams.pynq_hls`).
        timeout_s: wall-clock budget in seconds for the event loop (checked every 1024
            events), None for none.
        max_events: budget of simulation events (about 1–2 per instruction plus 2 per fetch
            burst), None for none.

    Returns:
        the :class:`~.report.SimReport` (cycles, per-engine busy/stall cycles, DMA bytes in
        bytes, GOPS), equal to the reference simulator's.

    Raises:
        VTAFieldError, VTAProgramError, VTAHazardError, VTADeadlockError, VTATokenError: exactly
            as :func:`~.simulator.simulate` (the reference raises them: see the module
            docstring).
        VTATimeoutError: the budget ran out.
    """
    from .simulator import _reference_timing

    program.validate()
    t = timing or TimingParams.pynq_hls()
    start = time.perf_counter()
    deadline = None if timeout_s is None else start + timeout_s
    try:
        cols = program_columns(program, t)
        return _event_loop(program, cols, t, deadline, max_events)
    except _Fallback:
        left = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
        return _reference_timing(program, t, timeout_s=left, max_events=max_events)


def _event_loop(
    program: Program,
    cols: ProgramColumns,
    t: TimingParams,
    deadline: float | None,
    max_events: int | None,
) -> SimReport:
    """The reference event loop (:class:`.simulator._Run`) on flat lists; see its docstrings
    for each step. Every event is scheduled in the reference's order, so ties on the heap and
    on the memory port break the same way."""
    from .simulator import VTATimeoutError

    cfg = program.config
    n = len(program.instructions)
    last = n - 1
    engine = cols.engine.tolist()
    beats = cols.beats.tolist()
    total = (cols.pre + cols.beats).tolist()
    # an instruction's start schedules its event at now + pre: key offset (pre << shift) | code
    start_key = (
        (cols.pre << _T_SHIFT) | np.where(cols.beats > 0, _EV_BUS + cols.engine, cols.engine)
    ).tolist()
    pop_a, pop_b = cols.pop_prev.tolist(), cols.pop_next.tolist()
    push_a, push_b = cols.push_prev.tolist(), cols.push_next.tolist()
    pcs = [np.flatnonzero(cols.engine == e).tolist() for e in range(3)]
    # instructions of each engine among the first i (fetch bursts add these to queues)
    cum = [np.concatenate([[0], np.cumsum(cols.engine == e)]).tolist() for e in range(3)]
    cum0, cum1, cum2 = cum

    heap: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0  # scheduling order, in steps of 8 (the low 3 bits hold the event code)
    tokens = [0, 0, 0, 0]
    tq_depth = t.token_queue_depth
    depth = t.cmd_queue_depth
    burst = t.fetch_burst
    fetch_latency = t.fetch_latency
    fbytes, bus_bytes = t.fetch_bytes_per_insn, cfg.bus_bytes
    # engines
    pos = [0, 0, 0]
    avail = [0, 0, 0]
    held = [-1, -1, -1]  # pc of the dequeued instruction
    held_since = [0, 0, 0]
    running = [False, False, False]
    busy = [0, 0, 0]
    token_stall = [0, 0, 0]
    bus_stall = [0, 0, 0]
    last_done = [0, 0, 0]
    queued = [0, 0, 0]
    bus_free = bus_beats = 0
    # fetch
    fetch_pc = 0
    f_lo = f_hi = -1  # burst in flight, f_lo < 0 if none
    fetch_blocked = -1
    fetch_block_since = 0
    fetch_stalled = True
    fetch_busy = fetch_block_cycles = fetch_bus_stall = 0
    finish_time = -1

    def fetch(now: int) -> None:
        nonlocal seq, fetch_pc, f_lo, f_hi, fetch_blocked, fetch_block_since, fetch_stalled
        nonlocal fetch_busy
        if f_lo >= 0 or fetch_pc >= n:
            return
        lo = fetch_pc
        hi = lo + burst
        if hi > n:
            hi = n
        if queued[0] + burst > depth or queued[1] + burst > depth or queued[2] + burst > depth:
            hi = lo  # a queue may fill: walk the burst as the reference does
            extra = [0, 0, 0]
            while hi < n and hi - lo < burst:
                e = engine[hi]
                if queued[e] + extra[e] >= depth:
                    break
                extra[e] += 1
                hi += 1
            if hi == lo:
                if fetch_blocked < 0:
                    fetch_blocked = engine[lo]
                    fetch_block_since = now
                fetch_stalled = True
                return
        queued[0] += cum0[hi] - cum0[lo]
        queued[1] += cum1[hi] - cum1[lo]
        queued[2] += cum2[hi] - cum2[lo]
        f_lo, f_hi = lo, hi
        fetch_pc = hi
        seq += 8
        if fetch_stalled:
            fetch_stalled = False
            fetch_busy += fetch_latency
            push(heap, ((now + fetch_latency) << _T_SHIFT) | seq | _EV_FETCH_BUS)
        else:
            push(heap, (now << _T_SHIFT) | seq | _EV_FETCH_BUS)

    def try_(e: int, now: int) -> None:
        nonlocal seq, fetch_blocked, fetch_block_cycles
        pc = held[e]
        if pc < 0:
            p = pos[e]
            if p >= avail[e]:
                return
            pc = held[e] = pcs[e][p]
            held_since[e] = now
            pos[e] = p + 1
            queued[e] -= 1
            if fetch_blocked == e:
                fetch_blocked = -1
                fetch_block_cycles += now - fetch_block_since
                fetch(now)
        q = pop_a[pc]
        if q >= 0:
            if not tokens[q]:
                return
            q2 = pop_b[pc]
            if q2 >= 0:
                if not tokens[q2]:
                    return
                tokens[q2] -= 1
            tokens[q] -= 1
        else:
            q2 = pop_b[pc]
            if q2 >= 0:
                if not tokens[q2]:
                    return
                tokens[q2] -= 1
        token_stall[e] += now - held_since[e]
        running[e] = True
        seq += 8
        push(heap, (now << _T_SHIFT) + start_key[pc] + seq)

    fetch(0)
    stop = max_events + 1 if max_events is not None else 1 << 62  # first event over budget
    next_check = 1 if deadline is not None else stop
    events = 0
    while heap:
        key = pop(heap)
        now = key >> _T_SHIFT
        code = key & _CODE_MASK
        events += 1
        if events >= next_check:
            if events >= stop or (deadline is not None and time.perf_counter() > deadline):
                raise VTATimeoutError(
                    f"VTA simulation stopped at cycle {now} after {events - 1} events "
                    f"({n} instructions): over its budget"
                )
            next_check = min(events + _CLOCK_EVERY, stop) if deadline is not None else stop
        if code < 3:  # an instruction is done
            pc = held[code]
            busy[code] += total[pc]
            held[code] = -1
            running[code] = False
            last_done[code] = now
            q = push_a[pc]
            if q >= 0:
                tokens[q] += 1
                if tokens[q] > tq_depth:
                    raise _Fallback
                c = _CONSUMER[q]
                if not running[c]:
                    try_(c, now)
            q = push_b[pc]
            if q >= 0:
                tokens[q] += 1
                if tokens[q] > tq_depth:
                    raise _Fallback
                c = _CONSUMER[q]
                if not running[c]:
                    try_(c, now)
            if pc == last:  # FINISH (validated: the last instruction, and the only one)
                finish_time = now
            if not running[code]:
                try_(code, now)
        elif code < _EV_FETCH_BUS:  # a DMA asks for the memory port
            e = code - _EV_BUS
            b = beats[held[e]]
            if bus_free > now:
                bus_stall[e] += bus_free - now
                bus_free += b
            else:
                bus_free = now + b
            bus_beats += b
            seq += 8
            push(heap, (bus_free << _T_SHIFT) | seq | e)
        elif code == _EV_FETCH_BUS:
            b = -(-(f_hi - f_lo) * fbytes // bus_bytes)
            if bus_free > now:
                fetch_bus_stall += bus_free - now
                bus_free += b
            else:
                bus_free = now + b
            bus_beats += b
            fetch_busy += b
            seq += 8
            push(heap, (bus_free << _T_SHIFT) | seq | _EV_FETCH_DONE)
        else:  # a fetch burst arrives
            lo, hi = f_lo, f_hi
            f_lo = f_hi = -1
            avail[0] += cum0[hi] - cum0[lo]
            avail[1] += cum1[hi] - cum1[lo]
            avail[2] += cum2[hi] - cum2[lo]
            fetch(now)
            if not running[0]:
                try_(0, now)
            if not running[1]:
                try_(1, now)
            if not running[2]:
                try_(2, now)

    # the reference's end checks (_Run._check_end): any failure re-runs it for its message
    if (
        max(held) >= 0
        or fetch_blocked >= 0
        or finish_time < 0
        or any(tokens)
        or max(last_done) > finish_time
    ):
        raise _Fallback
    tot = cols.pre + cols.beats
    work = [int(tot[cols.engine == e].sum()) for e in range(3)]
    engines = {
        "fetch": EngineStats(
            n,
            fetch_busy,
            fetch_block_cycles,
            fetch_bus_stall,
            finish_time - fetch_busy - fetch_block_cycles - fetch_bus_stall,
        )
    }
    for e, name in enumerate(("load", "compute", "store")):
        engines[name] = EngineStats(
            len(pcs[e]),
            busy[e],
            token_stall[e],
            bus_stall[e],
            finish_time - busy[e] - token_stall[e] - bus_stall[e],
        )
    counters = dict.fromkeys(COUNTERS, 0)
    has = cols.counter >= 0
    sums = np.bincount(cols.counter[has], weights=cols.dma_bytes[has], minlength=len(COUNTERS))
    for i, name in enumerate(COUNTERS):
        counters[name] = int(sums[i])
    gemm_uops = int(cols.gemm_uops.sum())
    alu_uops = int(cols.alu_uops.sum())
    ops = 2 * cfg.macs_per_cycle * gemm_uops
    seconds = finish_time / (cfg.clock_mhz * 1e6)
    reads = sum(v for k, v in counters.items() if k.endswith("load_nbytes"))
    return SimReport(
        cycles=finish_time,
        seconds=seconds,
        engines=engines,
        dram_read_bytes=reads,
        dram_write_bytes=counters["out_store_nbytes"],
        fetch_bytes=n * t.fetch_bytes_per_insn,
        bytes_by_counter=counters,
        gemm_uops=gemm_uops,
        alu_uops=alu_uops,
        ops=ops,
        gops=ops / seconds / 1e9 if seconds else 0.0,
        peak_gops=cfg.peak_gops,
        bus_busy_cycles=bus_beats,
        lower_bound_cycles=max(*work, bus_beats),
        serial_cycles=fetch_busy + sum(work),
        instructions=n,
    )
