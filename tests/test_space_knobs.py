"""Loop-order and unroll-depth knobs (issue 13, item 1): the spaces hold them, every sampled
program is a permutation of the tile loops with a valid unroll depth, the knobs change the
program, and the programs they choose compute the right result."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import tvm

from heronlike import ops
from heronlike.csp import CSP
from heronlike.rules.constraints import add_permutation
from heronlike.sampler import RandSAT
from heronlike.space import generate_space
from heronlike.space_stats import space_size


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_sum_and_prod_admit_exactly_the_permutations(n: int) -> None:
    csp = CSP()
    names = [csp.var(f"p{i}", 1, n, knob=True, topology="perm:g") for i in range(n)]
    add_permutation(csp, names)
    valid = [
        a
        for a in itertools.product(range(1, n + 1), repeat=n)
        if not csp.violations(dict(zip(names, a)))
    ]
    assert sorted(valid) == sorted(itertools.permutations(range(1, n + 1)))
    assert csp.perm_groups == (tuple(names),)


@pytest.mark.parametrize(
    "compute, groups",
    [
        (lambda: ops.gemm(64, 64, 64, "float32"), 1),
        (lambda: ops.c2d(1, 14, 14, 32, 32, 3, 3, 1, 1, 1, "float32"), 1),
    ],
)
def test_llvm_spaces_hold_order_and_unroll_knobs(compute, groups: int) -> None:
    space = generate_space(compute(), "llvm")
    csp = space.csp
    assert len(csp.perm_groups) == groups
    (unroll,) = [k for k in csp.categorical if k.endswith(".unroll")]
    # any other categorical knob: one core or all, on a stage of at most 2**20 operations
    for knob in set(csp.categorical) - {unroll}:
        stage, kind = knob.rsplit(".", 1)
        assert kind == "serial"
        assert 2 * math.prod(a.extent for a in space.dag.stage(stage).axes) <= 1 << 20
    for a in RandSAT(csp, seed=3).sample(40):
        assert not csp.violations(a)
        for group in csp.perm_groups:
            assert sorted(a[k] for k in group) == list(range(1, len(group) + 1))
        assert a[unroll] in (0, 16, 64, 512)


def _assignment_with(space, **fixed: int) -> dict[str, int]:
    from heronlike.csp import Eq

    csp = space.csp.extend(Eq(k, v) for k, v in fixed.items())
    (a,) = RandSAT(csp, seed=0).sample(1)
    return dict(a)


def test_order_knob_reorders_loops_and_results_stay_correct() -> None:
    space = generate_space(ops.gemm(32, 48, 64, "float32"), "llvm")
    (group,) = space.csp.perm_groups
    (unroll,) = [k for k in space.csp.categorical if k.endswith(".unroll")]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64)).astype("float32")
    w = rng.standard_normal((48, 64)).astype("float32")
    want = x @ w.T
    scripts = set()
    for order in itertools.permutations(range(1, len(group) + 1)):
        for depth in (0, 512):
            a = _assignment_with(space, **dict(zip(group, order)), **{unroll: depth})
            sch = space.apply(a)
            script = sch.mod.script()
            assert f'"pragma_auto_unroll_max_step": {depth}' in script
            scripts.add(script)
            lib = tvm.compile(sch.mod, target=space.target.tvm_target())
            args = [tvm.runtime.tensor(v) for v in space.prepare_args([x, w, want])]
            args[-1] = tvm.runtime.tensor(np.zeros_like(want))
            lib(*args)
            np.testing.assert_allclose(args[-1].numpy(), want, rtol=1e-4, atol=1e-4)
    assert len(scripts) == math.factorial(len(group)) * 2  # every choice is another program


def test_space_size_counts_topologies() -> None:
    space = generate_space(ops.gemm(256, 256, 256, "float32"), "llvm")
    size = space_size(space.csp, samples=300)
    assert size.knobs == len(space.csp.knobs)
    assert size.order_knobs == 2 and size.categorical_knobs == 1
    assert size.split_knobs + size.order_knobs + size.categorical_knobs + size.other_knobs == (
        size.knobs
    )
    assert 0 < size.valid_fraction <= 1 and not size.upper_bound
    assert size.log10_valid <= size.log10_structured
    # the structured part: 3 split loops of 256 = 2^8 (3, 4 and 2 parts) x 2 orders x 4 depths
    # x 2 compute locations, before the vector-width and capacity limits
    assert size.log10_structured > 5
