# Databricks notebook source
# MAGIC %md
# MAGIC # VMI feature selection on a Databricks table
# MAGIC
# MAGIC Runs `vmi_spark.VMISelector` (variational information maximisation, Gao et al. NIPS 2016,
# MAGIC and the comparison criteria MIM, mRMR, JMI, CMIM, CIFE, SPEC_CMI) on a catalog table,
# MAGIC shows the selection report, the steps as a DataFrame and the bound per step, and
# MAGIC optionally logs the selection to MLflow and writes the pruned table.
# MAGIC
# MAGIC **Requirements:** Databricks Runtime 14.3 LTS or later (Apache Spark 3.5 or 4.x, which
# MAGIC the runtime provides), or serverless compute. Build the wheel with
# MAGIC `python3 -m pip wheel --no-deps --wheel-dir dist .` and upload it to a Unity Catalog
# MAGIC volume; set the path in the install cell below.
# MAGIC
# MAGIC On a classic (single-user or no-isolation) cluster the selection runs as one job of
# MAGIC resident barrier tasks that talk to the driver; in shared access mode (Spark Connect)
# MAGIC and with autoscaling through dynamic allocation it runs one Spark job per pass. The
# MAGIC result is the same; `model.report["execution"]` says which ran. Serverless compute
# MAGIC refuses caching: there the encoded data is recomputed from the table by every pass (same
# MAGIC result, slower); `model.report["storage"]` says how it was kept.
# MAGIC
# MAGIC The notebook also runs outside Databricks as a plain Python file (no `dbutils`): the
# MAGIC widgets then take their values from `VMI_<NAME>` environment variables (`VMI_TABLE`,
# MAGIC `VMI_METHOD`, `VMI_EXCLUDE`, ...) or their defaults, and `spark` is
# MAGIC `SparkSession.builder.getOrCreate()` (with `SPARK_REMOTE=local[2]`, a local Spark Connect
# MAGIC session). A local session's catalog lives in its process: a table saved by an earlier
# MAGIC process (`saveAsTable`, in the same working directory) is found in the session's
# MAGIC warehouse directory and registered again.

# COMMAND ----------

# MAGIC %md
# MAGIC ## Install the package
# MAGIC
# MAGIC A plain install: the wheel does not require PySpark (only its `spark` extra does), so pip
# MAGIC keeps the runtime's own PySpark; numpy, pandas and pyarrow are the runtime's too when they
# MAGIC are recent enough. matplotlib (for the plot) and MLflow are preinstalled on the runtime.

# COMMAND ----------

# MAGIC %pip install /Volumes/main/default/wheels/vmi_spark-0.1.0-py3-none-any.whl

# COMMAND ----------

try:
    dbutils.library.restartPython()  # noqa: F821 - dbutils is defined in Databricks notebooks
except NameError:  # run outside Databricks: nothing was installed by %pip, nothing to restart
    pass

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC `method` offers every method of the package (the VMI bounds and the comparison
# MAGIC criteria). `exclude` names columns to leave out (comma-separated, e.g. ids, leaky
# MAGIC columns or strings with too many values); every other column but the label is a
# MAGIC candidate feature.

# COMMAND ----------

import os

from vmi_spark.params import METHOD_NAMES

DEFAULTS = {"table": "main.default.training_data", "label": "label", "method": "vmi_naive",
            "num_features": "50", "restart_tolerance": "0.0", "exclude": "",
            "log_mlflow": "no", "output_table": ""}
TITLES = {"table": "Input table", "label": "Label column", "method": "Method",
          "num_features": "Features to select (K)", "restart_tolerance": "Restart tolerance (nats)",
          "exclude": "Columns to leave out (comma-separated)", "log_mlflow": "Log to MLflow",
          "output_table": "Pruned table to write (empty: none)"}
CHOICES = {"method": list(METHOD_NAMES), "log_mlflow": ["no", "yes"]}

try:
    widgets = dbutils.widgets  # noqa: F821
except NameError:
    widgets = None

if widgets is not None:
    for name, default in DEFAULTS.items():
        if name in CHOICES:
            widgets.dropdown(name, default, CHOICES[name], TITLES[name])
        else:
            widgets.text(name, default, TITLES[name])
    get_param = widgets.get
else:
    def get_param(name: str) -> str:
        return os.environ.get(f"VMI_{name.upper()}", DEFAULTS[name])

table = get_param("table")
label = get_param("label")
method = get_param("method")
if method not in METHOD_NAMES:
    raise ValueError(f"method must be one of {', '.join(METHOD_NAMES)}, got {method!r}")
num_features = int(get_param("num_features"))
restart_tolerance = float(get_param("restart_tolerance"))
exclude = [c.strip() for c in get_param("exclude").split(",") if c.strip()]
log_mlflow = get_param("log_mlflow") == "yes"
output_table = get_param("output_table").strip()

# COMMAND ----------

# MAGIC %md
# MAGIC ## Select features

# COMMAND ----------

try:
    spark  # noqa: B018 - defined in Databricks notebooks
except NameError:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()

try:
    display, displayHTML  # noqa: B018 - Databricks notebook built-ins
except NameError:  # outside Databricks: show as text
    def display(obj) -> None:
        if hasattr(obj, "schema") and hasattr(obj, "show"):  # a Spark DataFrame
            obj.show(truncate=False)
        else:  # e.g. the matplotlib figure
            print(obj)

    def displayHTML(html: str) -> None:
        print(html)

from vmi_spark import VMISelector


def read_table(name: str):
    """``spark.read.table(name)``; outside Databricks, a table an earlier local process
    saved (``saveAsTable``) is registered again from the session's warehouse directory
    (a local session's catalog does not outlive its process), its schema (``db`` of
    ``db.t``) too; a table that is nowhere ends the run with one line (SystemExit), not
    Spark's TABLE_OR_VIEW_NOT_FOUND / SCHEMA_NOT_FOUND traceback."""
    try:
        found = spark.read.table(name)
        found.schema  # noqa: B018 - Spark Connect resolves the table here, not in read.table
        return found
    except Exception as exc:
        if widgets is not None or not any(m in str(exc) for m in ("TABLE_OR_VIEW_NOT_FOUND",
                                                                  "SCHEMA_NOT_FOUND")):
            raise
        parts = name.split(".")
        warehouse = spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")
        location = os.path.join(warehouse, *[f"{p}.db" for p in parts[-2:-1]], parts[-1])
        if not os.path.isdir(location):
            raise SystemExit(
                f"table '{name}' not found: not in this session's catalog, nor saved in its "
                f"warehouse directory ({location}); set VMI_TABLE to a table or temporary "
                "view of this session, or start Spark with the spark.sql.warehouse.dir "
                "(and, for a Hive metastore, spark.sql.catalogImplementation=hive) that "
                "saved it (docs/usage.md, local Hive)") from None
        if len(parts) > 1:  # its schema's directory is there: register the schema too
            quoted = ".".join(f"`{p.replace('`', '``')}`" for p in parts[:-1])
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {quoted}")
        spark.catalog.createTable(name, path=location)
        return spark.read.table(name)


df = read_table(table)
unknown = sorted(set(exclude) - set(df.columns))
if unknown:
    raise ValueError(f"exclude names columns that {table} does not have: {', '.join(unknown)}")
features = [c for c in df.columns if c != label and c not in exclude]
selector = VMISelector(inputCols=features, labelCol=label, numTopFeatures=num_features,
                       method=method, restartTolerance=restart_tolerance)
model = selector.fit(df)
print(f"selected {len(model.selectedFeatureNames)} of {len(features)} features"
      + (f" ({len(exclude)} columns left out)" if exclude else ""))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Report and steps

# COMMAND ----------

from vmi_spark.report import render_markdown

report = model.report
report["input"] = table
displayHTML(
    "<pre style='white-space: pre-wrap'>" + render_markdown(report).replace("&", "&amp;")
    .replace("<", "&lt;") + "</pre>")
steps = model.stepsDF  # step, feature, index, score, gain, block
display(steps)

# COMMAND ----------

from vmi_spark.report import plot_bounds

try:
    fig = plot_bounds(report)
    display(fig)
except ImportError as exc:  # matplotlib is not installed
    print(exc)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Log to MLflow (optional)
# MAGIC
# MAGIC A fit inside `with mlflow.start_run():` is logged by itself; this cell logs the selection
# MAGIC to the notebook's experiment when `log_mlflow` is `yes`.

# COMMAND ----------

if log_mlflow:
    from vmi_spark.tracking import log_selection

    print(f"logged to MLflow run {log_selection(report)}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Write the pruned table (optional)

# COMMAND ----------

if output_table:
    model.transform(df).write.mode("overwrite").saveAsTable(output_table)
    print(f"wrote {output_table}")
