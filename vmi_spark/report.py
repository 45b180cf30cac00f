"""Human-readable views of a selection report (the job's ``selection.json`` dict).

:func:`render_markdown` turns the report into a ``report.md``; :func:`plot_bounds`
draws the bound per step, with the restarts marked, as a PNG (needs matplotlib:
``pip install "vmi_spark[plots]"``). Both take the dict the job writes (also
``VMISelectorModel.report`` and ``VMIFeatureSelector.report()``); fields that are
absent are left out of the output.
"""

from __future__ import annotations

import math
import os
from typing import Any

from .core.report_schema import SelectionReport
from .params import is_vmi as _is_vmi

__all__ = ["render_markdown", "plot_bounds", "plot_stability", "restart_steps", "step_rows",
           "write_steps_csv", "STEP_COLUMNS", "short_name"]

#: most class names listed in the data summary
_MAX_CLASSES_LISTED = 20
#: state names listed per column in the states section
_MAX_STATES_LISTED = 40
#: columns of the per-step table: ``VMISelectorModel.stepsDF`` and the job's ``steps.csv``
STEP_COLUMNS = ("step", "feature", "index", "score", "gain", "block")
#: longest feature name drawn on the plot (longer ones are shortened in the middle)
_MAX_LABEL = 36
#: most steps labelled on the plot's axis, and its greatest height (inches)
_MAX_TICKS, _MAX_HEIGHT = 80, 24.0
#: most features listed in the stability section (by frequency) and drawn on its plot
_MAX_STABLE = 40
#: most names listed in each list of the changes section
_MAX_CHANGES = 50


def _cell(value: Any) -> str:
    """A value as the text of a Markdown table cell (pipes escaped, one line)."""
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _num(value: Any, digits: int = 6) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _cell(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def _seconds(value: Any) -> str:
    if value is None:
        return ""
    return f"{float(value):.2f} s"


def _ms(value: Any) -> str:
    """Milliseconds with three significant digits (a step takes from microseconds on)."""
    ms = 1000.0 * float(value)
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def restart_steps(report: SelectionReport) -> list[int]:
    """0-based steps whose feature starts a new block after a restart."""
    blocks = list(report.get("blocks") or [])
    return [i for i in range(1, len(blocks)) if blocks[i] != blocks[i - 1]]


def step_rows(report: SelectionReport) -> list[tuple[int, str, int | None, float, float, int]]:
    """The selection as rows of :data:`STEP_COLUMNS`, one per step, in selection order.

    ``step`` counts from 1; ``index`` is the feature's position among the candidate
    features (None if the report has no ``selected_indices``); ``score`` is the bound
    of the block after the step for the VMI methods and the criterion's value for the
    others; ``gain`` is what the step added; ``block`` is 0, +1 at each restart.
    """
    selected = list(report.get("selected") or [])
    indices = list(report.get("selected_indices") or [])
    scores = list(report.get("scores") or [])
    gains = list(report.get("gains") or [])
    blocks = list(report.get("blocks") or [])
    return [(i + 1, str(name), int(indices[i]) if i < len(indices) else None,
             float(scores[i]), float(gains[i]), int(blocks[i]))
            for i, name in enumerate(selected)]


def write_steps_csv(report: SelectionReport, path: str | os.PathLike[str]) -> None:
    """Write :func:`step_rows` as CSV with a header row (floats at full precision)."""
    import csv

    with open(path, "w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(STEP_COLUMNS)
        for row in step_rows(report):
            out.writerow(["" if v is None else repr(v) if isinstance(v, float) else v
                          for v in row])


def short_name(name: str, width: int = _MAX_LABEL) -> str:
    """``name`` shortened to ``width`` characters by an ellipsis in the middle.

    Examples
    --------
    >>> short_name("customer_lifetime_value_rolling_90_days_eur", 20)
    'customer_l…_days_eur'
    """
    if len(name) <= width:
        return name
    head = width // 2
    return name[:head] + "\u2026" + name[len(name) - (width - 1 - head):]


def _candidates_section(report: SelectionReport) -> list[str]:
    """The best candidates per step (``--report-candidates``), as a Markdown table."""
    steps = report.get("candidates") or []
    if not steps:
        return []
    is_vmi = _is_vmi(report.get("method", ""))
    lines = ["## Candidates", "",
             f"The best {max(len(c) for c in steps)} candidates at each step, best first, "
             + ("scored by the bound of the block they would give (nats)." if is_vmi
                else "scored by the criterion."), "",
             "| step | rank | feature | index | score |", "|---:|---:|---|---:|---:|"]
    for step, cands in enumerate(steps, 1):
        for rank, c in enumerate(cands, 1):
            lines.append(f"| {step} | {rank} | {_cell(c.get('feature'))} | "
                         f"{_cell(c.get('index'))} | {_num(c.get('score'))} |")
    return lines + [""]


def _states_section(report: SelectionReport, selected: list[str]) -> list[str]:
    """The states of the selected columns: how each was coded (binning and spikes of a
    binned column, ``(other)`` of a grouped category column, a constant column) and its
    state names, in the column's own form (dates for a date column)."""
    columns = {c["name"]: c for c in report.get("columns") or [] if "name" in c}
    rows = [(name, columns[name]) for name in selected if name in columns]
    if not rows:
        return []
    out = ["## States of the selected columns", "",
           "| feature | coding | spikes | states |", "|---|---|---|---|"]
    for name, c in rows:
        kind = c.get("kind", "")
        coding = ("constant" if c.get("constant") else
                  f"bins ({c.get('binning', '')})" if kind == "bins" else
                  "category, most frequent values and (other)" if c.get("other") else kind)
        spikes = ", ".join(_num(v) for v in c.get("spikes") or []) if kind == "bins" else ""
        names = c.get("state_names") or []
        states = "; ".join(str(v) for v in names[:_MAX_STATES_LISTED]) + (
            f"; ... ({len(names)} states)" if len(names) > _MAX_STATES_LISTED else "")
        out.append(f"| {_cell(name)} | {_cell(coding)} | {_cell(spikes or '')} | "
                   f"{_cell(states)} |")
    return out + [""]


def render_markdown(report: SelectionReport) -> str:
    """Render a selection report as Markdown (the contents of a ``report.md``).

    Parameters
    ----------
    report : dict
        The job's ``selection.json`` as a dict: ``method``, ``label``,
        ``selected``, ``scores``, ``gains``, ``blocks`` and, when present,
        ``parameters``, ``num_rows``, ``rows_dropped``, ``rows_skipped``,
        ``num_classes``, ``classes``, ``features``, ``columns``, ``restarts``,
        ``stopped_early``, ``warnings``, ``step_seconds``, ``prepare_seconds``,
        ``total_seconds``, ``input``, ``format``, ``candidates`` (the best
        candidates per step, from ``--report-candidates``).

    Returns
    -------
    str
        Markdown with a summary, the table of steps (step, feature, bound,
        gain, block; restarts marked), the best candidates per step when
        reported, the data summary, the parameters and the timings, ending with
        a newline. Feature names are given in full.

    Examples
    --------
    >>> text = render_markdown({"method": "vmi_naive", "label": "y",
    ...                         "selected": ["x1", "x2", "x4"], "scores": [0.3, 0.5, 0.1],
    ...                         "gains": [0.3, 0.2, 0.1], "blocks": [0, 0, 1]})
    >>> print(text.splitlines()[0])
    # VMI feature selection: vmi_naive
    >>> "| 3 | x4 | 0.100000 | 0.100000 | 1 (restart) |" in text
    True
    """
    method = report.get("method", "?")
    is_vmi = _is_vmi(method)
    selected = list(report.get("selected") or [])
    lines: list[str] = [f"# VMI feature selection: {method}", ""]
    lines += _summary_section(report, selected, is_vmi)
    lines += _suspects_section(report)
    lines += _selection_section(report, selected, is_vmi)
    lines += _candidates_section(report)
    lines += _stability_section(report)
    lines += _changes_section(report)
    lines += _states_section(report, selected)
    lines += _data_section(report)
    lines += _sparse_section(report)
    lines += _table_section("Parameters", ["| parameter | value |", "|---|---|"],
                            [(_cell(k), _cell(v)) for k, v in
                             (report.get("parameters") or {}).items()])
    lines += _table_section("Timings", ["| | |", "|---|---:|"], _timings(report))
    notes = report.get("warnings") or []
    if notes:
        lines += ["## Warnings", ""] + [f"- {_cell(w)}" for w in notes] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _summary_section(report: SelectionReport, selected: list[str], is_vmi: bool) -> list[str]:
    """The input, label, how many were selected, restarts and why selection ended early."""
    summary = []
    if report.get("input"):
        fmt = f" ({report['format']})" if report.get("format") else ""
        summary.append(f"- **Input:** `{report['input']}`{fmt}")
    if report.get("label") is not None:
        summary.append(f"- **Label:** `{report['label']}`")
    n_features = len(report["features"]) if report.get("features") is not None else None
    of = f" of {n_features} candidate features" if n_features is not None else ""
    summary.append(f"- **Selected:** {len(selected)}{of}")
    if is_vmi:
        summary.append(f"- **Restarts:** {report.get('restarts', len(restart_steps(report)))}")
    if report.get("stopped_early"):
        summary.append(f"- **Stopped early:** {report['stopped_early']}")
    elif reason := report.get("stop_reason"):
        summary.append(f"- **Stopped:** {_STOPS.get(reason, reason)}")
    return summary + [""]


#: the summary's words for a selection that ran to its end
_STOPS = {"num_features": "K features selected", "no_features_left": "every feature selected",
          "callback": "stopped by the caller"}


def _suspects_section(report: SelectionReport) -> list[str]:
    """The suspect features found before the steps (leaks, identifiers), with the number
    behind each and whether ``dropSuspects`` left it out, and the selected features'
    copies."""
    suspects = report.get("suspects") or []
    copies = [f"- `{_cell(d['feature'])}` is the same column once coded as "
              + ", ".join(f"`{_cell(c)}`" for c in d["copies"]) + " (not selected)"
              for d in report.get("duplicates") or []]
    dup = ["## Duplicates", "", *copies, ""] if copies else []
    if not suspects:
        return dup
    lines = ["## Suspect features", "",
             "Found before the steps (docs/usage.md, *Suspect features*); leaks stay "
             "candidates unless `dropSuspects` is `all`.", "",
             "| feature | suspected | share | left out | why |", "|---|---|---:|---|---|"]
    for s in suspects:
        lines.append(f"| {_cell(s['feature'])} | {s['kind'].replace('_', ' ')} | "
                     f"{s['share']:.3f} | {'yes' if s.get('dropped') else 'no'} | "
                     f"{_cell(s['reason'])} |")
    return lines + [""] + dup


def _selection_section(report: SelectionReport, selected: list[str], is_vmi: bool) -> list[str]:
    """The table of steps (step, feature, index, score, gain, block, seconds), restarts
    marked and explained."""
    lines = ["## Selection", ""]
    if not selected:
        return lines + ["No feature was selected.", ""]
    scores = list(report.get("scores") or [])
    gains = list(report.get("gains") or [])
    blocks = list(report.get("blocks") or [])
    indices = list(report.get("selected_indices") or [])
    step_seconds = list(report.get("step_seconds") or [])
    restarts = set(restart_steps(report))
    head = ["step", "feature", "bound I_LB (nats)" if is_vmi else "score",
            "gain (nats)" if is_vmi else "gain", "block"]
    with_index = len(indices) == len(selected)
    with_time = len(step_seconds) == len(selected)
    if with_index:
        head.insert(2, "index")
    if with_time:
        head.append("ms")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join("---:" if h not in ("feature",) else "---" for h in head) + "|")
    for i, name in enumerate(selected):
        block = blocks[i] if i < len(blocks) else ""
        row = [str(i + 1), _cell(name)] + ([str(indices[i])] if with_index else [])
        row += [_num(scores[i]) if i < len(scores) else "",
                _num(gains[i]) if i < len(gains) else "",
                f"{block} (restart)" if i in restarts else str(block)]
        if with_time:
            row.append(_ms(step_seconds[i]))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    if restarts:
        lines += ["A restart means the best remaining feature raised the block's bound by no "
                  "more than the restart tolerance: the block was cleared and selection "
                  "continued from the empty set (the bound starts again from I(x; y)).", ""]
    return lines


def _data_section(report: SelectionReport) -> list[str]:
    """Rows used, dropped and skipped, classes, candidate features and their coding; the
    classes and a continuous label's bins."""
    data = []
    for key, title in (("num_rows", "rows used"),
                       ("rows_dropped", "rows dropped (null label)"),
                       ("rows_skipped", "rows skipped (missing feature values)"),
                       ("num_classes", "classes")):
        value = report.get(key)
        if value is not None:
            data.append((title, _num(value)))
    weights = report.get("weights")
    if isinstance(weights, dict):
        data.append((f"total weight (column `{_cell(weights.get('column'))}`)",
                     _num(weights.get("total"))))
        data.append(("rows of weight 0 (left out)", _num(weights.get("rows_zero_weight"))))
    if report.get("features") is not None:
        data.append(("candidate features", _num(len(report["features"]))))
    columns = report.get("columns") or []
    if columns:
        kinds: dict[str, int] = {}
        for c in columns:
            kinds[c.get("kind", "?")] = kinds.get(c.get("kind", "?"), 0) + 1
        data.append(("feature coding", ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))))
        with_missing = sum(1 for c in columns if c.get("missing_state"))
        if with_missing:
            data.append(("features with a missing state", _num(with_missing)))
    if not data:
        return []
    lines = _table_section("Data", ["| | |", "|---|---:|"], data)
    classes = report.get("classes")
    if classes:
        shown = ", ".join(f"`{_cell(c)}`" for c in classes[:_MAX_CLASSES_LISTED])
        more = (f" and {len(classes) - _MAX_CLASSES_LISTED} more"
                if len(classes) > _MAX_CLASSES_LISTED else "")
        lines += [f"Classes: {shown}{more}.", ""]
    lb = report.get("label_binning")
    if report.get("label_type") == "continuous" and lb:
        edges = ", ".join(_num(e) for e in lb.get("edges") or []) or "none"
        spikes = ", ".join(_num(v) for v in lb.get("spikes") or []) or "none"
        lines += [f"The label is continuous: {len(classes or [])} spike-aware "
                  f"equal-frequency classes, edges {edges}; spikes {spikes}.", ""]
    return lines


def _stability_section(report: SelectionReport) -> list[str]:
    """The stability runs: the index with its interval, and the features by frequency."""
    st = report.get("stability")
    if not isinstance(st, dict):
        return []
    runs, fraction = st.get("runs"), st.get("fraction")
    lines = ["## Stability", "",
             f"{runs} selections on random subsamples of {_num(fraction, 2)} of the rows "
             f"(seed {st.get('seed')})."]
    if st.get("index") is not None:
        ci = st.get("ci") or [None, None]
        lines.append(f"Stability index (Nogueira et al., JMLR 2018): **{_num(st['index'], 3)}**, "
                     f"95% confidence interval [{_num(ci[0], 3)}, {_num(ci[1], 3)}] (1: every "
                     "run selects the same features; about 0: no better than chance).")
    else:
        lines.append("The stability index is not defined here (every run selected no feature "
                     "or all of them).")
    lines += ["", "| feature | selected in | frequency | mean rank |", "|---|---:|---:|---:|"]
    shown = [f for f in st.get("features") or [] if f.get("selected_in")][:_MAX_STABLE]
    for f in shown:
        lines.append(f"| {_cell(f.get('feature'))} | {f.get('selected_in')} of {runs} | "
                     f"{_num(f.get('frequency'), 2)} | {_num(f.get('mean_rank'), 1)} |")
    rest = sum(1 for f in st.get("features") or [] if f.get("selected_in")) - len(shown)
    if rest > 0:
        lines.append(f"| ... {rest} more | | | |")
    return lines + [""]


def _changes_section(report: SelectionReport) -> list[str]:
    """What changed since ``--previous``: entered, left, rank moves, Jaccard, the input."""
    ch = report.get("changes")
    if not isinstance(ch, dict):
        return []
    lines = ["## Changes since the previous run", "", f"- **Previous:** `{_cell(ch.get('previous'))}`"]
    if not ch.get("compared"):
        return lines + [f"- Not compared: {_cell(ch.get('reason'))}", ""]

    def names(key: str) -> str:
        got = list(ch.get(key) or [])
        more = f" and {len(got) - _MAX_CHANGES} more" if len(got) > _MAX_CHANGES else ""
        return ", ".join(f"`{_cell(n)}`" for n in got[:_MAX_CHANGES]) + more if got else "none"

    lines += [f"- **Selected set changed:** {'yes' if ch.get('selected_changed') else 'no'} "
              f"(Jaccard index {_num(ch.get('jaccard'), 3)})",
              f"- **Entered:** {names('entered')}",
              f"- **Left:** {names('left')}"]
    moves = [m for m in ch.get("rank_moves") or [] if m.get("move")]
    if moves:
        shown = "; ".join(f"`{_cell(m['feature'])}` {m['previous_rank']} -> {m['rank']}"
                          for m in moves[:_MAX_CHANGES])
        lines.append(f"- **Rank moves:** {shown}")
    schema = ch.get("schema_changed")
    if schema is not None:
        parts = [f"added {names('columns_added')}", f"removed {names('columns_removed')}"]
        retyped = ch.get("columns_retyped") or []
        if retyped:
            parts.append("retyped " + ", ".join(
                f"`{_cell(r['name'])}` {r['previous_type']} -> {r['type']}"
                for r in retyped[:_MAX_CHANGES]))
        lines.append(f"- **Input schema changed:** {'yes' if schema else 'no'}"
                     + (f" ({'; '.join(parts)})" if schema else ""))
    if ch.get("rows_changed") is not None:
        lines.append(f"- **Input rows:** {_num(ch.get('previous_rows'))} -> {_num(ch.get('rows'))}"
                     f"{' (changed)' if ch['rows_changed'] else ''}")
    for note in ch.get("notes") or []:
        lines.append(f"- {_cell(note)}")
    return lines + [""]


def _sparse_section(report: SelectionReport) -> list[str]:
    """A wide sparse vector read from its non-zeros: its size, and the plan's estimate of
    memory and time before reading and after the first pass (docs/usage.md, *Wide sparse
    vectors*)."""
    info = report.get("sparse")
    if not isinstance(info, dict):
        return []
    rows = [("elements", _num(info.get("elements"))),
            ("non-zero values", _num(info.get("non_zero_values"))),
            ("states A (most of an element)", _num(info.get("states")))]
    if info.get("screened_elements") is not None:
        rows.append((f"screened elements (by {info.get('screened_by')})",
                     _num(info["screened_elements"])))
    checked = info.get("suspects")
    if isinstance(checked, dict):
        rows.append(("suspects checked", f"{', '.join(checked.get('kinds', []))} over "
                     f"{str(checked.get('over', '')).split(' (')[0]}"))
    est = info.get("estimate") or {}
    for key, when in (("before_reading", "before reading"),
                      ("after_first_pass", "after the first pass")):
        e = est.get(key)
        if not isinstance(e, dict):
            continue
        src = f", from {e['from']}" if e.get("from") else ""
        rows.append((f"estimate {when}{src}: rows, non-zeros, A, L",
                     f"{_num(e['rows'])}, {_num(e['non_zeros'])}, {e['states']}, "
                     f"{e['classes']}"))
        rows += [(f"estimate {when}: bytes in the driver's Python", _num(e["driver_bytes"])),
                 (f"estimate {when}: bytes of task results a job", _num(e["result_bytes"])),
                 (f"estimate {when}: bytes a Python worker", _num(e["task_bytes"])),
                 (f"estimate {when}: bytes cached", _num(e["chunk_bytes"])),
                 (f"estimate {when}: seconds reading, steps",
                  f"{e['read_seconds']:.1f}, {e['step_seconds']:.1f}")]
    return _table_section("Sparse input", ["| | |", "|---|---:|"], rows)


def _timings(report: SelectionReport) -> list[tuple[str, str]]:
    """(what, seconds) of the preparation, the selection's steps and the whole run."""
    step_seconds = list(report.get("step_seconds") or [])
    timing = []
    if report.get("prepare_seconds") is not None:
        timing.append(("prepare (read, plan, encode)", _seconds(report["prepare_seconds"])))
    if step_seconds:
        timing.append((f"selection ({len(step_seconds)} steps)", _seconds(sum(step_seconds))))
    st = report.get("stability")
    if isinstance(st, dict) and st.get("run_seconds"):
        timing.append((f"stability ({st.get('runs')} runs)", _seconds(sum(st["run_seconds"]))))
    if report.get("total_seconds") is not None:
        timing.append(("read, plan, encode and select", _seconds(report["total_seconds"])))
    if report.get("job_seconds") is not None:
        timing.append(("job, start to end (Spark's start included)",
                       _seconds(report["job_seconds"])))
    return timing


def _table_section(title: str, head: list[str], rows: list[tuple[str, str]]) -> list[str]:
    """A titled two-column Markdown table, or nothing without rows."""
    if not rows:
        return []
    return [f"## {title}", ""] + head + [f"| {a} | {b} |" for a, b in rows] + [""]


def plot_bounds(report: SelectionReport, path: str | os.PathLike[str] | None = None,
                *, title: str | None = None):
    """Plot the bound per step, one line per block, with the restarts marked.

    The steps run down the vertical axis, labelled ``step. feature`` (names longer
    than 36 characters shortened in the middle by :func:`short_name`), and the
    bound along the horizontal axis, so long column names stay readable.

    Parameters
    ----------
    report : dict
        A selection report (``selected``, ``scores``, ``blocks``).
    path : str or path-like, optional
        Where to write the PNG; nothing is written if None.
    title : str, optional
        The plot title (default: the method and the label).

    Returns
    -------
    matplotlib.figure.Figure
        The figure (display it in a notebook, or ignore it).

    Raises
    ------
    ImportError
        If matplotlib is not installed.

    Notes
    -----
    Uses the object-oriented matplotlib API with the Agg canvas, so it does not
    touch pyplot's global state or the notebook's backend.

    Examples
    --------
    >>> fig = plot_bounds({"method": "vmi_naive", "selected": ["a", "b", "c"],
    ...                    "scores": [0.3, 0.5, 0.1], "blocks": [0, 0, 1]},
    ...                   "bounds.png")  # doctest: +SKIP
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("plot_bounds needs matplotlib: pip install 'vmi_spark[plots]' "
                          "(or pip install matplotlib)") from exc

    selected = list(report.get("selected") or [])
    scores = [float(s) for s in (report.get("scores") or [])][:len(selected)]
    method = report.get("method", "")
    is_vmi = _is_vmi(method)
    steps = list(range(1, len(scores) + 1))

    # horizontal layout: one row per step, top to bottom, so that feature names of any
    # length are read left to right (shortened in the middle; report.md has them in full)
    height = min(_MAX_HEIGHT, max(3.5, 0.26 * len(steps) + 1.6))
    fig = Figure(figsize=(9.0, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    restarts = restart_steps(report)
    start = 0
    for end in [*restarts, len(scores)]:
        if end > start:
            ax.plot(scores[start:end], steps[start:end], marker="o", linewidth=1.5,
                    color="C0", label="bound" if start == 0 else None)
        start = end
    for j, i in enumerate(restarts):
        ax.axhline(i + 0.5, color="C3", linestyle="--", linewidth=1,
                   label="restart" if j == 0 else None)
    every = max(1, math.ceil(len(steps) / _MAX_TICKS))
    shown = steps[::every]
    ax.set_yticks(shown)
    ax.set_yticklabels([f"{s}. {short_name(str(selected[s - 1]))}" for s in shown],
                       fontsize=8)
    if steps:
        ax.set_ylim(len(steps) + 0.5, 0.5)  # step 1 at the top
    ax.set_ylabel("step. feature")
    ax.set_xlabel("bound I_LB of the block (nats)" if is_vmi else "score")
    label = report.get("label")
    ax.set_title(title if title is not None else
                 f"{method}" + (f", label '{label}'" if label is not None else ""))
    ax.grid(True, alpha=0.3)
    if scores:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(os.fspath(path), format="png")
    return fig


def plot_stability(report: SelectionReport, path: str | os.PathLike[str] | None = None,
                   *, title: str | None = None):
    """Plot each feature's selection frequency over the stability runs, most frequent first
    (the features selected at least once, at most 40), the main selection's features marked.

    Parameters
    ----------
    report : dict
        A selection report with ``stability`` (:func:`vmi_spark.core.stability.summarize`).
    path : str or path-like, optional
        Where to write the PNG; nothing is written if None.
    title : str, optional
        The plot title (default: the runs, the index and its interval).

    Returns
    -------
    matplotlib.figure.Figure or None
        The figure, or None when the report has no stability runs.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    """
    st = report.get("stability")
    if not isinstance(st, dict):
        return None
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("plot_stability needs matplotlib: pip install 'vmi_spark[plots]' "
                          "(or pip install matplotlib)") from exc
    feats = [f for f in st.get("features") or [] if f.get("selected_in")][:_MAX_STABLE]
    chosen = set(report.get("selected") or [])
    height = min(_MAX_HEIGHT, max(3.0, 0.26 * len(feats) + 1.6))
    fig = Figure(figsize=(9.0, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(feats)))
    ax.barh(ys, [float(f["frequency"]) for f in feats],
            color=["C0" if f["feature"] in chosen else "C7" for f in feats])
    ax.set_yticks(ys)
    ax.set_yticklabels([short_name(str(f["feature"])) for f in feats], fontsize=8)
    if feats:
        ax.set_ylim(len(feats) - 0.5, -0.5)  # the most frequent at the top
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel(f"selection frequency over {st.get('runs')} runs "
                  "(blue: in the full data's selection)")
    if title is None:
        index = st.get("index")
        ci = st.get("ci") or [None, None]
        title = (f"stability index {index:.3f}, 95% CI [{ci[0]:.3f}, {ci[1]:.3f}]"
                 if index is not None else "stability index not defined")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    if path is not None:
        fig.savefig(os.fspath(path), format="png")
    return fig
