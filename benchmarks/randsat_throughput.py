"""Throughput of RandSAT (Heron ASPLOS'23 §5) on a DL Boost GEMM 1024^3 schedule space.

Pins itself to one core, draws for ``--seconds`` and prints the distinct valid assignments per
second, the per-solve latency (p50 / p95 / max, milliseconds) and the timeouts. Target: >= 100
distinct valid assignments per second. Uses the real space from :mod:`heronlike.space` when that
module is importable, otherwise the hand-built :func:`gemm_like_csp`.

Usage: ``python benchmarks/randsat_throughput.py --seconds 10 --seed 0``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from heronlike.csp import CSP, Eq, In, Le, Prod, Select, Sum
from heronlike.sampler import RandSAT


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def _split(csp: CSP, axis: str, extent: int, levels: int, last: int | None = None) -> list[str]:
    """Split factors of ``axis``; a fixed ``last`` (intrinsic) level is a var, not a knob."""
    names = [
        csp.var(f"{axis}{i}", 1, extent, knob=last is None or i < levels - 1, doc=f"{axis} split")
        for i in range(levels)
    ]
    csp.add(Prod(extent, tuple(names)))
    for name in names if last is None else names[:-1]:
        csp.add(In(name, _divisors(extent)))
    if last is not None:
        csp.add(Eq(names[-1], last))
    return names


def _product(csp: CSP, name: str, factors: list[str], hi: int) -> str:
    csp.var(name, 1, hi)
    csp.add(Prod(name, tuple(factors)))
    return name


def gemm_like_csp(m: int = 1024, n: int = 1024, k: int = 1024) -> CSP:
    """A hand-built CSP shaped like Heron's DL Boost GEMM space (int8, VNNI 16x4 intrinsic).

    M is split in 3 levels, N in 4 (last fixed to 16 lanes), K in 3 (last fixed to 4); a register
    tile of at most 28 vectors; A, B and C tile footprints in bytes under a 32 KiB L1 and a 1 MiB
    L2; a parallel extent; a cache-write location chosen among 2 options; an unroll knob.
    """
    csp = CSP()
    ms = _split(csp, "m", m, 3)
    ns = _split(csp, "n", n, 4, last=16)
    ks = _split(csp, "k", k, 3, last=4)
    reg = _product(csp, "reg_tile", [ms[2], ns[2]], m * n)
    csp.add(Le(reg, 28))
    for level, cap in ((1, 32 * 1024), (0, 1024 * 1024)):
        tm = _product(csp, f"tm{level}", ms[level + 1 :], m)
        tn = _product(csp, f"tn{level}", ns[level + 1 :], n)
        tk = _product(csp, f"tk{level}", ks[level + 1 :], k)
        fa = _product(csp, f"bytes_a{level}", [tm, tk], m * k)
        fb = _product(csp, f"bytes_b{level}", [tk, tn], k * n)
        fc = _product(csp, f"elems_c{level}", [tm, tn], m * n)
        total = csp.var(f"bytes_l{2 - level}", 0, m * k + k * n + 4 * m * n)
        csp.add(Sum(total, (fa, fb, fc), (1, 1, 4)))
        csp.add(Le(total, cap))
    par = _product(csp, "parallel", [ms[0], ns[0]], m * n)
    csp.add(Le(par, 4096))
    pos = csp.var("cache_write_pos", 0, 1, knob=True, doc="compute-at position of C.local")
    inner = _product(csp, "cw_inner", ns[2:], n)
    cw = csp.var("cache_write_extent", 1, n)
    csp.add(Select(cw, pos, ("tn1", inner)))
    unroll = csp.var("unroll", 0, 512, knob=True, doc="auto_unroll_max_step")
    csp.add(In(unroll, (0, 16, 64, 512)))
    return csp


def _te_gemm(m: int, n: int, k: int) -> list:
    """The int8 GEMM ``C[i, j] = sum_r A[i, r] * B[j, r]`` as TVM te tensors."""
    from tvm import te

    a = te.placeholder((m, k), "uint8", "A")
    b = te.placeholder((n, k), "int8", "B")
    r = te.reduce_axis((0, k), "r")
    c = te.compute(
        (m, n), lambda i, j: te.sum(a[i, r].astype("int32") * b[j, r].astype("int32"), axis=r), "C"
    )
    return [a, b, c]


def build_csp() -> tuple[CSP, str]:
    """The real DL Boost GEMM 1024^3 CSP if heronlike.space exists, else gemm_like_csp()."""
    try:
        from heronlike.space import generate_space
        from heronlike.target import get_target
    except ImportError as err:
        return gemm_like_csp(), f"hand-built gemm_like_csp(1024, 1024, 1024) ({err})"
    try:
        from heronlike import ops
    except ImportError:  # heronlike.ops not written yet: the same GEMM straight from te
        compute, how = _te_gemm(1024, 1024, 1024), "te GEMM 1024^3 int8"
    else:
        compute, how = ops.gemm(1024, 1024, 1024, dtype="int8"), "ops.gemm(1024^3, int8)"
    space = generate_space(compute, get_target("dlboost"))
    return space.csp, f"heronlike.space.generate_space({how}, dlboost)"


def main() -> None:
    """Parse the arguments, run the measurement and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement time (seconds)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampler")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    csp, source = build_csp()
    print(f"CSP: {source}")
    print(
        f"     {len(csp.vars)} variables ({len(csp.knobs)} knobs), "
        f"{len(csp.constraints)} constraints"
    )
    sampler = RandSAT(csp, seed=args.seed)
    seen: set[tuple[int, ...]] = set()
    latencies: list[float] = []  # seconds per draw (one sample(1) call per draw)
    invalid = 0
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        draws = sampler.stats.draws
        t0 = time.perf_counter()
        batch = sampler.sample(1, exclude=seen)
        latencies.append((time.perf_counter() - t0) / max(1, sampler.stats.draws - draws))
        for a in batch:
            invalid += bool(csp.violations(a))
            seen.add(sampler.key(a))
    elapsed = time.perf_counter() - start
    stats = sampler.stats
    lat = np.array(latencies) * 1e3
    valid = len(seen) - invalid
    print(
        f"distinct valid assignments: {valid} in {elapsed:.1f} s = {valid / elapsed:.0f}/s "
        f"(target >= 100/s)"
    )
    print(
        f"per-solve latency (ms): p50 {np.percentile(lat, 50):.2f}  "
        f"p95 {np.percentile(lat, 95):.2f}  max {lat.max():.2f}"
    )
    print(
        f"draws {stats.draws}, duplicates {stats.duplicates}, timeouts {stats.timeouts}, "
        f"retries {stats.retries}, invalid {invalid}"
    )


if __name__ == "__main__":
    main()
