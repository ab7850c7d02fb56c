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

  private final double startTick;
  private final double hz;
  private final boolean reference;
  // the calibration's interpolation anchors, null for the reference and for a domain nothing
  // relates to it
  private final Anchors anchors;

  private AxisTranslation(double startTick, double hz, boolean reference, Anchors anchors) {
    this.startTick = startTick;
    this.hz = hz;
    this.reference = reference;
    this.anchors = anchors;
  }

  static AxisTranslation reference(double startTick, double hz) {
    return new AxisTranslation(startTick, hz, true, null);
  }

  static AxisTranslation unbounded() {
    return new AxisTranslation(Double.NaN, Double.NaN, false, null);
  }

  /** A calibrated domain: its anchors as Calibration keeps them after choosing. */
  static AxisTranslation calibrated(double startTick, double hz, Anchors anchors) {
    return new AxisTranslation(startTick, hz, false, anchors);
  }

  boolean isUnbounded() {
    return !reference && anchors == null;
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
    for (int i = 0; i < n; i++) {
      anchors.translate(tsc[i], anchors.segment(tsc[i]));
      tNs[i] = (anchors.estimate - startTick) / hz * 1e9;
      errNs[i] = anchors.bound / hz * 1e9;
      extrapolated[i] = anchors.extrapolated;
      unbound[i] = false;
    }
  }
}
