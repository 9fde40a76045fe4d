"""Per-shape kernel libraries for whole models.

* :func:`build` -- tune a model's operator list within one total trial budget (or reuse the
  records), export one shared library plus ``manifest.json``;
* :func:`load` -- the dispatcher: ``load(path).conv2d(x, w, stride=1, padding=1)``,
  ``.gemm(a, b)``; a shape the library lacks raises :class:`KernelNotFoundError`;
* :func:`merge` -- merge records databases from several machines;
* :func:`load_operator_list`, :class:`Workload` -- model operator lists.

``load`` needs only numpy and the TVM runtime; the rest imports heronlike's tuning stack on
first use. See ``docs/library.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .runtime import KernelInfo, KernelNotFoundError, Library, LibraryFormatError, load

_LAZY = {
    "build": ("heronlike.library.builder", "build"),
    "BuildResult": ("heronlike.library.builder", "BuildResult"),
    "export": ("heronlike.library.builder", "export"),
    "check_library": ("heronlike.library.builder", "check_library"),
    "numpy_reference": ("heronlike.library.builder", "numpy_reference"),
    "merge": ("heronlike.library.merging", "merge"),
    "MergeSummary": ("heronlike.library.merging", "MergeSummary"),
    "Workload": ("heronlike.library.workloads", "Workload"),
    "load_operator_list": ("heronlike.library.workloads", "load_operator_list"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'heronlike.library' has no attribute {name!r}")
    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)


__all__ = ["KernelInfo", "KernelNotFoundError", "Library", "LibraryFormatError", "load", *_LAZY]
