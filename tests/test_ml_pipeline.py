"""The ML estimator in pipelines: attribute metadata through transform, JSON persistence,
progress lines."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import StringIndexer, VectorAssembler, VectorSlicer
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.ml.linalg import SparseVector, VectorUDT
from pyspark.sql.types import IntegerType, StructField, StructType

from helpers import random_discrete
from vmi_spark import VMISelector, VMISelectorModel


@pytest.fixture(scope="module")
def assembled(spark):
    """random_discrete columns plus a string column indexed to a nominal attribute."""
    pdf = random_discrete(21, n=240, d=7)
    pdf["name"] = np.where(pdf["c0"] > 0, "high", "low")
    df = StringIndexer(inputCol="name", outputCol="name_idx", stringOrderType="alphabetAsc") \
        .fit(spark.createDataFrame(pdf)).transform(spark.createDataFrame(pdf))
    cols = [f"c{j}" for j in range(7)] + ["name_idx"]
    vec = VectorAssembler(inputCols=cols, outputCol="features").transform(df).cache()
    yield pdf, cols, vec
    vec.unpersist()  # the shared session keeps nothing of this module's


def _attrs_by_idx(meta):
    """idx -> (attribute type, attribute without idx), read straight from the ml_attr dict."""
    out = {}
    for kind, group in meta["ml_attr"]["attrs"].items():
        for a in group:
            out[a["idx"]] = (kind, {k: v for k, v in a.items() if k != "idx"})
    return out


def test_transform_keeps_attribute_metadata_in_selection_order(spark, assembled):
    pdf, cols, vec = assembled
    model = VMISelector(labelCol="y", numTopFeatures=4, outputCol="sel").fit(vec)
    sel = model.selectedFeatures
    assert len(sel) == 4 and model.selectedFeatureNames == [cols[i] for i in sel]
    out = model.transform(vec)
    meta = out.schema["sel"].metadata
    assert meta["ml_attr"]["num_attrs"] == len(sel)
    src = _attrs_by_idx(vec.schema["features"].metadata)
    got = _attrs_by_idx(meta)
    assert sorted(got) == list(range(len(sel)))
    for pos, i in enumerate(sel):
        assert got[pos] == src[i]  # same type, name (and nominal values) as the input element
        assert got[pos][1]["name"] == cols[i]
    # values: the selected elements in selection order
    rows = out.select("features", "sel").collect()
    for r in rows:
        assert list(r["sel"].toArray()) == [r["features"][i] for i in sel]
    # a VectorSlicer by name finds the elements through the new metadata
    names = [cols[i] for i in sel[::-1]]
    sliced = VectorSlicer(inputCol="sel", outputCol="s", names=names).transform(out)
    got_vals = [list(r["s"].toArray()) for r in sliced.select("s").collect()]
    want = pdf.assign(name_idx=(pdf["name"] == "low").astype(float))[names].to_numpy(float)
    assert np.array_equal(np.array(got_vals), want)


def test_second_selector_by_name_on_the_sliced_vector(spark, assembled):
    _, _, vec = assembled
    first = VMISelector(labelCol="y", numTopFeatures=4, outputCol="sel").fit(vec)
    out = first.transform(vec)
    second = VMISelector(featuresCol="sel", labelCol="y", numTopFeatures=2,
                         outputCol="sel2").fit(out)
    # the same selection computed from the plain columns of those four features
    names = first.selectedFeatureNames
    direct = VMISelector(inputCols=names, labelCol="y", numTopFeatures=2).fit(
        out.select("y", *names))
    assert second.selectedFeatureNames == direct.selectedFeatureNames
    assert second.scores == direct.scores
    meta2 = second.transform(out).schema["sel2"].metadata
    assert [a[1]["name"] for _, a in sorted(_attrs_by_idx(meta2).items())] == \
        second.selectedFeatureNames


def test_vector_without_metadata_and_sparse_vectors(spark):
    pdf = random_discrete(22, n=200, d=5)
    cols = [f"c{j}" for j in range(5)]
    rows = []
    for rec in pdf.itertuples(index=False):
        x = [float(getattr(rec, c)) for c in cols]
        nz = [j for j, v in enumerate(x) if v != 0.0]
        rows.append((SparseVector(5, nz, [x[j] for j in nz]), int(rec.y)))
    schema = StructType([StructField("v", VectorUDT()), StructField("y", IntegerType())])
    df = spark.createDataFrame(rows, schema)
    model = VMISelector(featuresCol="v", labelCol="y", numTopFeatures=3, outputCol="o").fit(df)
    assert model.selectedFeatureNames == [f"v[{i}]" for i in model.selectedFeatures]
    out = model.transform(df)
    got = _attrs_by_idx(out.schema["o"].metadata)
    assert [got[p] for p in range(3)] == [("numeric", {"name": f"v[{i}]"})
                                          for i in model.selectedFeatures]
    want = pdf[[cols[i] for i in model.selectedFeatures]].to_numpy(float)
    assert np.array_equal(np.array([r["o"].toArray() for r in out.select("o").collect()]), want)
    dense = df.select(array_to_vector(vector_to_array("v")).alias("v"), "y")
    assert VMISelector(featuresCol="v", labelCol="y", numTopFeatures=3).fit(dense) \
        .selectedFeatures == model.selectedFeatures


def test_input_cols_transform_returns_the_selected_columns(spark):
    pdf = random_discrete(23, n=200, d=6)
    pdf["id"] = np.arange(len(pdf))
    df = spark.createDataFrame(pdf)
    cols = [f"c{j}" for j in range(6)]
    model = VMISelector(inputCols=cols, labelCol="y", numTopFeatures=2).fit(df)
    out = model.transform(df)
    keep = set(model.selectedFeatureNames)
    assert len(keep) == 2 and keep <= set(cols)
    # the non-selected inputs are gone; every other column is untouched, in input order
    assert out.columns == [c for c in pdf.columns if c not in set(cols) - keep]
    got = out.toPandas().sort_values("id").reset_index(drop=True)
    assert got.equals(pdf[out.columns].reset_index(drop=True))


def _saved_files(path):
    for root, _, files in os.walk(path):
        for f in files:
            yield os.path.join(root, f)


def test_pipeline_model_round_trip_is_json_and_keeps_metadata(spark, assembled, tmp_path):
    _, cols, vec = assembled
    df = vec.drop("features")
    pipe = Pipeline(stages=[VectorAssembler(inputCols=cols, outputCol="features"),
                            VMISelector(labelCol="y", numTopFeatures=3, outputCol="sel",
                                        method="vmi_pairwise", restartTolerance=0.01)])
    pipe.write().overwrite().save(str(tmp_path / "pipe"))
    loaded_pipe = Pipeline.load(str(tmp_path / "pipe"))
    assert loaded_pipe.getStages()[1].getMethod() == "vmi_pairwise"
    fitted = pipe.fit(df)
    fitted.write().overwrite().save(str(tmp_path / "pm"))
    loaded = PipelineModel.load(str(tmp_path / "pm"))
    a, b = fitted.stages[1], loaded.stages[1]
    assert isinstance(b, VMISelectorModel) and b.uid == a.uid
    assert b.selectedFeatures == a.selectedFeatures and b.scores == a.scores
    assert b.blocks == a.blocks and b.report == a.report
    assert b.getRestartTolerance() == 0.01 and b.getOutputCol() == "sel"
    ta, tb = fitted.transform(df), loaded.transform(df)
    assert tb.schema["sel"].metadata == ta.schema["sel"].metadata
    assert tb.select("sel").collect() == ta.select("sel").collect()
    assert [a[1]["name"] for _, a in sorted(_attrs_by_idx(tb.schema["sel"].metadata).items())] \
        == a.selectedFeatureNames
    # persistence is JSON text only: every data file parses as JSON lines, nothing pickled
    data = [p for p in _saved_files(tmp_path) if not os.path.basename(p).startswith(("_", "."))]
    assert data
    for p in data:
        with open(p, "rb") as fh:
            raw = fh.read()
        assert not raw.startswith(b"\x80"), p  # pickle protocol header
        for line in raw.decode("utf-8").splitlines():
            if line.strip():
                json.loads(line)


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append((record.levelno, record.getMessage()))


def test_fit_logs_one_progress_line_per_step(spark, assembled):
    _, cols, vec = assembled
    logger = logging.getLogger("vmi_spark")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        model = VMISelector(labelCol="y", numTopFeatures=5, restartTolerance=0.02).fit(vec)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    steps = [m for lv, m in handler.lines if lv == logging.INFO and m.startswith("step ")]
    k = len(model.selectedFeatures)
    assert len(steps) == k
    for j, line in enumerate(steps):
        fields = dict(f.split("=", 1) for f in line.split()[2:])
        assert line.split()[1] == f"{j + 1}/5"
        assert fields["feature"] == cols[model.selectedFeatures[j]]
        assert float(fields["bound"]) == pytest.approx(model.scores[j], abs=5e-5)
        assert float(fields["gain"]) == pytest.approx(model.report["gains"][j], abs=5e-5)
        assert int(fields["block"]) == model.blocks[j]
        assert fields["elapsed"].endswith("s") and float(fields["eta"][:-1]) >= 0
    if k == 5:
        assert float(dict(f.split("=", 1) for f in steps[-1].split()[2:])["eta"][:-1]) == 0.0


def test_every_public_setter_and_accessor_has_a_docstring():
    """The estimator's and the model's public methods and properties say what they do
    (the estimator's setters are made from the spec, one a Param)."""
    for cls in (VMISelector, VMISelectorModel):
        names = [n for n in dir(cls) if not n.startswith("_")
                 and n not in ("uid", "params") and n in vars(cls)]
        assert any(n.startswith("set") for n in names), cls
        for n in names:
            obj = vars(cls)[n]
            obj = getattr(obj, "fget", None) or getattr(obj, "__func__", obj)
            if callable(obj):
                assert (obj.__doc__ or "").strip(), f"{cls.__name__}.{n} has no docstring"
