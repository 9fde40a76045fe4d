"""Timing-only VTA simulation for tuning: the cycle model of :mod:`.simulator`, no numerics.

Same model, same answer (vta.md §4.3): three in-order engines (load, compute, store), four
dependency-token FIFOs, fetch in bursts, one shared memory port served first come, first
served, and the per-instruction costs of :mod:`.timing`. :func:`time_program_fast` gives the
:class:`~.report.SimReport` that ``simulate(program, timing_only=True)`` of the reference event
loop (:class:`.simulator._Run`) gives, cycle for cycle, and rejects exactly the programs it
rejects, with the same error. It is faster because:

* **one vectorised pass** over the program's columns (:attr:`~.program.Program.table`)
  computes every instruction's engine, token pops and pushes, cost (``pre`` cycles off the
  port, ``beats`` on it) and DMA bytes at once, with the formulas of :func:`.timing.mem_cost`
  and :func:`.timing.loop_cost`;
* **micro-op checks run once per distinct GEMM/ALU**: the compute engine runs in program order,
  so the micro-op buffer each GEMM/ALU sees is known statically (the number of UOP loads before
  it); the expanded-stream bounds and accumulator-hazard checks (:mod:`.hazards`) run once per
  distinct (instruction fields, micro-op buffer) pair, never per micro-op in Python;
* **the event loop is lean**: flat lists indexed by instruction, events as single integers on a
  heap (``time``, then scheduling order, then the event code: the same order as the reference's
  ``(time, seq)`` tuples), no per-event objects, no numerics; the lists cover a sliding window
  of :data:`_WINDOW` instructions, so a program of 10⁶ instructions never becomes 10⁷ Python
  objects;
* **repeated periods are skipped** (steady-state fast-forward): a program of many identical
  tile groups (a BMM's batches, a GEMM's row tiles) reaches a state that recurs, up to a shift
  in time and position, every period of instructions. The loop records its (normalised) state
  at each fetch burst; when a state recurs and the timing columns repeat over what the next
  periods would read, it moves every time, position and counter on by whole periods at once
  (:func:`_event_loop`). The loop is deterministic, so this is exact: the same report as
  simulating every event (``fast_forward=False``; ``tests/test_vta_artifact.py``). A 256³ GEMM
  or a 12 × 512 × 512 × 64 BMM of 10⁶ instructions is timed in about 0.1 s.

Errors are the reference's, word for word and at the same point of the simulation: a failing
micro-op check (a hazard, an index out of bounds) is found once per distinct GEMM/ALU in
program order and raised when that instruction starts, as the reference raises it; an
over-full token queue when it overflows; a deadlock, leftover tokens or an engine running past
FINISH by the reference's end checks, with its messages (:func:`_check_end`); the run budget
(:class:`~.simulator.VTATimeoutError`) at the same event.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np

from heronlike.errors import VTADeadlockError, VTAProgramError, VTATokenError

from .hazards import check_acc_hazard, check_bounds, expand
from .isa import AluInsn, Engine, GemmInsn, MemId, Opcode, TokenQueue
from .program import UOP_BUFFER, Program
from .report import EngineStats, SimReport
from .timing import TimingParams

__all__ = ["ProgramColumns", "program_columns", "time_program_fast"]

#: events between two checks of the wall-clock budget
_CLOCK_EVERY = 1024
#: instructions whose per-instruction data the event loop holds as Python lists at a time
_WINDOW = 1 << 15
#: recorded states kept for steady-state detection (the table is cleared past it)
_MAX_SNAPSHOTS = 1 << 12

# heap entries are ints: (time << _T_SHIFT) | (seq << 3) | code
_SEQ_BITS = 40
_T_SHIFT = _SEQ_BITS + 3
_CODE_MASK = 7
_EV_BUS = 3  # + engine: 3, 4, 5 (codes 0, 1, 2: an engine's instruction is done)
_EV_FETCH_BUS = 6
_EV_FETCH_DONE = 7

# token queues (TokenQueue values): L2G 0, G2L 1, G2S 2, S2G 3; consumer engine of each
_CONSUMER = (1, 0, 2, 1)
_PRODUCER = (Engine.LOAD, Engine.COMPUTE, Engine.COMPUTE, Engine.STORE)
# (engine, flag) -> queue (isa.TOKEN_QUEUES): -1 where the engine has no such queue
_POP_PREV = np.array([-1, 0, 2])
_POP_NEXT = np.array([1, 3, -1])
_PUSH_PREV = np.array([-1, 1, 3])
_PUSH_NEXT = np.array([0, 2, -1])


@dataclass(frozen=True)
class ProgramColumns:
    """Per-instruction timing data of one program under one :class:`TimingParams`, as columns.

    Every array has one entry per instruction (length ``n``, program order): int8 for the
    engine, token queues and counter index, int64 for the rest.

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
        fail: (instruction, error) of the first GEMM/ALU, in program order, whose expanded
            micro-ops fail a check (an index out of its buffer, the accumulator hazard), or
            None; the simulation raises the error when that instruction starts, as the
            reference does.
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
    fail: tuple[int, VTAProgramError] | None = None

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
_OUT_COUNTER = COUNTERS.index("out_store_nbytes")
_COUNTER_OF_MEM = {MemId.INP: 0, MemId.WGT: 1, MemId.ACC: 2, MemId.ACC_8BIT: 2, MemId.UOP: 3}


def program_columns(
    program: Program, t: TimingParams, *, check_uops: bool = True
) -> ProgramColumns:
    """Engine, tokens, cost and counters of every instruction, vectorised (vta.md §4.3), read
    from the program's columns (:attr:`Program.table`).

    Costs are those of :func:`.timing.cost` (tested equal instruction by instruction).

    Args:
        program: a validated program (:meth:`Program.validate`).
        t: the cycle constants.
        check_uops: run the expanded micro-op checks (bounds, accumulator hazard) once per
            distinct GEMM/ALU and micro-op buffer state.

    A failing micro-op check is not raised here: it is :attr:`ProgramColumns.fail`.
    """
    cfg = program.config
    tab = program.table
    n = tab.n
    engine = np.empty(n, np.int8)
    pre = np.empty(n, np.int64)
    beats = np.empty(n, np.int64)
    dma_bytes = np.empty(n, np.int64)
    counter = np.empty(n, np.int8)
    gemm_uops = np.empty(n, np.int64)
    alu_uops = np.empty(n, np.int64)
    queues = {f: np.empty(n, np.int8) for f in ("pop_prev", "pop_next", "push_prev", "push_next")}
    uop_load_at = np.empty(n, np.bool_)  # non-no-op UOP loads (they change the micro-op buffer)
    elem_of = np.zeros(len(MemId), np.int64)
    cnt_of = np.full(len(MemId), -1, np.int64)
    row_of = np.full(len(MemId), t.read_row_overhead, np.int64)
    for m in MemId:
        elem_of[m] = cfg.elem_bytes(m.name)
        cnt_of[m] = _COUNTER_OF_MEM.get(m, -1)
    row_of[MemId.UOP] = t.uop_row_overhead
    flag_queues = {"pop_prev": _POP_PREV, "pop_next": _POP_NEXT}
    flag_queues.update(push_prev=_PUSH_PREV, push_next=_PUSH_NEXT)
    for lo in range(0, n, _CHUNK):  # the formulas of timing.mem_cost and loop_cost, in chunks
        sl = slice(lo, min(n, lo + _CHUNK))
        k = {f: col[sl] for f, col in tab.cols.items()}
        op, mt = k["opcode"], k["memory_type"]
        store, load = op == Opcode.STORE, op == Opcode.LOAD
        e = np.ones(len(op), np.int8)
        e[load & ((mt == MemId.INP) | (mt == MemId.WGT))] = 0
        e[store] = 2
        engine[sl] = e
        for f, table in flag_queues.items():
            queues[f][sl] = np.where(k[f] != 0, table[e], -1)
        # LOAD/STORE
        y, x = k["y_size"].astype(np.int64), k["x_size"].astype(np.int64)
        mem = store | load
        live = mem & (y != 0) & (x != 0)
        elem = np.where(store, cfg.elem_bytes("OUT"), elem_of[mt])
        row_bytes = x * elem
        y0, y1, x0, x1 = (k[f] for f in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"))
        n_pad = np.add(y0, y1, dtype=np.int64)
        n_pad += y
        n_pad *= np.add(x0, x1, dtype=np.int64) + x
        n_pad -= y * x
        row = np.where(store, t.write_row_overhead, row_of[mt])
        m_pre = t.dma_latency + y * row + n_pad * t.pad_cycles_per_elem
        beats[sl] = np.where(live, y * (-(-row_bytes // cfg.bus_bytes)), 0)
        dma_bytes[sl] = np.where(live, y * row_bytes, 0)
        counter[sl] = np.where(store, _OUT_COUNTER, np.where(mem, cnt_of[mt], -1))
        uop_load_at[sl] = live & load & (mt == MemId.UOP)
        # GEMM/ALU
        gemm, alu = op == Opcode.GEMM, op == Opcode.ALU
        io_ii = k["iter_out"].astype(np.int64) * k["iter_in"]
        n_uops = io_ii * np.maximum(k["uop_end"].astype(np.int64) - k["uop_bgn"], 0)
        refill = t.loop_refill * (io_ii - 1)
        per_alu = np.where(k["use_imm"] != 0, t.alu_imm_cycles_per_uop, t.alu_cycles_per_uop)
        cost = np.where(
            gemm,
            t.gemm_fill + t.gemm_cycles_per_uop * n_uops + refill,
            t.alu_fill + per_alu * n_uops + refill,
        )
        loop_live = (gemm | alu) & (n_uops != 0)
        pre[sl] = np.where(live, m_pre, np.where(loop_live, cost, t.sync_cycles))
        gemm_uops[sl] = np.where(gemm & (k["reset"] == 0), n_uops, 0)
        alu_uops[sl] = np.where(alu, n_uops, 0)

    loops: dict[str, tuple[np.ndarray, list[np.ndarray]]] = {}
    if check_uops:
        c = tab.i64
        op = tab.cols["opcode"]
        names = ("dst_factor_out", "dst_factor_in", "src_factor_out", "src_factor_in")
        for kind, opcode, extra in (
            ("gemm", Opcode.GEMM, ("wgt_factor_out", "wgt_factor_in")),
            ("alu", Opcode.ALU, ("use_imm",)),
        ):
            idx = np.flatnonzero(op == opcode)
            if idx.size:
                fields = ("reset", "uop_bgn", "uop_end", "iter_out", "iter_in", *names, *extra)
                loops[kind] = (idx, [c(f, idx) for f in fields])
    fail = _check_uops(program, loops, uop_load_at) if loops else None
    return ProgramColumns(
        engine=engine,
        pre=pre,
        beats=beats,
        **queues,
        dma_bytes=dma_bytes,
        counter=counter,
        gemm_uops=gemm_uops,
        alu_uops=alu_uops,
        fail=fail,
    )


#: instructions per chunk of :func:`program_columns`' vectorised pass
_CHUNK = 1 << 16


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
    loops: dict[str, tuple[np.ndarray, list[np.ndarray]]],
    uop_load_at: np.ndarray,
) -> tuple[int, VTAProgramError] | None:
    """The expanded micro-op checks of the reference (``_Run._start``), once per distinct
    (GEMM/ALU fields, micro-op buffer state). The micro-op buffer a GEMM/ALU sees is the one
    left by the UOP loads before it in program order: they run on the same in-order engine.

    Returns:
        (instruction, error) of the first failing one in program order (checked in that
        order), or None.
    """
    cfg = program.config
    tab = program.table
    loads = np.flatnonzero(uop_load_at)
    # (version, kind, first pc) of every distinct key, in version order; a GEMM/ALU's version
    # is the number of UOP loads before it
    todo = []
    for kind, (idx, key_cols) in loops.items():
        version = np.searchsorted(loads, idx)
        cols = [version, *key_cols]
        m = len(idx)
        # a row equal to one of the few before it is no first occurrence: drop those first
        # (exact), then find the distinct rows among the rest
        keep = np.ones(m, bool)
        for d in range(1, 5):
            if m <= d:
                break
            eq = cols[0][d:] == cols[0][:-d]
            for col in cols[1:]:
                eq &= col[d:] == col[:-d]
            keep[d:] &= ~eq
        cand = np.flatnonzero(keep)
        first = cand[_distinct_rows(np.stack([col[cand] for col in cols], axis=1))]
        todo += [(int(version[j]), kind, int(idx[j])) for j in first]
    todo.sort(key=lambda r: (r[0], r[2]))
    uop = np.zeros((cfg.depth("UOP"), 3), np.int64)
    ubase = program.buffers[UOP_BUFFER].elem_base
    l_sram = tab.i64("sram_base", loads)
    l_dram = tab.i64("dram_base", loads) - ubase
    l_x = tab.i64("x_size", loads)
    applied = 0
    for ver, kind, pc in todo:
        while applied < ver:
            lo, sb, x = int(l_dram[applied]), int(l_sram[applied]), int(l_x[applied])
            uop[sb : sb + x] = program.uops[lo : lo + x]
            applied += 1
        insn = tab.instruction(pc)
        assert isinstance(insn, GemmInsn | AluInsn)
        dst, src, wgt = expand(insn, uop)
        try:
            check_bounds(insn, dst, src, wgt, cfg)
            if kind == "gemm":
                check_acc_hazard(dst)
        except VTAProgramError as exc:
            return pc, exc
    return None


def time_program_fast(
    program: Program,
    timing: TimingParams | None = None,
    *,
    timeout_s: float | None = None,
    max_events: int | None = None,
    fast_forward: bool = True,
) -> SimReport:
    """Timing-only simulation: the report ``simulate(program, timing_only=True)`` gives.

    Args:
        program: the program; validated first (:meth:`Program.validate`, cached).
        timing: cycle constants (default :meth:`TimingParams.pynq_hls`).
        timeout_s: wall-clock budget in seconds for the event loop (checked every 1024
            events), None for none.
        max_events: budget of simulation events (about 1–2 per instruction plus 2 per fetch
            burst, skipped ones included), None for none.
        fast_forward: skip repeated steady-state periods (module docstring); False simulates
            every event (the same report, slower).

    Returns:
        the :class:`~.report.SimReport` (cycles, per-engine busy/stall cycles, DMA bytes in
        bytes, GOPS), equal to the reference simulator's.

    Raises:
        VTAFieldError, VTAProgramError, VTAHazardError, VTADeadlockError, VTATokenError: exactly
            as :func:`~.simulator.simulate` (same type, same message, raised at the same point
            of the simulation; ``tests/test_vta_timing.py``).
        VTATimeoutError: the budget ran out.
    """
    program.validate()
    t = timing or TimingParams.pynq_hls()
    start = time.perf_counter()
    deadline = None if timeout_s is None else start + timeout_s
    cols = program_columns(program, t)
    return _event_loop(program, cols, t, deadline, max_events, fast_forward)


def _overflow(pc: int, q: int, depth: int) -> VTATokenError:
    """The reference's error for a token queue over its depth (``_Run._done``)."""
    return VTATokenError(
        f"instruction {pc}: token queue {TokenQueue(q).name} holds more than {depth} tokens"
    )


def _check_end(
    program: Program,
    cols: ProgramColumns,
    t: TimingParams,
    held: list[int],
    pos: list[int],
    tokens: list[int],
    fetch_blocked: int,
    fetch_pc: int,
    finish_time: int,
    last_done: list[int],
) -> None:
    """The reference's end checks (``_Run._check_end``) with its messages, from the final state
    (instruction indices and engine counts absolute).

    Raises:
        VTADeadlockError: an engine waits for a token (or fetch for a queue slot) at the end,
            or FINISH never ran.
        VTATokenError: tokens left over, or an engine that ran after FINISH.
    """
    stuck = []
    pushed = None
    for e in Engine:
        pc = held[e]
        if pc < 0:
            continue
        if pushed is None:  # pushes per queue by the instructions done (in order, per engine)
            pushed = [0, 0, 0, 0]
            for e2 in range(3):
                done = np.flatnonzero(cols.engine == e2)[: pos[e2] - (held[e2] >= 0)]
                for col in (cols.push_prev, cols.push_next):
                    counts = np.bincount(col[done] + 1, minlength=5)
                    for q in range(4):
                        pushed[q] += int(counts[q + 1])
        pops = [int(c[pc]) for c in (cols.pop_prev, cols.pop_next) if c[pc] >= 0]
        waits = [TokenQueue(q) for q in pops if tokens[q] == 0]
        name = type(program.table.instruction(pc)).__name__
        stuck.append(
            f"the {e.name.lower()} engine waits at instruction {pc} ({name}) for a token on "
            + ", ".join(
                f"{q.name} (the {_PRODUCER[q].name.lower()} engine pushed {pushed[q]} in all)"
                for q in waits
            )
        )
    if fetch_blocked >= 0:
        stuck.append(
            f"fetch waits at instruction {fetch_pc} for a slot in the full "
            f"{Engine(fetch_blocked).name.lower()} command queue ({t.cmd_queue_depth} deep)"
        )
    if stuck or finish_time < 0:
        raise VTADeadlockError("VTA deadlock: " + "; ".join(stuck or ["FINISH never ran"]))
    left = {q.name: k for q, k in zip(TokenQueue, tokens, strict=True) if k}
    if left:
        raise VTATokenError(f"tokens left in queues at FINISH (pushed, never popped): {left}")
    late = [e.name.lower() for e in Engine if last_done[e] > finish_time]
    if late:
        raise VTATokenError(
            f"the {', '.join(late)} engine(s) still ran after FINISH at cycle "
            f"{finish_time}: the program does not wait for them before FINISH"
        )


def _periodic_until(cols: tuple[np.ndarray, ...], start: int, period: int, limit: int) -> int:
    """The first ``x`` in ``[start, limit)`` where some column differs from ``x - period``
    (``limit`` if none): the stream is periodic with ``period`` on ``[start - period, x)``.
    Scans in growing chunks, so a short periodic run costs little."""
    x, step = start, 1024
    while x < limit:
        hi = min(limit, x + step)
        neq = cols[0][x:hi] != cols[0][x - period : hi - period]
        for c in cols[1:]:
            neq |= c[x:hi] != c[x - period : hi - period]
        if neq.any():
            return x + int(np.argmax(neq))
        x, step = hi, step * 2
    return limit


def _event_loop(
    program: Program,
    cols: ProgramColumns,
    t: TimingParams,
    deadline: float | None,
    max_events: int | None,
    fast_forward: bool = True,
    stats: dict[str, int] | None = None,
) -> SimReport:
    """The reference event loop (:class:`.simulator._Run`) on flat lists; see its docstrings
    for each step. Every event is scheduled in the reference's order, so ties on the heap and
    on the memory port break the same way.

    Per-instruction data lives in Python lists for a window of :data:`_WINDOW` instructions
    (instruction indices in the state are relative to the window's first one, ``B``); the
    window slides as fetch advances. With ``fast_forward``, the state is recorded each time
    fetch issues a burst (normalised: times relative to now, instruction indices relative to
    fetch's position, sequence numbers relative to the counter; an engine's last completion
    time, read only by the end checks, is left out); when a recorded state recurs
    ``P`` instructions later and the timing columns are periodic with period ``P`` over what
    the next ``m`` repetitions would read, those ``m`` periods are skipped: every time,
    index, sequence number and counter moves on by ``m`` times its change over one period.
    The loop is deterministic, so the result is the one simulating every event gives.

    ``stats``, if given, receives ``skipped_events`` and ``jumps`` (for tests).
    """
    from .simulator import VTATimeoutError

    cfg = program.config
    n = program.n_instructions
    eng_np = cols.engine
    total_np = cols.pre + cols.beats
    code_np = np.where(cols.beats > 0, _EV_BUS + eng_np, eng_np)
    # an instruction's start schedules its event at now + pre: key offset (pre << shift) | code
    small_pre = not n or int(cols.pre.max()) < 1 << (62 - _T_SHIFT)
    skey_np = (cols.pre << _T_SHIFT) | code_np if small_pre else None
    sig_cols = (
        eng_np,
        cols.pre,
        cols.beats,
        cols.pop_prev,
        cols.pop_next,
        cols.push_prev,
        cols.push_next,
    )

    heap: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0  # scheduling order, in steps of 8 (the low 3 bits hold the event code)
    tokens = [0, 0, 0, 0]
    tq_depth = t.token_queue_depth
    depth = t.cmd_queue_depth
    burst = t.fetch_burst
    fetch_latency = t.fetch_latency
    fbytes, bus_bytes = t.fetch_bytes_per_insn, cfg.bus_bytes
    # engines (pos, avail: engine instructions dequeued / fetched, relative to the window)
    pos = [0, 0, 0]
    avail = [0, 0, 0]
    held = [-1, -1, -1]  # window index of the dequeued instruction
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

    # the window: lists for instructions [B, B + w_len), indices relative to B
    B = 0
    cB = [0, 0, 0]  # instructions of each engine before B
    w_len = n_rel = last = 0
    engine: list[int] = []
    beats: list[int] = []
    total: list[int] = []
    start_key: list[int] = []
    pop_a: list[int] = []
    pop_b: list[int] = []
    push_a: list[int] = []
    push_b: list[int] = []
    pcs: list[list[int]] = [[], [], []]
    cum0: list[int] = []
    cum1: list[int] = []
    cum2: list[int] = []
    slack = 2 * burst + 2
    fail = cols.fail
    fail_at = -1  # window index of the instruction whose micro-op check fails
    periodic_end = n - 1 if fail is None else min(n - 1, fail[0])

    def rebase(new_b: int, min_len: int = 0) -> None:
        """Move the window to start at instruction ``new_b`` (≥ B): convert the state."""
        nonlocal B, w_len, n_rel, last, engine, beats, total, start_key, pop_a, pop_b
        nonlocal push_a, push_b, cum0, cum1, cum2, fetch_pc, f_lo, f_hi, fail_at
        d = new_b - B
        if d:
            seg = eng_np[B:new_b]
            dc = [int(np.count_nonzero(seg == e)) for e in range(3)]
            for e in range(3):
                if held[e] >= 0:
                    held[e] -= d
                pos[e] -= dc[e]
                avail[e] -= dc[e]
                cB[e] += dc[e]
            fetch_pc -= d
            if f_lo >= 0:
                f_lo -= d
                f_hi -= d
            B = new_b
        hi = min(n, B + max(_WINDOW, min_len))
        sl = slice(B, hi)
        e_sl = eng_np[sl]
        engine = e_sl.tolist()
        beats = cols.beats[sl].tolist()
        total = total_np[sl].tolist()
        if skey_np is not None:
            start_key = skey_np[sl].tolist()
        else:
            start_key = [
                (p << _T_SHIFT) | c
                for p, c in zip(cols.pre[sl].tolist(), code_np[sl].tolist(), strict=True)
            ]
        pop_a, pop_b = cols.pop_prev[sl].tolist(), cols.pop_next[sl].tolist()
        push_a, push_b = cols.push_prev[sl].tolist(), cols.push_next[sl].tolist()
        for e in range(3):
            pcs[e] = np.flatnonzero(e_sl == e).tolist()
        cum0, cum1, cum2 = (np.concatenate([[0], np.cumsum(e_sl == e)]).tolist() for e in range(3))
        w_len, n_rel, last = hi - B, n - B, n - 1 - B
        fail_at = fail[0] - B if fail is not None else -1

    def live_lo() -> int:
        """The lowest window index the simulation can still read."""
        lo = fetch_pc if f_lo < 0 else min(fetch_pc, f_lo)
        for e in range(3):
            if held[e] >= 0:
                lo = min(lo, held[e])
            elif pos[e] < len(pcs[e]):
                lo = min(lo, pcs[e][pos[e]])
        return lo

    def fetch(now: int) -> None:
        nonlocal seq, fetch_pc, f_lo, f_hi, fetch_blocked, fetch_block_since, fetch_stalled
        nonlocal fetch_busy
        if f_lo >= 0 or fetch_pc >= n_rel:
            return
        lo = fetch_pc
        hi = lo + burst
        if hi > n_rel:
            hi = n_rel
        if queued[0] + burst > depth or queued[1] + burst > depth or queued[2] + burst > depth:
            hi = lo  # a queue may fill: walk the burst as the reference does
            extra = [0, 0, 0]
            while hi < n_rel and hi - lo < burst:
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
        if pc == fail_at:  # its micro-op check fails: the reference raises as it starts
            assert fail is not None
            exc = fail[1]
            exc.args = (f"instruction {fail[0]}: {exc.args[0]}",)
            raise exc
        seq += 8
        push(heap, (now << _T_SHIFT) + start_key[pc] + seq)

    # steady-state detection: normalised state -> where and when it was seen
    seen: dict[tuple, tuple] = {}

    def state_key(now: int) -> tuple:
        base = fetch_pc
        hb = (now << _T_SHIFT) + seq + 8
        c0, c1, c2 = cum0[base], cum1[base], cum2[base]
        return (
            tuple(sorted([k - hb for k in heap])),
            *tokens,
            *queued,
            *running,
            *(h - base if h >= 0 else None for h in held),
            *(held_since[e] - now if held[e] >= 0 and not running[e] else None for e in range(3)),
            pos[0] - c0,
            pos[1] - c1,
            pos[2] - c2,
            avail[0] - c0,
            avail[1] - c1,
            avail[2] - c2,
            bus_free - now if bus_free > now else 0,
            f_lo - base if f_lo >= 0 else None,
            f_hi - base if f_lo >= 0 else None,
            fetch_blocked,
            fetch_block_since - now if fetch_blocked >= 0 else None,
            fetch_stalled,
        )

    rebase(0)
    fetch(0)
    stop = max_events + 1 if max_events is not None else 1 << 62  # first event over budget
    next_check = 1 if deadline is not None else stop
    events = 0
    now = 0
    snap_pc = -1
    skipped = jumps = 0
    while heap:
        if fetch_pc != snap_pc:  # fetch issued a burst: slide the window, look for a period
            if fetch_pc + slack > w_len and B + w_len < n:
                lo = live_lo()
                rebase(B + lo, fetch_pc - lo + 2 * slack)
            snap_pc = fetch_pc
            if fast_forward and finish_time < 0:
                key = state_key(now)
                here = B + fetch_pc
                cabs = (cB[0] + cum0[fetch_pc], cB[1] + cum1[fetch_pc], cB[2] + cum2[fetch_pc])
                done = tuple(cB[e] + pos[e] - (held[e] >= 0) for e in range(3))
                prev = seen.get(key)
                L = B + live_lo()
                seen[key] = (
                    here,
                    cabs,
                    done,
                    L,
                    now,
                    seq,
                    events,
                    (*busy, *token_stall, *bus_stall),
                    (bus_beats, fetch_busy, fetch_block_cycles, fetch_bus_stall),
                )
                if len(seen) > _MAX_SNAPSHOTS:
                    seen.clear()
                if prev is not None:
                    p_here, p_cabs, p_done, p_L, p_now, p_seq, p_events, p_eng, p_fetch = prev
                    period = here - p_here
                    d_events = events - p_events
                    e_end = _periodic_until(sig_cols, p_L + period, period, periodic_end)
                    m = (e_end - here - 1) // period
                    if d_events > 0:
                        m = min(m, (stop - 1 - events) // d_events)
                    if m >= 1:
                        dt, ds = m * (now - p_now), m * (seq - p_seq)
                        shift = (dt << _T_SHIFT) + ds
                        heap[:] = [k + shift for k in heap]  # the heap's order is kept
                        now += dt
                        seq += ds
                        events += m * d_events
                        skipped += m * d_events
                        jumps += 1
                        eng = (*busy, *token_stall, *bus_stall)
                        for e in range(3):
                            pe = m * (cabs[e] - p_cabs[e])
                            pos[e] += pe
                            avail[e] += pe
                            if held[e] >= 0:
                                held[e] += m * period
                            held_since[e] += dt
                            if done[e] != p_done[e]:  # it finished instructions each period
                                last_done[e] += dt
                            busy[e] += m * (eng[e] - p_eng[e])
                            token_stall[e] += m * (eng[3 + e] - p_eng[3 + e])
                            bus_stall[e] += m * (eng[6 + e] - p_eng[6 + e])
                        bus_free += dt
                        bus_beats += m * (bus_beats - p_fetch[0])
                        fetch_busy += m * (fetch_busy - p_fetch[1])
                        fetch_block_cycles += m * (fetch_block_cycles - p_fetch[2])
                        fetch_bus_stall += m * (fetch_bus_stall - p_fetch[3])
                        fetch_block_since += dt
                        fetch_pc += m * period
                        if f_lo >= 0:
                            f_lo += m * period
                            f_hi += m * period
                        span = fetch_pc - (L - B + m * period)
                        rebase(L + m * period, span + 2 * slack)
                        snap_pc = fetch_pc
                        seen.clear()
                        if deadline is not None:
                            next_check = min(events + 1, stop)
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
                    raise _overflow(B + pc, q, tq_depth)
                c = _CONSUMER[q]
                if not running[c]:
                    try_(c, now)
            q = push_b[pc]
            if q >= 0:
                tokens[q] += 1
                if tokens[q] > tq_depth:
                    raise _overflow(B + pc, q, tq_depth)
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

    if stats is not None:
        stats.update(skipped_events=skipped, jumps=jumps)
    # the reference's end checks (_Run._check_end), with its messages
    if (
        max(held) >= 0
        or fetch_blocked >= 0
        or finish_time < 0
        or any(tokens)
        or max(last_done) > finish_time
    ):
        _check_end(
            program,
            cols,
            t,
            [B + h if h >= 0 else -1 for h in held],
            [cB[e] + pos[e] for e in range(3)],
            tokens,
            fetch_blocked,
            B + fetch_pc,
            finish_time,
            last_done,
        )
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
            int(np.count_nonzero(eng_np == e)),
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
