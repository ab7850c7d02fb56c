package io.cloudprofiler.spark.sql;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Guard;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanExecBase;
import org.slf4j.LoggerFactory;

/**
 * The sampled rows of a streaming source, logged as the source hands them to Spark, under the ids
 * the operator probe above the source's scan gives them: so that the analysis pairs each with the
 * same row at every operator of its chain ({@link OperatorRows}), and a record's latency from the
 * source to each operator follows, per micro-batch.
 *
 * <p>The probe above the scan's conversion to rows numbers the task's rows from 0 in the order the
 * source delivered them, so the source knows each row's id: the task attempt in the high 32 bits,
 * its ordinal in the low 32. It samples them by the probes' XoY, read from the query's settings
 * when the batch's readers are made (on the driver). Each row is logged at one or two TSCs, into a
 * channel of each kind per JVM: {@link #DELIVERED}, when the source handed its batch to Spark (this
 * executor's clock); {@link #EMITTED}, when the source's producer emitted it, where that producer
 * stamped it with a TSC and said whose ({@link Clock}: a channel per producer's clock, its metadata
 * naming it, since its values are on that clock and not on this executor's).
 */
public final class SourceRows {
  /**
   * The channels' names, metadata event and key; declared here only: the build writes them into the
   * jar ({@link io.cloudprofiler.spark.Tables}), where the analysis reads them.
   */
  public static final String CHANNEL_PREFIX = "spark.source.";

  public static final String DELIVERED = "delivered";
  public static final String EMITTED = "emitted";

  /**
   * The kind of a row's event time ({@link EventTimes}), on the wall clock of what stamped it: the
   * TSC logged is this executor's at the moment its own wall clock read that time.
   */
  public static final String EVENT_TIME = "event_time";

  /**
   * The kind of a windowed aggregation's result's window end ({@link EventTimes}): the earliest its
   * result can be final, on the wall clock of what stamped the events, logged as an event time is.
   */
  public static final String WINDOW_END = "window_end";

  /**
   * A kind of source TSC ({@link #DELIVERED}, {@link #EMITTED}, {@link #EVENT_TIME}, {@link
   * #WINDOW_END}); bounded where the calibration relates its clock to the executors' (an event time
   * is on whatever clock stamped it); {@code from}: the moment it stands for, in the words a report
   * counts a latency from.
   */
  public record Kind(String name, boolean bounded, String from) {}

  /**
   * Every kind, in the order the analysis tells a record's latency from its source by: the first
   * that a query's records have (the emission is the record's true start; the event time, where the
   * query reads one, is closer to it than the delivery to Spark); a window's end last, since its
   * records are an aggregation's results, not the source's rows.
   */
  public static final List<Kind> KINDS =
      List.of(
          new Kind(EMITTED, true, "emission"),
          new Kind(EVENT_TIME, false, "event time"),
          new Kind(DELIVERED, true, "delivery to Spark"),
          new Kind(WINDOW_END, false, "the window's end"));

  public static final String EVENT = "source_rows";
  public static final String TSC_KEY = "source.tsc";

  /** The metadata of an {@link #EMITTED} channel: the clock its values are on ({@link Clock}). */
  public static final String CLOCK_BOOT_ID_KEY = "source.clock.boot_id";

  public static final String CLOCK_SIMULATION_KEY = "source.clock.simulation";

  /**
   * Whose TSC a producer's stamps are, as log files' metadata states a process's: its machine's
   * boot id and its TSC simulation (JSON, "null": none); processes that agree on both read one TSC.
   */
  public record Clock(String bootId, String simulation) {}

  /** A DataSource V2 scan whose readers log their rows here (with {@link #log}). */
  public interface Scan {}

  private static final Guard GUARD = new Guard("source row latency");

  /**
   * The emission channels of distinct clocks a JVM opens at most: a query's emitters run on a few
   * machines; past it the emissions of a further clock are not logged, which one line says.
   */
  static final int MAX_CLOCKS = 16;

  private static final AtomicBoolean CLOCKS_SAID = new AtomicBoolean();
  private static final AtomicBoolean OLD_EVENTS_SAID = new AtomicBoolean();

  /**
   * The channels of this JVM, by kind and, for {@link #EMITTED}, clock; guarded by nothing else
   * (opened once each).
   */
  private static final ConcurrentHashMap<Object, Long> CHANNELS = new ConcurrentHashMap<>();

  static {
    ChannelCaches.register(SourceRows::forget);
  }

  private SourceRows() {}

  /**
   * Whether {@code node} is the conversion to rows of a scan that logs its rows here: the probe
   * above it starts a chain, numbering the rows as the source does.
   */
  static boolean converts(SparkPlan node) {
    return node instanceof ColumnarToRowExec c
        && c.child() instanceof DataSourceV2ScanExecBase scan
        && scan.scan() instanceof Scan;
  }

  /**
   * On the driver, as a batch's readers are made: the XoY of its rows to log, {x, y}, or null where
   * operator timing or its rows' sample is off in the query's settings, or they are bad (the rule
   * then fails the query naming the setting).
   */
  public static long[] sample() {
    try {
      if (!OperatorProbes.enabled()) return null;
      long[] rows = OperatorProbes.rowSample();
      return rows[0] == 0 ? null : rows;
    } catch (RuntimeException e) {
      return null;
    }
  }

  /**
   * On an executor, as the source hands Spark a batch of {@code rows} rows, the first its task's
   * row {@code ordinal}: logs the sampled ones at this moment, and at {@code emittedTsc} on {@code
   * clock} (null: no emission TSC known). One TSC read per batch: the batch reaches Spark whole.
   */
  public static void log(long[] sample, long ordinal, long rows, long emittedTsc, Clock clock) {
    if (sample == null || rows <= 0 || GUARD.disabled()) return;
    try {
      TaskContext task = TaskContext.get();
      if (task == null) return;
      long delivered = CloudProfiler.tsc();
      long first = (task.taskAttemptId() << OperatorRows.ROW_BITS) + ordinal;
      long x = sample[0], y = sample[1];
      long deliveredChannel = channel(DELIVERED, null);
      long emittedChannel = clock == null ? 0 : emittedChannel(clock);
      // the first id of the XoY period that holds the batch's first row, then x ids of each period
      for (long base = first - Math.floorMod(first, y); base < first + rows; base += y) {
        for (long id = Math.max(base, first); id < Math.min(base + x, first + rows); id++) {
          if (deliveredChannel != 0) CloudProfiler.logAt(deliveredChannel, id, delivered);
          if (emittedChannel != 0) CloudProfiler.logAt(emittedChannel, id, emittedTsc);
        }
      }
    } catch (Throwable e) {
      GUARD.disable("logging a source's sampled rows", e);
    }
  }

  /**
   * From the generated code of a chain's top probe below a watermark ({@link EventTimes}): logs the
   * sampled row {@code id}'s event time, {@code micros} since the epoch, at the TSC this executor
   * read when its wall clock read that time (now less the event's age, at the TSC's rate). An event
   * further from now than this machine's TSC count is not logged (one line says so).
   */
  public static void logEventTime(long id, long micros) {
    logWallTime(EVENT_TIME, id, micros);
  }

  /**
   * From the generated code of the probe that passes on a windowed aggregation's results ({@link
   * EventTimes}): logs the sampled result {@code id}'s window end, {@code micros} since the epoch,
   * as {@link #logEventTime} logs an event time. A window that has not ended yet (a partial result,
   * in the update output mode) is not logged: its latency from its end has no meaning yet.
   */
  public static void logWindowEnd(long id, long micros) {
    Instant now = Instant.now();
    if (micros <= now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000)
      logWallTime(WINDOW_END, id, micros);
  }

  private static void logWallTime(String kind, long id, long micros) {
    if (GUARD.disabled()) return;
    try {
      long tsc = CloudProfiler.tsc();
      Instant now = Instant.now();
      // in doubles: a value from the data may be any long
      double ageMicros = now.getEpochSecond() * 1e6 + now.getNano() / 1e3 - micros;
      double ticks = ageMicros * CloudProfiler.tscHz() / 1e6;
      if (!(Math.abs(ticks) < tsc)) { // before the TSC's start, or as far in the future
        if (!OLD_EVENTS_SAID.getAndSet(true))
          LoggerFactory.getLogger(SourceRows.class)
              .warn(
                  "cloudprofiler: an event time {} s from now is further than this machine's TSC"
                      + " count (its uptime): rows whose event time is that far are not timed from"
                      + " it",
                  Math.round(-ageMicros / 1e6));
        return;
      }
      long channel = channel(kind, null);
      if (channel != 0) CloudProfiler.logAt(channel, id, tsc - Math.round(ticks));
    } catch (Throwable e) {
      GUARD.disable("logging a row's event time", e);
    }
  }

  /** The emission channel of {@code clock}, or 0 past {@link #MAX_CLOCKS} clocks. */
  static long emittedChannel(Clock clock) {
    if (!CHANNELS.containsKey(clock)
        && CHANNELS.keySet().stream().filter(Clock.class::isInstance).count() >= MAX_CLOCKS) {
      if (!CLOCKS_SAID.getAndSet(true))
        LoggerFactory.getLogger(SourceRows.class)
            .warn(
                "cloudprofiler: emitters of more than {} clocks: the emissions stamped by {} and"
                    + " any further clock are not logged",
                MAX_CLOCKS,
                clock);
      return 0;
    }
    return channel(EMITTED, clock);
  }

  /**
   * The channel of {@code kind} and {@code clock} (opened once per JVM): each record one sampled
   * row, so its handler passes every record on.
   */
  private static long channel(String kind, Clock clock) {
    return CHANNELS.computeIfAbsent(
        clock == null ? kind : clock,
        k ->
            CloudProfiler.openChannel(
                CHANNEL_PREFIX + kind,
                "identity",
                new long[0],
                clock == null
                    ? new String[] {"spark.event", TSC_KEY}
                    : new String[] {
                      "spark.event", TSC_KEY, CLOCK_BOOT_ID_KEY, CLOCK_SIMULATION_KEY
                    },
                clock == null
                    ? new String[] {EVENT, kind}
                    : new String[] {EVENT, kind, clock.bootId(), clock.simulation()}));
  }

  /** Forgets the channels as the library stops (the next application opens its own). */
  static void forget() {
    CHANNELS.clear();
    CLOCKS_SAID.set(false);
    OLD_EVENTS_SAID.set(false);
  }
}
