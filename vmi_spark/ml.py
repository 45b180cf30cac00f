"""Spark ML estimator and model: :class:`VMISelector` and :class:`VMISelectorModel`.

Shaped like ``pyspark.ml.feature.UnivariateFeatureSelector``: params are declared
once in :class:`_VMISelectorParams`, shared by estimator and model; constructors
are ``@keyword_only``; setters return ``self``. Persistence writes JSON only
(the fitted selection travels in the metadata), so ``Pipeline``/``PipelineModel``
save and load work, also under Spark Connect.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
import warnings
from collections.abc import Callable
from typing import Any

try:
    from pyspark import keyword_only
except ModuleNotFoundError:  # one line naming the extra, not "No module named 'pyspark'"
    from ._deps import require_pyspark

    require_pyspark("vmi_spark.ml")
    raise
from pyspark.ml import Estimator, Model
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import (
    HasFeaturesCol,
    HasHandleInvalid,
    HasInputCols,
    HasLabelCol,
    HasOutputCol,
)
from pyspark.ml.util import (
    DefaultParamsReadable,
    DefaultParamsReader,
    DefaultParamsWritable,
    DefaultParamsWriter,
    MLReader,
    MLWriter,
)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .core.report_schema import SelectionReport
from .errors import InputError, one_line
from .params import (
    METHOD_NAMES,
    SPEC,
    Settings,
    as_given,
    check,
    defaults,
    is_vmi,
    parameter,
    unalias,
)
from .progress import StepLogger
from .spark.compat import handle_overwrite, load_metadata, save_metadata
from .spark.plan import is_vector_type, quote
from .spark.select import run_selection
from .spark.sources.sparse_vectors import sparse_route, sparse_selection
from .tracking import log_if_active

__all__ = ["VMISelector", "VMISelectorModel"]

log = logging.getLogger("vmi_spark")

#: schema of :attr:`VMISelectorModel.stepsDF` (the columns of ``report.STEP_COLUMNS``)
_STEPS_SCHEMA = ("step INT, feature STRING, index INT, score DOUBLE, gain DOUBLE, block INT")


def sliced_metadata(metadata: dict | None, indices: list[int],
                    names: list[str] | None = None) -> dict[str, Any]:
    """ML attribute metadata of the vector made of elements ``indices`` (in that order).

    Each selected element keeps its attribute (type, name, values) from ``metadata``,
    renumbered to its position in the output, as ``VectorSlicer`` does. An element
    without an attribute becomes a numeric attribute named ``names[position]``.
    """
    by_idx: dict[int, tuple[str, dict[str, Any]]] = {}
    for kind, group in (metadata or {}).get("ml_attr", {}).get("attrs", {}).items():
        for a in group:
            if "idx" in a:
                by_idx[int(a["idx"])] = (kind, a)
    groups: dict[str, list[dict[str, Any]]] = {}
    for pos, i in enumerate(indices):
        kind, attr = by_idx.get(i, ("numeric", {}))
        attr = {**attr, "idx": pos}
        if attr.get("name") is None and names is not None and pos < len(names):
            attr["name"] = names[pos]
        groups.setdefault(kind, []).append(attr)
    ml_attr: dict[str, Any] = {"num_attrs": len(indices)}
    if groups:
        ml_attr["attrs"] = groups
    return {"ml_attr": ml_attr}


def _param(key: str) -> Param:
    """The ML ``Param`` of spec parameter ``key``: its name, doc and typed converter."""
    spec = parameter(key)
    converter = {int: TypeConverters.toInt, float: TypeConverters.toFloat,
                 str: TypeConverters.toString, list: TypeConverters.toListString}[spec.type]
    return Param(Params._dummy(), spec.name("ml"), spec.help("ml"), typeConverter=converter)


#: the shared Params of pyspark.ml that the spec's parameters reuse (name -> spec key)
_SHARED = {"featuresCol": "features", "inputCols": "features", "labelCol": "label",
           "outputCol": "output_col", "handleInvalid": "handle_invalid"}


class _VMISelectorParams(HasFeaturesCol, HasInputCols, HasLabelCol, HasOutputCol, HasHandleInvalid):
    """Params shared by :class:`VMISelector` and :class:`VMISelectorModel`.

    Names, docs, defaults and checks come from :mod:`vmi_spark.params`; the defaults are
    set once, here.
    """

    numTopFeatures: Param[int] = _param("num_features")
    selectionMode: Param[str] = _param("selection_mode")
    selectionThreshold: Param[float] = _param("selection_threshold")
    chunkStorage: Param[str] = _param("chunk_storage")
    stagingDir: Param[str] = _param("staging_dir")
    method: Param[str] = _param("method")
    restartTolerance: Param[float] = _param("restart_tolerance")
    biasCorrection: Param[str] = _param("bias_correction")
    dropSuspects: Param[str] = _param("drop_suspects")
    numBins: Param[int] = _param("num_bins")
    binning: Param[str] = _param("binning")
    maxCategories: Param[int] = _param("max_categories")
    maxClasses: Param[int] = _param("max_classes")
    labelType: Param[str] = _param("label_type")
    labelBins: Param[int] = _param("label_bins")
    estimator: Param[str] = _param("estimator")
    excludeCols: Param[list[str]] = _param("exclude")
    weightCol: Param[str] = _param("weight_col")
    stabilityRuns: Param[int] = _param("stability")
    stabilitySeed: Param[int] = _param("stability_seed")
    stabilityFraction: Param[float] = _param("stability_fraction")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._setDefault(**{k: v for k, v in defaults("ml").items() if v is not None})

    def _get_optional(self, param: Param) -> Any:
        """The value of a param with no default, or None where it is not set."""
        return self.getOrDefault(param) if self.isDefined(param) else None

    def getNumTopFeatures(self) -> int | None:
        """Gets the value of :py:attr:`numTopFeatures`, or None where it is not set (the
        selection then stops on the evidence, at most 50 features)."""
        return self._get_optional(self.numTopFeatures)

    def getSelectionMode(self) -> str:
        """Gets the value of :py:attr:`selectionMode` or its default value."""
        return self.getOrDefault(self.selectionMode)

    def getSelectionThreshold(self) -> float | None:
        """Gets the value of selectionThreshold, or None if it is not set (the mode's
        default: 0.01 nats for ``gain``, 0.1 for ``fraction``)."""
        return self._get_optional(self.selectionThreshold)

    def getChunkStorage(self) -> str:
        """Gets the value of :py:attr:`chunkStorage` or its default value."""
        return self.getOrDefault(self.chunkStorage)

    def getBlockStorage(self) -> str:
        """Gets the value of :py:attr:`chunkStorage` (its earlier name)."""
        return self.getChunkStorage()

    def getStagingDir(self) -> str | None:
        """Gets the value of stagingDir, or None if it is not set."""
        return self._get_optional(self.stagingDir)

    def getMethod(self) -> str:
        """Gets the value of :py:attr:`method` or its default value."""
        return self.getOrDefault(self.method)

    def getRestartTolerance(self) -> float:
        """Gets the value of :py:attr:`restartTolerance` or its default value."""
        return self.getOrDefault(self.restartTolerance)

    def getBiasCorrection(self) -> str:
        """Gets the value of :py:attr:`biasCorrection` or its default value."""
        return self.getOrDefault(self.biasCorrection)

    def getDropSuspects(self) -> str:
        """Gets the value of :py:attr:`dropSuspects` or its default value."""
        return self.getOrDefault(self.dropSuspects)

    def getNumBins(self) -> int:
        """Gets the value of :py:attr:`numBins` or its default value."""
        return self.getOrDefault(self.numBins)

    def getBinning(self) -> str:
        """Gets the value of :py:attr:`binning` or its default value."""
        return self.getOrDefault(self.binning)

    def getMaxCategories(self) -> int:
        """Gets the value of :py:attr:`maxCategories` or its default value."""
        return self.getOrDefault(self.maxCategories)

    def getMaxClasses(self) -> int:
        """Gets the value of :py:attr:`maxClasses` or its default value."""
        return self.getOrDefault(self.maxClasses)

    def getLabelType(self) -> str:
        """Gets the value of :py:attr:`labelType` or its default value."""
        return self.getOrDefault(self.labelType)

    def getLabelBins(self) -> int:
        """Gets the value of :py:attr:`labelBins` or its default value."""
        return self.getOrDefault(self.labelBins)

    def getEstimator(self) -> str:
        """Gets the value of :py:attr:`estimator` or its default value."""
        return self.getOrDefault(self.estimator)

    def getExcludeCols(self) -> list[str] | None:
        """Gets the value of excludeCols, or None if it is not set."""
        return self._get_optional(self.excludeCols)

    def getWeightCol(self) -> str | None:
        """Gets the value of weightCol, or None if it is not set (every row weighs 1)."""
        return self._get_optional(self.weightCol)

    def getStabilityRuns(self) -> int:
        """Gets the value of :py:attr:`stabilityRuns` or its default value."""
        return self.getOrDefault(self.stabilityRuns)

    def getStabilitySeed(self) -> int:
        """Gets the value of :py:attr:`stabilitySeed` or its default value."""
        return self.getOrDefault(self.stabilitySeed)

    def getStabilityFraction(self) -> float:
        """Gets the value of :py:attr:`stabilityFraction` or its default value."""
        return self.getOrDefault(self.stabilityFraction)

    def _settings(self) -> Settings:
        """The selection parameters, checked once (:class:`vmi_spark.params.Settings`),
        read from every Param the spec gives an ML name."""
        values = {key: self._get_optional(getattr(self, name))
                  for name, key in _ML_KEYS.items() if key in Settings.KEYS}
        return Settings.of({k: v for k, v in values.items() if v is not None}, "ml")

    def _set(self, **kwargs: Any) -> Any:
        """Set params, checking the values of the spec's parameters first."""
        for name, value in kwargs.items():
            if name in _ML_KEYS and value is not None and _ML_KEYS[name] in Settings.KEYS:
                check(_ML_KEYS[name], getattr(self, name).typeConverter(value), "ml")
        return super()._set(**kwargs)


#: spec key of every ML param name the spec has
_ML_KEYS = {p.ml: p.key for p in SPEC if p.ml is not None and p.type is not list}
_ML_KEYS["excludeCols"] = "exclude"


def _ml_signature() -> inspect.Signature:
    """``__init__``/``setParams``'s keyword-only parameters: every Param of the estimator
    with the spec's ML default (``inputCols``, ``outputCol`` and the optional ones None)."""
    ml = defaults("ml")
    names = ["featuresCol", "inputCols", "labelCol", "outputCol",
             *[p.ml for p in SPEC if p.ml and p.ml not in _SHARED], "handleInvalid"]
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY,
                                 default=None if n in ("inputCols", "outputCol") else ml.get(n))
               for n in dict.fromkeys(names)]
    return inspect.Signature(params)


def _setter(name: str, cls_name: str) -> Callable[[Any, Any], Any]:
    """``set<Name>(value)``: sets Param ``name`` (checked), returns ``self``."""
    def setter(self: Any, value: Any) -> Any:
        return self._set(**{name: value})
    setter.__name__ = setter.__qualname__ = "set" + name[0].upper() + name[1:]
    setter.__doc__ = f"Sets the value of :py:attr:`{name}` (see its doc); returns this {cls_name}."
    return setter


def _earlier_setter(old: str, name: str) -> Callable[[Any, Any], Any]:
    """``set<Old>(value)``: sets Param ``name`` by its earlier name ``old`` (an error names
    ``old`` as given: :func:`vmi_spark.params.as_given`), returns ``self``."""
    def setter(self: Any, value: Any) -> Any:
        return self.setParams(**{old: value})
    setter.__name__ = setter.__qualname__ = "set" + old[0].upper() + old[1:]
    setter.__doc__ = (f"Sets the value of :py:attr:`{name}` (its earlier name ``{old}``); "
                      "returns this VMISelector.")
    return setter


class VMISelector(Estimator["VMISelectorModel"], _VMISelectorParams, DefaultParamsReadable,
                  DefaultParamsWritable):
    """Feature selection by variational information maximisation (VMI).

    Greedily selects features that maximise a variational lower bound on the
    mutual information I(x_S; y), with the naive Bayes (``vmi_naive``) or the
    pairwise (``vmi_pairwise``) Q-distribution and the restart rule of the
    paper's Algorithm 1. Features come from a vector column (``featuresCol``)
    or from ordinary columns (``inputCols``, which takes precedence);
    ``excludeCols`` leaves columns (or vector elements, by name) out.

    The constructor and :meth:`setParams` take every Param as a keyword, with the
    defaults of :mod:`vmi_spark.params`; each Param also has a ``set``/``get`` method.
    A fit inside an active MLflow run (``with mlflow.start_run():``) logs the
    selection to that run (:mod:`vmi_spark.tracking`); the fitted model's
    ``stepsDF`` holds the steps as a DataFrame.

    Examples
    --------
    >>> from vmi_spark import VMISelector
    >>> selector = VMISelector(inputCols=["a", "b", "c"], labelCol="y", numTopFeatures=2)
    >>> model = selector.fit(df)                      # doctest: +SKIP
    >>> model.selectedFeatureNames                    # doctest: +SKIP
    ['b', 'a']

    References
    ----------
    S. Gao, G. Ver Steeg, A. Galstyan. Variational Information Maximization for
    Feature Selection. NIPS 2016.
    """

    _input_kwargs: dict[str, Any]

    @keyword_only
    def __init__(self, **params: Any) -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, **params: Any) -> VMISelector:
        """Sets the Params given as keywords (checked); returns this VMISelector."""
        with as_given(self._input_kwargs, "ml") as given:
            unknown = sorted(set(given) - set(_ml_signature().parameters))
            if unknown:
                raise TypeError(f"VMISelector got an unexpected keyword argument '{unknown[0]}'")
            return self._set(**{k: v for k, v in given.items() if v is not None})

    def write(self) -> MLWriter:
        """A writer that saves this estimator's Params as JSON (``overwrite()`` works
        under Spark Connect too)."""
        return _Writer(self)

    @classmethod
    def read(cls) -> DefaultParamsReader:
        """A reader of a saved :class:`VMISelector` (JSON metadata)."""
        return _Reader(cls)

    def _fit(self, dataset: DataFrame) -> VMISelectorModel:
        return self._fit_with_report(dataset)

    def _fit_with_report(self, dataset: DataFrame, **kwargs: Any) -> VMISelectorModel:
        settings = self._settings()  # before any Spark job
        input_cols = self.getInputCols() if self.isSet(self.inputCols) else None
        if input_cols is None:
            self._check_features_col(dataset)
            if sparse_route(dataset, self.getFeaturesCol(), settings,
                            weight_col=self.getWeightCol(), exclude=self.getExcludeCols()):
                return self._fit_sparse(dataset, settings, **kwargs)
        if "on_step" not in kwargs:  # names and K from the run (progress.begin)
            kwargs["on_step"] = StepLogger()
        run = run_selection(
            dataset, self.getLabelCol(), settings, features=input_cols,
            exclude=self.getExcludeCols(), weight_col=self.getWeightCol(),
            features_col=None if input_cols is not None else self.getFeaturesCol(), **kwargs)
        model = VMISelectorModel._from_report(run.report())
        model._resetUid(self.uid)
        log_if_active(model.report)  # inside `with mlflow.start_run():`, logged to that run
        return self._copyValues(model)

    def _fit_sparse(self, dataset: DataFrame, settings: Settings,
                    **kwargs: Any) -> VMISelectorModel:
        """The fit of a wide sparse vector column, from its non-zeros
        (:mod:`vmi_spark.spark.sources.sparse_vectors`; :func:`~vmi_spark.spark.sources.sparse_vectors.
        sparse_route` decided, and refused what that path does not do)."""
        report = sparse_selection(dataset, self.getLabelCol(), self.getFeaturesCol(),
                                  settings, on_step=kwargs.get("on_step") or StepLogger())
        model = VMISelectorModel._from_report(report)
        model._resetUid(self.uid)
        log_if_active(model.report)
        return self._copyValues(model)

    def _check_features_col(self, dataset: DataFrame) -> None:
        """Without ``inputCols`` the features are the vector ``featuresCol`` (as in Spark's
        selectors): refuse a missing one with the two ways to give the features. The
        estimator does not default to every other column: keys, ids and leaky columns
        would be candidates, and the model's ``transform`` would depend on the fitted
        table's columns."""
        col = self.getFeaturesCol()
        if col in dataset.columns:
            return
        label = self.getLabelCol()
        raise InputError(f"featuresCol '{col}' not found in the input: set inputCols to the "
                         "columns to select from (e.g. inputCols=[c for c in df.columns if c "
                         f"!= '{label}']), or assemble them into a vector column with "
                         "pyspark.ml.feature.VectorAssembler and set featuresCol")


VMISelector.__init__.__signature__ = _ml_signature()  # type: ignore[attr-defined]
VMISelector.setParams.__signature__ = _ml_signature()  # type: ignore[attr-defined]
for _name in list(_ml_signature().parameters)[1:]:  # one setter a Param, from the spec
    setattr(VMISelector, "set" + _name[0].upper() + _name[1:], _setter(_name, "VMISelector"))
for _p in SPEC:  # and one under each earlier name (setBlockStorage)
    if "ml" in _p.aliases:
        _old = _p.aliases["ml"]
        setattr(VMISelector, "set" + _old[0].upper() + _old[1:], _earlier_setter(_old, _p.name("ml")))


class VMISelectorModel(Model, _VMISelectorParams, DefaultParamsWritable):
    """The fitted selection of a :class:`VMISelector`.

    Attributes
    ----------
    selectedFeatures : list of int
        Indices of the selected features, in selection order.
    selectedFeatureNames : list of str
        Their names (input column names, or ML attribute names of the vector).
    scores : list of float
        Per step: the bound of the current block after adding that feature (nats).
    blocks : list of int
        Per step: 0 for the first block, +1 at each restart.
    stepsDF : DataFrame
        The steps as a DataFrame (step, feature, index, score, gain, block).
    report : dict
        The full selection report (the job's ``selection.json``).
    """

    def __init__(self) -> None:
        super().__init__()
        self._report: SelectionReport = {}

    @classmethod
    def _from_report(cls, report: SelectionReport) -> VMISelectorModel:
        model = cls()
        model._report = report.copy()
        return model

    @property
    def report(self) -> SelectionReport:
        """The full selection report, the fields of the job's ``selection.json`` (a copy)."""
        return self._report.copy()

    @property
    def selectedFeatures(self) -> list[int]:
        """Indices of the selected features among the inputs, in selection order."""
        return list(self._report.get("selected_indices", []))

    @property
    def selectedFeatureNames(self) -> list[str]:
        """Names of the selected features (input column names, or the vector's ML
        attribute names, else ``<featuresCol>[i]``), in selection order."""
        return list(self._report.get("selected", []))

    @property
    def scores(self) -> list[float]:
        """Per step: the bound of the current block after adding that feature (nats); for a
        comparison criterion, the criterion's value."""
        return list(self._report.get("scores", []))

    @property
    def blocks(self) -> list[int]:
        """Per step: 0 for the first block, +1 at each restart (all 0 for a comparison
        criterion)."""
        return list(self._report.get("blocks", []))

    @property
    def stability(self) -> dict[str, Any] | None:
        """The stability runs (``stabilityRuns``): per feature its selection ``frequency``
        and ``mean_rank``, the stability ``index`` of Nogueira et al. (2018) with its
        ``variance`` and 95% ``ci``, the ``runs``' selections; None without them."""
        st = self._report.get("stability")
        return dict(st) if isinstance(st, dict) else None

    @property
    def labelBinning(self) -> dict[str, Any] | None:
        """How a continuous label was cut into classes (``binning``, ``edges``,
        ``spikes``, ``state_names``), or None for a categorical label."""
        lb = self._report.get("label_binning")
        return dict(lb) if isinstance(lb, dict) else None

    @property
    def columnBins(self) -> dict[str, dict[str, Any]]:
        """How each binned candidate column was cut, by column name: ``binning`` (the
        strategy), ``edges`` (the split points; a value ``v`` gets the state
        ``#{edges <= v}``), ``spikes`` (values that are a state of their own) and
        ``state_names``. Category and constant columns are not listed."""
        return {c["name"]: {k: c[k] for k in ("binning", "edges", "spikes", "state_names")
                            if k in c}
                for c in self._report.get("columns", []) if c.get("kind") == "bins"}

    @property
    def stepsDF(self) -> DataFrame:
        """The selection as a DataFrame, one row per step in selection order.

        Columns: ``step`` (int, from 1), ``feature`` (string), ``index`` (int, the
        feature's position among the inputs), ``score`` (double: the bound of the block
        after the step in nats for the VMI methods, the criterion otherwise), ``gain``
        (double, what the step added) and ``block`` (int, +1 at each restart): the
        job's ``steps.csv``, for dashboards and warehouse tables. Built in the active
        SparkSession (classic or Spark Connect).
        """
        from pyspark.sql import SparkSession

        from .report import step_rows

        return SparkSession.active().createDataFrame(step_rows(self._report), schema=_STEPS_SCHEMA)

    def setFeaturesCol(self, value: str) -> VMISelectorModel:
        """Sets the value of :py:attr:`featuresCol`, the vector column ``transform`` reads
        the selected elements from; returns this VMISelectorModel."""
        return self._set(featuresCol=value)

    def setOutputCol(self, value: str) -> VMISelectorModel:
        """Sets the value of :py:attr:`outputCol`, the vector column ``transform`` adds
        (vector input only); returns this VMISelectorModel."""
        return self._set(outputCol=value)

    def _transform(self, dataset: DataFrame) -> DataFrame:
        if self.isSet(self.inputCols):
            missing = [c for c in self.selectedFeatureNames if c not in dataset.columns]
            if missing:
                raise InputError("VMISelectorModel.transform: the input has no column "
                                 + ", ".join(f"'{c}'" for c in missing)
                                 + " (selected when the model was fitted)")
            keep = set(self.selectedFeatureNames)
            drop = [c for c in self.getInputCols() if c not in keep]
            return dataset.select(*[F.col(quote(c)) for c in dataset.columns if c not in drop])
        from pyspark.ml.functions import array_to_vector, vector_to_array

        col = self.getFeaturesCol()
        field = next((f for f in dataset.schema.fields if f.name == col), None)
        if field is None:
            raise InputError(f"VMISelectorModel.transform: featuresCol '{col}' not found in the "
                             "input")
        if not is_vector_type(field.dataType):
            raise InputError(f"VMISelectorModel.transform: featuresCol '{col}' must be a vector "
                             f"column (pyspark.ml.linalg.Vector), not "
                             f"{field.dataType.simpleString()}")
        # the output keeps the selected elements' ML attributes (names, types), renumbered
        meta = sliced_metadata(field.metadata if field is not None else None,
                               self.selectedFeatures, self.selectedFeatureNames)
        out = self.getOutputCol()
        if self._report.get("sparse"):  # a sparse vector stays sparse (never densified)
            return _sliced_sparse(dataset, col, out, self.selectedFeatures, meta)
        arr = vector_to_array(F.col(quote(col)), "float64")
        picked = F.array(*[arr[i] for i in self.selectedFeatures]) if self.selectedFeatures else \
            F.array().cast("array<double>")
        # a vector of another length than the model was fitted on is an error, not a
        # silently truncated or shifted row
        width = len(self._report.get("features", [])) or max(self.selectedFeatures, default=-1) + 1
        picked = F.when(F.size(arr) == width, picked).otherwise(F.raise_error(
            F.concat(F.lit(f"VMISelectorModel.transform: featuresCol '{col}' has a vector of "),
                     F.size(arr).cast("string"),
                     F.lit(f" elements; the model was fitted on {width}"))))
        return dataset.withColumn(out, array_to_vector(picked).alias(out, metadata=meta))

    def copy(self, extra: dict | None = None) -> VMISelectorModel:
        """A copy of this model with the same selection (and ``extra`` Params)."""
        that = super().copy(extra)
        that._report = self._report.copy()
        return that

    def write(self) -> MLWriter:
        """A writer that saves this model's Params and its report as JSON."""
        return _ModelWriter(self)

    @classmethod
    def read(cls) -> MLReader:
        """A reader that validates a saved model (class, every Param, the report) before
        returning it."""
        return _ModelReader(cls)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: str) -> VMISelectorModel:
        """The model saved at ``path``, validated; anything else is refused with one line."""
        return cls.read().load(path)


def _sliced_sparse(dataset: DataFrame, col: str, out: str, indices: list[int],
                   meta: dict[str, Any]) -> DataFrame:
    """``dataset`` with ``out``: the elements ``indices`` of vector column ``col`` in that
    order, a sparse vector stays sparse (Spark's ``VectorSlicer``, in the JVM), with the
    ML attributes ``meta``."""
    from pyspark.ml.feature import VectorSlicer

    tmp = f"_vmi_sliced_{out}"
    sliced = VectorSlicer(inputCol=col, outputCol=tmp, indices=list(indices)).transform(dataset)
    return sliced.withColumn(out, F.col(tmp).alias(out, metadata=meta)).drop(tmp)


class _Writer(DefaultParamsWriter):
    """``DefaultParamsWriter`` whose ``overwrite()`` also works under Spark Connect.

    The metadata itself is written with DataFrame calls (fine under Connect), but
    ``MLWriter._handleOverwrite`` needs the JVM session; under Connect the
    server's ML helper deletes the old path instead (what pyspark does for its
    own ``Pipeline``).
    """

    def _handleOverwrite(self, path: str) -> None:
        handle_overwrite(self.sparkSession, path, super()._handleOverwrite)

    def saveImpl(self, path: str) -> None:  # PySpark 3.5's needs a SparkContext
        save_metadata(self.instance, path, self.sparkSession, overwrite=self.shouldOverwrite)


class _ModelWriter(_Writer):
    def saveImpl(self, path: str) -> None:
        save_metadata(self.instance, path, self.sparkSession,
                      {"report": self.instance._report},  # type: ignore[attr-defined]
                      overwrite=self.shouldOverwrite)


class _Reader(DefaultParamsReader):
    """``DefaultParamsReader`` that reads with the session (PySpark 3.5's needs a
    SparkContext, which a Spark Connect client has not)."""

    def load(self, path: str) -> Any:
        meta = _unaliased(load_metadata(path, self.sparkSession))
        instance: Any = self.cls()
        instance._resetUid(meta["uid"])
        DefaultParamsReader.getAndSetParams(instance, meta)  # type: ignore[type-var]
        return instance


class _ModelReader(DefaultParamsReader):
    def load(self, path: str) -> VMISelectorModel:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            meta = _read_metadata(path, self.sparkSession)
            try:  # JSON only: tampered or foreign metadata is refused, never executed
                meta = _unaliased(meta)
                _check_metadata(meta)
                report = meta["report"]
                _check_report(report, meta)
                model = VMISelectorModel._from_report(report)
                model._resetUid(meta["uid"])
                DefaultParamsReader.getAndSetParams(model, meta)  # type: ignore[type-var]
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError,
                    AssertionError, OverflowError) as exc:
                text = " ".join(str(exc).split())[:300]
                raise InputError(f"cannot load a VMISelectorModel from '{path}': its metadata "
                                 f"is not the JSON this model writes ({text})") from None
        return model


def _unaliased(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with the params saved under an earlier name (``blockStorage``, by an
    earlier version) read under their names (:func:`vmi_spark.params.unalias`; both
    names is a ParameterError)."""
    return {**meta, **{section: unalias(meta[section], "ml")
                       for section in ("paramMap", "defaultParamMap")
                       if type(meta.get(section)) is dict}}


#: the class name a saved model's metadata holds
_MODEL_CLASS = f"{__name__}.VMISelectorModel"


def _read_metadata(path: str, spark) -> dict[str, Any]:
    """The metadata a model saved at ``path``: one line for a file Spark cannot read, a
    checksum that does not match (a file edited after it was saved), or no JSON object."""
    try:
        meta = load_metadata(path, spark)  # PySpark 3.5's reader needs a SparkContext
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # not JSON, no class
        text = " ".join(str(exc).split())[:300]
        raise InputError(f"cannot load a VMISelectorModel from '{path}': its metadata is not "
                         f"the JSON this model writes ({text})") from None
    except Exception as exc:  # noqa: BLE001 - Spark's reader: a Java exception of many lines
        line = one_line(exc)
        if "checksum" in f"{line} {exc}".lower():
            raise InputError(f"cannot load a VMISelectorModel from '{path}': its metadata does "
                             "not match its checksum (.crc) file: it was changed after it was "
                             "saved") from None
        raise InputError(f"cannot load a VMISelectorModel from '{path}': {line}") from None
    if type(meta) is not dict:
        raise InputError(f"cannot load a VMISelectorModel from '{path}': its metadata is not "
                         "the JSON this model writes (not an object)")
    return meta


def _check_metadata(meta: dict[str, Any]) -> None:
    """Raise ValueError unless ``meta`` is a VMISelectorModel's: its class, a uid, and
    params this model has, each of the right type and in range."""
    if meta.get("class") != _MODEL_CLASS:
        shown = str(meta.get("class"))[:100]
        raise ValueError(f"it holds a {shown!r}, not a {_MODEL_CLASS}")
    if type(meta.get("uid")) is not str or not meta["uid"]:
        raise ValueError("it has no uid")
    if type(meta.get("sparkVersion")) is not str or \
            not re.match(r"^\d+\.\d+", meta["sparkVersion"]):
        raise ValueError("it has no Spark version")
    probe = VMISelectorModel()
    for section in ("paramMap", "defaultParamMap"):
        values = meta.get(section, {})
        if type(values) is not dict:
            raise ValueError(f"its {section} is not an object")
        for name, value in values.items():
            if not probe.hasParam(str(name)):
                raise ValueError(f"{section} sets {str(name)[:60]!r}, which this model does not "
                                 "have")
            if name in ("inputCols", "excludeCols"):
                if type(value) is not list or not all(type(c) is str for c in value):
                    raise ValueError(f"{name} is not a list of column names")
            elif name in _ML_KEYS:
                param = getattr(probe, name)
                try:
                    check(_ML_KEYS[name], param.typeConverter(value), "ml")
                except InputError as exc:
                    raise ValueError(str(exc)) from None
            elif type(value) is not str:
                raise ValueError(f"{name} is not a string")


def _finite_numbers(report: dict[str, Any], key: str, n: int) -> list[float]:
    values = report.get(key)
    if type(values) is not list or len(values) != n or not all(
            type(v) in (int, float) and math.isfinite(v) for v in values):
        raise ValueError(f"'{key}' is not one finite number per selected feature")
    return values


def _check_report(report: Any, meta: dict[str, Any] | None = None) -> None:
    """Raise ValueError unless ``report`` is a selection a fitted model could have written:
    a method of the registry, feature names, distinct selected indices in range naming
    them, one finite score and gain and a block (0, then +1 at each restart) per step, the
    restarts, and the columns and label binning as the model's properties read them; with
    ``meta``, the selected features are among its ``inputCols`` when it has them."""
    if type(report) is not dict:
        raise ValueError("its report is not an object")
    if not report:
        raise ValueError("its report is empty: nothing was fitted")
    if report.get("method") not in METHOD_NAMES:
        raise ValueError(f"its method {str(report.get('method'))[:60]!r} is not one of "
                         + ", ".join(METHOD_NAMES))
    features = report.get("features")
    indices = report.get("selected_indices")
    names = report.get("selected")
    if type(features) is not list or not all(type(f) is str for f in features):
        raise ValueError("'features' is not a list of names")
    if type(indices) is not list or not all(type(i) is int for i in indices):
        raise ValueError("'selected_indices' is not a list of ints")
    bad = [i for i in indices if not 0 <= i < len(features)]
    if bad:
        raise ValueError(f"selected index {bad[0]} is not in [0, {len(features)})")
    if len(set(indices)) != len(indices):
        raise ValueError("'selected_indices' holds a feature twice")
    if names != [features[i] for i in indices]:
        raise ValueError("'selected' does not name the selected indices")
    n = len(indices)
    _finite_numbers(report, "scores", n)
    _finite_numbers(report, "gains", n)
    blocks = report.get("blocks")
    if type(blocks) is not list or len(blocks) != n or not all(type(b) is int for b in blocks):
        raise ValueError("'blocks' is not one int per selected feature")
    restarts = report.get("restarts", blocks[-1] if blocks else 0)
    if blocks[:1] not in ([], [0]) or any(b1 - b0 not in (0, 1) for b0, b1 in
                                          zip(blocks, blocks[1:])) or \
            type(restarts) is not int or restarts != (blocks[-1] if blocks else restarts) or \
            (not is_vmi(report["method"]) and any(blocks)):
        raise ValueError("'blocks' and 'restarts' do not describe restarted blocks")
    columns = report.get("columns", [])
    if type(columns) is not list or not all(
            type(c) is dict and type(c.get("name")) is str and type(c.get("kind")) is str
            for c in columns):
        raise ValueError("'columns' is not a list of column descriptions")
    if "label_binning" in report and type(report["label_binning"]) is not dict:
        raise ValueError("'label_binning' is not an object")
    cols = (meta or {}).get("paramMap", {}).get("inputCols")
    if cols is not None and not set(names) <= set(cols):
        raise ValueError("it selects columns that are not among its inputCols")
