package io.cloudprofiler.spark.ui;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * What the tab's own work costs the driver, measured as it runs (the wall time of each piece: an
 * upper bound of its CPU time): the listener that follows stages and tasks, the executors' messages
 * (counters and hops' samples), and the figures built for the pages, Prometheus and the event log.
 * The executors measure theirs ({@code Messages.Counters}); the tab and the metrics show both, and
 * {@code cloudprofiler bench live} states them as shares of the job's CPU and of a core.
 */
public final class TabWork {
  /** The driver's parts. */
  public enum Part {
    LISTENERS,
    MESSAGES,
    FIGURES;

    String label() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  private final LongAdder[] nanos = new LongAdder[Part.values().length];

  public TabWork() {
    for (int i = 0; i < nanos.length; i++) nanos[i] = new LongAdder();
  }

  /** Counts the time since {@code began} (a {@link System#nanoTime}) as {@code part}'s. */
  public void since(Part part, long began) {
    nanos[part.ordinal()].add(System.nanoTime() - began);
  }

  /** Seconds per part, by its label. */
  Map<String, Object> seconds() {
    Map<String, Object> out = new LinkedHashMap<>();
    for (Part p : Part.values()) out.put(p.label(), nanos[p.ordinal()].sum() / 1e9);
    return out;
  }
}
