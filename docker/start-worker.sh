#!/usr/bin/env bash
# Start a Spark standalone worker in the foreground (exec, so the caller's PID is the JVM).
#
# Used by BOTH docker/compose.yaml (services "worker1", "worker2") and the loopback cluster
# test (vmi_spark.testing.cluster.SparkCluster(scripts_dir="docker")), so the containers
# and the test start Spark the same way.
#
#   SPARK_MASTER_URL         master to register with (default: spark://127.0.0.1:7077)
#   SPARK_WORKER_HOST        address to bind and advertise (default: 127.0.0.1)
#   SPARK_WORKER_CORES       cores offered to executors     (default: 1)
#   SPARK_WORKER_MEMORY      memory offered to executors    (default: 1g)
#   SPARK_WORKER_WEBUI_PORT  web UI port                    (default: 8081)
#   SPARK_WORKER_DIR         work directory (read by Spark itself; default $SPARK_HOME/work)
#   SPARK_CLASS              the spark-class launcher       (default: spark-class on PATH)
set -euo pipefail

master="${SPARK_MASTER_URL:-spark://127.0.0.1:7077}"
host="${SPARK_WORKER_HOST:-127.0.0.1}"
cores="${SPARK_WORKER_CORES:-1}"
memory="${SPARK_WORKER_MEMORY:-1g}"
webui="${SPARK_WORKER_WEBUI_PORT:-8081}"
spark_class="${SPARK_CLASS:-spark-class}"

exec "$spark_class" org.apache.spark.deploy.worker.Worker "$master" \
    --host "$host" --cores "$cores" --memory "$memory" --webui-port "$webui"
