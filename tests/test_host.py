"""heronlike.host reads the CPU's name from /proc/cpuinfo: the machine every result names."""

from __future__ import annotations

import re
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


def test_no_cpuinfo_gives_empty_signature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "CPUINFO", tmp_path / "missing")
    assert host.cpu_signature() == ""
    assert host.cpu_model()  # platform.processor() or "unknown", never empty
