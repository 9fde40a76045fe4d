"""Helpers shared by the TensorCore tests: sampling with fixed knobs, CUDA source and launch
manifests of a candidate, and building candidates by nvcc with the checks every built
candidate must pass (no spills, the CSP's shared bytes, the split-K grid)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tvm

from heronlike.csp import In
from heronlike.measure.cuda import launch_manifest, sass_opcodes
from heronlike.sampler import RandSAT


def sample(space: Any, n: int, seed: int, **fixed: int) -> list[dict[str, int]]:
    """``n`` RandSAT samples of ``space``'s CSP with the variables ``fixed`` pinned."""
    extra = [In(name, (value,)) for name, value in fixed.items()]
    return RandSAT(space.csp, seed=seed).sample(n, extra=extra)


def source_and_launches(space: Any, assignment: dict[str, int]) -> tuple[str, list[dict]]:
    """The CUDA source TVM generates for ``assignment`` and its launch manifest."""
    sch = space.apply(assignment)
    target = tvm.target.Target(space.target.tvm_target())
    with tvm.transform.PassContext(config=space.target.build_options()["pass_config"]):
        ex = tvm.compile(sch.mod, target=target)
        launches = launch_manifest(sch.mod, target)
    return ex.mod.imports[0].inspect_source(), launches


def build_checked(
    space: Any, samples: list[dict[str, int]], splits: list[int]
) -> list[tuple[dict[str, Any], dict[str, int] | None]]:
    """Build ``samples`` with the target's builder (nvcc) and assert what every built
    candidate must hold: it built, no kernel spills, the first launch has the CSP's shared
    bytes and ``splits[i]`` blocks along y. Returns each build's manifest and its cubin's SASS
    opcode counts (None without cuobjdump)."""
    from heronlike.measure import BuildInput

    target = space.target
    inputs = [
        BuildInput(tvm.ir.save_json(space.program(a)), target.tvm_target(), target.build_options())
        for a in samples
    ]
    with target.make_builder(timeout_s=300) as builder:
        results = builder.build(inputs)
        assert all(r.ok for r in results), [(r.error_kind, r.error_msg) for r in results]
        out = []
        for r, a, split in zip(results, samples, splits, strict=True):
            for kernel in r.info["kernels"].values():
                assert kernel["spill_stores_bytes"] == 0 and kernel["spill_loads_bytes"] == 0
            assert r.info["launches"][0]["dynamic_shared_bytes"] == a["C.shared.bytes"]
            assert r.info["launches"][0]["grid"][1] == split
            out.append((r.info, sass_opcodes(Path(r.artifact_path) / "kernel.cubin")))
        return out
