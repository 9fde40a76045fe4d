"""A tuning session: one compute on one target, from set-up through rounds to the finish.

compute → rules → space (template + CSP) → explorer proposes assignments → apply the
schedule → build (worker pool) → run (isolated worker, checked against numpy) → records
(SQLite, one row committed per trial as it finishes) → the explorer and its cost model observe
the results.

:class:`TuningSession` owns the trial budget, the random seed, the records and the measurer of
one workload, as a task does in TVM MetaSchedule's task scheduler; explorers only propose
(ask/tell). It is split into set-up (the constructor: space, explorer, records, measurer; bad
input raises before anything is recorded), :meth:`~TuningSession.round` (propose, measure and
commit one batch) and :meth:`~TuningSession.finish` (re-measure the best, build the result), so
that a scheduler can interleave the rounds of several sessions. :func:`heronlike.tune` is one
session run to its end.
"""

from __future__ import annotations

import math
import platform
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from .cost_model import CostModel
from .errors import InvalidArgumentError
from .explore import search_for
from .explore.base import Explorer, Observation
from .kernel import BuiltKernel
from .measure import Builder, Runner
from .measure.check import compare
from .measure.kinds import ErrorKind
from .measure.measurer import (
    FinalMeasurement,
    HardwareMeasurer,
    Measurement,
    Measurer,
    ReplayMeasurer,
)
from .postproc import postprocess
from .prior import LinearPrior, check_prior_choice
from .records import VERSION_KEYS, Records, TrialRecord, current_versions
from .reference import random_inputs, reference_outputs, save_npz, tolerance
from .sampler import RandSAT
from .space import Space, generate_space
from .target import DLATarget

__all__ = [
    "DEFAULT_RECORDS",
    "EvaluatorConfig",
    "Finalist",
    "NoResult",
    "TuneProgress",
    "TuneResult",
    "TuningSession",
]

DEFAULT_RECORDS = Path("heronlike_runs") / "records.sqlite"

VARIANT_TRIALS = 2
"""At most this many trials of a budget are variant trials where a space has finish knobs
(:meth:`TuningSession.round`): the two fastest candidates, each with its other padding guards."""

TRIALS_PER_VARIANT = 8
"""One variant trial per this many trials of the budget (none below it): a budget of 8 keeps
one, of 16 or more two."""


@dataclass(frozen=True)
class EvaluatorConfig:
    """How every candidate of a session is built and timed.

    Attributes:
        number: calls averaged into one measurement (``time_evaluator`` ``number``).
        repeat: measurements per candidate; its latency is their median (seconds).
        min_repeat_ms: minimum milliseconds of one measurement (``number`` grows for fast
            kernels until it lasts this long).
        build_timeout_s: wall-clock limit of one build, seconds.
        run_timeout_s: wall-clock limit of one run (load, check, timing), seconds.
        final_repeat: measurements of each finalist when the finalists are re-measured at the
            end.
        finalists: how many of the fastest distinct candidates are re-measured side by side
            at the end (interleaved rounds); the fastest re-measured one is the result, so
            the pick is not the luckiest timing of the tune (1: the tuning-time best only).

    Raises:
        InvalidArgumentError: a count below 1, or a time that is negative or not finite (zero
            timeouts too); the message names the field.
    """

    number: int = 3
    repeat: int = 5
    min_repeat_ms: float = 10.0
    build_timeout_s: float = 60.0
    run_timeout_s: float = 30.0
    final_repeat: int = 20
    finalists: int = 4

    def __post_init__(self) -> None:
        for name in ("number", "repeat", "final_repeat", "finalists"):
            _integer(name, getattr(self, name), 1)
        _number("min_repeat_ms", self.min_repeat_ms, positive=False)
        _number("build_timeout_s", self.build_timeout_s, positive=True)
        _number("run_timeout_s", self.run_timeout_s, positive=True)


def _integer(name: str, v: Any, low: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
        raise InvalidArgumentError(f"{name} must be an integer >= {low}, got {v!r}")


def _number(name: str, v: Any, *, positive: bool) -> None:
    ok = isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
    if not ok or not math.isfinite(v) or v < 0 or (positive and v == 0):
        what = "a finite number > 0" if positive else "a finite number >= 0"
        raise InvalidArgumentError(f"{name} must be {what}, got {v!r}")


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


class NoResult(StrEnum):
    """Why a :class:`TuneResult` has no kernel (its ``latency_s`` is ``None``).

    ``NO_VALID_CANDIDATE``: no trial built, ran and computed the right result.
    ``STANDIN_ONLY``: nothing was measured: every candidate that ran went to a stand-in
    (``run_bundle.py --standin``, runner spec ``cupy+standin``), which launches nothing and
    gives no latency; a stand-in's fake numbers are never taken as measurements.
    """

    NO_VALID_CANDIDATE = "no_valid_candidate"
    STANDIN_ONLY = "standin_only"


@dataclass(frozen=True)
class Finalist:
    """One of the fastest candidates of a tune, re-measured at its finish.

    Attributes:
        trial_index: its trial in the records.
        assignment: the value of every CSP variable.
        tuning_latency_s: its latency as measured during tuning (seconds).
        latency_s: its re-measured latency (median over the finish's interleaved rounds,
            seconds); the tuning-time latency in simulation mode; ``None`` when the re-run
            failed.
        error_kind: why the re-run failed (``None`` if it did not).
        rounds_s: its median latency in each round of the finish (seconds; empty in
            simulation mode).
    """

    trial_index: int
    assignment: dict[str, int]
    tuning_latency_s: float
    latency_s: float | None
    error_kind: str | None = None
    rounds_s: tuple[float, ...] = ()


@dataclass
class TuneResult:
    """What :func:`tune` found.

    Attributes:
        latency_s: the best kernel's latency, re-measured after tuning with more repeats
            (median, seconds); ``None`` when no candidate was valid. The kernel is the fastest
            of the :attr:`finalists` by its fastest round of the first half of the finish's
            rounds, not the fastest tuning-time timing, and ``latency_s`` its median over the
            second half, so that the figure is not biased by the pick.
        tuning_latency_s: its latency as measured during tuning (seconds).
        finalists: the candidates re-measured at the finish
            (:attr:`EvaluatorConfig.finalists` of them, fewer if fewer were valid), in the
            order of their tuning-time latency.
        throughput: operations per second of the best kernel (``flop / latency_s``).
        flop: operations of the compute (2 per multiply-accumulate).
        assignment: the value of every CSP variable of the best candidate.
        knobs: the tunable part of ``assignment``.
        kernel: the built best kernel, callable on numpy arrays (:class:`BuiltKernel`).
        correct: the best kernel's output equals the reference (bit-exact for integers).
        trace: the replayable schedule (``tvm.s_tir`` trace as Python).
        script: the scheduled program as TVMScript.
        trials: trials in the records for this compute and target (all sessions) recorded by
            this heronlike and TVM version for today's space: those count toward the budget.
        foreign_trials: trials of this compute and target recorded by another heronlike or
            TVM version (:data:`heronlike.records.VERSION_KEYS`), or for another space of it
            (:meth:`~heronlike.space.Space.misfits`): skipped, not counted, warned.
        trials_run: trials measured by this call.
        valid, invalid: how many of ``trials_run`` built, ran and were correct, and how many not.
        errors: failed trials of this call by error kind.
        records: path of the SQLite records database.
        time_s: seconds by phase for this call: setup, explore, solve, build, run, total,
            and ``elapsed``, the wall time the budget was checked against (set-up included); in
            simulation mode build and run are the replayed trials' recorded seconds and
            ``elapsed`` is the simulated time after the set-up.
        space: the schedule space (template and CSP).
        curve: after each measured batch of this call, ``(trials done, elapsed seconds, best
            throughput so far in op/s or None)``; elapsed is simulated in simulation mode.
        importance: the cost model's feature importance (XGBoost gain) by feature name, largest
            first; empty when the model was never trained or has no importance.
        simulated: the trials were replayed from records (simulation mode), not measured.
        explorer_stats: the explorer's counters (:meth:`Explorer.stats`), e.g. OpEvo's invalid
            walks or the GA's invalid children.
        no_result: why there is no kernel (:class:`NoResult`) when ``latency_s`` is ``None``;
            ``None`` otherwise.
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
    foreign_trials: int = 0
    finalists: list[Finalist] = field(default_factory=list)
    no_result: NoResult | None = None

    def summary(self) -> str:
        """A few human-readable lines."""
        lines = [
            f"workload {self.workload_key} on {self.target_key}: {self.trials_run} trials run "
            f"({self.valid} valid, {self.invalid} invalid), {self.trials} in records"
            + (
                f" (+{self.foreign_trials} of another heronlike/TVM version, not counted)"
                if self.foreign_trials
                else ""
            ),
        ]
        if self.no_result == NoResult.STANDIN_ONLY:
            lines.append(
                "no valid candidate: nothing was measured (every candidate that ran went to a "
                "stand-in, which launches nothing)"
            )
        elif self.latency_s is None:
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

    out = {**current_versions(), "python": platform.python_version()}
    for pkg in ("ortools", "xgboost", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out


def _throughput(flop: float, rec: TrialRecord) -> float | None:
    return flop / rec.latency_s if rec.ok and rec.latency_s else None


class TuningSession:
    """One compute tuned on one target: set-up here, then :meth:`round` until it returns 0,
    then :meth:`finish`. Arguments are those of :func:`heronlike.tune` (see there), with the
    evaluator settings grouped in ``evaluator``; ``builder`` (default: the target's
    ``make_builder``) lets a task scheduler share one build pool between sessions. The session
    closes the builder and runner it uses when it closes.

    The session commits every trial to ``records`` the moment its outcome is known (a kill -9
    loses only the trials being built or run), counts toward ``trials`` only the trials this
    heronlike and TVM version recorded (others are reported in :attr:`foreign` and a warning),
    and resumes: trials already recorded count and are never measured again.

    Raises (from the constructor, before anything is recorded):
        UnknownTargetError, InvalidComputeError, UnsupportedDtypeError, UnsupportedShapeError,
        NoTensorizableStageError, HostFeatureError, UnknownExplorerError, RunnerSpecError,
        InvalidArgumentError: bad input.
        RecordsMismatchError: ``records`` is corrupted or not a heronlike records file, or in
            simulation mode ``simulate`` holds no trial to replay.
    """

    def __init__(
        self,
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
        prior: bool | LinearPrior = True,
        cost_model: CostModel | None = None,
        work_dir: str | Path | None = None,
        evaluator: EvaluatorConfig | None = None,
        simulate: str | Path | Records | None = None,
        runner: Runner | str | None = None,
        builder: Builder | None = None,
    ) -> None:
        if trials is None and time_budget_s is None:
            raise InvalidArgumentError(
                "give a trial budget (trials) or a time budget (time_budget_s); both are None"
            )
        check_prior_choice(prior)
        if trials is not None:
            _integer("trials", trials, 1)
        if time_budget_s is not None:
            _number("time_budget_s", time_budget_s, positive=True)
        _integer("seed", seed, 0)
        _integer("batch_size", batch_size, 1)
        if explorer_options is not None and not isinstance(explorer_options, Mapping):
            raise InvalidArgumentError(
                "explorer_options must be a mapping of option names to values, got "
                f"{type(explorer_options).__name__}"
            )
        if records is not None and not isinstance(records, Records | str | Path):
            raise InvalidArgumentError(
                f"records must be a path or a Records, got {type(records).__name__}"
            )
        self.evaluator = ev = evaluator if evaluator is not None else EvaluatorConfig()
        if not isinstance(ev, EvaluatorConfig):
            raise InvalidArgumentError(
                f"evaluator must be an EvaluatorConfig, got {type(ev).__name__}"
            )
        self.t_start = time.perf_counter()
        self.trials_requested = trials
        self.max_trials = math.inf if trials is None else trials
        self.time_budget_s = time_budget_s
        self.batch_size = batch_size
        self.seed = seed
        self.space = space = generate_space(compute, target)
        tgt = space.target
        self.simulated = simulate is not None
        #: trials of the budget kept for the finish knobs' variant trials (:meth:`round`)
        self.variant_trials = (
            0
            if simulate is not None or trials is None or not space.csp.finish_knobs
            else min(VARIANT_TRIALS, trials // TRIALS_PER_VARIANT)
        )
        self.tvm_target = tgt.tvm_target() if simulate is None else {}
        measure_with: Runner | None = None
        if simulate is None:
            tgt.check_host()
            # before anything is recorded: a target may have no device to run on here
            measure_with = _runner(tgt, runner, ev)
        try:
            self.sampler, self.explorer = search_for(
                space,
                explorer,
                seed,
                cost_model=cost_model,
                options=explorer_options,
                prior=prior,
            )
        except TypeError as exc:  # an unknown option, or not an explorer at all
            raise InvalidArgumentError(f"explorer / explorer_options: {exc}") from None
        default_records = ":memory:" if simulate is not None else DEFAULT_RECORDS
        self._own_db = not isinstance(records, Records)
        self.db = db = (
            records if isinstance(records, Records) else Records(records or default_records)
        )
        self.workload_key, self.target_key = wk, tk = space.workload_key, tgt.key
        db.adopt(wk, space.legacy_workload_key)
        self.flop = space.logical.flop()
        db.register_workload(
            wk, description=space.logical.describe(), compute_text=space.logical.text, target_key=tk
        )
        self.versions = _versions()
        self.history, self.foreign = db.split_by_version(wk, tk, self.versions)
        if self.foreign:
            _warn_foreign(db, self.foreign, self.versions)
        self.history, misfits = _split_misfits(space, self.history)
        if misfits:
            _warn_misfits(db, misfits, space)
            self.foreign += misfits
        self._foreign_index = {rec.trial_index for rec in self.foreign}
        self.measured = _replay_history(self.history, self.sampler, self.explorer, self.flop)
        #: highest trial index read from the records; later ones come from :meth:`_sync`
        self._synced_upto = max((r.trial_index for r in self.history + self.foreign), default=-1)
        self._own_index: set[int] = set()
        self.best = _best_of(self.history)
        self.run_id = db.start_run(
            workload_key=wk,
            target_key=tk,
            seed=seed,
            explorer=self.explorer.name,
            trials_requested=trials or 0,  # 0: no trial limit (a time budget)
            versions=self.versions,
            options={
                "batch_size": batch_size,
                "number": ev.number,
                "repeat": ev.repeat,
                "time_budget_s": time_budget_s,
                "simulate": str(getattr(simulate, "path", simulate)) if simulate else None,
                "prior": getattr(self.explorer.prior, "source", None) or None,
                "cost_model": type(self.explorer.cost_model).__name__,
            },
        )
        self.data: _Data | None = None
        self.measurer: Measurer
        if simulate is not None:
            source = simulate if isinstance(simulate, Records) else Records(simulate)
            source.adopt(wk, space.legacy_workload_key)
            self.measurer = ReplayMeasurer(source, wk, tk, self.sampler.key)
        else:
            work = Path(work_dir) if work_dir else db.path.parent / wk
            self.data = _prepare_data(space, work, seed)
            self.measurer = HardwareMeasurer(
                space,
                self.tvm_target,
                builder if builder is not None else tgt.make_builder(timeout_s=ev.build_timeout_s),
                measure_with,  # type: ignore[arg-type]
                self.data.args_path,
                self.data.expected_path,
                self.data.rtol,
                device=tgt.device,
                build_options=tgt.build_options(),
                workload=_runner_workload(space, seed),
            )
        self.done = len(self.history)
        self._pending_others: list[TrialRecord] = []
        self._own_variants = 0  # variant trials this session recorded
        self._closed = False
        self.valid = self.invalid = 0
        self.errors = Counter[str]()
        self.times = Counter[str]()
        self.curve: list[tuple[int, float, float | None]] = []
        self._t_loop = time.perf_counter()
        self.times["setup"] = self._t_loop - self.t_start
        self._carry_explore_s = 0.0
        self._exhausted = False

    # -- state ----------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Wall-clock seconds since the session was created, its set-up (the space, the records'
        replay, the runner's start) included; in simulation mode, seconds since the set-up ended
        plus the recorded seconds of the replayed trials."""
        start = self._t_loop if self.simulated else self.t_start
        return time.perf_counter() - start + self.measurer.simulated_s

    @property
    def finished(self) -> bool:
        """No round is left: the trial or time budget is spent (trials of this workload that
        other processes recorded meanwhile count), or the space is exhausted."""
        if not self.simulated and not self._closed:
            self._sync()
        if self._exhausted or self.done >= self.max_trials:
            return True
        # the first round always runs, so a budget the set-up spent still measures a batch
        return (
            self.time_budget_s is not None
            and bool(self.curve)
            and self.elapsed() >= self.time_budget_s
        )

    def progress(self) -> TuneProgress:
        """Where the session stands (for a progress callback)."""
        best = self.best
        return TuneProgress(
            self.done,
            self.trials_requested,
            self.valid,
            self.invalid,
            best.latency_s if best else None,
            _throughput(self.flop, best) if best else None,
            time.perf_counter() - self.t_start,
        )

    def _sync(self) -> int:
        """Take in the trials of this workload and target that other processes (tunes,
        library or model builds sharing the records file) recorded since the last look:
        today's count toward the budget, join the history and the best, are never proposed
        again, and are shown to the explorer at the next round. Returns how many were new."""
        today, foreign = self.db.split_by_version(
            self.workload_key, self.target_key, self.versions, after=self._synced_upto
        )
        today = [r for r in today if r.trial_index not in self._own_index]
        foreign = [r for r in foreign if r.trial_index not in self._own_index]
        today, misfits = _split_misfits(self.space, today)
        foreign += misfits
        if not today and not foreign:
            return 0
        self._synced_upto = max(r.trial_index for r in today + foreign)
        self.foreign.extend(foreign)
        self._foreign_index.update(r.trial_index for r in foreign)
        self.history.extend(today)
        self.done += len(today)
        self._pending_others.extend(today)
        for rec in today:
            if rec.ok and (self.best is None or rec.latency_s < self.best.latency_s):  # type: ignore[operator]
                self.best = rec
        return len(today) + len(foreign)

    # -- one round ------------------------------------------------------------------------------

    def round(self) -> int:
        """Propose, measure and commit one batch; the explorer then observes it.

        The last :attr:`variant_trials` trials of a trial budget are variant trials where the
        space has finish knobs (:attr:`heronlike.csp.CSP.finish_knobs`, e.g. where padding
        guards go): the fastest distinct candidates measured so far, each with a finish knob
        set to another of its values (:meth:`_variants`), measured and recorded as trials
        like the explorer's, so that the finish's re-measure picks among both. (A tune that
        stops on its time budget first, or has no trial budget, makes none.)

        Returns:
            The trials measured (0 when :attr:`finished`, or when the explorer has nothing left
            to propose; the session is then finished).
        """
        if self.finished:
            return 0
        self._observe_others()
        left = self.max_trials - self.done
        # the explorer's share of the budget the tune was given (a scheduler that raises
        # max_trials round by round never reaches it: it calls variant_round itself)
        search_left = (self.trials_requested or 0) - self.variant_trials - self.done
        if self.variant_trials and search_left > 0:
            left = min(left, search_left)
        variants = []
        if self.variant_trials and search_left <= 0:
            variants = self._variants(int(min(self.batch_size, left)))
        t0, solve0 = time.perf_counter(), self.sampler.stats.solve_seconds
        if variants:
            proposals, of = [a for a, _ in variants], [i for _, i in variants]
        else:  # the search's batch (also once no variant is left to measure)
            n = int(min(self.batch_size, left))
            proposals, of = self.explorer.propose(n, exclude=self.measured), []
        if not proposals:
            self._exhausted = True  # every valid assignment was measured
            return 0
        return self._measure_batch(proposals, of, t0, solve0)

    @property
    def variants_left(self) -> int:
        """Variant trials this session still owes (:attr:`variant_trials` less those of this
        version already recorded, by any process): what a scheduler that grows
        :attr:`max_trials` round by round reserves of its budget for :meth:`variant_round`."""
        done = sum(1 for r in self.history if (r.info or {}).get("variant_of") is not None)
        return max(0, self.variant_trials - done - self._own_variants)

    def variant_round(self, n: int) -> int:
        """Measure up to ``n`` variant trials now (:meth:`_variants`; :meth:`round` makes them
        at the end of a trial budget), whatever the budget: for a scheduler that gives a session
        its budget round by round (:class:`heronlike.scheduler.TaskScheduler`), which counts
        them in its own total.

        Returns:
            The trials measured: 0 when there is no finish knob, no valid trial yet, or every
            variant was measured.
        """
        self._observe_others()
        if n < 1 or not self.space.csp.finish_knobs:
            return 0
        t0, solve0 = time.perf_counter(), self.sampler.stats.solve_seconds
        variants = self._variants(n)
        if not variants:
            return 0
        return self._measure_batch([a for a, _ in variants], [i for _, i in variants], t0, solve0)

    def _observe_others(self) -> None:
        """Show the explorer the trials other processes recorded since the last round."""
        if self._pending_others:
            self.measured |= _replay_history(
                self._pending_others, self.sampler, self.explorer, self.flop
            )
            self._pending_others = []

    def _measure_batch(
        self, proposals: list[dict[str, int]], of: list[int], t0: float, solve0: float
    ) -> int:
        """Measure, record and show the explorer ``proposals`` (``of``: for variant trials,
        the trial each varies), proposed since ``t0`` (solver seconds then: ``solve0``)."""
        solve_s = self.sampler.stats.solve_seconds - solve0
        explore_s = time.perf_counter() - t0 + self._carry_explore_s
        share = ((explore_s - solve_s) / len(proposals), solve_s / len(proposals))
        recorded: list[TrialRecord | None] = [None] * len(proposals)

        def commit(i: int, m: Measurement) -> None:
            note = {"variant_of": of[i]} if of else None
            recorded[i] = self._commit(proposals[i], m, share, note)
            self._own_variants += 1 if of else 0

        self.measurer.measure(proposals, on_result=commit)
        self.times["explore"] += explore_s - solve_s
        self.times["solve"] += solve_s
        t1 = time.perf_counter()
        self.explorer.observe(
            [
                Observation(a, _throughput(self.flop, rec) if rec is not None else None)
                for a, rec in zip(proposals, recorded, strict=True)
            ]
        )
        self._carry_explore_s = time.perf_counter() - t1
        best = _throughput(self.flop, self.best) if self.best else None
        self.curve.append((self.done, self.elapsed(), best))
        return len(proposals)

    def _variants(self, n: int) -> list[tuple[dict[str, int], int]]:
        """Up to ``n`` variant trials to measure, as ``(assignment, trial index it varies)``:
        each of the :attr:`variant_trials` fastest distinct candidates of this version
        recorded so far, with one finish knob set to another of its candidates, where that
        point is valid and not measured yet; the fastest candidate's first."""
        space, csp = self.space, self.space.csp
        top = self.db.top(
            self.workload_key,
            self.target_key,
            self.variant_trials,
            where=lambda r: (
                r.trial_index not in self._foreign_index and not space.misfits(r.assignment)
            ),
        )
        out: list[tuple[dict[str, int], int]] = []
        seen = set(self.measured)
        for rec in _split_misfits(space, top)[0]:
            for knob in csp.finish_knobs:
                for value in csp.candidates(knob):
                    point = {**rec.assignment, knob: value}
                    key = self.sampler.key(point)
                    if len(out) < n and key not in seen and not csp.violations(point):
                        seen.add(key)
                        out.append((point, rec.trial_index))
        return out

    def _commit(
        self,
        assignment: Mapping[str, int],
        m: Measurement,
        share: tuple[float, float],
        note: Mapping[str, Any] | None = None,
    ) -> TrialRecord:
        """Record one trial now (committed before returning) and count it (``note``: more
        of its ``info``, e.g. the trial a variant trial varies)."""
        rec = self.db.append(
            TrialRecord(
                workload_key=self.workload_key,
                target_key=self.target_key,
                assignment=dict(assignment),
                latency_s=m.latency_s,
                error_kind=m.error_kind,
                error_msg=m.error_msg,
                explore_s=share[0],
                solve_s=share[1],
                build_s=m.build_s,
                run_s=m.run_s,
                seed=self.seed,
                explorer=self.explorer.name,
                trial_index=-1,  # the next free index, allocated by append
                info={**(m.info or {}), **(note or {})},
            ),
            self.run_id,
        )
        self._own_index.add(rec.trial_index)
        self.done += 1
        self.measured.add(self.sampler.key(assignment))
        if rec.ok:
            self.valid += 1
            if self.best is None or rec.latency_s < self.best.latency_s:  # type: ignore[operator]
                self.best = rec
        else:
            self.invalid += 1
            self.errors[rec.error_kind or "?"] += 1
        self.times["build"] += m.build_s
        self.times["run"] += m.run_s
        return rec

    # -- the end --------------------------------------------------------------------------------

    def finish(self) -> TuneResult:
        """Re-measure the best trial of this version that fits today's space (checking it
        again), close the measurer and the run, and return the :class:`TuneResult`."""
        space = self.space
        times = self.times
        try:
            times["explore"] += self._carry_explore_s
            self._carry_explore_s = 0.0
            times["elapsed"] = self.elapsed()
            top = self.db.top(
                self.workload_key,
                self.target_key,
                self.evaluator.finalists,
                where=lambda r: (
                    r.trial_index not in self._foreign_index and not space.misfits(r.assignment)
                ),
            )
            top, _ = _split_misfits(space, top)  # each with today's derived variables
            if isinstance(self.measurer, HardwareMeasurer) and self.data is not None:
                result = _finish(
                    space,
                    top,
                    self.tvm_target,
                    self.data,
                    self.flop,
                    self.measurer,
                    self.evaluator.final_repeat,
                )
            else:
                result = _finish_simulated(space, top, self.flop)
        finally:
            self.measurer.close()
        times["total"] = time.perf_counter() - self.t_start
        picked = result.pop("picked", None)  # (trial index, re-measured latency) or None
        self.db.finish_run(
            self.run_id,
            best_latency_s=result["tuning_latency_s"],
            wall_s=times["total"],
            picked_trial=picked[0] if picked else None,
            picked_latency_s=picked[1] if picked else None,
        )
        out = TuneResult(
            **result,
            flop=self.flop,
            trials=len(self.history) + self.valid + self.invalid,
            trials_run=self.valid + self.invalid,
            foreign_trials=len(self.foreign),
            valid=self.valid,
            invalid=self.invalid,
            errors=dict(self.errors),
            records=self.db.path,
            target_key=self.target_key,
            workload_key=self.workload_key,
            time_s=dict(times),
            space=space,
            curve=list(self.curve),
            importance=_importance(self.explorer),
            simulated=self.simulated,
            explorer_stats=self.explorer.stats(),
            no_result=_no_result(result["latency_s"], self.errors),
        )
        self.close()
        return out

    def close(self) -> None:
        """Release the measurer's workers and the records (if the session opened them);
        idempotent. Every trial is already committed."""
        self._closed = True
        self.measurer.close()
        if self._own_db:
            self.db.close()

    def __enter__(self) -> TuningSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _no_result(latency_s: float | None, errors: Mapping[str, int]) -> NoResult | None:
    """Why a tune has no kernel (``None`` when it has one): a stand-in's trials have no
    latency, so a tune whose runs all went to one measured nothing."""
    if latency_s is not None:
        return None
    if errors.get(ErrorKind.STANDIN, 0) > 0:
        return NoResult.STANDIN_ONLY
    return NoResult.NO_VALID_CANDIDATE


def _split_misfits(
    space: Space, records: list[TrialRecord]
) -> tuple[list[TrialRecord], list[TrialRecord]]:
    """``records`` as ``(fitting, misfits)``: a misfit's assignment is not a point of today's
    space (:meth:`~heronlike.space.Space.misfits`: recorded when the target's rules, intrinsics
    or limits were others, by the same heronlike and TVM versions), so it cannot be rebuilt,
    shown to the explorer or reported as today's best. A fitting record carries its point of
    today's space (:meth:`~heronlike.space.Space.fit`: with the variables today's rules derive
    from its knobs, where it was recorded without them)."""
    fitting, misfits = [], []
    for rec in records:
        point = space.fit(rec.assignment)
        if point is None:
            misfits.append(rec)
        else:
            fitting.append(rec.at(point))
    return fitting, misfits


def _warn_misfits(db: Records, misfits: list[TrialRecord], space: Space) -> None:
    """Say that ``misfits`` (trials of another space of this compute and target) are skipped."""
    why = space.misfits(misfits[0].assignment)[0]
    warnings.warn(
        f"{db.path}: {len(misfits)} trials of this compute and target were recorded for "
        f"another space of it (other rules, intrinsics or limits; e.g. {why}); they are not "
        "counted toward the trial budget and not shown to the explorer",
        stacklevel=3,
    )


def _warn_foreign(db: Records, foreign: list[TrialRecord], versions: Mapping[str, str]) -> None:
    """Say that ``foreign`` trials (another heronlike / TVM version) are skipped."""
    by_index = db.versions_of(foreign[0].workload_key, foreign[0].target_key)
    seen = sorted(
        {
            ", ".join(f"{k} {by_index[r.trial_index].get(k, '?')}" for k in VERSION_KEYS)
            for r in foreign
            if r.trial_index in by_index
        }
    )
    today = ", ".join(f"{k} {versions.get(k, '?')}" for k in VERSION_KEYS)
    warnings.warn(
        f"{db.path}: {len(foreign)} trials of this compute and target were recorded by "
        f"{'; '.join(seen)} (this is {today}); they are not counted toward the trial budget "
        "and not shown to the explorer",
        stacklevel=3,
    )


def _best_of(history: list[TrialRecord]) -> TrialRecord | None:
    """The ok trial of ``history`` with the lowest latency (ties: the earliest)."""
    ok = [r for r in history if r.ok]
    return min(ok, key=lambda r: (r.latency_s, r.trial_index)) if ok else None


def _runner(tgt: DLATarget, runner: Runner | str | None, ev: EvaluatorConfig) -> Runner:
    """The runner the user gave (an object, or a spec string), else the target's."""
    timing = dict(number=ev.number, repeat=ev.repeat, min_repeat_ms=ev.min_repeat_ms)
    if runner is None:
        return tgt.make_runner(timeout_s=ev.run_timeout_s, **timing)
    if isinstance(runner, str):
        from .measure.rpc import runner_from_spec

        return runner_from_spec(runner, timeout_s=ev.run_timeout_s, **timing)
    return runner


def _runner_workload(space: Space, seed: int) -> dict[str, Any] | None:
    """The workload of ``space`` as a runner without TVM needs it (the bundle workload dict of
    :func:`heronlike.offline.workload_entry`, inputs drawn from ``seed``), or ``None`` when the
    compute has no reference such a runner computes (no einsum or convolution) or a kernel
    parameter is not its logical one zero-padded (a packed layout)."""
    from .errors import BundleError
    from .offline import workload_entry

    try:
        entry = workload_entry(space, seed)
    except (BundleError, ValueError):
        return None
    for p in entry["params"]:
        shape, logical = p["shape"], p["logical_shape"]
        if len(shape) != len(logical) or any(s < d for s, d in zip(shape, logical)):
            return None
    return entry


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
    top: list[TrialRecord],
    tvm_target: dict[str, Any],
    data: _Data,
    flop: float,
    measurer: HardwareMeasurer,
    final_repeat: int,
) -> dict[str, Any]:
    """Re-measure the finalists ``top`` side by side on the target's runner (interleaved
    rounds, outputs checked again) and keep the fastest re-measured one, picked by its fastest
    round of the first half and reported with the median of the second half; where the target's
    kernels run in this process, also build it here as a callable :class:`BuiltKernel` and
    check that too. A finalist whose re-run fails is not picked; when all fail, the
    tuning-time best is kept with its failure."""
    if not top:
        return dict(_NO_RESULT, finalists=[])
    # re-measure first: running the kernel in this process wakes TVM's thread pool, whose
    # spinning threads would steal cores from the runner for a while
    finals = measurer.finish_many(
        [r.assignment for r in top], final_repeat, rounds=4 if len(top) > 1 else 1
    )
    finalists = [
        Finalist(
            r.trial_index,
            dict(r.assignment),
            r.latency_s,  # type: ignore[arg-type]
            f.latency_s,
            f.error_kind,
            f.rounds_s,
        )
        for r, f in zip(top, finals, strict=True)
    ]
    timed = [i for i, f in enumerate(finals) if f.latency_s is not None]
    pick = min(timed, key=lambda i: (_selection_latency(finals[i]), i)) if timed else 0
    best, final = top[pick], finals[pick]
    latency = _reported_latency(final) if final.latency_s is not None else best.latency_s
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
        program = postprocess(sch.mod)
    return dict(
        _result_of(space, best, flop, latency),
        kernel=kernel,
        correct=correct,
        trace=kernel.trace if kernel is not None else str(sch.trace),
        script=kernel.script if kernel is not None else program.script(),
        finalists=finalists,
        # recorded with the run, so that apply_best and libraries rebuild this kernel
        picked=(best.trial_index, latency) if final.latency_s is not None else None,
    )


def _selection_latency(final: FinalMeasurement) -> float:
    """What a finalist is picked by: the fastest of its first half of rounds (each round a
    median already). A shared machine's noise only ever slows a kernel, and a slow spell can
    hold a whole round: the median of two rounds (their mean) let one such round lose the pick
    for a kernel 4 % faster in the other rounds (T4 on a Zen 4 VM, 2026-12-03), the minimum
    does not. The reported figure stays the other half's median (:func:`_reported_latency`)."""
    half = final.rounds_s[: len(final.rounds_s) // 2]
    return min(half) if half else final.latency_s  # type: ignore[return-value]


def _reported_latency(final: FinalMeasurement) -> float:
    """The picked finalist's latency: the median of the rounds it was *not* picked by, so
    that the figure is not the luckiest of k noisy medians (the winner's curse)."""
    rest = final.rounds_s[len(final.rounds_s) // 2 :]
    return statistics.median(rest) if len(final.rounds_s) >= 2 else final.latency_s  # type: ignore[return-value]


def _result_of(space: Space, best: TrialRecord, flop: float, latency: float | None) -> dict:
    """The fields of a TuneResult that name the picked trial and its speed."""
    return dict(
        latency_s=latency,
        tuning_latency_s=best.latency_s,
        throughput=flop / latency if latency else None,
        assignment=dict(best.assignment),
        knobs={k: best.assignment[k] for k in space.csp.knobs if k in best.assignment},
    )


def _finish_simulated(space: Space, top: list[TrialRecord], flop: float) -> dict[str, Any]:
    """The best replayed trial as it was recorded: nothing is built or re-measured."""
    if not top:
        return dict(_NO_RESULT, finalists=[])
    best = top[0]
    sch = space.apply(best.assignment)
    return dict(
        _result_of(space, best, flop, best.latency_s),
        kernel=None,
        correct=None,
        trace=str(sch.trace),
        script=postprocess(sch.mod).script(),
        finalists=[
            Finalist(r.trial_index, dict(r.assignment), r.latency_s, r.latency_s)  # type: ignore[arg-type]
            for r in top
        ],
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
