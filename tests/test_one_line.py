"""errors.one_line, raised_line and flat: the one place an exception becomes a line."""

from __future__ import annotations

from vmi_spark.errors import flat, one_line, raised_line


class _Java:
    """A stand-in for a py4j Java exception: a message and a cause chain."""

    def __init__(self, message, cause=None):
        self.message, self.cause = message, cause

    def getMessage(self):  # noqa: N802 - the Java name
        return self.message

    def getCause(self):  # noqa: N802
        return self.cause

    def toString(self):  # noqa: N802
        return "java.lang.Exception"


class _Py4J(Exception):
    def __init__(self, text, java):
        super().__init__(text)
        self.java_exception = java


def test_one_line_is_the_root_causes_first_line():
    root = _Java("Path does not exist: file:/no/such\n\tat org.apache.spark...")
    exc = _Py4J("An error occurred while calling o42.parquet.\n: org.apache...", _Java("outer", root))
    assert one_line(exc) == "Path does not exist: file:/no/such"
    assert one_line(ValueError("first\nsecond")) == "first"
    assert one_line(ValueError("")) == "ValueError"


def test_one_line_prefers_the_deepest_message_with_an_error_class():
    """Spark's classified message names the file; its cause only the column's types."""
    root = _Java("column: [x1], physicalType: BINARY, logicalType: double")
    read = _Java("[FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH] Encountered error while "
                 "reading file file:///d/p2.parquet. Data type mismatches when reading Parquet "
                 "column [x1].\n\tat org.apache...", root)
    job = _Java("Job aborted due to stage failure: Task 0 in stage 1.0 failed", read)
    outer = _Java("[SPARK_JOB_CANCELLED] Job 3 cancelled", job)  # a shallower class loses
    assert one_line(_Py4J("An error occurred", outer)) == read.message.splitlines()[0]
    assert one_line(_Py4J("An error occurred", job)) == read.message.splitlines()[0]
    assert one_line(_Py4J("An error occurred", _Java("[x] not a class", root))) == root.message


def test_one_line_falls_back_when_the_jvm_is_gone():
    class Gone:
        def getCause(self):  # noqa: N802
            raise ConnectionError("the JVM is gone")

    assert one_line(_Py4J("py4j said this\nand more", Gone())) == "py4j said this"


def test_raised_line_finds_the_python_error_a_task_raised():
    text = ("Job aborted due to stage failure: Task 0 ...\n"
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            "  File \"worker.py\", line 3, in f\n"
            "ValueError: label 'y' has NaN\n\tat org.apache.spark.rdd...")
    assert raised_line(RuntimeError(text)) == "ValueError: label 'y' has NaN"
    assert raised_line(RuntimeError("plain\nrest")) == "plain"
    assert len(raised_line(RuntimeError("x" * 1000))) == 300


def test_flat_shows_line_breaks_and_cuts():
    assert flat(ValueError("a\nb\rc")) == "a\\nb\\rc"
    assert flat(ValueError("abcdef"), 3) == "abc"
    assert flat(KeyError()) == "KeyError"
