"""The measurement seam: build candidates in a worker pool, time them in an isolated worker.

:class:`Builder` and :class:`Runner` are the protocols a target's builder and runner satisfy
(:meth:`heronlike.target.DLATarget.make_builder` / ``make_runner``); :class:`LocalBuilder`
(any TVM build function in a process pool) and :class:`LocalRunner` (the TVM runtime on a local
device) are the default implementations.

Failures are data: every candidate gets a :class:`BuildResult` / :class:`RunResult` whose
``error_kind`` is ``None`` on success, and a bad candidate never raises or stops the tuner.
"""

from __future__ import annotations

from heronlike.measure.builder import (
    Builder,
    BuildFunction,
    BuildInput,
    BuildResult,
    LocalBuilder,
    build_llvm,
)
from heronlike.measure.check import compare
from heronlike.measure.runner import (
    LocalRunner,
    RunInput,
    Runner,
    RunResult,
    parse_device,
    run_in_subprocess,
    thread_env,
)

__all__ = [
    "BuildFunction",
    "BuildInput",
    "BuildResult",
    "Builder",
    "LocalBuilder",
    "LocalRunner",
    "RunInput",
    "RunResult",
    "Runner",
    "build_llvm",
    "compare",
    "parse_device",
    "run_in_subprocess",
    "thread_env",
]
