"""The error types users see for bad input: a single line, exit status 2.

:class:`ParameterError` and :class:`ParameterWarning` carry a *template* whose
``{key}`` placeholders name parameters by their spec key (:mod:`vmi_spark.params`), so
that one message reads in each front end's own names: ``--num-features`` in the job,
``numTopFeatures`` in the estimator, ``n_features_to_select`` in the scikit-learn
selector. Any module may raise them (the numpy core too): the names are looked up only
when a message is phrased.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager


class InputError(ValueError):
    """Bad input or parameters; the message is one line that names the problem."""


class _Keys(dict):
    """Parameter names before the spec is loaded: each key is its own name."""

    def __missing__(self, key: str) -> str:
        return key


def _unregistered(style: str) -> Mapping[str, str]:
    return _Keys()


#: ``names(style) -> {key: name}``, registered by :mod:`vmi_spark.params` when it loads
_names: Callable[[str], Mapping[str, str]] = _unregistered


def register_names(names: Callable[[str], Mapping[str, str]]) -> None:
    """Set where :func:`phrase` finds the parameter names (the spec registers itself)."""
    global _names
    _names = names


def phrase(template: str, style: str) -> str:
    """``template`` with its ``{key}`` placeholders filled with the parameter names of
    front end ``style`` (``python``, ``ml``, ``cli`` or ``sklearn``)."""
    return template.format_map(_Keys(_names(style)))


def literal(text: str) -> str:
    """``text`` safe inside a template (its braces are not placeholders)."""
    return text.replace("{", "{{").replace("}", "}}")


class ParameterError(InputError):
    """A bad parameter value: one line, phrased in the names of whichever front end asks.

    ``str(error)`` uses the names of ``style`` (the ML names by default);
    :meth:`phrase` gives the message in another front end's names.

    Attributes
    ----------
    key : str
        The parameter (its spec key), or None for a message about several.
    template : str
        The message with ``{key}`` placeholders for parameter names.
    """

    def __init__(self, key: str | None, template: str, style: str = "ml") -> None:
        self.key = key
        self.template = template
        self.style = style
        super().__init__(phrase(template, style))

    def phrase(self, style: str) -> str:
        """The message with the parameter names of front end ``style``."""
        return phrase(self.template, style)

    def restyled(self, style: str) -> ParameterError:
        """The same error phrased for front end ``style``."""
        return ParameterError(self.key, self.template, style)


class ParameterWarning(UserWarning):
    """A note about a parameter (e.g. K capped), phrased like :class:`ParameterError`."""

    def __init__(self, key: str | None, template: str, style: str = "ml") -> None:
        self.key = key
        self.template = template
        super().__init__(phrase(template, style))

    def phrase(self, style: str) -> str:
        """The message with the parameter names of front end ``style``."""
        return phrase(self.template, style)


@contextmanager
def phrased(style: str) -> Iterator[None]:
    """Run the block; a :class:`ParameterError` it raises is phrased for front end
    ``style`` (the core raises them in the ML names)."""
    try:
        yield
    except ParameterError as exc:
        if exc.style == style:
            raise
        raise exc.restyled(style) from None


# --------------------------------------------------------------------------- one line
#
# The one place an exception becomes the single line a user reads.

def one_line(exc: BaseException) -> str:
    """One line for a (possibly Java) exception: the first line of the deepest message in
    its cause chain that carries one of Spark's error classes (``[FAILED_READ_FILE...]``
    names the file and what in it failed, where its cause says only ``column: [x1],
    physicalType: BINARY``), else of its root cause's (Spark wraps the cause in a long
    Java trace), else of its own text, else its type's name."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            chain = [java]
            while chain[-1].getCause() is not None and len(chain) < 64:
                chain.append(chain[-1].getCause())
            texts = [str(c.getMessage() or c.toString()).strip().splitlines() for c in chain]
            classified = [t for t in texts if t and _ERROR_CLASS.match(t[0])]
            text = classified[-1] if classified else texts[-1]
            if text:
                return text[0]
        except Exception:  # noqa: BLE001, S110 - the JVM is gone: the Python text below
            pass
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


#: the start of a message of Spark's error classes: ``[CLASS]`` or ``[CLASS.SUBCLASS]``
_ERROR_CLASS = re.compile(r"^\[[A-Z][A-Z0-9_]*(\.[A-Z][A-Z0-9_]*)*\] ")


def raised_line(exc: BaseException, limit: int = 300) -> str:
    """One line that says why a Spark job failed: the last Python error raised in a task
    that the message carries (``ValueError: ...``), else its first line."""
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            text = str(java.getMessage()) or text
        except Exception:  # noqa: BLE001, S110 - the JVM is gone
            pass
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    raised = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception): ", ln)
              and not ln.startswith(("org.apache", "py4j", "java."))]
    line = raised[-1] if raised else (lines[0] if lines else type(exc).__name__)
    return line[:limit]


def flat(exc: BaseException | str, limit: int | None = None) -> str:
    """The whole message of ``exc`` on one line: line breaks shown as ``\\n`` (a column
    name may hold one), cut at ``limit`` characters if given."""
    text = str(exc).replace("\r", "\\r").replace("\n", "\\n")
    text = text if limit is None else text[:limit]
    return text or (type(exc).__name__ if isinstance(exc, BaseException) else "")
