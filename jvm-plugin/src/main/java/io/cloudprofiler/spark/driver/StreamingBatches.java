package io.cloudprofiler.spark.driver;

import io.cloudprofiler.spark.tables.ArrowSpool;
import io.cloudprofiler.spark.tables.Table;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.streaming.StateOperatorProgress;
import org.apache.spark.sql.streaming.StreamingQueryListener;
import org.apache.spark.sql.streaming.StreamingQueryProgress;

/**
 * The driver's table of streaming micro-batches, {@link #TABLE}: a row per batch of every streaming
 * query, from the progress Spark posts on its listener bus when a batch ends (what {@code
 * query.lastProgress} shows): the query, the batch, when its trigger started, its input rows and
 * rates, the driver's phases (planning, offsets, the batch's jobs, the logs' commits), the event
 * time's watermark and range, the state's rows. The batch's jobs carry its query and batch id in
 * the task table (their job properties), which ties the batch to its tasks and operators. Rows go
 * through a local spool as the task table's do; the latest {@link #RECENT} of each of the latest
 * {@link #QUERIES_KEPT} queries stay in memory for the Cloudprofiler tab.
 */
public final class StreamingBatches extends SparkListener {
  private static final int BATCH_ROWS = 1024;
  static final int RECENT = 30;
  static final int QUERIES_KEPT = 20;

  /** The phases of {@code durationMs}, in the order of a batch, and their columns. */
  private static final List<String> PHASES =
      List.of(
          "latestOffset",
          "getBatch",
          "queryPlanning",
          "walCommit",
          "addBatch",
          "commitOffsets",
          "triggerExecution");

  public static final List<String> COLUMNS =
      List.of(
          "query_id",
          "run_id",
          "query_name",
          "batch_id",
          "trigger_start_ms",
          "num_input_rows",
          "input_rows_per_second",
          "processed_rows_per_second",
          "latest_offset_ms",
          "get_batch_ms",
          "query_planning_ms",
          "wal_commit_ms",
          "add_batch_ms",
          "commit_offsets_ms",
          "trigger_execution_ms",
          "watermark_ms",
          "event_time_min_ms",
          "event_time_max_ms",
          "state_rows");

  static final List<Class<?>> TYPES =
      List.of(
          String.class,
          String.class,
          String.class,
          Long.class,
          Long.class,
          Long.class,
          Double.class,
          Double.class,
          Long.class,
          Long.class,
          Long.class,
          Long.class,
          Long.class,
          Long.class,
          Long.class,
          Long.class,
          Long.class,
          Long.class,
          Long.class);

  public static final Table TABLE =
      new Table(
          "streaming_batches",
          "spark-streaming-batches.arrows",
          Table.APPLICATION,
          "a row per micro-batch of every streaming query: its progress as Spark posts it when the"
              + " batch ends",
          COLUMNS,
          TYPES);

  private final List<Object[]> rows = new ArrayList<>();
  private final ArrowSpool spool;
  private final Map<String, Deque<Object[]>> recent =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Deque<Object[]>> eldest) {
          return size() > QUERIES_KEPT;
        }
      };

  public StreamingBatches(Supplier<Map<String, String>> metadata) {
    spool = new ArrowSpool(TABLE, metadata);
  }

  @Override
  public void onOtherEvent(SparkListenerEvent event) {
    if (event instanceof StreamingQueryListener.QueryProgressEvent progress)
      add(row(progress.progress()));
  }

  static Object[] row(StreamingQueryProgress p) {
    Object[] row = new Object[COLUMNS.size()];
    row[0] = String.valueOf(p.id());
    row[1] = String.valueOf(p.runId());
    row[2] = p.name();
    row[3] = p.batchId();
    row[4] = epochMs(p.timestamp());
    row[5] = p.numInputRows();
    row[6] = finite(p.inputRowsPerSecond());
    row[7] = finite(p.processedRowsPerSecond());
    Map<String, Long> durations = p.durationMs();
    for (int i = 0; i < PHASES.size(); i++)
      row[8 + i] = durations == null ? null : durations.get(PHASES.get(i));
    Map<String, String> eventTime = p.eventTime();
    if (eventTime != null) {
      row[15] = epochMs(eventTime.get("watermark"));
      row[16] = epochMs(eventTime.get("min"));
      row[17] = epochMs(eventTime.get("max"));
    }
    long state = 0;
    boolean stateful = false;
    for (StateOperatorProgress operator : p.stateOperators()) {
      state += operator.numRowsTotal();
      stateful = true;
    }
    row[18] = stateful ? state : null;
    return row;
  }

  /**
   * The latest batches of the queries kept, as rows of {@link #COLUMNS}: the query that made
   * progress last first, each query's batches oldest first.
   */
  public synchronized List<List<Object[]>> recent() {
    List<List<Object[]>> queries = new ArrayList<>();
    for (Deque<Object[]> batches : recent.values()) queries.add(0, new ArrayList<>(batches));
    return queries;
  }

  /** An ISO-8601 instant as Spark's progress gives it, in ms since the epoch; null if none. */
  private static Long epochMs(String instant) {
    if (instant == null) return null;
    try {
      return Instant.parse(instant).toEpochMilli();
    } catch (DateTimeParseException e) {
      return null;
    }
  }

  /** Spark gives NaN for a rate over no time (a batch of no rows). */
  private static Double finite(double rate) {
    return Double.isFinite(rate) ? rate : null;
  }

  private synchronized void add(Object[] row) {
    Deque<Object[]> latest = recent.computeIfAbsent((String) row[0], q -> new ArrayDeque<>());
    latest.addLast(row);
    if (latest.size() > RECENT) latest.removeFirst();
    rows.add(row);
    if (rows.size() >= BATCH_ROWS) spool.appendAndClear(rows);
  }

  /** Publishes the table into the application's folder, if it has rows: while it runs. */
  public void publish(String appFolder) throws Exception {
    synchronized (this) {
      spool.appendAndClear(rows);
    }
    spool.copyTo(TABLE.in(appFolder));
  }

  /** Writes the table a last time. */
  public synchronized void finish(String appFolder) throws Exception {
    spool.appendAndClear(rows);
    spool.finish(TABLE.in(appFolder));
  }
}
