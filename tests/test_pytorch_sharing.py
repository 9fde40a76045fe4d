"""``benchmarks/pytorch_sharing.py``: how it reads each column out of a harness log."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import pytorch_sharing  # noqa: E402


def test_per_process_keeps_each_column_and_pytorchs_fastest_path() -> None:
    log = [
        {"round": 0, "kernel": "heronlike", "seconds": 2.0},
        {"round": 0, "kernel": "pytorch int_mm", "seconds": 3.0},
        {"round": 0, "kernel": "pytorch qlinear", "seconds": 2.5},
        {"round": 1, "kernel": "heronlike", "seconds": 1.0},
        {"round": 1, "kernel": "pytorch int_mm", "seconds": 1.0},
        {"round": 1, "kernel": "pytorch qlinear", "seconds": 2.4},
        {"round": 2, "kernel": "heronlike", "seconds": None},  # a failed round is left out
        {"round": 2, "kernel": "pytorch int_mm", "seconds": 1.1},
        {"round": 2, "kernel": "pytorch qlinear", "seconds": 2.6},
    ]
    got = pytorch_sharing.per_process(log)
    # int_mm's per-process medians (3.0, 1.0, 1.1) have the lower median (1.1 < 2.5)
    assert got == {"heronlike": [2.0, 1.0], "pytorch": [3.0, 1.0, 1.1]}
    assert pytorch_sharing.per_process(log[:1]) == {"heronlike": [2.0]}
