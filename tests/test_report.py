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
    assert ("| step | feature | index | bound I_LB (nats) | gain (nats) | block | ms |"
            in lines)
    assert "| 1 | x1 | 0 | 0.693147 | 0.693147 | 0 | 500 |" in lines
    assert "| 3 | x3 | 2 | 1.050000 | 0.150000 | 0 | 1000 |" in lines
    # the restart is marked, and the pipe in the name is escaped
    assert "| 4 | a\\|b | 4 | 0.250000 | 0.250000 | 1 (restart) | 750 |" in lines
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
    assert "| read, plan, encode and select | 6.00 s |" in lines
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


LONG = [f"customer_{i:02d}_" + "lifetime_value_rolling_window_" * 2 for i in range(30)]


def test_plot_bounds_long_names_stay_inside_the_figure(tmp_path):
    """60-character names: every step is labelled, shortened in the middle, and the labels
    are drawn inside the image (a horizontal layout; report.md keeps the full names)."""
    pytest.importorskip("matplotlib")
    names = [n[:60] for n in LONG]
    assert all(len(n) == 60 for n in names) and len(set(names)) == 30
    report = {"method": "vmi_naive", "label": "y", "selected": names,
              "scores": [0.01 * i for i in range(1, 31)], "blocks": [0] * 20 + [1] * 10}
    fig = plot_bounds(report, tmp_path / "long.png")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 30
    for step, (text, name) in enumerate(zip(labels, names), 1):
        prefix, short = text.split(". ", 1)
        assert int(prefix) == step and len(short) == 36
        assert short.startswith(name[:18]) and short.endswith(name[-17:]) and "\u2026" in short
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    for t in ax.get_yticklabels():
        box = t.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height
    # the restart between steps 20 and 21 is a horizontal line at 20.5
    restart = [ln for ln in ax.lines if list(ln.get_ydata()) == [20.5, 20.5]]
    assert len(restart) == 1


def test_short_name():
    from vmi_spark.report import short_name

    assert short_name("abc", 5) == "abc"
    assert short_name("abcdefghij", 5) == "ab\u2026ij"
    assert len(short_name("x" * 100)) == 36


def test_step_rows_and_csv(tmp_path):
    import csv

    from vmi_spark.report import STEP_COLUMNS, step_rows, write_steps_csv

    rows = step_rows(REPORT)
    assert rows == [(1, "x1", 0, 0.693147, 0.693147, 0), (2, "x2", 1, 0.9, 0.206853, 0),
                    (3, "x3", 2, 1.05, 0.15, 0), (4, "a|b", 4, 0.25, 0.25, 1)]
    path = tmp_path / "steps.csv"
    write_steps_csv({**REPORT, "selected": ["x1", "x2", "x3", 'a,"b']}, path)
    with open(path, newline="", encoding="utf-8") as fh:
        read = list(csv.reader(fh))
    assert tuple(read[0]) == STEP_COLUMNS
    assert read[4] == ["4", 'a,"b', "4", "0.25", "0.25", "1"]
    assert [float(r[3]) for r in read[1:]] == REPORT["scores"]


def test_markdown_candidates():
    cands = [[{"feature": "x1", "index": 0, "score": 0.693147},
              {"feature": "a|b", "index": 4, "score": 0.5}],
             [{"feature": "x2", "index": 1, "score": 0.9}, {"feature": "x4", "index": 3,
                                                            "score": 0.8}]]
    md = render_markdown({**REPORT, "candidates": cands})
    lines = md.splitlines()
    assert "## Candidates" in lines
    assert "The best 2 candidates at each step, best first, scored by the bound of the block " \
           "they would give (nats)." in lines
    assert "| 1 | 2 | a\\|b | 4 | 0.500000 |" in lines
    assert "| 2 | 1 | x2 | 1 | 0.900000 |" in lines
    assert md.index("## Selection") < md.index("## Candidates") < md.index("## Data")
    assert "## Candidates" not in render_markdown(REPORT)
