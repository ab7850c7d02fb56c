package io.cloudprofiler.spark.analysis;

import java.io.Serializable;

/**
 * One TSC domain's ticks on the application's time axis, as the analysis's Timebase.translate
 * computes them (python/cloudprofiler/analysis/timebase.py, calibration/translate.py), operation
 * for operation in the same order so that every value is the same double: the reference domain's
 * ticks exactly, a calibrated domain's piecewise-linear between the anchors its calibration
 * interpolates between, any other domain's unbounded (t_ns NaN, err_ns infinite).
 */
final class AxisTranslation implements Serializable {
  private static final long serialVersionUID = 1L;

  /** translate.py's ROUNDING_TICKS: every calibrated bound is widened by it. */
  private static final double ROUNDING_TICKS = 1.0;

  private final double startTick;
  private final double hz;
  private final boolean reference;
  // the calibration's interpolation anchors (other ticks increasing), null for the reference and
  // for a domain nothing relates to it
  private final long[] other;
  private final double[] ref;
  private final double[] err;

  private AxisTranslation(
      double startTick, double hz, boolean reference, long[] other, double[] ref, double[] err) {
    this.startTick = startTick;
    this.hz = hz;
    this.reference = reference;
    this.other = other;
    this.ref = ref;
    this.err = err;
  }

  static AxisTranslation reference(double startTick, double hz) {
    return new AxisTranslation(startTick, hz, true, null, null, null);
  }

  static AxisTranslation unbounded() {
    return new AxisTranslation(Double.NaN, Double.NaN, false, null, null, null);
  }

  /**
   * A calibrated domain: its anchors as Calibration keeps them after choosing (_other, _ref, _err),
   * at least two, {@code other} strictly increasing.
   */
  static AxisTranslation calibrated(
      double startTick, double hz, long[] other, double[] ref, double[] err) {
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
    return new AxisTranslation(startTick, hz, false, other, ref, err);
  }

  boolean isUnbounded() {
    return !reference && other == null;
  }

  /**
   * The first {@code n} ticks in {@code tsc} on the axis: nanoseconds since the reference start,
   * their error bound, whether they lie outside the calibrated span, whether nothing bounds them.
   */
  void translate(
      long[] tsc, int n, double[] tNs, double[] errNs, boolean[] extrapolated, boolean[] unbound) {
    if (isUnbounded()) {
      for (int i = 0; i < n; i++) {
        tNs[i] = Double.NaN;
        errNs[i] = Double.POSITIVE_INFINITY;
        extrapolated[i] = false;
        unbound[i] = true;
      }
      return;
    }
    if (reference) {
      double zero = 0.0 / hz * 1e9; // 0, or NaN where no file tells the frequency, as numpy gives
      for (int i = 0; i < n; i++) {
        tNs[i] = ((double) tsc[i] - startTick) / hz * 1e9;
        errNs[i] = zero;
        extrapolated[i] = false;
        unbound[i] = false;
      }
      return;
    }
    int segment = 0;
    for (int i = 0; i < n; i++) {
      long value = tsc[i];
      // np.searchsorted(other, value, side="right") - 1, clipped to a segment; values come mostly
      // in
      // order, so the previous value's segment is tried first
      if (!(other[segment] <= value && (segment + 2 == other.length || value < other[segment + 1])))
        segment = segmentOf(value);
      long oj = other[segment];
      double span = (double) (other[segment + 1] - oj);
      double lam = (double) (value - oj) / span;
      double rate = (ref[segment + 1] - ref[segment]) / span;
      double est = ref[segment] + rate * (double) (value - oj);
      double bound =
          Math.abs(1.0 - lam) * err[segment] + Math.abs(lam) * err[segment + 1] + ROUNDING_TICKS;
      tNs[i] = (est - startTick) / hz * 1e9;
      errNs[i] = bound / hz * 1e9;
      extrapolated[i] = lam < 0 || lam > 1;
      unbound[i] = false;
    }
  }

  /** The last anchor at or before {@code value}, clipped to 0 .. anchors - 2. */
  private int segmentOf(long value) {
    int lo = 0;
    int hi = other.length; // the count of anchors <= value lies in lo..hi
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (other[mid] <= value) lo = mid + 1;
      else hi = mid;
    }
    return Math.max(0, Math.min(other.length - 2, lo - 1));
  }
}
