"""Where a compiled model's time goes: each kernel timed inside the model, as the model runs.

A kernel tuned alone is timed with its operands warm in cache, one call after another
(:mod:`heronlike.measure`); inside the model it runs between other kernels, on operands the
previous kernel wrote and on weights that may come from DRAM, and the Relax virtual machine
spends time of its own between kernels (allocation, shape bookkeeping, builtins). This module
times every ``Call`` instruction of the virtual machine through its instrument hook
(``relax.VirtualMachine.set_instrument``), over several runs, and sets each kernel's time in the
model beside the latency recorded when it was tuned, so a user sees which tasks are slower in
the model than alone and how much of the run is outside the kernels.

The hook adds a Python callback before and after every call (a few microseconds each, counted in
the call's time), so the instrumented run is slower than :meth:`CompiledModel.benchmark`; the
time outside the calls is what remains of the uninstrumented median.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compile import CompiledModel

__all__ = ["CallTime", "ModelProfile", "profile_model"]


@dataclass(frozen=True)
class CallTime:
    """The time one function called by the model's ``main`` takes per model run.

    Attributes:
        function: the name the virtual machine calls (a PrimFunc, or a builtin such as
            ``vm.builtin.alloc_storage``).
        task: the task whose kernel it is (:class:`~heronlike.model.compile.KernelChoice`),
            None for a builtin or a function outside every task.
        calls: calls per model run.
        seconds: the median over the profiled runs of this function's total time in one run,
            in seconds (its calls summed).
        recorded_s: the task kernel's latency recorded when it was tuned, alone (seconds, one
            call), None for a kernel that was not tuned or a builtin.
        source: the kernel's source in the compiled model (``tuned``, ``default``, ``tvm``), or
            ``builtin`` for a virtual-machine builtin.
    """

    function: str
    task: str | None
    calls: int
    seconds: float
    recorded_s: float | None
    source: str

    @property
    def in_model_vs_alone(self) -> float | None:
        """Per call, time in the model over the recorded time alone (> 1: slower in the
        model), None without a recorded time."""
        if not self.recorded_s or not self.calls:
            return None
        return self.seconds / self.calls / self.recorded_s


@dataclass
class ModelProfile:
    """A compiled model's run, call by call (:func:`profile_model`).

    Attributes:
        model_s: the model's median latency without the hook (seconds,
            :meth:`CompiledModel.benchmark`).
        profiled_s: the median latency of the instrumented runs (seconds).
        calls: :class:`CallTime` per called function, slowest first.
        runs: instrumented runs the medians are taken over.
    """

    model_s: float
    profiled_s: float
    calls: list[CallTime] = field(default_factory=list)
    runs: int = 0

    @property
    def kernel_s(self) -> float:
        """Seconds per run inside the model's kernels (every call but the builtins)."""
        return sum(c.seconds for c in self.calls if c.source != "builtin")

    @property
    def builtin_s(self) -> float:
        """Seconds per run inside virtual-machine builtins (allocation, reshape, ...)."""
        return sum(c.seconds for c in self.calls if c.source == "builtin")

    @property
    def recorded_sum_s(self) -> float:
        """Seconds per run the kernels with a recorded latency would take at that latency
        (calls × recorded latency, summed): the estimate a tuner reports, to set beside
        :attr:`kernel_s`."""
        return sum(c.calls * c.recorded_s for c in self.calls if c.recorded_s)

    def table(self, top: int = 25) -> str:
        """A plain-text table: the ``top`` slowest calls, then the totals."""
        lines = [
            f"model {self.model_s * 1e3:.3f} ms (median, no hook); instrumented "
            f"{self.profiled_s * 1e3:.3f} ms over {self.runs} runs; kernels "
            f"{self.kernel_s * 1e3:.3f} ms, builtins {self.builtin_s * 1e3:.3f} ms",
            f"{'ms/run':>9} {'calls':>5} {'in model/alone':>14}  {'source':8} function",
        ]
        for c in self.calls[:top]:
            ratio = c.in_model_vs_alone
            r = f"{ratio:14.2f}" if ratio is not None else " " * 14
            lines.append(
                f"{c.seconds * 1e3:9.3f} {c.calls:5d} {r}  {c.source:8} {c.function}"
                + (f"  [{c.task}]" if c.task and c.task != c.function else "")
            )
        if len(self.calls) > top:
            rest = sum(c.seconds for c in self.calls[top:])
            lines.append(f"{rest * 1e3:9.3f}        {len(self.calls) - top} more functions")
        return "\n".join(lines)


def profile_model(
    model: CompiledModel, *arrays: Any, runs: int = 10, warmup: int = 3
) -> ModelProfile:
    """Time every call of ``model``'s ``main`` inside the model (module docstring).

    Args:
        model: a compiled model (:func:`~heronlike.model.compile_model` or
            :func:`~heronlike.model.load`).
        arrays: the inputs (numpy, one per model input); default :meth:`random_inputs`.
        runs: instrumented runs; each function's time is the median over them.
        warmup: runs before any timing, with and without the hook.

    Returns:
        A :class:`ModelProfile`; its ``model_s`` is the uninstrumented median of ``runs``.

    Raises:
        ModelInputError: wrong inputs (as :meth:`CompiledModel.__call__`).
        ValueError: ``runs`` < 1.
    """
    from .compile import PACKED_SUFFIX  # compile imports this module

    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    inputs = list(arrays) or model.random_inputs()
    model_s = model.benchmark(*inputs, repeat=runs, warmup=warmup)
    vm = model._vm
    tensors = model._tensors(inputs)
    per_run: list[dict[str, list[float]]] = []
    totals: list[float] = []
    current: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    starts: list[float] = []

    def instrument(func: Any, symbol: str, before: bool, ret: Any, *args: Any) -> int:
        now = time.perf_counter()
        if before:
            starts.append(now)
        else:
            entry = current[str(symbol)]
            entry[0] += now - starts.pop()
            entry[1] += 1
        return 0  # VMInstrumentReturnKind.NO_OP: run the call

    vm.set_instrument(instrument)
    try:
        for i in range(warmup + runs):
            current.clear()
            t0 = time.perf_counter()
            model._run(tensors)
            elapsed = time.perf_counter() - t0
            if i >= warmup:
                per_run.append(dict(current))
                totals.append(elapsed)
    finally:
        vm.set_instrument(None)
    owner = _owners(model)
    calls = []
    for name, (_, n) in per_run[-1].items():
        task, source, recorded = owner.get(name.removesuffix(PACKED_SUFFIX), (None, "", None))
        if task is None:
            source = "builtin" if name.startswith("vm.") else "other"
        seconds = statistics.median(r[name][0] if name in r else 0.0 for r in per_run)
        calls.append(CallTime(name, task, int(n), seconds, recorded, source))
    calls.sort(key=lambda c: c.seconds, reverse=True)
    return ModelProfile(model_s, statistics.median(totals), calls, runs)


def _owners(model: CompiledModel) -> dict[str, tuple[str, str, float | None]]:
    """PrimFunc name -> (task, source, recorded latency) from the model's kernel choices."""
    out: dict[str, tuple[str, str, float | None]] = {}
    for choice in model.choices:
        for name in choice.functions:
            out[name] = (choice.task, choice.source, choice.latency_s)
    return out
