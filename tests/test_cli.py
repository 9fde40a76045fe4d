"""The command line, in process (``click.testing.CliRunner``) and as the installed console script.

``heronlike tune`` runs a real, small tune (8 trials); ``heronlike best`` reads its records back
and rebuilds the best kernel. The console script is run as a subprocess to check how typed errors
reach a user: one line, exit status 2, no traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from click.testing import CliRunner  # noqa: E402

import heronlike  # noqa: E402
from heronlike import cli  # noqa: E402
from heronlike.dla_targets.dlboost import host_has_vnni  # noqa: E402
from heronlike.errors import UnknownTargetError  # noqa: E402

needs_vnni = pytest.mark.skipif(not host_has_vnni(), reason="host CPU has no AVX512-VNNI")


def _script() -> str:
    found = Path(sys.executable).with_name("heronlike")
    if found.exists():
        return str(found)
    which = shutil.which("heronlike")
    if which is None:  # pragma: no cover - the package is installed in the test environment
        pytest.skip("the heronlike console script is not installed")
    return which


def _run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # rich's default: 80 columns
    return subprocess.run(
        [_script(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _workload_key(records: Path) -> str:
    from heronlike.records import Records

    with Records(records) as db:
        (w,) = db.workloads()
    return w["workload_key"]


# -- csp -----------------------------------------------------------------------------------------


def test_csp_prints_the_space() -> None:
    res = CliRunner().invoke(cli.main, ["csp", "gemm", "--shape", "64,64,64"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    for kind in ("PROD", "IN", "SELECT", "EQ", "LE", "SUM"):
        assert any(line.startswith(kind + " ") for line in lines), kind
    assert "EQ C.v_j.T == 16" in lines
    assert "# template" in lines
    assert any("sch.tensorize(" in line for line in lines)


def test_csp_other_ops_and_target() -> None:
    runner = CliRunner()
    res = runner.invoke(
        cli.main, ["csp", "bmm", "--shape", "2,32,32,32", "--target", "llvm -num-cores=2"]
    )
    assert res.exit_code == 0, res.output
    assert "-num-cores=2" in res.output and "C.v_b.S0" in res.output
    res = runner.invoke(cli.main, ["csp", "gemv", "--shape", "64,64"])
    assert res.exit_code == 0, res.output
    assert "y.v_i.S0" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["csp", "gemm", "--shape", "64,x,64"], "not a comma-separated list of integers"),
        (["csp", "gemm", "--shape", "64,64"], "gemm takes 3 extents"),
        (["csp", "gemv", "--shape", "64,64,64"], "gemv takes 2 extents"),
        (["csp", "gemm"], "Missing option"),
        (["csp", "conv9d", "--shape", "1,1"], "Invalid value"),
        (["csp", "gemm", "--shape", "64,64,64", "--dtype", "int4"], "Invalid value"),
    ],
)
def test_bad_arguments_are_usage_errors(args: list[str], message: str) -> None:
    res = CliRunner().invoke(cli.main, args)
    assert res.exit_code == 2, res.output
    assert "Usage:" in res.output and message in res.output
    assert "Traceback" not in res.output


def test_typed_error_in_process_is_raised_not_swallowed() -> None:
    res = CliRunner().invoke(cli.main, ["csp", "gemm", "--shape", "64,64,64", "--target", "tpu9"])
    assert isinstance(res.exception, UnknownTargetError)


def test_best_without_records(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli.main, ["best", "--records", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 1 and "no records at" in res.output


# -- tune, then best -------------------------------------------------------------------------------


@needs_vnni
def test_tune_then_best(tmp_path: Path) -> None:
    records = tmp_path / "runs" / "records.sqlite"
    runner = CliRunner()
    res = runner.invoke(
        cli.main,
        [
            "tune",
            "gemm",
            "--shape",
            "128,128,128",
            "--trials",
            "8",
            "--batch-size",
            "8",
            "--records",
            str(records),
            "--no-baselines",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "bit-exact" in res.output
    assert "8 (8 valid, 0 invalid)" in res.output
    assert "baselines" not in res.output
    assert records.exists()
    key = _workload_key(records)

    # list what the records hold
    res = runner.invoke(cli.main, ["best", "--records", str(records)])
    assert res.exit_code == 0, res.output
    assert key in res.output  # the key column is never truncated
    assert "dlboost" in res.output and "8" in res.output

    # rebuild and check the best kernel without tuning
    res = runner.invoke(
        cli.main, ["best", "gemm", "--shape", "128,128,128", "--records", str(records)]
    )
    assert res.exit_code == 0, res.output
    assert f"best kernel of {key} rebuilt; correct: True" in res.output
    assert "C.v_k.R0=" in res.output

    # another shape: nothing recorded for it (a typed error, raised in process)
    res = runner.invoke(
        cli.main, ["best", "gemm", "--shape", "64,64,64", "--records", str(records)]
    )
    assert res.exit_code != 0 and type(res.exception).__name__ == "RecordsMismatchError"

    # best OP without --shape is a usage error
    res = runner.invoke(cli.main, ["best", "gemm", "--records", str(records)])
    assert res.exit_code == 2 and "--shape is required" in res.output

    # the installed console script reads the same records (wide terminal: full key)
    out = subprocess.run(
        [_script(), "best", "--records", str(records)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stderr
    assert key in out.stdout


# -- the console script ----------------------------------------------------------------------------


def test_console_script_bad_target_is_one_line(tmp_path: Path) -> None:
    res = _run_script("csp", "gemm", "--shape", "64,64,64", "--target", "tpu9000", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stdout == ""  # errors go to stderr
    out = res.stderr.strip()
    assert "Traceback" not in out
    assert out.startswith("error (UnknownTargetError): unknown target 'tpu9000'")
    assert len(out.splitlines()) == 1, out


def test_console_script_usage_error_and_version(tmp_path: Path) -> None:
    res = _run_script("csp", "gemm", "--shape", "64,64", cwd=tmp_path)
    assert res.returncode == 2
    assert "Usage: heronlike csp" in res.stderr and "Traceback" not in res.stderr
    res = _run_script("--version", cwd=tmp_path)
    assert res.returncode == 0 and heronlike.__version__ in res.stdout


def test_tune_on_vta_reports_cycles_and_no_host_baselines(tmp_path: Path) -> None:
    """A simulated accelerator's latency is not compared with host-CPU libraries: the VTA
    tune prints its simulated cycles and no baseline table, even with baselines on."""
    res = CliRunner().invoke(
        cli.main,
        [
            "tune",
            "gemm",
            "--shape",
            "16,32,32",
            "--target",
            "vta",
            "--trials",
            "2",
            "--batch-size",
            "2",
            "--records",
            str(tmp_path / "r.sqlite"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "simulated cycles" in res.output and "bit-exact" in res.output
    assert "baselines" not in res.output


def test_tune_prints_pytorchs_fastest_int8_path(tmp_path: Path) -> None:
    """The baseline table of ``tune`` names PyTorch's fastest int8 path (on a CPU without
    VNNI the pre-packed quantized ``Linear``, not ``torch._int_mm``'s slow fallback) and numpy,
    each with a latency; a real small tune on the general target, which runs on any x86 CPU."""
    pytest.importorskip("torch")
    res = CliRunner().invoke(
        cli.main,
        [
            "tune",
            "gemm",
            "--shape",
            "64,64,64",
            "--target",
            "llvm",
            "--trials",
            "2",
            "--batch-size",
            "2",
            "--records",
            str(tmp_path / "r.sqlite"),
        ],
    )
    assert res.exit_code == 0, res.output
    table = res.output.split("baselines, same shape")[1]
    assert "numpy float32 matmul" in table
    assert "torch._int_mm" in table or "torch.ao.nn.quantized.Linear" in table
    assert "[also:" not in table and "failed" not in table  # the fastest path only, timed
    if not host_has_vnni():
        assert "torch.ao.nn.quantized.Linear" in table, table
    # on a CPU with AMX, PyTorch is timed as it is (oneDNN's AMX tiles) and capped at VNNI,
    # the instructions of this target; each row says which (rich may wrap a cell at spaces)
    from heronlike.host import cpu_flags

    amx = "amx_int8" in cpu_flags() and "ONEDNN_MAX_CPU_ISA" not in os.environ
    assert ("AVX512_CORE_VNNI" in table) == amx and ("AMX" in table) == amx, table
