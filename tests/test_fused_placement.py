"""benchmarks/fused_placement.py's ablation: the separate-placement space it compares against is
the space without the fusion, and pinning a tuned schedule's knobs carries it to both spaces."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))
from t2d_reference import SUBPIXEL_SHAPES, rand_input, t2d_ref  # noqa: E402

from benchmarks.fused_placement import POSITION, separate_space, with_knobs  # noqa: E402
from heronlike import ops  # noqa: E402
from heronlike.kernel import BuiltKernel  # noqa: E402
from heronlike.space import generate_space  # noqa: E402


def test_separate_space_is_the_unfused_one_and_knobs_carry_over() -> None:
    shape = SUBPIXEL_SHAPES[0]
    compute = ops.t2d(*shape, dtype="float32")
    fused = generate_space(compute, "llvm")
    separate = separate_space(compute, "llvm")
    assert POSITION in fused.csp.vars and POSITION not in separate.csp.vars
    assert POSITION in generate_space(compute, "llvm").csp.vars  # the rule is back afterwards
    rng = np.random.default_rng(0)
    inputs = [rand_input(rng, tuple(int(d) for d in t.shape), "float32") for t in compute[:-1]]
    expected = t2d_ref(*inputs, *shape[7:])
    pinned = with_knobs(fused, {}, seed=0)
    knobs = {k: v for k, v in pinned.items() if fused.csp.vars[k].knob and k != POSITION}
    for space, assignment in (
        (fused, pinned),
        (separate, with_knobs(separate, knobs, seed=0)),
    ):
        assert all(assignment[k] == v for k, v in knobs.items())
        out = BuiltKernel(space, assignment, space.target.tvm_target())(*inputs)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
