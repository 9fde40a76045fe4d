"""``tune_model``: tune every task of a model within one trial budget.

The tasks (:mod:`heronlike.model.tasks`) go to :class:`heronlike.scheduler.TaskScheduler`, which
spends the budget round by round where the model's estimated latency ``sum(weight x latency)``
is expected to fall most (the gradient strategy of Ansor, OSDI'20 §6, and MetaSchedule). Every
trial is committed to the records as it finishes, so a run killed at any moment (``kill -9``
included) loses at most the batch in flight, and the same call run again resumes: it counts the
recorded trials toward ``trials`` and measures none twice.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError
from ..scheduler import RoundInfo, ScheduleResult, Task, TaskScheduler
from ..session import EvaluatorConfig
from ..target import DLATarget
from .tasks import ModelTask, fused_module, tasks_of

__all__ = ["ModelTuneResult", "TaskResult", "tune_model"]


@dataclass
class TaskResult:
    """One task after :func:`tune_model`.

    Attributes:
        name, weight, workload_key: from the :class:`~heronlike.model.tasks.ModelTask`.
        trials: its trials in the records (this heronlike and TVM version); ``trials_run``: of
            them, measured by this call.
        best_latency_s: its best recorded latency (median, seconds), or None.
        reason: why it was not tuned (no rule schedules it), else None.
    """

    name: str
    weight: int
    workload_key: str
    trials: int = 0
    trials_run: int = 0
    best_latency_s: float | None = None
    reason: str | None = None


@dataclass
class ModelTuneResult:
    """What :func:`tune_model` did.

    Attributes:
        tasks: a :class:`TaskResult` per task, heaviest first.
        target_key: the target's records key; ``records``: the records file.
        trials_total: the budget; ``trials_done``: trials of the model's tasks in the records;
        trials_run: measured by this call.
        estimate_s: ``sum(weight x best latency)`` over the tuned tasks (seconds): the model's
            latency as its kernels' sum, without the VM's overhead or untuned tasks.
        time_s: wall seconds of this call.
        schedule: the task scheduler's :class:`~heronlike.scheduler.ScheduleResult`.
    """

    tasks: list[TaskResult]
    target_key: str
    records: Path
    trials_total: int
    trials_done: int
    trials_run: int
    estimate_s: float
    time_s: float
    schedule: ScheduleResult | None = field(default=None, repr=False)

    def summary(self) -> str:
        """A table: one line per task (weight, trials, best latency), then the totals."""
        lines = [
            f"model tuned on {self.target_key}: {self.trials_run} trials run "
            f"({self.trials_done}/{self.trials_total} in {self.records}), {self.time_s:.1f} s, "
            f"estimate {self.estimate_s * 1e3:.3f} ms"
        ]
        for t in self.tasks:
            lat = f"{t.best_latency_s * 1e6:10.1f} us" if t.best_latency_s is not None else "-"
            note = f"  not tuned: {t.reason}" if t.reason else ""
            lines.append(f"  x{t.weight:<3d} {t.trials:5d} trials {lat:>13s}  {t.name}{note}")
        return "\n".join(lines)


def tune_model(
    model: Any,
    target: str | Mapping[str, Any] | DLATarget = "llvm",
    *,
    trials: int,
    records: str | Path | None = None,
    explorer: str = "cga",
    seed: int = 0,
    time_budget_s: float | None = None,
    shapes: Mapping[str, int] | None = None,
    batch_size: int = 8,
    strategy: str = "gradient",
    evaluator: EvaluatorConfig | None = None,
    progress: bool | Callable[[RoundInfo], None] = True,
    fast_math: bool = True,
) -> ModelTuneResult:
    """Tune the tasks of ``model`` on ``target`` with ``trials`` measured candidates in total.

    Args:
        model: a Relax ``IRModule``, an ``.onnx`` path or ``onnx.ModelProto``
            (:func:`heronlike.model.from_torch` for a PyTorch module).
        target: ``"llvm"`` (any compute, float32 models), ``"dlboost"`` (int8 on VNNI) ...
        trials: the total budget over all tasks, counting trials already in ``records``.
        records: SQLite records file (default ``heronlike_runs/records.sqlite``).
        explorer: the explorer of every task (:mod:`heronlike.explore`).
        seed: one seed for every task's session.
        time_budget_s: wall-clock budget of this call in seconds: no round starts after it.
        shapes: values of symbolic dimensions (``{"batch": 1}``).
        batch_size: candidates per round.
        strategy: ``"gradient"`` or ``"even"`` (:mod:`heronlike.scheduler`).
        evaluator: timing settings (:class:`~heronlike.session.EvaluatorConfig`).
        progress: True: a line per round on stderr (task, its best latency, the model estimate,
            trials done); False: silent; a callable: called with each
            :class:`~heronlike.scheduler.RoundInfo`.
        fast_math: approximate ``exp`` / ``erf`` / ``tanh`` / ``softmax`` by TVM's
            vectorisable polynomials (:func:`heronlike.model.pipeline.fuse`, default); the
            tasks differ with it, so tune and compile with the same setting.

    Returns:
        A :class:`ModelTuneResult`; compile with :func:`heronlike.model.compile_model`.

    Raises:
        SymbolicShapeError: an unbound symbolic dimension. ModelImportError,
            InvalidArgumentError, UnknownTargetError, UnknownExplorerError: bad input, before
            anything is measured. InvalidArgumentError also when no task can be tuned.
    """
    if time_budget_s is not None and not time_budget_s > 0:
        raise InvalidArgumentError(f"time_budget_s must be > 0 or None, got {time_budget_s!r}")
    mod, tgt = fused_module(model, target, shapes=shapes, fast_math=fast_math)
    tasks = tasks_of(mod, tgt)
    tunable = [t for t in tasks if t.tunable]
    if not tunable:
        reasons = "; ".join(f"{t.name}: {t.reason}" for t in tasks[:3])
        raise InvalidArgumentError(f"no task of the model can be tuned on {tgt.key} ({reasons})")
    start = time.perf_counter()
    report = _reporter(progress, tunable)
    scheduler = TaskScheduler(
        [Task(t.name, t.func, t.weight) for t in tunable],
        tgt,
        trials=trials,
        strategy=strategy,
        records=records,
        batch_size=batch_size,
        seed=seed,
        explorer=explorer,
        evaluator=evaluator,
        progress=lambda info: _on_round(info, scheduler, report, start, time_budget_s),
    )
    result = scheduler.run()
    return _result(tasks, result, tgt, scheduler.records_path, time.perf_counter() - start)


def _on_round(
    info: RoundInfo,
    scheduler: TaskScheduler,
    report: Callable[[RoundInfo], None] | None,
    start: float,
    budget_s: float | None,
) -> None:
    if report is not None:
        report(info)
    if budget_s is not None and time.perf_counter() - start >= budget_s:
        scheduler.request_stop()


def _reporter(
    progress: bool | Callable[[RoundInfo], None], tasks: list[ModelTask]
) -> Callable[[RoundInfo], None] | None:
    if callable(progress):
        return progress
    if not progress:
        return None
    width = max(len(t.name) for t in tasks)

    def show(info: RoundInfo) -> None:
        best = f"{info.best_latency_s * 1e6:9.1f} us" if info.best_latency_s else "    (none)  "
        print(
            f"[{info.trials_done:5d}/{info.trials_total}] {info.elapsed_s:7.1f} s  "
            f"{info.name:<{width}s} +{info.trials:<3d} best {best}  "
            f"model estimate {info.estimate_s * 1e3:9.3f} ms",
            file=sys.stderr,
            flush=True,
        )

    return show


def _result(
    tasks: list[ModelTask], result: ScheduleResult, tgt: DLATarget, records: Path, time_s: float
) -> ModelTuneResult:
    states = {s.workload_key: s for s in result.tasks}
    out = []
    for t in tasks:
        s = states.get(t.workload_key)
        out.append(
            TaskResult(
                name=t.name,
                weight=t.weight,
                workload_key=t.workload_key,
                trials=s.trials if s else 0,
                trials_run=s.trials_run if s else 0,
                best_latency_s=s.best_latency_s if s else None,
                reason=t.reason,
            )
        )
    return ModelTuneResult(
        tasks=out,
        target_key=tgt.key,
        records=records,
        trials_total=result.trials_total,
        trials_done=result.trials_done,
        trials_run=result.trials_run,
        estimate_s=result.estimate_s,
        time_s=time_s,
        schedule=result,
    )
