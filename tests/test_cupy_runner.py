"""The CuPy runner: TensorCore tuning on a GPU machine without a CUDA-enabled TVM.

Without a GPU (CI, this machine) the runner's stand-in (``cupy+standin``: ``run_bundle.py
--standin``) carries a tune end to end: nvcc builds each candidate, every batch becomes a
bundle with the workload the tune passes along, the bundle's script validates it and launches
nothing, and every trial is recorded with error kind ``"standin"`` and no latency; the finish
re-measures its finalists through the same runner. ``make_runner`` chooses the CuPy runner when
the GPU probe (a subprocess) says a GPU is visible, and names ``heronlike[cuda]`` when not.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

import heronlike
from heronlike import ops
from heronlike.errors import HostFeatureError, RunnerSpecError
from heronlike.measure import cupy_runner
from heronlike.measure.bundle import BundleRunner
from heronlike.measure.cupy_runner import CupyRunner, GpuProbe, gpu_probe
from heronlike.measure.kinds import ErrorKind
from heronlike.measure.rpc import ENV_RUNNER, runner_from_spec
from heronlike.records import Records, TrialRecord
from heronlike.sampler import RandSAT
from heronlike.session import NoResult
from heronlike.space import generate_space
from heronlike.target import get_target

TC = "cuda -tensorcore"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
has_cupy = importlib.util.find_spec("cupy") is not None


def _tvm_sees_a_gpu() -> bool:
    from heronlike.dla_targets.tensorcore import _local_gpu

    return _local_gpu()


# -- specs and the automatic choice ---------------------------------------------------------------


def test_specs_make_cupy_runners() -> None:
    runner = runner_from_spec(" CUPY+Standin ", timeout_s=9.0, number=2, repeat=4, min_repeat_ms=5)
    assert isinstance(runner, CupyRunner) and isinstance(runner, BundleRunner)
    assert runner.standin and runner.spec == "cupy+standin"
    assert (runner.timeout_s, runner.number, runner.repeat) == (9.0, 2, 4)
    assert runner.work_dir.is_dir()
    runner.close()
    assert not runner.work_dir.exists()
    with pytest.raises(RunnerSpecError, match="cupy"):
        runner_from_spec("cupy://gpu")


@pytest.mark.skipif(has_cupy, reason="CuPy is installed here")
def test_cupy_spec_without_cupy_names_the_extra() -> None:
    with pytest.raises(HostFeatureError, match=r"heronlike\[cuda\]"):
        runner_from_spec("cupy")


def test_gpu_probe_answers_without_raising() -> None:
    probe = gpu_probe(timeout_s=60.0)
    assert probe.devices >= 0 and (probe.devices > 0 or probe.reason)
    if not has_cupy:
        assert probe == GpuProbe(0, "CuPy is not installed")


@pytest.mark.skipif(_tvm_sees_a_gpu(), reason="TVM's own runtime sees a GPU here")
def test_make_runner_chooses_cupy_when_the_probe_sees_a_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_RUNNER, raising=False)
    monkeypatch.setattr(cupy_runner, "gpu_probe", lambda *a, **k: GpuProbe(1, ""))
    runner = get_target(TC).make_runner(timeout_s=7.0, number=3, repeat=5, min_repeat_ms=10.0)
    try:
        assert isinstance(runner, CupyRunner) and not runner.standin
        assert (runner.timeout_s, runner.number, runner.repeat) == (7.0, 3, 5)
        assert runner.command is None and runner.script_args == []  # the bundle's own script
    finally:
        runner.close()


@pytest.mark.skipif(_tvm_sees_a_gpu(), reason="TVM's own runtime sees a GPU here")
def test_make_runner_without_a_gpu_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_RUNNER, raising=False)
    monkeypatch.setattr(
        cupy_runner, "gpu_probe", lambda *a, **k: GpuProbe(0, "CuPy is not installed")
    )
    with pytest.raises(HostFeatureError) as err:
        get_target(TC).make_runner(timeout_s=7.0)
    msg = str(err.value)
    assert 'pip install "heronlike[cuda]"' in msg and "CuPy is not installed" in msg
    assert "rpc://" in msg and "--bundle" in msg


# -- a tune through the stand-in ------------------------------------------------------------------


@needs_nvcc
def test_tune_through_the_standin_records_every_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """builder -> bundle (with the tune's workload) -> run_bundle.py --standin -> records;
    nothing was measured, so the result says so (typed) and fakes no latency."""
    monkeypatch.setenv(ENV_RUNNER, "cupy+standin")
    compute = ops.gemm(128, 128, 128, dtype="float16")
    records = tmp_path / "records.sqlite"
    result = heronlike.tune(
        compute, TC, trials=4, batch_size=4, seed=3, records=records, work_dir=tmp_path / "w"
    )
    assert result.trials_run == 4 and result.valid == 0
    assert result.errors == {ErrorKind.STANDIN: 4}
    assert result.latency_s is None and result.finalists == [] and result.kernel is None
    assert result.no_result == NoResult.STANDIN_ONLY
    assert "nothing was measured" in result.summary()
    with Records(records) as db:
        trials = db.trials(result.workload_key, result.target_key)
    assert len(trials) == 4
    assert all(t.error_kind == "standin" and t.latency_s is None for t in trials)
    assert len({str(sorted(t.assignment.items())) for t in trials}) == 4


@needs_nvcc
def test_finish_re_measures_through_the_same_runner(tmp_path: Path) -> None:
    """A recorded valid trial (as a GPU run would have left) is the finalist: the finish
    rebuilds it and re-runs it through the tune's runner, here the stand-in, which checks
    nothing: the finalist keeps the stand-in's outcome, never a fake latency, and the kernel is
    not called correct."""
    compute = ops.gemm(128, 128, 128, dtype="float16")
    space = generate_space(compute, TC)
    (assignment,) = RandSAT(space.csp, seed=11).sample(1)
    records = tmp_path / "records.sqlite"
    with Records(records) as db:
        db.append(
            TrialRecord(
                workload_key=space.workload_key,
                target_key=space.target.key,
                assignment=assignment,
                latency_s=2e-5,
                error_kind=None,
                error_msg=None,
                explore_s=0.0,
                solve_s=0.0,
                build_s=1.0,
                run_s=1.0,
                seed=0,
                explorer="bundle",
                trial_index=-1,
            )
        )
    result = heronlike.tune(
        compute,
        TC,
        trials=2,
        batch_size=1,
        seed=4,
        records=records,
        work_dir=tmp_path / "w",
        runner="cupy+standin",
    )
    assert result.trials_run == 1 and result.errors == {ErrorKind.STANDIN: 1}
    (final,) = result.finalists
    assert final.assignment == assignment and final.error_kind == ErrorKind.STANDIN
    assert final.latency_s is None and final.rounds_s == ()
    assert result.correct is None and result.no_result is None
    assert result.latency_s == result.tuning_latency_s == 2e-5  # the recorded one, kept
