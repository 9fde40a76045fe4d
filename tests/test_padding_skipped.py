"""The ``padding.skipped`` feature (heronlike.features) and its place in the DL Boost prior.

The feature counts, without compiling, the work the padding guards of heronlike.postproc skip.
The reference here counts it another way: for every (output index, tap) pair of each padded
dimension, whether *some* pair of the same register tile (the unrolled ``S2`` loops, which
``outer`` guards cannot sit inside) reads a non-padding element.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from heronlike import ops
from heronlike.explore import search_for
from heronlike.prior import GENERIC_FEATURES, PADDING_SKIPPED_WEIGHT, generic_features
from heronlike.space import generate_space

pytest.importorskip("heronlike.sampler")

#: int8 3-D convolution: depth 2 and 6 x 6 padded by 1, 3 x 3 x 3 taps (a third of the depth
#: taps and 2 of 18 row and column taps read padding)
D, H, W, PAD, K = 2, 6, 6, 1, 3
#: output axis and extent of each padded dimension (its taps lie outside the register tile)
DIMS = (("v_i0", D), ("v_i1", H), ("v_i2", W))


def _space(all_guards: float | None = None):
    option = "" if all_guards is None else f" -all-guards={all_guards}"
    compute = ops.c3d(1, D, H, W, 32, 32, K, K, K, pad=PAD, dtype="int8")
    return generate_space(compute, "llvm -num-cores=2" + option)


def _column(ex, points):
    names = ex.featurizer.names
    return ex.features(points)[:, names.index("Y.padding.skipped")]


def _reference_share(point: dict, place: str) -> float:
    """Share of the stage's body instances that run: per padded dimension, the (output, tap)
    pairs whose register tile (outer guards: ``S2`` rows; all guards: the pair alone) reads
    some element inside the source."""
    share = 1.0
    for out, extent in DIMS:
        tile = point[f"Y.{out}.S2"] if place == "outer" else 1
        runs = 0
        for o, r in itertools.product(range(extent), range(K)):
            first = o - o % tile
            rows = range(first, first + tile)
            runs += any(PAD <= row + r < extent + PAD for row in rows)
        share *= runs / (extent * K)
    return share


def test_the_feature_counts_what_outer_guards_skip() -> None:
    """On 64 random programs of the space, ``2 ** -padding.skipped`` equals the reference
    share, which spans tiles holding the whole depth (no depth tap skipped) and none of it."""
    _, ex = search_for(_space(), "random", seed=0)
    points = ex.sampler.sample(64)
    got = 2.0 ** -_column(ex, points)
    want = np.array([_reference_share(p, "outer") for p in points])
    np.testing.assert_allclose(got, want, rtol=1e-9)
    exact = (2 / 3) * (16 / 18) ** 2  # every padding tap skipped
    assert want.min() == pytest.approx(exact) and want.max() > exact
    deep = [p["Y.v_i0.S2"] == D for p in points]  # the whole depth in the register tile
    # no depth tap skipped there: at most the rows' and columns' padding
    assert any(deep) and all(
        s >= (16 / 18) ** 2 - 1e-12 for s, d in zip(want, deep, strict=True) if d
    )


def test_all_guards_skip_every_padding_tap() -> None:
    """With ``all`` guards on a finish knob (``-all-guards=0``) the share is the exact one,
    whatever the tile; with ``outer`` it is the relaxed one of the same program."""
    space = _space(all_guards=0.0)
    _, ex = search_for(space, "random", seed=1)
    points = ex.sampler.sample(24)
    exact = (2 / 3) * (16 / 18) ** 2
    for place, value in (("outer", 0), ("all", 1)):
        chosen = [{**p, "Y.skip_padding": value} for p in points]
        got = 2.0 ** -_column(ex, chosen)
        want = [_reference_share(p, place) for p in chosen]
        np.testing.assert_allclose(got, want, rtol=1e-9)
        if place == "all":
            np.testing.assert_allclose(got, exact, rtol=1e-9)


def test_no_feature_without_padding() -> None:
    """A GEMM and an unpadded convolution read no padding: no column, generic value 0."""
    for compute in (ops.gemm(64, 64, 64, dtype="int8"), ops.c2d(1, 8, 8, 32, 32, 3, 3, pad=0)):
        _, ex = search_for(generate_space(compute, "llvm -num-cores=2"), "random", seed=0)
        assert not any(n.endswith("padding.skipped") for n in ex.featurizer.names)
        x = ex.features(ex.sampler.sample(4))
        assert "padding.skipped" not in generic_features(ex.featurizer.names, x)


def test_the_prior_ranks_skipped_work_first() -> None:
    """The DL Boost prior weighs the feature ln 2 per halving of the work (the one of
    ``vpmaddwd`` spaces, on a CPU without VNNI, fitted it: about as much); of the 64 programs,
    the space's prior's top quarter skips more of the padding on average than the bottom
    quarter."""
    assert "padding.skipped" in GENERIC_FEATURES
    space = _space()
    assert space.target.prior().weights["padding.skipped"] == pytest.approx(np.log(2))
    assert PADDING_SKIPPED_WEIGHT == pytest.approx(np.log(2))
    prior = space.target.prior_for(space)  # what a tune of this space ranks by
    assert prior.weights["padding.skipped"] == pytest.approx(np.log(2), rel=0.1)
    _, ex = search_for(space, "random", seed=2)
    points = ex.sampler.sample(64)
    x = ex.features(points)
    order = np.argsort(-prior.score(ex.featurizer.names, x))
    skipped = x[:, ex.featurizer.names.index("Y.padding.skipped")]
    assert skipped[order[:16]].mean() > skipped[order[-16:]].mean()
