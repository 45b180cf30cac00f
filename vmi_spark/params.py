"""The method registry and the parameter specification, shared by every front end.

Spark-free (it imports only the numpy core's criteria registry). The spark-submit job
(:mod:`vmi_spark.job`), the Spark ML estimator (:mod:`vmi_spark.ml`), the scikit-learn
selector (:mod:`vmi_spark.sklearn`) and :func:`vmi_spark.spark.select.run_selection`
take their method list, parameter names, defaults, ranges and documentation from here,
and check values with :func:`validate`, so that a bad value gives the same message in
each front end, phrased in that front end's own names::

    --num-features must be >= 1, got 0        (the job)
    numTopFeatures must be >= 1, got 0        (VMISelector)
    n_features_to_select must be >= 1, got 0  (VMIFeatureSelector)

The Parameters tables (docs/parameters.md's in full, the README's compact) are
:func:`markdown_table`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .core.binning import DEFAULT_LABEL_BINS, LABEL_TYPES
from .core.binning import STRATEGIES as BINNINGS
from .core.bound import NAIVE
from .core.criteria import CRITERIA, criterion
from .core.criterion import Criterion
from .core.suspects import DROP_CHOICES
from .errors import ParameterError, ParameterWarning, literal, register_names

__all__ = ["Settings", "Method", "METHODS", "METHOD_NAMES", "VMI_METHODS", "is_vmi", "method",
           "Parameter", "SPEC", "STYLES", "ParameterError", "ParameterWarning", "validate",
           "unalias", "as_given",
           "check", "default", "defaults", "display_name", "cap_num_features", "plan_size", "corrections", "markdown_table",
           "selection_size", "stops_on_evidence", "DEFAULT_THRESHOLDS", "AUTO_MAX_FEATURES"]

#: the names a front end gives the parameters: ``python`` (run_selection's keywords),
#: ``ml`` (VMISelector's Params), ``cli`` (the job's flags), ``sklearn`` (VMIFeatureSelector)
STYLES = ("python", "ml", "cli", "sklearn")

#: front ends whose default may differ from a parameter's own (see :attr:`Parameter.defaults`)
ENTRY_POINTS = ("python", "ml", "cli", "sklearn", "demo")


# ---------------------------------------------------------------------------
# Method registry
# ---------------------------------------------------------------------------

#: one selection method and what it needs from a backend: a criterion of the core's
#: registry (:class:`vmi_spark.core.criterion.Criterion`: ``name``, ``vmi``,
#: ``pair_tables_per_step``, ``all_pair_tables``, ``kde``, ``unit``/``nats``,
#: ``description``)
Method = Criterion

#: every selection method: the two VMI Q-distributions, then the paper's comparison
#: criteria (the core's built-in criteria, :data:`vmi_spark.core.criteria.CRITERIA`)
METHODS: tuple[Method, ...] = CRITERIA
METHOD_NAMES: tuple[str, ...] = tuple(m.name for m in METHODS)
VMI_METHODS: tuple[str, ...] = tuple(m.name for m in METHODS if m.vmi)


def method(name: str) -> Method:
    """The registry entry of method ``name`` (``KeyError`` if there is none)."""
    return criterion(name)


def is_vmi(name: str) -> bool:
    """True for a Q-distribution of the VMI bound, False for a comparison criterion."""
    try:
        return criterion(name).vmi
    except KeyError:
        return False


# ---------------------------------------------------------------------------
# Parameter specification
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Parameter:
    """One parameter: its names in every front end, type, default, range and meaning.

    ``key`` is the keyword of :func:`~vmi_spark.spark.select.run_selection` (and the
    job's argparse ``dest``); ``ml``, ``flag`` and ``sklearn`` are the names in the
    other front ends, None where a front end does not have the parameter. ``low`` and
    ``high`` bound a number (inclusive), ``choices`` a string; a float is finite and not
    nan unless ``allow_inf`` / ``allow_nan``. ``defaults`` overrides
    ``default`` for some entry points (``sklearn``, ``demo``). ``role`` says where the
    value goes: ``result`` (it changes the selection: in :class:`Settings`, the report's
    ``parameters`` and a checkpoint's fingerprint), ``run`` (how the selection runs: in
    :class:`Settings` only), ``columns`` (which columns: a keyword of its own) or ``job``
    (the job's alone). ``doc`` is the meaning
    (markdown: backticks mark code; ``{key}`` names another parameter) used for the
    README; :meth:`help` is that text for one front end (``docs`` may override it):
    parameter names in its style, no markdown, no ``readme_only`` fragments (references
    to other README sections). ``readme_default`` is the README's default cell if not
    ``default``.
    """

    key: str
    type: type
    default: Any
    doc: str
    ml: str | None = None
    flag: str | None = None
    sklearn: str | None = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    allow_nan: bool = False
    allow_inf: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    readme_default: str | None = None
    readme_only: tuple[str, ...] = ()
    metavar: str | None = None
    docs: Mapping[str, str] = field(default_factory=dict)
    role: str = "result"
    #: the scikit-learn selector's name for a parameter of ``fit`` (not of the constructor)
    fit_arg: str | None = None
    #: earlier names still accepted, by style (``python``, ``ml``, ``cli``): see :func:`unalias`
    aliases: Mapping[str, str] = field(default_factory=dict)

    def name(self, style: str) -> str:
        """This parameter's name in front end ``style`` (one of :data:`STYLES`)."""
        name = {"python": self.key, "ml": self.ml, "cli": self.flag,
                "sklearn": self.sklearn or self.fit_arg}[style]
        return name if name is not None else self.key

    def default_for(self, entry_point: str) -> Any:
        """The default of this parameter in ``entry_point`` (one of :data:`ENTRY_POINTS`)."""
        return self.defaults.get(entry_point, self.default)

    def help(self, style: str) -> str:
        """The meaning for front end ``style``: its names, no markdown or README references."""
        text = self.docs.get(style, self.doc)
        for fragment in self.readme_only:
            text = text.replace(fragment, "")
        if style in self.aliases:
            text += f" (earlier name: {self.aliases[style]})"
        return _phrase(text, style).replace("`", "").replace("\\|", "|")

    def readme(self) -> str:
        """The meaning for the README's table (markdown, the ML names)."""
        earlier = ", ".join(f"`{self.aliases[s]}`" for s in ("ml", "cli") if s in self.aliases)
        return _phrase(self.doc, "ml") + (f" (earlier names: {earlier})" if earlier else "")


_METHOD_DOC = ("`vmi_naive` or `vmi_pairwise`; or a comparison criterion "
               + ", ".join(f"`{m.name}`" for m in METHODS if not m.vmi))

#: the parameters, in the README's order
SPEC: tuple[Parameter, ...] = (
    Parameter("features", list, None, "vector column, or ordinary columns (`inputCols` wins if "
              "set)", ml="featuresCol", flag="--features", defaults={"ml": "features"},
              docs={"cli": "comma-separated feature columns, or one vector column (a Spark ML "
                           "features vector: its elements are the candidates) (default: all "
                           "but the label)"},
              readme_default="`features` / all columns but the label", role="columns"),
    Parameter("exclude", list, None, "columns to leave out of the features (with all "
              "columns as features, with `{features}`, or elements of a vector)", ml="excludeCols", flag="--exclude",
              sklearn="exclude", metavar="COLS", role="columns",
              docs={"cli": "comma-separated columns to leave out of the features (e.g. IDs "
                           "and dates you do not want selected)"}),
    Parameter("label", str, "label", "class label (numeric or string), or a numeric "
              "regression target (`{label_type}`)", ml="labelCol",
              flag="--label", defaults={"cli": None},
              docs={"cli": "label column: a class label (numeric or string) or a numeric "
                           "regression target (see --label-type)"}, role="columns"),
    Parameter("num_features", int, None, "K; not given: every feature the evidence "
              "supports, at most 50 (the selection ends when no remaining feature is "
              "significant, `stop_reason` `not_significant`)", ml="numTopFeatures",
              flag="--num-features", sklearn="n_features_to_select", low=1,
              defaults={"demo": 9}, readme_default="auto, <= 50 (demo: 9)", metavar="K",
              docs=dict.fromkeys(("ml", "cli"), "number of features to select (K); capped at "
                                                "the number of features, with a warning; not "
                                                "given: until no remaining feature is "
                                                "significant (G-test at 5%, Bonferroni), at "
                                                "most 50")),
    Parameter("method", str, NAIVE, _METHOD_DOC, ml="method", flag="--method",
              sklearn="method", choices=METHOD_NAMES),
    Parameter("selection_mode", str, "numTopFeatures", "how many features to select: "
              "`numTopFeatures` (K = `{num_features}`), `gain` (until the best candidate "
              "raises the bound, or for a comparison criterion scores, less than "
              "`{selection_threshold}` nats and no restart would help) or `fraction` (that "
              "fraction of the candidates, rounded down, at least 1)", ml="selectionMode",
              flag="--selection-mode", sklearn="selection_mode",
              choices=("numTopFeatures", "gain", "fraction")),
    Parameter("selection_threshold", float, None, "the `gain` mode's least gain in nats "
              "(default: none, the selection ends when no remaining candidate is significant "
              "for the table's size) or the `fraction` mode's fraction (default 0.1); unused "
              "by `numTopFeatures`", ml="selectionThreshold", flag="--selection-threshold",
              sklearn="selection_threshold", low=0.0, metavar="X",
              readme_default="significance (`gain`), 0.1 (`fraction`)"),
    Parameter("restart_tolerance", float, 0.0,
              "start a new block when the best candidate raises the bound by no more than this "
              "(nats); 0.0 is the paper's Algorithm 1, the authors' program uses 0.01, `-inf` "
              "never restarts", ml="restartTolerance", flag="--restart-tolerance",
              sklearn="restart_tolerance", allow_inf=True),
    Parameter("bias_correction", str, "significance", "how candidates' gains are compared "
              "(`vmi_naive`, `vmi_pairwise`; histogram estimator): `significance` (each gain "
              "less the gain a feature independent of the label reaches by chance, "
              "(A-1)(L-1)/2N nats for A states, L classes and N rows, and a block grows only "
              "with a gain significant at 5% by the G-test, Bonferroni over the candidates; "
              "else it restarts from the most relevant remaining feature), `chance` (the "
              "chance correction alone: a block restarts when no candidate beats chance) or "
              "`none` (the paper's plug-in gains)",
              ml="biasCorrection", flag="--bias-correction", sklearn="bias_correction",
              choices=("significance", "chance", "none"), defaults={"demo": "none"},
              readme_default="`significance` (demo: `none`)"),
    Parameter("drop_suspects", str, "identifiers", "which suspect features are left out of "
              "the candidates: `identifiers` (a column with a value of its own in nearly every "
              "row, or a row number), `all` (also suspected leaks: a column that carries at "
              "least 90% of the information it and the label can share, or whose missing "
              "values mark a class) or `none`; every suspect is named in the log and the "
              "report either way", ml="dropSuspects", flag="--drop-suspects",
              sklearn="drop_suspects", choices=DROP_CHOICES),
    Parameter("num_bins", int, 10, "equal-frequency bins for numeric columns with more than "
              "`{max_categories}` values (2..255)", ml="numBins", flag="--num-bins",
              sklearn="num_bins", low=2, high=255),
    Parameter("binning", str, "quantile", "how numeric columns with more than "
              "`{max_categories}` values are cut into `{num_bins}` states: `quantile` "
              "(equal-frequency; a value holding more than 1/`{num_bins}` of the rows, such "
              "as 0 or a sentinel, is a state of its own), `uniform` (equal width between "
              "the 0.5% and 99.5% quantiles) or `mdlp` (Fayyad-Irani supervised cuts with the MDL "
              "stopping rule, at most `{num_bins}` states; inflates the fitted column's MI)",
              ml="binning", flag="--binning", sklearn="binning", choices=BINNINGS),
    Parameter("max_categories", int, 32, "numeric columns with at most this many distinct "
              "values are used as categories (1..255)", ml="maxCategories",
              flag="--max-categories", sklearn="max_categories", low=1, high=255),
    Parameter("max_classes", int, 1000, "most distinct label values", ml="maxClasses",
              flag="--max-classes", low=2, high=65535),
    Parameter("label_type", str, "auto", "`categorical` (classes), `continuous` (a regression "
              "target, cut into `{label_bins}` spike-aware equal-frequency classes) or `auto` "
              "(a numeric label with more than `{label_bins}` distinct values is continuous, "
              "whole numbers or not; strings, booleans and numbers with fewer values are "
              "classes)", ml="labelType", flag="--label-type",
              sklearn="label_type", choices=LABEL_TYPES),
    Parameter("label_bins", int, DEFAULT_LABEL_BINS, "classes of a continuous label (2..255)",
              ml="labelBins", flag="--label-bins", sklearn="label_bins", low=2, high=255),
    Parameter("handle_invalid", str, "keep", "missing feature values (null, NaN): `keep` as "
              "their own state, `skip` the row, `error`", ml="handleInvalid",
              flag="--handle-invalid", choices=("keep", "skip", "error")),
    Parameter("estimator", str, "histogram", "p(x_i \\| y) of continuous columns: `histogram` "
              "(the `{num_bins}` equal-frequency bins) or `kde` (binned Gaussian KDE; "
              "`vmi_naive` only)", ml="estimator", flag="--estimator",
              choices=("histogram", "kde")),
    Parameter("checkpoint_dir", str, None, "save the state after every step and resume from "
              "it (Usage)", flag="--checkpoint-dir", metavar="DIR", readme_only=(" (Usage)",),
              docs={"cli": "save the selection state after every step in DIR (driver file "
                           "system); rerunning the same command resumes after the last saved "
                           "step"}, role="run"),
    Parameter("execution", str, "auto", "`driver` (a small table, at most 200,000 rows and "
              "64M cells, read, encoded and selected in the driver: no Spark job per pass), "
              "`resident` (one job of long-running tasks; a round trip per step), `passes` (a "
              "Spark job per pass), `auto` (driver for a small table, else resident where "
              "possible; the estimator's choice)", flag="--execution",
              choices=("auto", "driver", "resident", "passes"),
              readme_only=("; the estimator's choice",),
              docs={"cli": "how the selection runs: `driver` (a small table, at most 200,000 "
                           "rows and 64M cells, in the driver), `resident` (one job of "
                           "long-running tasks; a round trip per step), `passes` (a Spark job "
                           "per pass), `auto` (driver for a small table, else resident where "
                           "the session allows it; the same result every way)"}, role="run"),
    Parameter("reader", str, "auto", "Parquet `--input`: `auto` reads with pyarrow in the "
              "workers when it can, `spark` with Spark's reader", flag="--reader",
              choices=("auto", "spark"),
              docs={"cli": "how a Parquet --input is read: `auto` with pyarrow in the Python "
                           "workers when it can (same result, faster on wide tables), `spark` "
                           "with Spark's reader"}, role="run"),
    Parameter("output_col", str, None, "output vector column (vector input only)",
              ml="outputCol", readme_default="`<uid>__output`", role="columns"),
    Parameter("chunk_storage", str, "auto", "where the encoded rows live between passes: "
              "`auto` (resident tasks over Parquet read by pyarrow encode the rows they "
              "hold, nothing cached; else Spark's cache; where the session refuses caching, "
              "as Databricks serverless does, a copy under `{staging_dir}` if given, else "
              "recomputed per pass), `cache`, `staging` or `recompute`", ml="chunkStorage",
              flag="--chunk-storage", choices=("auto", "cache", "staging", "recompute"), role="run",
              aliases={"python": "block_storage", "ml": "blockStorage", "cli": "--block-storage"}),
    Parameter("staging_dir", str, None, "a directory Spark can write and read (e.g. a Unity "
              "Catalog volume) for a copy of the encoded rows where the session cannot cache "
              "them; the copy is removed afterwards", ml="stagingDir", flag="--staging-dir",
              metavar="DIR", role="run"),
    Parameter("report_candidates", int, 0, "also report the best N candidates and their scores "
              "at each step", flag="--report-candidates", low=0, metavar="N", role="run"),
    Parameter("demo_rows", int, 5000, "rows of the demo data (no --input/--table)",
              flag="--demo-rows", low=1, high=1_000_000, metavar="N", role="job"),
    Parameter("weight_col", str, None, "row weights, a numeric column (Spark ML's "
              "convention): a row of weight w counts as w rows in every count, table and step, "
              "weight 0 as absent; whole numbers are used as they are (the same bits as "
              "repeating each row w times), others are rounded to 1/1024; null, NaN, negative "
              "or all-zero weights are refused", ml="weightCol", flag="--weight-col",
              metavar="COL", role="columns", fit_arg="sample_weight"),
    Parameter("stability", int, 0, "also run B selections on random half-samples of the "
              "rows (drawn over the encoded rows: no second read) and report each feature's "
              "selection frequency and mean rank and the stability index of Nogueira et al. "
              "(2018) with its 95 percent confidence interval; 0 (the default) runs none, else at least "
              "2", ml="stabilityRuns", flag="--stability", sklearn="stability", low=0,
              high=10000, metavar="B", role="run"),
    Parameter("stability_seed", int, 0, "seed of the stability runs' half-samples (a row is "
              "kept by a hash of its encoded values, the seed and the run: the same rows for "
              "any partitioning, reader or execution)", ml="stabilitySeed",
              flag="--stability-seed", sklearn="stability_seed", low=0, high=2**63 - 1,
              metavar="S", role="run"),
    Parameter("stability_fraction", float, 0.5, "the share of the rows each stability run "
              "keeps, in (0, 1)", ml="stabilityFraction", flag="--stability-fraction",
              sklearn="stability_fraction", low=0.0, high=1.0, metavar="F", role="run"),
    Parameter("previous", str, None, "an earlier run's `--output`: adds `changes` (features "
              "that entered or left, rank moves, the Jaccard index, schema and row-count "
              "changes) to selection.json and report.md; an unreadable one is a warning",
              flag="--previous", metavar="DIR", role="job"),
    Parameter("fail_on_change", bool, False, "exit with status 3, after writing the outputs, "
              "when the selected set differs from `--previous`'s", flag="--fail-on-change",
              role="job"),
    Parameter("threads", int, None, "threads the in-memory selector's steps run on: None or "
              "-1 every core the process may use (its CPU affinity and CPU quota, at most 8), "
              "1 one; the same result on any number", sklearn="n_jobs", low=-1, role="run"),
)
_SPEC = {p.key: p for p in SPEC}

#: keys shown in the README's Parameters table (the others are in its Usage section)
README_KEYS = ("features", "exclude", "label", "weight_col", "num_features", "selection_mode",
               "selection_threshold", "method", "restart_tolerance", "bias_correction",
               "drop_suspects",
               "num_bins", "binning",
               "max_categories", "max_classes", "label_type", "label_bins", "handle_invalid", "estimator", "checkpoint_dir",
               "execution", "reader", "output_col", "chunk_storage", "staging_dir",
               "stability", "stability_seed", "stability_fraction", "previous",
               "fail_on_change")


def parameter(key: str) -> Parameter:
    """The specification of parameter ``key`` (``KeyError`` if there is none)."""
    return _SPEC[key]


def display_name(key: str, style: str = "ml") -> str:
    """The name of parameter ``key`` in front end ``style`` (``key`` itself if unknown)."""
    p = _SPEC.get(key)
    return p.name(style) if p is not None else key


def default(key: str, entry_point: str = "python") -> Any:
    """The default of parameter ``key`` in ``entry_point``."""
    return _SPEC[key].default_for(entry_point)


def defaults(style: str, entry_point: str | None = None) -> dict[str, Any]:
    """``{name in style: default}`` of the parameters front end ``style`` has."""
    out = {}
    for p in SPEC:
        if style == "python" or getattr(p, {"ml": "ml", "cli": "flag",
                                            "sklearn": "sklearn"}[style]) is not None:
            out[p.name(style)] = p.default_for(entry_point or style)
    return out


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------

def names(style: str) -> dict[str, str]:
    """``{key: name}`` of every parameter in front end ``style`` (for message templates)."""
    return {p.key: p.name(style) for p in SPEC}


def unalias(values: Mapping[str, Any], style: str, message_style: str | None = None
            ) -> dict[str, Any]:
    """``values`` (by the names of front end ``style``) with each earlier name of a
    parameter (:attr:`Parameter.aliases`) replaced by its name: the one place every front
    end reads both.

    Raises
    ------
    ParameterError
        If a parameter is given under both names (phrased in ``message_style``'s names,
        else ``style``'s).

    Examples
    --------
    >>> unalias({"block_storage": "cache", "method": "vmi_naive"}, "python")
    {'method': 'vmi_naive', 'chunk_storage': 'cache'}
    """
    out = dict(values)
    for p in SPEC:
        old = p.aliases.get(style)
        if old is None or old not in out:
            continue
        if p.name(style) in out:
            shown = p.aliases.get(message_style or style, old)
            raise ParameterError(p.key, f"{{{p.key}}} and {shown} (its earlier name) are both "
                                        "given: give one", message_style or style)
        out[p.name(style)] = out.pop(old)
    return out


@contextmanager
def as_given(values: Mapping[str, Any], style: str, message_style: str | None = None
             ) -> Iterator[dict[str, Any]]:
    """:func:`unalias` of ``values`` for the block, whose :class:`ParameterError` about a
    parameter given under its earlier name names it as the user gave it (in
    ``message_style``'s names, else ``style``'s).

    Examples
    --------
    >>> with as_given({"block_storage": "x"}, "python") as given:
    ...     check("chunk_storage", given["chunk_storage"], "python")
    Traceback (most recent call last):
    ...
    vmi_spark.errors.ParameterError: unknown chunk_storage (given as block_storage) 'x' (choose from auto, cache, staging, recompute)
    """
    out = unalias(values, style, message_style)
    shown = message_style or style
    old = {p.key: p.aliases.get(shown, p.aliases[style]) for p in SPEC
           if p.aliases.get(style) in values}
    try:
        yield out
    except ParameterError as exc:
        template = exc.template
        for key, name in old.items():
            template = template.replace("{" + key + "}",
                                        "{" + key + "} (given as " + literal(name) + ")", 1)
        if template == exc.template:
            raise
        raise ParameterError(exc.key, template, exc.style) from None


def _phrase(template: str, style: str) -> str:
    """Fill the ``{key}`` placeholders of ``template`` with the names of ``style``."""
    return template.format_map(names(style))


_literal = literal
register_names(names)


def _fail(key: str, problem: str, style: str) -> ParameterError:
    return ParameterError(key, "{" + key + "} " + problem, style)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and \
        type(v).__name__ != "bool_"


def _number(x: float) -> str:
    """A bound as written: integers in full (1000000, not 1e+06)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _range(p: Parameter) -> str:
    if p.low is not None and p.high is not None:
        return f"must be between {_number(p.low)} and {_number(p.high)}"
    return f"must be >= {_number(p.low)}" if p.low is not None else \
        f"must be <= {_number(p.high)}"  # type: ignore[arg-type]


def check(key: str, value: Any, style: str = "ml") -> Any:
    """Check one parameter value; returns it normalised (``int``, ``float`` or ``str``).

    Raises
    ------
    ParameterError
        If the value has the wrong type, is out of range or not a choice (a list of
        column names given as one string included); the message names the parameter as
        front end ``style`` does.
    """
    p = _SPEC[key]
    shown = _literal(repr(value))
    if value is None:
        if p.default is None or key in ("label",):
            return None
        raise _fail(key, f"must be given, got {shown}", style)
    if p.type is int:
        if not _is_int(value):
            raise _fail(key, f"must be an integer, got {shown}", style)
        value = int(value)
    elif p.type is float:
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise _fail(key, f"must be a number, got {shown}", style)
        value = float(value)
        if math.isnan(value) and not p.allow_nan:
            never = " (-inf: never restart)" if key == "restart_tolerance" else ""
            raise _fail(key, f"must be a number{never}, got nan", style)
        if math.isinf(value) and not p.allow_inf:
            raise _fail(key, f"must be a finite number, got {shown}", style)
    elif p.type is bool:
        if not isinstance(value, (bool, np.bool_)):
            raise _fail(key, f"must be true or false, got {shown}", style)
        value = bool(value)
    elif p.type is list:  # column names: a string is one name given bare, never split
        if isinstance(value, str):
            raise _fail(key, f"must be a list of column names, got the string {shown} "
                             f"(one column: [{shown}])", style)
        try:
            value = list(value)
        except TypeError:
            raise _fail(key, f"must be a list of column names, got {shown}", style) from None
        if not all(isinstance(v, str) for v in value):
            raise _fail(key, f"must be a list of column names, got {shown}", style)
    elif p.type is str:
        if not isinstance(value, str):
            raise _fail(key, f"must be a string, got {shown}", style)
        if p.choices is not None and value not in p.choices:
            raise ParameterError(key, f"unknown {{{key}}} {shown} (choose from "
                                      f"{', '.join(p.choices)})", style)
    if p.type in (int, float) and ((p.low is not None and value < p.low)
                                   or (p.high is not None and value > p.high)):
        raise _fail(key, f"{_range(p)}, got {shown}", style)
    return value


def validate(values: Mapping[str, Any], style: str = "ml") -> dict[str, Any]:
    """Check parameter values and their combinations; returns them normalised.

    Parameters
    ----------
    values : mapping
        ``{key: value}`` by :attr:`Parameter.key` (``num_features``, ``method``, ...);
        keys not in :data:`SPEC` are passed through unchecked.
    style : str
        Whose names the error message uses: ``python``, ``ml``, ``cli`` or ``sklearn``.

    Returns
    -------
    dict
        The values, numbers as ``int``/``float``.

    Raises
    ------
    ParameterError
        For the first bad value (one line naming the parameter).
    """
    out = {k: (check(k, v, style) if k in _SPEC else v) for k, v in values.items()}
    m, est = out.get("method"), out.get("estimator")
    if est == "kde" and m is not None and not method(m).kde:
        supported = ", ".join(x.name for x in METHODS if x.kde)
        raise ParameterError("estimator", f"the kde {{estimator}} supports {{method}} "
                                          f"{supported} only, not {_literal(repr(m))}", style)
    mode, threshold = out.get("selection_mode"), out.get("selection_threshold")
    if mode == "fraction" and threshold is not None and not 0.0 < threshold <= 1.0:
        raise ParameterError("selection_threshold", "{selection_threshold} must be a fraction "
                             f"in (0, 1] with {{selection_mode}} 'fraction', got {threshold!r}",
                             style)
    if mode == "gain" and m is not None and not method(m).nats:
        raise ParameterError("selection_mode", f"{{selection_mode}} 'gain' is not defined for "
                             f"{{method}} {m!r} (its scores are {method(m).unit}, not nats)",
                             style)
    if out.get("threads") == 0:
        raise ParameterError("threads", "{threads} must be a number of threads, or -1 or None "
                             "(every core the process may use), got 0", style)
    fraction = out.get("stability_fraction")
    if fraction is not None and not 0.0 < fraction < 1.0:
        raise ParameterError("stability_fraction", "{stability_fraction} must be a fraction "
                             f"in (0, 1), got {fraction!r}", style)
    if out.get("stability") == 1:
        raise ParameterError("stability", "{stability} must be 0 (none) or at least "
                             "2 (a stability index compares runs), got 1", style)
    if out.get("chunk_storage") == "staging" and "staging_dir" in out \
            and out["staging_dir"] is None:
        raise ParameterError("chunk_storage", "{chunk_storage} 'staging' needs a {staging_dir}",
                             style)
    return out


class Settings(Mapping[str, Any]):
    """The checked parameters of one selection, by spec key: built once at each front
    end (:meth:`of`) from the values it was given and the spec's defaults, validated
    once, and passed down whole.

    Holds every parameter whose :attr:`Parameter.role` is ``result`` or ``run``; read
    them as ``settings["num_bins"]`` or ``settings.num_bins``. Immutable:
    :meth:`replace` gives a new, checked object.

    Examples
    --------
    >>> s = Settings.of({"num_features": 5}, "python")
    >>> s.num_features, s.method
    (5, 'vmi_naive')
    >>> s.replace(num_bins=1)
    Traceback (most recent call last):
    ...
    vmi_spark.errors.ParameterError: num_bins must be between 2 and 255, got 1
    """

    KEYS: tuple[str, ...] = ()  # filled below from the spec

    def __init__(self, values: Mapping[str, Any], style: str = "python") -> None:
        self._values = dict(values)
        self._style = style

    @classmethod
    def of(cls, values: Mapping[str, Any] | None = None, style: str = "python",
           entry_point: str | None = None) -> Settings:
        """The settings of ``values`` (spec keys; missing ones take the defaults of
        ``entry_point``, else of ``style``), checked with :func:`validate`; a bad value
        is a :class:`ParameterError` phrased in ``style``'s names."""
        given = dict(values or {})
        unknown = sorted(set(given) - set(cls.KEYS))
        if unknown:
            raise TypeError(f"unknown parameter {unknown[0]!r}")
        full = {k: given[k] if k in given else _SPEC[k].default_for(entry_point or style)
                for k in cls.KEYS}
        return cls(validate(full, style), style)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (spec keys), checked."""
        return Settings.of({**self._values, **changes}, self._style)

    @property
    def style(self) -> str:
        """The front end whose names messages about these settings use."""
        return self._style

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__dict__["_values"][key]
        except KeyError:
            raise AttributeError(key) from None

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Settings({self._values!r})"

    def result(self) -> dict[str, Any]:
        """The parameters that change the selection (role ``result``), for the report's
        ``parameters`` and a checkpoint's fingerprint."""
        return {k: v for k, v in self._values.items() if _SPEC[k].role == "result"}


Settings.KEYS = tuple(p.key for p in SPEC if p.role in ("result", "run"))


#: the threshold of each selection mode when none is given
DEFAULT_THRESHOLDS = {"fraction": 0.1}


#: the most features a selection without K takes (it stops earlier on the evidence)
AUTO_MAX_FEATURES = 50


def selection_size(mode: str, threshold: float | None, num_features: int | None,
                   available: int) -> tuple[int, float | None]:
    """The most features to select and the least gain, for ``mode`` over ``available``.

    ``numTopFeatures`` selects ``num_features`` (capped later by :func:`cap_num_features`),
    or without it at most :data:`AUTO_MAX_FEATURES` (stopping on the evidence:
    :func:`stops_on_evidence`); ``gain`` may select every feature and stops on the gain
    ``threshold`` (without one, on the evidence); ``fraction``
    selects ``floor(threshold * available)`` features, at least one. As in Spark's
    ``UnivariateFeatureSelector``, ``num_features`` is used by its own mode only.

    Returns
    -------
    (int, float or None)
        K and the least gain (None: no gain threshold).
    """
    if mode == "numTopFeatures":
        if num_features is None:  # until the evidence stops (stops_on_evidence)
            return min(AUTO_MAX_FEATURES, available), None
        return num_features, None
    if mode == "gain":  # without a threshold: until the evidence stops
        return available, threshold
    t = DEFAULT_THRESHOLDS[mode] if threshold is None else threshold
    return max(1, math.floor(t * available + 1e-9)), None


#: the level of the G-test of ``biasCorrection='significance'`` (before Bonferroni)
SIGNIFICANCE_LEVEL = 0.05


def stops_on_evidence(settings: Mapping[str, Any]) -> bool:
    """Whether the selection ends where the evidence does: no K given
    (``numTopFeatures``), or ``gain`` without a threshold. An explicit K gives K."""
    mode = settings["selection_mode"]
    return (mode == "numTopFeatures" and settings["num_features"] is None) or \
        (mode == "gain" and settings["selection_threshold"] is None)


def corrections(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The greedy loop's keywords for ``bias_correction`` and the stopping rule
    (:func:`vmi_spark.core.greedy.select`'s ``chance``, ``significance`` and
    ``stop_level``): the corrections are off with ``none`` and with the ``kde``
    estimator, whose smoothed tables the plug-in chance level does not describe; the
    G-test at :data:`SIGNIFICANCE_LEVEL` ends a selection given no K
    (:func:`stops_on_evidence`)."""
    mode = settings["bias_correction"]
    on = mode != "none" and settings["estimator"] == "histogram"
    return {"chance": on,
            "significance": SIGNIFICANCE_LEVEL if on and mode == "significance" else None,
            "stop_level": SIGNIFICANCE_LEVEL if stops_on_evidence(settings) else None}


def plan_size(settings: Mapping[str, Any], available: int
              ) -> tuple[int, float | None, ParameterWarning | None]:
    """How many of ``available`` features a selection may take and its least gain
    (:func:`selection_size`), K capped at ``available`` (:func:`cap_num_features`), and
    the warning to give if it was: the one rule every front end applies."""
    k, min_gain = selection_size(settings["selection_mode"], settings["selection_threshold"],
                                 settings["num_features"], available)
    k, capped = cap_num_features(k, available)
    return k, min_gain, capped


def cap_num_features(k: int, available: int) -> tuple[int, ParameterWarning | None]:
    """K capped at the number of features, and the warning to give if it was."""
    if k <= available:
        return k, None
    return available, ParameterWarning(
        "num_features", f"{{num_features}} {k} is more than the {available} features; "
                        f"selecting at most {available}")


# ---------------------------------------------------------------------------
# Documentation
# ---------------------------------------------------------------------------

def _cell_default(p: Parameter) -> str:
    if p.readme_default is not None:
        return p.readme_default
    v = p.default
    if v is None:
        return "none"
    return f"`{v}`" if isinstance(v, str) else str(v)


#: a meaning at most this long is shown whole in the compact table
_SHORT_DOC = 110


def _short_doc(p: Parameter) -> str:
    """The compact table's meaning: the whole meaning when it is short, else its first
    clause (up to the first ``:`` or ``;`` outside backticks and parentheses) without
    its worded asides in parentheses, followed by the choices it does not name."""
    text = p.readme()
    if len(text) <= _SHORT_DOC:
        return text
    out: list[str] = []
    aside: list[str] = []
    depth, code = 0, False
    for ch in text:
        if ch == "`":
            code = not code
        if not code and ch == "(" and (depth or (out and out[-1] == " ")):
            depth += 1
        if depth:
            aside.append(ch)
            if not code and ch == ")":
                depth -= 1
                if not depth:  # an aside in words is dropped, "(0, 1)" or "(2..255)" kept
                    words = any(c.isalpha() for c in "".join(aside))
                    if words:
                        out.pop()  # its space
                    else:
                        out.extend(aside)
                    aside = []
            continue
        if not code and ch in ":;":
            break
        out.append(ch)
    short = "".join(out).rstrip(" ,")
    missing = [c for c in p.choices or () if f"`{c}`" not in short]
    if missing:
        short += ": " + ", ".join(f"`{c}`" for c in p.choices or ())
    return short


def markdown_table(keys: tuple[str, ...] = README_KEYS, compact: bool = False) -> str:
    """The Parameters table: estimator param, CLI flag, default, meaning.

    The full table is docs/parameters.md's; ``compact=True`` gives the README's, whose
    meaning is the first clause of each (:func:`_short_doc`)."""
    lines = ["| estimator param | CLI | default | meaning |", "|---|---|---|---|"]
    for key in keys:
        p = _SPEC[key]
        ml = "`featuresCol` / `inputCols`" if key == "features" else \
            (f"`{p.ml}`" if p.ml else "")
        flag = f"`{p.flag}`" if p.flag else ""
        cells = (ml, flag, _cell_default(p), _short_doc(p) if compact else p.readme())
        lines.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
    return "\n".join(lines) + "\n"
