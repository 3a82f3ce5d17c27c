"""The statistics the benchmark verdicts rest on (benchmarks/benchlib.py): a verdict is "met"
only when the goal holds across every run, "within noise" when the spread straddles it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "benchlib", Path(__file__).resolve().parents[2] / "benchmarks" / "benchlib.py"
)
benchlib = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(benchlib)


def test_spread_summarises_every_number_leaf_by_leaf():
    runs = [
        {"a": {"ms": 10.0, "n": 3}, "ok": True, "label": "x", "pair": [1, 2]},
        {"a": {"ms": 14.0, "n": 3}, "ok": True, "label": "y", "pair": [1, 2]},
        {"a": {"ms": 11.0, "n": 3}, "ok": False, "label": "z", "pair": [1, 2]},
    ]
    out = benchlib.spread(runs)
    assert out["a"]["ms"] == {"median": 11.0, "min": 10.0, "max": 14.0, "n": 3}
    assert out["a"]["n"]["median"] == 3
    assert out["ok"] is False  # a flag holds only if it held in every run
    assert out["label"] == "x"
    assert out["pair"] == [1, 2]


@pytest.mark.parametrize(
    ("values", "goal", "verdict"),
    [
        ([1.2, 1.3, 1.4], 1.5, "met"),
        ([1.4, 1.48, 1.6], 1.5, "within noise"),  # one run over the goal: not "met"
        ([1.6, 1.8, 2.0], 1.5, "missed by 20%"),
        ([1.4], 1.5, "one run: no verdict"),
    ],
)
def test_judge_takes_the_whole_spread(values, goal, verdict):
    figure = benchlib.spread([{"v": v} for v in values])["v"]
    assert benchlib.judge(figure, goal) == verdict


def test_judge_without_a_figure_is_na():
    assert benchlib.judge(None, 1.0) == "n/a"
