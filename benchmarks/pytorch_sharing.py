"""What timing PyTorch in the tuned kernels' processes costs either column, against the fair
table's harness, which times PyTorch in processes of its own between the kernels'.

Timing every column's samples in the same turns of one process puts a VM's slow spell on all
of them alike (the AMX table does this for that reason); the fair DL Boost table keeps PyTorch
in its own processes because two thread pools (TVM's and PyTorch's OpenMP, both spinning
between calls) sharing a process might slow one of them. This measures it. For each case: one
tune (16 trials in rounds of 8 by default), its pick built once, then ``--repeats`` pairs of
harness runs in alternating order (own, shared; shared, own; ...):

- ``own``: :func:`benchmarks.suite.time_tvm_kernels` with PyTorch's fastest int8 path timed in
  a process of its own after the kernel's process in even rounds, before it in odd ones (the
  suite's harness);
- ``shared``: PyTorch's int8 paths timed in the kernel's processes, their samples in turn with
  the kernel's (``torch_case``).

Both take the suite's 5 fresh processes of 9 samples; each column's reading is the median of
its 5 per-process medians (for PyTorch, of its fastest path), and its fastest process.

    python benchmarks/pytorch_sharing.py                    # C3D1, C3D5, G1, C2D2, B1
    python benchmarks/pytorch_sharing.py --cases G1 --repeats 3

Writes ``benchmarks/results/pytorch_sharing-<cpu>-<date>.csv``: per case and repeat, each
column's milliseconds both ways, ``shared / own`` for each column, and heronlike's speedup over
PyTorch both ways.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import heronlike  # noqa: E402
from benchmarks import suite  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402

DEFAULT_CASES = ("C3D1", "C3D5", "G1", "C2D2", "B1")
MODES = ("own", "shared")


def per_process(log: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Each column's per-process medians (seconds) in a harness ``log``; PyTorch's paths,
    timed in the kernels' processes, as one ``"pytorch"`` column: the path whose median of
    per-process medians is lowest (the harness's pick of PyTorch's fastest path)."""
    per: dict[str, list[float]] = {}
    for entry in log:
        if entry["seconds"] is not None:
            per.setdefault(entry["kernel"], []).append(entry["seconds"])
    paths = {k: v for k, v in per.items() if k.startswith("pytorch ")}
    out = {k: v for k, v in per.items() if k not in paths}
    if paths:
        out["pytorch"] = min(paths.values(), key=statistics.median_low)
    return out


def time_once(mode: str, kernels: dict, expected: dict, work: Path, op: str, params: dict,
              threads: int) -> dict[str, list[float]]:  # fmt: skip
    """One harness run of ``kernels`` with PyTorch in its ``mode`` (``own`` or ``shared``):
    each column's per-process medians in seconds.

    Raises:
        RuntimeError: a kernel failed or differs from the reference, or PyTorch failed.
    """
    log: list[dict[str, Any]] = []
    runs: list[tuple[float | None, str]] = []
    own = mode == "own"
    results = suite.time_tvm_kernels(
        kernels,
        expected,
        work,
        threads,
        also=(lambda _: runs.append(suite.time_pytorch(op, params, threads))) if own else None,
        log=log,
        torch_case=None if own else (op, params),
    )
    for name, (seconds, correct, message) in results.items():
        if seconds is None or not correct:
            raise RuntimeError(f"{name} ({mode}): {message or 'wrong result'}")
    out = per_process(log)
    if own:
        failed = [what for t, what in runs if t is None]
        if failed:
            raise RuntimeError(f"PyTorch (own): {failed[0]}")
        out["pytorch"] = [t for t, _ in runs]
    return out


def one_case(spec: str, a: argparse.Namespace, mode: Any, work: Path) -> list[dict]:
    case = suite.case_compute(spec, "int8", mode)
    r = heronlike.tune(
        case.compute,
        case.target,
        trials=a.trials,
        batch_size=a.batch,
        seed=0,
        records=work / "records.sqlite",
        work_dir=work,
    )
    kernels, expected = suite.build_programs(
        {"heronlike": r.space.program(r.assignment)}, r.space, work
    )
    rows = []
    for rep in range(a.repeats):
        order = MODES if rep % 2 == 0 else MODES[::-1]
        got = {
            m: time_once(m, kernels, expected, work, case.op, case.params, r.space.target.cores)
            for m in order
        }
        row: dict[str, Any] = dict(
            case=case.name,
            op=case.op,
            shape_run=suite._params_text(case.params),
            target=r.target_key,
            trials=a.trials,
            repeat=rep,
            order=" then ".join(order),
            rounds=suite.HARNESS_ROUNDS,
            samples=suite.HARNESS_SAMPLES,
        )
        for m in MODES:
            for who in ("heronlike", "pytorch"):
                medians = got[m][who]
                row[f"{who}_{m}_ms"] = statistics.median_low(medians) * 1e3
                row[f"{who}_{m}_fastest_process_ms"] = min(medians) * 1e3
            row[f"speedup_vs_pytorch_{m}"] = row[f"pytorch_{m}_ms"] / row[f"heronlike_{m}_ms"]
        for who in ("heronlike", "pytorch"):
            row[f"{who}_shared_vs_own"] = row[f"{who}_shared_ms"] / row[f"{who}_own_ms"]
        row.update(threads=r.space.target.cores, **machine_stamp())
        print(
            f"[{case.name} r{rep}] heronlike {row['heronlike_own_ms']:.4f} / "
            f"{row['heronlike_shared_ms']:.4f} ms, PyTorch {row['pytorch_own_ms']:.4f} / "
            f"{row['pytorch_shared_ms']:.4f} ms (own / shared); vs PyTorch "
            f"{row['speedup_vs_pytorch_own']:.3f} / {row['speedup_vs_pytorch_shared']:.3f}",
            flush=True,
        )
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--repeats", type=int, default=2, help="pairs of harness runs per case")
    a = p.parse_args(argv)
    suite.run_per_case(a, one_case, "pytorch_sharing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
