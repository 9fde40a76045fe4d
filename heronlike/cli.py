"""Command line: ``heronlike tune | csp | best | import-results | library | model``.

Examples::

    heronlike tune gemm --shape 1024,1024,1024 --dtype int8 --target dlboost --trials 64
    heronlike csp gemm --shape 256,256,256
    heronlike best                       # list what the records hold
    heronlike best gemm --shape 1024,1024,1024   # rebuild and check the best kernel
    heronlike import-results BUNDLE_DIR          # add a GPU-measured bundle to the records
    heronlike library build resnet50 --batch 1 --target llvm --trials 400 --out lib/
    heronlike library merge a.sqlite b.sqlite -o all.sqlite
    heronlike model tune resnet.onnx --target llvm --trials 400 --records r.sqlite
    heronlike model build resnet.onnx --records r.sqlite -o resnet.so
    heronlike model run resnet.so
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import ops
from .errors import HeronlikeError

console = Console()
err_console = Console(stderr=True)

OPERATORS = sorted(ops.OPERATORS)


def _compute(
    op: str, shape: str, dtype: str, target: str | None = None
) -> tuple[list, tuple[int, ...]]:
    fn, names = ops.OPERATORS[op]
    dtype = ops.target_dtype(dtype, target)  # "int8" is signed x signed on TensorCore
    try:
        dims = tuple(int(x) for x in shape.split(","))
    except ValueError:
        raise click.BadParameter(f"{shape!r} is not a comma-separated list of integers") from None
    required = _required_arguments(fn)
    if not required <= len(dims) <= len(names):
        if required == len(names):
            wanted = f"{len(names)} extents ({','.join(names)})"
        else:
            optional = ",".join(names[required:])
            wanted = (
                f"{required} to {len(names)} arguments ({','.join(names[:required])}"
                f"[,{optional}]; the bracketed ones have defaults)"
            )
        raise click.BadParameter(f"{op} takes {wanted}, got {len(dims)}")
    return fn(*dims, dtype=dtype), dims


def _required_arguments(fn) -> int:  # noqa: ANN001
    """How many leading positional parameters of an operator builder have no default."""
    import inspect

    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params if p.default is inspect.Parameter.empty and p.name != "dtype")


def _common(f):  # noqa: ANN001, ANN202 - click decorator stack
    f = click.option(
        "--target",
        default="dlboost",
        show_default=True,
        help='target name or string, e.g. "dlboost", "llvm -num-cores=2", '
        '"cuda -tensorcore -arch=sm_90"',
    )(f)
    f = click.option(
        "--dtype", default="int8", show_default=True, type=click.Choice(sorted(ops.DTYPES))
    )(f)
    f = click.option(
        "--shape",
        required=True,
        help="the operator's positional arguments, comma separated, in the order of its "
        "heronlike.ops function (e.g. c2d N,H,W,CI,CO,KH,KW[,stride,pad,dilation])",
    )(f)
    f = click.argument("op", type=click.Choice(OPERATORS))(f)
    return f


@click.group()
@click.version_option(package_name="heronlike")
def main() -> None:
    """heronlike: constraint-solving schedule generation for DL accelerators (Heron)."""


@main.command()
@_common
@click.option("--trials", default=64, show_default=True, help="total trial budget")
@click.option(
    "--time-budget",
    type=float,
    default=None,
    help="wall-clock budget in seconds (no new batch starts after it)",
)
@click.option(
    "--explorer",
    default="random",
    show_default=True,
    help="random, cga, cga1, sa, ga or opevo (see heronlike.explore)",
)
@click.option("--seed", default=0, show_default=True)
@click.option("--batch-size", default=16, show_default=True)
@click.option(
    "--prior/--no-prior",
    default=True,
    show_default=True,
    help="rank the first, untrained round by the target's schedule prior (else random, as Heron)",
)
@click.option(
    "--finalists",
    default=4,
    show_default=True,
    help="fastest candidates re-measured side by side at the end; the fastest re-measured wins",
)
@click.option(
    "--records",
    type=click.Path(path_type=Path),
    default=None,
    help="SQLite records file [default: heronlike_runs/records.sqlite]",
)
@click.option(
    "--baselines/--no-baselines",
    default=True,
    show_default=True,
    help="also time numpy and torch._int_mm on the same shape (CPU targets timed on this host)",
)
@click.option(
    "--simulate",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="simulation mode: replay the trials in this records file instead of measuring",
)
@click.option(
    "--runner",
    default=None,
    help="where candidates run: rpc://HOST:PORT/KEY (TVM RPC tracker), cupy (this machine's "
    "GPU through CuPy), cupy+standin (launches nothing; tests) [default: the "
    "target's; HERONLIKE_RUNNER]",
)
@click.option(
    "--bundle",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="offline round: build one batch and write it as a bundle for a GPU machine without "
    "TVM (run DIR/run_bundle.py there, then heronlike import-results DIR)",
)
def tune(
    op: str,
    shape: str,
    dtype: str,
    target: str,
    trials: int,
    time_budget: float | None,
    explorer: str,
    seed: int,
    batch_size: int,
    prior: bool,
    finalists: int,
    records: Path | None,
    baselines: bool,
    simulate: Path | None,
    runner: str | None,
    bundle: Path | None,
) -> None:
    """Tune OP for the target and print the best kernel's speed."""
    from .tuning import tune as run_tune

    compute, dims = _compute(op, shape, dtype, target)
    if bundle is not None:
        from .offline import prepare_bundle

        round_ = prepare_bundle(
            compute,
            target,
            bundle,
            batch_size=batch_size,
            trials=trials,
            explorer=explorer,
            seed=seed,
            records=records,
        )
        console.print(escape(round_.summary()))
        if round_.bundle is not None:
            console.print(
                f"next: copy {escape(str(round_.bundle))} to the GPU machine, run "
                f"python {escape(str(round_.bundle))}/run_bundle.py {escape(str(round_.bundle))}"
                f", copy results.json back, then heronlike import-results "
                f"{escape(str(round_.bundle))}" + (f" --records {records}" if records else "")
            )
        return
    with Progress(
        TextColumn("[bold]tuning"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        task = bar.add_task("tune", total=trials, status="")

        def report(p) -> None:  # noqa: ANN001
            best = (
                f"best {p.best_throughput / 1e9:.1f} GOP/s" if p.best_throughput else "no valid yet"
            )
            rate = p.valid / max(1, p.valid + p.invalid)
            bar.update(task, completed=p.trials_done, status=f"{best}, valid {rate:.0%}")

        result = run_tune(
            compute,
            target,
            trials=trials,
            time_budget_s=time_budget,
            explorer=explorer,
            seed=seed,
            records=records,
            batch_size=batch_size,
            prior=prior,
            finalists=finalists,
            progress=report,
            simulate=simulate,
            runner=runner,
        )
    _print_result(result)
    if result.simulated:
        sys.exit(0 if result.latency_s is not None else 1)
    # the host-CPU libraries are baselines only for kernels timed on this CPU (not for a
    # simulated accelerator's cycles or a GPU)
    on_host_cpu = result.space.target.device == "cpu" and result.space.target.cycle_hz() is None
    if baselines and on_host_cpu and result.latency_s and op in ("gemm", "bmm", "gemv"):
        _print_baselines(op, dims, result)
    if result.latency_s is None or not result.correct:
        sys.exit(1)


def _print_result(r) -> None:  # noqa: ANN001
    table = Table(title=f"heronlike: {r.workload_key} on {r.target_key}", show_header=False)
    table.add_row(
        "trials run",
        f"{r.trials_run} ({r.valid} valid, {r.invalid} invalid); {r.trials} in {r.records}",
    )
    if r.errors:
        table.add_row("failures", ", ".join(f"{k}: {v}" for k, v in r.errors.items()))
    if r.latency_s is not None:
        how = "replayed from records" if r.simulated else "median, re-measured"
        table.add_row("best latency", f"{r.latency_s * 1e3:.4f} ms ({how})")
        table.add_row("throughput", f"{r.throughput / 1e9:.1f} GOP/s")
        peak = r.space.target.peak_ops_per_s() if r.space else None
        if peak:
            table.add_row("of nominal peak", f"{r.throughput / peak:.0%} of {peak / 1e9:.0f} GOP/s")
        clock = r.space.target.cycle_hz() if r.space else None
        if clock:
            table.add_row(
                "simulated cycles", f"{round(r.latency_s * clock):,} at {clock / 1e6:g} MHz"
            )
        if not r.simulated:
            exact = r.space is not None and all(
                "int" in p.dtype
                for p in r.space.logical.params
                if p.name in r.space.logical.outputs
            )
            ok = "bit-exact vs numpy" if exact else "within tolerance of the float reference"
            table.add_row("correct", ok if r.correct else "[red]WRONG[/red]")
        table.add_row("knobs", ", ".join(f"{k}={v}" for k, v in r.knobs.items()))
        if len(r.finalists) > 1 and not r.simulated:
            table.add_row(
                "finalists",
                "; ".join(
                    f"#{f.trial_index} {f.tuning_latency_s * 1e3:.4f} -> "
                    + (f"{f.latency_s * 1e3:.4f} ms" if f.latency_s else f.error_kind or "failed")
                    for f in r.finalists
                )
                + " (tuning -> re-measured)",
            )
    t = r.time_s
    phases = ("setup", "explore", "solve", "build", "run", "total")
    table.add_row("time", ", ".join(f"{k} {t.get(k, 0):.1f}s" for k in phases))
    console.print(table)


def _print_baselines(op: str, dims: tuple[int, ...], r) -> None:  # noqa: ANN001
    """PyTorch's and numpy's latencies for the tuned shape, beside the kernel's. On a CPU
    with AMX, oneDNN runs AMX tile kernels unless capped: for a kernel of a target without
    AMX (``dlboost``, ``llvm``) PyTorch is timed twice, as it is and capped at AVX512-VNNI
    (the instructions ``dlboost`` uses), each row saying which."""
    import functools
    import os

    from .baselines import VNNI_ONEDNN_ISA, numpy_op, torch_op
    from .host import cpu_flags

    names = {"gemm": ("M", "N", "K"), "bmm": ("B", "M", "N", "K"), "gemv": ("M", "K")}[op]
    params = dict(zip(names, dims, strict=True))
    threads = r.space.target.cores
    table = Table(title="baselines, same shape, same machine, same threads")
    for col in ("library", "latency ms", "GOP/s", "heronlike speed-up"):
        table.add_column(col)
    runs = [(torch_op, ""), (numpy_op, "")]
    amx_host = "amx_int8" in cpu_flags() and "ONEDNN_MAX_CPU_ISA" not in os.environ
    if amx_host and "amx" not in r.space.target.names:
        capped = functools.partial(torch_op, isa=VNNI_ONEDNN_ISA)
        runs[:1] = [(torch_op, ", AMX tiles"), (capped, f", capped at {VNNI_ONEDNN_ISA}")]
    for fn, label in runs:
        lat, note = fn(op, params, threads=threads)
        note = note.split(" [also: ")[0] + label  # the fastest path PyTorch has, and its ISA
        if lat is None:
            table.add_row(note, "-", "-", "-")
        else:
            table.add_row(
                note, f"{lat * 1e3:.4f}", f"{r.flop / lat / 1e9:.1f}", f"{lat / r.latency_s:.2f}x"
            )
    console.print(table)


@main.command()
@_common
def csp(op: str, shape: str, dtype: str, target: str) -> None:
    """Print the stages, schedule template and CSP of OP on the target."""
    from .space import generate_space

    compute, _ = _compute(op, shape, dtype, target)
    click.echo(generate_space(compute, target).describe())


@main.command()
@click.argument("op", type=click.Choice(OPERATORS), required=False)
@click.option("--shape", default=None)
@click.option("--dtype", default="int8", type=click.Choice(sorted(ops.DTYPES)))
@click.option("--target", default="dlboost")
@click.option(
    "--records",
    type=click.Path(path_type=Path),
    default=Path("heronlike_runs") / "records.sqlite",
    show_default=True,
)
def best(op: str | None, shape: str | None, dtype: str, target: str, records: Path) -> None:
    """List the records, or rebuild and check the best kernel of OP without tuning."""
    from .records import Records

    if not records.exists():
        raise click.ClickException(f"no records at {records}")
    if op is None:
        with Records(records) as db:
            table = Table(title=str(records))
            for col in ("workload", "target", "trials", "valid", "best ms", "stages"):
                table.add_column(col, no_wrap=col == "workload", overflow="fold")
            for w in db.workloads():
                lat = w["best_latency_s"]
                table.add_row(
                    w["workload_key"],
                    w["target_key"],
                    str(w["trials"]),
                    str(w["ok_trials"]),
                    f"{lat * 1e3:.4f}" if lat else "-",
                    (w["description"] or "").splitlines()[0] if w["description"] else "",
                )
            console.print(table)
        return
    if shape is None:
        raise click.UsageError("--shape is required with OP")
    from .reference import random_inputs, reference_outputs
    from .tuning import apply_best

    compute, _ = _compute(op, shape, dtype, target)
    kernel = apply_best(records, compute, target)
    dag = kernel.space.logical
    arrays = random_inputs(dag, np.random.default_rng(1))
    expected = reference_outputs(dag, arrays)
    out = kernel(*[a for p, a in zip(dag.params, arrays) if p.name not in dag.outputs])
    ok = np.array_equal(out, next(iter(expected.values())))
    click.echo(f"best kernel of {dag.workload_key} rebuilt; correct: {ok}")
    click.echo(", ".join(f"{k}={kernel.assignment[k]}" for k in kernel.space.csp.knobs))


@main.command("import-results")
@click.argument("bundle_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option(
    "--records",
    type=click.Path(path_type=Path),
    default=Path("heronlike_runs") / "records.sqlite",
    show_default=True,
)
@click.option(
    "--results",
    "results_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="the results file [default: BUNDLE_DIR/results.json]",
)
@click.option(
    "--allow-standin",
    is_flag=True,
    help="accept results of run_bundle.py --standin (fake latencies; for tests)",
)
def import_results(
    bundle_dir: Path, records: Path, results_file: Path | None, allow_standin: bool
) -> None:
    """Import the results of a bundle measured with run_bundle.py into the records."""
    from .measure.bundle import import_results as do_import

    s = do_import(bundle_dir, records, results_file, allow_standin=allow_standin)
    title = escape(f"imported {s.results_path} into {records}")
    table = Table(title=title, show_header=False)
    device = escape(str(s.device))
    table.add_row(
        "device", f"{device} [red](STAND-IN: fake latencies)[/red]" if s.standin else device
    )
    table.add_row("imported", str(s.imported))
    table.add_row("skipped", f"{s.skipped} (already recorded)")
    if s.missing:
        table.add_row("missing", f"{s.missing} (no result in the file)")
    if s.failed:
        table.add_row("failed", ", ".join(f"{k}: {v}" for k, v in sorted(s.failed.items())))
    for wk, label in s.labels.items():
        best = s.best.get(wk)
        text = f"{best[0] * 1e3:.4f} ms ({best[1]})" if best else "no successful candidate"
        base = s.baselines.get(wk) or {}
        if base.get("latency_s"):
            text += f"; {base.get('name')}: {base['latency_s'] * 1e3:.4f} ms"
        table.add_row(f"best {escape(label)}", escape(text))
    console.print(table)


@main.group()
def library() -> None:
    """Kernel libraries for whole models: build, merge records, show."""


@library.command("build")
@click.argument("model")
@click.option(
    "--target",
    default="dlboost",
    show_default=True,
    help='target name or string ("dlboost": VNNI; "llvm": any CPU, general rules; '
    '"cuda -tensorcore": cubins launched through CuPy)',
)
@click.option("--trials", type=int, required=True, help="total trial budget over all workloads")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="library folder to write (kernels.so, or kernels/*.cubin for CUDA, + manifest.json)",
)
@click.option(
    "--records",
    type=click.Path(path_type=Path),
    default=Path("heronlike_runs") / "records.sqlite",
    show_default=True,
)
@click.option("--batch", type=int, default=None, help="batch size of a model module's list")
@click.option(
    "--dtype", default=None, type=click.Choice(sorted(ops.DTYPES)), help="override every dtype"
)
@click.option(
    "--strategy", default="gradient", show_default=True, type=click.Choice(["gradient", "even"])
)
@click.option("--batch-size", default=8, show_default=True, help="candidates per round")
@click.option("--explorer", default="random", show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--runner", default=None, help="rpc://HOST:PORT/KEY: measure on the tracker's devices"
)
@click.option(
    "--parallel", default=1, show_default=True, help="lanes measuring at once (one per device)"
)
@click.option("--check/--no-check", default=True, show_default=True, help="check vs numpy")
def library_build(
    model: str,
    target: str,
    trials: int,
    out_dir: Path,
    records: Path,
    batch: int | None,
    dtype: str | None,
    strategy: str,
    batch_size: int,
    explorer: str,
    seed: int,
    runner: str | None,
    parallel: int,
    check: bool,
) -> None:
    """Tune MODEL's workloads within --trials in total (reusing and resuming from the records)
    and export one shared library with a manifest. MODEL is a JSON operator list, a model
    module (resnet50, vgg16, bert: benchmarks/models/), or a model: an .onnx file or
    MODULE:FUNCTION returning (torch module, example inputs), whose tasks are the workloads."""
    from .library.builder import build

    def report(r) -> None:  # noqa: ANN001
        best = f"{r.best_latency_s * 1e3:.4f} ms" if r.best_latency_s else "no valid yet"
        console.print(
            f"[{r.trials_done}/{r.trials_total}] {escape(r.name)}: +{r.trials} trials, best "
            f"{best}; model estimate {r.estimate_s * 1e3:.3f} ms ({r.elapsed_s:.0f} s)"
        )

    res = build(
        model,
        target,
        trials=trials,
        out_dir=out_dir,
        records=records,
        strategy=strategy,
        batch_size=batch_size,
        seed=seed,
        explorer=explorer,
        runner=runner,
        parallel=parallel,
        batch=batch,
        dtype=dtype,
        check=check,
        progress=report,
    )
    table = Table(title=escape(f"library {res.path} ({res.manifest['target']})"))
    for col in ("function", "x", "latency ms", "checked"):
        table.add_column(col, overflow="fold")
    for k in res.manifest["kernels"]:
        lat = k["latency_s"]
        table.add_row(
            escape(k["name"]),
            str(k["occurrences"]),
            f"{lat * 1e3:.4f}" if lat else "-",
            {True: "bit-exact", False: "[red]WRONG[/red]", None: "-"}[k.get("checked")],
        )
    console.print(table)
    console.print(
        f"model estimate: {res.estimate_s * 1e3:.3f} ms (sum of occurrences x latency); "
        f"{len(res.manifest['kernels'])} kernels; time "
        + ", ".join(f"{k} {v:.1f}s" for k, v in res.time_s.items())
    )
    if res.missing:
        console.print(
            f"[yellow]left out (no valid record):[/yellow] {escape('; '.join(res.missing))}"
        )
    if res.checked is False or res.missing:
        sys.exit(1)


@library.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), required=True)
def library_merge(sources: tuple[Path, ...], output: Path) -> None:
    """Merge the records files SOURCES (e.g. from several machines) into --output."""
    from .library.merging import merge

    s = merge(list(sources), output)
    for src in sources:
        console.print(
            f"{escape(str(src))}: {s.added[str(src)]} trials added, "
            f"{s.skipped[str(src)]} already there"
        )
    console.print(
        f"{escape(str(output))}: {s.workloads} workload/target pairs, {s.runs} runs copied"
    )


@library.command("show")
@click.argument("path", type=click.Path(path_type=Path, exists=True))
def library_show(path: Path) -> None:
    """List the kernels of the library at PATH."""
    from .library.runtime import read_manifest

    m = read_manifest(path)
    table = Table(title=escape(f"{path}: {m['target']}, TVM {m['versions'].get('tvm')}"))
    for col in ("function", "op", "dtype", "x", "latency ms"):
        table.add_column(col, overflow="fold")
    for k in m["kernels"]:
        lat = k.get("latency_s")
        table.add_row(
            k["function"],
            k["op"],
            k["dtype"],
            str(k["occurrences"]),
            f"{lat * 1e3:.4f}" if lat else "-",
        )
    console.print(table)


@main.group()
def model() -> None:
    """Whole models: MODEL is an .onnx file or MODULE:FUNCTION returning (torch module, example
    inputs)."""


def _shapes_option(values: tuple[str, ...]) -> dict[str, int] | None:
    out = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not value.isdigit():
            raise click.BadParameter(f"{v!r} is not NAME=INTEGER", param_hint="--shape")
        out[name] = int(value)
    return out or None


_model_target = click.option(
    "--target",
    default="llvm",
    show_default=True,
    help='heronlike target ("llvm": any CPU; "dlboost": int8 on VNNI)',
)
_records_option = click.option(
    "--records",
    type=click.Path(path_type=Path),
    default=Path("heronlike_runs") / "records.sqlite",
    show_default=True,
)
_model_shapes = click.option(
    "--shape", "shapes", multiple=True, help="bind a symbolic dimension: --shape batch=1"
)


@model.command("tasks")
@click.argument("model_spec", metavar="MODEL")
@_model_target
@_model_shapes
def model_tasks(model_spec: str, target: str, shapes: tuple[str, ...]) -> None:
    """List MODEL's tasks (distinct fused functions) with weights and FLOP."""
    from .model import extract_tasks
    from .model.importers import load_model_spec

    tasks = extract_tasks(load_model_spec(model_spec), target, shapes=_shapes_option(shapes))
    table = Table(title=escape(f"{model_spec}: {len(tasks)} tasks on {target}"))
    for col in ("task", "x", "MFLOP", "tunable"):
        table.add_column(col, overflow="fold")
    for t in tasks:
        table.add_row(
            escape(t.name), str(t.weight), f"{t.flop / 1e6:.2f}", escape(t.reason or "yes")
        )
    console.print(table)


@model.command("tune")
@click.argument("model_spec", metavar="MODEL")
@_model_target
@click.option("--trials", type=int, required=True, help="total trial budget over all tasks")
@_records_option
@click.option("--explorer", default="cga", show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--batch-size", default=8, show_default=True, help="candidates per round")
@click.option("--time-budget", type=float, default=None, help="seconds; no round starts after")
@_model_shapes
def model_tune(
    model_spec: str,
    target: str,
    trials: int,
    records: Path,
    explorer: str,
    seed: int,
    batch_size: int,
    time_budget: float | None,
    shapes: tuple[str, ...],
) -> None:
    """Tune MODEL's tasks within --trials in total (resuming from --records)."""
    from .model import tune_model
    from .model.importers import load_model_spec

    result = tune_model(
        load_model_spec(model_spec),
        target,
        trials=trials,
        records=records,
        explorer=explorer,
        seed=seed,
        batch_size=batch_size,
        time_budget_s=time_budget,
        shapes=_shapes_option(shapes),
    )
    console.print(escape(result.summary()))


@model.command("build")
@click.argument("model_spec", metavar="MODEL")
@_model_target
@_records_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="shared library to write (a manifest OUTPUT.json is written beside it)",
)
@_model_shapes
def model_build(
    model_spec: str, target: str, records: Path, output: Path, shapes: tuple[str, ...]
) -> None:
    """Compile MODEL with the best recorded kernels and export it to --output."""
    from .model import compile_model
    from .model.importers import load_model_spec

    compiled = compile_model(
        load_model_spec(model_spec), target, records, shapes=_shapes_option(shapes)
    )
    compiled.export_library(output)
    console.print(escape(compiled.summary()))
    console.print(f"wrote {escape(str(output))} and {escape(str(output))}.json")


@model.command("run")
@click.argument("library", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--repeat", default=30, show_default=True, help="timed runs (median reported)")
@click.option("--seed", default=0, show_default=True, help="seed of the random inputs")
@click.option(
    "--profile",
    "profile",
    is_flag=True,
    help="also time every kernel inside the model, beside its time when tuned alone",
)
def model_run(library: Path, repeat: int, seed: int, profile: bool) -> None:
    """Load a compiled model, run it on random inputs and print its outputs' shapes and its
    median latency (with --profile: where the time goes, kernel by kernel)."""
    from .model import load

    compiled = load(library)
    inputs = compiled.random_inputs(seed)
    outputs = compiled(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for i, out in enumerate(outputs):
        console.print(
            f"output {i}: {out.dtype}{list(out.shape)}  mean {float(np.mean(out)):.6g}  "
            f"finite {bool(np.isfinite(out).all())}"
        )
    latency = compiled.benchmark(*inputs, repeat=repeat)
    console.print(f"median latency: {latency * 1e3:.3f} ms over {repeat} runs")
    if profile:
        console.print(escape(compiled.profile(*inputs, runs=repeat).table()))


def run() -> None:
    """Entry point that turns heronlike's typed errors into one-line messages."""
    try:
        main(standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        sys.exit(130)
    except HeronlikeError as e:
        message = f"[red]error[/red] ({type(e).__name__}): {escape(str(e))}"
        err_console.print(message, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    run()
