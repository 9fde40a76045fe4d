"""benchmarks/peak.py: the register-only FMA / VNNI loops compile, run and count operations.

Two checks a skeptic can rerun: the emitted loop of every kernel holds one multiply
instruction per accumulator, each on its own register (the bug this file was written for: gcc
merged 12 accumulators with equal values into one dependency chain while the code counted 12
instructions per iteration), and no measured figure exceeds what the core's 2 FMA ports could
issue at its measured clock.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import peak  # noqa: E402

#: kernel -> the mnemonic of its one instruction, and its register width
MULTIPLY = {
    "fma_f32_avx2": (r"vfmadd(132|213|231)ps", "ymm"),
    "fma_f32_avx512": (r"vfmadd(132|213|231)ps", "zmm"),
    "vnni_u8s8_avx512": (r"vpdpbusd", "zmm"),
    "vnni_u8s8_avx": (r"vpdpbusd", "ymm"),
    "pmaddwd_s16_avx2": (r"vpmaddwd", "ymm"),
    "pmaddwd_s16_avx512": (r"vpmaddwd", "zmm"),
    "amx_u8s8_tile": (r"tdpbusd", "tmm"),
}
FMA_PORTS = 2  # FMA / VNNI instructions a core issues per cycle at most (Zen 3/4, Intel)
TILE_RATE = 1 / 16  # tdpbusd a core completes per cycle at most (Sapphire/Emerald Rapids)
SLACK = 1.25  # clock measured on integer adds vs. under vector load; the merged chain read 1.5x
ROUNDS = 3
_VREG = re.compile(r"%[xyz]mm(\d+)")


def _gcc_knows(flags: str) -> bool:
    cmd = ["gcc", *flags.split(), "-x", "c", "-S", "-o", "/dev/null", "/dev/null"]
    try:
        return subprocess.run(cmd, capture_output=True).returncode == 0
    except OSError:
        return False


def _function(asm: str, name: str) -> list[str]:
    """The instructions (``mnemonic operands``) and labels (``.L7:``) of function ``name``."""
    lines = asm.splitlines()
    start = lines.index(f"{name}:")
    out = []
    for line in lines[start + 1 :]:
        line = line.split("#", 1)[0].strip()
        if line.startswith(".size") or line.startswith(".cfi_endproc"):
            break
        if line and (line.endswith(":") or not line.startswith(".")):
            out.append(line.replace("{vex} ", ""))
    return out


def _loops(body: list[str]) -> list[list[str]]:
    """The instructions of each loop: from a label to a later jump back to it."""
    loops = []
    for j, line in enumerate(body):
        m = re.match(r"j\w+\s+(\.L\w+)$", line)
        if m and f"{m.group(1)}:" in body[:j]:
            i = body.index(f"{m.group(1)}:")
            loops.append([x for x in body[i + 1 : j + 1] if not x.endswith(":")])
    return loops


def _operands(instr: str) -> list[str]:
    parts = instr.split(None, 1)
    return re.split(r",\s*(?![^()]*\))", parts[1]) if len(parts) > 1 else []


def timed_loop(asm: str, name: str) -> list[str]:
    """The innermost loop of ``name``'s OpenMP body that holds its multiply instructions: the
    shortest span from a label to a jump back to it (a longer one is an outer loop, or just a
    block laid out after the one it jumps back to)."""
    mnemonic = MULTIPLY[name][0]
    loops = [
        loop
        for loop in _loops(_function(asm, f"{name}._omp_fn.0"))
        if any(re.match(mnemonic, x) for x in loop)
    ]
    assert loops, f"no loop with {mnemonic} in {name}"
    return min(loops, key=len)


def check_independent_accumulators(loop: list[str], name: str) -> None:
    """``ACCUMULATORS`` multiply instructions per iteration, each accumulating into its own
    register that nothing else in the loop reads or writes: ``ACCUMULATORS`` dependency chains,
    with loop-invariant operands."""
    mnemonic, width = MULTIPLY[name]
    muls = [x for x in loop if re.match(mnemonic, x)]
    assert len(muls) == peak.ACCUMULATORS, loop
    dests = set()
    for x in muls:
        dest = _operands(x)[-1]
        assert re.fullmatch(rf"%{width}\d+", dest), x  # a register, of the kernel's width
        dests.add(dest[4:])
    assert len(dests) == peak.ACCUMULATORS, muls
    for x in loop:
        # a multiply's sources: no accumulator (its own is its destination); any other
        # instruction (a register move, ...): no accumulator at all
        srcs = _operands(x)[:-1] if x in muls else _operands(x)
        assert not {r for s in srcs for r in _VREG.findall(s)} & dests, x


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
@pytest.mark.parametrize("name", sorted(peak.KERNELS))
def test_loop_has_one_instruction_per_accumulator(name: str, opt: str) -> None:
    """Needs only a gcc that knows the kernel's -m flags, not a CPU that has them."""
    if not _gcc_knows(peak.KERNELS[name][1]):
        pytest.skip(f"gcc does not know {peak.KERNELS[name][1]}")
    loop = timed_loop(peak.compile_asm([name], opt), name)
    check_independent_accumulators(loop, name)


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_amx_loop_has_one_tdpbusd_per_accumulator_tile(opt: str) -> None:
    """The AMX loop: ``TILE_ACCUMULATORS`` ``tdpbusd``, each into its own tile, which no other
    one reads; the tiles are configured before the loop. Built here, run only on AMX."""
    name = "amx_u8s8_tile"
    if not _gcc_knows(peak.TILE_KERNELS[name][1]):
        pytest.skip("gcc does not know -mamx-int8")
    asm = peak.compile_asm([name], opt)
    loop = timed_loop(asm, name)
    muls = [x for x in loop if x.startswith("tdpbusd")]
    assert len(muls) == peak.TILE_ACCUMULATORS, loop
    dests = [_operands(x)[-1] for x in muls]
    assert len(set(dests)) == peak.TILE_ACCUMULATORS
    assert not {s for x in muls for s in _operands(x)[:-1]} & set(dests)
    body = _function(asm, f"{name}._omp_fn.0")
    assert any(x.startswith("ldtilecfg") for x in body[: body.index(loop[0])])


def test_all_kernels_in_one_file_keep_their_loops() -> None:
    """measure_peaks compiles the kernels this CPU has into one library, with all their flags."""
    names = [n for n, k in peak.KERNELS.items() if _gcc_knows(k[1])]
    asm = peak.compile_asm(names)
    for name in names:
        check_independent_accumulators(timed_loop(asm, name), name)


def _kernels_here() -> set[str]:
    """The vector and tile kernels whose CPU flags this CPU has."""
    flags = peak.cpu_flags()
    kernels = {**peak.KERNELS, **peak.TILE_KERNELS}
    return {n for n, k in kernels.items() if set(k[0]) <= flags}


def test_measures_every_kernel_this_cpu_has() -> None:
    expected = _kernels_here()
    if not expected:
        pytest.skip("no FMA or VNNI on this CPU")
    rows = peak.measure_peaks(threads=[1], repeats=1, seconds=0.02)
    assert {r["kernel"] for r in rows} == expected
    for r in rows:
        # between 1 and 64 vector instructions' worth of ops per ns on one core (a tile
        # instruction: 0.02 to 2): a loop the compiler removed (too fast) or a mis-count (too
        # slow) fails
        name = str(r["kernel"])
        per_ns = float(r["ops_per_s"]) / 1e9 / peak.ops_per_instruction(name)
        low, high = (0.02, 2) if name in peak.TILE_KERNELS else (0.5, 64)
        assert low < per_ns < high, r


def test_measures_only_the_kernels_asked_for() -> None:
    here = sorted(_kernels_here())
    if not here:
        pytest.skip("no FMA or VNNI on this CPU")
    missing = sorted(set(peak.KERNELS) - set(here))  # asked for, but this CPU lacks it
    rows = peak.measure_peaks(threads=[1], repeats=1, seconds=0.02, kernels=[here[0], *missing])
    assert [r["kernel"] for r in rows] == [here[0]]
    with pytest.raises(ValueError, match="unknown peak kernels"):
        peak.measure_peaks(threads=[1], kernels=["vpdpbusd_zmm"])


def test_parallel_launch_is_measured_and_one_thread_forks_nothing() -> None:
    """The fork and join of TVM's pool: positive and well under a millisecond on 2 threads,
    and on 1 thread (the loop runs inline, nothing to wake) far below it."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: no second thread to launch")
    two = peak.measure_parallel_launch(2, calls=500, repeats=3)
    one = peak.measure_parallel_launch(1, calls=500, repeats=3)
    assert 0 < one < two < 1e-3
    with pytest.raises(ValueError, match="threads must be"):
        peak.measure_parallel_launch(0)


def test_core_round_trip_waits_for_the_other_core() -> None:
    """One cache line there and back between two pinned threads: at least two L2-to-L2
    transfers, so no fewer than 20 clock cycles (a loop that did not wait for the other thread
    would read 1-2 ns), and well under 100 µs (no time slice in between). Bad CPU pairs raise
    instead of spinning."""
    pair = peak.round_trip_cpus()
    if pair is None:
        pytest.skip("one core: no second CPU to reach")
    trip_ns = peak.core_round_trip_ns(pair, trips=500, chunks=5)
    cycle_ns = 1e9 / peak.measure_clock_hz(seconds=0.01, repeats=3)
    assert 20 * cycle_ns <= trip_ns < 1e5
    with pytest.raises(ValueError, match="two different CPUs"):
        peak.core_round_trip_ns((pair[0], pair[0]))
    with pytest.raises(ValueError, match="could not start a thread"):
        peak.core_round_trip_ns((pair[0], 4096))
    with pytest.raises(ValueError, match="must be >= 1"):
        peak.core_round_trip_ns(pair, trips=0)


def test_a_peak_probe_reads_what_the_peak_table_reads() -> None:
    """The probe the harness reads before each turn runs the table's kernel: on one thread its
    readings agree with :func:`peak.measure_peaks` within what a shared machine moves in a few
    seconds; a kernel this CPU lacks is a ValueError, an unknown one a KeyError."""
    names = sorted(_kernels_here() & set(peak.KERNELS))
    if not names:
        pytest.skip("no FMA or VNNI on this CPU")
    name = names[0]
    probe = peak.peak_probe(name, 1)
    readings = [probe() for _ in range(5)]
    (row,) = peak.measure_peaks(threads=[1], repeats=3, seconds=0.05, kernels=[name])
    assert 0.7 < statistics.median(readings) / float(row["ops_per_s"]) < 1.3, (readings, row)
    lacking = sorted(set(peak.KERNELS) - _kernels_here())
    if lacking:
        with pytest.raises(ValueError, match="which this CPU lacks"):
            peak.peak_probe(lacking[0], 1)
    with pytest.raises(KeyError):
        peak.peak_probe("no_such_kernel", 1)


def test_measured_peak_is_physically_possible() -> None:
    """One core issues at most 2 FMA / VNNI instructions per cycle, so fp32 AVX2 FMA stays
    below 2 ports × 16 FLOP × clock (about 100 GFLOP/s at this Zen 3's 3.2 GHz). The merged
    chain counted 12 instructions per FMA latency (4 cycles): 3 per cycle, 1.5x the bound.

    The clock of this (virtual) machine moves (2.4 to 3.2 GHz seen), so each of ``ROUNDS``
    rounds reads it just before and just after the kernels and keeps the higher reading; the
    median of the rounds' instructions per cycle is checked, so one round disturbed by another
    process (slower kernels, or a clock read low) decides nothing. A tile kernel's
    ``tdpbusd`` completes at most once per 16 cycles (:data:`TILE_RATE`)."""
    names = sorted(_kernels_here())
    if not names:
        pytest.skip("no FMA or VNNI on this CPU")
    per_cycle: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(ROUNDS):
        before = peak.measure_clock_hz(seconds=0.02, repeats=3)
        rows = peak.measure_peaks(threads=[1], repeats=3, seconds=0.03)
        clock = max(before, peak.measure_clock_hz(seconds=0.02, repeats=3))
        assert 0.3e9 < clock < 7e9, clock
        for r in rows:
            ops = float(r["ops_per_s_per_core"])
            name = str(r["kernel"])
            per_cycle[name].append(ops / peak.ops_per_instruction(name) / clock)
    for name, ipc in per_cycle.items():
        bound = TILE_RATE if name in peak.TILE_KERNELS else FMA_PORTS
        assert statistics.median(ipc) < bound * SLACK, (name, ipc)


def test_memory_floor_reads_every_word_and_writes_every_line() -> None:
    """The memory floor's pass: the OR of what it read is the OR of every input word (so no
    line was skipped: each set bit sits in one word only, some in a thread's tail past its
    unrolled steps or at a boundary between threads' shares), and every output word holds the
    last pass's value."""
    import numpy as np

    data, out = peak.floor_buffer(64 * 37 + 8), peak.floor_buffer(64 * 5 + 1)
    assert data.nbytes == 64 * 38 and out.nbytes == 64 * 6
    # 4 lines a step: one thread's 38 lines are 9 steps and a tail of 2; two threads' 19, 4 and 3
    positions = [0, 9, 64, 150, 18 * 8, 19 * 8 - 1, 4 * 8 * 9 - 1, data.size - 1]
    for bit, i in enumerate(positions):
        data[i] = np.uint64(1) << np.uint64(bit)
    for threads in (1, 2, 3):
        seconds, word = peak.memory_floor_pass(data, out, threads, passes=3)
        assert seconds > 0
        assert word == int(np.bitwise_or.reduce(data)) == (1 << len(positions)) - 1
        assert (out == 3).all()
    with pytest.raises(ValueError, match="aligned"):
        peak.memory_floor_pass(data[1:], out, 1)


def test_memory_floor_grows_with_the_bytes_moved() -> None:
    """256 times the bytes cannot take less time, whatever cache level each size lands in."""
    small = peak.measure_memory_floor(16 * 1024, 16 * 1024, threads=1, samples=5)
    large = peak.measure_memory_floor(4 << 20, 4 << 20, threads=1, samples=5)
    assert 0 < small < large, (small, large)


#: :func:`test_waiting_for_idle_threads_outlasts_a_spinning_thread`'s checks, run in a fresh
#: interpreter: threads that earlier tests left in this one (a TVM pool's, runnable on a busy
#: core) would count as running
_IDLE_WAIT_CHECKS = """
import sys, threading, time
sys.path.insert(0, sys.argv[1])
from benchmarks import peak
if peak.running_threads() is None:
    sys.exit(3)
started = threading.Event()
def spin(seconds):
    started.set()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
worker = threading.Thread(target=spin, args=(0.06,))
worker.start()
started.wait()
waited = peak.wait_for_idle_threads()
assert not worker.is_alive() and waited is not None and 0.03 < waited < peak.IDLE_WAIT_MAX_S, waited
started.clear()
other = threading.Thread(target=spin, args=(0.3,))
other.start()
started.wait()
waited = peak.wait_for_idle_threads(ignore={other.native_id})
assert waited < 0.15, waited
other.join()
waited = peak.wait_for_idle_threads()
assert waited < 0.15, waited
"""


def test_waiting_for_idle_threads_outlasts_a_spinning_thread() -> None:
    """A thread that spins 60 ms keeps :func:`peak.wait_for_idle_threads` waiting until it
    ends; told to ignore it, the wait returns at once; with nothing spinning it returns
    within a few looks (in a fresh interpreter, whose only threads are the test's)."""
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", _IDLE_WAIT_CHECKS, root], capture_output=True, text=True
    )
    if done.returncode == 3:
        pytest.skip("no /proc/self/task: the threads' states cannot be read")
    assert done.returncode == 0, done.stderr


def test_a_peak_probe_leaves_no_thread_of_its_own_running() -> None:
    """The OpenMP threads of a reading spin on for milliseconds after it (7.7 ms on a Zen 4)
    and took the cores from the kernel the harness timed next: when a reading returns, no
    thread that was not running before it runs (only the caller's)."""
    names = sorted(_kernels_here() & set(peak.KERNELS))
    if not names:
        pytest.skip("no FMA or VNNI on this CPU")
    if peak.running_threads() is None:
        pytest.skip("no /proc/self/task: the threads' states cannot be read")
    threads = min(2, len(os.sched_getaffinity(0)))
    probe = peak.peak_probe(names[0], threads)
    for _ in range(3):
        before = peak.running_threads()
        assert probe() > 0
        assert peak.running_threads() <= before
