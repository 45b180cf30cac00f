"""``--previous`` and ``--fail-on-change`` without Spark (issue 36): the comparison against
hand-worked cases, the previous output read as untrusted input, and the arguments checked
before Spark starts."""

from __future__ import annotations

import json

import pytest

from vmi_spark import changes
from vmi_spark.changes import PreviousError, compare, input_schema, read_previous

SCHEMA = input_schema([("a", "double"), ("b", "string"), ("y", "bigint")])


def _write(tmp_path, report) -> str:
    d = tmp_path / "prev"
    d.mkdir(exist_ok=True)
    (d / "selection.json").write_text(report if isinstance(report, str) else json.dumps(report))
    return str(d)


def _report(selected, schema=SCHEMA, rows=100, method="vmi_naive", params=None):
    return {"selected": selected, "features": ["a", "b", "c", "d"], "method": method,
            "parameters": params or {"num_features": len(selected)}, "input_schema": schema,
            "input_rows": rows}


def test_compare_a_worked_example(tmp_path):
    before = read_previous(_write(tmp_path, _report(["a", "b", "c"])))
    now = _report(["b", "d", "a"], schema=input_schema([("a", "double"), ("b", "double"),
                                                        ("z", "int"), ("y", "bigint")]),
                  rows=120)
    ch = compare(before, now, "prev")
    assert ch["compared"] and ch["selected_changed"]
    assert (ch["entered"], ch["left"]) == (["d"], ["c"])
    assert ch["jaccard"] == 2 / 4  # {a, b} of {a, b, c, d}
    assert ch["rank_moves"] == [{"feature": "b", "previous_rank": 2, "rank": 1, "move": 1},
                                {"feature": "a", "previous_rank": 1, "rank": 3, "move": -2}]
    assert ch["schema_changed"] is True
    assert (ch["columns_added"], ch["columns_removed"]) == (["z"], [])
    assert ch["columns_retyped"] == [{"name": "b", "previous_type": "string", "type": "double"}]
    assert (ch["rows_changed"], ch["previous_rows"], ch["rows"]) == (True, 100, 120)
    assert changes.changed(ch)


def test_the_same_set_in_another_order_is_not_a_change(tmp_path):
    before = read_previous(_write(tmp_path, _report(["a", "b"])))
    ch = compare(before, _report(["b", "a"], method="mrmr", params={"num_features": 3}), "p")
    assert not ch["selected_changed"] and not changes.changed(ch) and ch["jaccard"] == 1.0
    assert ch["schema_changed"] is False and ch["rows_changed"] is False
    assert ch["notes"] == ["the previous run used method vmi_naive, this one mrmr",
                           "parameters differ from the previous run's: num_features"]
    empty = compare(read_previous(_write(tmp_path, _report([]))), _report([]), "p")
    assert empty["jaccard"] == 1.0 and not empty["selected_changed"]


def test_a_previous_run_without_a_schema(tmp_path):
    old = _report(["a"])
    del old["input_schema"], old["input_rows"]
    ch = compare(read_previous(_write(tmp_path, old)), _report(["a"]), "p")
    assert ch["schema_changed"] is None and ch["rows_changed"] is None


@pytest.mark.parametrize("content,reason", [
    ("not json", "is not JSON"),
    ("[1, 2]", "is not a JSON object"),
    ('{"selected": ["a"], "features": ["a"], "method": "m", "x": NaN}', "it holds NaN"),
    ('{"selected": ["a", "a"], "features": ["a"], "method": "m"}', "'selected' holds a name twice"),
    ('{"selected": ["z"], "features": ["a"], "method": "m"}',
     "'selected' names a feature that 'features' does not list"),
    ('{"selected": [], "features": [], "method": 3}', "'method' is not a name"),
    ('{"selected": [], "features": [], "method": "m", "input_rows": -1}',
     "'input_rows' is not a row count"),
    ('{"selected": [], "features": [], "method": "m", "input_schema": {"columns": [1]}}',
     "'input_schema' has a column that is not a name and a type"),
    ('{"selected": [], "features": [], "method": "m", "parameters": []}',
     "'parameters' is not an object"),
])
def test_a_corrupt_previous_output_is_refused_with_a_reason(tmp_path, content, reason):
    with pytest.raises(PreviousError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        read_previous(_write(tmp_path, content))


def test_missing_oversized_and_special_files(tmp_path):
    with pytest.raises(PreviousError, match="no selection.json in"):
        read_previous(str(tmp_path / "nowhere"))
    d = tmp_path / "dir"
    (d / "selection.json").mkdir(parents=True)
    with pytest.raises(PreviousError, match="is not a regular file"):
        read_previous(str(d))
    path = _write(tmp_path, _report(["a"]))
    size = (tmp_path / "prev" / "selection.json").stat().st_size
    assert read_previous(path, max_bytes=size)["selected"] == ["a"]
    with pytest.raises(PreviousError, match="is larger than"):
        read_previous(path, max_bytes=size - 1)
    assert compare(None, _report(["a"]), "p", "no selection.json in 'p'") == {
        "previous": "p", "compared": False, "reason": "no selection.json in 'p'"}


def test_input_schema_fingerprint():
    a = input_schema([("a", "double")])
    assert a["columns"] == [{"name": "a", "type": "double"}] and len(a["fingerprint"]) == 64
    assert a["fingerprint"] != input_schema([("a", "float")])["fingerprint"]


@pytest.mark.parametrize("argv,message", [
    (["--fail-on-change"], "--fail-on-change needs --previous (the earlier run's --output)"),
    (["--previous", " "], "--previous is empty"),
    (["--weight-col", ""], "--weight-col is empty"),
    (["--stability", "1"], "--stability must be 0 (none) or at least 2 (a stability index "
                           "compares runs), got 1"),
    (["--stability-fraction", "1"], "--stability-fraction must be a fraction in (0, 1), got 1.0"),
])
def test_bad_arguments_before_spark(monkeypatch, capsys, argv, message):
    import vmi_spark.job as job

    monkeypatch.setattr(job.outputs, "check_before_spark", lambda args: None)
    rc = job.main(["--input", "in.parquet", "--label", "y", "--output", "out", *argv])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and lines == [f"select_features: error: {message}"]


def test_demo_refuses_previous_and_weights(capsys):
    from vmi_spark.job import main

    for extra in (["--previous", "x"], ["--weight-col", "w"]):
        assert main(extra) == 2
        assert capsys.readouterr().err.strip() == \
            "select_features: error: --input or --table is required"
