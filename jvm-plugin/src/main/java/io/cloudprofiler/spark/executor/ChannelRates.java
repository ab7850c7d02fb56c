package io.cloudprofiler.spark.executor;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Messages;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Each channel's records logged and dropped by this executor's library, since it started and per
 * second over the last collection interval, for the driver's tab and metrics. Channels of one name
 * (each Python worker's hand-off channel of a trace point) count as one. The {@value #SENT} busiest
 * channels of the interval are sent, the others counted; a name is cut to {@value #NAME_CHARS}
 * characters. Called from the collection thread only.
 */
final class ChannelRates {
  static final int SENT = 50;
  static final int NAME_CHARS = 200;

  /** Per name {logged, dropped}: as the library started (an earlier application's channels). */
  private Map<String, long[]> atStart = Map.of();

  /** Per name {logged, dropped} since the start, as the last interval ended. */
  private Map<String, long[]> previous = Map.of();

  private long previousNanos;

  /** The intervals ended since the start. */
  private long intervals;

  /** The library has just started: counts start from here. */
  void libraryStarted() {
    atStart = counts();
    previous = Map.of();
    previousNanos = System.nanoTime();
    intervals = 0;
  }

  /** Ends an interval: the seconds since the last one ended. */
  double endInterval() {
    long now = System.nanoTime();
    double seconds = (now - previousNanos) / 1e9;
    previousNanos = now;
    intervals++;
    return seconds;
  }

  /** The intervals ended since the start (1 during the first one's {@link #busiest}). */
  long intervals() {
    return intervals;
  }

  /**
   * The busiest {@value #SENT} channels over an interval of {@code seconds} ending now, by records
   * logged in it, then in all; {@code leftOut[0]} gets how many others there are.
   */
  List<Messages.ChannelCount> busiest(double seconds, int[] leftOut) {
    Map<String, long[]> now = counts();
    List<Messages.ChannelCount> all = new ArrayList<>();
    for (Map.Entry<String, long[]> e : now.entrySet()) {
      long[] start = atStart.getOrDefault(e.getKey(), new long[2]);
      long logged = e.getValue()[0] - start[0], dropped = e.getValue()[1] - start[1];
      long[] before = previous.getOrDefault(e.getKey(), start);
      long inInterval = e.getValue()[0] - before[0],
          droppedInInterval = e.getValue()[1] - before[1];
      if (logged == 0 && dropped == 0) continue; // none since the start: an earlier application's
      all.add(
          new Messages.ChannelCount(
              e.getKey(),
              logged,
              dropped,
              seconds > 0 ? inInterval / seconds : 0,
              seconds > 0 ? droppedInInterval / seconds : 0));
    }
    previous = now;
    all.sort(
        Comparator.comparingDouble(Messages.ChannelCount::recordsPerSecond)
            .thenComparingLong(Messages.ChannelCount::recordsLogged)
            .reversed()
            .thenComparing(Messages.ChannelCount::channel));
    leftOut[0] = Math.max(0, all.size() - SENT);
    return List.copyOf(all.subList(0, Math.min(SENT, all.size())));
  }

  /** Per name (cut to NAME_CHARS) {logged, dropped}, summed over the channels of that name. */
  private static Map<String, long[]> counts() {
    Object[] c = CloudProfiler.channelCounts();
    String[] names = (String[]) c[0];
    long[] logged = (long[]) c[1], dropped = (long[]) c[2];
    Map<String, long[]> out = new HashMap<>();
    for (int i = 0; i < names.length; i++) {
      String name = names[i].length() > NAME_CHARS ? names[i].substring(0, NAME_CHARS) : names[i];
      long[] sum = out.computeIfAbsent(name, k -> new long[2]);
      sum[0] += logged[i];
      sum[1] += dropped[i];
    }
    return out;
  }
}
