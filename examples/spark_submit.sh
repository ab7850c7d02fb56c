#!/usr/bin/env bash
# Enable the plugin with configuration only: every task of this job gets a start and an end TSC record.
# Run from the repository root after `make build`: bash examples/spark_submit.sh [log folder]
set -euo pipefail
logs=${1:-/tmp/cloudprofiler-spark-submit}
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$PWD/.venv/bin/python}  # spark-submit finds pyspark through it
.venv/bin/spark-submit --master 'local[2]' --conf spark.ui.showConsoleProgress=false \
  $(.venv/bin/cloudprofiler spark-conf --log-dir "$logs" | tr -d '\\') \
  examples/spark_job.py
echo "logs in $logs"
