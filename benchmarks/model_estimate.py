"""Model latency estimate (Heron Fig. 10): sum of occurrences x tuned latency, beside PyTorch.

For one model operator list (:mod:`benchmarks.models`), in one run on this machine:

1. **gradient**: :func:`heronlike.library.build` with the gradient task scheduler
   (:mod:`heronlike.scheduler`) and the total trial budget ``--trials``; the library is
   exported and every kernel checked bit-exact against numpy. Estimate = sum over workloads of
   occurrences x best tuned latency (median of the runner's repeats, seconds).
2. **even**: the same workloads, budget, seed, explorer and evaluator, with the budget split
   evenly (:class:`heronlike.scheduler.TaskScheduler` ``strategy="even"``), in its own records.
   The gain of the allocation is ``estimate(even) / estimate(gradient)``.
3. **PyTorch**: each workload timed by :func:`heronlike.baselines.torch_op` (quantized u8 x s8
   ``torch.ao.nn.quantized.Conv2d`` channels-last, ``torch._int_mm`` for GEMMs) with the same
   thread count, median of ``--repeat`` timed calls in a fresh process; the same weighted sum.

Prints a per-layer table and writes ``<out>/model_estimate-<model>-<cpu>-<date>.csv`` (every row
names the CPU model and the date) and a ``.png`` bar chart (when matplotlib is installed).

    python benchmarks/model_estimate.py --model resnet50 --trials 126 --batch-size 2
    python benchmarks/model_estimate.py --model bert --layers 0,1 --trials 24
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from heronlike.host import cpu_model  # noqa: E402

TORCH_OPS = {"conv2d": "c2d", "gemm": "gemm", "bmm": "bmm"}


def _select(workloads: list[Any], layers: str | None) -> list[Any]:
    if not layers:
        return workloads
    picked = []
    for part in layers.split(","):
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-"))
            picked += list(range(lo, hi + 1))
        else:
            picked.append(int(part))
    return [workloads[i] for i in picked]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", help="resnet50, vgg16, bert or a JSON file")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="int8")
    ap.add_argument("--target", default="llvm", help='"llvm" (any CPU) or "dlboost" (VNNI)')
    ap.add_argument("--trials", type=int, default=126, help="total budget per strategy")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--layers", default=None, help="subset of the list, e.g. 0-5,20")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=15, help="PyTorch timed calls per layer")
    ap.add_argument("--number", type=int, default=2, help="runner calls per measurement")
    ap.add_argument("--runner-repeat", type=int, default=3, help="runner measurements")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "out" / "model_estimate")
    args = ap.parse_args(argv)

    from heronlike.baselines import torch_op
    from heronlike.library import build, load_operator_list
    from heronlike.library.workloads import merge_duplicates
    from heronlike.scheduler import Task, TaskScheduler
    from heronlike.session import EvaluatorConfig
    from heronlike.target import get_target

    target = get_target(args.target)
    threads = target.cores
    os.environ.setdefault("TVM_NUM_THREADS", str(threads))
    workloads = merge_duplicates(load_operator_list(args.model, batch=args.batch, dtype=args.dtype))
    workloads = _select(workloads, args.layers)
    cpu = cpu_model()
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    slug = re.sub(r"[^a-z0-9]+", "-", cpu.lower()).strip("-")[:24]
    model_name = Path(args.model).stem
    out = args.out / f"{model_name}-b{args.batch}-{slug}-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    ev = EvaluatorConfig(number=args.number, repeat=args.runner_repeat, min_repeat_ms=5.0)
    print(f"{model_name} batch {args.batch}: {len(workloads)} workloads, "
          f"{sum(w.occurrences for w in workloads)} layers; {args.trials} trials per strategy; "
          f"{target.key}; {cpu}; {threads} threads", flush=True)  # fmt: skip

    def progress(tag: str):  # noqa: ANN202
        def report(r: Any) -> None:
            best = f"{r.best_latency_s * 1e3:.3f} ms" if r.best_latency_s else "-"
            print(f"  [{tag} {r.trials_done}/{r.trials_total} {r.elapsed_s:5.0f}s] {r.name}: "
                  f"best {best}, estimate {r.estimate_s * 1e3:.3f} ms", flush=True)  # fmt: skip

        return report

    t0 = time.perf_counter()
    lib = build(
        workloads,
        target,
        trials=args.trials,
        out_dir=out / "library",
        records=out / "records_gradient.sqlite",
        strategy="gradient",
        batch_size=args.batch_size,
        seed=args.seed,
        evaluator=ev,
        progress=progress("gradient"),
    )
    t_grad = time.perf_counter() - t0
    t0 = time.perf_counter()
    even = TaskScheduler(
        [Task(w.label, w.compute(target), w.occurrences) for w in workloads],
        target,
        trials=args.trials,
        strategy="even",
        records=out / "records_even.sqlite",
        batch_size=args.batch_size,
        seed=args.seed,
        evaluator=ev,
        progress=progress("even"),
    ).run()
    t_even = time.perf_counter() - t0
    grad_state = {s.name: s for s in lib.schedule.tasks} if lib.schedule else {}
    even_state = {s.name: s for s in even.tasks}

    rows = []
    for w in workloads:
        g, e = grad_state.get(w.label), even_state.get(w.label)
        torch_s, impl = (None, "skipped")
        if not args.no_torch:
            torch_s, impl = torch_op(TORCH_OPS[w.op], w.params, threads=threads, repeat=args.repeat)
        rows.append(
            {
                "model": model_name,
                "batch": args.batch,
                "layer": w.label,
                "op": w.op,
                "shape": " ".join(f"{k}={v}" for k, v in w.shape),
                "dtype": w.dtype,
                "occurrences": w.occurrences,
                "gradient_trials": g.trials if g else 0,
                "gradient_latency_s": g.best_latency_s if g else None,
                "even_trials": e.trials if e else 0,
                "even_latency_s": e.best_latency_s if e else None,
                "torch_latency_s": torch_s,
                "torch_impl": impl,
                "target": target.key,
                "cpu_model": cpu,
                "threads": threads,
                "date": stamp[:10],
            }
        )

    def total(key: str) -> float | None:
        vals = [r[key] for r in rows]
        if any(v is None for v in vals):
            return None
        return sum(r["occurrences"] * r[key] for r in rows)

    sums = {k: total(k) for k in ("gradient_latency_s", "even_latency_s", "torch_latency_s")}
    csv_path = out / f"model_estimate-{model_name}.csv"
    with open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        total_row = {k: "" for k in rows[0]}
        total_row.update(
            model=model_name,
            batch=args.batch,
            layer="TOTAL (sum of occurrences x latency)",
            occurrences=sum(r["occurrences"] for r in rows),
            gradient_trials=sum(r["gradient_trials"] for r in rows),
            even_trials=sum(r["even_trials"] for r in rows),
            gradient_latency_s=sums["gradient_latency_s"],
            even_latency_s=sums["even_latency_s"],
            torch_latency_s=sums["torch_latency_s"],
            target=target.key,
            cpu_model=cpu,
            threads=threads,
            date=stamp[:10],
        )
        writer.writerow(total_row)

    def ms(v: float | None) -> str:
        return f"{v * 1e3:9.3f}" if v is not None else "        -"

    print(f"\n{'layer':44s} {'x':>3s} {'grad n':>6s} {'grad ms':>9s} {'even n':>6s} "
          f"{'even ms':>9s} {'torch ms':>9s}")  # fmt: skip
    for r in rows:
        print(f"{r['layer'][:44]:44s} {r['occurrences']:3d} {r['gradient_trials']:6d} "
              f"{ms(r['gradient_latency_s'])} {r['even_trials']:6d} {ms(r['even_latency_s'])} "
              f"{ms(r['torch_latency_s'])}")  # fmt: skip
    print(f"{'model estimate (sum occurrences x latency)':44s} {'':3s} {'':6s} "
          f"{ms(sums['gradient_latency_s'])} {'':6s} {ms(sums['even_latency_s'])} "
          f"{ms(sums['torch_latency_s'])}")  # fmt: skip
    if sums["gradient_latency_s"] and sums["even_latency_s"]:
        print(f"allocation gain (even / gradient, same {args.trials}-trial budget): "
              f"{sums['even_latency_s'] / sums['gradient_latency_s']:.3f}x")  # fmt: skip
    if sums["gradient_latency_s"] and sums["torch_latency_s"]:
        print(f"PyTorch / heronlike (gradient): "
              f"{sums['torch_latency_s'] / sums['gradient_latency_s']:.3f}x")  # fmt: skip
    print(f"library {lib.path}: {len(lib.manifest['kernels'])} kernels, checked bit-exact: "
          f"{lib.checked}; missing {lib.missing or 'none'}")  # fmt: skip
    phases = ", ".join(f"{k} {v:.0f}s" for k, v in lib.time_s.items())
    print(f"time: gradient build {t_grad:.0f} s ({phases}), even {t_even:.0f} s; CSV {csv_path}")
    _plot(
        rows, sums, out / f"model_estimate-{model_name}.png", f"{model_name} b{args.batch}, {cpu}"
    )
    return 0


def _plot(
    rows: list[dict[str, Any]], sums: dict[str, float | None], path: Path, title: str
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    labels = ["heronlike (gradient)", "heronlike (even)", "PyTorch"]
    keys = ["gradient_latency_s", "even_latency_s", "torch_latency_s"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    vals = [(sums[k] or 0.0) * 1e3 for k in keys]
    ax.bar(labels, vals, color=["tab:blue", "tab:cyan", "tab:orange"])
    ax.set_ylabel("model latency estimate (ms)\nsum of occurrences x layer latency")
    ax.set_title(title, fontsize=9)
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
