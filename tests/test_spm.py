"""S2 Add Multi-Level SPM and S3 Add Multi-Scope SPM on a CPU target that stages operands in
``global`` scratch buffers: the rules add cache stages with compute-location knobs (SELECT), and
every sampled program still builds and computes the exact result."""

from __future__ import annotations

import numpy as np
import pytest

from heronlike import ops
from heronlike.csp import Select
from heronlike.dla_targets.dlboost import DLBoostTarget, host_has_vnni
from heronlike.kernel import BuiltKernel
from heronlike.rules.spm import AddMultiLevelSPM, AddMultiScopeSPM
from heronlike.rules.tensorize import Tensorize
from heronlike.sampler import RandSAT
from heronlike.space import generate_space


class StagedDLBoost(DLBoostTarget):
    """DL Boost with one extra SPM rule right after Tensorize (a test-only target)."""

    names = ("staged-dlboost-test",)

    def __init__(self, spm, **options):  # noqa: ANN001
        super().__init__(**options)
        self.spm = spm

    def schedule_rules(self):  # noqa: ANN201
        rules = list(super().schedule_rules())
        at = next(i for i, r in enumerate(rules) if isinstance(r, Tensorize)) + 1
        return rules[:at] + [self.spm] + rules[at:]


@pytest.mark.skipif(not host_has_vnni(), reason="host CPU has no AVX512-VNNI")
@pytest.mark.parametrize(
    "spm",
    [AddMultiLevelSPM(("global",)), AddMultiScopeSPM({"a": "global", "b": "global"})],
    ids=["S2", "S3"],
)
def test_staged_operands_build_and_are_exact(spm) -> None:  # noqa: ANN001
    target = StagedDLBoost(spm)
    space = generate_space(ops.gemm(128, 128, 128), target)
    steps = [s.op for s in space.template.steps]
    assert steps.count("cache_read") == 2 and steps.count("compute_at") == 2
    pos_knobs = [k for k in space.csp.knobs if k.endswith(".global.pos")]
    assert len(pos_knobs) == 2
    selects = [c for c in space.csp.constraints if isinstance(c, Select)]
    assert {c.index for c in selects} >= set(pos_knobs)

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (128, 128), dtype=np.uint8)
    W = rng.integers(-128, 128, (128, 128), dtype=np.int8)
    expected = X.astype(np.int64) @ W.astype(np.int64).T
    samples = RandSAT(space.csp, seed=1).sample(8)
    seen_positions = set()
    for a in samples:
        assert space.csp.violations(a) == []
        out = BuiltKernel(space, a, target.tvm_target())(X, W)
        np.testing.assert_array_equal(out, expected)
        seen_positions.add(tuple(a[k] for k in pos_knobs))
    assert len(seen_positions) > 1  # the knobs really move the cache stages


def test_multi_scope_rejects_unknown_role() -> None:
    with pytest.raises(ValueError, match="roles"):
        AddMultiScopeSPM({"d": "global"})


def test_dlboost_does_not_stage_operands() -> None:
    space = generate_space(ops.gemm(64, 64, 64), "dlboost")
    assert "cache_read" not in [s.op for s in space.template.steps]
