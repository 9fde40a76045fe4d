"""benchmarks/store_spread.py's model of T4's tile: every place and kind of the zeros' stores
(plain, non-temporal, ``clzero``, with the next tile's lines prefetched) writes the same output,
and the variants without the zeros (the products alone, the zeros stored to an L1 scratch) the
products, so the timings compare how the zeros are stored and nothing else."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import store_spread  # noqa: E402
from benchmarks.peak import floor_buffer  # noqa: E402
from heronlike.host import cpu_flags  # noqa: E402


@pytest.mark.skipif("avx512_vnni" not in cpu_flags(), reason="the model runs vpdpbusd")
def test_the_models_variants_store_the_same_output() -> None:
    lib = store_spread.model_library()
    tiles = store_spread.TILES
    outputs = {}
    for name, (mode, size) in store_spread.C_VARIANTS.items():
        bufs = [floor_buffer(tiles * 4096) for _ in range(2)]  # 64-byte aligned
        for b in bufs:
            b[:] = 7
        lib.time_variant(mode, bufs[0].ctypes.data, bufs[1].ctypes.data, size, 1)
        outputs[name] = [b.view(np.int32)[: tiles * size // 4].reshape(tiles, -1) for b in bufs]
    after = outputs["after"]
    products = [o[:, :256] for o in after]  # a tile's 16 product vectors come first
    assert all(np.any(p != 0) for p in products)
    assert all(np.all(o[:, 256:] == 0) for o in after)  # then its 48 zero vectors
    for name in (n for n, (_, size) in store_spread.C_VARIANTS.items() if size == 4096):
        for a, b in zip(after, outputs[name], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
    for name in (n for n, (_, size) in store_spread.C_VARIANTS.items() if size == 1024):
        for p, o in zip(products, outputs[name], strict=True):  # the products alone
            np.testing.assert_array_equal(p, o, err_msg=name)
