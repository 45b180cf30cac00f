"""spark-submit entry point: ``spark-submit jobs/select_features.py --help``.

Thin on purpose: argument parsing, reading, fitting and writing live in
``vmi_spark.job`` so that tests call them directly.
"""

import sys

from vmi_spark._deps import prefer_installed_pyspark

prefer_installed_pyspark()  # before anything imports pyspark: a second less of start-up

from vmi_spark.job import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
