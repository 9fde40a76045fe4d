"""Fixtures shared by several test modules."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest


def _gcc_library(tmp: Path, name: str, body: str) -> str:
    """A shared library exporting ``main`` through the TVM FFI symbol, built with gcc."""
    src = tmp / f"{name}.c"
    src.write_text(
        "#include <stdint.h>\n"
        "int __tvm_ffi_main(void* self, const void* args, int32_t n, void* ret) {\n"
        f"  {body}\n  return 0;\n}}\n"
    )
    out = tmp / f"{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-o", str(out), str(src)], check=True)
    return str(out)


@pytest.fixture
def gcc_library() -> Callable[[Path, str, str], str]:
    """``gcc_library(tmp, name, c_body)``: a runnable artifact whose ``main`` runs ``c_body``
    (a crash, a hang), for testing how runners survive bad kernels."""
    return _gcc_library


def _run_standin(bundle: Path) -> dict:
    """Run ``bundle``'s own ``run_bundle.py --standin`` as a user would (a subprocess), check
    that it succeeded, and return its ``results.json``."""
    import json
    import sys

    run = subprocess.run(
        [sys.executable, str(bundle / "run_bundle.py"), str(bundle), "--standin"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return json.loads((bundle / "results.json").read_text())


@pytest.fixture
def run_standin() -> Callable[[Path], dict]:
    """``run_standin(bundle)``: the bundle's ``results.json`` after ``run_bundle.py
    --standin`` (validates every candidate, launches nothing)."""
    return _run_standin
