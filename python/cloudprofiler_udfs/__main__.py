"""PySpark's own Python daemon (pyspark.daemon), whose forked workers time every batch of the Python UDFs they run
(cloudprofiler.spark.udf_timing). The helper names it in `spark.python.daemon.module` when
spark.cloudprofiler.udfs=true and the application has set neither PySpark's daemon nor its worker module.

A package of its own, outside cloudprofiler: the daemon must start no thread before it forks its workers
(pyspark.daemon's rule), and importing cloudprofiler loads numpy and pyarrow. So it imports cloudprofiler only in a
forked worker, as it starts its first task. Why a daemon and not a worker module (`spark.python.worker.module`):
Spark 3.5's daemon never imports one, and Spark 4's imports only a module whose name starts with "pyspark". The
workers the JVM starts without the daemon (spark.python.use.daemon=false) run the worker module `worker` of this
package instead, which the helper sets beside the daemon.
"""
import os
import sys

_installed = []  # in a forked worker: whether it has tried to wrap pyspark.worker (once per process)


def _timing(original):
    def worker(sock, authenticated):
        if not _installed:
            _installed.append(True)
            try:
                from cloudprofiler.spark.udf_timing import install

                install()
            except Exception as e:  # noqa: BLE001 -- the UDFs run as they would without the profiler
                print(f"cloudprofiler: the Python UDFs of worker {os.getpid()} are not timed: {type(e).__name__}: "
                      f"{e}", file=sys.stderr, flush=True)
        return original(sock, authenticated)

    return worker


if __name__ == "__main__":
    import pyspark.daemon

    pyspark.daemon.worker = _timing(pyspark.daemon.worker)  # manager() calls it in each forked worker
    pyspark.daemon.manager()
