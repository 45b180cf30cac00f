"""One parameter specification and one method registry drive every front end.

The job's argparse flags, the ML Params of VMISelector, the scikit-learn selector's
constructor and run_selection's checks all come from vmi_spark.params; a bad value
gives the same message in each, phrased in that front end's own names; and the job
refuses bad arguments before a SparkSession exists. No test here starts Spark.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vmi_spark import params as P
from vmi_spark.core.bound import METHODS as CORE_VMI
from vmi_spark.core.criteria import CLASSIC_METHODS
from vmi_spark.core.greedy import select_classic, select_vmi
from vmi_spark.core.inmemory import InMemoryBackend
from vmi_spark.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the registry
def test_registry_is_exactly_the_cores_methods():
    assert set(P.METHOD_NAMES) == {*CORE_VMI, *CLASSIC_METHODS}
    assert len(P.METHOD_NAMES) == len(set(P.METHOD_NAMES)) == 8
    assert P.VMI_METHODS == ("vmi_naive", "vmi_pairwise") == tuple(CORE_VMI)
    assert [m for m in P.METHOD_NAMES if P.is_vmi(m)] == list(CORE_VMI)
    assert not P.is_vmi("magic") and not P.is_vmi("mim")
    assert [m.name for m in P.METHODS if m.kde] == ["vmi_naive"]


class _Recorder(InMemoryBackend):
    """An in-memory backend that records which count tables the selection asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: list[tuple[str, int]] = []

    def pair_counts(self, f):
        self.asked.append(("pair", f))
        return super().pair_counts(f)

    def pair_counts_many(self, fs):
        self.asked.append(("many", len(fs)))
        return super().pair_counts_many(fs)


@pytest.mark.parametrize("name", P.METHOD_NAMES)
def test_registry_flags_say_what_each_method_asks_for(name):
    """pair_tables_per_step / all_pair_tables are what the core's selection really uses."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    codes = rng.integers(0, 3, (5, 300)).astype(np.uint8)
    codes[0] = y + rng.integers(0, 2, 300)  # informative, so that VMI goes past one step
    codes[1] = (codes[0] + y) % 3
    spec = P.method(name)
    backend = _Recorder(codes, y.astype(np.int64))
    if spec.vmi:
        select_vmi(backend, name, 4, float("-inf"))
    else:
        select_classic(backend, name, 4)
    per_step = [a for a in backend.asked if a[0] == "pair"]
    whole = [a for a in backend.asked if a[0] == "many"]
    assert bool(per_step) == spec.pair_tables_per_step, backend.asked
    if spec.pair_tables_per_step:  # one table a step, of the feature chosen last
        assert len(per_step) >= 3
    assert whole == ([("many", codes.shape[0])] if spec.all_pair_tables else []), backend.asked


# ---------------------------------------------------------------- the specification
def test_spec_keys_and_names_are_unique_and_styled():
    keys = [p.key for p in P.SPEC]
    assert len(keys) == len(set(keys))
    for style, attr in (("ml", "ml"), ("cli", "flag"), ("sklearn", "sklearn")):
        names = [getattr(p, attr) for p in P.SPEC if getattr(p, attr)]
        assert len(names) == len(set(names)), style
    for p in P.SPEC:
        assert p.key == p.key.lower() and " " not in p.key
        if p.flag:
            assert p.flag == "--" + p.key.replace("_", "-"), p.flag
        if p.ml:
            assert p.ml[0].islower() and "_" not in p.ml, p.ml
        if p.choices is not None:
            assert p.default_for("python") in p.choices
        if p.low is not None and p.default_for("python") is not None:
            assert p.default_for("python") >= p.low


def test_spec_bounds_agree_with_the_encoding_limits():
    from vmi_spark.core.encoding import MAX_ARITY

    assert P.parameter("num_bins").high == P.parameter("max_categories").high == MAX_ARITY - 1


def test_spec_choices_are_the_spark_layers():
    from vmi_spark.spark.chunks.storage import STORAGES

    assert P.parameter("chunk_storage").choices == STORAGES


def test_staging_needs_a_staging_dir_before_spark_work():
    from vmi_spark.spark.select import run_selection

    # run_selection's keywords: its own (python) names
    with pytest.raises(P.ParameterError, match=r"^chunk_storage 'staging' needs a staging_dir$"):
        run_selection(None, "y", chunk_storage="staging")  # type: ignore[arg-type]
    with pytest.raises(P.ParameterError, match=r"^unknown chunk_storage 'disk' \(choose from"):
        run_selection(None, "y", chunk_storage="disk")  # type: ignore[arg-type]
    with pytest.raises(P.ParameterError, match=r"^chunkStorage 'staging' needs a stagingDir$"):
        P.Settings.of({"chunk_storage": "staging"}, "ml")
    assert P.validate({"chunk_storage": "staging", "staging_dir": "/tmp/s"})["staging_dir"]


def test_params_module_is_spark_free():
    code = ("import sys, vmi_spark.params, vmi_spark.job; "
            "assert 'pyspark' not in sys.modules, sorted(m for m in sys.modules if 'spark' in m)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_every_cli_flag_comes_from_the_spec():
    import argparse

    from vmi_spark.job import build_parser

    actions = {a.option_strings[0]: a for a in build_parser()._actions if a.option_strings}
    for p in P.SPEC:
        if p.flag is None:
            continue
        a = actions[p.flag]
        assert a.dest == p.key
        if p.type is list:  # comma-separated column names
            assert a.default is None and a.type is None and a.help == p.help("cli"), p.flag
            continue
        if p.key == "num_features":  # the demo's or the job's, decided from the other flags
            assert a.default is None and "default: on the evidence, at most 50; demo 9" \
                in a.help
        elif "cli" in p.aliases:  # either spelling, kept only when given: check_args
            old = actions[p.aliases["cli"]]  # fills in the default (test_aliases.py)
            assert a.default == old.default == argparse.SUPPRESS, p.flag
            assert (old.dest, old.choices, old.help) == (p.aliases["python"], a.choices,
                                                         argparse.SUPPRESS)
        else:
            assert a.default == p.default_for("cli"), p.flag
        assert tuple(a.choices) == p.choices if p.choices else a.choices is None
        assert a.type is (p.type if p.type in (int, float) else None), p.flag
        assert a.help.replace("%%", "%").startswith(p.help("cli")), p.flag


def test_every_ml_param_comes_from_the_spec():
    from vmi_spark.ml import VMISelector, VMISelectorModel

    for cls in (VMISelector, VMISelectorModel):
        obj = cls()
        for p in P.SPEC:
            if p.ml is None:
                continue
            param = obj.getParam(p.ml)
            if p.key == "output_col":  # pyspark's own default: <uid>__output
                assert obj.getOrDefault(param) == obj.uid + "__output"
                continue
            if p.default_for("ml") is None:  # no default: the getter says None
                assert not obj.isDefined(param), p.ml
            else:
                assert obj.getOrDefault(param) == p.default_for("ml"), p.ml
            if p.type is not list and p.key not in ("label", "handle_invalid"):
                assert param.doc == p.help("ml"), p.ml
                getter = getattr(obj, "get" + p.ml[0].upper() + p.ml[1:])
                assert getter() == p.default_for("ml") and getter.__doc__
    # the keyword defaults of the constructor and setParams are the spec's
    for fn in (VMISelector.__init__, VMISelector.setParams):
        sig = inspect.signature(fn)
        for p in P.SPEC:
            if p.ml in sig.parameters and p.key != "output_col":
                assert sig.parameters[p.ml].default == p.default_for("ml"), p.ml


def test_every_sklearn_param_comes_from_the_spec():
    from vmi_spark.sklearn import VMIFeatureSelector

    got = VMIFeatureSelector().get_params()
    want = {p.sklearn: p.default_for("sklearn") for p in P.SPEC if p.sklearn}
    assert got == want
    assert want["n_features_to_select"] is None and P.default("num_features", "ml") is None


def test_readme_parameters_table_is_rendered_from_the_spec():
    """docs/parameters.md holds the full table, the README the compact one: both are
    params.markdown_table, so neither can drift from the spec."""
    full = (ROOT / "docs" / "parameters.md").read_text(encoding="utf-8")
    table = P.markdown_table()
    assert table in full, "docs/parameters.md's table differs from params.markdown_table()"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    compact = P.markdown_table(compact=True)
    assert compact in readme, \
        "README's Parameters table differs from params.markdown_table(compact=True)"
    assert "docs/parameters.md" in readme
    for p in P.SPEC:
        if p.key in P.README_KEYS and p.flag:
            assert f"`{p.flag}`" in table and f"`{p.flag}`" in compact
    for full_row, short_row in zip(table.splitlines(), compact.splitlines()):
        assert _cells(full_row)[:-1] == _cells(short_row)[:-1]  # same names and defaults
        assert len(short_row) <= len(full_row)


def _cells(row):
    """A markdown table row's cells (an escaped ``\\|`` stays inside its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_compact_meaning_is_the_first_clause_and_names_every_choice():
    def meaning(key, compact):
        return _cells(P.markdown_table((key,), compact=compact).splitlines()[-1])[-1]

    short = {p.key: meaning(p.key, True) for p in P.SPEC}
    assert short["weight_col"] == "row weights, a numeric column"
    assert short["stability_fraction"].endswith("in (0, 1)")  # a range in parentheses is kept
    for p in P.SPEC:
        assert len(short[p.key]) <= len(meaning(p.key, False))
        for c in p.choices or ():
            assert f"`{c}`" in short[p.key], (p.key, c)


# ---------------------------------------------------------------- one validation
def test_validate_normalises_and_passes_unknown_keys():
    out = P.validate({"num_features": np.int64(3), "restart_tolerance": 1, "other": "x"})
    assert out == {"num_features": 3, "restart_tolerance": 1.0, "other": "x"}
    assert type(out["num_features"]) is int and type(out["restart_tolerance"]) is float
    assert P.validate({"restart_tolerance": float("-inf")})["restart_tolerance"] == float("-inf")


def test_parameter_error_is_the_input_error_and_names_the_key():
    with pytest.raises(P.ParameterError) as info:
        P.validate({"num_features": 0}, "cli")
    err = info.value
    assert isinstance(err, InputError) and isinstance(err, ValueError)
    assert err.key == "num_features"
    assert str(err) == "--num-features must be >= 1, got 0"
    assert err.phrase("ml") == "numTopFeatures must be >= 1, got 0"
    assert err.phrase("sklearn") == "n_features_to_select must be >= 1, got 0"
    assert err.phrase("python") == "num_features must be >= 1, got 0"
    assert str(err.restyled("ml")) == "numTopFeatures must be >= 1, got 0"


def test_values_with_braces_are_quoted_not_formatted():
    with pytest.raises(P.ParameterError) as info:
        P.validate({"method": "{num_bins}"}, "cli")
    assert str(info.value).startswith("unknown --method '{num_bins}' (choose from vmi_naive,")


#: (values by spec key, the message in ML names)
BAD = [
    ({"num_features": 0}, "numTopFeatures must be >= 1, got 0"),
    ({"num_features": -3}, "numTopFeatures must be >= 1, got -3"),
    ({"num_bins": 1}, "numBins must be between 2 and 255, got 1"),
    ({"num_bins": 256}, "numBins must be between 2 and 255, got 256"),
    ({"max_categories": 0}, "maxCategories must be between 1 and 255, got 0"),
    ({"max_classes": 1}, "maxClasses must be between 2 and 65535, got 1"),
    ({"restart_tolerance": float("nan")},
     "restartTolerance must be a number (-inf: never restart), got nan"),
    ({"method": "vmi_pairwise", "estimator": "kde"},
     "the kde estimator supports method vmi_naive only, not 'vmi_pairwise'"),
    ({"method": "mrmr", "estimator": "kde"},
     "the kde estimator supports method vmi_naive only, not 'mrmr'"),
]


def _cli_error(monkeypatch, capsys, argv):
    _no_spark(monkeypatch)
    from vmi_spark.job import main

    rc = main(argv)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith("select_features: error: ")
    return lines[0].removeprefix("select_features: error: ")


def _cli_args(values):
    argv = ["--input", "in.parquet", "--label", "y", "--output", "out"]
    for key, v in values.items():
        argv += [P.parameter(key).flag, str(v)]
    return argv


@pytest.mark.parametrize("values,ml_message", BAD)
def test_a_bad_value_reads_the_same_in_every_front_end(values, ml_message, monkeypatch, capsys):
    from vmi_spark.ml import VMISelector
    from vmi_spark.sklearn import VMIFeatureSelector

    def in_names(style):
        return P.ParameterError("", ml_message.replace("{", "{{").replace("}", "}}")
                                .replace("numTopFeatures", "{num_features}")
                                .replace("numBins", "{num_bins}")
                                .replace("maxCategories", "{max_categories}")
                                .replace("maxClasses", "{max_classes}")
                                .replace("restartTolerance", "{restart_tolerance}")
                                .replace("estimator supports method",
                                         "{estimator} supports {method}")).phrase(style)

    from vmi_spark.spark.select import run_selection

    # run_selection's own check (before it touches the data) and the ML estimator: ML names
    with pytest.raises(P.ParameterError) as info:
        P.validate(values)
    assert str(info.value) == ml_message
    with pytest.raises(P.ParameterError) as info:
        run_selection(None, "y", **values)  # type: ignore[arg-type]
    assert str(info.value) == in_names("python")  # its keywords' names
    ml = {P.parameter(k).ml: v for k, v in values.items()}
    with pytest.raises(P.ParameterError) as info:
        VMISelector(**ml)._fit(None)  # noqa: SLF001 - refused before the data is looked at
    assert str(info.value) == ml_message
    # the job: its flags
    assert _cli_error(monkeypatch, capsys, _cli_args(values)) == in_names("cli")
    assert "--" in in_names("cli")
    # scikit-learn: its names, where it has the parameter
    sk = {P.parameter(k).sklearn: v for k, v in values.items()}
    if None not in sk:
        rng = np.random.default_rng(0)
        with pytest.raises(ValueError) as info:
            VMIFeatureSelector(**sk).fit(rng.integers(0, 3, (40, 4)), rng.integers(0, 2, 40))
        assert str(info.value) == in_names("sklearn")


def test_ml_setters_refuse_bad_values_with_ml_names():
    from vmi_spark.ml import VMISelector

    sel = VMISelector()
    with pytest.raises(P.ParameterError, match=r"^numTopFeatures must be >= 1, got 0$"):
        sel.setNumTopFeatures(0)
    with pytest.raises(P.ParameterError, match=r"^unknown method 'nope' \(choose from"):
        sel.setMethod("nope")
    with pytest.raises(P.ParameterError, match=r"^unknown estimator 'parzen'"):
        VMISelector(estimator="parzen")
    with pytest.raises(P.ParameterError, match=r"^numBins must be between 2 and 255, got 1$"):
        sel.copy({sel.numBins: 1})
    assert sel.getNumTopFeatures() is None and sel.getNumBins() == 10  # unchanged
    # a value set around the setters is still refused at fit, before the data is read
    sel.set(sel.maxClasses, 1)
    with pytest.raises(P.ParameterError, match=r"^maxClasses must be between 2 and 65535"):
        sel.fit(None)


@pytest.mark.parametrize("name", P.METHOD_NAMES)
def test_every_registry_method_is_accepted_by_every_front_end(name, monkeypatch):
    from vmi_spark.job import build_parser, check_args
    from vmi_spark.ml import VMISelector
    from vmi_spark.sklearn import VMIFeatureSelector

    assert P.validate({"method": name}) == {"method": name}
    checked = check_args(build_parser().parse_args(["--method", name]))
    assert checked.args.method == checked.settings.method == name
    assert VMISelector(method=name).getMethod() == name
    assert VMISelector().setMethod(name).getMethod() == name
    rng = np.random.default_rng(1)
    X, y = rng.integers(0, 3, (60, 3)), rng.integers(0, 2, 60)
    assert len(VMIFeatureSelector(n_features_to_select=2, method=name).fit(X, y)
               .selected_features_) == 2


def test_k_defaults_per_entry_point():
    from vmi_spark.job import build_parser, check_args

    demo = check_args(build_parser().parse_args([]))
    assert demo.args.num_features == demo.settings.num_features == 9  # the demo
    checked = check_args(build_parser().parse_args(["--input", "x", "--label", "y",
                                                    "--output", "o"]))
    assert checked.args.num_features is None  # not given: on the evidence, at most 50
    assert checked.settings.num_features is None
    assert P.Settings.of().num_features is None  # run_selection's, from the spec
    assert P.Settings.of(style="sklearn").num_features is None
    assert P.plan_size(P.Settings.of(), 80)[0] == 50 and P.plan_size(P.Settings.of(), 7)[0] == 7


def test_k_is_capped_in_one_place_with_each_front_ends_names():
    assert P.cap_num_features(5, 5) == (5, None)
    k, note = P.cap_num_features(7, 3)
    assert k == 3 and isinstance(note, P.ParameterWarning)
    assert str(note) == "numTopFeatures 7 is more than the 3 features; selecting at most 3"
    assert note.phrase("cli").startswith("--num-features 7 is more")
    assert note.phrase("sklearn").startswith("n_features_to_select 7 is more")


# ---------------------------------------------------------------- before Spark starts
def _no_spark(monkeypatch):
    """Make creating any SparkSession (classic or Connect) fail the test."""
    import pyspark.sql

    import vmi_spark.spark.session as session

    class Refused:
        def __getattr__(self, name):
            raise AssertionError("the job started building a SparkSession")

    def refused(*a, **k):
        raise AssertionError("the job started a SparkSession")

    monkeypatch.setattr(pyspark.sql.SparkSession, "builder", Refused())
    monkeypatch.setattr(pyspark.sql.SparkSession, "__init__", refused)
    monkeypatch.setattr(session, "remote_session", refused)
    monkeypatch.setattr(session, "check_reachable", refused)


#: argv (after --input/--label/--output unless it starts with "!"), the flag named
JOB_CASES = {
    "K zero": (["--num-features", "0"], "--num-features must be >= 1, got 0"),
    "K negative": (["--num-features", "-3"], "--num-features must be >= 1, got -3"),
    "one bin": (["--num-bins", "1"], "--num-bins must be between 2 and 255, got 1"),
    "too many bins": (["--num-bins", "300"], "--num-bins must be between 2 and 255, got 300"),
    "no categories": (["--max-categories", "0"], "--max-categories must be between 1 and 255"),
    "one class": (["--max-classes", "1"], "--max-classes must be between 2 and 65535, got 1"),
    "nan tolerance": (["--restart-tolerance", "nan"], "--restart-tolerance must be a number"),
    "kde pairwise": (["--estimator", "kde", "--method", "vmi_pairwise"],
                     "the kde --estimator supports --method vmi_naive only, not 'vmi_pairwise'"),
    "negative candidates": (["--report-candidates", "-1"], "--report-candidates must be >= 0"),
    "empty feature": (["--features", "a,,b"], "--features has an empty column name"),
    "no label": (["!", "--input", "in.parquet", "--output", "o"], "--label is required"),
    "no output": (["!", "--input", "in.parquet", "--label", "y"], "--output is required"),
    "table no output": (["!", "--table", "db.t", "--label", "y"], "--output is required"),
    "label without input": (["!", "--label", "y"], "--input or --table is required"),
    "demo rows": (["!", "--demo-rows", "0"], "--demo-rows must be between 1 and 1000000, got 0"),
    "demo rows huge": (["!", "--demo-rows", "1000000000000"],  # a MemoryError traceback
                       "--demo-rows must be between 1 and 1000000, got 1000000000000"),
    "demo K": (["!", "--num-features", "0"], "--num-features must be >= 1, got 0"),
    "bad remote": (["--remote", "localhost:15002"], "--remote must be sc://host:port or local[N]"),
}


@pytest.mark.parametrize("case", JOB_CASES)
def test_bad_arguments_exit_2_before_spark_starts(case, monkeypatch, capsys, tmp_path):
    argv, message = JOB_CASES[case]
    monkeypatch.chdir(tmp_path)
    argv = argv[1:] if argv[:1] == ["!"] else \
        ["--input", "in.parquet", "--label", "y", "--output", "out", *argv]
    line = _cli_error(monkeypatch, capsys, argv)
    assert line.startswith(message) or message in line, line
    assert "Traceback" not in line and list(tmp_path.iterdir()) == []
