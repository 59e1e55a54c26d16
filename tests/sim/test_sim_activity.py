"""The engine's own activity stamps: busy spans, idle gaps, first and last completion."""

from __future__ import annotations

import pytest

from narwhal_sim.engine._activity import Activity


def test_busy_time_is_the_union_of_held_requests_and_gaps_lie_between() -> None:
    activity = Activity()
    activity.begin(10.0)
    activity.begin(10.5)  # overlapping: still one busy span
    activity.end(11.0)
    activity.end(12.0)
    activity.begin(12.25)
    assert activity.summary(12.75)["engine_busy_s"] == pytest.approx(2.0 + 0.5)
    activity.end(13.0)
    summary = activity.summary(20.0)
    assert summary["engine_busy_s"] == pytest.approx(2.75)
    assert (summary["completions_first_s"], summary["completions_last_s"]) == (10.0, 13.0)
    assert summary["idle_gap_max_s"] == pytest.approx(0.25)
    assert activity.gap_list() == [[12.0, 0.25]]


def test_an_idle_engine_has_no_stamps() -> None:
    summary = Activity().summary(5.0)
    assert summary == {
        "engine_busy_s": 0.0,
        "completions_first_s": None,
        "completions_last_s": None,
        "idle_gap_max_s": None,
    }
