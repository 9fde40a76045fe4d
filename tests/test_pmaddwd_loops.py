"""``benchmarks/pmaddwd_loops.py``: each variant of the AVX2 int8 micro-kernel computes
``A @ W`` (the four exact ones bit for bit; FBGEMM's ``vpmaddubsw`` loop saturates on
full-range operands), and its emitted loop holds the instruction mix it is named for."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import pmaddwd_loops  # noqa: E402
from heronlike.host import cpu_flags  # noqa: E402

TILE = (2, 4)


_LINE = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
_JUMP = re.compile(r"^j(?!mp)\w+\s+([0-9a-f]+) <")  # conditional: a loop's back edge


def _loop(asm: str, name: str) -> str:
    """The innermost loop of function ``name`` in ``objdump -d`` output: the instructions from
    the target of its shortest conditional backward jump to that jump."""
    body = asm.split(f"<{name}>:\n", 1)[1].split("\n\n", 1)[0]
    lines = [(int(m.group(1), 16), m.group(2)) for m in map(_LINE.match, body.splitlines()) if m]
    loops = []
    for addr, text in lines:
        jump = _JUMP.match(text)
        if jump and int(jump.group(1), 16) < addr:
            loops.append((addr - int(jump.group(1), 16), int(jump.group(1), 16), addr))
    assert loops, f"no loop in {name}"
    _, first, last = min(loops)
    return "\n".join(text for addr, text in lines if first <= addr <= last)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("loops")
    lib = pmaddwd_loops.build([TILE], work)
    asm = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(work / "loops.so")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return lib, asm


#: variant -> (vpmovsxbw, vpmovzxbw, vpmaddubsw) per iteration of the 2 x 4 tile's loop
MIX = {
    "widen_ab": (4, 2, 0),
    "widen_a": (0, 2, 0),
    "widen_b": (4, 0, 0),
    "none": (0, 0, 0),
    "maddubs": (0, 0, 8),
}


@pytest.mark.parametrize("variant", pmaddwd_loops.VARIANTS)
def test_loop_holds_the_named_instruction_mix(built, variant: str) -> None:
    _, asm = built
    m, n = TILE
    loop = _loop(asm, f"k_{variant}_{m}x{n}")
    ops = ("vpmaddwd", "vpmovsxbw", "vpmovzxbw", "vpmaddubsw")
    count = {op: len(re.findall(rf"^{op}\s", loop, re.M)) for op in ops}
    assert count["vpmaddwd"] == m * n  # one per accumulator (by ones, after vpmaddubsw)
    assert (count["vpmovsxbw"], count["vpmovzxbw"], count["vpmaddubsw"]) == MIX[variant]


@pytest.mark.skipif("avx2" not in cpu_flags(), reason="needs AVX2 to run")
@pytest.mark.parametrize("variant", pmaddwd_loops.VARIANTS)
def test_variants_compute_the_product(built, variant: str) -> None:
    lib, _ = built
    gops, exact = pmaddwd_loops.time_kernel(lib, variant, *TILE, seconds=0.001, repeats=1)
    assert gops > 0
    # full-range u8 x s8 pairs overflow int16 in vpmaddubsw: only that loop is not exact
    assert exact == (variant != "maddubs")
