"""Earlier names still read (issue 45, Names): a run of rows is a "chunk" now, so
``block_storage`` / ``blockStorage`` / ``--block-storage`` became ``chunk_storage`` /
``chunkStorage`` / ``--chunk-storage``. Every front end takes either name (one place:
:func:`vmi_spark.params.unalias`), both is a one-line error naming both, and what an
earlier version wrote (a saved estimator or model, a staging copy a killed run left) is
still read or recognised: written here in the old spelling by hand."""

from __future__ import annotations

import json
import os

import pytest

from vmi_spark import params as P
from vmi_spark.errors import InputError

OLD = {"python": "block_storage", "ml": "blockStorage", "cli": "--block-storage"}
NEW = {"python": "chunk_storage", "ml": "chunkStorage", "cli": "--chunk-storage"}


@pytest.mark.parametrize("style", sorted(OLD))
def test_the_spec_holds_each_front_ends_earlier_name(style):
    p = P.parameter("chunk_storage")
    assert (p.name(style), p.aliases[style]) == (NEW[style], OLD[style])
    assert P.unalias({OLD[style]: "cache", "x": 1}, style) == {NEW[style]: "cache", "x": 1}
    assert P.unalias({NEW[style]: "cache"}, style) == {NEW[style]: "cache"}
    with pytest.raises(P.ParameterError) as info:
        P.unalias({OLD[style]: "cache", NEW[style]: "cache"}, style)
    assert str(info.value.restyled(style)) == (f"{NEW[style]} and {OLD[style]} (its earlier "
                                               "name) are both given: give one")
    assert f"(earlier name: {OLD[style]})" in p.help(style)


def test_run_selection_reads_the_earlier_keyword():
    """Checked before any Spark work: the value given under the old keyword is the
    parameter's (its 'staging' needs a staging_dir), and both keywords are refused."""
    from vmi_spark.spark.select import run_selection

    with pytest.raises(P.ParameterError, match=r"^chunk_storage \(given as block_storage\) "
                                               r"'staging' needs a staging_dir$"):
        run_selection(None, "y", block_storage="staging")  # type: ignore[arg-type]
    with pytest.raises(P.ParameterError, match=r"^chunk_storage 'staging' needs a staging_dir$"):
        run_selection(None, "y", chunk_storage="staging")  # type: ignore[arg-type]
    with pytest.raises(P.ParameterError, match=r"^chunk_storage and block_storage \(its "
                                               r"earlier name\) are both given: give one$"):
        run_selection(None, "y", block_storage="cache",  # type: ignore[arg-type]
                      chunk_storage="cache")


@pytest.mark.parametrize("argv, want", [([], "auto"), (["--chunk-storage", "recompute"], "recompute"),
                                        (["--block-storage", "recompute"], "recompute"),
                                        (["--block-storage=staging", "--staging-dir", "/s"],
                                         "staging")])
def test_the_job_reads_either_flag(argv, want):
    from vmi_spark.job import build_parser, check_args

    checked = check_args(build_parser().parse_args(argv))
    assert checked.settings.chunk_storage == checked.args.chunk_storage == want
    assert not hasattr(checked.args, "block_storage")


def test_the_job_refuses_both_flags_in_one_line(capsys):
    """Exit status 2 and one line, before Spark (the demo: no input)."""
    from vmi_spark.job import main

    rc = main(["--block-storage", "cache", "--chunk-storage", "recompute"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and lines == ["select_features: error: --chunk-storage and --block-storage "
                                 "(its earlier name) are both given: give one"]


def test_the_estimator_reads_the_earlier_param_name():
    from vmi_spark import VMISelector

    assert VMISelector(blockStorage="recompute").getChunkStorage() == "recompute"
    sel = VMISelector()
    assert sel.getChunkStorage() == sel.getBlockStorage() == "auto"
    assert sel.setBlockStorage("cache").getChunkStorage() == "cache"
    assert sel.setParams(blockStorage="recompute").getChunkStorage() == "recompute"
    assert sel._settings().chunk_storage == "recompute"
    with pytest.raises(P.ParameterError, match=r"^chunkStorage and blockStorage \(its earlier "
                                               r"name\) are both given: give one$"):
        VMISelector(blockStorage="cache", chunkStorage="cache")
    # a bad value is named as the user gave it, by any way of giving it
    given = r"^unknown chunkStorage \(given as blockStorage\) 'disk'"
    for give in (lambda: VMISelector(blockStorage="disk"),
                 lambda: VMISelector().setParams(blockStorage="disk"),
                 lambda: VMISelector().setBlockStorage("disk")):
        with pytest.raises(P.ParameterError, match=given):
            give()
    with pytest.raises(P.ParameterError, match=r"^unknown chunkStorage 'disk'"):
        VMISelector(chunkStorage="disk")


@pytest.mark.parametrize("flag, shown", [("--block-storage", "--chunk-storage (given as "
                                                             "--block-storage)"),
                                         ("--chunk-storage", "--chunk-storage")])
def test_the_job_names_the_flag_as_given(flag, shown, capsys):
    """A value the flags cannot have together (staging without a staging directory) is
    refused naming the flag the user typed: exit 2, one line, before Spark."""
    from vmi_spark.job import main

    rc = main([flag, "staging"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and lines == [f"select_features: error: {shown} 'staging' needs a "
                                 "--staging-dir"]


def _as_saved_before(path, clash: bool = False) -> None:
    """Rewrite the metadata at ``path`` as an earlier version wrote it: ``blockStorage``
    for ``chunkStorage`` (with ``clash``, both); its .crc files go (Spark wrote none for
    the hand edit)."""
    (meta_file,) = [p for p in (path / "metadata").iterdir()
                    if p.name.startswith("part-") and p.stat().st_size]
    meta = json.loads(meta_file.read_text())
    for section in ("paramMap", "defaultParamMap"):
        if "chunkStorage" in meta.get(section, {}):
            value = meta[section]["chunkStorage"]
            if not clash:
                del meta[section]["chunkStorage"]
            meta[section]["blockStorage"] = value
    text = json.dumps(meta)
    assert "blockStorage" in text and ("chunkStorage" in text) == clash
    meta_file.write_text(text + "\n")
    for crc in (path / "metadata").glob(".*.crc"):
        crc.unlink()


def test_an_estimator_and_a_model_saved_under_the_earlier_name_load(spark, tmp_path):
    from helpers import random_discrete
    from vmi_spark import VMISelector, VMISelectorModel

    df = spark.createDataFrame(random_discrete(7, n=200, d=4))
    est = VMISelector(inputCols=[f"c{j}" for j in range(4)], labelCol="y", numTopFeatures=2,
                      chunkStorage="recompute")
    est.write().save(str(tmp_path / "est"))
    _as_saved_before(tmp_path / "est")
    loaded = VMISelector.load(str(tmp_path / "est"))
    assert loaded.getChunkStorage() == "recompute" and loaded.isSet(loaded.chunkStorage)
    model = est.fit(df)
    model.write().save(str(tmp_path / "m"))
    _as_saved_before(tmp_path / "m")
    back = VMISelectorModel.load(str(tmp_path / "m"))
    assert back.getChunkStorage() == "recompute"
    assert back.selectedFeatureNames == model.selectedFeatureNames
    model.write().save(str(tmp_path / "both"))
    _as_saved_before(tmp_path / "both", clash=True)
    with pytest.raises(InputError, match="cannot load a VMISelectorModel from .*chunkStorage "
                                         r"and blockStorage \(its earlier name\) are both given"):
        VMISelectorModel.load(str(tmp_path / "both"))


def _copy(root, name: str, marker: str, kind: str, named: str | None = None):
    """A staging copy as a killed run leaves it: ``data`` and its marker file."""
    d = root / name
    (d / "data").mkdir(parents=True)
    (d / "data" / "part-0.parquet").write_bytes(b"PAR1")
    (d / marker).write_text(json.dumps({"writer": "vmi_spark", "kind": kind,
                                        "name": named or name, "pid": 1}) + "\n")
    return d


def test_sweep_removes_an_earlier_versions_copy_and_no_mixed_spelling(tmp_path):
    """A copy an earlier version's killed run left (vmi-blocks-<hex> holding
    _VMI_SPARK_BLOCKS of kind "blocks") is removed as today's (vmi-chunks-<hex>,
    _VMI_SPARK_CHUNKS, "chunks") is; a name of one spelling with the marker or kind of the
    other, or an old marker naming another copy, is not proved to be a copy: left."""
    from vmi_spark.spark.chunks import storage

    old = _copy(tmp_path, "vmi-blocks-0123456789abcdef", "_VMI_SPARK_BLOCKS", "blocks")
    new = _copy(tmp_path, "vmi-chunks-0123456789abcdef", "_VMI_SPARK_CHUNKS", "chunks")
    left = [_copy(tmp_path, "vmi-blocks-1111111111111111", "_VMI_SPARK_CHUNKS", "chunks"),
            _copy(tmp_path, "vmi-chunks-2222222222222222", "_VMI_SPARK_BLOCKS", "blocks"),
            _copy(tmp_path, "vmi-blocks-3333333333333333", "_VMI_SPARK_BLOCKS", "chunks"),
            _copy(tmp_path, "vmi-blocks-4444444444444444", "_VMI_SPARK_BLOCKS", "blocks",
                  named="vmi-blocks-0000000000000000")]
    assert storage.sweep(str(tmp_path)) == [old.name, new.name]
    assert sorted(os.listdir(tmp_path)) == sorted(d.name for d in left)
    assert all(sorted(os.listdir(d)) == sorted(["data", m]) for d, m in
               zip(left, ["_VMI_SPARK_CHUNKS", "_VMI_SPARK_BLOCKS", "_VMI_SPARK_BLOCKS",
                          "_VMI_SPARK_BLOCKS"]))
