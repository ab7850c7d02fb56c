package io.cloudprofiler.spark.sql;

/**
 * The times of one pipeline's probes in one task, made to agree with what holds of their true
 * values, before they are published ({@link PipelineClock#ended}).
 *
 * <p>What holds: every gap of a probe lies within a gap of the probe above it (a row leaves the
 * probe above before it leaves this one, and the next row reaches this one before the one above),
 * so an operator's time with its children is at least its child's; and every probe's time holds the
 * pipeline's batches, which are timed exactly ({@link BatchTimes}). The estimates need not agree: a
 * sampled gap that held a stall of the task's thread (preempted on a loaded host, a safepoint, the
 * JIT's first compilations in a cold JVM) counts 64 or 256 times at the probe that sampled it and
 * not at its neighbours: a Project above a join then took 311 ms where the join below it took 757
 * ms, with a standard error of 757 ms (a task of TPC-H q09 at scale 0.2 on two executors of one
 * core), and the Project's own time came out as 0 ns +- 757 ms.
 *
 * <p>The times of a chain of probes (each below the next) are replaced by their weighted isotonic
 * regression (pool adjacent violators, each estimate weighted by 1 / its variance, an exact one
 * fixed), held at or above the batches' time: the nearest times, in the estimates' own measure of
 * distance, that agree with what holds. The true times agree with it too, and a projection onto a
 * convex set that holds the truth never moves the estimates away from it in that measure. A stalled
 * estimate, whose error is large, gives way to its well-measured neighbours.
 *
 * <p>The standard error of each time then also states where its neighbours put it. The true time
 * lies between its child's and its parent's, so within three standard errors of the estimates above
 * it from above, and of those below it (and the batches' time) from below: its error is a third of
 * the distance from the new time to the farther of those two bounds, never more than its own
 * estimate's. Where the bounds cross, a time made equal to others keeps the standard error of their
 * pooled estimates, and one left alone its own. On chains of known times with a stall in one
 * estimate in seven (SqlTests), the new times lie half as far from the truth as the estimates, with
 * errors half as large, and fewer of them beyond three errors of it.
 *
 * <p>Probes that do not form chains (an operator whose two inputs are both in the pipeline) keep
 * their estimates.
 */
final class NestedTimes {
  /** The weight of an exact time (no error): any estimate pooled with it takes its value. */
  private static final double EXACT = 1e30;

  /**
   * The standard errors on either side of an estimate within which its true time is taken to lie.
   */
  private static final double BANDS = 3;

  private NestedTimes() {}

  /**
   * Makes {@code estimate} and {@code error} (ticks, by probe) agree along each chain: {@code
   * above[i]} is the probe of the operator that consumes probe i's rows in the same pipeline (-1:
   * none), {@code floor} the ticks every probe's time holds. False, changing nothing, where the
   * probes are not chains (an operator whose two inputs are both in the pipeline).
   */
  static boolean settle(double[] estimate, double[] error, int[] above, double floor) {
    int n = estimate.length;
    int[] below = new int[n];
    java.util.Arrays.fill(below, -1);
    for (int i = 0; i < n; i++) {
      if (above[i] < 0) continue;
      if (below[above[i]] >= 0) return false;
      below[above[i]] = i;
    }
    int[] order = new int[n];
    int[] starts = new int[n + 1];
    int placed = 0, chains = 0;
    for (int top = 0; top < n; top++) {
      if (above[top] >= 0) continue;
      starts[chains++] = placed;
      for (int i = top; i >= 0 && placed < n; i = below[i]) order[placed++] = i;
    }
    if (placed < n) return false; // a loop of probes, which no plan makes, has no top
    starts[chains] = placed;
    for (int c = 0; c < chains; c++) {
      settleChain(estimate, error, order, starts[c], starts[c + 1], floor);
    }
    return true;
  }

  /** One chain, {@code order[from..to)} from its top down. */
  private static void settleChain(
      double[] estimate, double[] error, int[] order, int from, int to, double floor) {
    int m = to - from;
    double[] raw = new double[m];
    double[] rawError = new double[m];
    double[] value = new double[m];
    double[] weight = new double[m];
    int[] size = new int[m];
    int blocks = 0;
    for (int k = 0; k < m; k++) {
      raw[k] = estimate[order[from + k]];
      rawError[k] = error[order[from + k]];
      value[blocks] = raw[k];
      weight[blocks] = rawError[k] > 0 ? 1 / (rawError[k] * rawError[k]) : EXACT;
      size[blocks++] = 1;
      // a time above the one before it (its parent's) pools with it, and with earlier ones as long
      // as the pooled time is still above theirs
      while (blocks > 1 && value[blocks - 1] > value[blocks - 2]) {
        double w = weight[blocks - 2] + weight[blocks - 1];
        value[blocks - 2] =
            (value[blocks - 2] * weight[blocks - 2] + value[blocks - 1] * weight[blocks - 1]) / w;
        weight[blocks - 2] = w;
        size[blocks - 2] += size[blocks - 1];
        blocks--;
      }
    }
    double[] settled = new double[m];
    double[] pooledError = new double[m];
    for (int b = 0, k = 0; b < blocks; b++) {
      for (int j = 0; j < size[b]; j++, k++) {
        settled[k] = Math.max(value[b], floor);
        pooledError[k] = size[b] > 1 ? 1 / Math.sqrt(weight[b]) : 0;
      }
    }
    // the nearest bounds of BANDS standard errors that the raw estimates above and below give
    double[] lowest = new double[m + 1];
    lowest[m] = floor;
    for (int k = m - 1; k >= 0; k--) {
      lowest[k] = Math.max(lowest[k + 1], raw[k] - BANDS * rawError[k]);
    }
    double highest = Double.POSITIVE_INFINITY;
    for (int k = 0; k < m; k++) {
      double reach = Math.max(highest - settled[k], settled[k] - lowest[k + 1]) / BANDS;
      estimate[order[from + k]] = settled[k];
      double bound = Math.max(pooledError[k], reach);
      error[order[from + k]] = bound > 0 ? Math.min(rawError[k], bound) : rawError[k];
      highest = Math.min(highest, raw[k] + BANDS * rawError[k]);
    }
  }
}
