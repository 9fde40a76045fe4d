"""heronlike: constraint-solving schedule generation for deep-learning accelerators.

The method is Heron (Bi et al., ASPLOS'23): rules walk the compute's stages and emit a schedule
template plus a CSP of its tunable parameters; CP-SAT samples valid programs; an explorer picks
what to measure; every trial lands in a SQLite records database.

Public API: :func:`tune`, :func:`apply_best`, :class:`TuneResult`, :mod:`heronlike.ops`,
:func:`get_target`, :class:`DLATarget`, :class:`Records`, and the errors in
:mod:`heronlike.errors`.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

# Source-checkout support: in the repository, rules/ and dla_targets/ sit beside this package and
# are mapped onto heronlike.rules / heronlike.dla_targets by setup.cfg's package_dir at install
# time. When heronlike is imported straight from a checkout, make the same mapping visible.
_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_root, "rules")) and os.path.isdir(
    os.path.join(_root, "dla_targets")
):
    __path__.append(_root)  # type: ignore[name-defined]  # noqa: F821

__version__ = "0.2.0"

from .errors import (  # noqa: E402
    BundleError,
    HeronlikeError,
    HostFeatureError,
    InfeasibleSpaceError,
    InvalidArgumentError,
    InvalidComputeError,
    ModelCompileError,
    ModelImportError,
    ModelInputError,
    NoTensorizableStageError,
    RecordsBusyError,
    RecordsMismatchError,
    RunnerSpecError,
    SymbolicShapeError,
    UnknownExplorerError,
    UnknownTargetError,
    UnsupportedComputeError,
    UnsupportedDtypeError,
    UnsupportedOperatorError,
    UnsupportedShapeError,
)

_LAZY = {
    "tune": ("heronlike.tuning", "tune"),
    "TuneResult": ("heronlike.tuning", "TuneResult"),
    "Finalist": ("heronlike.tuning", "Finalist"),
    "NoResult": ("heronlike.tuning", "NoResult"),
    "apply_best": ("heronlike.tuning", "apply_best"),
    "Records": ("heronlike.records", "Records"),
    "get_target": ("heronlike.target", "get_target"),
    "DLATarget": ("heronlike.target", "DLATarget"),
    "ops": ("heronlike.ops", None),
    "generate_space": ("heronlike.space", "generate_space"),
    "prepare_bundle": ("heronlike.offline", "prepare_bundle"),
    "import_results": ("heronlike.measure.bundle", "import_results"),
    "ErrorKind": ("heronlike.measure.kinds", "ErrorKind"),
    "model": ("heronlike.model", None),
}


def __getattr__(name: str) -> Any:
    """Import the heavy parts (TVM, OR-Tools, XGBoost) only when they are first used."""
    if name not in _LAZY:
        raise AttributeError(f"module 'heronlike' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attr is None else getattr(module, attr)


__all__ = [
    "BundleError",
    "HeronlikeError",
    "HostFeatureError",
    "InfeasibleSpaceError",
    "InvalidArgumentError",
    "InvalidComputeError",
    "ModelCompileError",
    "ModelImportError",
    "ModelInputError",
    "NoTensorizableStageError",
    "RecordsBusyError",
    "RecordsMismatchError",
    "RunnerSpecError",
    "SymbolicShapeError",
    "UnknownExplorerError",
    "UnknownTargetError",
    "UnsupportedComputeError",
    "UnsupportedDtypeError",
    "UnsupportedOperatorError",
    "UnsupportedShapeError",
    *_LAZY,
]
