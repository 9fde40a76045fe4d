"""``benchmarks/loop_order.py``: the Ansor-order space it compares against differs from the
current one in the loop order only (same CSP, same results), and in the order it claims."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import loop_order  # noqa: E402
from heronlike import ops  # noqa: E402
from heronlike.kernel import BuiltKernel  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402


def _inner_loop_kinds(space, point) -> list[tuple[str, str]]:  # noqa: ANN001 - Space, dict
    """(loop name, kind) of the loops around the float32 GEMM's update, outermost first."""
    sch = space.apply(point)
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_sblock("C_update"))]
    return [(lp.loop_var.name, str(lp.kind)) for lp in loops]


def test_the_two_orders_share_the_csp_and_compute_the_same() -> None:
    compute = ops.gemm(48, 64, 32, dtype="float32")
    micro, ansor = loop_order.spaces(compute, "llvm")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((48, 32), dtype=np.float32)
    w = rng.standard_normal((64, 32), dtype=np.float32)
    for point in RandSAT(micro.csp, seed=1).sample(3):
        target = micro.target.tvm_target()
        got = [BuiltKernel(space, point, target)(x, w) for space in (micro, ansor)]
        np.testing.assert_allclose(got[0], x @ w.T, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got[1], got[0], rtol=1e-5, atol=1e-5)
        # below the last k loop: the unrolled register tile and the vector loop
        # (micro-kernel), the vector loop only (Ansor: the tile sits above that k loop)
        for space, tile_below in ((micro, True), (ansor, False)):
            kinds = _inner_loop_kinds(space, point)
            last_k = max(i for i, (name, _) in enumerate(kinds) if name.startswith("k_"))
            below = [kind for _, kind in kinds[last_k + 1 :]]
            assert below[-1] == str(tvm.tirx.ForKind.VECTORIZED), kinds
            assert below[:-1] == [str(tvm.tirx.ForKind.UNROLLED)] * (2 if tile_below else 0), kinds
