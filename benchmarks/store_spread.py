"""Where in a tile the sub-pixel transposed convolution's zeros are stored, and what it costs.

T4 (``t2d`` 28 x 28 x 128 -> 256, 1 x 1 taps, stride 2) is the product of its input with the
weights, 51.4 MOP, placed into an output four times as large: each product vector and three
vectors of zeros around it (:mod:`heronlike.ops`' sub-pixel form, the placement fused into the
product's tile). Its kernels reached about 75 % of the VNNI peak against the product alone's
95 %, the extra time about what the output's extra bytes take to store (docs/results.md,
"Fusing the transposed convolution's placement into the product's tiles"), all 48 zero vectors
of a tile stored in one burst after its reduction. :func:`heronlike.postproc.spread_zero_stores`
now stores them a chunk per step of the reduction. This script measures where they are best
stored.

Part ``c``: a hand-written model of T4's tile (16 ``vpdpbusd`` accumulators, 32 steps of
reduction, 4 KiB of output per tile, 392 tiles on each of 2 OpenMP threads; gcc ``-O3``),
the zeros stored

* ``after``: in one burst after the reduction (heronlike's kernels before the rewrite);
* ``before``: in one burst before it;
* ``spread``: 1.5 vectors after each step of the reduction (as the rewrite does);
* ``chunks-4``: 12 vectors after every 8th step;
* ``products-only``: not at all, each tile's 16 product vectors at 1 KiB per tile (the output
  of the product alone, the floor);
* ``after, non-temporal`` and ``spread, non-temporal``: as ``after`` and ``spread``, the zeros
  non-temporal stores (no read for ownership; written past the caches);
* ``after, clzero`` and ``spread, clzero``: the zeros AMD's ``clzero`` (a line of zeros, no
  read for ownership; only on a CPU that has it);
* ``spread, to an L1 scratch``: the same zero stores as ``spread``, to 2 KiB of the thread's
  that stay in L1 (the products as in ``products-only``): what the store instructions cost
  without the output lines they write;
* ``spread, prefetchw the next tile``: ``spread``, each step also prefetching for writing
  (``prefetchw``) the zero lines of the next tile that it will store, a tile ahead.

Part ``tvm``: in each configuration of ``--configs`` (:data:`CONFIGS`: DL Boost's rules, the
general rule set on int8 and on float32), each case of ``--cases`` (T4, T6) tuned, and each of
its ``--top`` finalists built with its zeros after the reduction and between its steps; the two
builds' outputs must be equal.

Both parts time their variants in turns (the order the same in every round, ``--rounds``
rounds), 2 threads; the median over rounds of each variant's mean call.

    python benchmarks/store_spread.py                 # both parts
    python benchmarks/store_spread.py --part c

Writes ``benchmarks/results/store_spread-<cpu>-<date>.csv``: one row per variant, its part,
microseconds per call, speed against the part's ``after`` (``c``) or the same schedule's
zeros after the reduction (``tvm``) and G op/s (the product's operations); part ``tvm``'s rows
also give the case, the finalist's trial and where its zeros are (``after``, ``between``).

Raises SystemExit when the CPU has no AVX512-VNNI.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import peak  # noqa: E402
from benchmarks.csv_rows import write_rows  # noqa: E402
from heronlike.host import (  # noqa: E402
    cpu_flags,
    cpu_model,
    machine_slug,
    machine_stamp,
    use_cpu_threads,
)

#: tiles per thread, reduction steps per tile: T4's 51.4 MOP on 2 threads
TILES, STEPS = 392, 32
OPS = 2.0 * TILES * STEPS * 16 * 64 * 2
#: part ``c``'s variants: name -> (mode in the C source, bytes of output per tile)
C_VARIANTS = {
    "after": (0, 4096),
    "before": (1, 4096),
    "spread": (2, 4096),
    "chunks-4": (3, 4096),
    "products-only": (4, 1024),
    "after, non-temporal": (5, 4096),
    "spread, non-temporal": (6, 4096),
    "after, clzero": (7, 4096),
    "spread, clzero": (8, 4096),
    "spread, to an L1 scratch": (9, 1024),
    "spread, prefetchw the next tile": (10, 4096),
}
#: the variants that zero whole lines with AMD's ``clzero`` (only on a CPU that has it)
CLZERO_VARIANTS = ("after, clzero", "spread, clzero")

#: part ``tvm``'s configurations, ``<suite mode>:<dtype>``: DL Boost's rules (on a VNNI CPU),
#: the general rule set on int8 and on float32
CONFIGS = ("auto:int8", "general:int8", "auto:float32")

_SOURCE = r"""
#include <immintrin.h>
#include <omp.h>
#include <time.h>
#define TILES %(tiles)d
#define STEPS %(steps)d
static __m512i w[2][2][STEPS * 4] __attribute__((aligned(64)));
static int x[2][STEPS * 4 + 8] __attribute__((aligned(64)));
static char scratch[2][2048] __attribute__((aligned(64))); /* mode 9's zeros: stays in L1 */
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
#ifdef HAVE_CLZERO
#define CLZERO(p) __builtin_ia32_clzero(p)
#else
#define CLZERO(p) _mm512_store_si512((void *)(p), z)
#endif
/* kind 0: a store; 1: a non-temporal store; 2: clzero (a line of zeros, no read for ownership) */
#define ZERO(l) do { \
    if (kind == 1) _mm512_stream_si512((void *)(o + (l) * 64), z); \
    else if (kind == 2) CLZERO(o + (l) * 64); \
    else _mm512_store_si512((void *)(o + (l) * 64), z); \
  } while (0)
static inline __attribute__((always_inline)) void tiles(
    int t, int mode, int kind, char *out, long bytes) {
  __m512i z = _mm512_setzero_si512();
  for (int tile = 0; tile < TILES; tile++) {
    __m512i acc[16];
    char *o = out + (long)tile * bytes;
    const int *xx = x[t] + (tile & 7);
    const __m512i *ww = w[t][tile & 1];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = z;
    if (mode == 1) { _Pragma("GCC unroll 48") for (int l = 16; l < 64; l++) ZERO(l); }
    _Pragma("GCC unroll 32") for (int k = 0; k < STEPS; k++) {
      __m512i w0 = ww[k * 4], w1 = ww[k * 4 + 1], w2 = ww[k * 4 + 2], w3 = ww[k * 4 + 3];
      _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
        __m512i a = _mm512_set1_epi32(xx[k * 4 + p]);
        acc[p * 4] = _mm512_dpbusd_epi32(acc[p * 4], a, w0);
        acc[p * 4 + 1] = _mm512_dpbusd_epi32(acc[p * 4 + 1], a, w1);
        acc[p * 4 + 2] = _mm512_dpbusd_epi32(acc[p * 4 + 2], a, w2);
        acc[p * 4 + 3] = _mm512_dpbusd_epi32(acc[p * 4 + 3], a, w3);
      }
      if (mode == 2 || mode == 10) {
        _Pragma("GCC unroll 2") for (int l = 16 + k * 3 / 2; l < 16 + (k + 1) * 3 / 2; l++) ZERO(l);
      }
      if (mode == 9) {
        _Pragma("GCC unroll 2") for (int l = 16 + k * 3 / 2; l < 16 + (k + 1) * 3 / 2; l++)
          _mm512_store_si512((void *)(scratch[t] + (l %% 32) * 64), z);
      }
      if (mode == 10) { /* the next tile's zero lines, for writing (prefetchw with -mprfchw) */
        _Pragma("GCC unroll 2") for (int l = 16 + k * 3 / 2; l < 16 + (k + 1) * 3 / 2; l++)
          __builtin_prefetch(o + bytes + l * 64, 1, 3);
      }
      if (mode == 3 && k %% 8 == 0) {
        _Pragma("GCC unroll 12") for (int l = 16 + k / 8 * 12; l < 28 + k / 8 * 12; l++) ZERO(l);
      }
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++)
      _mm512_store_si512((void *)(o + i * 64), acc[i]);
    if (mode == 0) { _Pragma("GCC unroll 48") for (int l = 16; l < 64; l++) ZERO(l); }
  }
  if (kind) _mm_sfence(); /* both are weakly ordered */
}
#define VARIANT(n, m, k) \
  __attribute__((noinline)) static void v##n(int t, char *o, long b) { tiles(t, m, k, o, b); }
VARIANT(0, 0, 0) VARIANT(1, 1, 0) VARIANT(2, 2, 0) VARIANT(3, 3, 0) VARIANT(4, 4, 0)
VARIANT(5, 0, 1) VARIANT(6, 2, 1) VARIANT(7, 0, 2) VARIANT(8, 2, 2) VARIANT(9, 9, 0)
VARIANT(10, 10, 0)
static void (*variants[])(int, char *, long) = {v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10};
void setup(void) {
  for (int t = 0; t < 2; t++) {
    for (int i = 0; i < STEPS * 4 + 8; i++) x[t][i] = (int)(i * 2654435761u);
    for (int i = 0; i < 2 * STEPS * 4; i++)
      w[t][i / (STEPS * 4)][i %% (STEPS * 4)] = _mm512_set1_epi32(i * 40503 + t);
  }
}
/* seconds per call, the mean of `calls` calls; out: 2 buffers of TILES * bytes */
double time_variant(int mode, char *out0, char *out1, long bytes, int calls) {
  double t0 = now();
  for (int c = 0; c < calls; c++) {
#pragma omp parallel num_threads(2)
    { int t = omp_get_thread_num(); variants[mode](t, t ? out1 : out0, bytes); }
  }
  return (now() - t0) / calls;
}
"""


@functools.cache
def model_library() -> ctypes.CDLL:
    """Part ``c``'s tile model built (gcc ``-O3``) and loaded, once per process:
    ``time_variant(mode, out0, out1, bytes per tile, calls)`` runs variant ``mode`` of
    :data:`C_VARIANTS` ``calls`` times on 2 threads, each writing its 392 tiles to its buffer,
    and returns the seconds per call.

    Raises:
        subprocess.CalledProcessError: gcc failed.
    """
    source = _SOURCE % dict(tiles=TILES, steps=STEPS)
    flags = ["-O3", "-fopenmp", "-mavx512f", "-mavx512bw", "-mavx512vnni"]
    if "clzero" in cpu_flags():
        flags += ["-mclzero", "-DHAVE_CLZERO"]
    if "3dnowprefetch" in cpu_flags():  # Linux's name for PREFETCHW
        flags += ["-mprfchw"]
    lib = peak._shared_library(source, flags)
    lib.time_variant.restype = ctypes.c_double
    lib.time_variant.argtypes = [
        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int,
    ]  # fmt: skip
    lib.setup()
    return lib


def c_part(rounds: int, calls: int) -> list[dict[str, Any]]:
    """Part ``c``: the hand-written tile, each variant's median seconds per call.

    Raises:
        subprocess.CalledProcessError: gcc failed.
    """
    lib = model_library()
    outs = [peak.floor_buffer(TILES * 4096) for _ in range(2)]
    ptrs = [b.ctypes.data for b in outs]
    names = [n for n in C_VARIANTS if n not in CLZERO_VARIANTS or "clzero" in cpu_flags()]
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm-up: every page written once
        mode, size = C_VARIANTS[name]
        lib.time_variant(mode, ptrs[0], ptrs[1], size, 20)
    for _ in range(rounds):
        for name in names:
            mode, size = C_VARIANTS[name]
            seconds[name].append(lib.time_variant(mode, ptrs[0], ptrs[1], size, calls))
    base = statistics.median(seconds["after"])
    rows = []
    for name, samples in seconds.items():
        s = statistics.median(samples)
        rows.append(dict(part="c", variant=name, us=s * 1e6, speed=base / s, gops=OPS / s / 1e9))
    return rows


def tvm_part(
    cases: list[str], rounds: int, calls: int, top: int, config: str = "auto:int8"
) -> list[dict[str, Any]]:
    """Part ``tvm`` in one ``config`` (of :data:`CONFIGS`): each case tuned (16 trials, seed 0,
    fresh records), then each of its ``top`` finalists built twice, its placement's zeros after
    the reduction and between its steps (:func:`heronlike.postproc.spread_zero_stores`, which
    the tune itself used).

    Raises:
        RuntimeError: the two builds' outputs differ.
    """
    import numpy as np
    import tvm

    import heronlike
    from benchmarks import suite
    from heronlike.postproc import postprocess
    from heronlike.reference import random_inputs

    use_cpu_threads(2)
    mode_name, dtype = config.split(":")
    mode = suite.resolve_mode(mode_name)
    part = f"tvm {mode.name} {dtype}" if dtype == "int8" else f"tvm llvm {dtype}"
    dev = tvm.cpu()
    timers: dict[tuple[str, int, bool], Any] = {}
    tensors: dict[tuple[str, int, bool], list[Any]] = {}
    flop: dict[str, float] = {}
    for name in cases:
        case = suite.case_compute(name, dtype, mode)
        with tempfile.TemporaryDirectory() as work:
            result = heronlike.tune(
                case.compute, case.target, trials=16, batch_size=8, seed=0,
                records=Path(work) / "records.sqlite", work_dir=Path(work),
            )  # fmt: skip
        flop[name] = result.flop
        space = result.space
        target = tvm.target.Target(space.target.tvm_target())
        rng = np.random.default_rng(0)
        args = space.prepare_args(random_inputs(space.logical, rng))
        for fin in result.finalists[:top]:
            scheduled = space.apply(fin.assignment).mod
            for spread in (False, True):
                lib = tvm.compile(postprocess(scheduled, spread_zeros=spread), target=target)
                key = (name, fin.trial_index, spread)
                tensors[key] = [tvm.runtime.tensor(a, dev) for a in args]
                lib["main"](*tensors[key])
                timers[key] = lib.mod.time_evaluator("main", dev, number=calls, repeat=1)
            after, spread_out = (tensors[(name, fin.trial_index, s)][-1].numpy() for s in (0, 1))
            if not np.array_equal(after, spread_out):
                raise RuntimeError(f"{name} trial {fin.trial_index}: the two builds differ")
    seconds: dict[tuple[str, int, bool], list[float]] = {k: [] for k in timers}
    for _ in range(rounds):
        for key, timer in timers.items():
            seconds[key].append(timer(*tensors[key]).mean)
    rows = []
    for (name, trial, spread), samples in seconds.items():
        s, base = statistics.median(samples), statistics.median(seconds[(name, trial, False)])
        where = "between the steps" if spread else "after the reduction"
        rows.append(
            dict(
                part=part,
                variant=f"{name} trial {trial}, zeros {where}",
                us=s * 1e6,
                speed=base / s, gops=flop[name] / s / 1e9,
                case=name, trial=trial, zeros="between" if spread else "after",
            )
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("c", "tvm", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--cases", default="T4,T6", help="cases of part tvm")
    ap.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help="part tvm: <suite mode>:<dtype> pairs (int8 on the mode's target, float32 on llvm)",
    )
    ap.add_argument("--top", type=int, default=3, help="finalists of each tune (part tvm)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if "avx512_vnni" not in cpu_flags():
        raise SystemExit(f"{cpu_model()} has no AVX512-VNNI: nothing to time")
    started = time.time()
    rows = c_part(a.rounds, a.calls) if a.part in ("c", "both") else []
    if a.part in ("tvm", "both"):
        for config in dict.fromkeys(a.configs.split(",")):
            rows += tvm_part(a.cases.split(","), a.rounds, a.calls, a.top, config)
    stamp = machine_stamp()
    for r in rows:
        r.update(stamp)
        print(f"{r['part']:4s} {r['variant']:32s} {r['us']:8.2f} us  {r['speed']:5.3f}  "
              f"{r['gops']:6.1f} G op/s")  # fmt: skip
    name = f"store_spread-{machine_slug()}-{stamp['date']}.csv"
    out = write_rows(a.out or REPO_ROOT / "benchmarks" / "results" / name, [
        {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for r in rows
    ])  # fmt: skip
    print(f"{out} ({time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
