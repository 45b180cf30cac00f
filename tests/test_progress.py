"""The progress lines name and count what the selection selects (issue 44 item 1): the
step lines come from the run's own candidates and K (:func:`vmi_spark.progress.begin`),
in every front end and selection mode, with columns that cannot be features (arrays,
maps) or are excluded shifting the candidates' positions."""

from __future__ import annotations

import json
import logging
import re

import pytest

from helpers import random_discrete

#: (selection mode, threshold): each mode's own K rule
MODES = [("numTopFeatures", None), ("fraction", 0.5), ("gain", 0.03)]
STEP = re.compile(r"step (\d+)/(<=)?(\d+) feature=(\S+) ")


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def _logged(fn):
    """The ``vmi_spark`` log lines (INFO and up) while ``fn()`` runs, and its result."""
    logger = logging.getLogger("vmi_spark")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        out = fn()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return handler.lines, out


def _check_steps(lines: list[str], selected: list[str], candidates: int, mode: str,
                 threshold: float | None, stop_reason: str) -> None:
    """The step lines name ``selected`` in order and count to the mode's K."""
    steps = [STEP.search(ln).groups() for ln in lines if STEP.search(ln)]
    assert [s[3] for s in steps] == selected
    assert [int(s[0]) for s in steps] == list(range(1, len(selected) + 1))
    k = {"numTopFeatures": 4, "fraction": int(candidates * (threshold or 0)),
         "gain": candidates}[mode]
    assert {int(s[2]) for s in steps} == {k}
    if mode == "gain":  # an upper bound, said so while it is one
        assert stop_reason == "threshold" and len(selected) < k
        assert all(s[1] == "<=" for s in steps)
    else:
        assert len(selected) == k and not any(s[1] for s in steps)


def _settings(mode: str, threshold: float | None) -> dict:
    return {"selection_mode": mode, "selection_threshold": threshold}


@pytest.mark.parametrize("mode,threshold", MODES)
def test_sklearn_steps_name_the_selected_columns(mode, threshold):
    from vmi_spark.sklearn import VMIFeatureSelector

    X = random_discrete(5, n=300, d=8).drop(columns="y")
    y = random_discrete(5, n=300, d=8)["y"]
    sel = VMIFeatureSelector(n_features_to_select=4, exclude=["c1"], **_settings(mode, threshold))
    lines, sel = _logged(lambda: sel.fit(X, y))
    names = [str(X.columns[j]) for j in sel.selected_features_]
    assert "c1" not in names
    _check_steps(lines, names, 7, mode, threshold, sel.stop_reason_)


@pytest.fixture(scope="module")
def odd_table(spark, tmp_path_factory):
    """Discrete features with an array column first and a map column among them (neither
    can be a feature), as Parquet."""
    from pyspark.sql import functions as F

    pdf = random_discrete(5, n=300, d=8)
    df = spark.createDataFrame(pdf)
    df = df.select(F.array(F.col("c0").cast("string")).alias("tags"), "c0", "c1", "c2",
                   F.create_map(F.lit("k"), F.col("c3")).alias("attrs"),
                   *[f"c{j}" for j in range(3, 8)], "y")
    path = tmp_path_factory.mktemp("progress") / "odd.parquet"
    df.write.parquet(str(path))
    return spark.read.parquet(str(path)), str(path)


@pytest.mark.parametrize("mode,threshold", MODES)
def test_job_steps_name_the_selected_columns(spark, odd_table, capsys, tmp_path, mode,
                                              threshold):
    from vmi_spark.job import main

    _, path = odd_table
    argv = ["--input", path, "--label", "y", "--output", str(tmp_path / "o"),
            "--selection-mode", mode, "--exclude", "c1"]
    argv += ["--selection-threshold", str(threshold)] if threshold else ["--num-features", "4"]
    assert main(argv, spark=spark) == 0
    err = capsys.readouterr().err.splitlines()
    rep = json.loads((tmp_path / "o" / "selection.json").read_text())
    assert rep["features"] == ["c0", "c2", "c3", "c4", "c5", "c6", "c7"]
    _check_steps(err, rep["selected"], 7, mode, threshold, rep["stop_reason"])
    # the note about the columns left out comes before the steps it is about
    left_out = next(i for i, ln in enumerate(err) if "left out 2 column(s)" in ln)
    assert left_out < next(i for i, ln in enumerate(err) if STEP.search(ln))


@pytest.mark.parametrize("mode,threshold,says", [
    ("numTopFeatures", None, "selecting 4 features (vmi_naive)"),
    ("fraction", None, "selecting a fraction 0.1 of the features (vmi_naive)"),
    ("fraction", 0.25, "selecting a fraction 0.25 of the features"),
    ("gain", None, "selecting features while one is significant"),
    ("gain", 0.02, "selecting features while one gains at least 0.02 nats")])
def test_the_first_line_says_what_the_mode_selects(mode, threshold, says):
    """The job's first line (before Spark starts) counts as the mode does, never K."""
    from vmi_spark.job import _what, build_parser, check_args

    argv = ["--input", "t.parquet", "--label", "y", "--output", "o", "--selection-mode", mode]
    argv += (["--selection-threshold", str(threshold)] if threshold
             else ["--num-features", "4"] if mode == "numTopFeatures" else [])
    args = check_args(build_parser().parse_args(argv)).args
    assert says in _what(args)
    auto = check_args(build_parser().parse_args(argv[:6])).args  # no K: on the evidence
    assert "selecting up to 50 features, while one is significant" in _what(auto)


@pytest.mark.parametrize("mode,threshold", MODES)
def test_estimator_steps_name_the_selected_columns(spark, odd_table, mode, threshold):
    from vmi_spark import VMISelector

    df, _ = odd_table
    est = VMISelector(labelCol="y", inputCols=[f"c{j}" for j in range(8)], excludeCols=["c1"],
                      numTopFeatures=4, selectionMode=mode, selectionThreshold=threshold)
    lines, model = _logged(lambda: est.fit(df))
    _check_steps(lines, model.selectedFeatureNames, 7, mode, threshold,
                 model.report["stop_reason"])


def test_a_logger_not_begun_shows_indices():
    """Without the run's names a step is shown by index, never by a guessed name."""
    from vmi_spark.core.greedy import Selection
    from vmi_spark.progress import StepLogger

    sel = Selection(method="mim", selected=[2], scores=[0.5], gains=[0.5], blocks=[0],
                    step_seconds=[0.1])
    lines, _ = _logged(lambda: StepLogger()(sel))
    assert len(lines) == 1
    assert re.fullmatch(r"INFO step 1/1 feature=#2 score=0\.5000 elapsed=\d+\.\ds eta=0\.0s",
                        lines[0])
