"""A built kernel you can call with numpy arrays."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tvm

from .library.runtime import to_logical
from .postproc import postprocess
from .space import Space


class BuiltKernel:
    """One candidate program of a :class:`~heronlike.space.Space`, compiled.

    Call it with the compute's *input* arrays (numpy, logical layouts, in parameter order);
    it pre-packs the parameters the kernel takes in a packed layout, allocates the outputs,
    runs the kernel on the target's device (the CPU; a local GPU for TensorCore) and returns
    the output array in the compute's own shape (a tuple for several outputs).

    Attributes:
        space: the space the program comes from.
        assignment: its CSP assignment.
        executable: the ``tvm.runtime.Executable`` (``export_library`` and ``["main"]``).
        schedule: the ``tvm.s_tir.Schedule`` (``.trace`` to replay).
        program: the ``tvm.IRModule`` that was built: the schedule's module after
            :func:`heronlike.postproc.postprocess`.
    """

    def __init__(self, space: Space, assignment: Mapping[str, int], target: dict[str, Any]) -> None:
        self.space = space
        self.assignment = dict(assignment)
        self.schedule = space.apply(assignment)
        self.program = postprocess(self.schedule.mod)  # = space.program(assignment)
        self.executable = tvm.compile(self.program, target=tvm.target.Target(target))

    @property
    def script(self) -> str:
        """The scheduled program as TVMScript."""
        return self.program.script()

    @property
    def assembly(self) -> str:
        """The compiled kernel as assembly text (x86 AT&T syntax for CPU targets), for checking
        which instructions it uses; for CUDA, the host side only (the device code is in
        ``executable.mod.imports``)."""
        return str(self.executable.mod.inspect_source("asm"))

    @property
    def trace(self) -> str:
        """The schedule as a replayable trace (a Python ``apply_trace(sch)`` function)."""
        return str(self.schedule.trace)

    def __call__(self, *inputs: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run on ``inputs`` (one numpy array per input parameter, logical layout).

        Raises:
            ValueError: for a wrong number of inputs or a shape/dtype that differs from the
                compute's.
        """
        params = self.space.logical.params
        outputs = [p for p in params if p.name in self.space.logical.outputs]
        ins = [p for p in params if p.name not in self.space.logical.outputs]
        if len(inputs) != len(ins):
            raise ValueError(f"expected {len(ins)} inputs ({', '.join(p.name for p in ins)})")
        arrays = []
        given = iter(inputs)
        for p in params:
            if p in outputs:
                arrays.append(np.zeros(p.shape, p.dtype))
                continue
            arr = np.asarray(next(given))
            if arr.shape != p.shape or str(arr.dtype) != p.dtype:
                want, got = f"{p.dtype}{list(p.shape)}", f"{arr.dtype}{list(arr.shape)}"
                raise ValueError(f"input {p.name} must be {want}, got {got}")
            arrays.append(arr)
        from .measure.runner import parse_device
        from .target import prepare_process_for

        prepare_process_for(self.space.target.key)  # TVM's thread pool sized; AMX's tiles
        dev = tvm.device(*parse_device(self.space.target.device))  # the target's device
        tensors = [tvm.runtime.tensor(a, dev) for a in self.space.prepare_args(arrays)]
        self.executable["main"](*tensors)
        result = tuple(
            to_logical(t.numpy(), tuple(p.shape)) for p, t in zip(params, tensors) if p in outputs
        )
        return result[0] if len(result) == 1 else result

    def export_library(self, path: str | Path) -> Path:
        """Write the kernel as a shared library loadable by ``tvm.runtime.load_module``."""
        path = Path(path)
        self.executable.export_library(str(path))
        return path
