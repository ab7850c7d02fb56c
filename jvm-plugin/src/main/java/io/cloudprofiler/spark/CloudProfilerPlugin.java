package io.cloudprofiler.spark;

import io.cloudprofiler.spark.driver.CloudProfilerDriverPlugin;
import io.cloudprofiler.spark.executor.CloudProfilerExecutorPlugin;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;
import org.apache.spark.scheduler.SparkListenerInterface;

/**
 * Enable with {@code --conf spark.plugins=io.cloudprofiler.spark.CloudProfilerPlugin}: every task
 * attempt gets a TSC record at its start and its end on the executor that ran it; the driver writes
 * Spark's view of every task attempt next to those records. Each side is guarded ({@link Guard}):
 * whatever it throws disables it, and the application runs on.
 */
public class CloudProfilerPlugin implements SparkPlugin {
  @Override
  public DriverPlugin driverPlugin() {
    Guard.prepareInBackground(SparkListenerInterface.class); // the driver's init wraps its listener
    return Guard.wrap(
        DriverPlugin.class,
        new CloudProfilerDriverPlugin(),
        "the driver plugin",
        IllegalArgumentException
            .class); // a bad option stops the application at start, naming the key
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return Guard.wrap(
        ExecutorPlugin.class, new CloudProfilerExecutorPlugin(), "the executor plugin", null);
  }
}
