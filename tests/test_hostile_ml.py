"""Estimator misuse gets one clear error, never a silently different output.

A DataFrame missing a selected column, vectors of different lengths (at fit) or of another
length than the model's (at transform), a column that is not a vector as ``featuresCol``,
and a saved model edited to select indices it cannot have selected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.ml.linalg import DenseVector, VectorUDT
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from helpers import random_discrete
from vmi_spark import VMISelector, VMISelectorModel
from vmi_spark.errors import InputError

SCHEMA = StructType([StructField("v", VectorUDT()), StructField("y", IntegerType())])


def _one_line(exc_info):
    msg = str(exc_info.value)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


@pytest.fixture(scope="module")
def vectors(spark):
    """Five-element vectors (no ML attributes) and a model fitted on them."""
    pdf = random_discrete(31, n=300, d=5)
    cols = [f"c{j}" for j in range(5)]
    rows = [(DenseVector([float(getattr(r, c)) for c in cols]), int(r.y))
            for r in pdf.itertuples(index=False)]
    df = spark.createDataFrame(rows, SCHEMA)
    model = VMISelector(featuresCol="v", labelCol="y", numTopFeatures=3, outputCol="o").fit(df)
    return rows, df, model


def test_transform_without_a_selected_column_is_an_error(spark):
    pdf = random_discrete(32, n=200, d=6)
    df = spark.createDataFrame(pdf)
    cols = [f"c{j}" for j in range(6)]
    model = VMISelector(inputCols=cols, labelCol="y", numTopFeatures=2).fit(df)
    gone = model.selectedFeatureNames[1]
    with pytest.raises(InputError, match=f"no column '{gone}'") as info:
        model.transform(df.drop(gone))
    _one_line(info)
    # a non-selected input column may be missing: it is dropped anyway
    other = next(c for c in cols if c not in model.selectedFeatureNames)
    assert model.transform(df.drop(other)).columns == [
        c for c in pdf.columns if c in model.selectedFeatureNames or c not in cols]


def test_fit_on_vectors_of_different_lengths_is_an_error(spark, vectors):
    rows, _, _ = vectors
    # the first rows are five wide, later ones three wide (today: all cut to five/three)
    ragged = rows[:150] + [(DenseVector(v.toArray()[:3]), y) for v, y in rows[150:]]
    df = spark.createDataFrame(ragged, SCHEMA)
    with pytest.raises(InputError, match="featuresCol 'v' holds vectors of 3 to 5 elements") \
            as info:
        VMISelector(featuresCol="v", labelCol="y", numTopFeatures=2).fit(df)
    _one_line(info)


def test_fit_on_vectors_shorter_than_their_attributes_is_an_error(spark, vectors):
    """ML attributes that name five elements on three-element vectors."""
    from pyspark.ml.feature import VectorAssembler

    rows, _, _ = vectors
    wide = spark.createDataFrame([(float(v[0]), float(v[1]), float(v[2]), y)
                                  for v, y in rows], ["a", "b", "c", "y"])
    vec = VectorAssembler(inputCols=["a", "b", "c"], outputCol="v").transform(wide)
    meta = vec.schema["v"].metadata
    meta["ml_attr"]["num_attrs"] = 5
    meta["ml_attr"]["attrs"]["numeric"] += [{"idx": 3, "name": "d"}, {"idx": 4, "name": "e"}]
    from pyspark.sql import functions as F

    lying = vec.select(F.col("v").alias("v", metadata=meta), "y")
    with pytest.raises(InputError, match="vectors of 3 to 3 elements; every row must have the "
                                         "same length \\(5\\)"):
        VMISelector(featuresCol="v", labelCol="y", numTopFeatures=2).fit(lying)


@pytest.mark.parametrize("width", [3, 7])
def test_transform_of_vectors_of_another_length_fails_clearly(spark, vectors, width):
    rows, df, model = vectors
    assert max(model.selectedFeatures) < 5
    other = spark.createDataFrame(
        [(DenseVector((list(v.toArray()) + [0.0] * 5)[:width]), y) for v, y in rows], SCHEMA)
    with pytest.raises(Exception, match=f"featuresCol 'v' has a vector of {width} elements; "
                                        "the model was fitted on 5"):
        model.transform(other).collect()
    # the right width still transforms
    got = [list(r["o"]) for r in model.transform(df).select("o").collect()]
    assert got == [[float(v[i]) for i in model.selectedFeatures] for v, _ in rows]


def test_a_string_features_column_is_a_one_line_error(spark, vectors):
    _, df, model = vectors
    strings = spark.createDataFrame([("a,b", 1), ("c", 0)],
                                    StructType([StructField("v", StringType()),
                                                StructField("y", IntegerType())]))
    with pytest.raises(InputError, match="featuresCol 'v' must be a vector column") as info:
        VMISelector(featuresCol="v", labelCol="y", numTopFeatures=1).fit(strings)
    assert "not string" in _one_line(info)
    with pytest.raises(InputError, match="featuresCol 'v' must be a vector column"):
        model.transform(strings)
    with pytest.raises(InputError, match="featuresCol 'w' not found"):
        model.setFeaturesCol("w").transform(df)
    model.setFeaturesCol("v")


def _edit(path: Path, change) -> None:
    files = [p for p in (path / "metadata").iterdir() if p.name.startswith("part-")]
    (meta_file,) = [p for p in files if p.stat().st_size]
    meta = json.loads(meta_file.read_text())
    change(meta["report"])
    meta_file.write_text(json.dumps(meta) + "\n")
    for crc in (path / "metadata").glob(".*.crc"):
        crc.unlink()


EDITS = {
    "index 99": (lambda r: r.update(selected_indices=[99, *r["selected_indices"][1:]]),
                 "selected index 99 is not in \\[0, 5\\)"),
    "index -1": (lambda r: r.update(selected_indices=[-1, *r["selected_indices"][1:]]),
                 "selected index -1 is not in"),
    "duplicates": (lambda r: r.update(selected_indices=[r["selected_indices"][0]] * 3,
                                      selected=[r["selected"][0]] * 3), "a feature twice"),
    "string index": (lambda r: r.update(selected_indices=["1", *r["selected_indices"][1:]]),
                     "not a list of ints"),
    "bool index": (lambda r: r.update(selected_indices=[True, *r["selected_indices"][1:]]),
                   "not a list of ints"),
    "names disagree": (lambda r: r.update(selected=list(reversed(r["selected"]))),
                       "does not name the selected indices"),
    "report not an object": (lambda r: r.clear() or r.update(x=1),
                             "its method 'None' is not one of"),
    # issue 33 item 6
    "empty report": (lambda r: r.clear(), "its report is empty"),
    "NaN score": (lambda r: r.update(scores=[float("nan"), *r["scores"][1:]]),
                  "'scores' is not one finite number per selected feature"),
    "infinite gain": (lambda r: r.update(gains=[*r["gains"][:-1], float("inf")]),
                      "'gains' is not one finite number"),
    "evil method": (lambda r: r.update(method="evil"), "its method 'evil' is not one of"),
    "blocks": (lambda r: r.update(blocks=[1] * len(r["blocks"])), "restarted blocks"),
    "columns": (lambda r: r.update(columns=[{"kind": "bins"}]), "'columns' is not a list"),
    "label binning": (lambda r: r.update(label_binning=[1]), "'label_binning' is not"),
}


def _edit_meta(path: Path, change, keep_crc: bool = False) -> None:
    files = [p for p in (path / "metadata").iterdir() if p.name.startswith("part-")]
    (meta_file,) = [p for p in files if p.stat().st_size]
    meta = json.loads(meta_file.read_text())
    change(meta)
    meta_file.write_text(json.dumps(meta) + "\n")
    if not keep_crc:
        for crc in (path / "metadata").glob(".*.crc"):
            crc.unlink()


META_EDITS = {
    "foreign class": (lambda m: m.update({"class": "evil.Module"}),
                      "it holds a 'evil.Module', not a vmi_spark.ml.VMISelectorModel"),
    "method param": (lambda m: m["paramMap"].update(method="evil"), "unknown method 'evil'"),
    "foreign param": (lambda m: m["paramMap"].update(fdr=0.05),
                      "paramMap sets 'fdr', which this model does not have"),
    "inputCols": (lambda m: m["paramMap"].update(inputCols=["nope"]),
                  "not among its inputCols"),
    "no uid": (lambda m: m.pop("uid"), "it has no uid"),
}


@pytest.fixture(scope="module")
def columns_model(spark):
    pdf = random_discrete(33, n=200, d=4)
    df = spark.createDataFrame(pdf)
    est = VMISelector(inputCols=[f"c{j}" for j in range(4)], labelCol="y", numTopFeatures=2)
    return est, est.fit(df)


@pytest.mark.parametrize("name", sorted(META_EDITS))
def test_a_saved_model_with_edited_metadata_is_refused_at_load(columns_model, tmp_path, name):
    _, model = columns_model
    path = tmp_path / "m"
    model.write().save(str(path))
    assert VMISelectorModel.load(str(path)).selectedFeatureNames == model.selectedFeatureNames
    change, match = META_EDITS[name]
    _edit_meta(path, change)
    with pytest.raises(InputError, match=match) as info:
        VMISelectorModel.load(str(path))
    assert "cannot load a VMISelectorModel from" in _one_line(info)


def test_what_is_not_a_vmi_model_is_a_one_line_error(spark, columns_model, tmp_path):
    """A saved estimator (it loaded as a model that selected nothing, and whose transform
    dropped every input column), Spark's ChiSqSelectorModel ("AttributeError: ... 'fdr'"),
    and a path with nothing saved."""
    from pyspark.ml.feature import ChiSqSelector, VectorAssembler

    est, _ = columns_model
    est.write().save(str(tmp_path / "estimator"))
    with pytest.raises(InputError, match="it holds a 'vmi_spark.ml.VMISelector', not a") as info:
        VMISelectorModel.load(str(tmp_path / "estimator"))
    _one_line(info)
    pdf = random_discrete(34, n=100, d=3)
    vec = VectorAssembler(inputCols=["c0", "c1", "c2"], outputCol="features").transform(
        spark.createDataFrame(pdf)).withColumnRenamed("y", "label")
    ChiSqSelector(numTopFeatures=1).fit(vec).write().save(str(tmp_path / "chisq"))
    with pytest.raises(InputError, match="ChiSqSelectorModel', not a") as info:
        VMISelectorModel.load(str(tmp_path / "chisq"))
    _one_line(info)
    with pytest.raises(InputError, match=f"cannot load a VMISelectorModel from "
                                         f"'{tmp_path / 'nothing'}': ") as info:
        VMISelectorModel.load(str(tmp_path / "nothing"))
    _one_line(info)


def test_a_hand_edited_model_that_keeps_its_crc_files_is_one_line(columns_model, tmp_path):
    """Spark checks the .crc files: an edit that keeps them was a 101-line Py4JJavaError."""
    _, model = columns_model
    path = tmp_path / "m"
    model.write().save(str(path))
    _edit_meta(path, lambda m: m["report"].update(scores=[9.0] * len(m["report"]["scores"])),
               keep_crc=True)
    with pytest.raises(InputError, match="does not match its checksum") as info:
        VMISelectorModel.load(str(path))
    _one_line(info)



@pytest.mark.parametrize("name", sorted(EDITS))
def test_a_saved_model_with_edited_indices_is_refused_at_load(vectors, tmp_path, name):
    _, _, model = vectors
    path = tmp_path / "m"
    model.write().overwrite().save(str(path))
    assert VMISelectorModel.load(str(path)).selectedFeatures == model.selectedFeatures
    change, match = EDITS[name]
    _edit(path, change)
    with pytest.raises(InputError, match=match) as info:
        VMISelectorModel.load(str(path))
    assert "cannot load a VMISelectorModel from" in _one_line(info)


def test_ordinary_columns_without_input_cols_say_how_to_give_the_features(spark):
    """``VMISelector(labelCol=...).fit(df)`` on ordinary columns (no ``features`` vector):
    one line that leads to ``inputCols`` or a VectorAssembler (issue 44 item 5), before
    any Spark job."""
    df = spark.createDataFrame([(1.0, 2, "a", 0), (2.0, 3, "b", 1)], "x double, n int, s string, "
                                                                       "price int")
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(InputError) as info:
        VMISelector(labelCol="price", numTopFeatures=1).fit(df)
    text = _one_line(info)
    assert text.startswith("featuresCol 'features' not found in the input: set inputCols")
    assert "c != 'price'" in text and "VectorAssembler" in text
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs
