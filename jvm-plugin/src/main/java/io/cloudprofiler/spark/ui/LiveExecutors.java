package io.cloudprofiler.spark.ui;

import io.cloudprofiler.spark.Messages;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;

/**
 * Each executor's counters as it last sent them ({@link Messages.Counters}): the records its
 * library logged and dropped and the bytes it wrote, and per channel (its {@value
 * #CHANNELS_PER_EXECUTOR} busiest) the records logged and dropped, in all and per second over its
 * last collection interval. The {@link #KEPT} executors heard from last are kept; those left out
 * are counted. At most KEPT x CHANNELS_PER_EXECUTOR channel rows, names cut to {@value #NAME_CHARS}
 * characters: 15 MB of the driver's memory at most (measured; 6 MB with names of 20 characters).
 * Also the executors Spark removed, with its reason (a lost executor: killed, out of memory, its
 * host gone), the {@value #KEPT} removed last (reasons cut to {@value #REASON_CHARS} characters),
 * from the scheduler's events ({@link #listener}), and the lost processes whose files an executor
 * of their host collected, with the files cut where they died.
 */
public final class LiveExecutors {
  static final int KEPT = 1000;
  static final int CHANNELS_PER_EXECUTOR = 50;
  static final int NAME_CHARS = 200;
  static final int REASON_CHARS = 500;

  /** An executor Spark removed: when (ms since the epoch) and why, as the scheduler said. */
  record Removed(String executorId, long timeMs, String reason) {}

  private final Map<String, Removed> removed =
      new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Removed> eldest) {
          return size() > KEPT;
        }
      };

  private long removedCount;

  /** A lost process's files, collected by an executor (or the driver) of its host. */
  record LostCollected(String by, long pid, String folder, int files, int cut) {}

  private final List<LostCollected> lostCollected = new ArrayList<>();

  /** An executor's counters, as its message gave them. */
  record Counters(
      String executorId,
      long logged,
      long dropped,
      long bytes,
      long interval,
      double intervalSeconds,
      List<Messages.ChannelCount> channels,
      long channelsLeftOut,
      long workNanos,
      long scanNanos,
      long scanned) {}

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

  /**
   * An executor's message. One that is not of an executor of ours (counters that are negative) is
   * ignored; of its channels, those beyond CHANNELS_PER_EXECUTOR or with counts that are not are
   * counted as left out, their names cut to NAME_CHARS.
   */
  public synchronized void update(Messages.Counters c) {
    if (c.executorId() == null
        || c.recordsLogged() < 0
        || c.recordsDropped() < 0
        || c.bytesWritten() < 0
        || c.interval() < 0
        || !(c.intervalSeconds() >= 0)
        || c.workNanos() < 0
        || c.scanNanos() < 0
        || c.scannedRecords() < 0
        || c.channels() == null) return;
    List<Messages.ChannelCount> channels = new ArrayList<>();
    long leftOut = Math.max(0, c.channelsLeftOut());
    for (Object o : c.channels()) { // elements of any type: the message is untrusted
      if (channels.size() == CHANNELS_PER_EXECUTOR
          || !(o instanceof Messages.ChannelCount ch)
          || !valid(ch)) {
        leftOut++;
        continue;
      }
      String name = ch.channel();
      channels.add(
          new Messages.ChannelCount(
              name.length() > NAME_CHARS ? name.substring(0, NAME_CHARS) : name,
              ch.recordsLogged(),
              ch.recordsDropped(),
              ch.recordsPerSecond(),
              ch.dropsPerSecond()));
    }
    executors.put(
        c.executorId(),
        new Counters(
            c.executorId(),
            c.recordsLogged(),
            c.recordsDropped(),
            c.bytesWritten(),
            c.interval(),
            c.intervalSeconds(),
            List.copyOf(channels),
            leftOut,
            c.workNanos(),
            c.scanNanos(),
            c.scannedRecords()));
  }

  private static boolean valid(Messages.ChannelCount ch) {
    return ch.channel() != null
        && ch.recordsLogged() >= 0
        && ch.recordsDropped() >= 0
        && ch.recordsPerSecond() >= 0
        && ch.dropsPerSecond() >= 0
        && Double.isFinite(ch.recordsPerSecond())
        && Double.isFinite(ch.dropsPerSecond());
  }

  /**
   * The tab's work in the executors kept, summed: {seconds building and sending their messages,
   * seconds of the samples' scan, records scanned}.
   */
  synchronized double[] work() {
    double[] out = new double[3];
    for (Counters c : executors.values()) {
      out[0] += c.workNanos() / 1e9;
      out[1] += c.scanNanos() / 1e9;
      out[2] += c.scanned();
    }
    return out;
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

  /** Spark removed an executor. */
  synchronized void removed(String executorId, long timeMs, String reason) {
    if (executorId == null) return;
    String why = reason == null ? "" : reason;
    removed.put(
        executorId,
        new Removed(
            executorId,
            timeMs,
            why.length() > REASON_CHARS ? why.substring(0, REASON_CHARS) : why));
    removedCount++;
  }

  /**
   * An executor (or the driver: {@code by}) collected the files of a lost process of its host; the
   * {@value #KEPT} last are kept (untrusted input: a folder name cut to NAME_CHARS).
   */
  public synchronized void lostCollected(String by, long pid, String folder, int files, int cut) {
    if (by == null || folder == null || files < 0 || cut < 0 || cut > files) return;
    String name = folder.length() > NAME_CHARS ? folder.substring(0, NAME_CHARS) : folder;
    if (lostCollected.size() == KEPT) lostCollected.remove(0);
    lostCollected.add(new LostCollected(by, pid, name, files, cut));
  }

  /** The lost processes whose files were collected, oldest first. */
  synchronized List<LostCollected> lostCollected() {
    return List.copyOf(lostCollected);
  }

  /** The executors removed last, oldest first. */
  synchronized List<Removed> removed() {
    return List.copyOf(removed.values());
  }

  /** Executors removed since the application started. */
  synchronized long removedCount() {
    return removedCount;
  }

  /** The scheduler's events this needs: executors that Spark removed. */
  public SparkListener listener() {
    return new SparkListener() {
      @Override
      public void onExecutorRemoved(SparkListenerExecutorRemoved event) {
        removed(event.executorId(), event.time(), event.reason());
      }
    };
  }

  /** Executors left out since the application started, to keep at most {@link #KEPT}. */
  synchronized long leftOut() {
    return leftOut;
  }
}
