package io.cloudprofiler.spark.calibration;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Calibration quality per pair of TSC domains as the rounds go, for the driver's tab and metrics:
 * per pair its hosts, rounds, the latest round's MinRTT each way and the bound of the anchor it
 * gives, and the smallest bound so far. The bound is the analysis's min-pair anchor of the round
 * (every probe of both directions as an interval of the first domain's time at one tick of the
 * second, intersected), under the rate of the second TSC to the first and its uncertainty as the
 * analysis finds them from the first and the latest round ({@link #rate}; {@value #RATE_PRIOR} of
 * uncertainty in the first round, as the analysis's prior): the bound the analysis gives that round
 * from the rounds up to it. The {@value #KEPT} pairs that ran last are kept. Thread-safe.
 */
public final class PairQuality {
  public static final int KEPT = 1000;

  /** Two TSCs tick at rates within 1,000 ppm of each other (the analysis's RATE_PRIOR). */
  static final double RATE_PRIOR = 1e-3;

  /** A pair's figures: ticks are converted with each prober's TSC frequency (NaN where unknown). */
  private static final class Pair {
    String domainA, domainB, hostA, hostB;
    long rounds, failures;
    int round;
    double minRttAbS = Double.NaN, minRttBaS = Double.NaN, boundS = Double.NaN;
    double bestBoundS = Double.POSITIVE_INFINITY;
    boolean failing;
    long[] firstForward, firstBackward; // the first round's probes
    double hzA, hzB;
    double[] anchor; // the latest round's min-pair anchor {b's tick, a's ticks, bound} and its rate
    double rate, rateErr;
  }

  private final Map<String, Pair> pairs =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Pair> eldest) {
          return size() > KEPT;
        }
      };

  private Pair pair(String domainA, String domainB, String hostA, String hostB) {
    Pair p = pairs.computeIfAbsent(domainA + " <-> " + domainB, k -> new Pair());
    p.domainA = domainA;
    p.domainB = domainB;
    p.hostA = hostA;
    p.hostB = hostB;
    return p;
  }

  /**
   * Round {@code round} of the pair ran: {@code forward} a -> b (a's send, b's TSC, a's receipt),
   * {@code backward} b -> a, triples as {@link ProbeControl#probe} gives them (receipt 0:
   * unanswered); {@code hzA}, {@code hzB} the domains' TSC frequencies (0 where unknown).
   */
  synchronized void ran(
      String domainA,
      String domainB,
      String hostA,
      String hostB,
      int round,
      long[] forward,
      long[] backward,
      double hzA,
      double hzB) {
    Pair p = pair(domainA, domainB, hostA, hostB);
    p.rounds++;
    p.round = round;
    p.failing = false;
    p.minRttAbS = seconds(ProbeRuns.minRtt(forward), hzA);
    p.minRttBaS = seconds(ProbeRuns.minRtt(backward), hzB);
    double[] rate = {1, RATE_PRIOR};
    if (p.firstForward == null) {
      p.firstForward = forward;
      p.firstBackward = backward;
    } else rate = rate(p.firstForward, p.firstBackward, forward, backward);
    double[] anchor = minPairAnchor(forward, backward, rate[0], rate[1]);
    p.boundS = seconds(anchor == null ? Double.NaN : anchor[2], hzA);
    if (anchor != null) {
      p.anchor = anchor;
      p.rate = rate[0];
      p.rateErr = rate[1];
    }
    p.hzA = hzA;
    p.hzB = hzB;
    if (p.boundS < p.bestBoundS) p.bestBoundS = p.boundS;
  }

  /** A round of the pair failed. */
  synchronized void failed(String domainA, String domainB, String hostA, String hostB) {
    Pair p = pair(domainA, domainB, hostA, hostB);
    p.failures++;
    p.failing = true;
  }

  /**
   * Tick {@code tick} of domain {@code domain} as nanoseconds of domain {@code reference}'s TSC
   * (from its tick 0) within a bound: {ns, bound ns}, from the latest anchor of the pair {@code
   * reference <-> domain} and the rate, the bound widened by the rate's uncertainty over the ticks
   * from the anchor (the analysis interpolates between anchors: its bounds are tighter). Null where
   * that pair has no anchor or its frequencies are unknown.
   */
  public synchronized double[] toReference(String reference, String domain, long tick) {
    Pair p = pairs.get(reference + " <-> " + domain);
    if (p == null || p.anchor == null || !(p.hzA > 0)) return null;
    double shift = tick - p.anchor[0];
    double ticks = p.anchor[1] + p.rate * shift;
    double bound = p.anchor[2] + p.rateErr * Math.abs(shift);
    return new double[] {ticks / p.hzA * 1e9, bound / p.hzA * 1e9};
  }

  /**
   * The pairs, as rows {domain_a, domain_b, host_a, host_b, rounds, failures, failing, round,
   * min_rtt_a_b_s, min_rtt_b_a_s, bound_s, best_bound_s} (NaN as null).
   */
  public synchronized List<Map<String, Object>> rows() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Pair p : pairs.values()) {
      Map<String, Object> r = new LinkedHashMap<>();
      r.put("domain_a", p.domainA);
      r.put("domain_b", p.domainB);
      r.put("host_a", p.hostA);
      r.put("host_b", p.hostB);
      r.put("rounds", p.rounds);
      r.put("failures", p.failures);
      r.put("failing", p.failing);
      r.put("round", p.rounds == 0 ? null : p.round);
      r.put("min_rtt_a_b_s", finite(p.minRttAbS));
      r.put("min_rtt_b_a_s", finite(p.minRttBaS));
      r.put("bound_s", finite(p.boundS));
      r.put("best_bound_s", finite(p.bestBoundS));
      out.add(r);
    }
    out.sort(
        (x, y) ->
            (x.get("domain_a") + " " + x.get("domain_b"))
                .compareTo(y.get("domain_a") + " " + y.get("domain_b")));
    return out;
  }

  private static Double finite(double v) {
    return Double.isFinite(v) ? v : null;
  }

  private static double seconds(double ticks, double hz) {
    return hz > 0 && ticks >= 0 && ticks < Long.MAX_VALUE ? ticks / hz : Double.NaN;
  }

  /**
   * The rate of b's TSC to a's ({a's ticks per b's tick, its uncertainty}) from two rounds' probes,
   * as the analysis's {@code Calibration.from_rounds} finds it: the rate between their MinRTT
   * anchors under the prior, then between their MinRTT anchors under that rate. The prior where a
   * round has no answered probe or the rounds' anchors do not advance.
   */
  static double[] rate(long[] firstForward, long[] firstBackward, long[] forward, long[] backward) {
    double[] rate = {1, RATE_PRIOR};
    for (int step = 0; step < 2; step++) {
      Anchor first = Anchor.minRtt(firstForward, firstBackward, rate[0], rate[1]);
      Anchor last = Anchor.minRtt(forward, backward, rate[0], rate[1]);
      if (first == null || last == null || last.other <= first.other)
        return new double[] {1, RATE_PRIOR};
      double span = last.other - first.other;
      rate = new double[] {(last.ref - first.ref) / span, (last.err + first.err) / span};
    }
    return rate;
  }

  /**
   * An anchor: b's tick {@code other} lies at a's time {@code ref} within {@code err} a's ticks.
   */
  record Anchor(long other, double ref, double err) {
    /**
     * The MinRTT anchor of a round (the analysis's {@code _minrtt_anchor}): of the probe with the
     * smallest round trip (in its initiator's ticks, the first such), forward: b's tick at a's
     * midpoint, within half the round trip; backward: b's midpoint at a's tick, within half the
     * round trip in a's ticks at the rate's upper end plus half a b tick of rounding. Null where no
     * probe was answered.
     */
    static Anchor minRtt(long[] forward, long[] backward, double rate, double rateErr) {
      Anchor best = null;
      long bestRtt = Long.MAX_VALUE;
      for (int d = 0; d < 2; d++) {
        long[] r = d == 0 ? forward : backward;
        for (int i = 0; i + 2 < r.length; i += 3) {
          long rtt = r[i + 2] - r[i];
          if (r[i + 2] == 0 || rtt >= bestRtt) continue;
          bestRtt = rtt;
          double half = rtt / 2.0;
          best =
              d == 0
                  ? new Anchor(r[i + 1], r[i] + half, half)
                  : new Anchor(r[i] + rtt / 2, r[i + 1], half * (rate + rateErr) + 0.5 * rate);
        }
      }
      return best;
    }
  }

  /**
   * The min-pair anchor's bound of a round, in a's ticks (the analysis's {@code
   * anchor_from_probes(..., "minpair", rate, rate_err)}): each answered probe puts b's tick b_i at
   * a's time within an interval (forward: [send, receipt]; backward, a's tick r seen between b's
   * send and receipt: [r - rate (receipt - send), r]), moved to the tick b0 of the probe with the
   * smallest round trip at {@code rate} (a's ticks per b's tick) and widened by {@code rateErr}
   * times the ticks it was moved over; half the width of their intersection. NaN where no probe was
   * answered or the intervals do not meet (the rate is wrong beyond its uncertainty).
   */
  static double boundTicks(long[] forward, long[] backward, double rate, double rateErr) {
    double[] anchor = minPairAnchor(forward, backward, rate, rateErr);
    return anchor == null ? Double.NaN : anchor[2];
  }

  /**
   * The min-pair anchor of a round ({@link #boundTicks}): {b's tick b0, a's ticks at it, bound};
   * null where no probe was answered or the intervals do not meet.
   */
  static double[] minPairAnchor(long[] forward, long[] backward, double rate, double rateErr) {
    long b0 = 0, best = Long.MAX_VALUE;
    for (int d = 0; d < 2; d++) {
      long[] r = d == 0 ? forward : backward;
      for (int i = 0; i + 2 < r.length; i += 3) {
        if (r[i + 2] == 0 || r[i + 2] - r[i] >= best) continue;
        best = r[i + 2] - r[i];
        b0 = d == 0 ? r[i + 1] : r[i];
      }
    }
    if (best == Long.MAX_VALUE) return null;
    double low = Double.NEGATIVE_INFINITY, high = Double.POSITIVE_INFINITY;
    for (int d = 0; d < 2; d++) {
      long[] r = d == 0 ? forward : backward;
      for (int i = 0; i + 2 < r.length; i += 3) {
        if (r[i + 2] == 0) continue;
        double shift = d == 0 ? r[i + 1] - b0 : r[i] - b0;
        double rtt = r[i + 2] - r[i];
        double lo = d == 0 ? r[i] : r[i + 1] - rate * rtt;
        double hi = d == 0 ? r[i + 2] : r[i + 1];
        double widen = rateErr * (Math.abs(shift) + (d == 0 ? 0 : rtt));
        low = Math.max(low, lo - rate * shift - widen);
        high = Math.min(high, hi - rate * shift + widen);
      }
    }
    return low <= high ? new double[] {b0, (low + high) / 2, (high - low) / 2} : null;
  }
}
