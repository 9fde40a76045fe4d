"""``dlboost -general`` on a CPU without AVX512-VNNI: u8 × s8 stages are tensorized onto
``vpmaddwd`` (AVX2, or AVX-512BW), every other stage goes to the general rule set, so
``make demo`` and the general workloads run on any x86 host (real, small tunes)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

import heronlike
from heronlike import ops
from heronlike.dla_targets.dlboost import (
    PMADDWD_AVX2,
    PMADDWD_AVX2_A16,
    PMADDWD_AVX512,
    PMADDWD_AVX512_A16,
    VNNI,
)
from heronlike.host import cpu_flags
from heronlike.kernel import BuiltKernel
from heronlike.sampler import RandSAT
from heronlike.space import generate_space
from heronlike.target import get_target

needs_avx2 = pytest.mark.skipif("avx2" not in cpu_flags(), reason="needs an AVX2 CPU")


def test_intrinsic_by_cpu() -> None:
    """VNNI where the CPU has it, else vpmaddwd at the widest vector the CPU has, else none."""
    assert get_target("dlboost -general -mcpu=haswell").intrinsics == (PMADDWD_AVX2_A16,)
    assert get_target("dlboost -general -mcpu=znver3").intrinsics == (PMADDWD_AVX2_A16,)
    assert get_target("dlboost -general -mcpu=skylake-avx512").intrinsics == (PMADDWD_AVX512_A16,)
    assert get_target("dlboost -general -mcpu=znver4").intrinsics == (VNNI,)
    assert get_target("dlboost -general -mcpu=nehalem").intrinsics == ()  # SSE only
    target = get_target("dlboost -general -mcpu=haswell")
    assert target.tvm_target()["mcpu"] == "haswell"  # no HostFeatureError with -general
    assert (PMADDWD_AVX2.n, PMADDWD_AVX2.k, PMADDWD_AVX512.n) == (8, 2, 16)


def test_widen_a_option() -> None:
    """``-widen-a`` picks how vpmaddwd reads A: pre-widened by default, in the call with
    ``-widen-a=0``; a pre-widened space has its own records key, the in-call one keeps the key
    it had before the option existed."""
    avx2, avx512 = "dlboost -general -mcpu=haswell", "dlboost -general -mcpu=skylake-avx512"
    assert get_target(f"{avx2} -widen-a=0").intrinsics == (PMADDWD_AVX2,)
    assert get_target(f"{avx512} -widen-a=0").intrinsics == (PMADDWD_AVX512,)
    assert get_target(avx2).key.endswith("-widen-a")
    assert "widen-a" not in get_target(f"{avx2} -widen-a=0").key
    assert get_target(avx512).key.endswith("-widen-a")
    assert "widen-a" not in get_target("dlboost -general -mcpu=znver4 -widen-a").key  # VNNI


def test_float_gemm_keeps_the_general_rules() -> None:
    """vpmaddwd is u8 x s8 only: a float32 GEMM is not tensorized."""
    space = generate_space(ops.gemm(64, 64, 64, dtype="float32"), "dlboost -general -mcpu=haswell")
    assert "tensorize" not in [s.op for s in space.template.steps]


@pytest.mark.parametrize("mcpu, mnemonic", [("haswell", "ymm"), ("skylake-avx512", "zmm")])
def test_int8_gemm_is_tensorized_onto_vpmaddwd(mcpu: str, mnemonic: str) -> None:
    """Every sampled candidate builds, and its assembly multiplies with vpmaddwd on the
    target's registers and never with vpdpbusd or the saturating vpmaddubsw."""
    space = generate_space(ops.gemm(64, 48, 64), f"dlboost -general -mcpu={mcpu}")
    assert "tensorize" in [s.op for s in space.template.steps]
    for assignment in RandSAT(space.csp, seed=1).sample(4):
        asm = BuiltKernel(space, assignment, space.target.tvm_target()).assembly
        lines = [ln for ln in asm.splitlines() if "vpmaddwd" in ln]
        assert lines and all(mnemonic in ln for ln in lines)
        assert "vpmaddubsw" not in asm and "vpdpbusd" not in asm


@needs_avx2
@pytest.mark.parametrize("shape", [(64, 64, 64), (13, 40, 30)])
def test_int8_gemm_on_vpmaddwd_is_exact(tmp_path: Path, shape: tuple[int, int, int]) -> None:
    """A real tune on this CPU; operands drawn over the whole u8 / s8 range (where the
    saturating vpmaddubsw would be wrong) give outputs bit-exact to numpy, for a divisible
    shape and one padded to the 8 x 2 tile inside the kernel."""
    result = heronlike.tune(
        ops.gemm(*shape), "dlboost -general", trials=4, batch_size=4, records=tmp_path / "r.sqlite"
    )
    assert result.valid == 4 and result.correct
    m, n, k = shape
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (m, k), dtype=np.uint8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    x[0], w[0] = 255, -128  # the extreme products
    got = result.kernel(x, w)
    np.testing.assert_array_equal(got, x.astype(np.int32) @ w.astype(np.int32).T)


@needs_avx2
def test_records_of_another_space_are_set_aside(tmp_path: Path) -> None:
    """Trials recorded for another space of the same compute and target (here: assignments
    with a variable today's space lacks) are skipped with a warning, not fed to the explorer
    (which used to fail on the missing variable)."""
    records = tmp_path / "r.sqlite"
    gemm = ops.gemm(32, 32, 32)
    heronlike.tune(gemm, "dlboost -general", trials=2, batch_size=2, records=records)
    with sqlite3.connect(records) as db:
        db.execute(
            "UPDATE trials SET assignment_json = "
            "json_set(assignment_json, '$.\"C.gone\"', 1) WHERE trial_index = 0"
        )
    with pytest.warns(UserWarning, match="another space of it"):
        result = heronlike.tune(
            gemm, "dlboost -general", trials=4, batch_size=2, records=records, explorer="cga"
        )
    assert result.valid >= 1 and result.correct
