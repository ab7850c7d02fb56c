package io.cloudprofiler.spark.executor;

import io.cloudprofiler.CloudProfiler;
import java.util.Arrays;
import java.util.List;

/**
 * An executor's task records: (task attempt id, TSC) as each task starts and as it ends, on its
 * channels {@code spark.task.start} and {@code spark.task.end}. The channels open in the background
 * as the executor starts (they name the executor's TSC domain, which takes a few round trips with
 * the driver to find), and no task waits for them: until they open, a record keeps the TSC read as
 * its task started or ended, and goes to its channel with that TSC when it opens. Thread-safe.
 */
final class TaskRecords {
  /** The channels of task starts and ends. */
  static final List<String> CHANNELS = List.of("spark.task.start", "spark.task.end");

  /** Records kept while the channels open (16 MB): past that, a record is counted as lost. */
  static final int MAX_WAITING = 1 << 20;

  /** 0 until {@link #open}. */
  private volatile long startChannel, endChannel;

  /** (1 for a start, 0 for an end; task attempt id; TSC) per record waiting for the channels. */
  private long[] waiting = new long[3 * 64];

  private int count;
  private long lost;
  private boolean abandoned;

  void start(long taskAttemptId) {
    long channel = startChannel;
    if (channel != 0) CloudProfiler.log(channel, taskAttemptId);
    else keep(true, taskAttemptId, CloudProfiler.tsc());
  }

  /** A start whose TSC was read earlier ({@link CloudProfiler#tsc}). */
  void startAt(long taskAttemptId, long tsc) {
    long channel = startChannel;
    if (channel != 0) CloudProfiler.logAt(channel, taskAttemptId, tsc);
    else keep(true, taskAttemptId, tsc);
  }

  void end(long taskAttemptId) {
    long channel = endChannel;
    if (channel != 0) CloudProfiler.log(channel, taskAttemptId);
    else keep(false, taskAttemptId, CloudProfiler.tsc());
  }

  private synchronized void keep(boolean start, long id, long tsc) {
    long channel = start ? startChannel : endChannel;
    if (channel != 0) { // opened meanwhile
      CloudProfiler.logAt(channel, id, tsc);
    } else if (abandoned || count == MAX_WAITING) {
      lost++;
    } else {
      if (3 * count == waiting.length) waiting = Arrays.copyOf(waiting, 2 * waiting.length);
      waiting[3 * count] = start ? 1 : 0;
      waiting[3 * count + 1] = id;
      waiting[3 * count + 2] = tsc;
      count++;
    }
  }

  /**
   * The channels are open: the records that waited go to them, with their TSC; later ones go
   * straight there.
   */
  synchronized void open(long start, long end) {
    for (int i = 0; i < count; i++) {
      CloudProfiler.logAt(
          waiting[3 * i] == 1 ? start : end, waiting[3 * i + 1], waiting[3 * i + 2]);
    }
    waiting = new long[0];
    count = 0;
    endChannel = end;
    startChannel = start;
  }

  /**
   * No channel will open: the records that waited and every later one are lost; returns how many so
   * far.
   */
  synchronized long abandon() {
    abandoned = true;
    lost += count;
    count = 0;
    waiting = new long[0];
    return lost;
  }

  /** The open channels (none before {@link #open}). */
  long[] channels() {
    long start = startChannel, end = endChannel;
    return start == 0 ? new long[0] : new long[] {start, end};
  }
}
