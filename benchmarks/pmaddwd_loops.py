"""The int8 micro-kernel of a CPU without VNNI, five ways, timed in L1 (issue 25).

heronlike's ``dlboost -general`` tensorizes u8 × s8 onto the exact ``vpmaddwd`` intrinsic
(:data:`heronlike.dla_targets.dlboost.PMADDWD_AVX2`): every call widens its 16 bytes of B with
``vpmovsxbw`` and broadcasts a zero-extended pair of A (``vmovd`` + ``vpmovzxbw`` +
``vpbroadcastd``) before its ``vpmaddwd`` and ``vpaddd``. Its tuned GEMMs and convolutions run
at 24-46 % of the ``vpmaddwd`` peak (``benchmarks/peak.py``). This benchmark asks how much of
that the instruction mix explains: one ``m × n`` register tile (``m`` rows of A by ``n``
vectors of 8 int32 columns), its operands in L1, its reduction loop written five ways in C
with AVX2 intrinsics:

* ``widen_ab``: today's intrinsic (A u8 and B s8 in memory, both widened in the loop);
* ``widen_a``: B pre-widened to int16 when the weight is packed (``vpmaddwd`` takes it from
  memory), A still widened;
* ``widen_b``: A pre-widened to int16 (a materialized copy of the activations, an int16 pair
  broadcast from memory with ``vpbroadcastd``), B still widened in the loop;
* ``none``: A and B pre-widened (an int16 pair broadcast from memory with ``vpbroadcastd``), the
  loop only ``vpmaddwd`` + ``vpaddd``;
* ``maddubs``: what FBGEMM and oneDNN run on AVX2 (``vpmaddubsw`` on raw bytes, then
  ``vpmaddwd`` by ones, then ``vpaddd``): 32 products per ``vpmaddubsw``, but it saturates
  at int16 and is not exact for u8 × s8 (shown for reference, not a candidate).

Each is checked against numpy's ``A @ W`` and timed on one thread in ``--rounds`` rounds
(every kernel once per round; ``--repeats`` samples of ``--seconds`` each), the median kept. It
is reported in int8 G op/s (2 per multiply-add) and as a share of the ``pmaddwd_s16_avx2`` peak
measured in the same process (:func:`benchmarks.peak.measure_peaks`, one thread; a loop of
``vpmaddwd`` alone, so even the ``none`` variant, which adds a ``vpaddd`` per ``vpmaddwd``,
needs 4 vector instructions a cycle to reach it).

    python benchmarks/pmaddwd_loops.py                   # tiles 2x4, 1x8, 4x2, 3x4
    python benchmarks/pmaddwd_loops.py --tiles 2x4 --csv benchmarks/out/pmaddwd_loops.csv
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.csv_rows import write_rows  # noqa: E402
from heronlike.host import cpu_flags, machine_stamp  # noqa: E402

VARIANTS = ("widen_ab", "widen_a", "widen_b", "none", "maddubs")
#: int8 k-steps per call of the kernel (the reduction's length; operands stay in L1)
K = 512
LANES = 8  # int32 lanes of a ymm register


def _load_a(variant: str, r: int) -> str:
    """C for the broadcast of row ``r``'s operand at reduction step ``k`` (pairs; quads for
    ``maddubs``)."""
    if variant in ("widen_ab", "widen_a"):  # u8 pair -> zero-extended int16 pair, broadcast
        return (
            f"__m256i a{r} = _mm256_broadcastd_epi32(_mm_cvtepu8_epi16(_mm_cvtsi32_si128("
            f"*(const unsigned short *)(A + {r} * K + k))));"
        )
    if variant in ("widen_b", "none"):  # pre-widened int16 pair, broadcast from memory
        return f"__m256i a{r} = _mm256_set1_epi32(*(const int *)(A16 + {r} * K + k));"
    return f"__m256i a{r} = _mm256_set1_epi32(*(const int *)(A + {r} * K + k));"  # u8 quad


def _load_b(variant: str, c: int) -> str:
    """C for vector ``c`` of B at reduction step ``k`` (8 lanes × 2 int16, or × 4 bytes)."""
    if variant in ("widen_ab", "widen_b"):
        return (
            f"__m256i b{c} = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)"
            f"(B + (k / 2) * NB * 16 + {c} * 16)));"
        )
    if variant in ("widen_a", "none"):
        return (
            f"__m256i b{c} = _mm256_loadu_si256((const __m256i *)"
            f"(B16 + (k / 2) * NB * 16 + {c} * 16));"
        )
    return (
        f"__m256i b{c} = _mm256_loadu_si256((const __m256i *)(B + (k / 4) * NB * 32 + {c} * 32));"
    )


def kernel_source(variant: str, m: int, n: int) -> str:
    """C of one kernel: ``C[m][n*8] (int32) += A[m][K] (u8) · B[K][n*8] (s8)`` over K steps in
    the packed layouts the variant reads (``B``: ``[K/2][n][8][2]`` bytes, ``[K/4][n][8][4]``
    for ``maddubs``; ``B16``/``A16``: the same widened to int16), ``reps`` times."""
    step = 4 if variant == "maddubs" else 2
    body = [_load_a(variant, r) for r in range(m)] + [_load_b(variant, c) for c in range(n)]
    for r in range(m):
        for c in range(n):
            if variant == "maddubs":
                prod = f"_mm256_madd_epi16(_mm256_maddubs_epi16(a{r}, b{c}), ones)"
            else:
                prod = f"_mm256_madd_epi16(a{r}, b{c})"
            body.append(f"c{r}_{c} = _mm256_add_epi32(c{r}_{c}, {prod});")
    accs = [f"c{r}_{c}" for r in range(m) for c in range(n)]
    stores = [
        f"_mm256_storeu_si256((__m256i *)(C + {r} * NB * 8 + {c} * 8), c{r}_{c});"
        for r in range(m)
        for c in range(n)
    ]
    name = f"k_{variant}_{m}x{n}"
    return f"""
void {name}(const unsigned char *A, const short *A16, const signed char *B, const short *B16,
            int *C, long reps) {{
    const int NB = {n};
    const __m256i ones = _mm256_set1_epi16(1);
    (void)ones; (void)A; (void)A16; (void)B; (void)B16; (void)NB;
    __m256i {", ".join(f"{a} = _mm256_setzero_si256()" for a in accs)};
    for (long rep = 0; rep < reps; ++rep) {{
        for (int k = 0; k < K; k += {step}) {{
            {chr(10).join("            " + line for line in body).strip()}
        }}
        __asm__ volatile("" ::: "memory");
    }}
    {chr(10).join("    " + s for s in stores).strip()}
}}
"""


def source(tiles: list[tuple[int, int]]) -> str:
    kernels = [kernel_source(v, m, n) for m, n in tiles for v in VARIANTS]
    return f"#include <immintrin.h>\n#define K {K}\n" + "\n".join(kernels)


def build(tiles: list[tuple[int, int]], work: Path) -> ctypes.CDLL:
    c_file, so = work / "loops.c", work / "loops.so"
    c_file.write_text(source(tiles))
    cmd = ["gcc", "-O2", "-mavx2", "-mfma", "-shared", "-fPIC", str(c_file), "-o", str(so)]
    subprocess.run(cmd, check=True)
    return ctypes.CDLL(str(so))


def _pack(w, n: int, k_per_lane: int):
    """The ``(K, n*8)`` matrix ``w`` in the kernel's layout ``[K/k][n][8][k]``, flat."""
    import numpy as np

    return np.ascontiguousarray(
        w.reshape(K // k_per_lane, k_per_lane, n, LANES).transpose(0, 2, 3, 1)
    ).ravel()


def _aligned(array, alignment: int = 64):
    """A copy of ``array`` whose data starts on an ``alignment``-byte boundary."""
    import numpy as np

    raw = np.empty(array.nbytes + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def time_kernel(lib, variant: str, m: int, n: int, seconds: float, repeats: int):
    """``(G op/s, exact)`` of one kernel on this thread: the median of ``repeats`` samples of
    about ``seconds`` each, and whether one call equals ``A @ W`` computed by numpy."""
    import time

    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (m, K), dtype=np.uint8)
    w = rng.integers(-128, 128, (K, n * LANES), dtype=np.int8)
    b = _pack(w, n, 4 if variant == "maddubs" else 2)
    # every operand 64-byte aligned, as TVM allocates them: no load splits a cache line
    a, a16 = _aligned(a), _aligned(a.astype(np.int16))
    b, b16 = _aligned(b), _aligned(b.astype(np.int16))
    c = _aligned(np.zeros((m, n * LANES), dtype=np.int32))
    fn = getattr(lib, f"k_{variant}_{m}x{n}")
    fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_long]
    fn.restype = None
    ptrs = [x.ctypes.data for x in (a, a16, b, b16, c)]
    fn(*ptrs, 1)
    exact = bool(np.array_equal(c.astype(np.int64), a.astype(np.int64) @ w.astype(np.int64)))
    reps = 1
    while True:  # calibrate: double until one call takes 20 ms
        t0 = time.perf_counter()
        fn(*ptrs, reps)
        dt = time.perf_counter() - t0
        if dt > 0.02:
            break
        reps *= 2
    reps = max(1, int(reps * seconds / dt))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*ptrs, reps)
        samples.append(time.perf_counter() - t0)
    ops = 2.0 * m * n * LANES * K * reps
    return ops / statistics.median(samples) / 1e9, exact


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiles", default="2x4,1x8,4x2,3x4", help="register tiles m x n")
    p.add_argument("--seconds", type=float, default=0.2, help="seconds per sample")
    p.add_argument("--repeats", type=int, default=5, help="samples per kernel and round")
    p.add_argument("--rounds", type=int, default=3, help="rounds over every kernel, in turn")
    p.add_argument("--csv", default=None, help="write the rows to this CSV")
    a = p.parse_args(argv)
    if "avx2" not in cpu_flags():
        print("this CPU has no AVX2", file=sys.stderr)
        return 1
    from benchmarks.peak import measure_peaks

    tiles = [tuple(int(v) for v in t.split("x")) for t in a.tiles.split(",")]
    peak = measure_peaks(threads=[1], repeats=3, kernels=["pmaddwd_s16_avx2"])[0]["ops_per_s"]
    print(f"pmaddwd_s16_avx2 peak: {peak / 1e9:.1f} G op/s on one thread")
    kernels = [(m, n, v) for m, n in tiles for v in VARIANTS]
    gops: dict[tuple[int, int, str], list[float]] = {k: [] for k in kernels}
    exact: dict[tuple[int, int, str], bool] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(tiles, Path(tmp))
        for _ in range(a.rounds):  # every kernel once per round: a slow spell hits all alike
            for key in kernels:
                rate, exact[key] = time_kernel(lib, key[2], key[0], key[1], a.seconds, a.repeats)
                gops[key].append(rate)
    out = []
    for m, n, variant in kernels:
        rate = statistics.median(gops[(m, n, variant)])
        out.append(
            dict(
                tile=f"{m}x{n}",
                variant=variant,
                gops=rate,
                pct_peak=100 * rate * 1e9 / peak,
                exact=exact[(m, n, variant)],
                peak_gops=peak / 1e9,
                threads=1,
                rounds=a.rounds,
                **machine_stamp(),
            )
        )
        print(
            f"{m}x{n} {variant:9s} {rate:7.1f} G op/s {out[-1]['pct_peak']:5.1f} % of peak"
            + ("" if exact[(m, n, variant)] else "  (not exact)")
        )
    if a.csv:
        write_rows(a.csv, out)
        print(f"wrote {a.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
