"""The columns of a run, resolved once: the label, the features, the weights, and whether
the features are columns of the frame or the elements of a vector column.

:func:`resolve` checks every column the user named (before any pass over the rows) and
returns a :class:`Columns` that the row route, the planner and the readers take from
then on: nothing after it looks at the user's ``features``, ``exclude`` or
``features_col`` again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..errors import InputError, ParameterError, literal
from ..params import check
from .plan import is_numeric, suggest, value_type
from .sources.vector_source import expand_vector, vector_names, vector_schema


@dataclass(frozen=True)
class Columns:
    """The columns of a run (:func:`resolve`).

    ``df`` is the frame the rows are read from (with the ``kde`` estimator, the vector
    expanded into columns) and ``schema`` what gives the features' types (the frame, or
    the vector's elements as doubles); ``features`` the feature names (columns, or a
    vector's element names, less any excluded); ``features_col`` the vector column the
    workers cut, None when the features are columns, and ``elements`` all its element
    names in vector order (what a reader cuts the vectors by: an excluded element keeps
    its place), else None; ``weight_col`` the rows' weights (never a feature; every
    reader reads it last), or None; ``notes`` which columns were left out.
    """

    df: DataFrame
    schema: DataFrame | T.StructType
    label: str
    features: list[str]
    features_col: str | None = None
    weight_col: str | None = None
    notes: list[str] = field(default_factory=list)
    elements: list[str] | None = None

    @property
    def read(self) -> list[str]:
        """The columns every row source reads, in order: the label, the features (or the
        vector column), then the weights."""
        feats = self.features if self.features_col is None else [self.features_col]
        return [self.label, *feats, *([] if self.weight_col is None else [self.weight_col])]


def resolve(df: DataFrame, label: str, features: list[str] | None = None,
            exclude: list[str] | None = None, features_col: str | None = None,
            weight_col: str | None = None, estimator: str = "histogram") -> Columns:
    """The :class:`Columns` of a run on ``df``: the label, the features (named, else every
    usable column but ``exclude``, or a vector ``features_col``'s elements) and the weight
    column, each checked once (:func:`resolve_columns`, :func:`check_weight_col`,
    :func:`.sources.vector_source.vector_names`). With the ``kde`` estimator a vector is
    expanded into columns (its grid is computed over them).

    Raises
    ------
    ParameterError
        A name that is not a string, or a list of names given as one string
        (:func:`vmi_spark.params.check`: ``exclude="ab"`` is never the columns a and b).
    InputError
        A missing or unusable column, named in one line (:func:`resolve_columns`).
    """
    if not isinstance(label, str):
        raise InputError(f"label must be a column name, got {label!r}")
    if features_col is not None and not isinstance(features_col, str):
        raise InputError(f"features_col must be a column name, got {features_col!r}")
    features, exclude = check("features", features, "python"), check("exclude", exclude, "python")
    weight_col = check("weight_col", weight_col, "python")
    if weight_col is not None:
        check_weight_col(df, weight_col, label, features, features_col)
        if features is None and features_col is None:  # never a feature
            exclude = [*(exclude or []), weight_col]
    if features_col is None:
        names, notes = resolve_columns(df, label, features, exclude)
        return Columns(df, df, label, names, None, weight_col, notes)
    if estimator == "kde":
        df, elements = expand_vector(df, features_col, label, weight_col)
        names, notes = resolve_columns(df, label, elements, exclude)
        return Columns(df, df, label, names, None, weight_col, notes)
    # the workers cut the vectors (vector_source): no projection of D columns
    elements = vector_names(df, features_col, label, check=False)
    names = _kept_elements(df, features_col, elements, exclude or [])
    return Columns(df, vector_schema(df, label, elements), label, names, features_col,
                   weight_col, elements=elements)


def _kept_elements(df: DataFrame, features_col: str, elements: list[str],
                   exclude: list[str]) -> list[str]:
    """The vector's ``elements`` less ``exclude``, each of which must be an element or a
    column of ``df`` (as a column named in ``exclude`` must exist); not all of them."""
    for c in exclude:
        if c not in elements and c not in df.columns:
            raise ParameterError("exclude", "{exclude} names " + literal(
                f"'{c}', which is neither a column of the input nor an element of "
                f"'{features_col}'{suggest(c, [*elements, *df.columns])}"), "python")
    names = [f for f in elements if f not in exclude]
    if not names:
        raise InputError(f"no feature columns: every element of featuresCol '{features_col}' "
                         "is excluded")
    return names


def _listed(fields: Mapping[str, Any]) -> str:
    names = list(fields)
    return f"{', '.join(names[:10])}{'...' if len(names) > 10 else ''}"


def resolve_columns(df: DataFrame | T.StructType, label: str, features: list[str] | None,
                    exclude: list[str] | None = None) -> tuple[list[str], list[str]]:
    """The feature columns and the notes about columns left out.

    Without ``features``, every column but the label and ``exclude`` whose type can be
    read (:func:`value_type`) is a feature; a column of another type (binary, array,
    map, struct) is left out with a note. A column named in ``features`` or
    ``exclude`` must exist, and one named in ``features`` must have a usable type.

    Raises
    ------
    InputError
        A missing column (with the closest name), the label listed as a feature, a
        feature listed twice or of an unusable type, no feature left.
    """
    schema = df if isinstance(df, T.StructType) else df.schema
    fields = {f.name: f.dataType for f in schema.fields}
    if not fields:
        raise InputError("the input has no columns (an empty file, or a CSV without a header "
                         "row)")
    if label not in fields:
        raise ParameterError("label", "{label} column " + literal(
            f"'{label}' not found in the input{suggest(label, list(fields))} "
            f"(columns: {_listed(fields)})"), "python")
    if value_type(fields[label]) is None:
        raise ParameterError("label", "{label} column " + literal(
            f"'{label}' has unsupported type {fields[label].simpleString()}"), "python")
    for c in exclude or []:
        if c not in fields:
            raise ParameterError("exclude", "{exclude} names " + literal(
                f"'{c}', which is not in the input{suggest(c, list(fields))}"), "python")
    notes: list[str] = []
    if features is None:
        skipped = [c for c in fields if c != label and c not in (exclude or [])
                   and value_type(fields[c]) is None]
        features = [c for c in fields if c != label and c not in (exclude or [])
                    and c not in skipped]
        if skipped:
            notes.append(f"left out {len(skipped)} column(s) whose type cannot be a feature: "
                         + ", ".join(f"'{c}' ({fields[c].simpleString()})" for c in skipped[:10])
                         + ("..." if len(skipped) > 10 else ""))
    else:
        _check_named(features, fields, label, exclude or [])
        features = [c for c in features if c not in (exclude or [])]
    if not features:
        raise InputError("no feature columns: the input has only the label column"
                         + (" and excluded or unusable columns" if exclude or notes else ""))
    return features, notes


def _check_named(features: list[str], fields: Mapping[str, T.DataType], label: str,
                 exclude: list[str]) -> None:
    """Refuse a named feature that is missing, the label, listed twice or unusable."""
    missing = [c for c in features if c not in fields]
    if missing:
        raise InputError(f"feature column '{missing[0]}' not found in the input"
                         f"{suggest(missing[0], list(fields))}")
    if label in features:
        raise InputError(f"label column '{label}' is also listed as a feature")
    if len(set(features)) != len(features):
        dup = next(c for c in features if features.count(c) > 1)
        raise InputError(f"feature column '{dup}' is listed twice")
    for c in features:
        if value_type(fields[c]) is None:
            raise InputError(f"feature column '{c}' has unsupported type "
                             f"{fields[c].simpleString()} (use numeric, string, boolean, date, "
                             "timestamp or interval columns, or a vector column)")


def check_weight_col(df: DataFrame | T.StructType, weight_col: str, label: str,
                     features: list[str] | None, features_col: str | None) -> None:
    """Refuse a weight column that is missing, not a number (a string, a boolean, a
    vector), the label, the vector column or a named feature: a
    :class:`~vmi_spark.errors.ParameterError` naming the weight parameter, before any
    pass over the rows."""
    schema = df if isinstance(df, T.StructType) else df.schema
    fields = {f.name: f.dataType for f in schema.fields}
    shown = literal(weight_col)
    if weight_col not in fields:
        hint = literal(suggest(weight_col, list(fields)))
        raise ParameterError("weight_col", f"{{weight_col}} '{shown}' not found in the input{hint}")
    if weight_col == label or weight_col == features_col or weight_col in (features or []):
        what = ("the label" if weight_col == label else "the features column"
                if weight_col == features_col else "also listed as a feature")
        raise ParameterError("weight_col", f"{{weight_col}} '{shown}' is {what}; weights must "
                                           "be a column of their own")
    if not is_numeric(fields[weight_col]):
        raise ParameterError("weight_col", f"{{weight_col}} '{shown}' is a "
                             f"{fields[weight_col].simpleString()} column; weights must be "
                             "numbers")


__all__ = ["Columns", "check_weight_col", "resolve", "resolve_columns"]
