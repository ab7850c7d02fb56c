package io.cloudprofiler.spark.sql;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.Guard;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.spark.sql.catalyst.plans.Inner$;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.joins.BroadcastHashJoinExec;
import org.apache.spark.sql.execution.joins.HashJoin;
import org.apache.spark.sql.execution.joins.ShuffledHashJoinExec;
import org.apache.spark.sql.execution.python.ArrowEvalPythonExec;
import org.apache.spark.sql.execution.python.BatchEvalPythonExec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The latency of sampled rows from operator to operator, along a chain of operators that keep a
 * row's identity within one pipeline (a filter, a projection, the streamed side of a hash join):
 * the first probe of the chain numbers its rows, and every probe of the chain logs the same sampled
 * rows' ids with the TSC as they pass it, into a channel of its own, {@code spark.operator.<probe
 * id>}, whose metadata names the probe and the chain's first probe. The analysis pairs the records
 * of consecutive probes of a chain by id (operator_hops).
 *
 * <p>A row's id is the task attempt's id in the high 32 bits and the row's ordinal at the chain's
 * first probe in the low 32: unique in the application, and the same at every probe of the chain
 * because the row passes them all in one iteration of the pipeline's loop. The sample is XoY on the
 * id, as {@code cp_trace(name, id, x, y)} samples: {@code floorMod(id, y) < x}, decided once per
 * row by the first probe; a probe above reads that decision, so that every probe logs the same
 * rows.
 */
public final class OperatorRows {
  /**
   * The channels' names ({@code <prefix><probe id>}) and metadata: {@code spark.event} is {@link
   * #EVENT}, {@link #PROBE_KEY} names the probe and {@link #FIRST_PROBE_KEY} its chain's first
   * probe. Declared here only: the build writes them into the jar ({@link
   * io.cloudprofiler.spark.Tables}), where the analysis reads them.
   */
  public static final String CHANNEL_PREFIX = "spark.operator.";

  public static final String EVENT = "operator_rows";
  public static final String PROBE_KEY = "operator.probe";
  public static final String FIRST_PROBE_KEY = "operator.first_probe";
  static final int ROW_BITS = 32;

  /**
   * Channels per JVM at most: one per probe that logged a row here, and each run of a query (each
   * micro-batch of a streaming query) has probes of its own. Each holds a file descriptor and its
   * file until the JVM stops, beside the shuffle files and sockets Spark itself needs: past it the
   * rows of new probes are not logged (said once).
   */
  static final int MAX_CHANNELS = 256;

  private static final Guard GUARD = new Guard("operator row latency");
  private static final Logger LOG = LoggerFactory.getLogger(OperatorRows.class);
  private static final AtomicBoolean FULL_SAID = new AtomicBoolean();
  private static final ConcurrentHashMap<Long, Long> CHANNELS = new ConcurrentHashMap<>();

  private OperatorRows() {}

  /** Whether the rows of {@code node} are the rows of its child in the same pipeline. */
  static boolean keepsRows(SparkPlan node) {
    if (node instanceof FilterExec || node instanceof ProjectExec) return true;
    if (node instanceof BroadcastHashJoinExec) return true; // a build side never outer: rows stream
    // a shuffled hash join may emit the build side's unmatched rows after the streamed ones
    return node instanceof ShuffledHashJoinExec j && j.joinType() == Inner$.MODULE$;
  }

  /**
   * Whether {@code node} is a Python UDF's evaluation, whose n-th row out is its n-th row in (its
   * input joined with the UDF's results, in order), in the same task.
   */
  static boolean keepsCount(SparkPlan node) {
    return node instanceof BatchEvalPythonExec || node instanceof ArrowEvalPythonExec;
  }

  /** Whether {@code child} is the input of {@code parent} whose rows {@code parent} passes on. */
  static boolean passesRowsOf(SparkPlan parent, SparkPlan child) {
    if (!keepsRows(parent)) return false;
    return !(parent instanceof HashJoin j) || j.streamedPlan() == child;
  }

  /** The first row id of the current task's chain, less one (the first probe adds one per row). */
  static long firstId(long taskAttemptId) {
    return (taskAttemptId << ROW_BITS) - 1;
  }

  /**
   * The code that decides whether row {@code id64} is sampled: a mask where y is a power of two (no
   * 64-bit division per row), else floorMod, as cp_trace decides.
   */
  static String keptCode(String id64, long x, long y) {
    return Long.bitCount(y) == 1
        ? "(" + id64 + " & " + (y - 1) + "L) < " + x + "L"
        : "java.lang.Math.floorMod(" + id64 + ", " + y + "L) < " + x + "L";
  }

  /**
   * The channel of {@code probe}'s rows in this JVM, opened on its first sampled row with handler
   * xoy(x, y); 0 (nothing logs to it) where it cannot open, past {@link #MAX_CHANNELS} or after a
   * failure, so that the query runs on.
   */
  static long channel(ProbeMetrics probe, long firstProbe) {
    if (GUARD.disabled()) return 0;
    try {
      Long open = CHANNELS.get(probe.probe);
      if (open != null) return open;
      if (CHANNELS.size() >= MAX_CHANNELS) {
        if (!FULL_SAID.getAndSet(true))
          LOG.warn(
              "cloudprofiler: {} operators' row channels are open in this JVM: the rows of later"
                  + " operators are not logged ({} still times them)",
              MAX_CHANNELS,
              Config.OPERATORS.name);
        return 0;
      }
      return CHANNELS.computeIfAbsent(probe.probe, id -> open(probe, firstProbe));
    } catch (Throwable e) {
      GUARD.disable("opening the channel of probe " + probe.probe, e);
      return 0;
    }
  }

  private static long open(ProbeMetrics probe, long firstProbe) {
    String[] keys = {"spark.event", PROBE_KEY, FIRST_PROBE_KEY};
    String[] values = {EVENT, String.valueOf(probe.probe), String.valueOf(firstProbe)};
    return CloudProfiler.openChannel(
        CHANNEL_PREFIX + probe.probe, "xoy", new long[] {probe.rowsX, probe.rowsY}, keys, values);
  }

  /** Forgets every channel as the library stops (the next application opens its own). */
  static void forget() {
    CHANNELS.clear();
  }
}
