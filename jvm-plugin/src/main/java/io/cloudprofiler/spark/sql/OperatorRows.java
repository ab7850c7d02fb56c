package io.cloudprofiler.spark.sql;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.Guard;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
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

  /**
   * "true" at the first probe of a chain above a source that logs its rows ({@link SourceRows}).
   */
  public static final String SOURCE_KEY = "operator.source";

  /**
   * "true" at the first probe of a chain past an exchange above a watermark, whose rows have their
   * event times logged and no other source record ({@link EventTimes}).
   */
  public static final String EVENTS_ONLY_KEY = "operator.events_only";

  static final int ROW_BITS = 32;

  /**
   * Set in the ids that both ends of a Python UDF's evaluation give their rows by ordinal (the n-th
   * row in is the n-th row out): the probe below the UDF may also pass on the ids of a chain below
   * it, the ordinals of other rows, which must not pair with the UDF's.
   */
  static final long UDF_ROWS = 1L << (ROW_BITS - 1);

  /**
   * Channels open in this JVM at most ({@link Config#OPERATOR_ROW_CHANNELS}; 0 until read): one per
   * probe whose pipeline ran here, and each run of a query (each micro-batch of a streaming query)
   * has probes of its own. Each holds a file descriptor, beside the shuffle files and sockets Spark
   * itself needs. At the limit a new probe's channel takes the place of the one idle longest
   * ({@link #IDLE_NS}), which closes; where every open one is in use or idle shorter, its rows are
   * not logged (said once). Guarded by {@link #CHANNELS}.
   */
  private static int maxChannels;

  /**
   * How long a channel no task uses stays open ({@link Config#OPERATOR_ROWS_IDLE}), in ns; read
   * with {@link #maxChannels}. Guarded by {@link #CHANNELS}.
   */
  private static long idleCloseNs;

  /**
   * How long no task of this JVM has used a channel before it may close: a task's completion
   * releases its probes' channels, but the pipeline below a Python UDF runs in a thread of its own
   * that may still be passing rows as its task completes, and a log racing the channel's close
   * could write into a block the close frees (the library makes a log after the close a counted
   * no-op, not one during it).
   */
  static final long IDLE_NS = 1_000_000_000L;

  private static final Guard GUARD = new Guard("operator row latency");
  private static final Logger LOG = LoggerFactory.getLogger(OperatorRows.class);
  private static final AtomicBoolean FULL_SAID = new AtomicBoolean();

  /** The open channels by probe id; guarded by itself. */
  private static final HashMap<Long, Open> CHANNELS = new HashMap<>();

  static {
    ChannelCaches.register(OperatorRows::forget);
  }

  /** A probe's open channel, and the tasks running in this JVM that may log to it. */
  private static final class Open {
    final long handle;
    int users;

    /** System.nanoTime() at its last release, while no task uses it. */
    long idleSince;

    Open(long handle) {
      this.handle = handle;
    }

    /** Whether no task has used it for {@code ns} or more at {@code now} (System.nanoTime()). */
    boolean idleFor(long now, long ns) {
      return users == 0 && now - idleSince >= ns;
    }
  }

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

  /**
   * The first row id of the current task's chain, less one (the first probe adds one per row);
   * {@code udf}: at an end of a Python UDF's evaluation ({@link #UDF_ROWS}).
   */
  static long firstId(long taskAttemptId, boolean udf) {
    return ((taskAttemptId << ROW_BITS) | (udf ? UDF_ROWS : 0)) - 1;
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
   * The channel of {@code probe}'s rows in this JVM, for a task that starts its pipeline and {@link
   * #release}s it when it completes: opened (xoy(x, y)) by the first such task, or again after it
   * closed idle; 0 (nothing logs to it) where it cannot open, where {@link #maxChannels} are open
   * and none has been idle {@link #IDLE_NS}, or after a failure, so that the query runs on.
   */
  static long acquire(ProbeMetrics probe, long firstProbe) {
    if (GUARD.disabled()) return 0;
    long idle = 0;
    try {
      synchronized (CHANNELS) {
        Open open = CHANNELS.get(probe.probe);
        if (open == null) {
          if (maxChannels == 0) {
            SparkConf conf = SparkEnv.get().conf();
            idleCloseNs = Config.OPERATOR_ROWS_IDLE.read(conf) * 1_000_000_000L;
            maxChannels = Config.OPERATOR_ROW_CHANNELS.read(conf);
          }
          if (CHANNELS.size() >= maxChannels && (idle = takeIdle()) == 0) {
            if (!FULL_SAID.getAndSet(true))
              LOG.warn(
                  "cloudprofiler: {} operators' row channels are in use in this JVM: the rows of"
                      + " other operators are not logged until one is idle ({} still times them)",
                  maxChannels,
                  Config.OPERATORS.name);
            return 0;
          }
          long handle = open(probe, firstProbe);
          if (handle == 0) return 0;
          open = new Open(handle);
          CHANNELS.put(probe.probe, open);
        }
        open.users++;
        return open.handle;
      }
    } catch (Throwable e) {
      GUARD.disable("opening the channel of probe " + probe.probe, e);
      return 0;
    } finally {
      if (idle != 0) close(idle); // outside the lock: a close flushes and writes the file's end
    }
  }

  /** A task that {@link #acquire}d {@code probe}'s channel completed: it logs no more. */
  static void release(long probe) {
    synchronized (CHANNELS) {
      Open open = CHANNELS.get(probe);
      if (open != null && open.users > 0 && --open.users == 0) open.idleSince = System.nanoTime();
    }
  }

  /** Removes the channel idle longest, if one has been idle {@link #IDLE_NS}: its handle, or 0. */
  private static long takeIdle() {
    long now = System.nanoTime();
    Long oldest = null;
    long since = 0;
    for (var entry : CHANNELS.entrySet()) {
      Open open = entry.getValue();
      if (open.idleFor(now, IDLE_NS) && (oldest == null || open.idleSince - since < 0)) {
        oldest = entry.getKey();
        since = open.idleSince;
      }
    }
    return oldest == null ? 0 : CHANNELS.remove(oldest).handle;
  }

  /**
   * Closes every channel that no task of this JVM has used for {@link Config#OPERATOR_ROWS_IDLE}
   * (at least {@link #IDLE_NS}): called at the executor's collection interval, so that the channels
   * of queries that ended give back their file descriptors and buffers and their files end, rather
   * than at the limit or the JVM's stop.
   */
  public static void closeIdle() {
    List<Long> idle = new ArrayList<>();
    synchronized (CHANNELS) {
      long now = System.nanoTime();
      for (var channels = CHANNELS.values().iterator(); channels.hasNext(); ) {
        Open open = channels.next();
        if (open.idleFor(now, Math.max(idleCloseNs, IDLE_NS))) {
          idle.add(open.handle);
          channels.remove();
        }
      }
    }
    for (long handle : idle) close(handle); // outside the lock, as in acquire
  }

  /** Closes an idle channel: its records reach its file, which ends as at the JVM's stop. */
  private static void close(long handle) {
    try {
      CloudProfiler.close(handle);
    } catch (Throwable e) {
      GUARD.disable("closing an idle channel", e);
    }
  }

  private static long open(ProbeMetrics probe, long firstProbe) {
    String[] keys = {"spark.event", PROBE_KEY, FIRST_PROBE_KEY, SOURCE_KEY, EVENTS_ONLY_KEY};
    String[] values = {
      EVENT,
      String.valueOf(probe.probe),
      String.valueOf(firstProbe),
      String.valueOf(probe.source),
      String.valueOf(probe.eventsOnly)
    };
    return CloudProfiler.openChannel(
        CHANNEL_PREFIX + probe.probe, "xoy", new long[] {probe.rowsX, probe.rowsY}, keys, values);
  }

  /** Forgets every channel as the library stops (the next application opens its own). */
  static void forget() {
    synchronized (CHANNELS) {
      CHANNELS.clear();
      maxChannels = 0;
    }
  }
}
