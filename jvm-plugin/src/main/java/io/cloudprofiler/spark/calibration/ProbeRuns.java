package io.cloudprofiler.spark.calibration;

import java.io.IOException;
import java.util.concurrent.locks.LockSupport;

/**
 * How a probe run is taken, as the Python prober takes its rounds ({@code
 * cloudprofiler.calibration.probe}, whose constants these equal: a test holds them together). Spark
 * calibrates while the executors are busy, and a moment in which the scheduler holds the prober or
 * the responder back delays every probe sent in it.
 *
 * <ul>
 *   <li>A run's probes go in {@link #BURSTS} bursts {@link #BURST_GAP_NANOS} apart, so that such a
 *       moment spoils a burst, not the run's smallest round trip.
 *   <li>Every {@link #SLEEPING_BURST}-th burst waits for its answers asleep, the others spinning:
 *       spinning saves the wake-up on a quiet machine, and on a busy one uses up the prober's share
 *       of the CPU, after which the scheduler holds it back for milliseconds.
 *   <li>A run whose smallest round trip is over {@link #RETRY_FACTOR} times the best seen on its
 *       path was delayed as a whole: it is taken again, up to {@link #RETRIES} times, and the best
 *       run is kept. Without this, one such run becomes an anchor hundreds of microseconds wide.
 * </ul>
 */
final class ProbeRuns {
  static final int BURSTS = 10;
  static final long BURST_GAP_NANOS = 500_000;
  static final double RETRY_FACTOR = 4.0;
  static final int RETRIES = 3;
  static final int SLEEPING_BURST = 2;

  /** One probe run: (send, remote, recv) triples, recv 0 where unanswered. */
  interface Run {
    long[] take() throws IOException;
  }

  /**
   * One burst of a run: `count` probes, as {@link Run#take} answers them, spinning for each answer
   * or asleep until it comes.
   */
  interface Burst {
    long[] take(int count, boolean spin);
  }

  private ProbeRuns() {}

  /** The sizes of the bursts of `count` probes: at most {@link #BURSTS}, as even as can be. */
  static int[] burstSizes(int count) {
    int bursts = Math.min(BURSTS, count);
    int[] sizes = new int[bursts];
    for (int i = 0; i < bursts; i++) sizes[i] = count / bursts + (i < count % bursts ? 1 : 0);
    return sizes;
  }

  /**
   * `count` probes in bursts {@link #BURST_GAP_NANOS} apart, every {@link #SLEEPING_BURST}-th
   * asleep, their triples in the order sent.
   */
  static long[] inBursts(int count, Burst burst) {
    long[] all = new long[0];
    int[] sizes = burstSizes(count);
    for (int i = 0; i < sizes.length; i++) {
      if (i > 0) LockSupport.parkNanos(BURST_GAP_NANOS);
      all = joined(all, burst.take(sizes[i], i % SLEEPING_BURST != SLEEPING_BURST - 1));
    }
    return all;
  }

  /** The triples of `first` followed by those of `then`. */
  static long[] joined(long[] first, long[] then) {
    long[] all = java.util.Arrays.copyOf(first, first.length + then.length);
    System.arraycopy(then, 0, all, first.length, then.length);
    return all;
  }

  /**
   * The smallest round trip (recv - send) of a run's answered probes, in the prober's ticks;
   * MAX_VALUE for none.
   */
  static long minRtt(long[] run) {
    long min = Long.MAX_VALUE;
    for (int i = 0; i + 2 < run.length; i += 3) {
      if (run[i + 2] != 0) min = Math.min(min, run[i + 2] - run[i]);
    }
    return min;
  }

  /**
   * A run from `take`, taken again while its smallest round trip is over {@link #RETRY_FACTOR}
   * times `bestRtt` (the best seen on this path; MAX_VALUE: none yet), at most {@link #RETRIES}
   * times: the run with the smallest.
   */
  static long[] retaken(Run take, long bestRtt) throws IOException {
    long[] best = take.take();
    for (int i = 0; i < RETRIES && minRtt(best) > RETRY_FACTOR * bestRtt; i++) {
      long[] again = take.take();
      if (minRtt(again) < minRtt(best)) best = again;
    }
    return best;
  }
}
