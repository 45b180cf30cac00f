#!/usr/bin/env bash
# Start a Spark standalone master in the foreground (exec, so the caller's PID is the JVM).
#
# Used by BOTH docker/compose.yaml (service "master") and the loopback cluster test
# (vmi_spark.testing.cluster.SparkCluster(scripts_dir="docker")), so the containers and
# the test start Spark the same way.
#
#   SPARK_MASTER_HOST        address to bind and advertise  (default: 127.0.0.1)
#   SPARK_MASTER_PORT        RPC port                        (default: 7077)
#   SPARK_MASTER_WEBUI_PORT  web UI port (JSON at /json/)    (default: 8080)
#   SPARK_CLASS              the spark-class launcher         (default: spark-class on PATH,
#                            as installed by `pip install pyspark`)
set -euo pipefail

host="${SPARK_MASTER_HOST:-127.0.0.1}"
port="${SPARK_MASTER_PORT:-7077}"
webui="${SPARK_MASTER_WEBUI_PORT:-8080}"
spark_class="${SPARK_CLASS:-spark-class}"

exec "$spark_class" org.apache.spark.deploy.master.Master \
    --host "$host" --port "$port" --webui-port "$webui"
