"""What the job's arguments alone decide is refused before Spark starts (issue 44 item 3):
a local --input that does not exist, a --format that is a typo of a known one, flags that
contradict each other. One line, exit status 2, nothing written, no SparkSession."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from vmi_spark import hints
from vmi_spark.errors import InputError

pytestmark = pytest.mark.unit

#: the environment that may put paths without a scheme on another file system
_FS_VARS = ("DATABRICKS_RUNTIME_VERSION", "PYSPARK_GATEWAY_PORT", "HADOOP_CONF_DIR",
            "YARN_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME")


@pytest.fixture
def plain_env(monkeypatch, tmp_path):
    """No Hadoop configuration: a path without a scheme is a local one."""
    for var in _FS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _error_before_spark(monkeypatch, capsys, argv) -> str:
    """The job's one error line for ``argv``; building a SparkSession fails the test."""
    import pyspark.sql

    import vmi_spark.spark.session as session
    from vmi_spark.job import main

    def refused(*a, **k):
        raise AssertionError("the job started a SparkSession")

    class Builder:
        def __getattr__(self, name):
            refused()

    monkeypatch.setattr(pyspark.sql.SparkSession, "builder", Builder())
    monkeypatch.setattr(session, "remote_session", refused)
    rc = main(argv)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith("select_features: error: ")
    return lines[0].removeprefix("select_features: error: ")


@pytest.mark.parametrize("given", ["nope.parquet", "file:{cwd}/nope.parquet",
                                   "data/*/part-*.parquet", "{cwd}/nope/{{a,b}}"])
def test_a_missing_local_input_is_one_line_before_spark(plain_env, monkeypatch, capsys, given):
    path = given.format(cwd=plain_env)
    line = _error_before_spark(monkeypatch, capsys,
                               ["--input", path, "--label", "y", "--output", "out"])
    assert line.startswith(f"--input '{path}' does not exist")
    assert list(plain_env.iterdir()) == []  # no --output, no metastore_db, no spark-warehouse


def test_an_existing_input_or_a_remote_one_is_not_refused(plain_env):
    pd.DataFrame({"a": [1], "y": [0]}).to_parquet(plain_env / "t.parquet")
    (plain_env / "data" / "p=1").mkdir(parents=True)
    for path in ("t.parquet", f"file:{plain_env}/t.parquet", "data/*/part-*.parquet",
                 "hdfs://nn/x", "s3a://bucket/x", "dbfs:/mnt/x", "abfss://c@a.dfs/x", None):
        hints.check_input_exists(path)
    hints.check_input_exists("data/q=*/x")  # the pattern's directory is there (Spark matches)
    with pytest.raises(InputError, match="the directory 'other' of the pattern"):
        hints.check_input_exists("other/*.parquet")  # this one's is not


@pytest.mark.parametrize("var,value", [("HADOOP_CONF_DIR", "/etc/hadoop/conf"),
                                       ("YARN_CONF_DIR", "/etc/hadoop/conf"),
                                       ("DATABRICKS_RUNTIME_VERSION", "16.4"),
                                       ("PYSPARK_SUBMIT_ARGS",
                                        "--conf spark.hadoop.fs.defaultFS=hdfs://nn pyspark-shell")])
def test_a_path_without_a_scheme_may_be_on_the_default_file_system(plain_env, monkeypatch,
                                                                    var, value):
    """With Hadoop's configuration about, a path without a scheme is Spark's to find."""
    monkeypatch.setenv(var, value)
    assert not hints.default_fs_is_local()
    hints.check_input_exists("/warehouse/t")
    with pytest.raises(InputError, match="does not exist"):  # a file: URI is still local
        hints.check_input_exists("file:/warehouse/t")


def test_spark_conf_directory_decides_the_default_file_system(plain_env, monkeypatch):
    conf = plain_env / "conf"
    conf.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert hints.default_fs_is_local()  # an empty conf directory
    (conf / "spark-defaults.conf").write_text("spark.driver.memory 4g\n")
    assert hints.default_fs_is_local()
    (conf / "spark-defaults.conf").write_text("spark.hadoop.fs.defaultFS hdfs://nn:8020\n")
    assert not hints.default_fs_is_local()
    (conf / "spark-defaults.conf").unlink()
    (conf / "core-site.xml").write_text("<configuration/>")
    assert not hints.default_fs_is_local()


def test_a_format_typo_is_named_with_the_close_name_before_spark(plain_env, monkeypatch,
                                                                  capsys):
    pd.DataFrame({"a": [1], "y": [0]}).to_parquet(plain_env / "t.parquet")
    line = _error_before_spark(monkeypatch, capsys, ["--input", "t.parquet", "--format",
                                                     "parqet", "--label", "y", "--output", "o"])
    assert line == "unknown --format 'parqet'; did you mean 'parquet'?"
    assert not (plain_env / "o").exists()
    for typo, meant in (("jsn", "json"), ("PARQUETT", "parquet"), ("detla", "delta"),
                        ("binaryfiles", "binaryFile")):
        with pytest.raises(InputError, match=f"did you mean '{meant}'"):
            hints.check_format_name(typo)
    # Spark's names in any case, a class name, a plugin's name far from all: Spark's to find
    for name in ("Parquet", "CSV", "binaryFile", "com.example.MySource", "snowflake", None):
        hints.check_format_name(name)


@pytest.mark.parametrize("flags,message", [
    (["--quiet", "--verbose"], "--quiet and --verbose contradict each other"),
    (["--selection-mode", "gain", "--num-features", "5"],
     "--num-features applies to --selection-mode numTopFeatures, not 'gain'"),
    (["--selection-mode", "fraction", "--num-features", "5", "--selection-threshold", "0.2"],
     "--num-features applies to --selection-mode numTopFeatures, not 'fraction'"),
    (["--selection-threshold", "0.02"],
     "--selection-threshold applies to --selection-mode gain or fraction"),
])
def test_contradicting_flags_are_one_line_before_spark(plain_env, monkeypatch, capsys, flags,
                                                       message):
    line = _error_before_spark(monkeypatch, capsys, ["--input", "in.parquet", "--label", "y",
                                                     "--output", "o", *flags])
    assert line.startswith(message), line
    assert list(plain_env.iterdir()) == []


def test_modes_without_num_features_pass_the_checks_twice():
    """check_args leaves the parsed flags as they are (the default K it fills in is in its
    result only), so checking them again is the same decision, never a --num-features the
    user did not give."""
    from vmi_spark.job import build_parser, check_args

    parsed = build_parser().parse_args(
        ["--input", "t", "--label", "y", "--output", "o", "--selection-mode", "gain"])
    first = check_args(parsed)
    assert parsed.num_features is None and not hasattr(parsed, "settings")
    again = check_args(parsed)
    assert again == first and again.settings.selection_mode == "gain"
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.settings = again.settings  # type: ignore[misc]


def test_check_args_is_one_decision_before_spark(spark, tmp_path, monkeypatch, capsys):
    """issue 44 (d): main checks the arguments once, before Spark, and run() takes them as
    checked (it made the same decision again); unchecked arguments are refused by run(),
    which claims the outputs main's request named (issue 45)."""
    from helpers import random_discrete
    from vmi_spark import job

    calls = []
    real = job.check_args
    monkeypatch.setattr(job, "check_args", lambda a: calls.append(a) or real(a))
    src = tmp_path / "t.parquet"
    random_discrete(3, n=120, d=4).to_parquet(src)
    rc = job.main(["--input", str(src), "--label", "y", "--num-features", "2",
                   "--output", str(tmp_path / "o"), "--quiet"], spark=spark)
    assert rc == 0, capsys.readouterr().err
    assert len(calls) == 1 and calls[0].num_features == 2
    assert len(json.loads((tmp_path / "o" / "selection.json").read_text())["selected"]) == 2
    raw = job.build_parser().parse_args(["--input", str(src), "--label", "y",
                                         "--output", str(tmp_path / "o2")])
    with pytest.raises(ValueError, match="check_args"):
        job.run(raw, object())  # a session it must not touch
    assert not (tmp_path / "o2").exists()
    # run claims the outputs of the request it is given (main's, checked before Spark
    # started), and builds one from the arguments only when given none
    checked = job.check_args(raw)
    given = dataclasses.replace(job.output_request(checked.args), output=str(tmp_path / "o3"))
    job.run(checked, spark, request=given)
    assert (tmp_path / "o3" / "selection.json").is_file() and not (tmp_path / "o2").exists()
    job.run(checked, spark)
    assert (tmp_path / "o2" / "selection.json").is_file()


@pytest.mark.parametrize("flags,message", [
    (["--features", "a, y,b"], "--label 'y' is also listed in --features: the label is never "
                               "a feature"),
    (["--selection-mode", "gain", "--selection-threshold", "inf"],
     "--selection-threshold must be a finite number, got inf"),
    (["--selection-mode", "gain", "--selection-threshold", "1e400"],
     "--selection-threshold must be a finite number, got inf"),
    (["--restart-tolerance", "-nan"], "--restart-tolerance must be a number (-inf: never "
                                      "restart), got nan"),
    (["--num-features", "-3"], "--num-features must be >= 1, got -3"),
])
def test_values_known_from_the_arguments_are_refused_before_spark(plain_env, monkeypatch,
                                                                   capsys, flags, message):
    (plain_env / "in.parquet").write_bytes(b"")
    line = _error_before_spark(monkeypatch, capsys, ["--input", "in.parquet", "--label", "y",
                                                     "--output", "o", *flags])
    assert line == message
    assert [p.name for p in plain_env.iterdir()] == ["in.parquet"]


@pytest.mark.parametrize("given,value", [("-inf", float("-inf")), ("-1e-3", -0.001),
                                         ("-0.5", -0.5), ("=-2", -2.0), ("0.01", 0.01)])
def test_a_negative_number_after_a_space_is_the_flags_value(given, value):
    """``--restart-tolerance -inf`` (the help's own example) is the value, not a flag."""
    from vmi_spark.job import build_parser

    flag = ["--restart-tolerance" + given] if given.startswith("=") else \
        ["--restart-tolerance", given]
    args = build_parser().parse_args(["--input", "x", *flag, "--num-features", "3"])
    assert args.restart_tolerance == value and args.num_features == 3 and args.input == "x"
    with pytest.raises(InputError, match="--input: expected one argument"):
        build_parser().parse_args(["--input", "-inf"])  # not a number flag: argparse's rule


def test_a_write_selected_that_is_a_file_is_refused_before_spark(plain_env, monkeypatch,
                                                                 capsys):
    """Without a Hadoop configuration a path without a scheme is the driver's, so the
    --write-selected checks are made before Spark starts, as --output's are."""
    (plain_env / "in.parquet").write_bytes(b"")
    (plain_env / "afile").write_text("keep me")
    line = _error_before_spark(monkeypatch, capsys, [
        "--input", "in.parquet", "--label", "y", "--output", "o", "--write-selected", "afile"])
    assert line.startswith("--write-selected '") and line.endswith(
        "afile' exists and is not a directory"), line
    assert (plain_env / "afile").read_text() == "keep me"
    assert sorted(p.name for p in plain_env.iterdir()) == ["afile", "in.parquet"]
