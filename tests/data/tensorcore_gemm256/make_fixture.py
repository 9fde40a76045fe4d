"""Regenerate this fixture: a bundle of 24 candidates of a 256³ fp16 GEMM on ``cuda
-tensorcore`` and a results.json with SYNTHETIC latencies (not measured on any GPU).

The latency is a made-up function of the knobs (bigger warp tiles and more warps are faster,
padding rows helps a little) so that the replayed tune has something to rank; it tests the
import and simulation plumbing of the TensorCore space, nothing about GPU speed. Run from the
repository root when the TensorCore rules change the CSP (the assignments must stay valid)::

    python tests/data/tensorcore_gemm256/make_fixture.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from heronlike import ops
from heronlike.offline import prepare_bundle

HERE = Path(__file__).parent


def synthetic_latency(a: dict[str, int]) -> float:
    warps = a["C.warps"]
    frags = a["C.fragments"]
    pad = (
        1.0 - 0.02 * bool(a["C.a.shared.align_offset"]) - 0.02 * bool(a["C.b.shared.align_offset"])
    )
    return 2e-5 * pad / (min(warps, 8) ** 0.5 * min(frags, 8) ** 0.3)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rnd = prepare_bundle(
            ops.gemm(256, 256, 256, dtype="float16"),
            "cuda -tensorcore",
            Path(tmp) / "bundle",
            batch_size=24,
            records=Path(tmp) / "r.sqlite",
            seed=0,
        )
        assert rnd.bundle is not None
        bundle = json.loads((rnd.bundle / "bundle.json").read_text())
        subprocess.run(
            [sys.executable, str(rnd.bundle / "run_bundle.py"), str(rnd.bundle), "--standin"],
            check=True,
            capture_output=True,
        )
        results = json.loads((rnd.bundle / "results.json").read_text())
        results["standin"] = False
        results.pop("note", None)
        results["device"] = "SYNTHETIC test fixture (no GPU; latencies made up)"
        for cand in bundle["candidates"]:
            lat = synthetic_latency(cand["assignment"])
            res = results["candidates"][cand["id"]]
            res.update(latency_s=lat, latencies_s=[lat] * 3, error_kind=None, error_msg=None)
        shutil.rmtree(HERE / "cands", ignore_errors=True)
        (HERE / "bundle.json").write_text(json.dumps(bundle, indent=1, sort_keys=True) + "\n")
        (HERE / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
