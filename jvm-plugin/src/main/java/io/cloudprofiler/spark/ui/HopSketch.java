package io.cloudprofiler.spark.ui;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * A hop's durations (ns, signed) as counts per log bucket, the analysis's sketch (its {@code
 * sketch.py}: the same buckets, so a quantile is within {@value #RELATIVE_ACCURACY} of the value at
 * its rank), with the exact count, min, max and sum, and the largest bound of a duration. Not
 * thread-safe: {@link LiveHops} guards it.
 */
final class HopSketch {
  static final double RELATIVE_ACCURACY = 0.005;
  static final double MIN_NS = 0.001;
  private static final double GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY);
  private static final double LOG_GAMMA = Math.log(GAMMA);

  private final Map<Integer, Long> counts = new HashMap<>();
  long count, remote, unbounded;
  double min = Double.POSITIVE_INFINITY, max = Double.NEGATIVE_INFINITY, sum, boundMax;

  /** A duration known within {@code boundNs}; {@code remote}: its ends lie in two TSC domains. */
  void add(double ns, double boundNs, boolean remote) {
    counts.merge(key(ns), 1L, Long::sum);
    count++;
    if (remote) this.remote++;
    min = Math.min(min, ns);
    max = Math.max(max, ns);
    sum += ns;
    boundMax = Math.max(boundMax, boundNs);
  }

  /** A pair of records whose ends no calibration relates yet: counted, not measured. */
  void addUnbounded() {
    unbounded++;
  }

  /**
   * The value of rank ceil(q n) (numpy's inverted_cdf, as the analysis), clipped to the exact min
   * and max; of the durations negated where {@code negated} (the hop read the other way round).
   */
  double quantile(double q, boolean negated) {
    if (count == 0) return Double.NaN;
    long rank = Math.max(1, (long) Math.ceil(q * count));
    if (negated) rank = count + 1 - rank; // the rank-th smallest of -x is the mirror rank's of x
    long seen = 0;
    double found = Double.NaN;
    for (Map.Entry<Integer, Long> e : new TreeMap<>(counts).entrySet()) {
      seen += e.getValue();
      if (seen >= rank) {
        found = value(e.getKey());
        break;
      }
    }
    found = Math.min(Math.max(found, min), max);
    return negated ? -found : found;
  }

  /** The bucket of a value: sign(v) (ceil(log_gamma(|v| / MIN_NS)) + 1), 0 under MIN_NS. */
  static int key(double v) {
    double magnitude = Math.abs(v);
    if (!(magnitude >= MIN_NS)) return 0;
    int k = (int) Math.ceil(Math.log(magnitude / MIN_NS) / LOG_GAMMA) + 1;
    return v < 0 ? -k : k;
  }

  /** The value a bucket stands for, within RELATIVE_ACCURACY of every value in it. */
  static double value(int key) {
    if (key == 0) return 0;
    double magnitude = MIN_NS * 2 * Math.pow(GAMMA, Math.abs(key) - 1) / (GAMMA + 1);
    return key < 0 ? -magnitude : magnitude;
  }
}
