"""spark-submit entry point: ``spark-submit jobs/select_features.py --help``.

Thin on purpose: argument parsing, reading, fitting and writing live in
``vmi_spark.job`` so that tests call them directly.
"""

import sys

from vmi_spark.job import main

if __name__ == "__main__":
    sys.exit(main())
