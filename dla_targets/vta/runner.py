"""The VTA runner: run built VTA programs on the simulator, check them, report simulated time.

Satisfies :class:`heronlike.measure.Runner`. For each :class:`~heronlike.measure.RunInput` it
loads the program (:func:`~.lowering.load_artifact`), packs the logical input arrays of
``args_path`` (``arg0`` = X, ``arg1`` = W; the output argument is ignored: the program's ``C``
buffer starts filled with a poison pattern instead, so a byte it never writes fails the
check), simulates, and compares the int32 result with the single output of ``expected_path``
bit-exactly (:func:`heronlike.measure.check.compare`, ``rtol`` 0 for integers).

The latency is ``cycles / clock`` (simulated seconds, deterministic: ``number`` and ``repeat``
are accepted and do not change it), never host time. The full :class:`~.report.SimReport` of
each candidate is kept in :attr:`VTARunner.reports` (by artifact path; ``RunResult`` has no
field for it). Failures are :class:`~heronlike.measure.kinds.ErrorKind` values: a program the
simulator rejects (field, hazard, token or bounds error) or unreadable files are ``run``, a
mismatch ``wrong_result``.

Simulation runs in this process (pure numpy, well under a second for a 256³ GEMM in full
mode); ``timeout_s`` is not enforced.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from heronlike.measure.check import compare, poison
from heronlike.measure.kinds import ErrorKind
from heronlike.measure.runner import OnRunResult, RunInput, RunResult, short_error

from .lowering import load_artifact, pack_inputs, unpack_int32_output
from .report import SimReport
from .simulator import simulate
from .timing import TimingParams


class VTARunner:
    """Simulate VTA programs (see the module docstring).

    Args:
        timing: the cycle constants (default :meth:`TimingParams.pynq_hls`).
        check: compare outputs when the input names an expected file (full simulation);
            without it, or without an expected file, the run is timing-only.
        number, repeat: accepted for the Runner protocol; simulated time is deterministic.
        timeout_s: accepted for the protocol; not enforced.
    """

    def __init__(
        self,
        *,
        timing: TimingParams | None = None,
        check: bool = True,
        number: int = 1,
        repeat: int = 1,
        timeout_s: float = 30.0,
        **_: Any,
    ) -> None:
        self.timing = timing or TimingParams.pynq_hls()
        self.check = check
        self.number = int(number)
        self.repeat = int(repeat)
        self.timeout_s = float(timeout_s)
        #: the simulator's report of every candidate run so far, by artifact path
        self.reports: dict[str, SimReport] = {}
        self._npz: dict[str, dict[str, np.ndarray]] = {}

    def _arrays(self, path: str) -> dict[str, np.ndarray]:
        if path not in self._npz:
            with np.load(path) as data:
                self._npz = {path: {k: data[k] for k in data.files}, **self._npz}
            if len(self._npz) > 4:
                self._npz = dict(list(self._npz.items())[:4])
        return self._npz[path]

    def run_one(self, inp: RunInput) -> RunResult:
        """Simulate one candidate; never raises."""
        t0 = time.perf_counter()

        def fail(kind: str, msg: str) -> RunResult:
            return RunResult(None, (), kind, msg, time.perf_counter() - t0)

        try:
            program, _ = load_artifact(inp.artifact_path)
            expected = None
            if self.check and inp.expected_path is not None:
                exp = self._arrays(inp.expected_path)
                if len(exp) != 1:
                    return fail(ErrorKind.RUN, f"expected one output, got {sorted(exp)}")
                expected = next(iter(exp.values()))
            if expected is None:
                result = simulate(program, timing=self.timing, timing_only=True)
            else:
                args = self._arrays(inp.args_path)
                packed = pack_inputs(args["arg0"], args["arg1"], program.config)
                c_buf = program.buffers["C"]
                c0 = poison(np.zeros(c_buf.shape, c_buf.dtype))
                result = simulate(program, {**packed, "C": c0}, timing=self.timing)
        except Exception as exc:  # noqa: BLE001 - a failing candidate is data
            return fail(ErrorKind.RUN, short_error(exc))
        report = result.report
        self.reports[inp.artifact_path] = report
        if expected is not None:
            got = unpack_int32_output(result.outputs["C"])
            msg = compare(got, expected, inp.rtol)
            if msg is not None:
                return fail(ErrorKind.WRONG_RESULT, msg)
        latency = report.cycles / (program.config.clock_mhz * 1e6)
        return RunResult(
            latency, (latency,) * max(self.repeat, 1), None, None, time.perf_counter() - t0
        )

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
