"""The measurement seam: build candidates in a worker pool, time them in an isolated worker.

:class:`Builder` and :class:`Runner` are the protocols a target's builder and runner satisfy
(:meth:`heronlike.target.DLATarget.make_builder` / ``make_runner``); :class:`LocalBuilder`
(any TVM build function in a process pool) and :class:`LocalRunner` (the TVM runtime on a local
device) are the default implementations.

Failures are data: every candidate gets a :class:`BuildResult` / :class:`RunResult` whose
``error_kind`` is ``None`` on success, and a bad candidate never raises or stops the tuner.
"""

from __future__ import annotations

import importlib
from typing import Any

# imported on first use, so that the TVM-free modules of this package (``run_bundle``, the
# offline runner script the CUDA library dispatcher shares) import without TVM
_LAZY = {
    "Builder": "heronlike.measure.builder",
    "BuildFunction": "heronlike.measure.builder",
    "BuildInput": "heronlike.measure.builder",
    "BuildResult": "heronlike.measure.builder",
    "LocalBuilder": "heronlike.measure.builder",
    "build_llvm": "heronlike.measure.builder",
    "compare": "heronlike.measure.check",
    "LocalRunner": "heronlike.measure.runner",
    "RunInput": "heronlike.measure.runner",
    "Runner": "heronlike.measure.runner",
    "RunResult": "heronlike.measure.runner",
    "parse_device": "heronlike.measure.runner",
    "run_in_subprocess": "heronlike.measure.runner",
    "thread_env": "heronlike.measure.runner",
    "measure_env": "heronlike.measure.runner",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'heronlike.measure' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = sorted(_LAZY)
