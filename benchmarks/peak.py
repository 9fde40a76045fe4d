"""Measured compute peak of this CPU: register-only FMA and VNNI loops, so "% of peak" is measured
on each machine instead of read from a table of nominal clocks.

Each kernel keeps ``ACCUMULATORS`` independent accumulator registers busy with one instruction
kind, never touching memory inside the loop, so it runs at the core's issue rate for that
instruction. Operations are counted as the field counts them:

* ``fma_f32_avx2``   ``vfmadd231ps ymm``: 8 lanes × 2 = 16 FLOP per instruction;
* ``fma_f32_avx512`` ``vfmadd231ps zmm``: 16 lanes × 2 = 32 FLOP;
* ``vnni_u8s8_avx512`` ``vpdpbusd zmm``: 16 lanes × 4 products × 2 = 128 int8 OP (AVX512-VNNI,
  DL Boost);
* ``vnni_u8s8_avx`` ``vpdpbusd ymm`` (AVX-VNNI): 64 OP.

Kernels the CPU lacks are skipped (checked with ``/proc/cpuinfo`` flags). Each kernel runs on
``threads`` OpenMP threads (default: 1 and every core this process may use), ``repeats`` times;
the figure is the median. The C source is compiled here with ``gcc -O2 -march=native -fopenmp``.

Usage::

    python benchmarks/peak.py                   # print a table
    python benchmarks/peak.py --csv benchmarks/results/peak.csv

Import :func:`measure_peaks` to put a measured peak beside a kernel's throughput in the same run.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from heronlike.host import cpu_flags, cpu_model

ACCUMULATORS = 12  # > latency (4-5 cycles) × ports (2): enough to hide the FMA latency

#: kernel name -> (cpuinfo flags needed, gcc -m flags, ops per instruction, vector type, setup,
#: the loop body's one instruction on accumulator ``a{i}``)
KERNELS: dict[str, tuple[tuple[str, ...], str, int, str, str, str]] = {
    "fma_f32_avx2": (
        ("avx2", "fma"),
        "-mavx2 -mfma",
        16,
        "__m256",
        "__m256 x = _mm256_set1_ps(1e-7f), y = _mm256_set1_ps(0.999f);",
        "a{i} = _mm256_fmadd_ps(a{i}, y, x);",
    ),
    "fma_f32_avx512": (
        ("avx512f",),
        "-mavx512f",
        32,
        "__m512",
        "__m512 x = _mm512_set1_ps(1e-7f), y = _mm512_set1_ps(0.999f);",
        "a{i} = _mm512_fmadd_ps(a{i}, y, x);",
    ),
    "vnni_u8s8_avx512": (
        ("avx512_vnni",),
        "-mavx512f -mavx512vnni",
        128,
        "__m512i",
        "__m512i x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(2);",
        "a{i} = _mm512_dpbusd_epi32(a{i}, x, y);",
    ),
    "vnni_u8s8_avx": (
        ("avx_vnni",),
        "-mavx2 -mavxvnni",
        64,
        "__m256i",
        "__m256i x = _mm256_set1_epi8(1), y = _mm256_set1_epi8(2);",
        "a{i} = _mm256_dpbusd_avx_epi32(a{i}, x, y);",
    ),
}


def _source(name: str) -> str:
    _, _, _, vec, setup, body = KERNELS[name]
    decl = " ".join(f"{vec} a{i} = {'x' if 'ps' in setup else 'y'};" for i in range(ACCUMULATORS))
    loop = " ".join(body.format(i=i) for i in range(ACCUMULATORS))
    sink = " ".join(f"acc = acc ^ *(volatile long long *)&a{i};" for i in range(ACCUMULATORS))
    return f"""
#include <immintrin.h>
#include <omp.h>
volatile long long sink;
/* seconds for `iters` iterations of {ACCUMULATORS} independent {name} on `threads` threads */
double {name}(long long iters, int threads) {{
    double t0 = 0, t1 = 0;
    #pragma omp parallel num_threads(threads)
    {{
        {setup}
        {decl}
        long long acc = 0;
        #pragma omp barrier
        #pragma omp master
        t0 = omp_get_wtime();
        for (long long it = 0; it < iters; ++it) {{ {loop} }}
        #pragma omp barrier
        #pragma omp master
        t1 = omp_get_wtime();
        {sink}
        sink = acc;
    }}
    return t1 - t0;
}}
"""


def _compile(names: list[str], folder: Path) -> ctypes.CDLL:
    src = folder / "peak.c"
    src.write_text("\n".join(_source(n) for n in names))
    flags = sorted({f for n in names for f in KERNELS[n][1].split()})
    lib = folder / "peak.so"
    cmd = ["gcc", "-O2", "-shared", "-fPIC", "-fopenmp", *flags, "-o", str(lib), str(src)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


def measure_peaks(
    threads: list[int] | None = None, repeats: int = 5, seconds: float = 0.2
) -> list[dict[str, object]]:
    """Measure every kernel this CPU supports.

    Args:
        threads: thread counts to run (default: 1 and ``len(os.sched_getaffinity(0))``).
        repeats: timed runs per kernel and thread count; the median is reported.
        seconds: about how long one timed run lasts.

    Returns:
        One dict per (kernel, threads): ``kernel``, ``threads``, ``ops_per_s`` (median, op/s),
        ``ops_per_s_per_core``, ``spread`` ((max - min) / median of the repeats).

    Raises:
        subprocess.CalledProcessError: gcc failed (no gcc, or flags it does not know).
    """
    flags = cpu_flags()
    names = [n for n, k in KERNELS.items() if set(k[0]) <= flags]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = threads or sorted({1, int(cores or 1)})
    rows: list[dict[str, object]] = []
    if not names:
        return rows
    with tempfile.TemporaryDirectory() as tmp:
        lib = _compile(names, Path(tmp))
        for name in names:
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_longlong, ctypes.c_int]
            ops_per_iter = KERNELS[name][2] * ACCUMULATORS
            for t in threads:
                iters = 1 << 16
                while fn(iters, t) < seconds / 4:  # calibrate, and warm up the clocks
                    iters *= 2
                iters = int(iters * seconds / max(fn(iters, t), 1e-9))
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="*", default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--csv", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = measure_peaks(args.threads, args.repeats)
    machine, date = cpu_model(), dt.date.today().isoformat()
    print(f"{machine}, {date}")
    for r in rows:
        print(
            f"{r['kernel']:18s} {r['threads']:3d} threads  {r['ops_per_s'] / 1e9:8.1f} G op/s "
            f"({r['ops_per_s_per_core'] / 1e9:.1f} per core, spread {r['spread']:.1%})"
        )
    if not rows:
        print("no supported kernel on this CPU", file=sys.stderr)
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
