"""What the numbers of a temporal feature mean, and how to show them.

Dates, timestamps and intervals are ordered features: every reader turns them into one
number each (the *unit* below), so that they are binned like any numeric column, and
their bin edges and state names are shown back in their own form (ISO 8601). Spark-free.

=============== ======================================== ===============================
unit            the number                                shown as
=============== ======================================== ===============================
``date``        days since 1970-01-01                     ``2024-03-01``
``timestamp``   microseconds since 1970-01-01T00:00 UTC   ``2024-03-01T12:00:00Z``
``timestamp_ntz`` microseconds since 1970-01-01T00:00     ``2024-03-01T12:00:00``
                (wall clock, no time zone)
``interval``    microseconds (a day-time interval)        ``P3DT4H5M6S``
``months``      months (a year-month interval)            ``P1Y2M``
=============== ======================================== ===============================

References
----------
ISO 8601-1:2019, Date and time -- Representations for information interchange.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

import numpy as np

#: every unit a feature may have (None: a plain number)
UNITS = ("date", "timestamp", "timestamp_ntz", "interval", "months")
#: what each unit's numbers count, for reports
MEANINGS = {"date": "days since 1970-01-01",
            "timestamp": "microseconds since 1970-01-01T00:00:00Z",
            "timestamp_ntz": "microseconds since 1970-01-01T00:00:00 (no time zone)",
            "interval": "microseconds",
            "months": "months",
            # not a time: a boolean category column's values (1 true, 0 false), for its
            # state names (:func:`show_state`)
            "boolean": "1 true, 0 false"}

_EPOCH = _dt.datetime(1970, 1, 1)
_MICROS_PER_DAY = 86_400_000_000


def check_unit(unit: str | None) -> str | None:
    """``unit`` if it is None or one of :data:`UNITS` (``ValueError`` otherwise)."""
    if unit is not None and unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r} (choose from {', '.join(UNITS)})")
    return unit


def _clock(micros: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS[.ffffff]`` of ``micros`` after the epoch (proleptic)."""
    try:
        t = _EPOCH + _dt.timedelta(microseconds=micros)
    except OverflowError:
        return f"{micros}us"
    text = t.strftime("%Y-%m-%dT%H:%M:%S") if t.year >= 1000 else \
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t:%H:%M:%S}"
    return text + (f".{t.microsecond:06d}".rstrip("0") if t.microsecond else "")


def _duration(micros: int) -> str:
    """ISO 8601 duration of a day-time interval of ``micros`` microseconds."""
    sign, micros = ("-", -micros) if micros < 0 else ("", micros)
    days, rest = divmod(micros, _MICROS_PER_DAY)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    time = "".join(f"{v}{u}" for v, u in ((hours, "H"), (minutes, "M")) if v)
    if seconds or fraction:
        time += f"{seconds}" + (f".{fraction:06d}".rstrip("0") if fraction else "") + "S"
    text = (f"{days}D" if days else "") + (f"T{time}" if time else "")
    return f"{sign}P{text or 'T0S'}"


def _months(months: int) -> str:
    sign, months = ("-", -months) if months < 0 else ("", months)
    years, months = divmod(months, 12)
    text = (f"{years}Y" if years else "") + (f"{months}M" if months or not years else "")
    return f"{sign}P{text}"


def show(value: float, unit: str | None) -> str:
    """``value`` (a number of ``unit``) as its reader would write it.

    Whole numbers of the unit are shown exactly; a number between two (an equal-width
    edge) is shown at the unit's resolution, rounded down. Infinities and plain numbers
    (``unit`` None) are shown with 6 significant digits.
    """
    if unit is None or not math.isfinite(value):
        return "inf" if value == math.inf else "-inf" if value == -math.inf else f"{value:.6g}"
    whole = math.floor(value)
    if unit == "date":
        if whole != value:
            return _clock(math.floor(value * _MICROS_PER_DAY))
        return _clock(whole * _MICROS_PER_DAY)[:10] if abs(whole) < 3_000_000 else f"{whole}d"
    if unit == "timestamp":
        return _clock(whole) + "Z"
    if unit == "timestamp_ntz":
        return _clock(whole)
    if unit == "interval":
        return _duration(whole)
    return _months(whole)


def show_state(value: Any, unit: str | None = None) -> str:
    """A category's value (or a label's class) as a state name: a boolean's 0 and 1 as
    ``false`` and ``true``, a whole number as an integer (``1``, not ``1.0``: integer
    columns reach the plan as doubles), a temporal value by :func:`show`; anything else as
    ``str`` does."""
    if isinstance(value, (bool, np.bool_)) or unit == "boolean" and value in (0, 1):
        return "true" if value else "false"
    if unit is not None and unit != "boolean":
        return show(float(value), unit)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) \
            and value == math.floor(value) and abs(value) < 2 ** 53:
        return str(int(value))
    return str(value)


def count_text(n: float, weighted: bool = False) -> str:
    """``n`` rows for a message: ``62,625 rows``; with row weights their total weight,
    ``62,625.4 weighted rows`` (one decimal; three digits below 1)."""
    if float(n) == math.floor(n):
        shown = f"{int(n):,}"
    else:
        shown = f"{n:,.1f}" if abs(n) >= 1 else f"{n:.3g}"
    return f"{shown} weighted rows" if weighted else f"{shown} rows"


def is_whole(value: float, unit: str | None) -> bool:
    """Whether ``value`` is written exactly by :func:`show` (a whole number of the unit)."""
    return unit is not None and math.isfinite(value) and value == math.floor(value)
