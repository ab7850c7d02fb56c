package io.cloudprofiler.spark.ui;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.LongSupplier;

/**
 * Latency between trace points while the application runs, from the samples executors send at each
 * collection interval (the library keeps, per record channel, the records whose id's {@link #level}
 * reaches the channel's level: the same ids at every channel and executor). Records of one id on
 * two channels make a duration of that pair of channels; the channels that share ids are chained in
 * the order their tuples pass them (a channel before another where the median from it to the other
 * is positive), and each consecutive pair is a hop, as the analysis's pipeline. A duration within
 * one TSC domain is its ticks at that domain's frequency; across domains each end is translated to
 * the driver's TSC with the calibration's bound, and a pair that no calibration relates yet is
 * counted as unbounded. A pair is measured only where the id's level reaches both channels' highest
 * level on any executor, so that every executor's samples are the same share of the ids. Each hop
 * has its figures since the start and over the last complete window (the collection interval: what
 * Prometheus' quantiles give). Bounded: {@value #IDS} ids awaiting their other records (the oldest
 * go first, counted), {@value #PER_ID} records an id (so chains of up to that many trace points;
 * about 2.5 MB at two records an id, 19 MB at the most), {@value #CHANNELS} channels, two counters
 * per pair of channels that share ids (the order), and sketches for {@value #PAIRS} hops (a hop's
 * buckets stay under 8,000 for durations of 1 ps to a day either way, about 80 bytes each: 32 MB at
 * the very most, a few MB for durations that span a few decades); what is left out is counted.
 * Thread-safe.
 */
public final class LiveHops {
  static final int IDS = 16_384;
  static final int PER_ID = 24; // a chain of trace points up to this long
  static final int CHANNELS = 100;
  static final int PAIRS = 50;
  static final int PER_MESSAGE = 4096; // samples of a channel a message (executors send 256)

  /** A tick of a TSC domain as ns of the driver's TSC within a bound: {ns, bound ns}, or null. */
  public interface Translation {
    double[] toReference(String domain, long tick);
  }

  private record Seen(int channel, String domain, double hz, long tick) {}

  /** A pair of channels' durations: since the start, in the window under way, in the last one. */
  private static final class Pair {
    final HopSketch total = new HopSketch();
    HopSketch current = new HopSketch(), last = new HopSketch();
  }

  private final Translation translation;
  private final long windowNanos;
  private final LongSupplier nanoClock;
  private long windowStart;
  private final Map<String, Integer> channelIndex = new HashMap<>();
  private final List<String> channels = new ArrayList<>();
  private final List<Integer> levels = new ArrayList<>();

  /** Per pair of channels that share ids: {durations at or over 0, under 0} (the order's votes). */
  private final Map<Long, long[]> votes = new HashMap<>();

  /** The hops' sketches: the pairs consecutive in the order, PAIRS at most. */
  private final Map<Long, Pair> pairs = new HashMap<>();

  /** A duration of a pair of channels (ns NaN: unbounded). */
  private record Met(long key, double ns, double bound, boolean remote) {}

  private long samples, evicted, repeated, leftOut;

  private final Map<Long, List<Seen>> waiting =
      new LinkedHashMap<>(1024, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, List<Seen>> eldest) {
          if (size() <= IDS) return false;
          evicted++;
          return true;
        }
      };

  /** Windows of {@code windowNanos} on {@code nanoClock} (System::nanoTime). */
  public LiveHops(Translation translation, long windowNanos, LongSupplier nanoClock) {
    this.translation = translation;
    this.windowNanos = Math.max(1, windowNanos);
    this.nanoClock = nanoClock;
    windowStart = nanoClock.getAsLong();
  }

  /** Ends the window under way where it is over (the last one empty after a window with none). */
  private void rotate() {
    long now = nanoClock.getAsLong();
    if (now - windowStart < windowNanos) return;
    boolean skipped = now - windowStart >= 2 * windowNanos;
    for (Pair p : pairs.values()) {
      p.last = skipped ? new HopSketch() : p.current;
      p.current = new HopSketch();
    }
    windowStart = skipped ? now : windowStart + windowNanos;
  }

  /**
   * An id's sampling level: the trailing zero bits of splitmix64 of it (64 where that is 0), as the
   * library's {@code cp_sample_level}.
   */
  public static int level(long id) {
    long z = id + 0x9e3779b97f4a7c15L;
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    z ^= z >>> 31;
    return Long.numberOfTrailingZeros(z);
  }

  /**
   * Samples of {@code channel} from an executor in TSC domain {@code domain} (frequency {@code hz},
   * 0 where unknown), kept at the channel's {@code level} there: ids and ticks.
   */
  public synchronized void add(
      String domain, double hz, String channel, int level, long[] ids, long[] ticks) {
    if (domain == null || channel == null || ids == null || ticks == null) return;
    if (!(hz > 0 && hz < 1e12)) hz = 0; // an executor's message is untrusted input
    if (channel.length() > LiveExecutors.NAME_CHARS)
      channel = channel.substring(0, LiveExecutors.NAME_CHARS);
    level = Math.max(0, Math.min(64, level));
    Integer c = channelIndex.get(channel);
    if (c == null) {
      if (channels.size() >= CHANNELS) {
        leftOut += ids.length;
        return;
      }
      c = channels.size();
      channelIndex.put(channel, c);
      channels.add(channel);
      levels.add(level);
    }
    levels.set(c, Math.max(levels.get(c), level));
    rotate();
    int n = Math.min(Math.min(ids.length, ticks.length), PER_MESSAGE);
    leftOut += Math.max(ids.length, ticks.length) - n;
    List<Met> met = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      samples++;
      int idLevel = level(ids[i]);
      if (idLevel < levels.get(c)) continue;
      Seen s = new Seen(c, domain, hz, ticks[i]);
      List<Seen> seen = waiting.computeIfAbsent(ids[i], k -> new ArrayList<>(2));
      for (Seen other : seen)
        if (other.channel != c && idLevel >= levels.get(other.channel)) met.add(pair(other, s));
      if (seen.size() < PER_ID) seen.add(s);
      else repeated++;
    }
    // the durations of the pairs that are hops in the order as it stands with this message
    List<Integer> order = order();
    Set<Long> hops = new HashSet<>();
    for (int i = 0; i + 1 < order.size(); i++) {
      int a = order.get(i), b = order.get(i + 1);
      long key = (long) Math.min(a, b) << 32 | Math.max(a, b);
      if (votes.containsKey(key)) hops.add(key);
    }
    pairs.keySet().retainAll(hops);
    for (long key : hops)
      if (!pairs.containsKey(key) && pairs.size() < PAIRS) pairs.put(key, new Pair());
    for (Met m : met) {
      Pair pair = pairs.get(m.key);
      if (pair == null) {
        if (hops.contains(m.key)) leftOut++; // a hop beyond PAIRS
        continue;
      }
      if (Double.isNaN(m.ns)) {
        pair.total.addUnbounded();
        pair.current.addUnbounded();
      } else {
        pair.total.add(m.ns, m.bound, m.remote);
        pair.current.add(m.ns, m.bound, m.remote);
      }
    }
  }

  /**
   * The duration from the record of the lower channel index to the other's, counted in the pair's
   * votes.
   */
  private Met pair(Seen x, Seen y) {
    Seen from = x.channel < y.channel ? x : y, to = from == x ? y : x;
    long key = (long) from.channel << 32 | to.channel;
    long[] vote = votes.computeIfAbsent(key, k -> new long[2]);
    double ns, bound;
    boolean remote = !from.domain.equals(to.domain) || !(from.hz > 0);
    if (!remote) {
      ns = (to.tick - from.tick) / from.hz * 1e9;
      bound = 0;
    } else {
      double[] a = translation.toReference(from.domain, from.tick);
      double[] b = translation.toReference(to.domain, to.tick);
      if (a == null || b == null) return new Met(key, Double.NaN, 0, true);
      ns = b[0] - a[0];
      bound = a[1] + b[1];
    }
    vote[ns >= 0 ? 0 : 1]++;
    return new Met(key, ns, bound, remote);
  }

  /**
   * The channels, those that share ids together, each before the ones its records mostly precede
   * (where most of a pair's durations are at or over 0: its median is), then by name.
   */
  private List<Integer> order() {
    int n = channels.size();
    int[] group = new int[n], before = new int[n];
    for (int i = 0; i < n; i++) group[i] = i;
    for (Map.Entry<Long, long[]> e : votes.entrySet()) {
      int a = (int) (e.getKey() >>> 32), b = (int) (long) e.getKey();
      long[] v = e.getValue();
      union(group, a, b);
      if (v[0] + v[1] == 0) continue; // no order from unbounded pairs: by name
      if (v[0] >= v[1]) before[a]++;
      else before[b]++;
    }
    List<Integer> order = new ArrayList<>();
    for (int i = 0; i < n; i++) order.add(i);
    order.sort(
        (x, y) -> {
          int gx = find(group, x), gy = find(group, y);
          if (gx != gy) return Integer.compare(gx, gy);
          if (before[x] != before[y]) return Integer.compare(before[y], before[x]);
          return channels.get(x).compareTo(channels.get(y));
        });
    return order;
  }

  /**
   * The hops, a row each: {from_channel, to_channel, count, remote_count, unbounded_count,
   * sampled_one_in, min_s, p50_s, p90_s, p99_s, max_s, mean_s, sum_s, bound_max_s} since the start,
   * and {window_s, last_count, last_p50_s, last_p90_s, last_p99_s, last_max_s} over the last
   * complete window (null where no duration was measured), the pipelines' channels in the order
   * their tuples pass them.
   */
  public synchronized List<Map<String, Object>> rows() {
    rotate();
    List<Integer> order = order();
    List<Map<String, Object>> rows = new ArrayList<>();
    for (int i = 0; i + 1 < order.size(); i++) {
      int a = order.get(i), b = order.get(i + 1);
      boolean negated = a > b;
      Pair pair = pairs.get(negated ? (long) b << 32 | a : (long) a << 32 | b);
      if (pair == null) continue;
      HopSketch s = pair.total, last = pair.last;
      Map<String, Object> r = new LinkedHashMap<>();
      r.put("from_channel", channels.get(a));
      r.put("to_channel", channels.get(b));
      r.put("count", s.count);
      r.put("remote_count", s.remote);
      r.put("unbounded_count", s.unbounded);
      r.put("sampled_one_in", Math.pow(2, Math.max(levels.get(a), levels.get(b))));
      r.put("min_s", seconds(s.count, negated ? -s.max : s.min));
      r.put("p50_s", seconds(s.count, s.quantile(0.5, negated)));
      r.put("p90_s", seconds(s.count, s.quantile(0.9, negated)));
      r.put("p99_s", seconds(s.count, s.quantile(0.99, negated)));
      r.put("max_s", seconds(s.count, negated ? -s.min : s.max));
      r.put("mean_s", seconds(s.count, (negated ? -s.sum : s.sum) / s.count));
      r.put("sum_s", (negated ? -s.sum : s.sum) / 1e9);
      r.put("bound_max_s", seconds(s.count, s.boundMax));
      r.put("window_s", windowNanos / 1e9);
      r.put("last_count", last.count);
      r.put("last_p50_s", seconds(last.count, last.quantile(0.5, negated)));
      r.put("last_p90_s", seconds(last.count, last.quantile(0.9, negated)));
      r.put("last_p99_s", seconds(last.count, last.quantile(0.99, negated)));
      r.put("last_max_s", seconds(last.count, negated ? -last.min : last.max));
      rows.add(r);
    }
    return rows;
  }

  /**
   * {samples received, ids evicted before their other records came, records of an id beyond PER_ID,
   * samples or pairs left out beyond CHANNELS, PAIRS or PER_MESSAGE}.
   */
  public synchronized long[] counts() {
    return new long[] {samples, evicted, repeated, leftOut};
  }

  private static Double seconds(long count, double ns) {
    return count == 0 ? null : ns / 1e9;
  }

  private static int find(int[] group, int i) {
    while (group[i] != i) i = group[i] = group[group[i]];
    return i;
  }

  private static void union(int[] group, int a, int b) {
    group[find(group, a)] = find(group, b);
  }
}
