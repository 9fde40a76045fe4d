"""MetaSchedule builder function without the tensor-intrinsic import (notes/tvm027.md §3.1).

MetaSchedule's default ``f_build`` imports ``tvm.s_tir.tensor_intrin`` in every freshly spawned
builder worker (about 16 s per batch on this machine). Tensorization is already applied in the
tuning process, so the workers only need to compile. The function must be module-level in an
importable module: cloudpickle sends it to the popen workers by reference.
"""

from __future__ import annotations

from typing import Any


def fast_build(mod: Any, target: Any, _params: Any) -> Any:
    """Compile a scheduled ``IRModule`` for ``target`` exactly as MetaSchedule's
    ``default_build`` does (``tvm.build`` after removing weight-layout-rewrite blocks), minus
    its ``import tvm.s_tir.tensor_intrin``; returns the runtime module."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return tvm.build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)
