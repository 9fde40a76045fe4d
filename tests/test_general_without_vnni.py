"""``dlboost -general`` on a CPU without AVX512-VNNI: every stage goes to the general rule
set, so ``make demo`` and the general workloads run on any x86 host (a real, small tune)."""

from __future__ import annotations

from pathlib import Path

import heronlike
from heronlike import ops
from heronlike.space import generate_space
from heronlike.target import get_target


def test_general_without_vnni_drops_the_intrinsic() -> None:
    target = get_target("dlboost -general -mcpu=haswell")
    assert target.intrinsics == ()
    assert target.tvm_target()["mcpu"] == "haswell"  # no HostFeatureError with -general
    space = generate_space(ops.gemm(64, 64, 64), target)
    assert "tensorize" not in [s.op for s in space.template.steps]
    assert get_target("dlboost -general -mcpu=znver4").intrinsics  # VNNI kept where it exists


def test_general_tune_runs_on_this_host(tmp_path: Path) -> None:
    result = heronlike.tune(
        ops.gemm(64, 64, 64),
        "dlboost -general",
        trials=4,
        batch_size=4,
        records=tmp_path / "r.sqlite",
    )
    assert result.valid == 4 and result.correct
