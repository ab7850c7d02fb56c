package io.cloudprofiler.spark.sql;

import io.cloudprofiler.CloudProfiler;
import java.io.Serializable;
import java.util.Map;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.metric.SQLMetrics;

/**
 * An operator probe's SQL metrics: Spark sums them per task and sends each task's values to the
 * driver with the task's end ({@link OperatorNodes} writes them into the operator table), and the
 * Spark UI's SQL tab shows them on the probe's node. Made on the driver when the plan is
 * instrumented; every task gets its own copy, as with any SQL metric.
 */
public final class ProbeMetrics implements Serializable {
  private static final long serialVersionUID = 1L;

  /**
   * The probe's id; here rather than in the generated code, so that runs of the same plan share it.
   */
  final long probe;

  /**
   * The probe of the operator that consumes this one's rows ({@link OperatorNodes#NO_PROBE}: none),
   * whose time with its children holds this one's where both are in one pipeline ({@link
   * NestedTimes}).
   */
  final long parent;

  /**
   * The probe's place in a chain of operators that keep a row's identity ({@link OperatorRows}):
   * {@link #NO_CHAIN}, {@link #FIRST} (its rows get ids: its operator makes them) or {@link #NEXT}
   * (its operator passes on the rows of the probe below, whose ids it logs).
   */
  final int chain;

  static final int NO_CHAIN = 0, FIRST = 1, NEXT = 2;

  /**
   * The probe whose row ids a first probe's ids are: its own, or, above a Python UDF's evaluation,
   * the probe below it (the n-th row out of the UDF is the n-th row in).
   */
  final long rowsOf;

  /**
   * Whether it is at either end of a Python UDF's evaluation, whose rows it numbers for the pairing
   * of the UDF's n-th row in with its n-th row out ({@link OperatorRows#UDF_ROWS}).
   */
  final boolean udfEnd;

  /**
   * Whether it is the first probe of a chain above a source that logs the same rows as it delivers
   * them ({@link SourceRows}).
   */
  final boolean source;

  /**
   * Whether it is the first probe of a chain past an exchange whose rows have event times only
   * ({@link EventTimes}): no delivery or emission records, and not the chain the sink is timed
   * from.
   */
  final boolean eventsOnly;

  /**
   * Where it is the top of a chain whose rows a streaming query's watermark reads: the ordinal of
   * their event time in its operator's output (a timestamp column), whose value each sampled row is
   * logged at ({@link SourceRows#logEventTime}); else {@link #NO_EVENT_TIME}.
   */
  final int eventTime;

  static final int NO_EVENT_TIME = -1;

  /**
   * Whether the column at {@link #eventTime} is a windowed aggregation's window, whose end is
   * logged ({@link SourceRows#logWindowEnd}), rather than an event time.
   */
  final boolean windowEnd;

  /**
   * Where it is the top of a sourced chain whose rows a shuffle below a stateful aggregation's
   * stage partitions ({@link ShuffledRows}): the partitions' expression (an array, one for each row
   * the row makes below the shuffle), bound to its operator's output, whose values each sampled row
   * is logged with; else null.
   */
  final Expression partition;

  /** XoY of the rows logged by a probe of a chain: floorMod(row id, y) < x. */
  final long rowsX, rowsY;

  final SQLMetric rows;
  final SQLMetric time;
  final SQLMetric ticks;
  final SQLMetric ticksError;
  final SQLMetric gaps;

  ProbeMetrics(
      SparkContext sc,
      long probe,
      long parent,
      int chain,
      long rowsOf,
      boolean udfEnd,
      boolean source,
      boolean eventsOnly,
      int eventTime,
      boolean windowEnd,
      Expression partition,
      long rowsX,
      long rowsY) {
    this.probe = probe;
    this.parent = parent;
    this.chain = chain;
    this.rowsOf = rowsOf;
    this.udfEnd = udfEnd;
    this.source = source;
    this.eventsOnly = eventsOnly;
    this.eventTime = eventTime;
    this.windowEnd = windowEnd;
    this.partition = partition;
    this.rowsX = rowsX;
    this.rowsY = rowsY;
    rows = SQLMetrics.createMetric(sc, "cloudprofiler rows");
    time =
        SQLMetrics.createNanoTimingMetric(
            sc,
            "cloudprofiler time in the operator and its children (est.)",
            SQLMetrics.createNanoTimingMetric$default$3());
    ticks = SQLMetrics.createMetric(sc, "cloudprofiler TSC ticks in the operator and its children");
    ticksError = SQLMetrics.createMetric(sc, "cloudprofiler TSC ticks, standard error");
    gaps = SQLMetrics.createMetric(sc, "cloudprofiler timed gaps between rows");
  }

  /** By name, as SparkPlan.metrics gives them to the UI. */
  Map<String, SQLMetric> byName() {
    return Map.of(
        "cpRows",
        rows,
        "cpTime",
        time,
        "cpTicks",
        ticks,
        "cpTicksError",
        ticksError,
        "cpGaps",
        gaps);
  }

  /** A task's values, at its end; the times only where the TSC was read (gaps > 0). */
  void publish(long rowCount, long ticksEstimate, long ticksStandardError, long timedGaps) {
    if (rowCount != 0) rows.add(rowCount);
    if (timedGaps == 0) return;
    gaps.add(timedGaps);
    if (ticksEstimate != 0) {
      ticks.add(ticksEstimate);
      time.add(Math.round(ticksEstimate * 1e9 / CloudProfiler.tscHz()));
    }
    if (ticksStandardError != 0) ticksError.add(ticksStandardError);
  }
}
