"""``tune`` and ``apply_best``: the user's entry points.

:func:`tune` runs one :class:`~heronlike.session.TuningSession` (set-up, rounds until the budget
is spent, finish); :func:`apply_best` rebuilds the best recorded kernel without tuning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .cost_model import CostModel
from .errors import InvalidArgumentError, RecordsMismatchError
from .explore.base import Explorer
from .kernel import BuiltKernel
from .measure import Runner
from .prior import LinearPrior
from .records import Records
from .session import (
    DEFAULT_RECORDS,
    EvaluatorConfig,
    Finalist,
    NoResult,
    TuneProgress,
    TuneResult,
    TuningSession,
)
from .space import generate_space
from .target import DLATarget

__all__ = [
    "DEFAULT_RECORDS",
    "EvaluatorConfig",
    "Finalist",
    "NoResult",
    "TuneProgress",
    "TuneResult",
    "TuningSession",
    "apply_best",
    "tune",
]


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
    prior: bool | LinearPrior = True,
    cost_model: CostModel | None = None,
    work_dir: str | Path | None = None,
    number: int = 3,
    repeat: int = 5,
    min_repeat_ms: float = 10.0,
    build_timeout_s: float = 60.0,
    run_timeout_s: float = 30.0,
    final_repeat: int = 20,
    finalists: int = 4,
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
        time_budget_s: wall-clock budget of this call in seconds, its set-up (building the
            space, replaying the records) included, enforced by this loop for every explorer:
            no new batch starts once it is spent (the last batch may end past it by one batch's
            time, and the finalists' re-measure follows), but the first batch always runs. In
            simulation mode the clock starts after the set-up and is the real time spent plus
            the recorded build and run seconds of the replayed trials.
        explorer: name (``"random"``), class or instance (see :mod:`heronlike.explore`).
        seed: the one seed of every random choice (CP-SAT, explorer, cost model, inputs). The
            same seed proposes the same candidates in the same order as long as the measured
            latencies fed back are the same: always for the first batch, and for a whole tune
            with ``explorer_options={"epsilon": 0}`` (no model-ranked picks); with a trained cost
            model, measurement noise can change later batches.
        records: SQLite file (default ``heronlike_runs/records.sqlite``) or open Records.
        batch_size: candidates proposed, built and measured per round.
        prior: whether the explorer ranks its first, untrained round by the target's schedule
            prior for the compute's space (:meth:`heronlike.target.DLATarget.prior_for`,
            :mod:`heronlike.prior`; DL Boost has one for stages on ``vpmaddwd`` and one for the
            rest). False, or a target without one: that round is random RandSAT samples, as in
            Heron. A :class:`~heronlike.prior.LinearPrior` is used instead of the target's (a
            prior refitted on your own records). Explorers ``cga``, ``cga1``, ``ga``, ``sa``
            and ``random`` use it. Anything else raises ``InvalidArgumentError``.
        number, repeat, min_repeat_ms: ``time_evaluator`` settings for each trial; the latency
            is the median of ``repeat`` means of ``number`` calls.
        final_repeat: repeats for re-measuring each finalist at the end.
        finalists: the ``finalists`` fastest distinct candidates of the records are
            re-measured side by side at the end (interleaved rounds, outputs checked again) and
            the fastest re-measured one is returned, so that the result is not merely the
            luckiest timing of the tune (``TuneResult.finalists`` lists them); 1 re-measures
            only the tuning-time best.
        progress: called after each round with a :class:`TuneProgress`.
        simulate: simulation mode (as in Kernel Tuner): a records database (path or Records)
            whose trials of this compute and target are replayed instead of building and running
            anything (:class:`~heronlike.measure.measurer.ReplayMeasurer`); assignments it never
            measured fail as ``"not_recorded"``. ``records`` then defaults to an in-memory
            database, so every simulated tune starts from nothing; the result has no kernel.
        runner: the :class:`~heronlike.measure.Runner` that times candidates, or a runner
            spec (``"rpc://HOST:PORT/KEY"``, ``"cupy"``,
            :func:`heronlike.measure.rpc.runner_from_spec`);
            default: the target's (``target.make_runner``, which reads ``HERONLIKE_RUNNER``
            where the target supports remote devices). For a GPU this machine cannot reach,
            tune round by round through offline bundles instead (:mod:`heronlike.offline`).

    Returns:
        A :class:`TuneResult`; ``latency_s`` is None when no candidate was valid.

    Raises:
        UnknownTargetError, InvalidComputeError, UnsupportedDtypeError, UnsupportedShapeError,
        NoTensorizableStageError, HostFeatureError, UnknownExplorerError: for bad input,
        before anything is measured.
        RecordsMismatchError: ``records`` is corrupted or not a heronlike records file; in
            simulation mode, ``simulate`` holds no trial to replay.
        InvalidArgumentError: an argument of the wrong type or out of range (``trials`` or
            ``batch_size`` below 1, neither ``trials`` nor ``time_budget_s`` given, an unknown
            explorer option …); the message names it. Nothing is recorded.

    Warns:
        UserWarning: when the records hold trials of this compute and target recorded by another
            heronlike or TVM version; they are not counted toward ``trials`` and not shown to the
            explorer (``TuneResult.foreign_trials`` counts them).
    """
    if progress is not None and not callable(progress):
        raise InvalidArgumentError(f"progress must be callable, got {progress!r}")
    session = TuningSession(
        compute,
        target,
        trials=trials,
        time_budget_s=time_budget_s,
        explorer=explorer,
        seed=seed,
        records=records,
        batch_size=batch_size,
        explorer_options=explorer_options,
        prior=prior,
        cost_model=cost_model,
        work_dir=work_dir,
        evaluator=EvaluatorConfig(
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            build_timeout_s=build_timeout_s,
            run_timeout_s=run_timeout_s,
            final_repeat=final_repeat,
            finalists=finalists,
        ),
        simulate=simulate,
        runner=runner,
    )
    try:
        while session.round():
            if progress is not None:
                progress(session.progress())
        return session.finish()
    finally:
        session.close()


def apply_best(
    records: str | Path | Records,
    compute: Any,
    target: str | Mapping[str, Any] | DLATarget = "dlboost",
) -> BuiltKernel:
    """Rebuild the best recorded kernel of ``compute`` on ``target`` without tuning.

    The kernel :func:`tune` returned, i.e. the finalist the latest tune picked by re-measuring
    (:meth:`Records.chosen`; the fastest recorded tuning-time latency for records without a
    pick), is rebuilt if its assignment fits today's space (:meth:`Space.misfits`: same
    variables, every range and constraint holds); a trial of an older space that no longer
    fits is passed over for the fastest one that fits.

    Raises:
        RecordsMismatchError: if ``records`` does not exist, is corrupted or is not a heronlike
            records file, or holds no valid trial of this compute and target that fits today's
            space (a different shape, dtype, target option or heronlike version of the space).
        InvalidArgumentError: ``records`` is neither a path nor a :class:`Records`.
    """
    if not isinstance(records, Records | str | Path):
        raise InvalidArgumentError(
            f"records must be a path or a Records, got {type(records).__name__}"
        )
    if not isinstance(records, Records) and not Path(records).is_file():
        raise RecordsMismatchError(f"{records}: no such records file")
    space = generate_space(compute, target)
    db = records if isinstance(records, Records) else Records(records)
    try:
        db.adopt(space.workload_key, space.legacy_workload_key)
        best = db.chosen(
            space.workload_key, space.target.key, where=lambda r: not space.misfits(r.assignment)
        )
        if best is None:
            known = ", ".join(f"{w['workload_key']}@{w['target_key']}" for w in db.workloads())
            stale = db.best(space.workload_key, space.target.key)
            why = (
                f" (its best trial no longer fits today's space: "
                f"{'; '.join(space.misfits(stale.assignment)[:3])})"
                if stale is not None
                else ""
            )
            raise RecordsMismatchError(
                f"{db.path} has no valid trial of workload {space.workload_key} on "
                f"{space.target.key}{why}; it holds: {known or 'nothing'}"
            )
        return BuiltKernel(space, space.fit(best.assignment) or {}, space.target.tvm_target())
    finally:
        if not isinstance(records, Records):
            db.close()
