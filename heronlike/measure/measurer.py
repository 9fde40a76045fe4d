"""What the tune loop calls to measure a batch: real hardware, or a replay of recorded trials.

:class:`HardwareMeasurer` applies each assignment's schedule, builds the candidates in the
target's builder pool and times them in its isolated runner (checked against numpy).
:class:`ReplayMeasurer` is *simulation mode*, as in Kernel Tuner (van Werkhoven, FGCS 2019, and
its ``simulation_mode``): it answers each trial with the latency recorded for the same knob
values in a records database, and the time that trial took to build and run then, so explorers
can be compared over many seeds without the hardware, and a wall-clock budget still means what
it would have meant on the machine that recorded the trials.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import tvm

from heronlike.measure.builder import Builder, BuildInput
from heronlike.measure.kinds import ErrorKind
from heronlike.measure.runner import RunInput, Runner, RunResult, short_error

if TYPE_CHECKING:  # pragma: no cover
    from heronlike.records import Records, TrialRecord
    from heronlike.space import Space

__all__ = ["FinalMeasurement", "HardwareMeasurer", "Measurement", "Measurer", "ReplayMeasurer"]

#: error kind of a simulated trial whose knob values the replayed records never measured
NOT_RECORDED = ErrorKind.NOT_RECORDED


class Measurement(NamedTuple):
    """The outcome of one trial: ``error_kind`` is None on success, ``latency_s`` the median
    latency (seconds), ``build_s``/``run_s`` the seconds building and running took, ``info``
    what the runner reported beside the latency (:attr:`RunResult.info`; None if nothing)."""

    error_kind: str | None
    error_msg: str | None
    latency_s: float | None
    build_s: float
    run_s: float
    info: Mapping[str, Any] | None = None


class FinalMeasurement(NamedTuple):
    """The best candidate re-measured at the end of a tune (:meth:`HardwareMeasurer.finish`).

    ``latency_s`` is the median of the final repeats (None when the re-run failed),
    ``correct`` whether the re-run's outputs matched the reference (None when it did not run),
    ``error_kind``/``error_msg`` why it failed, if it did, ``rounds_s`` the median latency of
    each round of :meth:`HardwareMeasurer.finish_many` (seconds).
    """

    latency_s: float | None
    correct: bool | None
    error_kind: str | None
    error_msg: str | None
    rounds_s: tuple[float, ...] = ()


#: called with (position in the batch, its Measurement) the moment a trial's outcome is known
OnResult = Callable[[int, "Measurement"], None]


class Measurer(Protocol):
    """Measures batches of assignments; one :class:`Measurement` per assignment, in order.

    ``on_result``, when given, is called once per trial with its position in the batch and its
    :class:`Measurement` as soon as that trial's outcome is known (a schedule or build failure
    before any candidate runs, then each run as it finishes), so the caller can commit it
    before the rest of the batch is measured: a killed tune then loses only the trials in
    flight.

    ``simulated_s`` is the wall-clock time the trials so far would have taken beyond the real
    time spent (0 for real hardware); the tune loop adds it to its clock for the time budget.
    """

    simulated: bool
    simulated_s: float

    def measure(
        self, proposals: Sequence[Mapping[str, int]], on_result: OnResult | None = None
    ) -> list[Measurement]: ...

    def close(self) -> None: ...


class HardwareMeasurer:
    """Apply, build and run candidates for real (the target's builder and runner).

    Args:
        space: the schedule space whose assignments are measured.
        tvm_target: the TVM target dict to build for.
        builder, runner: from ``target.make_builder`` / ``target.make_runner``
            (:class:`~heronlike.measure.Builder`, :class:`~heronlike.measure.Runner`).
        args_path, expected_path: ``.npz`` files of the (packed) inputs and reference outputs.
        rtol: relative tolerance of the output check (0.0: bit-exact).
        device: the device every candidate runs on (``target.device``).
        build_options: passed with every candidate to the build function
            (``target.build_options()``).
        workload: the workload's description for runners without TVM
            (:attr:`~heronlike.measure.RunInput.workload`), passed with every candidate;
            ``None`` when the compute has none.
    """

    simulated = False
    simulated_s = 0.0

    def __init__(
        self,
        space: Space,
        tvm_target: dict[str, Any],
        builder: Builder,
        runner: Runner,
        args_path: str,
        expected_path: str,
        rtol: float,
        device: str = "cpu",
        build_options: Mapping[str, Any] | None = None,
        workload: Mapping[str, Any] | None = None,
    ) -> None:
        self.space = space
        self.tvm_target = tvm_target
        self.builder = builder
        self.runner = runner
        self.args_path = args_path
        self.expected_path = expected_path
        self.rtol = rtol
        self.device = device
        self.build_options = dict(build_options or {})
        self.workload = dict(workload) if workload is not None else None
        self._runner_started = False

    def _run_input(
        self, artifact: str, info: Mapping[str, Any], *, final: bool = False
    ) -> RunInput:
        return RunInput(
            artifact,
            self.args_path,
            self.expected_path,
            self.rtol,
            self.device,
            dict(info),
            final,
            self.workload,
        )

    def measure(
        self, proposals: Sequence[Mapping[str, int]], on_result: OnResult | None = None
    ) -> list[Measurement]:
        """Measure ``proposals``; a failure at any stage is a Measurement, never an exception.

        The batch is built in parallel (the builder's pool), then run one candidate at a time;
        ``on_result`` hears about each trial as soon as its outcome is known (see
        :class:`Measurer`).
        """
        out: list[Measurement | None] = [None] * len(proposals)

        def done(i: int, m: Measurement) -> None:
            out[i] = m
            if on_result is not None:
                on_result(i, m)

        to_build: list[tuple[int, BuildInput]] = []
        for i, assignment in enumerate(proposals):
            t0 = time.perf_counter()
            try:
                mod_json = tvm.ir.save_json(self.space.program(assignment))
            except Exception as err:  # a template bug: the candidate fails, tuning goes on
                done(
                    i,
                    Measurement(
                        ErrorKind.SCHEDULE, short_error(err), None, time.perf_counter() - t0, 0.0
                    ),
                )
                continue
            to_build.append(
                (i, BuildInput(mod_json, self.tvm_target, self.build_options, dict(assignment)))
            )
        starting = self._start_runner_in_background()
        built = self.builder.build([b for _, b in to_build])
        if starting is not None:
            starting.join()
        to_run = []
        for (i, _), res in zip(to_build, built, strict=True):
            if res.ok:
                to_run.append((i, res))
            else:
                done(i, Measurement(res.error_kind, res.error_msg, None, res.build_s, 0.0))

        reported: set[int] = set()

        def ran(j: int, r: RunResult) -> None:  # each run is reported as it finishes
            i, b = to_run[j]
            reported.add(j)
            _remove(str(b.artifact_path))
            done(
                i,
                Measurement(
                    r.error_kind, r.error_msg, r.latency_s, b.build_s, r.run_s, dict(r.info) or None
                ),
            )

        results = self.runner.run(
            [self._run_input(str(res.artifact_path), res.info) for _, res in to_run],
            on_result=ran,
        )
        for j, r in enumerate(results):  # a runner that did not report as it went
            if j not in reported:
                ran(j, r)
        return [m for m in out if m is not None]

    def _start_runner_in_background(self) -> threading.Thread | None:
        """On the first batch, start the runner's worker (a runner with a ``start`` method,
        e.g. :class:`~heronlike.measure.LocalRunner`) in a thread while the builder's workers
        start and build: its start-up (importing TVM, 1.4 s on an Intel Xeon) overlaps theirs
        instead of following them."""
        if self._runner_started:
            return None
        self._runner_started = True
        start = getattr(self.runner, "start", None)
        if not callable(start):
            return None

        def quietly() -> None:
            try:
                start()
            except Exception:  # noqa: BLE001 - the first run starts it again and reports
                pass

        thread = threading.Thread(target=quietly, name="heronlike-runner-start", daemon=True)
        thread.start()
        return thread

    def finish(self, assignment: Mapping[str, int], repeat: int) -> FinalMeasurement:
        """Rebuild ``assignment``'s candidate and re-measure it on the target's own runner
        with ``repeat`` measurements of at least 10 calls each, checking its outputs again.

        Never raises for a failing candidate: the failure is in the result.
        """
        return self.finish_many([assignment], repeat, rounds=1)[0]

    def finish_many(
        self, assignments: Sequence[Mapping[str, int]], repeat: int, rounds: int = 4
    ) -> list[FinalMeasurement]:
        """Rebuild the finalists and re-measure them side by side: ``rounds`` rounds, each
        running every finalist once (the order rotated from round to round) with
        ``ceil(repeat / rounds)`` measurements of at least 10 calls, so that a slow spell of
        the machine falls on all of them alike; outputs are checked again in every round.

        Returns:
            One :class:`FinalMeasurement` per assignment, in order: ``latency_s`` is the median
            (seconds) of all its measurements over the rounds; a finalist that fails in a
            round is dropped from the later ones and keeps that failure.

        Never raises for a failing candidate: the failure is in its result.
        """
        out: list[FinalMeasurement | None] = [None] * len(assignments)
        inputs: dict[int, BuildInput] = {}
        for i, assignment in enumerate(assignments):
            try:
                mod_json = tvm.ir.save_json(self.space.program(assignment))
            except Exception as err:  # noqa: BLE001 - reported, not raised
                out[i] = FinalMeasurement(None, None, ErrorKind.SCHEDULE, short_error(err))
                continue
            inputs[i] = BuildInput(mod_json, self.tvm_target, self.build_options, dict(assignment))
        built = dict(zip(inputs, self.builder.build(list(inputs.values())), strict=True))
        artifacts: dict[int, RunInput] = {}
        for i, b in built.items():
            if b.ok:
                artifacts[i] = self._run_input(str(b.artifact_path), b.info, final=True)
            else:
                out[i] = FinalMeasurement(None, None, b.error_kind, b.error_msg)
        policy = (self.runner.number, self.runner.repeat)  # restored after: a shared runner
        self.runner.repeat = max(1, -(-repeat // rounds))  # goes on timing other tasks' trials
        self.runner.number = max(self.runner.number, 10)
        timings: dict[int, list[float]] = {i: [] for i in artifacts}
        per_round: dict[int, list[float]] = {i: [] for i in artifacts}
        try:
            for r in range(rounds):
                alive = [i for i in artifacts if out[i] is None]
                if not alive:
                    break
                order = alive[r % len(alive) :] + alive[: r % len(alive)]
                results = self.runner.run([artifacts[i] for i in order])
                for i, res in zip(order, results, strict=True):
                    if res.ok:
                        timings[i].extend(res.latencies_s or (res.latency_s,))  # type: ignore[arg-type]
                        per_round[i].append(float(res.latency_s))  # type: ignore[arg-type]
                    else:
                        correct = False if res.error_kind == ErrorKind.WRONG_RESULT else None
                        out[i] = FinalMeasurement(None, correct, res.error_kind, res.error_msg)
        finally:
            self.runner.number, self.runner.repeat = policy
            for a in artifacts.values():
                _remove(a.artifact_path)
        for i, times in timings.items():
            if out[i] is None:
                out[i] = FinalMeasurement(
                    statistics.median(times), True, None, None, tuple(per_round[i])
                )
        return [m for m in out if m is not None]

    def close(self) -> None:
        self.builder.close()
        self.runner.close()


def _remove(path: str) -> None:
    """Delete an artifact (a file, or the folder of a multi-file build)."""
    import shutil

    p = Path(path)
    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)


class ReplayMeasurer:
    """Simulation mode: replay the trials recorded for one workload and target.

    A proposed assignment is looked up by its knob values (``key``, normally
    :meth:`heronlike.sampler.RandSAT.key`). Found: its recorded outcome (latency or error) is
    returned, with the recorded ``build_s`` and ``run_s``, which also advance
    :attr:`simulated_s`. Not found: the trial fails with error kind ``"not_recorded"`` and takes
    no simulated time, so a replayed space should have been measured densely (e.g. with a large
    random tune first); :attr:`missing` counts such trials.

    Args:
        source: the records database to replay.
        workload_key, target_key: which trials of it.
        key: the identity of an assignment (its knob values).

    Raises:
        RecordsMismatchError: when ``source`` holds no trial of this workload and target.
    """

    simulated = True

    def __init__(
        self,
        source: Records,
        workload_key: str,
        target_key: str,
        key: Callable[[Mapping[str, int]], tuple[int, ...]],
    ) -> None:
        from heronlike.errors import RecordsMismatchError

        self.key = key
        self.table: dict[tuple[int, ...], TrialRecord] = {}
        for rec in source.trials(workload_key, target_key):
            try:
                k = key(rec.assignment)
            except KeyError:
                continue  # recorded by a version whose CSP had other variables
            if k not in self.table or (rec.ok and not self.table[k].ok):
                self.table[k] = rec
        if not self.table:
            raise RecordsMismatchError(
                f"{source.path} has no trial of workload {workload_key} on {target_key} to "
                "replay; simulation mode needs a records database measured for this compute and "
                "target"
            )
        self.simulated_s = 0.0
        self.missing = 0

    def measure(
        self, proposals: Sequence[Mapping[str, int]], on_result: OnResult | None = None
    ) -> list[Measurement]:
        """The recorded outcome of each proposal (``"not_recorded"`` for unknown ones)."""
        out = []
        for i, assignment in enumerate(proposals):
            rec = self.table.get(self.key(assignment))
            if rec is None:
                self.missing += 1
                m = Measurement(NOT_RECORDED, "not in the replayed records", None, 0.0, 0.0)
            else:
                self.simulated_s += rec.build_s + rec.run_s
                m = Measurement(
                    rec.error_kind, rec.error_msg, rec.latency_s, rec.build_s, rec.run_s
                )
            out.append(m)
            if on_result is not None:
                on_result(i, m)
        return out

    def close(self) -> None:
        pass
