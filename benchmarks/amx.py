"""AMX (dla_targets/amx.py): what can be checked on any x86 host, and the comparison for an AMX
host.

``count`` (any x86 host, no AMX needed): for each case, RandSAT samples of the ``amx`` space
built for ``-mcpu=sapphirerapids``; a sample is valid when it satisfies the CSP (tile budget,
tile shapes), TVM builds it, and its assembly is the micro-kernel's
(:func:`heronlike.dla_targets.amx.check_tile_assembly`: C tiles zeroed per register tile, only
A and B tiles loaded in the reduction loop, ``tdpbusd`` into C tiles only, C stored once). One
CSV row per case.

``compare`` (needs ``amx_tile`` / ``amx_int8``): in one run, heronlike tuned on ``amx`` and on
``dlboost`` (VNNI) and PyTorch's int8 GEMM (``torch._int_mm``, oneDNN) through the suite's
harness (``benchmarks/suite.py``: same threads and repeats), with % of the AMX peak measured
by ``benchmarks/peak.py``'s ``tdpbusd`` loop in the same run.

Usage::

    python benchmarks/amx.py count --cases G1,B1,C2D1 --samples 32 --dtypes int8,bfloat16
    python benchmarks/amx.py compare --cases G1,B1,C2D1 --trials 200     # on an AMX host
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.suite import parse_case, time_pytorch  # noqa: E402
from heronlike.host import cpu_model, cpu_signature, machine_slug  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_CASES = ("G1", "B1", "C2D1")


def count_case(spec: str, samples: int, seed: int = 0, dtype: str = "int8") -> dict[str, Any]:
    """Sample, check and build ``samples`` candidates of case ``spec`` (``dtype``: ``int8`` or
    ``bfloat16``) on ``amx`` for Sapphire Rapids; return the CSV row (counts, shapes sampled,
    seconds)."""
    import tvm

    from heronlike import ops
    from heronlike.dla_targets import amx
    from heronlike.errors import HeronlikeError
    from heronlike.intrinsic import shape_family
    from heronlike.sampler import RandSAT
    from heronlike.space import generate_space

    name, op, params, _ = parse_case(spec)
    row: dict[str, Any] = {
        "case": name,
        "op": op,
        "dtype": dtype,
        "params": " ".join(f"{k}={v}" for k, v in params.items()),
    }
    try:
        compute = getattr(ops, op)(**params, dtype=dtype)
        space = generate_space(compute, "amx -mcpu=sapphirerapids")
    except HeronlikeError as err:  # a compute the tiles cannot run: a row that says why
        return {**row, "samples": 0, "valid": 0, "failures": f"{type(err).__name__}: {err}"}
    ((stage, match),) = space.matches.items()
    family = shape_family(space.target.intrinsics, match.intrinsic)
    target = tvm.target.Target(space.target.tvm_target())
    t0 = time.perf_counter()
    drawn = RandSAT(space.csp, seed=seed).sample(samples)
    shapes: collections.Counter[str] = collections.Counter()
    in_budget = built = with_tiles = 0
    failures: list[str] = []
    for s in drawn:
        member = family[s[f"{stage}.intrinsic"]]
        shapes[f"{member.m}x{member.n}"] += 1
        ok_csp = not space.csp.violations(s) and s[f"{stage}.tiles"] <= amx.TILE_REGISTERS
        in_budget += ok_csp
        try:
            asm = str(tvm.compile(space.program(s), target=target).mod.inspect_source("asm"))
        except Exception as err:  # noqa: BLE001 - a failed build is a count, not a crash
            failures.append(type(err).__name__)
            continue
        built += 1
        with_tiles += ok_csp and amx.check_tile_assembly(asm, member.register_tiles["c"])["ok"]
    return {
        **row,
        "samples": len(drawn),
        "in_budget": in_budget,
        "built": built,
        "valid": with_tiles,
        "valid_pct": round(100.0 * with_tiles / max(len(drawn), 1), 1),
        "shapes": " ".join(f"{k}:{v}" for k, v in sorted(shapes.items())),
        "failures": " ".join(failures),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def measured_amx_peak(threads: int) -> float | None:
    """The AMX int8 peak measured on this CPU by ``benchmarks/peak.py``'s ``tdpbusd`` loop on
    ``threads`` threads (op/s), or None without AMX."""
    from benchmarks import peak

    rows = peak.measure_peaks(threads=[threads])
    return next((float(r["ops_per_s"]) for r in rows if r["kernel"] == "amx_u8s8_tile"), None)


def compare_case(spec: str, trials: int, threads: int, peak: float | None) -> dict[str, Any]:
    """Tune case ``spec`` on ``amx`` and on ``dlboost`` and time PyTorch's int8 path, in this
    run; latencies in ms, each column's % of the measured AMX peak ``peak`` (op/s)."""
    import heronlike
    from heronlike import ops

    name, op, params, _ = parse_case(spec)
    compute = getattr(ops, op)(**params, dtype="int8")
    row: dict[str, Any] = {"case": name, "params": params, "threads": threads}
    flop = None
    for target in ("amx", "dlboost"):
        records = RESULTS.parent / "out" / f"amx_compare_{target}.sqlite"
        records.parent.mkdir(parents=True, exist_ok=True)
        result = heronlike.tune(compute, target=target, trials=trials, seed=0, records=records)
        row[f"{target}_ms"] = result.latency_s * 1e3 if result.latency_s else None
        row[f"{target}_valid"] = f"{result.valid}/{result.trials_run}"
        flop = result.flop
    torch_s, what = time_pytorch(op, params, threads)
    row["pytorch_ms"] = torch_s * 1e3 if torch_s else None
    row["pytorch"] = what
    for col in ("amx", "dlboost", "pytorch"):
        ms = row[f"{col}_ms"]
        row[f"{col}_pct_peak"] = 100 * flop / (ms / 1e3) / peak if ms and peak and flop else None
    if row["amx_ms"]:
        for col in ("dlboost", "pytorch"):
            row[f"amx_vs_{col}"] = row[f"{col}_ms"] / row["amx_ms"] if row[f"{col}_ms"] else None
    return row


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    import tvm

    stamp = {
        "cpu_model": cpu_model(),
        "cpu_signature": cpu_signature(),
        "tvm_version": tvm.__version__,
        "date": dt.date.today().isoformat(),
    }
    fields = list(dict.fromkeys(k for r in rows for k in r)) + list(stamp)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fields)
        writer.writeheader()
        writer.writerows({**r, **stamp} for r in rows)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("count", "compare"))
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
    ap.add_argument("--samples", type=int, default=32, help="count: candidates per case")
    ap.add_argument("--dtypes", default="int8", help="count: int8 and/or bfloat16")
    ap.add_argument("--trials", type=int, default=200, help="compare: trials per target")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--csv", type=Path, default=None)
    args = ap.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    date = dt.date.today().isoformat()
    cpu = machine_slug()
    if args.command == "compare":
        from heronlike.dla_targets import amx

        if not amx.host_has_amx():
            print(
                f"compare needs an AMX CPU ({', '.join(amx.HOST_FLAGS)} in /proc/cpuinfo); "
                "this one is " + cpu_model() + ". `count` runs on any x86 host.",
                file=sys.stderr,
            )
            return 2
    rows = []
    threads = args.threads or len(os.sched_getaffinity(0))
    peak = measured_amx_peak(threads) if args.command == "compare" else None
    for spec in cases:
        if args.command == "count":
            found = [count_case(spec, args.samples, dtype=d) for d in args.dtypes.split(",")]
        else:
            found = [compare_case(spec, args.trials, threads, peak)]
        for row in found:
            print(row, flush=True)
        rows += found
    _write(rows, args.csv or RESULTS / f"amx_{args.command}-sapphirerapids-{cpu}-{date}.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
