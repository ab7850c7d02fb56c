package io.cloudprofiler.spark.analysis;

import static io.cloudprofiler.spark.analysis.PlanJson.bits;
import static io.cloudprofiler.spark.analysis.PlanJson.doubles;
import static io.cloudprofiler.spark.analysis.PlanJson.longs;
import static io.cloudprofiler.spark.analysis.PlanJson.required;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.util.Arrays;

/**
 * Durations between two TSC readings of any domains in nanoseconds of the reference, with their
 * bound, by the best path: the analysis's Timebase.durations (python/cloudprofiler/analysis/
 * timebase.py over calibration/translate.py's durations), one duration at a time, each value the
 * same double as numpy's. Domains are the numbers of Timebase.domains (domain_id); one outside them
 * has no calibration.
 */
final class Durations implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The paths this class takes, by translate.py's PATHS codes (the plan's "paths" must agree). */
  private static final String[] PATHS = {
    "unbounded", "trivial", "scenario1", "scenario2", "scenario3", "baseline", "local"
  };

  /** A path's name (translate.py's PATHS). */
  static String pathName(byte code) {
    return PATHS[code];
  }

  static final byte UNBOUNDED = 0,
      TRIVIAL = 1,
      SCENARIO1 = 2,
      SCENARIO2 = 3,
      SCENARIO3 = 4,
      BASELINE = 5,
      LOCAL = 6;

  private final int reference;
  private final double hz;
  private final Anchors[][] calibrations; // [x][y]: y's ticks in x's, null where none relates them
  private final double[] localHz; // per domain, its files' tsc.hz (NaN where none tells)
  private final double[] localUncertainty;

  // the duration being chosen (translate.py's _best over the candidates `consider` is given)
  private double value, error;
  private byte path;
  private boolean extrapolated;

  /** The last duration's results (of). */
  double durationNs, errNs;

  byte pathCode;
  boolean flagged, unbounded;

  private Durations(
      int reference,
      double hz,
      Anchors[][] calibrations,
      double[] localHz,
      double[] localUncertainty) {
    this.reference = reference;
    this.hz = hz;
    this.calibrations = calibrations;
    this.localHz = localHz;
    this.localUncertainty = localUncertainty;
  }

  /**
   * From Timebase.jvm_durations: {"paths": PATHS' names by code, "hz": bits, "reference": its
   * domain_id, "domains": how many, "calibrations": [{"x", "y": domain ids, and the anchors of y in
   * x as {@link #anchors} reads them}], "local": [{"domain", "hz", "uncertainty"}]}.
   */
  static Durations parse(JsonNode plan) {
    JsonNode paths = required(plan, "paths");
    for (int code = 0; code < PATHS.length; code++) {
      if (code >= paths.size() || !paths.get(code).asText().equals(PATHS[code]))
        throw new IllegalArgumentException(
            "the durations' paths " + paths + " are not the codes " + Arrays.toString(PATHS));
    }
    int domains = required(plan, "domains").asInt();
    Anchors[][] calibrations = new Anchors[domains][domains];
    for (JsonNode c : required(plan, "calibrations"))
      calibrations[domain(c, "x", domains)][domain(c, "y", domains)] = anchors(c);
    double[] localHz = new double[domains];
    double[] uncertainty = new double[domains];
    Arrays.fill(localHz, Double.NaN);
    for (JsonNode l : required(plan, "local")) {
      int d = domain(l, "domain", domains);
      localHz[d] = bits(required(l, "hz"));
      uncertainty[d] = bits(required(l, "uncertainty"));
    }
    return new Durations(
        domain(plan, "reference", domains),
        bits(required(plan, "hz")),
        calibrations,
        localHz,
        uncertainty);
  }

  /** {"other": ticks, "ref", "err": bits, "first", "last": the rounds' first and last ticks}. */
  static Anchors anchors(JsonNode node) {
    return new Anchors(
        longs(required(node, "other")),
        doubles(required(node, "ref")),
        doubles(required(node, "err")),
        required(node, "first").asLong(),
        required(node, "last").asLong());
  }

  private static int domain(JsonNode node, String key, int domains) {
    int d = required(node, key).asInt();
    if (d < 0 || d >= domains)
      throw new IllegalArgumentException(
          key + " " + d + " is not a domain 0.." + (domains - 1) + " in " + node);
    return d;
  }

  /**
   * The duration from {@code start} (ticks of {@code startDomain}) to {@code end}: in {@link
   * #durationNs}, {@link #errNs}, {@link #pathCode}, {@link #flagged} (extrapolated), {@link
   * #unbounded}.
   */
  void of(int startDomain, long start, int endDomain, long end) {
    int domains = calibrations.length;
    if (startDomain < 0 || endDomain < 0 || startDomain >= domains || endDomain >= domains) {
      set(Double.NaN, Double.POSITIVE_INFINITY, UNBOUNDED, false, true);
      return;
    }
    value = Double.NaN;
    error = Double.POSITIVE_INFINITY;
    path = UNBOUNDED;
    extrapolated = true;
    if (startDomain == endDomain && startDomain == reference) {
      consider((double) (end - start), 0.0, TRIVIAL, false);
    } else if (startDomain == endDomain) {
      Anchors cal = calibrations[reference][startDomain];
      if (cal != null) {
        int k = cal.segment(start);
        double d = (double) (end - start);
        consider(
            cal.rate(k) * d,
            Math.abs(d) * cal.errors(k) / cal.span(k) + Anchors.ROUNDING_TICKS,
            SCENARIO1,
            !cal.covers(start));
      }
    } else {
      viaReference(startDomain, start, endDomain, end);
      scenario3(startDomain, endDomain, start, end, true);
      scenario3(endDomain, startDomain, end, start, false);
    }
    // Timebase.durations: in ns; a domain no calibration relates, within itself, over its own rate
    boolean none = Double.isInfinite(error);
    double valueNs = value / hz * 1e9;
    double errorNs = error / hz * 1e9;
    if (none && startDomain == endDomain && !Double.isNaN(localHz[startDomain])) {
      double h = localHz[startDomain];
      double local = (double) (end - start) / h * 1e9;
      set(local, Math.abs(local) * localUncertainty[startDomain] / h, LOCAL, extrapolated, false);
      return;
    }
    set(valueNs, errorNs, path, extrapolated && !none, none);
  }

  private void set(double v, double e, byte p, boolean flag, boolean none) {
    durationNs = v;
    errNs = e;
    pathCode = p;
    flagged = flag;
    unbounded = none;
  }

  /** Scenario 2 (an end in the reference) or the baseline: both ends translated. */
  private void viaReference(int startDomain, long start, int endDomain, long end) {
    Anchors s = calibrations[reference][startDomain];
    Anchors t = calibrations[reference][endDomain];
    if ((startDomain != reference && s == null) || (endDomain != reference && t == null)) return;
    double sEst = (double) start, sErr = 0.0, tEst = (double) end, tErr = 0.0;
    boolean sExt = false, tExt = false;
    if (startDomain != reference) {
      s.translate(start, s.segment(start));
      sEst = s.estimate;
      sErr = s.bound;
      sExt = s.extrapolated;
    }
    if (endDomain != reference) {
      t.translate(end, t.segment(end));
      tEst = t.estimate;
      tErr = t.bound;
      tExt = t.extrapolated;
    }
    boolean oneIsReference = startDomain == reference || endDomain == reference;
    consider(tEst - sEst, sErr + tErr, oneIsReference ? SCENARIO2 : BASELINE, sExt || tExt);
  }

  /** Scenario 3 (Eq. 8): y translated into X, the local duration scaled with X's calibration. */
  private void scenario3(int x, int y, long xValue, long yValue, boolean xIsStart) {
    if (x == reference || y == reference) return;
    Anchors refX = calibrations[reference][x];
    Anchors xY = calibrations[x][y];
    if (refX == null || xY == null) return;
    xY.translate(yValue, xY.segment(yValue));
    double yInX = xY.estimate, eXY = xY.bound;
    double local = xIsStart ? yInX - (double) xValue : (double) xValue - yInX;
    int k = refX.segment(xValue);
    double span = refX.span(k);
    double rate = refX.rate(k);
    // |r d - r' d'| <= r |d - d'| + |d'| |r - r'|, with |d'| <= |d| + e_xy
    double err =
        (Math.abs(local) + eXY) * refX.errors(k) / span + rate * eXY + Anchors.ROUNDING_TICKS;
    consider(rate * local, err, SCENARIO3, xY.extrapolated || !refX.covers(xValue));
  }

  /**
   * translate.py's _best: bounded before unbounded, inside the calibrated spans before
   * extrapolated, the smaller bound.
   */
  private void consider(double v, double e, byte p, boolean flag) {
    boolean bInf = Double.isInfinite(error), cInf = Double.isInfinite(e);
    boolean better =
        (bInf && !cInf)
            || (bInf == cInf && ((extrapolated && !flag) || (extrapolated == flag && e < error)));
    if (better) {
      value = v;
      error = e;
      path = p;
      extrapolated = flag;
    }
  }
}
