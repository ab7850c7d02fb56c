package io.cloudprofiler.spark.executor;

import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import io.cloudprofiler.CloudProfiler;

/**
 * The executor's metrics in Spark's metrics system (source {@code
 * plugin.io.cloudprofiler.spark.CloudProfilerPlugin}): the records this process logged and dropped
 * and the bytes it wrote, counted from the library's start by this executor (none of an earlier
 * application of this JVM) and, once the library stopped, as they were then.
 */
final class ExecutorMetrics {
  /** Indexes into {@link CloudProfiler#libraryStats}. */
  private static final int DROPPED = 3, BYTES_WRITTEN = 4, LOGGED = 5;

  private static final int SAMPLE_SCANNED = 6, SAMPLE_SCAN_TICKS = 7;

  /** The counters as the library stopped, reported from then on. */
  private volatile long[] finalStats;

  /** The library's counters as this executor started it (null before). */
  private volatile long[] statsAtStart;

  /**
   * Adds the gauges to the plugin's registry: in the plugin's init or never, as Spark publishes a
   * plugin's registry only if it holds metrics after init.
   */
  void register(MetricRegistry registry) {
    registry.register("recordsLogged", (Gauge<Long>) () -> stat(LOGGED));
    registry.register("recordsDropped", (Gauge<Long>) () -> stat(DROPPED));
    registry.register("bytesWritten", (Gauge<Long>) () -> stat(BYTES_WRITTEN));
  }

  /** The library has just started: the counters count from here. */
  void libraryStarted() {
    statsAtStart = CloudProfiler.libraryStats();
  }

  /** The library has just stopped: the counters stay as they are now. */
  void libraryStopped() {
    finalStats = totals();
  }

  /**
   * {records logged, records dropped, bytes written}, as the gauges report them now; then the
   * samples' scan: {records scanned, TSC ticks it took}.
   */
  long[] counters() {
    long[] now = reported();
    return new long[] {
      now[LOGGED], now[DROPPED], now[BYTES_WRITTEN], now[SAMPLE_SCANNED], now[SAMPLE_SCAN_TICKS]
    };
  }

  private long stat(int index) {
    return reported()[index];
  }

  /** The counters now or, once the library stopped, as they were then. */
  private long[] reported() {
    long[] last = finalStats;
    return last != null ? last : totals();
  }

  /**
   * The library's counters since this executor started it: every channel of this process (task
   * channels, cp_trace channels and its Python workers' hand-off channels), none of an earlier
   * application of this JVM.
   */
  private long[] totals() {
    long[] atStart = statsAtStart;
    if (atStart == null) return new long[SAMPLE_SCAN_TICKS + 1];
    long[] total = CloudProfiler.libraryStats();
    for (int i = 0; i < total.length; i++) total[i] -= atStart[i];
    return total;
  }
}
