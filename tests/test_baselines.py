"""The timing loop every baseline and the fair table's harness share
(:func:`heronlike.baselines.interleaved_samples`): samples taken in turn, medians per function."""

from __future__ import annotations

import time

import pytest

from heronlike import baselines
from heronlike.baselines import _median_time, interleaved_median_times, interleaved_samples


def _spin(seconds: float, calls: list[str], name: str):  # noqa: ANN202
    def fn() -> None:
        calls.append(name)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return fn


class _Clock:
    """A clock only the fake kernels advance, so the calibration's counts do not depend on how
    busy the machine is (a real 2 ms spin preempted for 3 ms changed them)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def _ticking(seconds: float, clock: _Clock, calls: list[str], name: str):  # noqa: ANN202
    def fn() -> None:
        calls.append(name)
        clock.now += seconds

    return fn


def test_samples_are_taken_in_turn_with_the_order_rotated(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, calls = _Clock(), []
    monkeypatch.setattr(baselines, "time", clock)
    fns = [_ticking(0.002, clock, calls, "a"), _ticking(0.006, clock, calls, "b")]
    samples = baselines.interleaved_samples(fns, repeat=4, min_sample_s=0.005)
    assert samples == [pytest.approx([0.002] * 4), pytest.approx([0.006] * 4)]
    # set-up: 3 warm-up calls, then 1 + 4 calls (a: 2 ms < 5 ms, 8 ms >= 5), b: 3 + 1
    assert calls[:8] == ["a"] * 8 and calls[8:12] == ["b"] * 4
    # then per sample one untimed call and the timed ones, a and b in turn, rotated each time
    runs, rest = [], calls[12:]
    while rest:
        n = 5 if rest[0] == "a" else 2
        assert rest[:n] == [rest[0]] * n
        runs.append(rest[0])
        rest = rest[n:]
    assert runs == ["a", "b", "b", "a", "a", "b", "b", "a"]


def test_before_turn_runs_once_ahead_of_each_turn_untimed(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, calls = _Clock(), []
    monkeypatch.setattr(baselines, "time", clock)
    fns = [_ticking(0.002, clock, calls, "a"), _ticking(0.006, clock, calls, "b")]
    probe = _ticking(0.5, clock, calls, "probe")  # slow, yet in no sample
    samples = baselines.interleaved_samples(fns, repeat=3, min_sample_s=0.005, before_turn=probe)
    assert samples == [pytest.approx([0.002] * 3), pytest.approx([0.006] * 3)]
    assert "probe" not in calls[:12]  # not during the set-up
    turns = "".join("|" if c == "probe" else c for c in calls[12:]).split("|")
    assert turns[0] == "" and len(turns) == 4  # one probe before each of the 3 turns
    assert [t[0] for t in turns[1:]] == ["a", "b", "a"]  # each turn's first, rotated
    assert all(set(t) == {"a", "b"} for t in turns[1:])


def test_samples_read_real_time() -> None:
    calls: list[str] = []
    fns = [_spin(0.002, calls, "a"), _spin(0.006, calls, "b")]
    a, b = interleaved_median_times(fns, repeat=5, min_sample_s=0.005)
    assert 0.002 <= a and 0.006 <= b
    assert 2.0 < b / a < 4.0  # b spins three times as long per call


def test_medians_and_the_one_function_case() -> None:
    calls: list[str] = []
    (median,) = interleaved_median_times([_spin(0.001, calls, "a")], repeat=3, min_sample_s=0.002)
    assert 0.0009 < median < 0.003
    assert 0.0009 < _median_time(_spin(0.001, calls, "a"), 3) < 0.003
    with pytest.raises(ValueError, match="repeat"):
        interleaved_samples([_spin(0.001, calls, "a")], repeat=0)
