package io.cloudprofiler.spark.sql;

import io.cloudprofiler.spark.tables.ArrowSpool;
import io.cloudprofiler.spark.tables.Table;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * The driver's two tables of operator timing: {@link #NODES_TABLE}, a row per probe placed in a
 * plan (the operator it measures, the probe of the operator that consumes its rows, the SQL
 * execution that planned it), and {@link #TASKS_TABLE}, a row per probe and task attempt (rows, the
 * operator's time with its children in TSC ticks and that estimate's standard error, the gaps
 * timed), read from the probes' SQL metrics in each task's end. Rows go through local spools in
 * batches, as the task table's do; the probes' metric ids are kept for the latest {@link #KEPT}
 * probes.
 */
public final class OperatorNodes {
  static final long NO_PROBE = -1;
  static final int KEPT = 100_000;
  private static final int BATCH_ROWS = 4096;
  private static final int DESCRIPTION_CHARS = 400;

  static final List<String> NODE_COLUMNS =
      List.of("probe_id", "parent_probe_id", "operator", "description", "sql_execution_id");
  static final List<Class<?>> NODE_TYPES =
      List.of(Long.class, Long.class, String.class, String.class, Long.class);
  static final List<String> TASK_COLUMNS =
      List.of("task_attempt_id", "probe_id", "rows", "ticks", "ticks_error", "timed_gaps");
  static final List<Class<?>> TASK_TYPES =
      List.of(Long.class, Long.class, Long.class, Long.class, Long.class, Long.class);

  public static final Table NODES_TABLE =
      new Table(
          "operator_nodes",
          "spark-operator-nodes.arrows",
          Table.APPLICATION,
          "a row per operator probe placed in a plan: its operator, the probe of the operator that"
              + " consumes its rows, the SQL execution",
          NODE_COLUMNS,
          NODE_TYPES);
  public static final Table TASKS_TABLE =
      new Table(
          "operators",
          "spark-operators.arrows",
          Table.APPLICATION,
          "a row per operator probe and task attempt: rows, the operator's time with its children"
              + " in TSC ticks, its standard error, the gaps timed",
          TASK_COLUMNS,
          TASK_TYPES);

  /** The metric's place: which probe, which of its values (an index into the task row's last 4). */
  private record Slot(long probe, int value) {}

  private static OperatorNodes current;

  private final Map<Long, Slot> slots =
      new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Slot> eldest) {
          return size() > KEPT * 4;
        }
      };

  private final LiveOperators live = new LiveOperators();
  private final List<Object[]> nodes = new ArrayList<>();
  private final List<Object[]> tasks = new ArrayList<>();
  private final ArrowSpool nodeSpool;
  private final ArrowSpool taskSpool;

  private OperatorNodes(Supplier<Map<String, String>> metadata) {
    nodeSpool = new ArrowSpool(NODES_TABLE, metadata);
    taskSpool = new ArrowSpool(TASKS_TABLE, metadata);
  }

  /**
   * The tables of the application the driver plugin starts, replacing an earlier one's; {@code
   * metadata} as the task table's.
   */
  public static synchronized OperatorNodes start(Supplier<Map<String, String>> metadata) {
    current = new OperatorNodes(metadata);
    return current;
  }

  /** A probe placed in a plan; without a driver plugin (no tables) it is only measured. */
  static void register(long probe, long parent, SparkPlan operator, ProbeMetrics metrics) {
    OperatorNodes tables;
    synchronized (OperatorNodes.class) {
      tables = current;
    }
    if (tables != null) tables.add(probe, parent, operator, metrics);
  }

  private synchronized void add(long probe, long parent, SparkPlan operator, ProbeMetrics metrics) {
    String description = operator.simpleString(25);
    if (description.length() > DESCRIPTION_CHARS)
      description = description.substring(0, DESCRIPTION_CHARS) + "...";
    String execution =
        operator.session() == null
            ? null
            : operator.session().sparkContext().getLocalProperty("spark.sql.execution.id");
    Long executionId = execution == null ? null : Long.valueOf(execution);
    // as Spark's UI shows it: a file scan's name ends in a space where its table has no name
    String name = operator.nodeName().strip();
    nodes.add(
        new Object[] {probe, parent == NO_PROBE ? null : parent, name, description, executionId});
    live.placed(probe, parent, name, executionId);
    slots.put(metrics.rows.id(), new Slot(probe, 0));
    slots.put(metrics.ticks.id(), new Slot(probe, 1));
    slots.put(metrics.ticksError.id(), new Slot(probe, 2));
    slots.put(metrics.gaps.id(), new Slot(probe, 3));
    if (nodes.size() >= BATCH_ROWS) nodeSpool.appendAndClear(nodes);
  }

  /** The probes' values of one task attempt, from its end event, into the current tables. */
  public static void taskEnded(SparkListenerTaskEnd event) {
    OperatorNodes tables;
    synchronized (OperatorNodes.class) {
      tables = current;
    }
    if (tables != null) tables.add(event);
  }

  private synchronized void add(SparkListenerTaskEnd event) {
    if (slots.isEmpty()) return; // no query of this application was instrumented
    Map<Long, Object[]> rows = new HashMap<>();
    scala.collection.Iterator<AccumulableInfo> it = event.taskInfo().accumulables().iterator();
    while (it.hasNext()) {
      AccumulableInfo info = it.next();
      Slot slot = slots.get(info.id());
      if (slot == null || info.update().isEmpty()) continue;
      Object[] row =
          rows.computeIfAbsent(
              slot.probe(), p -> new Object[] {event.taskInfo().taskId(), p, 0L, null, null, 0L});
      row[2 + slot.value()] = ((Number) info.update().get()).longValue();
    }
    tasks.addAll(rows.values());
    Map<Long, long[]> values = new HashMap<>();
    for (Object[] row : rows.values())
      values.put((Long) row[1], new long[] {(Long) row[2], row[3] == null ? 0 : (Long) row[3]});
    live.taskEnded(values);
    if (tasks.size() >= BATCH_ROWS) taskSpool.appendAndClear(tasks);
  }

  /** The operators of the latest SQL executions, as their tasks ended. */
  public LiveOperators live() {
    return live;
  }

  /** Publishes both tables into the application's folder, if they have rows. */
  public void publish(String appFolder) throws Exception {
    synchronized (this) {
      nodeSpool.appendAndClear(nodes);
      taskSpool.appendAndClear(tasks);
    }
    nodeSpool.copyTo(NODES_TABLE.in(appFolder));
    taskSpool.copyTo(TASKS_TABLE.in(appFolder));
  }

  /** Writes both tables a last time. */
  public synchronized void finish(String appFolder) throws Exception {
    nodeSpool.appendAndClear(nodes);
    taskSpool.appendAndClear(tasks);
    nodeSpool.finish(NODES_TABLE.in(appFolder));
    taskSpool.finish(TASKS_TABLE.in(appFolder));
  }
}
