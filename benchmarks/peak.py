"""Measured compute peak of this CPU: register-only FMA and VNNI loops, so "% of peak" is measured
on each machine instead of read from a table of nominal clocks.

Each kernel keeps ``ACCUMULATORS`` independent accumulator registers busy with one instruction
kind, never touching memory inside the loop, so it runs at the core's issue rate for that
instruction. Operations are counted as the field counts them:

* ``fma_f32_avx2``   ``vfmadd213ps ymm``: 8 lanes × 2 = 16 FLOP per instruction;
* ``fma_f32_avx512`` ``vfmadd213ps zmm``: 16 lanes × 2 = 32 FLOP;
* ``vnni_u8s8_avx512`` ``vpdpbusd zmm``: 16 lanes × 4 products × 2 = 128 int8 OP (AVX512-VNNI,
  DL Boost);
* ``vnni_u8s8_avx`` ``vpdpbusd ymm`` (AVX-VNNI): 64 OP;
* ``pmaddwd_s16_avx2`` ``vpmaddwd ymm``: 8 lanes × 2 products × 2 = 32 OP, the u8 × s8 peak of
  a CPU without VNNI (``dlboost -general`` widens both operands to int16 and adds the pair
  sums with ``vpaddd``, which other ports issue);
* ``pmaddwd_s16_avx512`` ``vpmaddwd zmm`` (AVX-512BW): 64 OP;
* ``amx_u8s8_tile`` ``tdpbusd`` on AMX tiles: 16 × 16 × 64 × 2 = 32768 int8 OP (4 accumulator
  tiles; :func:`tile_kernel_source`).

Kernels the CPU lacks are skipped (checked with ``/proc/cpuinfo`` flags). Each kernel runs on
``threads`` OpenMP threads (default: 1 and every core this process may use), ``repeats`` times;
the figure is the median. The C source (see :func:`kernel_source`) is compiled here with
``gcc -O2 -fopenmp`` and the kernels' ``-m`` flags.

Usage::

    python benchmarks/peak.py                   # print a table
    python benchmarks/peak.py --csv benchmarks/results/peak.csv

Import :func:`measure_peaks` to put a measured peak beside a kernel's throughput in the same run.

The table also gives the clock (:func:`measure_clock_hz`) and each kernel's instructions per
cycle per core, which no core takes above its count of FMA / VNNI ports (2 on Zen 3 and 4 and on
Intel cores since Haswell).

The **parallel launch** (:func:`measure_parallel_launch`) is what TVM's thread pool takes to
start and join the threads of one parallel kernel: a kernel of a few microseconds pays it on
top of its compute floor.

The **core-to-core round trip** (:func:`core_round_trip_ns`) is the time one cache line takes
to go from one CPU to another and back: what the launch pays a few times over, and on a VM a
reading of where the hypervisor runs the vCPUs at that moment.

The **memory floor** (:func:`measure_memory_floor`) is the other side of a roofline: the time
this machine takes only to read a kernel's inputs once and write its outputs once (wide vector
loads and stores, nothing computed), repeated on the same buffers as the kernel is when it is
timed. ``max(operations / peak, memory floor)`` is then the fastest that kernel could run;
``benchmarks/suite.py`` reports each column's % of it. The table ends with the floor's
bandwidth at a few working-set sizes.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import datetime as dt
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from heronlike.host import cpu_flags, cpu_model

ACCUMULATORS = 12  # > latency (4-5 cycles) × ports (2): enough to hide the FMA latency

#: kernel name -> (cpuinfo flags needed, gcc -m flags, ops per instruction, vector type, setup
#: of the operands ``x`` and ``y``, the loop body's one instruction on accumulator ``%[a]`` as
#: a GCC inline-assembly template, AT&T operand order)
KERNELS: dict[str, tuple[tuple[str, ...], str, int, str, str, str]] = {
    "fma_f32_avx2": (
        ("avx2", "fma"),
        "-mavx2 -mfma",
        16,
        "__m256",
        "__m256 x = _mm256_set1_ps(1e-7f), y = _mm256_set1_ps(0.999f);",
        "vfmadd213ps %[x], %[y], %[a]",  # a = y * a + x
    ),
    "fma_f32_avx512": (
        ("avx512f",),
        "-mavx512f",
        32,
        "__m512",
        "__m512 x = _mm512_set1_ps(1e-7f), y = _mm512_set1_ps(0.999f);",
        "vfmadd213ps %[x], %[y], %[a]",
    ),
    "vnni_u8s8_avx512": (
        ("avx512_vnni",),
        "-mavx512f -mavx512vnni",
        128,
        "__m512i",
        "__m512i x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(2);",
        "vpdpbusd %[y], %[x], %[a]",  # a += u8 x · s8 y, 4 products per 32-bit lane
    ),
    "vnni_u8s8_avx": (
        ("avx_vnni",),
        "-mavx2 -mavxvnni",
        64,
        "__m256i",
        "__m256i x = _mm256_set1_epi8(1), y = _mm256_set1_epi8(2);",
        "%{vex%} vpdpbusd %[y], %[x], %[a]",  # {vex}: the AVX-VNNI encoding, not AVX512-VL
    ),
    "pmaddwd_s16_avx2": (
        ("avx2",),
        "-mavx2",
        32,
        "__m256i",
        "__m256i x = _mm256_set1_epi16(3), y = _mm256_set1_epi16(-5);",
        "vpmaddwd %[y], %[x], %[a]",  # a = pair sums of x · y: 2 int16 products per lane
    ),
    "pmaddwd_s16_avx512": (
        ("avx512bw",),
        "-mavx512f -mavx512bw",
        64,
        "__m512i",
        "__m512i x = _mm512_set1_epi16(3), y = _mm512_set1_epi16(-5);",
        "vpmaddwd %[y], %[x], %[a]",
    ),
}

#: AMX tile kernels: name -> (cpuinfo flags needed, gcc -m flags, ops per instruction, the
#: instruction): ``TILE_ACCUMULATORS`` independent ``16 x 16`` int32 accumulator tiles, each
#: updated from two of the four source tiles per iteration. One ``tdpbusd`` is 16 x 16 x 64
#: multiply-adds = 32768 int8 OP; a Sapphire Rapids core issues one per 16 cycles.
TILE_KERNELS: dict[str, tuple[tuple[str, ...], str, int, str]] = {
    "amx_u8s8_tile": (("amx_tile", "amx_int8"), "-mamx-tile -mamx-int8", 32768, "tdpbusd"),
}
#: accumulator tiles (tmm0-3) of a tile kernel; tmm4-7 hold the sources. Four chains cover the
#: tdpbusd latency (52 cycles) at its issue rate (one per 16 cycles)
TILE_ACCUMULATORS = 4

#: vector type -> how accumulator ``i`` starts, from the runtime value ``s`` (see
#: :func:`kernel_source`)
_INIT = {
    "__m256": "_mm256_set1_ps(s + {i}.0f)",
    "__m512": "_mm512_set1_ps(s + {i}.0f)",
    "__m256i": "_mm256_set1_epi32((int)s + {i})",
    "__m512i": "_mm512_set1_epi32((int)s + {i})",
}

#: dependent integer adds per iteration of the clock loop (see :func:`measure_clock_hz`)
CLOCK_CHAIN = 64
_ADDS = '"add %1, %0\\n\\t"' * CLOCK_CHAIN  # C string literals, concatenated by the compiler

_CLOCK_SOURCE = f"""
/* seconds for `iters` iterations of {CLOCK_CHAIN} dependent 1-cycle adds on one thread */
double clock_chain(long long iters) {{
    long long x = peak_seed_i, y = peak_seed_i + 1;
    double t0 = omp_get_wtime();
    for (long long it = 0; it < iters; ++it)
        __asm__ volatile({_ADDS} : "+r"(x) : "r"(y));
    double t1 = omp_get_wtime();
    peak_sink = x;
    return t1 - t0;
}}
"""

_PRELUDE = """
#include <immintrin.h>
#include <omp.h>
/* runtime values the compiler cannot see through: no accumulator is a known constant */
volatile float peak_seed = 1.0f;
volatile long long peak_seed_i = 1;
volatile long long peak_sink;
"""


def kernel_source(name: str) -> str:
    """The C function ``double <name>(long long iters, int threads)`` that times ``iters``
    iterations of the kernel's loop on ``threads`` OpenMP threads and returns the seconds.

    The loop body is one ``asm volatile`` block holding ``ACCUMULATORS`` copies of the kernel's
    instruction, one per accumulator ``a0`` … ``a11``, each a read-write register operand
    (``"+x"``: 12 accumulators and the operands ``x``, ``y`` fit in the 16 registers every
    AVX2 core has). So the compiler can neither merge the accumulators into fewer dependency
    chains (as it did when the body was intrinsics on accumulators with equal values) nor
    drop, reorder or move anything between the instructions; it only picks the registers.
    Each accumulator also starts from a different runtime value (read from a ``volatile``),
    and all are XOR-ed into a ``volatile`` sink after the loop. ``tests/test_peak.py`` reads
    the emitted loop and checks it holds ``ACCUMULATORS`` such instructions on as many
    registers, each one's own dependency chain.

    Raises:
        KeyError: no kernel ``name`` in :data:`KERNELS`.
    """
    _, _, _, vec, setup, body = KERNELS[name]
    init = _INIT[vec]
    decl = " ".join(f"{vec} a{i} = {init.format(i=i)};" for i in range(ACCUMULATORS))
    asm = "\n                ".join(
        '"' + body.replace("%[a]", f"%[a{i}]") + '\\n\\t"' for i in range(ACCUMULATORS)
    )
    outs = ", ".join(f'[a{i}] "+x"(a{i})' for i in range(ACCUMULATORS))
    sink = " ".join(f"acc ^= *(volatile long long *)&a{i};" for i in range(ACCUMULATORS))
    return f"""
/* seconds for `iters` iterations of {ACCUMULATORS} independent {name} on `threads` threads */
double {name}(long long iters, int threads) {{
    double t0 = 0, t1 = 0;
    #pragma omp parallel num_threads(threads)
    {{
        {setup}
        float s = peak_seed + (float)omp_get_thread_num();
        {decl}
        long long acc = 0;
        #pragma omp barrier
        #pragma omp master
        t0 = omp_get_wtime();
        for (long long it = 0; it < iters; ++it)
            __asm__ volatile(
                {asm}
                : {outs}
                : [x] "x"(x), [y] "x"(y));
        #pragma omp barrier
        #pragma omp master
        t1 = omp_get_wtime();
        {sink}
        #pragma omp critical
        peak_sink ^= acc;
    }}
    return t1 - t0;
}}
"""


def tile_kernel_source(name: str) -> str:
    """The C function ``double <name>(long long iters, int threads)`` of an AMX tile kernel
    (:data:`TILE_KERNELS`): each thread configures all eight tiles as 16 rows × 64 bytes
    (``ldtilecfg``, which also zeroes them), then times ``iters`` iterations of one ``asm
    volatile`` block of ``TILE_ACCUMULATORS`` instructions, ``tdpbusd`` into ``tmm0`` …
    ``tmm3`` from the pairs of ``tmm4``/``tmm5`` (A) and ``tmm6``/``tmm7`` (B): registers
    the compiler cannot allocate, so nothing can be merged. The process needs Linux's AMX
    permission first (:func:`heronlike.dla_targets.amx.request_amx_permission`).

    Raises:
        KeyError: no tile kernel ``name``.
    """
    instr = TILE_KERNELS[name][3]
    body = "\n                ".join(
        f'"{instr} %%tmm{6 + i // 2}, %%tmm{4 + i % 2}, %%tmm{i}\\n\\t"'
        for i in range(TILE_ACCUMULATORS)
    )
    return f"""
/* seconds for `iters` iterations of {TILE_ACCUMULATORS} independent {instr} on `threads` threads */
double {name}(long long iters, int threads) {{
    double t0 = 0, t1 = 0;
    #pragma omp parallel num_threads(threads)
    {{
        unsigned char config[64] = {{0}};
        config[0] = 1;  /* palette 1 */
        for (int t = 0; t < 8; ++t) {{
            config[16 + 2 * t] = 64;  /* bytes per row (u16, little-endian) */
            config[48 + t] = 16;  /* rows */
        }}
        _tile_loadconfig(config);
        #pragma omp barrier
        #pragma omp master
        t0 = omp_get_wtime();
        for (long long it = 0; it < iters; ++it)
            __asm__ volatile(
                {body}
                ::: "memory");
        #pragma omp barrier
        #pragma omp master
        t1 = omp_get_wtime();
        _tile_release();
    }}
    return t1 - t0;
}}
"""


#: the memory floor's C source (see :func:`measure_memory_floor`): 64-byte vectors (GCC vector
#: extensions, so the -m flags of :func:`_floor_flags` decide the instructions), four independent
#: OR chains over the input so the loads, not the ORs, set the pace; one thread runs outside any
#: OpenMP region (whose fork, join and critical section cost a quarter of a microsecond even on
#: one thread: more than a 512 x 16 GEMV kernel's whole call)
_FLOOR_SOURCE = """
#include <omp.h>
typedef unsigned long long floor_v __attribute__((vector_size(64), aligned(64)));
volatile long long floor_seed = 1;

/* one thread's share (lines [lo, hi) of `in`, [olo, ohi) of `out`) of a pass: the OR of what it
   read, four independent chains */
static floor_v floor_part(const floor_v *in, long long lo, long long hi, floor_v *out,
                          long long olo, long long ohi, floor_v value) {
    floor_v a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    long long i = lo;
    for (; i + 4 <= hi; i += 4) {
        a0 |= in[i];
        a1 |= in[i + 1];
        a2 |= in[i + 2];
        a3 |= in[i + 3];
    }
    for (; i < hi; ++i)
        a0 |= in[i];
    for (long long j = olo; j < ohi; ++j)
        out[j] = value;
    return a0 | a1 | a2 | a3;
}

/* seconds for `passes` passes that each read each of the `in_lines` 64-byte lines of `in` once
   and write each of the `out_lines` lines of `out` once: on one thread with no OpenMP region
   when `threads` is 1, else one parallel region per pass, each thread an equal contiguous
   share of both; `check` gets the OR of every 64-bit word read, and the last pass stores
   floor_seed + passes - 1 in every word of `out` */
double memory_floor(const floor_v *in, long long in_lines, floor_v *out, long long out_lines,
                    int threads, long long passes, unsigned long long *check) {
    floor_v total = {0};
    double t0 = omp_get_wtime();
    for (long long p = 0; p < passes; ++p) {
        floor_v value = (floor_v){0} + (unsigned long long)(floor_seed + p);
        if (threads == 1) {
            total |= floor_part(in, 0, in_lines, out, 0, out_lines, value);
            continue;
        }
        #pragma omp parallel num_threads(threads)
        {
            long long t = omp_get_thread_num(), n = omp_get_num_threads();
            floor_v mine = floor_part(in, in_lines * t / n, in_lines * (t + 1) / n,
                                      out, out_lines * t / n, out_lines * (t + 1) / n, value);
            #pragma omp critical
            total |= mine;
        }
    }
    double t1 = omp_get_wtime();
    unsigned long long word = 0;
    for (int k = 0; k < 8; ++k)
        word |= total[k];
    *check = word;
    return t1 - t0;
}
"""

#: working sets (bytes) whose floor bandwidth ``main`` prints: L1, L2, L3 and memory on most cores
FLOOR_SIZES = (16 << 10, 512 << 10, 8 << 20, 256 << 20)

#: bytes of one line of the memory floor (its vector width; buffers are padded to it)
FLOOR_LINE = 64


def _floor_flags() -> list[str]:
    """gcc ``-m`` flags for the memory floor: the widest vector registers this CPU has."""
    flags = cpu_flags()
    if "avx512f" in flags:
        return ["-mavx512f"]
    return ["-mavx2"] if "avx2" in flags else []


def _shared_library(source: str, flags: list[str]) -> ctypes.CDLL:
    """C ``source`` built with ``gcc -O2 -fPIC`` and ``flags`` into a shared library and loaded
    (the files are removed once loaded).

    Raises:
        subprocess.CalledProcessError: gcc failed.
    """
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp) / "lib.c", Path(tmp) / "lib.so"
        src.write_text(source)
        cmd = ["gcc", "-O2", "-fPIC", *flags, "-shared", "-o", str(lib), str(src)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return ctypes.CDLL(str(lib))


@functools.cache
def _floor_library() -> ctypes.CDLL:
    """The memory floor (:data:`_FLOOR_SOURCE`) built and loaded, once per process."""
    fn = _shared_library(_FLOOR_SOURCE, ["-fopenmp", *_floor_flags()])
    fn.memory_floor.restype = ctypes.c_double
    fn.memory_floor.argtypes = [
        ctypes.c_void_p,
        ctypes.c_longlong,
        ctypes.c_void_p,
        ctypes.c_longlong,
        ctypes.c_int,
        ctypes.c_longlong,
        ctypes.POINTER(ctypes.c_ulonglong),
    ]
    return fn


def floor_buffer(nbytes: int) -> Any:
    """A zeroed, 64-byte aligned ``uint64`` numpy array of whole lines holding ``nbytes``."""
    import numpy as np

    size = -(-int(nbytes) // FLOOR_LINE) * FLOOR_LINE
    raw = np.zeros(size + FLOOR_LINE, np.uint8)
    start = -raw.ctypes.data % FLOOR_LINE
    return raw[start : start + size].view(np.uint64)


def memory_floor_pass(data, out, threads: int, passes: int = 1) -> tuple[float, int]:
    """Run the memory floor on numpy arrays: ``passes`` passes that each read every 64-byte line
    of ``data`` and write every line of ``out`` (both C-contiguous ``uint64`` arrays of whole,
    64-byte aligned lines) on ``threads`` OpenMP threads. Returns ``(seconds for all passes,
    OR of every word of data)``; ``out`` then holds ``passes`` in every word (the seed is 1).

    Raises:
        ValueError: an array that is not whole, aligned lines of ``uint64``.
        subprocess.CalledProcessError: gcc failed.
    """
    for a in (data, out):
        if a.dtype.name != "uint64" or a.nbytes % FLOOR_LINE or (a.nbytes and a.ctypes.data % 64):
            raise ValueError("the memory floor takes 64-byte aligned uint64 arrays of whole lines")
    check = ctypes.c_ulonglong(0)
    fn = _floor_library().memory_floor
    seconds = fn(
        data.ctypes.data,
        data.nbytes // FLOOR_LINE,
        out.ctypes.data,
        out.nbytes // FLOOR_LINE,
        threads,
        passes,
        ctypes.byref(check),
    )
    return seconds, int(check.value)


def measure_memory_floor(
    read_bytes: int, write_bytes: int, threads: int, samples: int = 15
) -> float:
    """The memory floor of a kernel that reads ``read_bytes`` and writes ``write_bytes``, in
    seconds: one parallel region on ``threads`` threads reading every byte of an input buffer
    once and writing every byte of an output buffer once (wide vector loads and stores,
    nothing computed), repeated on the same buffers as a tuned kernel is when it is timed, so
    the data sit in the same cache level. No kernel that must read its inputs and write its
    outputs runs faster from there, so ``max(operations / compute peak, this)`` is its
    roofline (Williams, Waterman and Patterson, "Roofline", CACM 2009; with the bandwidth
    measured at the kernel's own working set, as in Ilic et al.'s cache-aware roofline, IEEE
    CAL 2014). Timed like the harness times a kernel: 3 warm-up passes, then the median of
    ``samples`` samples of at least 10 ms each (a sample's seconds divided by its passes).

    Raises:
        subprocess.CalledProcessError: gcc failed.
    """
    data, out = floor_buffer(read_bytes), floor_buffer(write_bytes)
    data[:] = 1  # touched, as a kernel's inputs are: no page faults in the timed passes
    memory_floor_pass(data, out, threads, 3)
    passes = 1
    while memory_floor_pass(data, out, threads, passes)[0] < 0.01 and passes < 1 << 20:
        passes *= 4
    times = sorted(
        memory_floor_pass(data, out, threads, passes)[0] / passes for _ in range(samples)
    )
    return times[len(times) // 2]


_ROUND_TRIP_SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

/* one counter on a 64-byte line of its own, written in turn by the two threads */
static struct { _Alignas(64) atomic_long turn; char pad[56]; } line;
static long trips_per_chunk, chunks;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* the answering thread: waits for each odd value and writes the next even one */
static void *answer(void *unused) {
    long total = trips_per_chunk * chunks;
    for (long i = 0; i < total; ++i) {
        while (atomic_load_explicit(&line.turn, memory_order_acquire) != 2 * i + 1) {}
        atomic_store_explicit(&line.turn, 2 * i + 2, memory_order_release);
    }
    return unused;
}

struct ask_args { double *chunk_ns; };

/* the asking thread: writes each odd value and waits for the answer; one time per chunk */
static void *ask(void *p) {
    struct ask_args *a = p;
    long i = 0;
    for (long c = 0; c < chunks; ++c) {
        double t0 = now_ns();
        for (long k = 0; k < trips_per_chunk; ++k, ++i) {
            atomic_store_explicit(&line.turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&line.turn, memory_order_acquire) != 2 * i + 2) {}
        }
        a->chunk_ns[c] = (now_ns() - t0) / trips_per_chunk;
    }
    return 0;
}

static int start_on(pthread_t *t, int cpu, void *(*fn)(void *), void *arg) {
    pthread_attr_t attr;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_attr_init(&attr);
    int err = pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    if (!err)
        err = pthread_create(t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return err;
}

/* `n_chunks` chunks of `trips` round trips of one cache line between a thread pinned to
   `cpu_a` and one pinned to `cpu_b` (two new threads: the caller's affinity is untouched);
   chunk_ns[c] gets chunk c's nanoseconds per round trip. Returns 0, or an errno when a
   thread cannot be started on its CPU (then nothing was measured). */
int core_round_trip(int cpu_a, int cpu_b, long trips, long n_chunks, double *chunk_ns) {
    pthread_t ta, tb;
    struct ask_args args = {chunk_ns};
    trips_per_chunk = trips;
    chunks = n_chunks;
    atomic_store(&line.turn, 0);
    int err = start_on(&tb, cpu_b, answer, 0);
    if (err)
        return err;
    err = start_on(&ta, cpu_a, ask, &args);
    if (err) {  /* let the answering thread finish: play the asking side from here */
        for (long i = 0; i < trips * n_chunks; ++i) {
            atomic_store_explicit(&line.turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&line.turn, memory_order_acquire) != 2 * i + 2) {}
        }
        pthread_join(tb, 0);
        return err;
    }
    pthread_join(ta, 0);
    pthread_join(tb, 0);
    return 0;
}
"""


@functools.cache
def _round_trip_library() -> ctypes.CDLL:
    """The core-to-core round trip (:data:`_ROUND_TRIP_SOURCE`) built and loaded, once per
    process."""
    fn = _shared_library(_ROUND_TRIP_SOURCE, ["-pthread"])
    fn.core_round_trip.restype = ctypes.c_int
    fn.core_round_trip.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
        ctypes.c_long,
        ctypes.POINTER(ctypes.c_double),
    ]
    return fn


def round_trip_cpus() -> tuple[int, int] | None:
    """The two CPUs :func:`core_round_trip_ns` measures by default: the two lowest this process
    may run on (the CPUs of a 2-core harness process, where TVM's pool puts its main thread and
    its one worker); None on a single CPU."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else None


def core_round_trip_ns(
    cpus: tuple[int, int] | None = None, trips: int = 2000, chunks: int = 9
) -> float:
    """Nanoseconds for one cache line to go from one CPU to another and back: two threads,
    pinned to ``cpus`` (default :func:`round_trip_cpus`), take turns writing a counter on one
    64-byte line and waiting for the other's write; the median over ``chunks`` chunks of
    ``trips`` round trips (about 0.2-1 ms each).

    It is what every fork and join of a parallel kernel pays a few times over, and it tells
    where the hypervisor runs two vCPUs: on 2 vCPUs of a Zen 5 VM (2026-12-05) it reads about
    100-140 ns in some seconds and 360-420 ns in others, switching back and forth, and TVM's
    parallel launch reads 0.6 and 1.5-1.8 µs with it (``docs/results.md``, "Parallel kernels
    and the distance between the cores").

    Raises:
        ValueError: fewer than two CPUs, the same CPU twice, ``trips`` or ``chunks`` < 1, or a
            thread that could not be started on its CPU (not one this process may use).
        subprocess.CalledProcessError: gcc failed.
    """
    cpus = cpus if cpus is not None else round_trip_cpus()
    if cpus is None:
        raise ValueError("a core-to-core round trip needs two CPUs; this process may use one")
    if cpus[0] == cpus[1]:
        raise ValueError(f"a core-to-core round trip needs two different CPUs, got {cpus}")
    if trips < 1 or chunks < 1:
        raise ValueError(f"trips and chunks must be >= 1, got {trips} and {chunks}")
    out = (ctypes.c_double * chunks)()
    err = _round_trip_library().core_round_trip(cpus[0], cpus[1], trips, chunks, out)
    if err:
        why = os.strerror(err)
        raise ValueError(f"could not start a thread on CPU {cpus[0]} or {cpus[1]}: {why}")
    return float(statistics.median(out))


def _spec(name: str) -> tuple[tuple[str, ...], str, int, int]:
    """``(cpuinfo flags, gcc -m flags, ops per instruction, instructions per iteration)``."""
    if name in TILE_KERNELS:
        flags, mflags, ops, _ = TILE_KERNELS[name]
        return flags, mflags, ops, TILE_ACCUMULATORS
    flags, mflags, ops = KERNELS[name][:3]
    return flags, mflags, ops, ACCUMULATORS


def ops_per_instruction(name: str) -> int:
    """Operations one instruction of kernel ``name`` counts (2 per multiply-add)."""
    return _spec(name)[2]


def source(names: list[str]) -> str:
    """The whole C file for kernels ``names``: includes, the ``volatile`` seeds and sink, one
    :func:`kernel_source` (or :func:`tile_kernel_source`) function per name, and
    ``clock_chain`` (see :func:`measure_clock_hz`).
    """
    functions = [tile_kernel_source(n) if n in TILE_KERNELS else kernel_source(n) for n in names]
    return "\n".join([_PRELUDE, _CLOCK_SOURCE, *functions])


def gcc_command(names: list[str], opt: str = "-O2") -> list[str]:
    """The gcc command line (without input and output files) for kernels ``names``: ``opt``,
    ``-fopenmp`` and the union of the kernels' ``-m`` flags, so it needs only a gcc that knows
    those flags, not a CPU that has the instructions."""
    flags = sorted({f for n in names for f in _spec(n)[1].split()})
    return ["gcc", opt, "-fPIC", "-fopenmp", *flags]


def compile_asm(names: list[str], opt: str = "-O2") -> str:
    """The assembly (AT&T syntax) gcc emits for :func:`source` ``(names)`` at ``opt``; the timed
    loop of kernel ``name`` is in the OpenMP outlined function ``<name>._omp_fn.0``.

    Raises:
        subprocess.CalledProcessError: gcc failed (no gcc, or flags it does not know).
    """
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "peak.c"
        src.write_text(source(names))
        cmd = [*gcc_command(names, opt), "-S", "-o", "-", str(src)]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


@functools.cache
def _library(names: tuple[str, ...]) -> ctypes.CDLL:
    """:func:`source` ``(names)`` built and loaded, once per process (the file is removed once
    loaded)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp) / "peak.c", Path(tmp) / "peak.so"
        src.write_text(source(list(names)))
        cmd = [*gcc_command(list(names)), "-shared", "-o", str(lib), str(src)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return ctypes.CDLL(str(lib))


def _clock_hz(lib: ctypes.CDLL, seconds: float, repeats: int) -> float:
    fn = lib.clock_chain
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_longlong]
    iters = 1 << 12
    while fn(iters) < seconds / 4:  # calibrate, and warm up the clock
        iters *= 2
    iters = int(iters * seconds / max(fn(iters), 1e-9))
    # the max: a run the OS interrupts looks slower, never faster
    return max(CLOCK_CHAIN * iters / fn(iters) for _ in range(repeats))


def measure_clock_hz(seconds: float = 0.05, repeats: int = 5) -> float:
    """This core's clock while busy, in Hz: ``CLOCK_CHAIN`` dependent register adds (1 cycle
    each on every x86 core) per loop iteration, timed on one thread; the fastest of
    ``repeats`` runs of about ``seconds`` each.

    An upper bound for any register-only kernel is then ports × ops per instruction × this
    clock (see ``tests/test_peak.py``). A core that eliminated such adds at rename would read
    high, which only loosens that bound.

    Raises:
        subprocess.CalledProcessError: gcc failed.
    """
    return _clock_hz(_library(()), seconds, repeats)


def _kernel_function(lib: ctypes.CDLL, name: str) -> Any:
    """Kernel ``name`` of ``lib`` (:func:`_library`) as a ctypes function ``(iters, threads) ->
    seconds``."""
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_longlong, ctypes.c_int]
    return fn


def _calibrated_iters(fn: Any, threads: int, seconds: float) -> int:
    """Iterations of kernel ``fn`` (:func:`_kernel_function`) that run about ``seconds`` on
    ``threads`` threads; the calibration runs also warm up the clocks."""
    iters = 1 << 16
    while fn(iters, threads) < seconds / 4:
        iters *= 2
    return max(1, int(iters * seconds / max(fn(iters, threads), 1e-9)))


#: runs per reading of :func:`peak_probe`, which keeps the fastest
PROBE_RUNS = 3
#: seconds :func:`peak_probe` sleeps before a reading, untimed, so the threads of the runtime
#: that ran before it (TVM's pool, PyTorch's OpenMP) yield the cores
PROBE_PAUSE_S = 0.002
#: seconds :func:`wait_for_idle_threads` sleeps where it cannot see the threads' states:
#: libgomp's threads spun 7.7 ms after each reading on an AMD EPYC Zen 4 VM (2026-12-07)
IDLE_FALLBACK_S = 0.03
#: the longest :func:`wait_for_idle_threads` waits, in seconds
IDLE_WAIT_MAX_S = 0.2
#: seconds between two looks of :func:`wait_for_idle_threads` at the threads' states
IDLE_POLL_S = 0.0005


def running_threads() -> set[int] | None:
    """The threads of this process other than the caller that are running or runnable now
    (state ``R`` in ``/proc/self/task/<tid>/stat``, Linux): a thread that spins is, one that
    sleeps on a futex is not. None where the states cannot be read. (Their CPU time in
    ``schedstat`` would not tell: Linux adds a running thread's time only at a scheduler tick
    or a switch, so a thread spinning on a core of its own reads idle for up to a tick.)"""
    me = threading.get_native_id()
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return None
    out: set[int] = set()
    for tid in tids:
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended since the listing
            continue
        if stat[stat.rindex(")") + 2 :].startswith("R"):
            out.add(tid)
    return out


def wait_for_idle_threads(
    ignore: Collection[int] = (), max_s: float = IDLE_WAIT_MAX_S, poll_s: float = IDLE_POLL_S
) -> float | None:
    """Sleep until no thread of this process but the caller and those in ``ignore`` runs
    (:func:`running_threads`, at two looks ``poll_s`` apart), or ``max_s`` passed. Returns the
    seconds waited, or None where the threads' states cannot be read (then it slept
    :data:`IDLE_FALLBACK_S`).

    :func:`peak_probe` waits so after each reading, ``ignore`` being the threads that ran
    before it: its OpenMP threads spin on after their parallel region before they sleep
    (libgomp's ``GOMP_SPINCOUNT``, 300,000 spins by default: 7.7 ms on an AMD EPYC Zen 4 VM),
    and a kernel timed meanwhile shares its cores with them. A 15 µs convolution whose
    samples (means of 10 ms of calls) followed a reading and a 2 ms pause ran 1.29× slower
    than those that followed none (19.9 against 15.4 µs, medians of 20 samples each, one
    process; docs/results.md, "The probe's threads spun into the next sample"). TVM's worker
    threads, which spin (yielding) for some 0.1 s after a kernel, are left running: waiting
    for them too sent them to sleep, and the next kernel then ran 1.3-1.5× slower for about
    15 ms while they woke."""
    start, ignored, quiet = time.perf_counter(), set(ignore), 0
    while quiet < 2 and time.perf_counter() - start < max_s:
        running = running_threads()
        if running is None:
            time.sleep(IDLE_FALLBACK_S)
            return None
        quiet = 0 if running - ignored else quiet + 1
        if quiet < 2:
            time.sleep(poll_s)
    return time.perf_counter() - start


@functools.cache
def peak_probe(kernel: str, threads: int, seconds: float = 0.01) -> Callable[[], float]:
    """One kernel's peak as a probe to take beside other timings: a callable that runs
    ``kernel`` (a name of :data:`KERNELS` or :data:`TILE_KERNELS`) on ``threads`` OpenMP
    threads and returns its op/s, the fastest of :data:`PROBE_RUNS` runs that take about
    ``seconds`` together (a run the OS, the hypervisor or another thread pool interrupts reads
    slower, never faster). Calibrated once per process and arguments (the harness's PyTorch
    process reads it before each sample of each path). ``benchmarks/suite.py`` takes one
    reading before each turn of the harness's samples, so each sample has the peak of the
    machine's state at that moment (a VM's peak read 71-95 G op/s within one night, each state
    holding seconds to minutes: docs/results.md, "The peak in the harness's turns").

    Before each reading the probe sleeps :data:`PROBE_PAUSE_S`, untimed: right after a TVM
    kernel, TVM's worker threads spin on and took half the cores from a reading (22 of 72 G
    op/s on a Zen 1 VM). After it, it waits until the threads the reading set spinning (its
    OpenMP threads) sleep again (:func:`wait_for_idle_threads`): they spun on for 7.7 ms on
    a Zen 4, where a fixed 2 ms pause left the sample timed next 1.29× slower.

    Raises:
        KeyError: no such kernel.
        ValueError: this CPU lacks its instructions.
        subprocess.CalledProcessError: gcc failed.
    """
    needed, _, ops, count = _spec(kernel)
    missing = set(needed) - cpu_flags()
    if missing:
        raise ValueError(f"peak kernel {kernel} needs {sorted(missing)}, which this CPU lacks")
    if kernel in TILE_KERNELS:
        from heronlike.dla_targets.amx import request_amx_permission

        request_amx_permission()
    fn = _kernel_function(_library((kernel,)), kernel)
    iters = _calibrated_iters(fn, threads, seconds / PROBE_RUNS)
    per_run = ops * count * iters * threads

    def probe() -> float:
        time.sleep(PROBE_PAUSE_S)
        before = running_threads() or set()
        rate = per_run / min(fn(iters, threads) for _ in range(PROBE_RUNS))
        wait_for_idle_threads(ignore=before)
        return rate

    return probe


def measure_peaks(
    threads: list[int] | None = None,
    repeats: int = 5,
    seconds: float = 0.2,
    kernels: Sequence[str] | None = None,
) -> list[dict[str, object]]:
    """Measure every kernel this CPU supports, or those of ``kernels`` it supports.

    Args:
        threads: thread counts to run (default: 1 and ``len(os.sched_getaffinity(0))``).
        repeats: timed runs per kernel and thread count; the median is reported.
        seconds: about how long one timed run lasts.
        kernels: names of :data:`KERNELS` / :data:`TILE_KERNELS` to measure (those this CPU
            lacks are left out); ``None``: all. A caller that needs one peak measures one
            (the suite's VNNI peak: 1 s instead of 7 s of 14 kernels on an AMX Xeon).

    Returns:
        One dict per (kernel, threads): ``kernel``, ``threads``, ``ops_per_s`` (median, op/s),
        ``ops_per_s_per_core``, ``spread`` ((max - min) / median of the repeats).

    Raises:
        subprocess.CalledProcessError: gcc failed (no gcc, or flags it does not know).
        ValueError: ``kernels`` names a kernel this module does not have.
    """
    flags = cpu_flags()
    known = (*KERNELS, *TILE_KERNELS)
    unknown = sorted(set(kernels or ()) - set(known))
    if unknown:
        raise ValueError(f"unknown peak kernels {unknown}; known: {list(known)}")
    names = [n for n in known if (kernels is None or n in kernels) and set(_spec(n)[0]) <= flags]
    if any(n in TILE_KERNELS for n in names):
        from heronlike.dla_targets.amx import request_amx_permission

        request_amx_permission()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = threads or sorted({1, int(cores or 1)})
    rows: list[dict[str, object]] = []
    if not names:
        return rows
    lib = _library(tuple(names))
    for name in names:
        fn = _kernel_function(lib, name)
        _, _, ops, count = _spec(name)
        ops_per_iter = ops * count
        for t in threads:
            iters = _calibrated_iters(fn, t, seconds)
            rates = [ops_per_iter * iters * t / fn(iters, t) for _ in range(repeats)]
            med = statistics.median(rates)
            rows.append(
                {
                    "kernel": name,
                    "threads": t,
                    "ops_per_s": med,
                    "ops_per_s_per_core": med / t,
                    "spread": (max(rates) - min(rates)) / med,
                }
            )
    return rows


def parallel_launch_kernel(threads: int) -> tuple[Any, list[Any]]:
    """A TVM kernel whose only work is a parallel loop of ``threads`` tasks (one 64-byte vector
    add each), built for this CPU, and its two ``(threads, 16)`` int32 arguments: ``(module,
    arguments)``. Calling it costs TVM's thread pool's fork and join (:func:`measure_parallel_
    launch`) and nothing else of note.

    Raises:
        ValueError: ``threads`` < 1.
    """
    import numpy as np
    import tvm
    from tvm import s_tir, te

    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    a = te.placeholder((threads, 16), "int32", name="A")
    b = te.compute((threads, 16), lambda i, j: a[i, j] + 1, name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]))
    i, j = sch.get_loops(sch.get_sblock("B"))
    sch.parallel(i)
    sch.vectorize(j)
    lib = tvm.compile(sch.mod, target=tvm.target.Target({"kind": "llvm"}))
    dev = tvm.cpu()
    return lib, [tvm.runtime.tensor(np.zeros((threads, 16), "int32"), dev) for _ in range(2)]


def measure_parallel_launch(threads: int, calls: int = 2000, repeats: int = 10) -> float:
    """Seconds per call of :func:`parallel_launch_kernel` on TVM's CPU thread pool of
    ``threads`` threads in this process: the fork and join every parallel kernel pays on top of
    its work, and so the least any parallel kernel takes. The median of ``repeats`` means of
    ``calls`` calls (``time_evaluator``, a loop in C++; the benchmark suite's harness calls every
    kernel from Python and times this kernel that way too, in the kernels' turns:
    ``launch_harness_us``).

    A kernel whose compute floor (operations / peak) is ``c`` seconds can then reach at most
    ``c / (c + launch)`` of the peak: 90 % needs ``c >= 9 × launch``. The cost depends on where
    the hypervisor runs the pool's threads and holds for a whole process (on 2 vCPUs of a
    Zen 5 VM, 2026-12-04: about 0.65 µs in most processes, 1.5-1.9 µs in some), so a caller
    measures it in several fresh processes (``benchmarks/suite.py``).

    Raises:
        ValueError: ``threads`` < 1.
    """
    import tvm

    from heronlike.host import use_cpu_threads

    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    use_cpu_threads(threads)
    lib, args = parallel_launch_kernel(threads)
    timer = lib.mod.time_evaluator("main", tvm.cpu(), number=calls, repeat=repeats)
    return float(statistics.median(timer(*args).results))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="*", default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--csv", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = measure_peaks(args.threads, args.repeats)
    machine, date = cpu_model(), dt.date.today().isoformat()
    print(f"{machine}, {date}")
    clock = measure_clock_hz() if rows else 0.0
    if rows:
        print(f"clock {clock / 1e9:.2f} GHz (dependent adds, 1 thread)")
    for r in rows:
        per_cycle = float(r["ops_per_s_per_core"]) / ops_per_instruction(str(r["kernel"])) / clock
        print(
            f"{r['kernel']:18s} {r['threads']:3d} threads  {r['ops_per_s'] / 1e9:8.1f} G op/s "
            f"({r['ops_per_s_per_core'] / 1e9:.1f} per core, {per_cycle:.2f} instructions "
            f"per cycle, spread {r['spread']:.1%})"
        )
    if not rows:
        print("no supported kernel on this CPU", file=sys.stderr)
    for t in sorted({int(r["threads"]) for r in rows} - {1}):
        launch = measure_parallel_launch(t)
        print(f"parallel launch and join (TVM thread pool) {t:3d} threads  {launch * 1e6:.2f} µs")
    pair = round_trip_cpus()
    if pair is not None:
        trip = core_round_trip_ns(pair)
        cpus = f"CPUs {pair[0]} and {pair[1]}"
        print(f"core-to-core round trip (one cache line, {cpus})  {trip:.0f} ns")
    for t in sorted({1, *(int(r["threads"]) for r in rows)}):
        for size in FLOOR_SIZES:
            read, write = (size / measure_memory_floor(*b, t) / 1e9 for b in ((size, 0), (0, size)))
            print(
                f"memory floor {size >> 10:6d} KiB {t:3d} threads  read {read:6.1f} GB/s, "
                f"write {write:6.1f} GB/s"
            )
    if args.csv and rows:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, [*rows[0], "cpu", "date"])
            w.writeheader()
            w.writerows({**r, "cpu": machine, "date": date} for r in rows)
        print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
