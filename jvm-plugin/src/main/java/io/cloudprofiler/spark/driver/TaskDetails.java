package io.cloudprofiler.spark.driver;

import io.cloudprofiler.spark.TaskTimes;
import io.cloudprofiler.spark.sql.ScalaLists;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.executor.InputMetrics;
import org.apache.spark.executor.OutputMetrics;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.executor.ShuffleWriteMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.TaskInfo;

/**
 * The columns of the task table beyond the attempt's identity: Spark's task metrics (as its UI and
 * REST API show them) and what the job was submitted with (group, description, tags, SQL execution,
 * Spark Connect operation), so that one table answers why an attempt took its time and whose query
 * it served. Only accessors that Spark 3.5 and 4.x share; a Scala collection only through {@link
 * ScalaLists}.
 */
final class TaskDetails {
  private TaskDetails() {}

  /** Metric columns, all int64; null where Spark reported no metrics for the attempt. */
  static final List<String> METRICS =
      List.of(
          "executor_run_time_ms",
          "executor_cpu_time_ns",
          "executor_deserialize_time_ms",
          "executor_deserialize_cpu_time_ns",
          "result_serialization_time_ms",
          "jvm_gc_time_ms",
          "scheduler_delay_ms",
          "getting_result_time_ms",
          "result_size_bytes",
          "peak_execution_memory_bytes",
          "input_bytes",
          "input_records",
          "output_bytes",
          "output_records",
          "shuffle_local_blocks",
          "shuffle_remote_blocks",
          "shuffle_local_bytes",
          "shuffle_remote_bytes",
          "shuffle_remote_bytes_to_disk",
          "shuffle_fetch_wait_ms",
          "shuffle_read_records",
          "shuffle_write_bytes",
          "shuffle_write_records",
          "shuffle_write_time_ns",
          "memory_spilled_bytes",
          "disk_spilled_bytes",
          "python_boot_ms",
          "python_init_ms",
          "python_total_ms",
          "python_processing_ms");

  /**
   * The last METRICS: Spark's own SQL metrics of its Python nodes (Spark 4.x), by the names its
   * accumulators carry, summed over the attempt's nodes; null where it ran none or Spark has no
   * such metric (3.5 has none of them, pythonProcessingTime came in 4.2).
   */
  private static final List<String> PYTHON_METRICS =
      List.of(
          "time to start Python workers",
          "time to initialize Python workers",
          "time to run Python workers",
          "time to execute Python code");

  /**
   * Job columns: utf8 but sql_execution_id and streaming_batch_id (int64); null where the job had
   * none. A streaming query's micro-batch runs its jobs with its query's id, the batch's id and the
   * query's run id as job group.
   */
  static final List<String> JOB =
      List.of(
          "job_group",
          "job_description",
          "job_tags",
          "sql_execution_id",
          "connect_session_id",
          "connect_operation_id",
          "streaming_query_id",
          "streaming_run_id",
          "streaming_batch_id",
          "call_site");

  private static final List<String> LONG_JOB_COLUMNS =
      List.of("sql_execution_id", "streaming_batch_id");

  static final List<String> COLUMNS = concat(METRICS, JOB);
  static final List<Class<?>> TYPES = types();

  // Spark Connect tags each operation's jobs
  // "SparkConnect_OperationTag_User_<user>_Session_<id>_Operation_<id>"
  private static final Pattern CONNECT_TAG =
      Pattern.compile("SparkConnect_OperationTag_User_.*_Session_([^_,]+)_Operation_([^_,]+)");

  private static List<String> concat(List<String> a, List<String> b) {
    List<String> all = new ArrayList<>(a);
    all.addAll(b);
    return List.copyOf(all);
  }

  private static List<Class<?>> types() {
    List<Class<?>> types = new ArrayList<>(Collections.nCopies(METRICS.size(), Long.class));
    for (String name : JOB) types.add(LONG_JOB_COLUMNS.contains(name) ? Long.class : String.class);
    return List.copyOf(types);
  }

  /**
   * The values of COLUMNS for one attempt; {@code metrics} and {@code job} (the job's properties)
   * may be null.
   */
  static Object[] values(TaskInfo info, TaskMetrics metrics, Properties job) {
    Object[] row = new Object[COLUMNS.size()];
    if (metrics != null) System.arraycopy(metrics(info, metrics), 0, row, 0, METRICS.size());
    if (job != null) System.arraycopy(job(job), 0, row, METRICS.size(), JOB.size());
    return row;
  }

  private static Object[] metrics(TaskInfo info, TaskMetrics m) {
    InputMetrics in = m.inputMetrics();
    OutputMetrics out = m.outputMetrics();
    ShuffleReadMetrics read = m.shuffleReadMetrics();
    ShuffleWriteMetrics write = m.shuffleWriteMetrics();
    Long[] python = python(info);
    return new Object[] {
      m.executorRunTime(),
      m.executorCpuTime(),
      m.executorDeserializeTime(),
      m.executorDeserializeCpuTime(),
      m.resultSerializationTime(),
      m.jvmGCTime(),
      TaskTimes.schedulerDelay(info, m),
      TaskTimes.gettingResult(info),
      m.resultSize(),
      m.peakExecutionMemory(),
      in.bytesRead(),
      in.recordsRead(),
      out.bytesWritten(),
      out.recordsWritten(),
      read.localBlocksFetched(),
      read.remoteBlocksFetched(),
      read.localBytesRead(),
      read.remoteBytesRead(),
      read.remoteBytesReadToDisk(),
      read.fetchWaitTime(),
      read.recordsRead(),
      write.bytesWritten(),
      write.recordsWritten(),
      write.writeTime(),
      m.memoryBytesSpilled(),
      m.diskBytesSpilled(),
      python[0],
      python[1],
      python[2],
      python[3]
    };
  }

  /** PYTHON_METRICS' values in the attempt's accumulator updates, each summed; null where none. */
  private static Long[] python(TaskInfo info) {
    Long[] sums = new Long[PYTHON_METRICS.size()];
    for (AccumulableInfo acc : ScalaLists.toJava(info.accumulables(), AccumulableInfo.class)) {
      int i = acc.name().isDefined() ? PYTHON_METRICS.indexOf(acc.name().get()) : -1;
      if (i >= 0 && acc.update().isDefined() && acc.update().get() instanceof Long value)
        sums[i] = (sums[i] == null ? 0 : sums[i]) + value;
    }
    return sums;
  }

  private static Object[] job(Properties job) {
    String tags = job.getProperty("spark.job.tags");
    Matcher connect = CONNECT_TAG.matcher(tags == null ? "" : tags);
    boolean isConnect = connect.find();
    String streamingQuery = job.getProperty("sql.streaming.queryId");
    return new Object[] {
      job.getProperty("spark.jobGroup.id"),
      job.getProperty("spark.job.description"),
      tags,
      number(job.getProperty("spark.sql.execution.id")),
      isConnect ? connect.group(1) : null,
      isConnect ? connect.group(2) : null,
      streamingQuery,
      // a streaming query runs its jobs in a job group named by its run id (so that stop() cancels
      // them)
      streamingQuery == null ? null : job.getProperty("spark.jobGroup.id"),
      number(job.getProperty("streaming.sql.batchId")),
      // PySpark's line of the application that ran the job (SparkContext.setCallSite)
      job.getProperty("callSite.short")
    };
  }

  /** A job property that holds a number; null if absent or not one (a user may set any text). */
  private static Long number(String value) {
    if (value == null) return null;
    try {
      return Long.valueOf(value.trim());
    } catch (NumberFormatException e) {
      return null;
    }
  }
}
