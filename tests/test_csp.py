"""Plain-Python semantics of heronlike.csp: constraint checks, texts, CSP building rules."""

from __future__ import annotations

import pytest

from heronlike.csp import CSP, Eq, In, Le, Prod, Select, Sum, Var


def test_var_text() -> None:
    assert str(Var("m0", 1, 64, knob=True, doc="outer M")) == "knob m0 in [1, 64]  # outer M"
    assert str(Var("t", 0, 9)) == "var t in [0, 9]"


@pytest.mark.parametrize(
    ("constraint", "good", "bad", "text"),
    [
        (Prod(12, ("x", "y", 2)), {"x": 3, "y": 2}, {"x": 2, "y": 2}, "PROD 12 == x * y * 2"),
        (Prod("t", ("x",)), {"t": 5, "x": 5}, {"t": 5, "x": 4}, "PROD t == x"),
        (
            Sum("t", ("x", "y", 4), (2, -1, 1)),
            {"t": 7, "x": 3, "y": 3},
            {"t": 7, "x": 3, "y": 2},
            "SUM t == 2*x + -1*y + 4",
        ),
        (Sum(5, ("x", "y")), {"x": 2, "y": 3}, {"x": 2, "y": 2}, "SUM 5 == x + y"),
        (Eq("x", 16), {"x": 16}, {"x": 15}, "EQ x == 16"),
        (Eq("x", "y"), {"x": 2, "y": 2}, {"x": 2, "y": 3}, "EQ x == y"),
        (Le("x", 28), {"x": 28}, {"x": 29}, "LE x <= 28"),
        (Le(2, "x"), {"x": 2}, {"x": 1}, "LE 2 <= x"),
        (In("x", (1, 2, 4)), {"x": 4}, {"x": 3}, "IN x in {1, 2, 4}"),
        (
            Select("t", "i", ("x", 7)),
            {"t": 7, "i": 1, "x": 0},
            {"t": 7, "i": 0, "x": 0},
            "SELECT t == [x, 7][i]",
        ),
    ],
)
def test_constraint_holds_and_text(constraint, good, bad, text) -> None:
    assert constraint.holds(good)
    assert not constraint.holds(bad)
    assert str(constraint) == text


def test_select_index_out_of_range_fails() -> None:
    c = Select("t", "i", ("x", 7))
    assert not c.holds({"t": 7, "i": 2, "x": 7})
    assert not c.holds({"t": 7, "i": -1, "x": 7})


def _small() -> CSP:
    csp = CSP()
    x = csp.var("x", 1, 8, knob=True)
    csp.var("t", 1, 64)
    y = csp.var("y", 1, 8, knob=True)
    csp.add(Prod("t", (x, y)))
    csp.add(Le("t", 16))
    return csp


def test_violations_lists_ranges_and_constraints() -> None:
    csp = _small()
    assert csp.violations({"x": 2, "y": 8, "t": 16}) == []
    assert csp.violations({"x": 4, "y": 8, "t": 32}) == ["LE t <= 16"]
    assert csp.violations({"x": 9, "y": 1, "t": 9}) == ["knob x in [1, 8]"]
    with pytest.raises(KeyError):
        csp.violations({"x": 1, "y": 1})


def test_knobs_in_creation_order_and_candidates() -> None:
    csp = _small()
    assert csp.knobs == ["x", "y"]
    assert list(csp.vars) == ["x", "t", "y"]
    assert csp.candidates("x") == tuple(range(1, 9))
    csp.add(In("x", (1, 2, 4, 8, 16)))
    csp.add(In("x", (2, 4, 16, 3)))
    assert csp.candidates("x") == (2, 4)


def test_duplicate_or_empty_var_raises() -> None:
    csp = _small()
    with pytest.raises(ValueError, match="duplicate"):
        csp.var("x", 1, 2)
    with pytest.raises(ValueError, match="empty range"):
        csp.var("z", 3, 2)


def test_unknown_variable_raises() -> None:
    csp = _small()
    with pytest.raises(ValueError, match="unknown variable 'nope'"):
        csp.add(Le("nope", 3))
    with pytest.raises(ValueError, match="unknown variable"):
        csp.extend([In("nope", (1,))])
    assert len(csp.constraints) == 2


def test_extend_leaves_original_untouched() -> None:
    csp = _small()
    before = (dict(csp.vars), list(csp.constraints), str(csp))
    child = csp.extend([In("x", (1, 2)), Le("y", 3)])
    assert (dict(csp.vars), list(csp.constraints), str(csp)) == before
    assert child.constraints[:2] == csp.constraints
    assert child.constraints[2:] == [In("x", (1, 2)), Le("y", 3)]
    assert child.candidates("x") == (1, 2)
    child.var("extra", 0, 1)
    assert "extra" not in csp.vars


def test_finish_knobs_are_held_at_their_first_value_in_the_search_csp() -> None:
    """A finish knob is a knob of the CSP (records and programs name it), but the CSP the
    explorers search holds it at ``lo``: samples and candidates give only that value, and a
    point with another value stays valid in the full CSP."""
    from heronlike.sampler import RandSAT

    csp = _small()
    g = csp.var("g", 0, 1, knob=True, finish=True, doc="guards")
    assert csp.knobs == ["x", "y", "g"] and csp.finish_knobs == ["g"]
    assert str(csp.vars[g]) == "finish knob g in [0, 1]  # guards"
    search = csp.search()
    assert search.candidates(g) == (0,) and csp.candidates(g) == (0, 1)
    samples = RandSAT(search, seed=0).sample(20)
    assert samples and {a[g] for a in samples} == {0}
    assert csp.violations({**samples[0], g: 1}) == []
    assert search.violations({**samples[0], g: 1})
    # knobs without the finish knob (a record from before it existed) complete with its lo
    knobs = {k: samples[0][k] for k in ("x", "y")}
    assert csp.complete(knobs) == samples[0] and csp.complete({**knobs, g: 1})[g] == 1
    plain = _small()
    assert not plain.finish_knobs and plain.search() is plain  # nothing to hold
    with pytest.raises(ValueError, match="only a knob"):
        csp.var("h", 0, 1, finish=True)


def test_csp_text() -> None:
    text = str(_small()).splitlines()
    assert text[0] == "# CSP: 3 variables (2 knobs), 2 constraints"
    assert text[1:] == [
        "knob x in [1, 8]",
        "var t in [1, 64]",
        "knob y in [1, 8]",
        "PROD t == x * y",
        "LE t <= 16",
    ]


def test_derivation_computes_every_derived_variable() -> None:
    from heronlike.csp import CSP, Eq, Prod, Select, Sum, derive

    csp = CSP()
    for name in ("a", "b", "pos"):
        csp.var(name, 0 if name == "pos" else 1, 8, knob=True)
    csp.var("ab", 1, 64)
    csp.var("bytes", 0, 1000)
    csp.var("pick", 1, 64)
    csp.var("copy", 1, 64)
    csp.add(Prod("ab", ("a", "b")))
    csp.add(Sum("bytes", ("ab", 4), (4, 1)))
    csp.add(Select("pick", "pos", ("a", "ab")))
    csp.add(Eq("copy", "pick"))
    steps, complete = csp.derivation(csp.knobs)
    assert complete and [name for name, _ in steps] == ["ab", "bytes", "pick", "copy"]
    a = {"a": 3, "b": 5, "pos": 1}
    for name, c in steps:
        a[name] = derive(c, name, a)
    assert a == {"a": 3, "b": 5, "pos": 1, "ab": 15, "bytes": 64, "pick": 15, "copy": 15}
    assert csp.violations(a) == []
    _, partial = csp.derivation(["a"])
    assert not partial
    # complete(): the same assignment from the knobs alone; None when a knob is missing or the
    # derived values break a constraint (a record of a space whose limits have since changed)
    assert csp.complete({"a": 3, "b": 5, "pos": 1}) == a
    assert csp.complete({"a": 3, "b": 5}) is None
    csp.add(Le("bytes", 40))
    assert csp.complete({"a": 3, "b": 5, "pos": 1}) is None
    assert csp.complete({"a": 3, "b": 2, "pos": 1}, steps)["bytes"] == 28
