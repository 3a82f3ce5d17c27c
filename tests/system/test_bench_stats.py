"""The statistics the benchmark verdicts rest on (benchmarks/benchlib.py): a verdict is "met"
only when the goal holds across every run, "within noise" when the spread straddles it."""

from __future__ import annotations

import importlib.util
import json
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


def _load(name: str):
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_shows_the_committed_full_run(monkeypatch):
    """The README's benchmark table is results/latest.json's, and that file is a full run: every
    section, every figure repeated at least 5 times, the rollout at 10, 25 and 50 hosts."""
    readme_table = _load("readme_table")
    report = json.loads(readme_table.LATEST.read_text())
    assert readme_table.section(report) in readme_table.README.read_text(), (
        "README's benchmark section differs from results/latest.json: "
        "run python benchmarks/readme_table.py --write"
    )
    args = report["args"]
    assert args["repeats"] >= 5 and not args["smoke"]
    assert args["hosts"] == [10, 25, 50]
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    sections = set(_load("run").SECTIONS)
    assert set(args["only"].split(",")) == sections == set(report["results"])
    assert not [name for name, result in report["results"].items() if "error" in result]


def test_linear_fit_reads_off_fixed_cost_and_cost_per_host():
    fixed, per_host = benchlib.linear_fit([(10, 25.0), (25, 47.5), (50, 85.0)])
    assert (round(fixed, 6), round(per_host, 6)) == (10.0, 1.5)
    with pytest.raises(ValueError, match="two different host counts"):
        benchlib.linear_fit([(10, 25.0), (10, 26.0)])


def test_growth_rows_read_a_200_host_rollout_off_the_measured_sizes(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    run = _load("run")

    def size(first, no_op):
        return {"first_converge": {"seconds": first}, "no_op": {"no_op_s": {"median": no_op}}}

    sizes = {"10": size(25.0, 12.0), "25": size(47.5, 15.0), "50": size(85.0, 20.0)}
    first, no_op = run.growth_rows(sizes)
    assert first[:3] == [
        "Rollout growth, first converge",
        "10.0 s + 1.50 s/host; 200 hosts ≈ 310 s",
        "least squares over 10, 25, 50 hosts",
    ]
    assert no_op[1] == "10.0 s + 0.20 s/host; 200 hosts ≈ 50 s"
    assert run.growth_rows({"10": size(25.0, 12.0)}) == []  # one size: no line to draw
