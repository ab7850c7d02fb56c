#!/usr/bin/env bash
# Enable the plugin with configuration only: every task of this job gets a start and an end TSC record.
# Run from the repository root after `make build`.
set -euo pipefail
logs=${1:-/tmp/cloudprofiler-spark-submit}
.venv/bin/spark-submit --master 'local[2]' \
  $(.venv/bin/cloudprofiler spark-conf --log-dir "$logs" | tr -d '\\') \
  examples/spark_job.py
echo "logs in $logs"
