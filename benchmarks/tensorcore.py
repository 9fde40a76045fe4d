"""heronlike on NVIDIA TensorCores (``"cuda -tensorcore"``): compile counts here, timings on a GPU.

This machine has nvcc and no GPU, so the work is split in subcommands:

* ``count``: for each of Heron's TensorCore cases (fp16 in, fp32 accumulate), build
  ``--samples`` random valid schedules (RandSAT) with nvcc and count how many build, why the others
  fail (spill, registers, shared memory, nvcc, TVM), the ptxas register range, how many needed
  ptxas's register-usage level 10 after spilling at 5 (``ptxas_10``), how many needed one block
  per SM in their launch bounds after spilling at both (``one_block``), and whether the
  CSP's shared bytes equal the built kernel's; with ``cuobjdump`` (the ``nvidia-cuda-cuobjdump``
  and ``nvidia-cuda-nvdisasm`` wheels), how many cubins hold ``HMMA``, ``LDSM`` and ``LDGSTS``
  (``cp.async``) and how many hold ``LDGSTS`` without a pipelined fetch or lack it with one
  (``ldgsts_mismatch``). Writes ``results/tensorcore_compile.csv``.
* ``bundle``: one tuning round per case (:func:`heronlike.offline.prepare_bundle`) written as an
  offline bundle, optionally merged into one bundle folder; prints its size and the command to
  run on the GPU machine.
* ``import``: every ``results.json`` found under a folder into the records.
* ``finish``: the ``--top`` fastest valid candidates per case from the records, gathered from
  their search bundles into one *finish* bundle that re-checks and re-times them with more
  repeats (``--repeat``) beside PyTorch in the same run: the search's best is a minimum over
  noisy medians, biased low, and its baseline may come from another run.
* ``report``: per case, heronlike's best against the PyTorch (cuBLAS/cuDNN) baseline timed in
  the same run: from the newest finish run when there is one, else the records' best and the
  newest search run's baseline (``source`` says which); TFLOP/s, GPU; CSV and a plot.

::

    python benchmarks/tensorcore.py count --cases G1,G3,C1 --samples 8
    python benchmarks/tensorcore.py bundle --cases G1,B1 --batch-size 32 --merge
    python benchmarks/tensorcore.py import --bundles benchmarks/out/tc_bundles
    python benchmarks/tensorcore.py finish --top 3 --repeat 100
    python benchmarks/tensorcore.py report --plot

A case the TensorCore rules cannot map (a heronlike error such as ``UnsupportedShapeError``) is
reported as ``unsupported`` with the message, any other failure as ``error``; the others go on.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import re
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from heronlike.host import cpu_model
from heronlike.measure.run_bundle import BUNDLE_FILE, RESULTS_FILE

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: make ``benchmarks.*`` importable
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import csv_rows  # noqa: E402

RESULTS = REPO_ROOT / "benchmarks" / "results"
OUT = REPO_ROOT / "benchmarks" / "out"
DEFAULT_RECORDS = OUT / "tensorcore_records.sqlite"
DEFAULT_BUNDLES = OUT / "tc_bundles"
DTYPE = "float16"  # heronlike.ops name: fp16 inputs, fp32 accumulator and output
DTYPE_LABEL = "float16->float32"  # the dtype column of the CSV files

# Heron's TensorCore cases (ASPLOS'23 artifact tests/figure6/configs; notes heron_repo.md §7.1)
# in *Heron's* argument order, converted by heron_to_params. G3/G5 use the true N = 1000.
TC_CASES: dict[str, tuple[str, tuple[int, ...]]] = {
    "G1": ("gemm", (1024, 1024, 1024)),
    "G2": ("gemm", (4096, 4096, 4096)),
    "G3": ("gemm", (32, 2048, 1000)),
    "G4": ("gemm", (32, 4096, 4096)),
    "G5": ("gemm", (32, 4096, 1000)),
    "B1": ("bmm", (12, 512, 64, 512)),
    "B2": ("bmm", (12, 512, 512, 64)),
    "C1": ("c2d", (16, 56, 56, 64, 64, 3, 3, 1, 1, 1)),
    "C2": ("c2d", (16, 56, 56, 64, 64, 1, 1, 1, 0, 1)),
    "C3": ("c2d", (16, 28, 28, 128, 128, 3, 3, 1, 1, 1)),
    "C4": ("c2d", (16, 28, 28, 128, 256, 1, 1, 2, 0, 1)),
    "C5": ("c2d", (16, 14, 14, 256, 256, 3, 3, 1, 1, 1)),
    "C6": ("c2d", (16, 14, 14, 256, 512, 1, 1, 2, 0, 1)),
}

# Heron's search-efficiency C2D (Fig. 12, heron_repo.md §7.3), for dense recordings of the space
# (``bundle --cases F12C --explorer rand``): not one of the default cases.
EXTRA_CASES: dict[str, tuple[str, tuple[int, ...]]] = {
    "F12C": ("c2d", (1, 56, 56, 64, 64, 1, 1, 1, 0, 1)),
}
ALL_CASES = {**TC_CASES, **EXTRA_CASES}

COUNT_COLUMNS = (
    "case", "op", "shape", "dtype", "arch", "nvcc_flags", "status", "samples", "ok", "ok_pct",
    "spill", "registers", "shared_memory", "nvcc", "build", "other", "other_kinds", "regs_min",
    "regs_median", "regs_max", "shared_mismatch", "no_param_arg", "ptxas_10", "one_block",
    "pipelined",
    "split", "mma", "swizzled", "sass_checked", "hmma", "ldsm", "ldgsts", "ldgsts_mismatch",
    "mma_ldsm", "seconds", "cpu",
    "nvcc_version", "tvm_version", "date",
)  # fmt: skip
FAIL_KINDS = ("spill", "registers", "shared_memory", "nvcc", "build")
COUNT_TABLE = (
    "case", "state", "samples", "ok", "ok_pct", *FAIL_KINDS, "other", "regs_min", "regs_median",
    "regs_max", "shared_mismatch", "no_param_arg", "ptxas_10", "pipelined", "split", "mma",
    "swizzled", "sass_checked", "hmma", "ldsm", "ldgsts", "ldgsts_mismatch", "mma_ldsm",
    "seconds",
)  # fmt: skip
REPORT_COLUMNS = (
    "case", "op", "shape", "dtype", "status", "source", "trials", "valid", "valid_pct",
    "heronlike_ms", "heronlike_iqr_ms", "search_best_ms", "baseline", "baseline_ms",
    "baseline_iqr_ms", "ratio", "baseline_fastest_ms", "baseline_runs", "ratio_fastest",
    "heronlike_tflops", "program",
    "baseline_tflops", "baseline_fp32out", "baseline_fp32out_ms", "ratio_fp32out", "rtol",
    "atol", "max_abs_err", "baseline_max_abs_err", "repeat", "warmup", "flush_l2_bytes", "gpu",
    "compute_capability", "driver", "torch", "measured", "date",
)  # fmt: skip
FINISH_EXPLORER = "finish"  # bundle.json "explorer" of a finish bundle
FINALISTS = 3  # candidates per workload re-timed on the GPU right after their search round
FINALISTS_FILE = "finalists.json"  # their results, beside the search round's results.json


# ------------------------------------------------------------------------------------------------
# cases and host


def heron_to_params(op: str, heron_args: Sequence[int]) -> dict[str, int]:
    """Keyword arguments of ``heronlike.ops.<op>`` from Heron's TensorCore argument order.

    For GEMM ``(M, K, N)``, BMM ``(B, M, K, N)`` and C2D (same order as ours) Heron's CUDA
    configs use the orders of its DL Boost ones, so ``benchmarks/suite.py``'s conversion serves
    both; C1D and C3D differ between Heron's targets and are not TensorCore cases here.
    """
    if op not in ("gemm", "bmm", "c2d"):
        raise ValueError(f"no TensorCore case conversion for {op!r}")
    from benchmarks.suite import heron_to_params as convert

    return convert(op, heron_args)


def case_compute(case: str) -> tuple[str, dict[str, int], Any]:
    """``(op, params in heronlike order, te compute)`` of a case name."""
    from heronlike import ops

    op, heron_args = ALL_CASES[case]
    params = heron_to_params(op, heron_args)
    return op, params, getattr(ops, op)(**params, dtype=DTYPE)


def shape_text(params: dict[str, int]) -> str:
    """``"M=1024 N=1024 K=1024"``: the shape in heronlike.ops argument order."""
    return " ".join(f"{k}={v}" for k, v in params.items())


def parse_cases(text: str | None) -> list[str]:
    """Case names from ``"G1,B1"`` (default: every case of :data:`TC_CASES`), checked against
    :data:`ALL_CASES`."""
    if not text:
        return list(TC_CASES)
    cases = [c.strip().upper() for c in text.split(",") if c.strip()]
    unknown = [c for c in cases if c not in ALL_CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(ALL_CASES)}")
    return cases


def why_failed(exc: BaseException) -> str:
    """``"unsupported: ..."`` for heronlike's typed errors (e.g. a shape the rules cannot map),
    ``"error: ..."`` for anything else (e.g. TVM rejecting a schedule); one line, shortened."""
    from heronlike.errors import HeronlikeError

    kind = "unsupported" if isinstance(exc, HeronlikeError) else "error"
    text = " ".join(str(exc).split())
    return f"{kind}: {type(exc).__name__}: {text[:600]}"


def target_string(arch: str) -> str:
    """The heronlike target string for ``arch``."""
    return f"cuda -tensorcore -arch={arch}"


def host_info() -> dict[str, str]:
    """CPU model, nvcc release, TVM version and the date, for every CSV row."""
    import tvm

    from heronlike.measure.cuda import nvcc_version

    cpu = cpu_model()
    return {
        "cpu": f"{cpu} ({os.cpu_count()} cores)",
        "nvcc_version": nvcc_version() or "none",
        "tvm_version": tvm.__version__,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def write_rows(
    path: Path, rows: list[dict[str, Any]], columns: Sequence[str], key: Sequence[str]
) -> None:
    """Write ``rows`` to the CSV ``path``, keeping the earlier rows whose ``key`` columns (e.g.
    case and arch) differ from every new row's: a rerun of a case replaces its row."""

    def ident(row: dict[str, Any]) -> tuple[str, ...]:
        return tuple(str(row.get(k, "")) for k in key)

    new_keys = {ident(row) for row in rows}
    kept: list[dict[str, Any]] = []
    if path.is_file():
        with path.open(newline="") as f:
            kept = [r for r in csv.DictReader(f) if ident(r) not in new_keys]
    order = {c: i for i, c in enumerate(TC_CASES)}
    merged = sorted(kept + rows, key=lambda r: (order.get(r["case"], 99), ident(r)))
    csv_rows.write_rows(path, merged, columns)


def print_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    """Print ``rows`` as an aligned text table of ``columns``."""
    cells = [[str("" if r.get(c) is None else r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


# ------------------------------------------------------------------------------------------------
# count


def csp_shared_bytes(assignment: dict[str, int]) -> int:
    """Shared bytes per block the CSP planned: the sum of its ``<stage>.shared.bytes``."""
    return sum(v for k, v in assignment.items() if re.fullmatch(r"[^.]+\.shared\.bytes", k))


def pipeline_knobs(assignment: dict[str, int]) -> tuple[bool, bool, bool]:
    """Whether a candidate pipelines its shared-memory fetches (``<stage>.stages`` > 1, so
    ``cp.async`` on sm_80+), whether it splits K (``<stage>.split_k`` > 1) and whether it
    swizzles its shared tiles (``<stage>.swizzle``)."""
    most = knob_max(assignment)
    return most("stages") >= 2, most("split_k") >= 2, most("swizzle") >= 1


def knob_max(assignment: dict[str, int]) -> Callable[[str], int]:
    """``knob -> the largest value of any stage's <stage>.<knob>`` in ``assignment`` (0 where no
    stage has it)."""

    def most(knob: str) -> int:
        return max(
            (v for k, v in assignment.items() if re.fullmatch(rf"[^.]+\.{knob}", k)), default=0
        )

    return most


def program_summary(space: Any, assignment: dict[str, int]) -> str:
    """What a candidate's knobs chose, in words: ``"mma.sync, 3 stages, split-K 2, swizzled"``
    (the intrinsic group, then only the knobs away from their plain setting)."""
    most = knob_max(assignment)
    parts = ["mma.sync" if uses_mma(space, assignment) else "wmma"]
    if most("stages") > 1:
        parts.append(f"{most('stages')} stages")
    if most("split_k") > 1:
        parts.append(f"split-K {most('split_k')}")
    if most("swizzle") >= 1:
        parts.append("swizzled")
    if most("fragment_stages") > 1:
        parts.append("fragments double-buffered")
    return ", ".join(parts)


def uses_mma(space: Any, assignment: dict[str, int]) -> bool:
    """Whether a candidate's ``<stage>.intrinsic`` picks an ldmatrix + mma.sync group."""
    for stage, match in space.matches.items():
        family = [
            i
            for i in space.target.intrinsics
            if i.group and i.signature == match.intrinsic.signature
        ]
        choice = assignment.get(f"{stage}.intrinsic")
        if choice is not None and family[choice].fragment_layout is not None:
            return True
    return False


def count_case(
    case: str, samples: int, arch: str, seed: int, timeout_s: float, nvcc_flags: str = ""
) -> dict[str, Any]:
    """Build ``samples`` distinct RandSAT samples of ``case`` and count the outcomes;
    ``nvcc_flags`` (a shell-quoted string) are appended to the builder's nvcc command."""
    import tvm

    from heronlike.measure import BuildInput
    from heronlike.measure.cuda import sass_opcodes
    from heronlike.sampler import RandSAT
    from heronlike.space import generate_space

    op, params, compute = case_compute(case)
    row: dict[str, Any] = {"case": case, "op": op, "shape": shape_text(params), "arch": arch}
    row["dtype"] = DTYPE_LABEL
    row["nvcc_flags"] = nvcc_flags
    t0 = time.perf_counter()
    try:
        space = generate_space(compute, target_string(arch))
        assignments = RandSAT(space.csp, seed=seed).sample(samples)
    except Exception as exc:  # noqa: BLE001 - reported per case, the other cases go on
        row["status"] = why_failed(exc)
        row["seconds"] = round(time.perf_counter() - t0, 1)
        return row
    kinds: dict[str, int] = {}
    inputs, planned, knobs = [], [], []
    tgt = space.target
    for a in assignments:
        try:
            mod_json = tvm.ir.save_json(space.program(a))
        except Exception:  # noqa: BLE001 - a schedule TVM rejects is a failed sample
            kinds["schedule"] = kinds.get("schedule", 0) + 1
            continue
        options = {**tgt.build_options(), "nvcc_flags": shlex.split(nvcc_flags)}
        inputs.append(BuildInput(mod_json, tgt.tvm_target(), options))
        planned.append(csp_shared_bytes(a))
        knobs.append((*pipeline_knobs(a), uses_mma(space, a)))
    builder = tgt.make_builder(timeout_s=timeout_s)
    try:
        results = builder.build(inputs)
        # SASS of each built cubin (while the builder's artifacts exist), None without cuobjdump
        sass = [
            sass_opcodes(Path(r.artifact_path) / "kernel.cubin") if r.ok else None for r in results
        ]
    finally:
        builder.close()
    regs, mismatch, no_param, level10, one_block = [], 0, 0, 0, 0
    ops = {"sass_checked": 0, "hmma": 0, "ldsm": 0, "ldgsts": 0, "ldgsts_mismatch": 0}
    ops["mma_ldsm"] = 0
    for res, shared, (pipelined, _, _, mma), opcodes in zip(
        results, planned, knobs, sass, strict=True
    ):
        if not res.ok:
            kinds[res.error_kind] = kinds.get(res.error_kind, 0) + 1
            continue
        if opcodes is not None:  # cp.async (LDGSTS) exactly in the pipelined candidates
            ops["sass_checked"] += 1
            for name in ("HMMA", "LDSM", "LDGSTS"):
                ops[name.lower()] += opcodes.get(name, 0) > 0
            ops["ldgsts_mismatch"] += (opcodes.get("LDGSTS", 0) > 0) != pipelined
            ops["mma_ldsm"] += mma and opcodes.get("LDSM", 0) > 0 and opcodes.get("HMMA", 0) > 0
        level10 += res.info.get("ptxas_level") == 10
        one_block += bool(res.info.get("min_blocks_per_sm"))
        regs.append(max((k["registers"] for k in res.info["kernels"].values()), default=0))
        built = max((launch["dynamic_shared_bytes"] for launch in res.info["launches"]), default=0)
        mismatch += built != shared
        no_param += any(  # a split-K partial-sum workspace is no parameter, by design
            i is None and not (launch.get("workspaces") or [None] * len(launch["args"]))[n]
            for launch in res.info["launches"]
            for n, i in enumerate(launch["args"])
        )
    ok = len(regs)
    others = {k: v for k, v in kinds.items() if k not in FAIL_KINDS}
    row.update(
        status="ok" if ok else "no candidate built",
        samples=len(assignments),
        ok=ok,
        ok_pct=round(100.0 * ok / max(1, len(assignments)), 1),
        other=sum(others.values()),
        other_kinds=" ".join(f"{k}:{v}" for k, v in sorted(others.items())),
        regs_min=min(regs) if regs else None,
        regs_median=statistics.median(regs) if regs else None,
        regs_max=max(regs) if regs else None,
        shared_mismatch=mismatch,
        no_param_arg=no_param,
        ptxas_10=level10,
        one_block=one_block,
        pipelined=sum(k[0] for k in knobs),
        split=sum(k[1] for k in knobs),
        swizzled=sum(k[2] for k in knobs),
        mma=sum(k[3] for k in knobs),
        **ops,
        seconds=round(time.perf_counter() - t0, 1),
        **{k: kinds.get(k, 0) for k in FAIL_KINDS},
    )
    return row


def cmd_count(args: argparse.Namespace) -> int:
    """``count``: compile-success statistics per case; one CSV row per case, written as each
    case finishes."""
    info = host_info()
    print(f"# {info['cpu']}, nvcc {info['nvcc_version']}, TVM {info['tvm_version']}", flush=True)
    t0 = time.perf_counter()
    from heronlike.intrinsic import import_tvmscript_module

    # once per process, not in a case's time
    import_tvmscript_module("tvm.s_tir.tensor_intrin.cuda")

    print(f"# TVM's CUDA intrinsic generators imported in {time.perf_counter() - t0:.1f} s")
    out = Path(args.out)
    rows = []
    for case in parse_cases(args.cases):
        try:
            row = count_case(
                case, args.samples, args.arch, args.seed, args.build_timeout, args.nvcc_flags
            )
        except Exception as exc:  # noqa: BLE001 - one case's failure does not stop the others
            row = {"case": case, "op": ALL_CASES[case][0], "arch": args.arch}
            row["nvcc_flags"] = args.nvcc_flags
            row["status"] = why_failed(exc)
        row.update(info)
        row["state"] = str(row["status"]).split(":")[0]
        rows.append(row)
        write_rows(out, [row], COUNT_COLUMNS, ("case", "arch", "nvcc_flags"))
        print(f"{case}: {row['status'][:200]} ({row.get('seconds')} s)", flush=True)
    print()
    print_table(rows, COUNT_TABLE)
    for row in rows:
        if not str(row["status"]).startswith("ok"):
            print(f"{row['case']}: {row['status']}")
    print(f"wrote {out}")
    return 0


# ------------------------------------------------------------------------------------------------
# bundle


def tree_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def merge_bundles(
    parts: list[tuple[str, Path]],
    dest: Path,
    extra: Sequence[tuple[str, Path, dict[str, Any]]] = (),
) -> Path:
    """One bundle holding every candidate of ``parts`` (``(label, bundle folder)``), with ids
    prefixed by the label (e.g. ``G1_r000_c00003``) so they stay unique, and the single
    candidates ``extra`` (``(label, bundle folder, candidate entry)``, e.g. earlier rounds' best).
    Workloads are kept once per key; the timing policy is the first part's."""
    from heronlike.measure.bundle import load_bundle

    workloads: dict[str, dict[str, Any]] = {}
    candidates = []
    policy: dict[str, Any] = {}
    whole = [(label, folder, None) for label, folder in parts]
    for label, folder, only in [*whole, *extra]:
        bundle = load_bundle(folder)
        policy = policy or bundle["policy"]
        for w in bundle["workloads"]:
            workloads.setdefault(w["workload_key"], w)
        for cand in bundle["candidates"] if only is None else [only]:
            src = folder / "cands" / cand["id"]
            candidates.append({**cand, "id": f"{label}_{cand['id']}", "artifact_dir": src})
    return write_with_policy(
        dest, list(workloads.values()), candidates, policy, baselines=policy["baselines"]
    )


def write_with_policy(
    dest: Path, workloads: list[dict], candidates: list[dict], policy: dict, **options: Any
) -> Path:
    """``write_bundle`` with the timing fields of a bundle's or a run's ``policy`` dict (repeat,
    warmup, number, flush_l2_bytes, timeout_s) and ``options``."""
    from heronlike.measure.bundle import write_bundle

    timing = ("repeat", "warmup", "number", "flush_l2_bytes", "timeout_s")
    return write_bundle(dest, workloads, candidates, **{k: policy[k] for k in timing}, **options)


def repo_relative(path: Path) -> str:
    """``path`` relative to the repository root when inside it (as the device tool wants)."""
    path = path.resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def gpu_instructions(bundles: list[Path], out_dir: Path) -> str:
    """How to run ``bundles`` on the GPU machine and bring the results back."""
    rel = [repo_relative(b) for b in bundles]
    carry = rel if len(rel) <= 8 else [repo_relative(out_dir)]
    size = sum(tree_bytes(REPO_ROOT / c if not Path(c).is_absolute() else Path(c)) for c in carry)
    loop = " ".join(shlex.quote(r) for r in rel)
    command = (
        f"for d in {loop}; do python3 $d/run_bundle.py $d && python3 $d/run_bundle.py $d "
        f"--finalists {FINALISTS} --repeat 100 --warmup 20 --out $d/{FINALISTS_FILE}; done; "
        f"for d in {loop}; do mkdir -p $OUT/${{d##*/}} && "
        f"cp $d/{RESULTS_FILE} $d/{FINALISTS_FILE} $OUT/${{d##*/}}/; done"
    )
    lines = [
        f"carry: {json.dumps(carry)}  ({size / 2**20:.1f} MiB; the device tool carries <= 64 MiB)",
        f"command (repository root on the GPU machine; needs numpy, CuPy, PyTorch):\n  {command}",
        "then here: cp <files_at>/NAME/*.json BUNDLE/ for each bundle (the device tool brings\n"
        "  back files at most two folders down), and\n"
        f"  .venv/bin/python benchmarks/tensorcore.py import --bundles {repo_relative(out_dir)}\n"
        f"  .venv/bin/python benchmarks/tensorcore.py finish --bundles {repo_relative(out_dir)} "
        f"--adopt BUNDLE/{FINALISTS_FILE}   (once per bundle)",
    ]
    if size > 64 * 2**20:
        lines.append("WARNING: over 64 MiB: use a smaller --batch-size or fewer --cases per call")
    return "\n".join(lines)


def recorded_best(
    case: str, compute: Any, args: argparse.Namespace, index: dict
) -> list[tuple[str, Path, dict[str, Any]]]:
    """The ``--with-best`` fastest measured candidates of ``case`` in the records, as
    :func:`merge_bundles` extras labelled ``<case>_best_<round folder>``."""
    from heronlike.dag import ComputeDAG
    from heronlike.records import Records
    from heronlike.target import get_target

    wk = ComputeDAG.from_compute(compute).workload_key
    target_key = get_target(target_string(args.arch)).key
    with Records(args.records) as db:
        picked = finish_candidates(db, wk, target_key, index, args.with_best)
    return [(f"{case}_best_{folder.name}", folder, cand) for folder, cand in picked]


def cmd_bundle(args: argparse.Namespace) -> int:
    """``bundle``: ``--rounds`` prepare_bundle rounds per case, each in ``OUT/<case>/round<k>``
    (numbered after the rounds already there), optionally merged into ``OUT/merged_<stamp>``.

    Rounds prepared in one call get no measurements in between (each uses its own seed, and the
    records' earlier trials); for feedback, run the bundle, import it and call ``bundle`` again.
    ``--with-best K`` carries each case's K fastest recorded candidates into the merged bundle.
    """
    from heronlike.offline import prepare_bundle

    if args.with_best and not args.merge:
        print("--with-best needs --merge (the earlier best join the merged bundle)")
        return 2

    out = Path(args.out)
    made: list[tuple[str, Path]] = []
    best: list[tuple[str, Path, dict[str, Any]]] = []
    index = candidate_index(out) if args.with_best and out.is_dir() else {}
    for case in parse_cases(args.cases):
        _, _, compute = case_compute(case)
        if index:
            best += recorded_best(case, compute, args, index)
        case_dir = out / case
        first = len(list(case_dir.glob("round*"))) if case_dir.is_dir() else 0
        for k in range(first, first + args.rounds):
            try:
                res = prepare_bundle(
                    compute,
                    target_string(args.arch),
                    case_dir / f"round{k:03d}",
                    batch_size=args.batch_size,
                    explorer=args.explorer,
                    seed=args.seed + k,
                    records=args.records,
                )
            except Exception as exc:  # noqa: BLE001 - reported per case, the other cases go on
                print(f"{case} round {k}: {why_failed(exc)}", flush=True)
                break
            print(f"{case} round {k}: {res.summary()}", flush=True)
            if res.bundle is not None:
                made.append((f"{case}_r{k:03d}", res.bundle))
    if not made:
        print("no bundle written")
        return 1
    bundles = [path for _, path in made]
    if args.merge:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        bundles = [merge_bundles(made, out / f"merged_{stamp}", best)]
        print(f"merged {len(made)} bundles and {len(best)} earlier best into {bundles[0]}")
    total = sum(tree_bytes(b) for b in bundles)
    print(f"\n{len(bundles)} bundle(s), {total / 2**20:.1f} MiB in all:")
    for b in bundles:
        print(f"  {repo_relative(b)}  {tree_bytes(b) / 2**20:.1f} MiB")
    print(gpu_instructions(bundles, out))
    return 0


# ------------------------------------------------------------------------------------------------
# import


def find_results(folder: Path) -> list[Path]:
    """Every bundle folder under ``folder`` (itself included) that holds a ``results.json``."""
    found = (p.parent for p in folder.rglob(RESULTS_FILE))
    return sorted(d for d in found if (d / BUNDLE_FILE).is_file())


def bundle_json(folder: Path) -> dict[str, Any]:
    """``folder``'s bundle.json as read, or ``{}`` when it is missing or unreadable (for the
    report's lookups, which skip such folders; :func:`load_bundle` validates instead)."""
    try:
        data = json.loads((folder / BUNDLE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_finish_bundle(folder: Path) -> bool:
    """Whether ``folder`` is a finish bundle (:func:`cmd_finish`), not a search round."""
    return bundle_json(folder).get("explorer") == FINISH_EXPLORER


def cmd_import(args: argparse.Namespace) -> int:
    """``import``: every search bundle's ``results.json`` under ``--bundles`` into ``--records``
    (finish bundles re-time candidates already there and are read by ``report`` instead)."""
    from heronlike.errors import BundleError
    from heronlike.measure.bundle import import_results

    found = [f for f in find_results(Path(args.bundles)) if not is_finish_bundle(f)]
    if not found:
        print(f"no results.json of a search bundle under {args.bundles}")
        return 1
    status = 0
    for folder in found:
        try:
            s = import_results(folder, args.records, allow_standin=args.allow_standin)
        except BundleError as exc:
            print(f"{repo_relative(folder)}: not imported: {exc}")
            status = 1
            continue
        failed = ", ".join(f"{k}:{v}" for k, v in sorted(s.failed.items())) or "none"
        print(
            f"{repo_relative(folder)}: {s.imported} imported, {s.skipped} already there, "
            f"{s.missing} without result; failed: {failed}; device: {s.device}"
            + (" (STAND-IN: fake latencies)" if s.standin else "")
        )
    return status


# ------------------------------------------------------------------------------------------------
# finish


def candidate_index(folder: Path) -> dict[tuple[str, str], tuple[Path, dict[str, Any]]]:
    """``(workload key, assignment key) -> (bundle folder, candidate entry)`` over every search
    bundle under ``folder`` (finish bundles left out); the first bundle found wins."""
    from heronlike.errors import BundleError
    from heronlike.measure.bundle import assignment_key, load_bundle

    index: dict[tuple[str, str], tuple[Path, dict[str, Any]]] = {}
    for path in sorted(folder.rglob(BUNDLE_FILE)):
        try:
            bundle = load_bundle(path.parent)
        except BundleError:
            continue
        if bundle.get("explorer") == FINISH_EXPLORER:
            continue
        for cand in bundle["candidates"]:
            key = (cand["workload_key"], assignment_key(cand["assignment"]))
            index.setdefault(key, (path.parent, cand))
    return index


def finish_candidates(
    db: Any, workload_key: str, target_key: str, index: dict, top: int
) -> list[tuple[Path, dict[str, Any]]]:
    """The ``top`` fastest valid trials of a workload in the records, as ``(bundle folder,
    candidate entry)`` found in ``index`` (:func:`candidate_index`); trials whose candidate is in
    no bundle under the folder are skipped."""
    from heronlike.measure.bundle import assignment_key

    valid = sorted(
        (t for t in db.trials(workload_key, target_key) if t.ok), key=lambda t: t.latency_s
    )
    found = []
    for trial in valid:
        hit = index.get((workload_key, assignment_key(trial.assignment)))
        if hit is not None:
            found.append(hit)
        if len(found) == top:
            break
    return found


def adopt_finalists(results_path: Path, bundles: Path) -> Path:
    """A finish bundle under ``bundles`` for candidates already re-timed on the GPU in the same
    session as their search round (``run_bundle.py BUNDLE --finalists K --out RESULTS``):
    ``results_path`` lies in that search bundle's folder; the new bundle holds the candidates it
    timed, ids unchanged, and ``results_path`` as its ``results.json``.

    Raises:
        BundleError: the folder holds no bundle, or the results name another bundle.
        ValueError: the results re-time no candidate.
    """
    from heronlike.errors import BundleError
    from heronlike.measure.bundle import load_bundle

    folder = results_path.parent
    bundle = load_bundle(folder)
    results = json.loads(results_path.read_text())
    if results.get("bundle_id") != bundle.get("id"):
        raise BundleError(f"{results_path} names bundle {results.get('bundle_id')}, not {folder}")
    timed = set(results.get("candidates") or {})
    candidates = [
        {**c, "artifact_dir": folder / "cands" / c["id"]}
        for c in bundle["candidates"]
        if c["id"] in timed
    ]
    if not candidates:
        raise ValueError(f"{results_path} re-times no candidate of {folder}")
    keys = {c["workload_key"] for c in candidates}
    policy = {**bundle["policy"], **results.get("policy", {})}
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    workloads = [w for w in bundle["workloads"] if w["workload_key"] in keys]
    dest = write_with_policy(
        bundles / f"finish_{stamp}", workloads, candidates, policy, explorer=FINISH_EXPLORER
    )
    shutil.copyfile(results_path, dest / RESULTS_FILE)
    return dest


def cmd_finish(args: argparse.Namespace) -> int:
    """``finish``: one bundle re-timing the ``--top`` best candidates of every case, with
    ``--repeat`` repeats and the PyTorch baselines in the same run; with ``--adopt``, a finish
    bundle for finalists the GPU already re-timed (:func:`adopt_finalists`)."""
    if args.adopt:
        dest = adopt_finalists(Path(args.adopt), Path(args.bundles))
        print(f"finish bundle {repo_relative(dest)} with the re-timed finalists of {args.adopt}")
        return 0
    from heronlike.dag import ComputeDAG
    from heronlike.measure.bundle import load_bundle, write_bundle
    from heronlike.records import Records
    from heronlike.target import get_target

    target_key = get_target(target_string(args.arch)).key
    bundles = Path(args.bundles)
    index = candidate_index(bundles)
    workloads: dict[str, dict[str, Any]] = {}
    candidates: list[dict[str, Any]] = []
    with Records(args.records) as db:
        for case in parse_cases(args.cases):
            _, _, compute = case_compute(case)
            wk = ComputeDAG.from_compute(compute).workload_key
            picked = finish_candidates(db, wk, target_key, index, args.top)
            if not picked:
                print(f"{case}: no measured valid candidate found in the records and bundles")
                continue
            for folder, cand in picked:
                entry = next(w for w in load_bundle(folder)["workloads"] if w["workload_key"] == wk)
                workloads.setdefault(wk, entry)
                cid = f"{case}_{folder.name}_{cand['id']}"
                candidates.append(
                    {**cand, "id": cid, "artifact_dir": folder / "cands" / cand["id"]}
                )
            print(f"{case}: {len(picked)} candidate(s)")
    if not candidates:
        print("nothing to finish")
        return 1
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    dest = write_bundle(
        bundles / f"finish_{stamp}",
        list(workloads.values()),
        candidates,
        repeat=args.repeat,
        warmup=args.warmup,
        explorer=FINISH_EXPLORER,
    )
    print(f"finish bundle {repo_relative(dest)}: {len(candidates)} candidates, "
          f"{tree_bytes(dest) / 2**20:.1f} MiB, {args.repeat} repeats")  # fmt: skip
    print(gpu_instructions([dest], bundles))
    return 0


# ------------------------------------------------------------------------------------------------
# report


def gpu_runs(folder: Path) -> dict[str, dict[str, Any]]:
    """Workload key -> the newest real (not stand-in) GPU run with a timed baseline of it:
    ``{"baseline": entry, "device", "compute_capability", "driver", "date", "policy", "path",
    "finish": bool, "candidates": {id: result} of that workload, "fastest_baseline_s" and
    "baseline_runs": the fastest baseline median over every run and their number}``. A finish
    run beats a search run of any date (its candidates were re-timed with more repeats)."""
    runs: dict[str, dict[str, Any]] = {}
    for bundle_dir in find_results(folder) if folder.is_dir() else []:
        try:
            results = json.loads((bundle_dir / RESULTS_FILE).read_text())
        except (OSError, ValueError):
            continue
        if results.get("standin"):
            continue
        finish = is_finish_bundle(bundle_dir)
        keys = ("device", "compute_capability", "driver", "date", "policy")
        for wk, base in (results.get("baselines") or {}).items():
            if base.get("latency_s") is None:
                continue
            run = {k: results.get(k) for k in keys}
            run.update(baseline=base, path=bundle_dir, finish=finish)
            run["candidates"] = {
                cid: res
                for cid, res in (results.get("candidates") or {}).items()
                if res.get("workload_key") == wk
            }
            old = runs.get(wk)
            fastest = min(float(base["latency_s"]), old["fastest_baseline_s"] if old else math.inf)
            if old is None or (finish, str(run["date"])) > (old["finish"], str(old["date"])):
                runs[wk] = run
            runs[wk]["fastest_baseline_s"] = fastest
            runs[wk]["baseline_runs"] = (old["baseline_runs"] if old else 0) + 1
    return runs


def unsupported(compute: Any) -> str | None:
    """Why no space can be generated for ``compute`` (:func:`why_failed`), else None."""
    from heronlike.space import generate_space

    try:
        generate_space(compute, target_string("sm_90"))
    except Exception as exc:  # noqa: BLE001
        return why_failed(exc)
    return None


def report_row(case: str, db: Any, target_key: str, runs: dict[str, Any]) -> dict[str, Any]:
    """One report row: heronlike's best and the PyTorch baseline of the same workload, both from
    one GPU run: the newest finish run (``source="finish"``: the fastest re-timed, re-checked
    candidate) or else the newest search run's baseline beside the records' best
    (``source="search"``: a minimum over noisy medians, and possibly timed in another run)."""
    from heronlike.dag import ComputeDAG

    op, params, compute = case_compute(case)
    dag = ComputeDAG.from_compute(compute)
    wk, flop = dag.workload_key, dag.flop()
    row: dict[str, Any] = {"case": case, "op": op, "shape": shape_text(params)}
    row["dtype"] = DTYPE_LABEL
    trials = db.trials(wk, target_key)
    valid = [t for t in trials if t.ok]
    row.update(trials=len(trials), valid=len(valid))
    row["valid_pct"] = round(100.0 * len(valid) / len(trials), 1) if trials else None
    fastest = min(valid, key=lambda t: t.latency_s, default=None)
    best = fastest.latency_s if fastest else None
    chosen = fastest.assignment if fastest else None
    if best is not None:
        row["search_best_ms"] = round(best * 1e3, 5)
    run = runs.get(wk)
    max_err = None
    if run and run["finish"]:
        ok = {i: r for i, r in run["candidates"].items() if r.get("latency_s") is not None}
        pick = min(ok, key=lambda i: ok[i]["latency_s"], default=None)
        best = ok[pick]["latency_s"] if pick else None
        max_err = ok[pick].get("max_abs_err") if pick else None
        row["heronlike_iqr_ms"] = iqr_ms(ok[pick].get("latencies_s") if pick else None)
        chosen = bundle_assignment(run["path"], pick) if pick else None
    if chosen is not None:
        from heronlike.space import generate_space

        row["program"] = program_summary(generate_space(compute, target_key), chosen)
    if best is not None:
        row.update(heronlike_ms=round(best * 1e3, 5), heronlike_tflops=round(flop / best / 1e12, 2))
        row["max_abs_err"] = max_err
    if run:
        base = run["baseline"]
        lat = float(base["latency_s"])
        policy = run.get("policy") or {}
        row.update(
            source="finish" if run["finish"] else "search",
            baseline=base.get("name"),
            baseline_ms=round(lat * 1e3, 5),
            baseline_tflops=round(flop / lat / 1e12, 2),
            baseline_max_abs_err=base.get("max_abs_err"),
            baseline_iqr_ms=iqr_ms(base.get("latencies_s")),
            repeat=policy.get("repeat"),
            warmup=policy.get("warmup"),
            flush_l2_bytes=policy.get("flush_l2_bytes"),
            gpu=run["device"],
            compute_capability=run["compute_capability"],
            driver=run["driver"],
            torch=base.get("torch"),
            measured=run["date"],
        )
        workload = reference_tolerance(run["path"], wk)
        row.update(rtol=workload.get("rtol"), atol=workload.get("atol"))
        if not base.get("correct"):
            row["baseline"] = f"{base.get('name')} (check failed: {base.get('error_msg')})"
        for var in base.get("variants") or []:
            if var.get("latency_s") is not None and var.get("correct"):
                row["baseline_fp32out"] = var.get("name")
                row["baseline_fp32out_ms"] = round(float(var["latency_s"]) * 1e3, 5)
                if best is not None:
                    row["ratio_fp32out"] = round(float(var["latency_s"]) / best, 3)
    if best is not None and run:
        row["ratio"] = round(lat / best, 3)
        fastest = run["fastest_baseline_s"]
        row.update(baseline_fastest_ms=round(fastest * 1e3, 5), baseline_runs=run["baseline_runs"])
        row["ratio_fastest"] = round(fastest / best, 3)
        row["status"] = "ok"
    elif not trials:
        row["status"] = unsupported(compute) or "no trials in the records"
    elif not valid:
        kinds = sorted({t.error_kind or "?" for t in trials})
        row["status"] = "no GPU measurement (trials: " + ", ".join(kinds) + ")"
    else:
        row["status"] = "no baseline from a GPU run"
    return row


def bundle_assignment(bundle_dir: Path, candidate_id: str) -> dict[str, int] | None:
    """The CSP assignment of candidate ``candidate_id`` in ``bundle_dir``'s bundle.json."""
    candidates = bundle_json(bundle_dir).get("candidates", [])
    cand = next((c for c in candidates if c.get("id") == candidate_id), None)
    return cand.get("assignment") if cand else None


def iqr_ms(latencies_s: Sequence[float] | None) -> str | None:
    """``"p25-p75"`` of a run's repeats in milliseconds (the spread behind a median)."""
    if not latencies_s or len(latencies_s) < 4:
        return None
    q1, _, q3 = statistics.quantiles(latencies_s, n=4)
    return f"{q1 * 1e3:.5f}-{q3 * 1e3:.5f}"


def reference_tolerance(bundle_dir: Path, workload_key: str) -> dict[str, Any]:
    """The workload entry of ``workload_key`` in ``bundle_dir``'s bundle.json (``rtol``,
    ``atol``, ...), or ``{}``."""
    workloads = bundle_json(bundle_dir).get("workloads", [])
    return next((w for w in workloads if w["workload_key"] == workload_key), {})


def plot_report(rows: list[dict[str, Any]], path: Path) -> bool:
    """Latency of heronlike and the baseline per case (log scale) and their ratio."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        print("--plot: matplotlib is not installed (pip install -e '.[bench]')")
        return False
    cases = [r["case"] for r in rows]
    xs = range(len(cases))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(5.0, 0.7 * len(cases) + 2), 5.5), dpi=100)
    for dx, key, label in ((-0.2, "heronlike_ms", "heronlike"), (0.2, "baseline_ms", "PyTorch")):
        ys = [float(r[key]) if r.get(key) is not None else float("nan") for r in rows]
        ax1.bar([x + dx for x in xs], ys, 0.4, label=label)
    ax1.set_yscale("log")
    ax1.set_ylabel("latency, ms")
    ax1.legend()
    ratios = [float(r["ratio"]) if r.get("ratio") is not None else float("nan") for r in rows]
    ax2.bar(list(xs), ratios, 0.6, color="tab:green")
    ax2.axhline(1.0, color="black", linewidth=0.8)
    ax2.set_ylabel("PyTorch / heronlike")
    for ax in (ax1, ax2):
        ax.set_xticks(list(xs), cases)
    gpus = sorted({str(r["gpu"]) for r in rows if r.get("gpu")})
    fig.suptitle(f"heronlike TensorCore fp16->fp32 on {', '.join(gpus) or 'no GPU'}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def cmd_report(args: argparse.Namespace) -> int:
    """``report``: per case best heronlike latency vs the PyTorch baseline; CSV (and plot)."""
    from heronlike.records import Records
    from heronlike.target import get_target

    target_key = get_target(target_string(args.arch)).key
    runs = gpu_runs(Path(args.bundles))
    date = datetime.datetime.now().isoformat(timespec="seconds")
    with Records(args.records) as db:
        rows = [report_row(c, db, target_key, runs) for c in parse_cases(args.cases)]
    for row in rows:
        row["date"] = date
    gpus = sorted({str(r["gpu"]) for r in rows if r.get("gpu")})
    slug = re.sub(r"[^a-z0-9]+", "_", (gpus[0] if gpus else "nogpu").lower().replace("nvidia", ""))
    out = Path(args.out or RESULTS / f"tensorcore_{slug.strip('_')}.csv")
    write_rows(out, rows, REPORT_COLUMNS, ("case",))
    print_table(rows, ("case", "source", "trials", "heronlike_ms", "search_best_ms", "baseline_ms",
                       "ratio", "ratio_fp32out", "ratio_fastest", "heronlike_tflops",
                       "baseline_tflops", "status"))  # fmt: skip
    if len(gpus) > 1:
        print(f"WARNING: baselines come from several GPUs: {', '.join(gpus)}")
    print(f"GPU: {', '.join(gpus) or 'none (no GPU measurement yet)'}; wrote {out}")
    if args.plot and plot_report(rows, out.with_suffix(".png")):
        print(f"wrote {out.with_suffix('.png')}")
    return 0


# ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--cases", help=f"comma-separated, default all: {','.join(TC_CASES)}")
        p.add_argument("--arch", default="sm_90", help="nvcc arch (default sm_90)")

    p = sub.add_parser("count", help="build RandSAT samples per case and count the outcomes")
    common(p)
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--build-timeout", type=float, default=120.0, help="seconds per candidate")
    p.add_argument(
        "--nvcc-flags",
        default="",
        help="extra nvcc flags, e.g. '-Xptxas --register-usage-level=5' (ptxas's default level)",
    )
    p.add_argument("--out", default=str(RESULTS / "tensorcore_compile.csv"))
    p.set_defaults(fn=cmd_count)

    p = sub.add_parser("bundle", help="one prepare_bundle round per case, for the GPU machine")
    common(p)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--explorer", default="random")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--records", default=str(DEFAULT_RECORDS))
    p.add_argument("--out", default=str(DEFAULT_BUNDLES))
    p.add_argument("--merge", action="store_true", help="also merge all rounds into one bundle")
    p.add_argument(
        "--with-best",
        type=int,
        default=0,
        metavar="K",
        help="with --merge: also carry each case's K fastest recorded candidates (earlier "
        "rounds' best, re-timed beside the new ones, so --finalists ranks all rounds)",
    )
    p.set_defaults(fn=cmd_bundle)

    p = sub.add_parser("import", help="import every results.json under --bundles")
    p.add_argument("--bundles", default=str(DEFAULT_BUNDLES))
    p.add_argument("--records", default=str(DEFAULT_RECORDS))
    p.add_argument("--allow-standin", action="store_true", help="tests only: fake latencies")
    p.set_defaults(fn=cmd_import)

    p = sub.add_parser("finish", help="re-time the --top best candidates per case in one bundle")
    common(p)
    p.add_argument("--top", type=int, default=3, help="candidates per case (default 3)")
    p.add_argument("--repeat", type=int, default=100, help="timed repeats (default 100)")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls first (default 20)")
    p.add_argument("--records", default=str(DEFAULT_RECORDS))
    p.add_argument("--bundles", default=str(DEFAULT_BUNDLES))
    p.add_argument(
        "--adopt",
        metavar="RESULTS",
        help="finalists already re-timed on the GPU (run_bundle.py --finalists --out RESULTS)",
    )
    p.set_defaults(fn=cmd_finish)

    p = sub.add_parser("report", help="heronlike vs PyTorch per case from records and results")
    common(p)
    p.add_argument("--records", default=str(DEFAULT_RECORDS))
    p.add_argument("--bundles", default=str(DEFAULT_BUNDLES))
    p.add_argument("--out", help="CSV (default benchmarks/results/tensorcore_<gpu>.csv)")
    p.add_argument("--plot", action="store_true", help="also write <out>.png")
    p.set_defaults(fn=cmd_report)

    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
