"""heronlike.host reads the CPU's name from /proc/cpuinfo: the machine every result names; and
it sizes TVM's thread pool to the cores a compiled model's kernels were tuned for."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from heronlike import host

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu avx2 avx512f avx512_vnni
"""


def test_a_generic_model_name_is_told_apart_by_its_signature(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    monkeypatch.setattr(host, "CPUINFO", tmp_path / "cpuinfo")
    assert host.cpu_model() == "AMD EPYC"
    assert host.cpu_signature() == "family 25 model 17 stepping 1"
    assert {"avx2", "avx512_vnni"} <= host.cpu_flags()
    stamp = host.machine_stamp()
    assert list(stamp) == ["cpu_model", "cpu_signature", "date"]
    assert stamp["cpu_signature"] == "family 25 model 17 stepping 1"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", stamp["date"])
    assert host.machine_slug() == "amd-epyc-f25m17"  # Zen 4; a Zen 3 "AMD EPYC" is f25m1


def test_no_cpuinfo_gives_empty_signature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "CPUINFO", tmp_path / "missing")
    assert host.cpu_signature() == ""
    assert host.cpu_model()  # platform.processor() or "unknown", never empty
    assert host.machine_slug() and "-f" not in host.machine_slug()


def _threads_in_fresh_process(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in host.TVM_THREAD_VARS}
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", "import tvm\n" + code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_a_model_runs_on_the_cores_its_target_names() -> None:
    """TVM alone sizes its pool to half the logical CPUs on x86 (it assumes hyper-threads);
    preparing the process for a CPU target gives it the target's cores, unless the user chose a
    number; a pool created before with fewer threads cannot grow, and a warning says so."""
    cores = len(os.sched_getaffinity(0)) // 2 + 1  # more than TVM's own default
    prepare = "from heronlike.target import prepare_process_for\n"
    prepare += f"prepare_process_for('llvm -num-cores={cores}')\n"
    show = "print(tvm.runtime.num_threads())"
    if cores > 1:  # TVM's own default, which the rest must change
        assert _threads_in_fresh_process(show).stdout.split() == [str(cores - 1)]
    assert _threads_in_fresh_process(prepare + show).stdout.split() == [str(cores)]
    assert _threads_in_fresh_process(prepare + show, TVM_NUM_THREADS="1").stdout.split() == ["1"]
    late = _threads_in_fresh_process(show + "\n" + prepare)
    assert "RuntimeWarning" in late.stderr and f"TVM_NUM_THREADS={cores}" in late.stderr
    with pytest.raises(ValueError, match="threads"):
        host.use_cpu_threads(0)
