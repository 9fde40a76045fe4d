"""The VTA runner: run built VTA programs on the simulator, check them, report simulated time.

Satisfies :class:`heronlike.measure.Runner`. For each :class:`~heronlike.measure.RunInput` it
loads the program (:func:`~.lowering.load_artifact`: a columnar artifact, decoded into arrays,
no object per instruction) and times it with the timing-only simulator
(:func:`~.simulator.time_program`, fast: no numerics). The latency is
``cycles / clock`` (simulated seconds, deterministic: ``number`` and ``repeat`` are accepted and
do not change it), never host time.

**When the numerics run** (``check``). The full, bit-exact simulation packs the logical inputs
of ``args_path`` (``arg0`` = X, ``arg1`` = W, and ``arg{bias_arg}`` = the epilogue's bias if
it has one; the output argument is ignored: the program's ``C`` buffer starts filled with a
poison pattern instead, so a byte it never writes fails the check), simulates numerics and
cycles together, and compares the result (int32, or int8 after an epilogue) with the single
output of ``expected_path`` bit-exactly (:func:`heronlike.measure.check.compare`). It costs
10–100× the timing-only run, so by default (``check="best"``) it runs only where a result
depends on it:

* for the first candidate of each program structure (virtual threads, tile order, folding,
  and whether ``K`` fits one tile: the lowering's code paths), so a lowering bug shows early;
* for every candidate whose cycles are at most the lowest this runner has seen: every
  candidate that becomes the best was checked, and so is the end-of-tune re-measurement of the
  best (:meth:`heronlike.measure.HardwareMeasurer.finish` re-runs it: same program, same cycles);
* for the input marked final (``RunInput.final``: the end-of-tune re-measurement).

``check="always"`` (or ``True``) checks every candidate, ``"never"`` (or ``False``) none. A
candidate whose numerics were not simulated is timed, not verified (``numerics_checked`` in
its record says which). Where both ran, the
timing-only report must equal the full one (else ``run``: the two simulators disagree).

**What is recorded.** The :class:`~.report.SimReport` of each candidate is kept in
:attr:`VTARunner.reports` and its JSON-ready form (:func:`~.report.report_dict`, plus
``numerics_checked`` and ``sim_s``) in :attr:`VTARunner.infos`, by artifact path, and in
:attr:`~heronlike.measure.RunResult.info`, which the tune loop stores with the trial
(:attr:`heronlike.records.TrialRecord.info`).

**Failures** are :class:`~heronlike.measure.kinds.ErrorKind` values: a program the simulator
rejects (field, hazard, token or bounds error) or unreadable files are ``run``, a mismatch
``wrong_result``, a simulation past ``timeout_s`` (wall clock, enforced inside the simulator's
event loop, :class:`~.simulator.VTATimeoutError`) or ``max_events`` is ``run_timeout``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from heronlike.measure.check import compare, poison
from heronlike.measure.kinds import ErrorKind
from heronlike.measure.runner import OnRunResult, RunInput, RunResult, short_error

from .lowering import GemmParams, load_artifact, pack_bias, pack_inputs, unpack_output
from .program import Program
from .report import SimReport, report_dict
from .simulator import VTATimeoutError, simulate, time_program
from .timing import TimingParams

#: check policies (see the module docstring); True and False mean "always" and "never"
CHECK_POLICIES = ("always", "best", "never")


def structure_key(params: GemmParams) -> tuple[int, ...]:
    """The lowering's code path for ``params``: (compute kind, vthreads, order, fold, K in
    one tile, stores per tile, bias)."""
    kind = int(getattr(params, "kind", 0))
    k_once = int(params.k_blocks == params.tile_k)
    return (kind, params.vthreads, params.order, params.fold, k_once, params.planes, params.bias)


class VTARunner:
    """Simulate VTA programs (see the module docstring).

    Args:
        timing: the cycle constants (default :meth:`TimingParams.pynq_hls`).
        check: when to run the bit-exact numerics against the expected file: ``"best"``
            (default), ``"always"`` (or True), ``"never"`` (or False).
        number, repeat: accepted for the Runner protocol; simulated time is deterministic.
        timeout_s: wall-clock seconds per candidate (loading, timing and numerics); past it
            the simulation stops and the candidate is a ``run_timeout``.
        max_events: a deterministic budget of simulation events per simulation, None for none.

    Raises:
        ValueError: an unknown ``check`` policy or a non-positive ``timeout_s``.
    """

    def __init__(
        self,
        *,
        timing: TimingParams | None = None,
        check: bool | str = "best",
        number: int = 1,
        repeat: int = 1,
        timeout_s: float = 30.0,
        max_events: int | None = None,
        **_: Any,
    ) -> None:
        policy = {True: "always", False: "never"}.get(check, check)  # type: ignore[call-overload]
        if policy not in CHECK_POLICIES:
            raise ValueError(f"check must be one of {CHECK_POLICIES} or a bool, not {check!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.timing = timing or TimingParams.pynq_hls()
        self.check: str = policy
        self.number = int(number)
        self.repeat = int(repeat)
        self.timeout_s = float(timeout_s)
        self.max_events = max_events
        #: the simulator's report of every candidate run so far, by artifact path
        self.reports: dict[str, SimReport] = {}
        #: :func:`~.report.report_dict` of each candidate plus ``numerics_checked`` (bool) and
        #: ``sim_s`` (wall seconds of simulation), by artifact path
        self.infos: dict[str, dict[str, Any]] = {}
        self._npz: dict[str, dict[str, np.ndarray]] = {}
        self._best_cycles = math.inf  # lowest cycles of a candidate whose numerics passed
        self._checked_structures: set[tuple[int, ...]] = set()

    def _arrays(self, path: str) -> dict[str, np.ndarray]:
        if path not in self._npz:
            with np.load(path) as data:
                self._npz = {path: {k: data[k] for k in data.files}, **self._npz}
            if len(self._npz) > 4:
                self._npz = dict(list(self._npz.items())[:4])
        return self._npz[path]

    def _wants_numerics(self, inp: RunInput, params: GemmParams, cycles: int) -> bool:
        if self.check == "never" or inp.expected_path is None:
            return False
        return (
            self.check == "always"
            or inp.final
            or structure_key(params) not in self._checked_structures
            or cycles <= self._best_cycles
        )

    def _simulate_numerics(
        self, program: Program, params: GemmParams, inp: RunInput, left_s: float
    ) -> str | None:
        """Full simulation and output check: None if it matches, else the mismatch message.
        Raises what :func:`simulate` raises, and ValueError for a malformed expected file."""
        exp = self._arrays(str(inp.expected_path))
        if len(exp) != 1:
            raise ValueError(f"expected one output, got {sorted(exp)}")
        expected = next(iter(exp.values()))
        args = self._arrays(inp.args_path)
        packed = pack_inputs(args["arg0"], args["arg1"], program.config)
        if params.bias:
            packed["bias"] = pack_bias(args[f"arg{params.bias_arg}"], program.config)
        c_buf = program.buffers["C"]
        c0 = poison(np.zeros(c_buf.shape, c_buf.dtype))
        full = simulate(
            program,
            {**packed, "C": c0},
            timing=self.timing,
            timeout_s=left_s,
            max_events=self.max_events,
        )
        if full.report != self.reports[inp.artifact_path]:
            raise RuntimeError("timing-only and full simulation disagree (a simulator bug)")
        return compare(unpack_output(full.outputs["C"], params.planes), expected, inp.rtol)

    def run_one(self, inp: RunInput) -> RunResult:
        """Simulate one candidate; never raises."""
        t0 = time.perf_counter()

        def left() -> float:
            return max(self.timeout_s - (time.perf_counter() - t0), 0.0)

        info: dict[str, Any] = {}

        def fail(kind: str, msg: str) -> RunResult:
            return self._result(None, kind, msg, time.perf_counter() - t0, info)

        checked = False
        try:
            program, params = load_artifact(inp.artifact_path)
            report = time_program(
                program, self.timing, timeout_s=left(), max_events=self.max_events
            )
            self.reports[inp.artifact_path] = report
            if self._wants_numerics(inp, params, report.cycles):
                msg = self._simulate_numerics(program, params, inp, left())
                checked = True
                if msg is not None:
                    info = self._record(inp, report, checked, t0)
                    return fail(ErrorKind.WRONG_RESULT, msg)
                self._checked_structures.add(structure_key(params))
                self._best_cycles = min(self._best_cycles, report.cycles)
        except VTATimeoutError as exc:
            return fail(ErrorKind.RUN_TIMEOUT, short_error(exc))
        except Exception as exc:  # noqa: BLE001 - a failing candidate is data
            return fail(ErrorKind.RUN, short_error(exc))
        info = self._record(inp, report, checked, t0)
        latency = report.cycles / (program.config.clock_mhz * 1e6)
        return self._result(latency, None, None, time.perf_counter() - t0, info)

    def _record(self, inp: RunInput, report: SimReport, checked: bool, t0: float) -> dict[str, Any]:
        info = report_dict(report)
        info["numerics_checked"] = checked
        info["sim_s"] = time.perf_counter() - t0
        self.infos[inp.artifact_path] = info
        return info

    def _result(
        self,
        latency: float | None,
        kind: str | None,
        msg: str | None,
        run_s: float,
        info: dict[str, Any],
    ) -> RunResult:
        latencies = () if latency is None else (latency,) * max(self.repeat, 1)
        return RunResult(latency, latencies, kind, msg, run_s, info=info)

    def run(
        self, inputs: Sequence[RunInput], on_result: OnRunResult | None = None
    ) -> list[RunResult]:
        out = []
        for i, inp in enumerate(inputs):
            res = self.run_one(inp)
            out.append(res)
            if on_result is not None:
                on_result(i, res)
        return out

    def close(self) -> None:
        self._npz.clear()
