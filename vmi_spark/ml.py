"""Spark ML estimator and model: :class:`VMISelector` and :class:`VMISelectorModel`.

Shaped like ``pyspark.ml.feature.UnivariateFeatureSelector``: params are declared
once in :class:`_VMISelectorParams`, shared by estimator and model; constructors
are ``@keyword_only``; setters return ``self``. Persistence writes JSON only
(the fitted selection travels in the metadata), so ``Pipeline``/``PipelineModel``
save and load work, also under Spark Connect.
"""

from __future__ import annotations

import warnings
from typing import Any

from pyspark import keyword_only
from pyspark.ml import Estimator, Model
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import (HasFeaturesCol, HasHandleInvalid, HasInputCols, HasLabelCol,
                                     HasOutputCol)
from pyspark.ml.util import (DefaultParamsReadable, DefaultParamsReader, DefaultParamsWritable,
                             DefaultParamsWriter, MLReader, MLWriter)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .spark.plan import quote
from .spark.select import ALL_METHODS as METHODS
from .spark.select import run_selection

__all__ = ["VMISelector", "VMISelectorModel"]


class _VMISelectorParams(HasFeaturesCol, HasInputCols, HasLabelCol, HasOutputCol, HasHandleInvalid):
    """Params shared by :class:`VMISelector` and :class:`VMISelectorModel`."""

    numTopFeatures: Param[int] = Param(
        Params._dummy(), "numTopFeatures",
        "number of features to select (K); capped at the number of features",
        typeConverter=TypeConverters.toInt)
    method: Param[str] = Param(
        Params._dummy(), "method",
        "vmi_naive or vmi_pairwise (the bound's Q-distribution), or a comparison criterion: "
        "mim, mrmr, jmi, cmim, cife, spec_cmi",
        typeConverter=TypeConverters.toString)
    restartTolerance: Param[float] = Param(
        Params._dummy(), "restartTolerance",
        "a block restarts when the best candidate raises its bound by no more than this (nats)",
        typeConverter=TypeConverters.toFloat)
    numBins: Param[int] = Param(
        Params._dummy(), "numBins",
        "equal-frequency bins for numeric columns with more than maxCategories values (2..255)",
        typeConverter=TypeConverters.toInt)
    maxCategories: Param[int] = Param(
        Params._dummy(), "maxCategories",
        "numeric columns with at most this many distinct values are used as categories (1..255)",
        typeConverter=TypeConverters.toInt)
    maxClasses: Param[int] = Param(
        Params._dummy(), "maxClasses",
        "most distinct label values accepted", typeConverter=TypeConverters.toInt)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._setDefault(numTopFeatures=50, method="vmi_naive", restartTolerance=0.0, numBins=10,
                         maxCategories=32, maxClasses=1000, handleInvalid="keep",
                         featuresCol="features", labelCol="label")

    def getNumTopFeatures(self) -> int:
        return self.getOrDefault(self.numTopFeatures)

    def getMethod(self) -> str:
        return self.getOrDefault(self.method)

    def getRestartTolerance(self) -> float:
        return self.getOrDefault(self.restartTolerance)

    def getNumBins(self) -> int:
        return self.getOrDefault(self.numBins)

    def getMaxCategories(self) -> int:
        return self.getOrDefault(self.maxCategories)

    def getMaxClasses(self) -> int:
        return self.getOrDefault(self.maxClasses)


class VMISelector(Estimator["VMISelectorModel"], _VMISelectorParams, DefaultParamsReadable,
                  DefaultParamsWritable):
    """Feature selection by variational information maximisation (VMI).

    Greedily selects features that maximise a variational lower bound on the
    mutual information I(x_S; y), with the naive Bayes (``vmi_naive``) or the
    pairwise (``vmi_pairwise``) Q-distribution and the restart rule of the
    paper's Algorithm 1. Features come from a vector column (``featuresCol``)
    or from ordinary columns (``inputCols``, which takes precedence).

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
    def __init__(self, *, featuresCol: str = "features", inputCols: list[str] | None = None,
                 labelCol: str = "label", outputCol: str | None = None, numTopFeatures: int = 50,
                 method: str = "vmi_naive", restartTolerance: float = 0.0, numBins: int = 10,
                 maxCategories: int = 32, maxClasses: int = 1000, handleInvalid: str = "keep") -> None:
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, featuresCol: str = "features", inputCols: list[str] | None = None,
                  labelCol: str = "label", outputCol: str | None = None, numTopFeatures: int = 50,
                  method: str = "vmi_naive", restartTolerance: float = 0.0, numBins: int = 10,
                  maxCategories: int = 32, maxClasses: int = 1000,
                  handleInvalid: str = "keep") -> "VMISelector":
        kwargs = {k: v for k, v in self._input_kwargs.items() if v is not None}
        if "method" in kwargs and kwargs["method"] not in METHODS:
            raise ValueError(f"unknown method '{kwargs['method']}' (choose from {', '.join(METHODS)})")
        return self._set(**kwargs)

    def setFeaturesCol(self, value: str) -> "VMISelector":
        return self._set(featuresCol=value)

    def setInputCols(self, value: list[str]) -> "VMISelector":
        return self._set(inputCols=value)

    def setLabelCol(self, value: str) -> "VMISelector":
        return self._set(labelCol=value)

    def setOutputCol(self, value: str) -> "VMISelector":
        return self._set(outputCol=value)

    def setNumTopFeatures(self, value: int) -> "VMISelector":
        return self._set(numTopFeatures=value)

    def setMethod(self, value: str) -> "VMISelector":
        if value not in METHODS:
            raise ValueError(f"unknown method '{value}' (choose from {', '.join(METHODS)})")
        return self._set(method=value)

    def setRestartTolerance(self, value: float) -> "VMISelector":
        return self._set(restartTolerance=value)

    def setNumBins(self, value: int) -> "VMISelector":
        return self._set(numBins=value)

    def setMaxCategories(self, value: int) -> "VMISelector":
        return self._set(maxCategories=value)

    def setMaxClasses(self, value: int) -> "VMISelector":
        return self._set(maxClasses=value)

    def setHandleInvalid(self, value: str) -> "VMISelector":
        return self._set(handleInvalid=value)

    def _fit(self, dataset: DataFrame) -> "VMISelectorModel":
        return self._fit_with_report(dataset)

    def _fit_with_report(self, dataset: DataFrame, **kwargs: Any) -> "VMISelectorModel":
        input_cols = self.getInputCols() if self.isSet(self.inputCols) else None
        run = run_selection(
            dataset, self.getLabelCol(), features=input_cols,
            features_col=None if input_cols is not None else self.getFeaturesCol(),
            method=self.getMethod(), num_features=self.getNumTopFeatures(),
            restart_tolerance=self.getRestartTolerance(), num_bins=self.getNumBins(),
            max_categories=self.getMaxCategories(), max_classes=self.getMaxClasses(),
            handle_invalid=self.getHandleInvalid(), **kwargs)
        model = VMISelectorModel._from_report(run.report())
        model._resetUid(self.uid)
        return self._copyValues(model)


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
    report : dict
        The full selection report (the job's ``selection.json``).
    """

    def __init__(self) -> None:
        super().__init__()
        self._report: dict[str, Any] = {}

    @classmethod
    def _from_report(cls, report: dict[str, Any]) -> "VMISelectorModel":
        model = cls()
        model._report = dict(report)
        return model

    @property
    def report(self) -> dict[str, Any]:
        return dict(self._report)

    @property
    def selectedFeatures(self) -> list[int]:
        return list(self._report.get("selected_indices", []))

    @property
    def selectedFeatureNames(self) -> list[str]:
        return list(self._report.get("selected", []))

    @property
    def scores(self) -> list[float]:
        return list(self._report.get("scores", []))

    @property
    def blocks(self) -> list[int]:
        return list(self._report.get("blocks", []))

    def setFeaturesCol(self, value: str) -> "VMISelectorModel":
        return self._set(featuresCol=value)

    def setOutputCol(self, value: str) -> "VMISelectorModel":
        return self._set(outputCol=value)

    def _transform(self, dataset: DataFrame) -> DataFrame:
        if self.isSet(self.inputCols):
            keep = set(self.selectedFeatureNames)
            drop = [c for c in self.getInputCols() if c not in keep]
            return dataset.select(*[F.col(quote(c)) for c in dataset.columns if c not in drop])
        from pyspark.ml.functions import array_to_vector, vector_to_array

        arr = vector_to_array(F.col(quote(self.getFeaturesCol())), "float64")
        picked = F.array(*[arr[i] for i in self.selectedFeatures]) if self.selectedFeatures else \
            F.array().cast("array<double>")
        return dataset.withColumn(self.getOutputCol(), array_to_vector(picked))

    def copy(self, extra: dict | None = None) -> "VMISelectorModel":
        that = super().copy(extra)
        that._report = dict(self._report)
        return that

    def write(self) -> MLWriter:
        return _ModelWriter(self)

    @classmethod
    def read(cls) -> MLReader:
        return _ModelReader(cls)

    @classmethod
    def load(cls, path: str) -> "VMISelectorModel":
        return cls.read().load(path)


class _ModelWriter(DefaultParamsWriter):
    def saveImpl(self, path: str) -> None:
        DefaultParamsWriter.saveMetadata(self.instance, path, self.sparkSession,
                                         extraMetadata={"report": self.instance._report})


class _ModelReader(DefaultParamsReader):
    def load(self, path: str) -> "VMISelectorModel":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            meta = DefaultParamsReader.loadMetadata(path, self.sparkSession)
        model = VMISelectorModel._from_report(meta.get("report", {}))
        model._resetUid(meta["uid"])
        DefaultParamsReader.getAndSetParams(model, meta)
        return model
