"""The measurement seam: build candidates in a worker pool, time them in an isolated worker.

Failures are data: every candidate gets a :class:`BuildResult` / :class:`RunResult` whose
``error_kind`` is ``None`` on success, and a bad candidate never raises or stops the tuner.
"""

from __future__ import annotations

from heronlike.measure.builder import BuildInput, BuildResult, LocalBuilder
from heronlike.measure.check import compare
from heronlike.measure.runner import (
    LocalRunner,
    RunInput,
    RunResult,
    run_in_subprocess,
    thread_env,
)

__all__ = [
    "BuildInput",
    "BuildResult",
    "LocalBuilder",
    "LocalRunner",
    "RunInput",
    "RunResult",
    "compare",
    "run_in_subprocess",
    "thread_env",
]
