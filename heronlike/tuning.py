"""The tuning loop: the one place that closes the loop between search and measurement.

compute → rules → space (template + CSP) → explorer proposes assignments → apply the
schedule → build (worker pool) → run (isolated worker, checked against numpy) → records
(SQLite, one committed row per trial) → the explorer and its cost model observe the results.

The loop owns the trial budget, the random seed, progress reporting and the records, as the
task scheduler does in TVM MetaSchedule; explorers only propose (ask/tell).
"""

from __future__ import annotations

import math
import platform
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tvm

from . import __version__
from .cost_model import CostModel, XGBCostModel
from .errors import RecordsMismatchError
from .explore import make_explorer
from .explore.base import Explorer, Observation
from .features import ScheduleFeatures
from .kernel import BuiltKernel
from .measure import Runner
from .measure.check import compare
from .measure.measurer import HardwareMeasurer, Measurer, ReplayMeasurer
from .records import Records, TrialRecord
from .reference import random_inputs, reference_outputs, save_npz, tolerance
from .sampler import RandSAT
from .space import Space, generate_space
from .target import DLATarget

DEFAULT_RECORDS = Path("heronlike_runs") / "records.sqlite"


@dataclass(frozen=True)
class TuneProgress:
    """Passed to the ``progress`` callback after every measured batch."""

    trials_done: int
    trials_total: int
    valid: int
    invalid: int
    best_latency_s: float | None
    best_throughput: float | None
    elapsed_s: float


@dataclass
class TuneResult:
    """What :func:`tune` found.

    Attributes:
        latency_s: the best kernel's latency, re-measured after tuning with more repeats
            (median, seconds); ``None`` when no candidate was valid.
        tuning_latency_s: its latency as measured during tuning (seconds).
        throughput: operations per second of the best kernel (``flop / latency_s``).
        flop: operations of the compute (2 per multiply-accumulate).
        assignment: the value of every CSP variable of the best candidate.
        knobs: the tunable part of ``assignment``.
        kernel: the built best kernel, callable on numpy arrays (:class:`BuiltKernel`).
        correct: the best kernel's output equals the reference (bit-exact for integers).
        trace: the replayable schedule (``tvm.s_tir`` trace as Python).
        script: the scheduled program as TVMScript.
        trials: trials in the records for this compute and target (all sessions).
        trials_run: trials measured by this call.
        valid, invalid: how many of ``trials_run`` built, ran and were correct, and how many not.
        errors: failed trials of this call by error kind.
        records: path of the SQLite records database.
        time_s: seconds by phase for this call: explore, solve, build, run, total; in
            simulation mode build and run are the replayed trials' recorded seconds and
            ``elapsed`` is the simulated wall time the budget was checked against.
        space: the schedule space (template and CSP).
        curve: after each measured batch of this call, ``(trials done, elapsed seconds, best
            throughput so far in op/s or None)``; elapsed is simulated in simulation mode.
        importance: the cost model's feature importance (XGBoost gain) by feature name, largest
            first; empty when the model was never trained or has no importance.
        simulated: the trials were replayed from records (simulation mode), not measured.
        explorer_stats: the explorer's counters (:meth:`Explorer.stats`), e.g. OpEvo's invalid
            walks or the GA's invalid children.
    """

    latency_s: float | None
    tuning_latency_s: float | None
    throughput: float | None
    flop: float
    assignment: dict[str, int] | None
    knobs: dict[str, int] | None
    kernel: BuiltKernel | None
    correct: bool | None
    trace: str | None
    script: str | None
    trials: int
    trials_run: int
    valid: int
    invalid: int
    errors: dict[str, int]
    records: Path
    target_key: str
    workload_key: str
    time_s: dict[str, float] = field(default_factory=dict)
    space: Space | None = None
    curve: list[tuple[int, float, float | None]] = field(default_factory=list)
    importance: dict[str, float] = field(default_factory=dict)
    simulated: bool = False
    explorer_stats: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """A few human-readable lines."""
        lines = [
            f"workload {self.workload_key} on {self.target_key}: {self.trials_run} trials run "
            f"({self.valid} valid, {self.invalid} invalid), {self.trials} in records",
        ]
        if self.latency_s is None:
            lines.append("no valid candidate")
        else:
            lines.append(
                f"best {self.latency_s * 1e3:.4f} ms = {self.throughput / 1e9:.1f} GOP/s, "
                f"correct: {self.correct}"
            )
            lines.append("knobs " + ", ".join(f"{k}={v}" for k, v in (self.knobs or {}).items()))
        return "\n".join(lines)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"heronlike": __version__, "python": platform.python_version(), "tvm": tvm.__version__}
    for pkg in ("ortools", "xgboost", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out


def _throughput(flop: float, rec: TrialRecord) -> float | None:
    return flop / rec.latency_s if rec.ok and rec.latency_s else None


def tune(
    compute: Any,
    target: str | Mapping[str, Any] | DLATarget = "dlboost",
    *,
    trials: int | None = 64,
    time_budget_s: float | None = None,
    explorer: str | Explorer | type[Explorer] = "random",
    seed: int = 0,
    records: str | Path | Records | None = None,
    batch_size: int = 16,
    explorer_options: Mapping[str, Any] | None = None,
    cost_model: CostModel | None = None,
    work_dir: str | Path | None = None,
    number: int = 3,
    repeat: int = 5,
    min_repeat_ms: float = 10.0,
    build_timeout_s: float = 60.0,
    run_timeout_s: float = 30.0,
    final_repeat: int = 20,
    progress: Callable[[TuneProgress], None] | None = None,
    simulate: str | Path | Records | None = None,
    runner: Runner | str | None = None,
) -> TuneResult:
    """Tune ``compute`` for ``target`` with at most ``trials`` measured candidates in total.

    Args:
        compute: a list of ``te.Tensor`` (inputs, then outputs; see :mod:`heronlike.ops`) or
            a ``tirx.PrimFunc``.
        target: ``"dlboost"``, ``"llvm -mcpu=... -num-cores=..."``, a dict or a DLATarget.
        trials: total trial budget for this compute and target in ``records``: trials already
            there (from an interrupted or earlier tune) count, so re-running resumes. ``None``:
            no trial limit (then ``time_budget_s`` is required).
        time_budget_s: wall-clock budget of this call in seconds, enforced by this loop for
            every explorer: no new batch starts once it is spent (the last batch may end past
            it by one batch's time). In simulation mode the clock is the real time spent plus
            the recorded build and run seconds of the replayed trials.
        explorer: name (``"random"``), class or instance (see :mod:`heronlike.explore`).
        seed: the one seed of every random choice (CP-SAT, explorer, cost model, inputs). The
            same seed proposes the same candidates in the same order as long as the measured
            latencies fed back are the same: always for the first batch, and for a whole tune
            with ``explorer_options={"epsilon": 0}`` (no model-ranked picks); with a trained cost
            model, measurement noise can change later batches.
        records: SQLite file (default ``heronlike_runs/records.sqlite``) or open Records.
        batch_size: candidates proposed, built and measured per round.
        number, repeat, min_repeat_ms: ``time_evaluator`` settings for each trial; the latency
            is the median of ``repeat`` means of ``number`` calls.
        final_repeat: repeats for re-measuring the best kernel at the end.
        progress: called after each round with a :class:`TuneProgress`.
        simulate: simulation mode (as in Kernel Tuner): a records database (path or Records)
            whose trials of this compute and target are replayed instead of building and running
            anything (:class:`~heronlike.measure.measurer.ReplayMeasurer`); assignments it never
            measured fail as ``"not_recorded"``. ``records`` then defaults to an in-memory
            database, so every simulated tune starts from nothing; the result has no kernel.
        runner: the :class:`~heronlike.measure.Runner` that times candidates, or a runner
            spec (``"rpc://HOST:PORT/KEY"``, :func:`heronlike.measure.rpc.runner_from_spec`);
            default: the target's (``target.make_runner``, which reads ``HERONLIKE_RUNNER``
            where the target supports remote devices). For a GPU this machine cannot reach,
            tune round by round through offline bundles instead (:mod:`heronlike.offline`).

    Returns:
        A :class:`TuneResult`; ``latency_s`` is None when no candidate was valid.

    Raises:
        UnknownTargetError, InvalidComputeError, UnsupportedDtypeError, UnsupportedShapeError,
        NoTensorizableStageError, HostFeatureError, UnknownExplorerError: for bad input,
        before anything is measured.
        RecordsMismatchError: in simulation mode, if ``simulate`` holds no trial to replay.
        ValueError: for ``trials``, ``batch_size`` or ``time_budget_s`` not positive, or
            neither ``trials`` nor ``time_budget_s`` given.
    """
    if trials is None and time_budget_s is None:
        raise ValueError("give a trial budget (trials) or a time budget (time_budget_s)")
    if (trials is not None and trials < 1) or batch_size < 1:
        raise ValueError("trials and batch_size must be at least 1")
    if time_budget_s is not None and not time_budget_s > 0:
        raise ValueError(f"time_budget_s must be > 0, got {time_budget_s}")
    max_trials = math.inf if trials is None else trials
    t_start = time.perf_counter()
    space = generate_space(compute, target)
    tgt = space.target
    tvm_target = tgt.tvm_target() if simulate is None else {}
    measure_with: Runner | None = None
    if simulate is None:
        tgt.check_host()
        # before anything is recorded: a target may have no device to run on here
        measure_with = _runner(tgt, runner, run_timeout_s, number, repeat, min_repeat_ms)
    rng = np.random.default_rng(seed)
    sampler = RandSAT(space.csp, seed=int(rng.integers(2**31 - 1)))
    model = cost_model if cost_model is not None else XGBCostModel(seed=seed)
    featurizer = ScheduleFeatures(space)
    exp = make_explorer(
        explorer,
        space.csp,
        sampler,
        model,
        rng,
        featurizer=featurizer,
        **dict(explorer_options or {}),
    )
    default_records = ":memory:" if simulate is not None else DEFAULT_RECORDS
    db = records if isinstance(records, Records) else Records(records or default_records)
    wk, tk, flop = space.workload_key, tgt.key, space.logical.flop()
    db.register_workload(
        wk, description=space.logical.describe(), compute_text=space.logical.text, target_key=tk
    )
    history = db.trials(wk, tk)
    measured = _replay_history(history, sampler, exp, flop)
    run_id = db.start_run(
        workload_key=wk,
        target_key=tk,
        seed=seed,
        explorer=exp.name,
        trials_requested=trials or 0,  # 0: no trial limit (a time budget)
        versions=_versions(),
        options={
            "batch_size": batch_size,
            "number": number,
            "repeat": repeat,
            "time_budget_s": time_budget_s,
            "simulate": str(getattr(simulate, "path", simulate)) if simulate else None,
        },
    )
    data: _Data | None = None
    measurer: Measurer
    if simulate is not None:
        source = simulate if isinstance(simulate, Records) else Records(simulate)
        measurer = ReplayMeasurer(source, wk, tk, sampler.key)
    else:
        work = Path(work_dir) if work_dir else db.path.parent / wk
        data = _prepare_data(space, work, seed)
        measurer = HardwareMeasurer(
            space,
            tvm_target,
            tgt.make_builder(timeout_s=build_timeout_s),
            measure_with,  # type: ignore[arg-type]
            data.args_path,
            data.expected_path,
            data.rtol,
            device=tgt.device,
            build_options=tgt.build_options(),
        )
    times = Counter[str]()
    errors = Counter[str]()
    valid = invalid = 0
    curve: list[tuple[int, float, float | None]] = []
    t_loop = time.perf_counter()

    def elapsed() -> float:
        return time.perf_counter() - t_loop + measurer.simulated_s

    carry_explore_s = 0.0
    try:
        done = len(history)
        while done < max_trials:
            if time_budget_s is not None and elapsed() >= time_budget_s:
                break
            n = int(min(batch_size, max_trials - done))
            t0, solve0 = time.perf_counter(), sampler.stats.solve_seconds
            proposals = exp.propose(n, exclude=measured)
            solve_s = sampler.stats.solve_seconds - solve0
            explore_s = time.perf_counter() - t0 + carry_explore_s
            if not proposals:
                break  # the space is exhausted: every valid assignment was measured
            batch = measurer.measure(proposals)
            observations = []
            for assignment, (error_kind, error_msg, latency, build_s, run_s) in zip(
                proposals, batch, strict=True
            ):
                rec = db.add(
                    TrialRecord(
                        workload_key=wk,
                        target_key=tk,
                        assignment=assignment,
                        latency_s=latency,
                        error_kind=error_kind,
                        error_msg=error_msg,
                        explore_s=(explore_s - solve_s) / len(proposals),
                        solve_s=solve_s / len(proposals),
                        build_s=build_s,
                        run_s=run_s,
                        seed=seed,
                        explorer=exp.name,
                        trial_index=done,
                    ),
                    run_id,
                )
                done += 1
                measured.add(sampler.key(assignment))
                observations.append(Observation(assignment, _throughput(flop, rec)))
                if rec.ok:
                    valid += 1
                else:
                    invalid += 1
                    errors[rec.error_kind or "?"] += 1
                times["build"] += build_s
                times["run"] += run_s
            times["explore"] += explore_s - solve_s
            times["solve"] += solve_s
            t1 = time.perf_counter()
            exp.observe(observations)
            carry_explore_s = time.perf_counter() - t1
            best = db.best(wk, tk)
            curve.append((done, elapsed(), _throughput(flop, best) if best else None))
            if progress is not None:
                progress(
                    TuneProgress(
                        done,
                        trials,
                        valid,
                        invalid,
                        best.latency_s if best else None,
                        _throughput(flop, best) if best else None,
                        time.perf_counter() - t_start,
                    )
                )
        times["explore"] += carry_explore_s
        times["elapsed"] = elapsed()
        if isinstance(measurer, HardwareMeasurer) and data is not None:
            result = _finish(space, db, tvm_target, data, flop, measurer, final_repeat)
        else:
            result = _finish_simulated(space, db, flop)
    finally:
        measurer.close()
    times["total"] = time.perf_counter() - t_start
    db.finish_run(run_id, best_latency_s=result["tuning_latency_s"], wall_s=times["total"])
    out = TuneResult(
        **result,
        flop=flop,
        trials=db.count(wk, tk),
        trials_run=valid + invalid,
        valid=valid,
        invalid=invalid,
        errors=dict(errors),
        records=db.path,
        target_key=tk,
        workload_key=wk,
        time_s=dict(times),
        space=space,
        curve=curve,
        importance=_importance(exp),
        simulated=simulate is not None,
        explorer_stats=exp.stats(),
    )
    if not isinstance(records, Records):
        db.close()
    return out


def _runner(
    tgt: DLATarget,
    runner: Runner | str | None,
    timeout_s: float,
    number: int,
    repeat: int,
    min_repeat_ms: float,
) -> Runner:
    """The runner the user gave (an object, or a spec string), else the target's."""
    if runner is None:
        return tgt.make_runner(
            timeout_s=timeout_s, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms
        )
    if isinstance(runner, str):
        from .measure.rpc import runner_from_spec

        return runner_from_spec(
            runner, timeout_s=timeout_s, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms
        )
    return runner


def _replay_history(
    history: list[TrialRecord], sampler: RandSAT, exp: Explorer, flop: float
) -> set[tuple[int, ...]]:
    """Keys of the trials already measured; the explorer observes the usable ones."""
    measured: set[tuple[int, ...]] = set()
    observations = []
    for rec in history:
        try:
            measured.add(sampler.key(rec.assignment))
        except KeyError:
            continue  # recorded by a version whose CSP had other variables
        observations.append(Observation(dict(rec.assignment), _throughput(flop, rec)))
    if observations:
        exp.observe(observations)
    return measured


@dataclass(frozen=True)
class _Data:
    args_path: str
    expected_path: str
    rtol: float
    inputs: list[np.ndarray]
    expected: dict[int, np.ndarray]


def _prepare_data(space: Space, work: Path, seed: int) -> _Data:
    dag = space.logical
    arrays = random_inputs(dag, np.random.default_rng(seed))
    expected = reference_outputs(dag, arrays)
    packed = space.prepare_args(arrays)
    # the runners compare the kernel's own output buffers: expected values in the kernel's
    # layout (a normalized output is a reshape, or zero-padded where the weight is)
    in_kernel = space.prepare_args([expected.get(i, a) for i, a in enumerate(arrays)])
    args = save_npz(work / f"args_seed{seed}.npz", {f"arg{i}": a for i, a in enumerate(packed)})
    exp = save_npz(work / f"expected_seed{seed}.npz", {f"arg{i}": in_kernel[i] for i in expected})
    floating = any(np.issubdtype(a.dtype, np.floating) for a in expected.values())
    rtol = tolerance(dag)[0] if floating else 0.0  # 1e-3; 5e-2 when accumulating in float16
    return _Data(str(args), str(exp), rtol, arrays, expected)


#: the best-kernel fields of a TuneResult when no candidate was valid
_NO_RESULT: dict[str, Any] = dict.fromkeys(
    (
        "latency_s",
        "tuning_latency_s",
        "throughput",
        "assignment",
        "knobs",
        "kernel",
        "correct",
        "trace",
        "script",
    )
)


def _finish(
    space: Space,
    db: Records,
    tvm_target: dict[str, Any],
    data: _Data,
    flop: float,
    measurer: HardwareMeasurer,
    final_repeat: int,
) -> dict[str, Any]:
    """Re-measure the best candidate on the target's runner with more repeats (which checks
    its outputs again); where the target's kernels run in this process, also build it here as
    a callable :class:`BuiltKernel` and check that too."""
    best = db.best(space.workload_key, space.target.key)
    if best is None:
        return dict(_NO_RESULT)
    # re-measure first: running the kernel in this process wakes TVM's thread pool, whose
    # spinning threads would steal cores from the runner for a while
    final = measurer.finish(best.assignment, final_repeat)
    latency = final.latency_s if final.latency_s is not None else best.latency_s
    correct = final.correct
    kernel = None
    if space.target.runs_in_process:
        kernel = BuiltKernel(space, best.assignment, tvm_target)
        inputs = [
            a
            for p, a in zip(space.logical.params, data.inputs)
            if p.name not in space.logical.outputs
        ]
        outs = kernel(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        correct = (correct is not False) and all(
            compare(o, data.expected[i], data.rtol) is None
            for o, i in zip(outs, sorted(data.expected), strict=True)
        )
    else:
        sch = space.apply(best.assignment)
    knobs = {k: best.assignment[k] for k in space.csp.knobs if k in best.assignment}
    return dict(
        latency_s=latency,
        tuning_latency_s=best.latency_s,
        throughput=flop / latency if latency else None,
        assignment=dict(best.assignment),
        knobs=knobs,
        kernel=kernel,
        correct=correct,
        trace=kernel.trace if kernel is not None else str(sch.trace),
        script=kernel.script if kernel is not None else sch.mod.script(),
    )


def _finish_simulated(space: Space, db: Records, flop: float) -> dict[str, Any]:
    """The best replayed trial as it was recorded: nothing is built or re-measured."""
    best = db.best(space.workload_key, space.target.key)
    if best is None:
        return dict(_NO_RESULT)
    sch = space.apply(best.assignment)
    return dict(
        latency_s=best.latency_s,
        tuning_latency_s=best.latency_s,
        throughput=_throughput(flop, best),
        assignment=dict(best.assignment),
        knobs={k: best.assignment[k] for k in space.csp.knobs if k in best.assignment},
        kernel=None,
        correct=None,
        trace=str(sch.trace),
        script=sch.mod.script(),
    )


def _importance(exp: Explorer) -> dict[str, float]:
    """The explorer's cost-model feature importance by name, largest first (empty if none)."""
    importance_of = getattr(exp.cost_model, "feature_importance", None)
    if importance_of is None or not getattr(exp.cost_model, "trained", False):
        return {}
    try:
        scores = importance_of(exp.featurizer.names, kind="gain")
    except ValueError:  # a user model fitted on other columns
        return {}
    return dict(sorted(scores.items(), key=lambda kv: -kv[1]))


def apply_best(
    records: str | Path | Records,
    compute: Any,
    target: str | Mapping[str, Any] | DLATarget = "dlboost",
) -> BuiltKernel:
    """Rebuild the best recorded kernel of ``compute`` on ``target`` without tuning.

    Raises:
        RecordsMismatchError: if the records hold no valid trial of this compute and target
            (a different shape, dtype, target option or heronlike version of the space).
    """
    space = generate_space(compute, target)
    db = records if isinstance(records, Records) else Records(records)
    try:
        best = db.best(space.workload_key, space.target.key)
        if best is None or any(k not in best.assignment for k in space.csp.vars):
            known = ", ".join(f"{w['workload_key']}@{w['target_key']}" for w in db.workloads())
            raise RecordsMismatchError(
                f"{db.path} has no valid trial of workload {space.workload_key} on "
                f"{space.target.key}; it holds: {known or 'nothing'}"
            )
        return BuiltKernel(space, best.assignment, space.target.tvm_target())
    finally:
        if not isinstance(records, Records):
            db.close()
