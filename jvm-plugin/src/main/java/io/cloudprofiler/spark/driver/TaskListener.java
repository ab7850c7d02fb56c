package io.cloudprofiler.spark.driver;

import io.cloudprofiler.spark.sql.OperatorNodes;
import io.cloudprofiler.spark.tables.ArrowSpool;
import io.cloudprofiler.spark.tables.Table;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Supplier;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.TaskInfo;

/**
 * Spark's view of every task attempt (job, stage, partition, executor, host, status, times; its
 * metrics and its job's group, description, tags and SQL execution: {@link TaskDetails}), written
 * as an Arrow IPC file so analysis can join it with the TSC records on the task attempt id. Rows go
 * to a local spool in batches of {@link #BATCH_ROWS}, so a long streaming application does not grow
 * the driver's memory.
 */
public class TaskListener extends SparkListener {
  static final int BATCH_ROWS = 4096;
  static final List<String> COLUMNS =
      List.of(
          "task_attempt_id",
          "job_id",
          "stage_id",
          "stage_attempt",
          "partition",
          "attempt_number",
          "executor_id",
          "host",
          "launch_time_ms",
          "finish_time_ms",
          "status",
          "failure_reason");
  static final List<Class<?>> TYPES =
      List.of(
          Long.class,
          Integer.class,
          Integer.class,
          Integer.class,
          Integer.class,
          Integer.class,
          String.class,
          String.class,
          Long.class,
          Long.class,
          String.class,
          String.class);

  /** Declared with its columns here and in {@link TaskDetails}. */
  public static final Table TABLE =
      Table.of(
          "tasks",
          "spark-tasks.arrows",
          Table.APPLICATION,
          "a row per task attempt Spark ran: its job, stage, partition, executor, host, status,"
              + " times, metrics and job properties",
          COLUMNS,
          TYPES,
          TaskDetails.COLUMNS,
          TaskDetails.TYPES);

  static final int STAGES_KEPT =
      10_000; // job properties of the latest stage attempts (tasks end after their stage)

  private final List<Object[]> batch = new ArrayList<>();
  private final Map<Integer, Integer> jobOfStage = new HashMap<>();
  private final Map<List<Integer>, Properties> jobPropertiesOfStage =
      new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<List<Integer>, Properties> eldest) {
          return size() > STAGES_KEPT;
        }
      };
  private final ArrowSpool spool;

  /**
   * {@code metadata}: the table's schema metadata (the driver's clock at the application's start),
   * asked for when the first batch is written.
   */
  public TaskListener(Supplier<Map<String, String>> metadata) {
    spool = new ArrowSpool(TABLE, metadata);
  }

  @Override
  public synchronized void onJobStart(SparkListenerJobStart event) {
    scala.collection.Iterator<Object> it = event.stageIds().iterator();
    while (it.hasNext()) jobOfStage.put((Integer) it.next(), event.jobId());
  }

  /**
   * The properties of the job that submits the stage: its tasks run with them (group, description,
   * tags, SQL).
   */
  @Override
  public synchronized void onStageSubmitted(SparkListenerStageSubmitted event) {
    if (event.properties() == null) return;
    jobPropertiesOfStage.put(
        List.of(event.stageInfo().stageId(), event.stageInfo().attemptNumber()),
        event.properties());
  }

  @Override
  public synchronized void onTaskEnd(SparkListenerTaskEnd event) {
    TaskInfo info = event.taskInfo();
    batch.add(
        withDetails(
            new Object[] {
              info.taskId(),
              jobOfStage.getOrDefault(event.stageId(), -1),
              event.stageId(),
              event.stageAttemptId(),
              info.partitionId(),
              info.attemptNumber(),
              info.executorId(),
              info.host(),
              info.launchTime(),
              info.finishTime(),
              info.status(),
              info.successful() ? "" : String.valueOf(event.reason())
            },
            event));
    if (batch.size() >= BATCH_ROWS) spoolBatch();
    OperatorNodes.taskEnded(event);
  }

  private Object[] withDetails(Object[] row, SparkListenerTaskEnd event) {
    Properties job = jobPropertiesOfStage.get(List.of(event.stageId(), event.stageAttemptId()));
    Object[] details = TaskDetails.values(event.taskInfo(), event.taskMetrics(), job);
    Object[] all = Arrays.copyOf(row, row.length + details.length);
    System.arraycopy(details, 0, all, row.length, details.length);
    return all;
  }

  private void spoolBatch() {
    spool.appendAndClear(batch);
  }

  /**
   * Publishes every row seen so far to {@code target}, if there are new ones: the table of a
   * running application.
   */
  public void publishTable(String target) throws Exception {
    synchronized (this) {
      spoolBatch();
    }
    spool.copyTo(
        target); // outside the listener's lock: the listener bus does not wait for the copy
  }

  /**
   * Writes every row seen to {@code target} (any Hadoop-compatible URI), replacing an older table.
   */
  public synchronized void writeTable(String target) throws Exception {
    spoolBatch();
    spool.finish(target);
  }
}
