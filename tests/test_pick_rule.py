"""The finalist-pick rules of benchmarks/pick_rule.py, and that its first is heronlike's."""

from __future__ import annotations

from benchmarks.pick_rule import RULES, picks
from heronlike.measure.measurer import FinalMeasurement
from heronlike.session import _selection_latency


def test_one_slow_round_loses_the_median_rule_the_pick_but_not_the_minimum() -> None:
    # finalist 0 is 4 % faster, but its first round fell in a slow spell of the machine
    rounds = [(0.1414, 0.0716, 0.0722, 0.0737), (0.0746, 0.0795, 0.0764, 0.0779)]
    assert picks(rounds) == {"min_first_half": 0, "median_first_half": 1}
    # ties go to the earlier finalist, as in the finish
    assert picks([(1.0, 2.0), (1.0, 0.5)]) == {"min_first_half": 0, "median_first_half": 0}


def test_the_benchmarks_minimum_rule_is_the_finish_s() -> None:
    for rounds in [(0.1414, 0.0716, 0.0722, 0.0737), (3.0, 2.0, 1.0, 5.0), (2.0, 1.0)]:
        final = FinalMeasurement(1.0, True, None, None, rounds)
        assert _selection_latency(final) == RULES["min_first_half"](rounds)
