"""vmi_spark: variational information maximisation feature selection on Apache Spark.

Implements Gao, Ver Steeg & Galstyan, "Variational Information Maximization for
Feature Selection" (NIPS 2016) as a Spark ML estimator and a spark-submit job.
"""

from .errors import InputError

__version__ = "0.1.0"
__all__ = ["VMISelector", "VMISelectorModel", "InputError", "__version__"]


def __getattr__(name: str):
    # pyspark is imported lazily so the numpy core stays usable without a JVM
    if name in ("VMISelector", "VMISelectorModel"):
        from . import ml

        return getattr(ml, name)
    raise AttributeError(name)
