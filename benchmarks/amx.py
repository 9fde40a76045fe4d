"""AMX (dla_targets/amx.py): what can be checked on any x86 host, and the comparison for an AMX
host.

``count`` (any x86 host, no AMX needed): for each case, RandSAT samples of the ``amx`` space
built for ``-mcpu=sapphirerapids``; a sample is valid when it satisfies the CSP (tile budget,
tile shapes), TVM builds it, and its assembly is the micro-kernel's
(:func:`heronlike.dla_targets.amx.check_tile_assembly`: C tiles zeroed per register tile, only
A and B tiles loaded in the reduction loop, ``tdpbusd`` into C tiles only, C stored once). One
CSV row per case.

``compare`` (needs ``amx_tile`` / ``amx_int8``): in one run, per case, heronlike tuned on
``amx`` and on ``dlboost`` (VNNI) with the suite's tuning call, then both best kernels and
PyTorch's int8 paths (oneDNN: ``torch.ao.nn.quantized`` with pre-packed weights, ``torch.
_int_mm``; the fastest kept) timed by the suite's one harness (``benchmarks/suite.py``: fresh
processes, same threads, outputs checked bit-exact against numpy, the samples of both kernels
and of every PyTorch path taken in turn in the same processes: on this VM PyTorch timed in
processes of its own varied 0.55-0.96 ms on GEMM 1024 from one run to the next), with % of
the AMX and VNNI peaks measured by ``benchmarks/peak.py``'s ``tdpbusd`` and ``vpdpbusd``
loops in the same run.

Usage::

    python benchmarks/amx.py count --cases G1,B1,C2D1 --samples 32 --dtypes int8,bfloat16
    python benchmarks/amx.py compare --cases G1,B1,C2D1 --trials 200     # on an AMX host
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.csv_rows import write_rows  # noqa: E402
from benchmarks.suite import parse_case, split_cases  # noqa: E402
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


def measured_peaks(threads: int) -> dict[str, float | None]:
    """The AMX int8 (``tdpbusd`` loop) and AVX512-VNNI (``vpdpbusd`` loop) peaks measured on
    this CPU by ``benchmarks/peak.py`` on ``threads`` threads (op/s; None: not measurable here),
    keyed ``amx_peak`` and ``vnni_peak``."""
    from benchmarks import peak

    rows = {r["kernel"]: float(r["ops_per_s"]) for r in peak.measure_peaks(threads=[threads])}
    return {"amx_peak": rows.get("amx_u8s8_tile"), "vnni_peak": rows.get("vnni_u8s8_avx512")}


def compare_case(
    spec: str, args: argparse.Namespace, threads: int, peaks: dict[str, float | None], work: Path
) -> dict[str, Any]:
    """Tune case ``spec`` (int8) on ``amx`` and on ``dlboost`` with the suite's tuning call
    (:func:`benchmarks.suite.run_heronlike`: ``args.trials`` trials, ``args.seed``), then time
    both best kernels and PyTorch's int8 paths with the suite's harness
    (:func:`benchmarks.suite.time_tvm_kernels`: fresh processes, every output checked
    bit-exact against the numpy reference, the samples of both kernels and of every PyTorch
    path taken in turn in the same processes, pooled over the rounds). One CSV row: latencies
    in ms, ratios, each column's % of the measured AMX and VNNI peaks ``peaks`` (op/s, by
    kernel name of ``benchmarks/peak.py``) and % of the memory floor (``memory_floor_ms``:
    reading every operand and writing the result once, :func:`benchmarks.suite.
    time_memory_floor`; 100 %: as fast as memory allows)."""
    import numpy as np

    from benchmarks import suite
    from heronlike import ops
    from heronlike.dag import ComputeDAG
    from heronlike.reference import random_inputs, reference_outputs

    name, op, params, source = parse_case(spec)
    vnni = suite.resolve_mode("vnni")
    run_params, padded = suite.pad_to_intrinsic(op, params, vnni)
    compute = getattr(ops, op)(**run_params, dtype="int8")
    dag = ComputeDAG.from_compute(compute)
    arrays = random_inputs(dag, np.random.default_rng(args.seed))
    expected = reference_outputs(dag, arrays)
    flop = dag.flop()
    row: dict[str, Any] = {
        "case": name,
        "op": op,
        "params": suite._params_text(params),
        "shape_run": suite._params_text(run_params),
        "padded": padded,
        "source": source,
        "threads": threads,
        "trials": args.trials,
        "seed": args.seed,
        "gop": flop / 1e9,
        "timing": f"harness: {args.rounds} fresh processes, {threads} threads; in each, both "
        f"kernels and every PyTorch path take {suite.HARNESS_SAMPLES} samples >= 10 ms in turn; "
        "the median of all samples of all rounds",
    }
    kernels = {}
    for who, target, mnemonic in (("amx", "amx", "tdpbusd"), ("dlboost", "dlboost", "vpdpbusd")):
        mode = suite.Mode(who, target, f"heronlike on {target}", mnemonic=mnemonic)
        case_dir = work / suite._dirname(name) / who
        shutil.rmtree(case_dir, ignore_errors=True)
        case_dir.mkdir(parents=True)
        print(f"[{name}] {op} {row['shape_run']}: {target} ({args.trials} trials) ...", flush=True)
        tuned, kernel, _ = suite.run_heronlike(compute, args, mode, case_dir, arrays, who=who)
        row.update({k: v for k, v in tuned.items() if not k.startswith("_")})
        if kernel:
            kernels[who] = kernel
    print(f"[{name}] timing: amx, dlboost, PyTorch ...", flush=True)
    log: list[dict[str, Any]] = []
    timed = suite.time_tvm_kernels(
        kernels,
        expected,
        work,
        threads,
        rounds=args.rounds,
        log=log,
        prepare=("amx",),
        torch_case=(op, run_params),
    )
    row["harness_log"] = suite.harness_log_text(log)
    latency, _, row["pytorch_impl"] = timed.pop("pytorch")
    row["pytorch_ms"] = latency * 1e3 if latency else None
    for who, (latency, correct, msg) in timed.items():
        row[f"{who}_exact"] = bool(correct)
        row[f"{who}_ms"] = latency * 1e3 if latency is not None and correct else None
        row[f"{who}_status"] = "ok" if row[f"{who}_ms"] else msg or "wrong_result"
    for who in ("amx", "dlboost", "pytorch"):
        ms = row.get(f"{who}_ms")
        for peak_name, peak in peaks.items():
            pct = 100 * flop / (ms / 1e3) / peak if ms and peak else None
            row[f"{who}_pct_{peak_name}"] = pct
    # what moving the operands and the result once costs here: the bound of a small-K case
    read_bytes, write_bytes = suite.dag_bytes(dag)
    floor = suite.time_memory_floor(read_bytes, write_bytes, threads)
    row["bytes_read"], row["bytes_written"] = read_bytes, write_bytes
    row["memory_floor_ms"] = floor * 1e3 if floor else None
    for who in ("amx", "dlboost", "pytorch"):
        ms = row.get(f"{who}_ms")
        row[f"{who}_pct_floor"] = 100 * row["memory_floor_ms"] / ms if ms and floor else None
    if row.get("amx_ms"):
        for who in ("dlboost", "pytorch"):
            other = row.get(f"{who}_ms")
            row[f"amx_vs_{who}"] = other / row["amx_ms"] if other else None
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
    write_rows(path, ({**r, **stamp} for r in rows))
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("count", "compare"))
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
    ap.add_argument("--samples", type=int, default=32, help="count: candidates per case")
    ap.add_argument("--dtypes", default="int8", help="count: int8 and/or bfloat16")
    ap.add_argument("--trials", type=int, default=200, help="compare: trials per target")
    ap.add_argument("--seed", type=int, default=0, help="compare: tuning seed and inputs")
    ap.add_argument("--batch", type=int, default=16, help="compare: candidates per batch")
    ap.add_argument("--explorer", default=None, help="compare: heronlike explorer (cga)")
    ap.add_argument(
        "--work",
        default=str(RESULTS.parent / "out" / "amx_compare"),
        help="compare: records and kernels (one folder per case and target)",
    )
    ap.add_argument("--rounds", type=int, default=5, help="compare: harness processes")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--csv", type=Path, default=None)
    args = ap.parse_args(argv)
    cases = split_cases(args.cases)
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
    if args.command == "compare":
        args.time_limit, args.explorer = None, args.explorer or "cga"
        peaks = measured_peaks(threads)
        print(f"peaks on {threads} threads: " + ", ".join(
            f"{k} {v / 1e9:.0f} G op/s" for k, v in peaks.items() if v), flush=True)  # fmt: skip
        work = Path(args.work)
    for spec in cases:
        if args.command == "count":
            found = [count_case(spec, args.samples, dtype=d) for d in args.dtypes.split(",")]
        else:
            found = [compare_case(spec, args, threads, peaks, work)]
            found[0].update({k: v / 1e9 if v else None for k, v in peaks.items()})
        for row in found:
            print(row, flush=True)
        rows += found
    # count builds for Sapphire Rapids on any host; compare runs on this one
    built_for = "sapphirerapids-" if args.command == "count" else ""
    _write(rows, args.csv or RESULTS / f"amx_{args.command}-{built_for}{cpu}-{date}.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
