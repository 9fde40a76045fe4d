"""A task scheduler: one total trial budget spread over the tuning sessions of many workloads.

A model is many workloads (a ResNet-50 has 20 distinct convolutions and a GEMM), each used some
number of times. :class:`TaskScheduler` drives one :class:`~heronlike.session.TuningSession`
per workload *round by round*: before every round it picks the workload whose next round is
expected to shorten the model's latency most, ``L = sum_i occurrences_i x latency_i``.

Strategies:

* ``"gradient"`` (default), the gradient strategy of TVM's task schedulers: Ansor's
  ``GradientScheduler`` (``python/tvm/auto_scheduler/task_scheduler.py`` in apache/tvm up to
  v0.15; Zheng et al., *Ansor*, OSDI'20, section 6) and MetaSchedule's ``GradientBased``
  (``src/meta_schedule/task_scheduler/gradient_based.cc``). Every task first gets one round
  (warm-up, in order). Then task ``i`` with weight ``w_i`` (occurrences), best latency ``g_i``
  after ``t_i`` rounds and best-latency history ``h_i`` (one entry per round) has the gradient::

      backward = (h_i[-1] - h_i[-1 - window]) / window     (0 while t_i <= window)
      forward  = -g_i / t_i                                (the optimistic guess)
      grad_i   = w_i * (alpha * backward + (1 - alpha) * forward)

  and the most negative gradient wins (``alpha = 0.2``, ``window = 3`` as in TVM); with
  probability ``epsilon`` a random live task is picked instead (TVM's epsilon-greedy; 0.05).
  ``dL/dg_i = w_i`` for the weighted sum, which is TVM's ``chain_grad``. A task that has had
  ``dead_rounds`` rounds without a valid candidate is left alone (TVM would insist forever).
* ``"even"``: the budget split evenly (``trials // n``, the first ``trials % n`` tasks one
  more), rounds in round-robin order: the baseline the gradient strategy is compared with.

**Variant trials.** A session whose space has a finish knob (where the padding guards go:
:attr:`heronlike.csp.CSP.finish_knobs`) owes the variant trials a tune spends at the end of its
budget (:attr:`~heronlike.session.TuningSession.variants_left`); a session given its budget round
by round never reaches that end, so the scheduler keeps what the opened sessions owe out of the
search's share of the total and, once that share is spent, measures them
(:meth:`~heronlike.session.TuningSession.variant_round`). The total stays ``trials``.

**Resumable.** The records are the source of truth: the budget ``trials`` counts the trials of
every task already in the records (recorded by this heronlike and TVM version, as a
session counts them), the per-round best-latency history of each task is rebuilt from its trials
in ``trial_index`` order, and a session resumes its task. Killing a run at any moment loses at
most the trials of the batch in flight; running it again with the same arguments continues to
the same total and measures no trial twice; running it again after it finished measures
nothing.

**Scale-out.** One build pool (``target.make_builder``: a process per local core) is shared by
every session; ``parallel`` lanes run rounds of different tasks at the same time, each lane with
its own runner (from a ``rpc://HOST:PORT/KEY`` runner spec, one RPC client per lane, so a
tracker with N servers under the key serves N lanes at once). A session stays in the lane
(thread) that opened it: its records connection and its runner belong to that lane.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidArgumentError
from .records import VERSION_KEYS, Records, TrialRecord, current_versions

__all__ = ["STRATEGIES", "ScheduleResult", "Task", "TaskScheduler", "TaskState", "RoundInfo"]

STRATEGIES = ("gradient", "even")


@dataclass(frozen=True)
class Task:
    """One workload of a model.

    Attributes:
        name: a label for reports (e.g. ``"conv2d 1x56x56x64->64 k3 s1 p1"``).
        compute: a list of ``te.Tensor`` (inputs, then outputs; :mod:`heronlike.ops`) or a
            ``tirx.PrimFunc``.
        weight: how many times the model runs it (occurrences); its share of the model latency
            is ``weight x latency``. Must be > 0.
    """

    name: str
    compute: Any
    weight: float = 1.0


@dataclass
class TaskState:
    """Where one task stands (in :class:`ScheduleResult` and the ``progress`` callback).

    Attributes:
        name, weight: from the :class:`Task`.
        workload_key, target_key: its records keys.
        trials: its trials in the records of this heronlike and TVM version (they count
            toward the budget), including ``trials_run``.
        trials_run: trials measured by this :meth:`TaskScheduler.run` call.
        foreign_trials: its trials recorded by another heronlike or TVM version (skipped).
        best_latency_s: its best valid latency in the records (median, seconds), or None.
        history: best latency (seconds, or None) after each round, oldest first; rounds of
            an earlier run are rebuilt from the records in ``batch_size`` chunks.
        finished: no more rounds: its space is exhausted, or it is dead (no valid candidate
            after ``dead_rounds`` rounds), or it reached ``max_trials_per_task``.
    """

    name: str
    weight: float
    workload_key: str
    target_key: str
    trials: int = 0
    trials_run: int = 0
    foreign_trials: int = 0
    best_latency_s: float | None = None
    history: list[float | None] = field(default_factory=list)
    finished: bool = False
    lane: int | None = None
    busy: bool = False

    @property
    def rounds(self) -> int:
        return len(self.history)


@dataclass(frozen=True)
class RoundInfo:
    """One round the scheduler ran (``progress`` callback argument and
    :attr:`ScheduleResult.rounds`).

    Attributes:
        task: index of the task in the scheduler's task list.
        name: its name.
        trials: trials measured in this round.
        best_latency_s: the task's best latency after the round (seconds, or None).
        trials_done: trials of all tasks in the records after the round (counts toward
            ``trials_total``).
        trials_total: the total budget.
        estimate_s: ``sum(weight x best latency)`` over the tasks with a valid candidate.
        lane: the lane that ran it.
        elapsed_s: seconds since :meth:`TaskScheduler.run` started.
    """

    task: int
    name: str
    trials: int
    best_latency_s: float | None
    trials_done: int
    trials_total: int
    estimate_s: float
    lane: int
    elapsed_s: float


@dataclass
class ScheduleResult:
    """What :meth:`TaskScheduler.run` did.

    Attributes:
        tasks: the final :class:`TaskState` of every task, in task order.
        rounds: the rounds of this call, in the order they finished.
        strategy: ``"gradient"`` or ``"even"``.
        trials_total: the budget; ``trials_done``: trials of all tasks in the records now.
        trials_run: trials measured by this call.
        estimate_s: ``sum(weight x best latency)`` over tasks with a valid candidate (seconds).
        missing: names of tasks without a valid candidate.
        time_s: wall seconds of the call.
    """

    tasks: list[TaskState]
    rounds: list[RoundInfo]
    strategy: str
    trials_total: int
    trials_done: int
    trials_run: int
    estimate_s: float
    missing: list[str]
    time_s: float

    def allocation(self) -> dict[str, int]:
        """Trials in the records per task name."""
        return {t.name: t.trials for t in self.tasks}


class _SharedBuilder:
    """A builder handed to several sessions: closing a session must not close it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def build(self, inputs: Sequence[Any]) -> list[Any]:
        return self.inner.build(inputs)

    def close(self) -> None:  # the scheduler closes the inner builder
        pass


class _SharedRunner:
    """A runner handed to the sessions of one lane; closing a session must not close it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    # the timing policy is the inner runner's: a finish raises it for its re-measure
    @property
    def number(self) -> int:
        return self.inner.number

    @number.setter
    def number(self, value: int) -> None:
        self.inner.number = value

    @property
    def repeat(self) -> int:
        return self.inner.repeat

    @repeat.setter
    def repeat(self, value: int) -> None:
        self.inner.repeat = value

    def run(self, inputs: Sequence[Any], on_result: Any = None) -> list[Any]:
        return self.inner.run(inputs, on_result=on_result)

    def close(self) -> None:
        pass


def _history(trials: list[TrialRecord], batch: int) -> list[float | None]:
    """Best latency after each ``batch`` trials (in trial order): the per-round history of a
    task rebuilt from its records."""
    out: list[float | None] = []
    best: float | None = None
    for i, rec in enumerate(trials):
        if rec.ok and (best is None or rec.latency_s < best):  # type: ignore[operator]
            best = rec.latency_s
        if (i + 1) % batch == 0 or i == len(trials) - 1:
            out.append(best)
    return out


class TaskScheduler:
    """Tune several workloads on one target within one total trial budget.

    Args:
        tasks: the workloads (:class:`Task`); two tasks with the same compute are one workload
            in the records, so pass each compute once (sum the weights).
        target: target name, string, dict or object (:func:`heronlike.get_target`).
        trials: the total trial budget over all tasks, counting the trials already in
            ``records`` (so a rerun resumes; see the module docstring).
        strategy: ``"gradient"`` or ``"even"``.
        records: SQLite records file (default ``heronlike_runs/records.sqlite``).
        batch_size: candidates per round.
        seed: one seed; task ``i``'s session gets a seed derived from it and the task's
            workload key (stable when tasks are reordered or added).
        explorer, explorer_options: as :func:`heronlike.tune`.
        evaluator: :class:`~heronlike.session.EvaluatorConfig` (timing and timeouts).
        runner: a runner spec (``"rpc://HOST:PORT/KEY"``: one RPC client per lane), a
            :class:`~heronlike.measure.Runner` object (``parallel`` must be 1), or None (the
            target's ``make_runner``, which reads ``HERONLIKE_RUNNER``).
        parallel: lanes measuring at the same time (threads; one runner each). Use as many as
            there are devices behind the runner spec; 1 for the local CPU.
        max_trials_per_task: a cap per task (None: only the total budget).
        alpha, window, epsilon, dead_rounds: gradient strategy settings (see the module
            docstring).
        work_dir: folder for the sessions' input and reference data (default: beside the
            records).
        progress: called with a :class:`RoundInfo` after every round (in the lane's thread).

    Raises:
        InvalidArgumentError: an empty task list, a bad budget, weight, strategy or setting.
        UnknownTargetError: an unknown target. Errors of a task's compute (e.g.
            UnsupportedDtypeError) are raised when its session is opened, before it measures.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        target: str | Mapping[str, Any] | Any = "dlboost",
        *,
        trials: int,
        strategy: str = "gradient",
        records: str | Path | None = None,
        batch_size: int = 8,
        seed: int = 0,
        explorer: str = "random",
        explorer_options: Mapping[str, Any] | None = None,
        evaluator: Any = None,
        runner: Any = None,
        parallel: int = 1,
        max_trials_per_task: int | None = None,
        alpha: float = 0.2,
        window: int = 3,
        epsilon: float = 0.05,
        dead_rounds: int = 3,
        work_dir: str | Path | None = None,
        progress: Callable[[RoundInfo], None] | None = None,
    ) -> None:
        from .session import DEFAULT_RECORDS, EvaluatorConfig
        from .target import get_target

        tasks = list(tasks)
        if not tasks:
            raise InvalidArgumentError("tasks must hold at least one Task")
        for name, v, low in (("trials", trials, 1), ("batch_size", batch_size, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise InvalidArgumentError(f"{name} must be an integer >= {low}, got {v!r}")
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise InvalidArgumentError(f"parallel must be an integer >= 1, got {parallel!r}")
        if strategy not in STRATEGIES:
            raise InvalidArgumentError(
                f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}"
            )
        if not 0.0 <= epsilon <= 1.0 or not 0.0 <= alpha <= 1.0:
            raise InvalidArgumentError("alpha and epsilon must be in [0, 1]")
        if max_trials_per_task is not None and max_trials_per_task < 1:
            raise InvalidArgumentError("max_trials_per_task must be >= 1 or None")
        for t in tasks:
            if not isinstance(t, Task):
                raise InvalidArgumentError(f"tasks must be Task objects, got {type(t).__name__}")
            if not (isinstance(t.weight, int | float) and math.isfinite(t.weight) and t.weight > 0):
                raise InvalidArgumentError(f"task {t.name!r}: weight must be > 0, got {t.weight!r}")
        if runner is not None and not isinstance(runner, str) and parallel > 1:
            raise InvalidArgumentError(
                "parallel > 1 needs a runner spec (one runner per lane), not a runner object"
            )
        self.tasks = tasks
        self.target = get_target(target)
        self.trials = trials
        self.strategy = strategy
        self.records_path = Path(records) if records is not None else DEFAULT_RECORDS
        self.batch_size = batch_size
        self.seed = seed
        self.explorer = explorer
        self.explorer_options = dict(explorer_options or {})
        self.evaluator = evaluator if evaluator is not None else EvaluatorConfig()
        self.runner = runner
        self.parallel = parallel
        self.max_trials_per_task = max_trials_per_task
        self._variants_owed: dict[int, int] = {}  # task index -> variant trials still owed
        self.alpha, self.window, self.epsilon = alpha, window, epsilon
        self.dead_rounds = dead_rounds
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.progress = progress
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._stop = False
        self.states = self._read_states()

    # -- state from the records -----------------------------------------------------------------

    def _read_states(self) -> list[TaskState]:
        from .dag import ComputeDAG

        versions = current_versions()
        tk = self.target.key
        states, foreign_total = [], 0
        keys: dict[str, str] = {}
        with Records(self.records_path) as db:
            for t in self.tasks:
                dag = ComputeDAG.from_compute(t.compute)
                wk = dag.workload_key
                db.adopt(wk, dag.legacy_workload_key)
                if wk in keys:
                    raise InvalidArgumentError(
                        f"tasks {keys[wk]!r} and {t.name!r} are the same workload ({wk}); "
                        "pass it once with the summed weight"
                    )
                keys[wk] = t.name
                today, foreign = db.split_by_version(wk, tk, versions, VERSION_KEYS)
                ok = [r.latency_s for r in today if r.ok]
                states.append(
                    TaskState(
                        name=t.name,
                        weight=float(t.weight),
                        workload_key=wk,
                        target_key=tk,
                        trials=len(today),
                        foreign_trials=len(foreign),
                        best_latency_s=min(ok) if ok else None,  # type: ignore[type-var]
                        history=_history(today, self.batch_size),
                    )
                )
                foreign_total += len(foreign)
        if foreign_total:
            n = sum(1 for s in states if s.foreign_trials)
            warnings.warn(
                f"{self.records_path}: {foreign_total} trials of {n} of these workloads on "
                f"{tk} were recorded by another heronlike or TVM version (this is "
                + ", ".join(f"{k} {versions[k]}" for k in VERSION_KEYS)
                + "); they are skipped: not counted toward the budget, not reused",
                stacklevel=3,
            )
        for s in states:
            self._update_finished(s)
        return states

    def _update_finished(self, s: TaskState) -> None:
        cap = self.max_trials_per_task
        if cap is not None and s.trials >= cap:
            s.finished = True
        if s.best_latency_s is None and s.rounds >= self.dead_rounds:
            s.finished = True

    # -- allocation -----------------------------------------------------------------------------

    def trials_done(self) -> int:
        return sum(s.trials for s in self.states)

    def estimate_s(self) -> float:
        """``sum(weight x best latency)`` over the tasks with a valid candidate (seconds)."""
        return sum(s.weight * s.best_latency_s for s in self.states if s.best_latency_s)

    def _quota(self, i: int) -> int:
        n = len(self.states)
        return self.trials // n + (1 if i < self.trials % n else 0)

    def _gradient(self, s: TaskState) -> float:
        """TVM's task gradient (the module docstring): negative, the larger the magnitude the
        more a round of this task is expected to gain."""
        h = [x for x in s.history]
        g = s.best_latency_s
        if g is None:
            return -math.inf  # no valid candidate yet: TVM's best cost 1e10
        rounds = max(1, s.rounds)
        if len(h) > self.window and h[-1 - self.window] is not None:
            backward = (h[-1] - h[-1 - self.window]) / self.window  # type: ignore[operator]
        else:
            backward = 0.0
        forward = -g / rounds
        return s.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def _pick(self, lane: int) -> tuple[int, int, bool] | None:
        """The next (task index, trials, whether they are variant trials) for ``lane``, or None
        when nothing is left for it. The variant trials that opened sessions owe
        (:attr:`~heronlike.session.TuningSession.variants_left`) are kept out of the search's
        share and measured once it is spent. Called under the lock."""
        left = (
            self.trials
            - self.trials_done()
            - sum(self._inflight.get(i, 0) for i in range(len(self.states)))
        )
        if left <= 0 or self._stop:
            return None
        cap = self.max_trials_per_task
        owed = {
            i: min(n, cap - self.states[i].trials) if cap is not None else n
            for i, n in self._variants_owed.items()
            if not (self.states[i].finished and self.states[i].best_latency_s is None)  # dead
        }
        search = self._pick_search(lane, left - sum(owed.values()))
        if search is not None:
            return (*search, False)
        for i, n in sorted(owed.items()):
            s = self.states[i]
            if n > 0 and not s.busy and s.lane in (None, lane) and s.best_latency_s is not None:
                return i, min(n, left), True
        return None

    def _pick_search(self, lane: int, left: int) -> tuple[int, int] | None:
        """The next search round (task index, trials) for ``lane`` within ``left`` trials."""
        if left <= 0:
            return None
        live = [
            i
            for i, s in enumerate(self.states)
            if not s.finished and not s.busy and s.lane in (None, lane)
        ]
        if self.strategy == "even":
            live = [i for i in live if self.states[i].trials < self._quota(i)]
        if not live:
            return None
        fresh = [i for i in live if self.states[i].rounds == 0]
        if fresh:
            i = fresh[0]
        elif self.strategy == "even":
            i = min(live, key=lambda j: (self.states[j].trials / max(1, self._quota(j)), j))
        elif self.epsilon and self._rng.random() < self.epsilon:
            i = int(self._rng.choice(live))
        else:
            i = min(live, key=lambda j: (self._gradient(self.states[j]), j))
        s = self.states[i]
        n = min(self.batch_size, left)
        if self.max_trials_per_task is not None:
            n = min(n, self.max_trials_per_task - s.trials)
        if self.strategy == "even":
            n = min(n, self._quota(i) - s.trials)
        return (i, n) if n > 0 else None

    # -- running --------------------------------------------------------------------------------

    def _task_seed(self, s: TaskState) -> int:
        return int((self.seed * 1_000_003 + int(s.workload_key[:12], 16)) % (2**31 - 1))

    def _open(self, i: int, lane: _Lane) -> Any:
        from .session import TuningSession

        s = self.states[i]
        with self._open_lock:  # TVM and the rules, one session set-up at a time
            return TuningSession(
                self.tasks[i].compute,
                self.target,
                trials=max(self.trials, s.trials + 1),
                explorer=self.explorer,
                seed=self._task_seed(s),
                records=lane.db,
                batch_size=self.batch_size,
                explorer_options=self.explorer_options,
                work_dir=(self.work_dir / s.workload_key) if self.work_dir else None,
                evaluator=self.evaluator,
                runner=_SharedRunner(lane.runner),
                builder=_SharedBuilder(self._builder),
            )

    def _lane_loop(self, lane: _Lane) -> None:
        try:
            lane.db = Records(self.records_path)
            lane.runner = self._make_runner()
            while True:
                with self._lock:
                    pick = self._pick(lane.index)
                    if pick is None:
                        return
                    i, n, variant = pick
                    s = self.states[i]
                    s.busy, s.lane = True, lane.index
                    self._inflight[i] = n
                try:
                    session = lane.sessions.get(i)
                    if session is None:
                        session = lane.sessions[i] = self._open(i, lane)
                        with self._lock:  # kept out of the search's share from now on
                            self._variants_owed[i] = session.variants_left
                    before, run_before = session.done, session.valid + session.invalid
                    if variant:
                        session.variant_round(n)
                    else:
                        session.max_trials = session.done + n  # this round measures n trials
                        session.round()
                    # trials other processes recorded for this task meanwhile count too
                    measured = session.done - before
                    run = session.valid + session.invalid - run_before
                    exhausted = not variant and session.finished and measured < n
                    best = session.best.latency_s if session.best is not None else None
                finally:
                    with self._lock:
                        s.busy = False
                        self._inflight.pop(i, None)
                        if variant:
                            self._variants_owed[i] = 0
                with self._lock:
                    s.trials += measured
                    s.trials_run += run
                    if best is not None and (s.best_latency_s is None or best < s.best_latency_s):
                        s.best_latency_s = best
                    s.history.append(s.best_latency_s)
                    if exhausted or (measured == 0 and not variant):
                        s.finished = True
                    self._update_finished(s)
                    info = RoundInfo(
                        i,
                        s.name,
                        measured,
                        s.best_latency_s,
                        self.trials_done(),
                        self.trials,
                        self.estimate_s(),
                        lane.index,
                        time.perf_counter() - self._t0,
                    )
                    self._rounds.append(info)
                if self.progress is not None:
                    self.progress(info)
        except BaseException:
            with self._lock:
                self._stop = True
            raise
        finally:
            lane.close()

    def _make_runner(self) -> Any:
        ev = self.evaluator
        timing = dict(number=ev.number, repeat=ev.repeat, min_repeat_ms=ev.min_repeat_ms)
        if self.runner is None:
            return self.target.make_runner(timeout_s=ev.run_timeout_s, **timing)
        if isinstance(self.runner, str):
            from .measure.rpc import runner_from_spec

            return runner_from_spec(self.runner, timeout_s=ev.run_timeout_s, **timing)
        return _SharedRunner(self.runner)  # the caller's object: the caller closes it

    def request_stop(self) -> None:
        """Start no new round (rounds in flight finish and are recorded); :meth:`run` returns
        once they have. Safe to call from the ``progress`` callback or another thread."""
        with self._lock:
            self._stop = True

    def run(self) -> ScheduleResult:
        """Run rounds until the budget is spent (or every task is finished).

        Returns:
            A :class:`ScheduleResult`. The best kernels are in the records
            (:func:`heronlike.apply_best`, :func:`heronlike.library.build`).

        Raises:
            Whatever a session raises for bad input (before it measures), and
            ``KeyboardInterrupt``; every trial measured so far is already committed.
        """
        self._t0 = time.perf_counter()
        self._rounds: list[RoundInfo] = []
        self._inflight: dict[int, int] = {}
        self._variants_owed = {}
        self._stop = False
        start_trials = self.trials_done()
        self._builder = self.target.make_builder(timeout_s=self.evaluator.build_timeout_s)
        try:
            lanes = [_Lane(k) for k in range(self.parallel)]
            if self.parallel == 1:
                self._lane_loop(lanes[0])
            else:
                errors: list[BaseException] = []

                def body(lane: _Lane) -> None:
                    try:
                        self._lane_loop(lane)
                    except BaseException as exc:  # noqa: BLE001 - re-raised below
                        errors.append(exc)

                threads = [
                    threading.Thread(target=body, args=(lane,), name=f"heronlike-lane{lane.index}")
                    for lane in lanes
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                if errors:
                    raise errors[0]
        finally:
            self._builder.close()
        done = self.trials_done()
        return ScheduleResult(
            tasks=[s for s in self.states],
            rounds=list(self._rounds),
            strategy=self.strategy,
            trials_total=self.trials,
            trials_done=done,
            trials_run=done - start_trials,
            estimate_s=self.estimate_s(),
            missing=[s.name for s in self.states if s.best_latency_s is None],
            time_s=time.perf_counter() - self._t0,
        )


class _Lane:
    """One measuring lane: a thread's records connection, runner and open sessions."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.db: Records | None = None
        self.runner: Any = None
        self.sessions: dict[int, Any] = {}

    def close(self) -> None:
        for session in self.sessions.values():
            try:
                if session.db is not None and session.run_id is not None:
                    best = session.best.latency_s if session.best is not None else None
                    session.db.finish_run(
                        session.run_id, best_latency_s=best, wall_s=session.elapsed()
                    )
            except Exception:  # noqa: BLE001 - closing must go on
                pass
            session.close()
        self.sessions.clear()
        if self.runner is not None:
            self.runner.close()
            self.runner = None
        if self.db is not None:
            self.db.close()
            self.db = None
