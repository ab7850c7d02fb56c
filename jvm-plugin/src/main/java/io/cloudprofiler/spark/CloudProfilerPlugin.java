package io.cloudprofiler.spark;

import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Enable with {@code --conf spark.plugins=io.cloudprofiler.spark.CloudProfilerPlugin}: every task attempt gets a
 * TSC record at its start and its end on the executor that ran it; the driver writes Spark's view of every
 * task attempt next to those records.
 */
public class CloudProfilerPlugin implements SparkPlugin {
  @Override
  public DriverPlugin driverPlugin() {
    return new CloudProfilerDriverPlugin();
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new CloudProfilerExecutorPlugin();
  }
}
