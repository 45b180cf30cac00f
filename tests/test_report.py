"""report.md rendering and the bound plot, from a hand-made selection report."""

from __future__ import annotations

import json

import pytest

from vmi_spark.report import plot_bounds, render_markdown, restart_steps

REPORT = {
    "method": "vmi_naive",
    "label": "y",
    "features": ["x1", "x2", "x3", "x4", "a|b"],
    "selected": ["x1", "x2", "x3", "a|b"],
    "selected_indices": [0, 1, 2, 4],
    "scores": [0.693147, 0.9, 1.05, 0.25],
    "gains": [0.693147, 0.206853, 0.15, 0.25],
    "blocks": [0, 0, 0, 1],
    "restarts": 1,
    "stopped_early": None,
    "num_rows": 5000,
    "rows_dropped": 12,
    "rows_skipped": 0,
    "num_classes": 2,
    "classes": ["0.0", "1.0"],
    "step_seconds": [0.5, 1.25, 1.0, 0.75],
    "prepare_seconds": 2.5,
    "total_seconds": 6.0,
    "parameters": {"method": "vmi_naive", "num_features": 4, "restart_tolerance": 0.01,
                   "num_bins": 10, "max_categories": 32, "max_classes": 1000,
                   "handle_invalid": "keep"},
    "warnings": ["dropped 12 rows with a null label"],
    "columns": [{"name": n, "kind": "category", "states": 2, "missing_state": False}
                for n in ["x1", "x2", "x3", "x4"]]
    + [{"name": "a|b", "kind": "bins", "states": 11, "missing_state": True}],
    "input": "db.table",
    "format": None,
}


def test_restart_steps():
    assert restart_steps(REPORT) == [3]
    assert restart_steps({"blocks": [0, 1, 1, 2]}) == [1, 3]
    assert restart_steps({}) == []


def test_markdown_content():
    md = render_markdown(REPORT)
    lines = md.splitlines()
    assert lines[0] == "# VMI feature selection: vmi_naive"
    assert md.endswith("\n") and not md.endswith("\n\n")
    assert "- **Input:** `db.table`" in lines
    assert "- **Label:** `y`" in lines
    assert "- **Selected:** 4 of 5 candidate features" in lines
    assert "- **Restarts:** 1" in lines
    assert ("| step | feature | index | bound I_LB (nats) | gain (nats) | block | seconds |"
            in lines)
    assert "| 1 | x1 | 0 | 0.693147 | 0.693147 | 0 | 0.50 |" in lines
    assert "| 3 | x3 | 2 | 1.050000 | 0.150000 | 0 | 1.00 |" in lines
    # the restart is marked, and the pipe in the name is escaped
    assert "| 4 | a\\|b | 4 | 0.250000 | 0.250000 | 1 (restart) | 0.75 |" in lines
    assert sum("(restart)" in ln for ln in lines) == 1
    # data summary
    assert "| rows used | 5,000 |" in lines
    assert "| rows dropped (null label) | 12 |" in lines
    assert "| rows skipped (missing feature values) | 0 |" in lines
    assert "| classes | 2 |" in lines
    assert "| feature coding | 1 bins, 4 category |" in lines
    assert "| features with a missing state | 1 |" in lines
    assert "Classes: `0.0`, `1.0`." in lines
    # parameters and timings
    assert "| restart_tolerance | 0.01 |" in lines
    assert "| handle_invalid | keep |" in lines
    assert "| prepare (read, plan, encode) | 2.50 s |" in lines
    assert "| selection (4 steps) | 3.50 s |" in lines
    assert "| total | 6.00 s |" in lines
    assert "- dropped 12 rows with a null label" in lines
    order = [md.index(h) for h in ("## Selection", "## Data", "## Parameters", "## Timings",
                                   "## Warnings")]
    assert order == sorted(order)


def test_markdown_json_roundtrip_and_minimal():
    md = render_markdown(json.loads(json.dumps(REPORT)))
    assert md == render_markdown(REPORT)
    minimal = {"method": "mrmr", "selected": [], "scores": [], "gains": [], "blocks": [],
               "stopped_early": "no features left to select"}
    md = render_markdown(minimal)
    assert "No feature was selected." in md
    assert "- **Stopped early:** no features left to select" in md
    assert "Restarts" not in md  # classic criteria have no blocks
    md = render_markdown({"method": "mim", "selected": ["a"], "scores": [0.1],
                          "gains": [0.1], "blocks": [0]})
    assert "| step | feature | score | gain | block |" in md
    assert "| 1 | a | 0.100000 | 0.100000 | 0 |" in md


def test_plot_bounds(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bounds.png"
    fig = plot_bounds(REPORT, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    ax = fig.axes[0]
    assert len(ax.lines) == 3  # two blocks, one restart marker
    assert ax.get_legend() is not None
    # no path: only the figure
    assert plot_bounds({"method": "vmi_naive", "selected": [], "scores": [], "blocks": []}) \
        is not None


def test_plot_bounds_without_matplotlib(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"vmi_spark\[plots\]"):
        plot_bounds(REPORT, "unused.png")
