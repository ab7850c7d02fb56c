package io.cloudprofiler.spark.ui;

import io.cloudprofiler.spark.Messages;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Each executor's counters as it last sent them ({@link Messages.Counters}): the records its
 * library logged and dropped and the bytes it wrote. The {@link #KEPT} executors heard from last
 * are kept; those left out are counted.
 */
public final class LiveExecutors {
  static final int KEPT = 1000;

  /** An executor's counters, as its message gave them. */
  record Counters(String executorId, long logged, long dropped, long bytes) {}

  private final Map<String, Counters> executors =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Counters> eldest) {
          if (size() <= KEPT) return false;
          leftOut++;
          return true;
        }
      };

  private long leftOut;

  /** An executor's message; counters that are negative (from no executor of ours) are ignored. */
  public synchronized void update(Messages.Counters c) {
    if (c.executorId() == null
        || c.recordsLogged() < 0
        || c.recordsDropped() < 0
        || c.bytesWritten() < 0) return;
    executors.put(
        c.executorId(),
        new Counters(c.executorId(), c.recordsLogged(), c.recordsDropped(), c.bytesWritten()));
  }

  /** The executors' counters, by executor id. */
  synchronized List<Counters> all() {
    List<Counters> out = new ArrayList<>(executors.values());
    out.sort((a, b) -> a.executorId().compareTo(b.executorId()));
    return out;
  }

  /** {records logged, records dropped, bytes written}, summed over the executors kept. */
  public synchronized long[] totals() {
    long[] sum = new long[3];
    for (Counters c : executors.values()) {
      sum[0] += c.logged();
      sum[1] += c.dropped();
      sum[2] += c.bytes();
    }
    return sum;
  }

  /** Executors left out since the application started, to keep at most {@link #KEPT}. */
  synchronized long leftOut() {
    return leftOut;
  }
}
