package io.cloudprofiler.spark.driver;

import io.cloudprofiler.spark.Config;
import org.apache.spark.SparkConf;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link Config#UDFS} at the driver's start: a bad value stops the application naming it, and one
 * line says whether the Python workers will time their UDFs' batches. They do in PySpark's daemon
 * {@link Config#UDF_DAEMON_MODULE} or, where the JVM starts its workers without the daemon, in
 * PySpark's worker {@link Config#UDF_WORKER_MODULE}, which the Python helper sets; the plugin never
 * sets them itself: a module that the workers' Python cannot import would fail every Python task.
 */
final class PythonUdfTiming {
  private static final Logger LOG = LoggerFactory.getLogger(PythonUdfTiming.class);

  private PythonUdfTiming() {}

  static void check(SparkConf conf) {
    if (!Config.UDFS.read(conf)) return;
    boolean daemon = conf.getBoolean(Config.USE_DAEMON_KEY, true);
    String key = daemon ? Config.DAEMON_MODULE_KEY : Config.WORKER_MODULE_KEY;
    String ours = daemon ? Config.UDF_DAEMON_MODULE : Config.UDF_WORKER_MODULE;
    String set = conf.get(key, "");
    if (set.equals(ours))
      LOG.info(
          "cloudprofiler: Python workers time every batch of their UDFs ({})", Config.UDFS.name);
    else
      LOG.warn(
          "cloudprofiler: {}=true, but {}={}: Python UDF batches are not timed (they are with"
              + " {}={}, which the Python helper and `cloudprofiler spark-conf` set)",
          Config.UDFS.name,
          key,
          set.isEmpty() ? (daemon ? "pyspark.daemon" : "pyspark.worker") + " (the default)" : set,
          key,
          ours);
  }
}
