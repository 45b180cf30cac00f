# Databricks notebook source
# MAGIC %md
# MAGIC # VMI feature selection on a Databricks table
# MAGIC
# MAGIC Runs `vmi_spark.VMISelector` (variational information maximisation, Gao et al. NIPS 2016)
# MAGIC on a catalog table, shows the selection report and the bound per step, and optionally
# MAGIC writes the pruned table.
# MAGIC
# MAGIC **Requirements:** a cluster on Databricks Runtime 17.x or later (Apache Spark 4.x; the
# MAGIC package needs `pyspark>=4.0`), or serverless compute on an environment with Spark 4.
# MAGIC Build the wheel with `python -m build --wheel` and upload it to a Unity Catalog volume;
# MAGIC set the `wheel` widget to its path.
# MAGIC
# MAGIC On a classic (single-user or no-isolation) cluster the selection runs as one job of
# MAGIC resident barrier tasks that talk to the driver; on serverless or shared access mode
# MAGIC (Spark Connect) and with autoscaling through dynamic allocation it runs one Spark job
# MAGIC per pass. The result is the same; `model.report["execution"]` says which ran.

# COMMAND ----------

# MAGIC %md
# MAGIC ## Install the package
# MAGIC
# MAGIC `--no-deps`: the runtime already provides PySpark, numpy, pandas and pyarrow; letting pip
# MAGIC resolve `pyspark` from PyPI would shadow the runtime's own PySpark.
# MAGIC matplotlib (for the plot) is preinstalled on Databricks Runtime.

# COMMAND ----------

# MAGIC %pip install --no-deps /Volumes/main/default/wheels/vmi_spark-0.1.0-py3-none-any.whl

# COMMAND ----------

dbutils.library.restartPython()  # noqa: F821 - dbutils is defined in Databricks notebooks

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters

# COMMAND ----------

dbutils.widgets.text("table", "main.default.training_data", "Input table")  # noqa: F821
dbutils.widgets.text("label", "label", "Label column")  # noqa: F821
dbutils.widgets.dropdown("method", "vmi_naive", ["vmi_naive", "vmi_pairwise"], "Method")  # noqa: F821
dbutils.widgets.text("num_features", "50", "Features to select (K)")  # noqa: F821
dbutils.widgets.text("restart_tolerance", "0.0", "Restart tolerance (nats)")  # noqa: F821
dbutils.widgets.text("output_table", "", "Pruned table to write (empty: none)")  # noqa: F821

table = dbutils.widgets.get("table")  # noqa: F821
label = dbutils.widgets.get("label")  # noqa: F821
method = dbutils.widgets.get("method")  # noqa: F821
num_features = int(dbutils.widgets.get("num_features"))  # noqa: F821
restart_tolerance = float(dbutils.widgets.get("restart_tolerance"))  # noqa: F821
output_table = dbutils.widgets.get("output_table").strip()  # noqa: F821

# COMMAND ----------

# MAGIC %md
# MAGIC ## Select features

# COMMAND ----------

from vmi_spark import VMISelector

df = spark.read.table(table)  # noqa: F821 - spark is defined in Databricks notebooks
features = [c for c in df.columns if c != label]
selector = VMISelector(inputCols=features, labelCol=label, numTopFeatures=num_features,
                       method=method, restartTolerance=restart_tolerance)
model = selector.fit(df)
print(f"selected {len(model.selectedFeatureNames)} of {len(features)} features")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Report

# COMMAND ----------

import pandas as pd

from vmi_spark.report import render_markdown

report = model.report
report["input"] = table
displayHTML(  # noqa: F821 - Databricks notebook built-in
    "<pre style='white-space: pre-wrap'>" + render_markdown(report).replace("&", "&amp;")
    .replace("<", "&lt;") + "</pre>")
display(pd.DataFrame({  # noqa: F821
    "step": range(1, len(report["selected"]) + 1),
    "feature": report["selected"],
    "bound_nats": report["scores"],
    "gain_nats": report["gains"],
    "block": report["blocks"],
}))

# COMMAND ----------

from vmi_spark.report import plot_bounds

fig = plot_bounds(report)
display(fig)  # noqa: F821

# COMMAND ----------

# MAGIC %md
# MAGIC ## Write the pruned table (optional)

# COMMAND ----------

if output_table:
    model.transform(df).write.mode("overwrite").saveAsTable(output_table)
    print(f"wrote {output_table}")
