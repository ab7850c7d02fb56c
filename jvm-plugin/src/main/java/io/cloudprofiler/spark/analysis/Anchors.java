package io.cloudprofiler.spark.analysis;

import java.io.Serializable;

/**
 * One calibration's interpolation anchors (translate.py's Calibration after choosing: _other, _ref,
 * _err) and the span its rounds cover, with its operations on ticks done as translate.py does them,
 * operation for operation in the same order, so that every value is the same double as numpy's.
 */
final class Anchors implements Serializable {
  private static final long serialVersionUID = 1L;

  /** translate.py's ROUNDING_TICKS: every calibrated bound is widened by it. */
  static final double ROUNDING_TICKS = 1.0;

  private final long[] other; // the other domain's ticks, strictly increasing
  private final double[] ref;
  private final double[] err;
  private final long first; // the first and last rounds' ticks (Calibration.covers)
  private final long last;

  private transient int found; // the segment found last (segment)

  /** The last translation's results (translate). */
  double estimate;

  double bound;
  boolean extrapolated;

  Anchors(long[] other, double[] ref, double[] err, long first, long last) {
    if (other.length < 2 || ref.length != other.length || err.length != other.length)
      throw new IllegalArgumentException(
          "a calibration needs at least two anchors of other, ref and err each, got "
              + other.length
              + ", "
              + ref.length
              + ", "
              + err.length);
    for (int i = 1; i < other.length; i++) {
      if (other[i] <= other[i - 1])
        throw new IllegalArgumentException(
            "calibration anchors out of order: " + other[i - 1] + " then " + other[i]);
    }
    this.other = other;
    this.ref = ref;
    this.err = err;
    this.first = first;
    this.last = last;
  }

  /**
   * The segment of {@code value} (np.searchsorted(other, value, "right") - 1, clipped to 0 ..
   * anchors - 2), the last one found tried first: values come mostly in order.
   */
  int segment(long value) {
    if (holds(found, value)) return found;
    int lo = 0;
    int hi = other.length; // the count of anchors <= value lies in lo..hi
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (other[mid] <= value) lo = mid + 1;
      else hi = mid;
    }
    return found = Math.max(0, Math.min(other.length - 2, lo - 1));
  }

  /** Whether {@code value} lies in the segment (the first reaches back, the last on, forever). */
  private boolean holds(int segment, long value) {
    return (segment == 0 || other[segment] <= value)
        && (segment + 2 == other.length || value < other[segment + 1]);
  }

  /**
   * Calibration.translate of one value in {@code segment}: the reference estimate, its bound and
   * whether it lies outside the segment (in {@link #estimate}, {@link #bound}, {@link
   * #extrapolated}).
   */
  void translate(long value, int segment) {
    long oj = other[segment];
    double span = (double) (other[segment + 1] - oj);
    double lam = (double) (value - oj) / span;
    double rate = (ref[segment + 1] - ref[segment]) / span;
    estimate = ref[segment] + rate * (double) (value - oj);
    bound = Math.abs(1.0 - lam) * err[segment] + Math.abs(lam) * err[segment + 1] + ROUNDING_TICKS;
    extrapolated = lam < 0 || lam > 1;
  }

  /** The rate of reference ticks per tick of the other domain in {@code segment}. */
  double rate(int segment) {
    return (ref[segment + 1] - ref[segment]) / span(segment);
  }

  double span(int segment) {
    return (double) (other[segment + 1] - other[segment]);
  }

  /** The sum of the bounds at the segment's two anchors. */
  double errors(int segment) {
    return err[segment] + err[segment + 1];
  }

  /** Calibration.covers: the value lies inside the span of the rounds. */
  boolean covers(long value) {
    return value >= first && value <= last;
  }
}
