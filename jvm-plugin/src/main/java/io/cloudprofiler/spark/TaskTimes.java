package io.cloudprofiler.spark;

import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.TaskInfo;

/** Parts of a task attempt's time that Spark's UI derives from its info and metrics (ms). */
public final class TaskTimes {
  private TaskTimes() {}

  /** The driver's time fetching a large result from the block manager (Spark's AppStatusUtils). */
  public static long gettingResult(TaskInfo info) {
    return info.gettingResultTime() > 0 ? info.finishTime() - info.gettingResultTime() : 0;
  }

  /**
   * What Spark's UI and REST API call scheduler delay: the attempt's time that was neither
   * deserializing, running, serializing its result nor the driver fetching it (sending the task,
   * queueing, the result's way back).
   */
  public static long schedulerDelay(TaskInfo info, TaskMetrics m) {
    long duration = info.finishTime() - info.launchTime();
    return Math.max(
        0,
        duration
            - m.executorRunTime()
            - m.executorDeserializeTime()
            - m.resultSerializationTime()
            - gettingResult(info));
  }
}
