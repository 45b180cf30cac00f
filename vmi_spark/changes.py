"""What changed since the last scheduled run: ``--previous DIR`` and ``--fail-on-change``.

A weekly pruning job keeps last week's ``--output`` and passes it as ``--previous``; the
job then adds ``changes`` to ``selection.json`` and ``report.md``
(:func:`compare`): the features that entered and left the selection, the rank moves of
those in both, the Jaccard index of the two sets, and whether the input's schema (column
names and types, :func:`input_schema`) or row count changed.

The previous output is untrusted input: ``selection.json`` is read only if it is a regular
file of at most :data:`MAX_PREVIOUS_BYTES`, is JSON, and every field used validates
(:func:`read_previous`); anything else, a missing directory included, is a warning and
``changes`` says ``"compared": false`` with the reason. ``--previous`` never fails the job
by itself.

*Change* (``selected_changed``, what ``--fail-on-change`` acts on) means the selected
**set** differs: a feature entered or left. A new order of the same features, a new
schema or row count, other scores are reported but are not a change of the selection.
With ``--fail-on-change`` the job exits with status 3 after writing every output when the
set changed; an unusable previous output is not a change (exit 0, with the warning), so
the first run of a schedule passes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from typing import Any

from .core.report_schema import SelectionReport

#: largest previous ``selection.json`` read (a wide table's report with its columns' states)
MAX_PREVIOUS_BYTES = 256 << 20
#: the exit status of ``--fail-on-change`` when the selected set changed
CHANGED_STATUS = 3


class PreviousError(ValueError):
    """A previous output that cannot be used (the reason, one line)."""


def input_schema(fields: list[tuple[str, str]]) -> dict[str, Any]:
    """The input's ``columns`` (name and type, in order) and their SHA-256 ``fingerprint``,
    for next week's run to compare (``selection.json``'s ``input_schema``)."""
    columns = [{"name": str(n), "type": str(t)} for n, t in fields]
    digest = hashlib.sha256(json.dumps(columns, separators=(",", ":")).encode("utf-8"))
    return {"columns": columns, "fingerprint": digest.hexdigest()}


def _names(raw: Any, what: str) -> list[str]:
    if type(raw) is not list or not all(type(v) is str for v in raw):
        raise PreviousError(f"'{what}' is not a list of names")
    if len(set(raw)) != len(raw):
        raise PreviousError(f"'{what}' holds a name twice")
    return list(raw)


def _schema(raw: Any) -> dict[str, str] | None:
    if raw is None:
        return None
    if type(raw) is not dict or type(raw.get("columns")) is not list:
        raise PreviousError("'input_schema' is not an object with 'columns'")
    out: dict[str, str] = {}
    for c in raw["columns"]:
        if type(c) is not dict or type(c.get("name")) is not str or type(c.get("type")) is not str:
            raise PreviousError("'input_schema' has a column that is not a name and a type")
        out[c["name"]] = c["type"]
    return out


def _no_constant(name: str) -> Any:
    """JSON's NaN and Infinity, which the job never writes (``allow_nan=False``)."""
    raise PreviousError(f"it holds {name}")


def read_previous(directory: str, max_bytes: int = MAX_PREVIOUS_BYTES) -> dict[str, Any]:
    """The fields of a previous run's ``DIR/selection.json`` (at most ``max_bytes``,
    :data:`MAX_PREVIOUS_BYTES`) that :func:`compare` uses,
    validated: ``selected`` (names, in selection order), ``features``, ``method``,
    ``parameters`` (an object), ``input_schema`` ({name: type} or None), ``input_rows``
    (an int or None). Raises :class:`PreviousError` (one line) on anything else."""
    path = os.path.join(directory, "selection.json")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise PreviousError(f"no selection.json in '{directory}'") from None
    except OSError as exc:
        raise PreviousError(f"cannot read '{path}': {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise PreviousError(f"'{path}' is not a regular file")
    if st.st_size > max_bytes:
        raise PreviousError(f"'{path}' is larger than {max_bytes >> 20} MiB")
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.loads(fh.read(max_bytes + 1), parse_constant=_no_constant)
    except PreviousError:
        raise
    except (OSError, UnicodeError, ValueError, RecursionError) as exc:
        text = " ".join(str(exc).split())[:200]
        raise PreviousError(f"'{path}' is not JSON ({text})") from None
    if type(raw) is not dict:
        raise PreviousError(f"'{path}' is not a JSON object")
    selected = _names(raw.get("selected"), "selected")
    features = _names(raw.get("features"), "features")
    if not set(selected) <= set(features):
        raise PreviousError("'selected' names a feature that 'features' does not list")
    method = raw.get("method")
    if type(method) is not str:
        raise PreviousError("'method' is not a name")
    params = raw.get("parameters", {})
    if type(params) is not dict:
        raise PreviousError("'parameters' is not an object")
    rows = raw.get("input_rows")
    if rows is not None and (type(rows) is not int or rows < 0):
        raise PreviousError("'input_rows' is not a row count")
    return {"selected": selected, "features": features, "method": method,
            "parameters": params, "input_schema": _schema(raw.get("input_schema")),
            "input_rows": rows}


def _same(a: Any, b: Any) -> bool:
    """Parameter values equal as JSON reads them back (a float's nan/inf as strings)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


def compare(previous: dict[str, Any] | None, current: SelectionReport, where: str,
            reason: str | None = None) -> dict[str, Any]:
    """The report's ``changes``: ``previous`` (from :func:`read_previous`, None when it
    could not be read, ``reason`` saying why) against the ``current`` report.

    Fields: ``previous`` (``where``), ``compared``; then ``selected_changed`` (the sets
    differ), ``entered`` (in the current selection order), ``left`` (in the previous
    order), ``rank_moves`` (each feature in both: ``previous_rank``, ``rank``, ``move`` =
    previous rank - rank, positive when it moved up), ``jaccard`` (|A and B| / |A or B|; 1
    for two empty sets), ``schema_changed`` (None when the previous run did not record its
    schema), ``columns_added``, ``columns_removed``, ``columns_retyped``, ``rows_changed``,
    ``previous_rows``, ``rows``, and ``notes`` (another method or other parameters, which
    explain a change)."""
    out: dict[str, Any] = {"previous": where, "compared": previous is not None}
    if previous is None:
        out["reason"] = reason or "no previous output"
        return out
    now, before = list(current.get("selected") or []), previous["selected"]
    a, b = set(now), set(before)
    rank_now = {f: i + 1 for i, f in enumerate(now)}
    rank_before = {f: i + 1 for i, f in enumerate(before)}
    union = a | b
    out.update(
        selected_changed=a != b,
        entered=[f for f in now if f not in b],
        left=[f for f in before if f not in a],
        rank_moves=[{"feature": f, "previous_rank": rank_before[f], "rank": rank_now[f],
                     "move": rank_before[f] - rank_now[f]} for f in now if f in b],
        jaccard=len(a & b) / len(union) if union else 1.0)
    schema_now = {c["name"]: c["type"] for c in (current.get("input_schema") or {}).get(
        "columns", [])}
    schema_before = previous["input_schema"]
    if schema_before is None or not schema_now:
        out.update(schema_changed=None, columns_added=[], columns_removed=[],
                   columns_retyped=[])
    else:
        retyped = [{"name": n, "previous_type": schema_before[n], "type": t}
                   for n, t in schema_now.items() if n in schema_before and schema_before[n] != t]
        added = [n for n in schema_now if n not in schema_before]
        removed = [n for n in schema_before if n not in schema_now]
        out.update(schema_changed=bool(added or removed or retyped), columns_added=added,
                   columns_removed=removed, columns_retyped=retyped)
    rows_now, rows_before = current.get("input_rows"), previous["input_rows"]
    out.update(rows=rows_now, previous_rows=rows_before,
               rows_changed=None if rows_before is None or rows_now is None
               else rows_now != rows_before)
    notes = []
    if previous["method"] != current.get("method"):
        notes.append(f"the previous run used method {previous['method']}, this one "
                     f"{current.get('method')}")
    params_now = current.get("parameters") or {}
    differ = sorted(k for k in set(params_now) | set(previous["parameters"])
                    if not _same(params_now.get(k), previous["parameters"].get(k)))
    if differ:
        notes.append("parameters differ from the previous run's: " + ", ".join(differ))
    out["notes"] = notes
    return out


def changed(changes: dict[str, Any] | None) -> bool:
    """Whether ``--fail-on-change`` exits with :data:`CHANGED_STATUS`: compared, and the
    selected set differs."""
    return bool(changes and changes.get("compared") and changes.get("selected_changed"))
