package io.cloudprofiler.spark.analysis;

import static io.cloudprofiler.spark.analysis.PlanJson.bits;
import static io.cloudprofiler.spark.analysis.PlanJson.required;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import scala.Tuple2;

/**
 * The sketch rows of every hop of a pipeline of trace points, counted in the executors' JVMs: the
 * analysis's hops.py pass (its module note says why one pass) without a record going to a Python
 * worker. The records go to their tuple id's partition in blocks of a few thousand (a shuffle of
 * blocks, not of rows: Spark's per-row shuffle and sort cost more than the pairing); each partition
 * sorts its records by tuple id and channel position and pairs each tuple's records hop by hop
 * (every pairing of a repeated id, as an inner join), takes the durations with their bounds ({@link
 * Durations}) and counts them in log buckets ({@link Buckets}). A partition yields a few hundred
 * rows of hops.py's SKETCH_SCHEMA whatever its records.
 */
public final class HopSketches {
  private HopSketches() {}

  /** hops.py's measures: a latency bucket, a bound's bucket, a hop's totals. */
  static final byte LATENCY = 0, ERROR = 1, TOTALS = 2;

  /** Records a map task sends to one partition at a time. */
  static final int BLOCK_RECORDS = 4096;

  /**
   * The sketch rows of {@code records} (rows of tuple_id long, tsc long, domain_id int, channel_id
   * int) in {@code partitions} partitions by tuple id, under {@code plan}: {"durations":
   * Timebase.jvm_durations, "hops": [[hop, from position, to position]], "channels": names by
   * position, "max_pairs": pairings of one hop a partition may hold, "min_ns", "log_gamma": the
   * sketch's constants as bits}.
   */
  public static JavaRDD<Row> sketch(RDD<InternalRow> records, int partitions, String plan) {
    Partition counting = new Partition(PlanJson.parse(plan, "the hops' plan"));
    if (partitions < 1) throw new IllegalArgumentException("partitions " + partitions + " < 1");
    return records
        .toJavaRDD()
        .mapPartitionsToPair(rows -> Block.split(rows, partitions, counting.channels.length))
        .partitionBy(new HashPartitioner(partitions))
        .values()
        .mapPartitions(counting);
  }

  /** Records bound for one partition: columns of tuple id, TSC, domain and channel position. */
  static final class Block implements Serializable {
    private static final long serialVersionUID = 1L;

    int n;
    long[] id = new long[BLOCK_RECORDS];
    long[] tsc = new long[BLOCK_RECORDS];
    int[] domain = new int[BLOCK_RECORDS];
    int[] channel = new int[BLOCK_RECORDS];

    /** A map task's records as blocks keyed by their partition (the tuple id's hash). */
    static Iterator<Tuple2<Integer, Block>> split(
        Iterator<InternalRow> rows, int partitions, int channels) {
      Block[] open = new Block[partitions];
      List<Tuple2<Integer, Block>> full = new ArrayList<>();
      return new Iterator<>() {
        int flushed = -1; // the open blocks left to hand out once the rows are done

        @Override
        public boolean hasNext() {
          while (full.isEmpty() && rows.hasNext()) {
            InternalRow row = rows.next();
            int c = row.isNullAt(3) ? -1 : row.getInt(3);
            if (c < 0 || c >= channels)
              throw new IllegalArgumentException(
                  "a record's channel position " + c + " is not one of the hops' 0.." + channels);
            long id = row.getLong(0);
            int p =
                (int) (((mix(id) >>> 32) * partitions) >>> 32); // uniform in 0 .. partitions - 1
            Block b = open[p] == null ? (open[p] = new Block()) : open[p];
            b.add(id, row.getLong(1), row.getInt(2), c);
            if (b.n == BLOCK_RECORDS) {
              full.add(new Tuple2<>(p, b));
              open[p] = null;
            }
          }
          if (full.isEmpty() && !rows.hasNext()) {
            while (++flushed < partitions && open[flushed] == null) {}
            if (flushed < partitions) full.add(new Tuple2<>(flushed, open[flushed].trimmed()));
          }
          return !full.isEmpty();
        }

        @Override
        public Tuple2<Integer, Block> next() {
          if (!hasNext()) throw new java.util.NoSuchElementException();
          return full.remove(full.size() - 1);
        }
      };
    }

    void add(long i, long t, int d, int c) {
      id[n] = i;
      tsc[n] = t;
      domain[n] = d;
      channel[n] = c;
      n++;
    }

    Block trimmed() {
      id = Arrays.copyOf(id, n);
      tsc = Arrays.copyOf(tsc, n);
      domain = Arrays.copyOf(domain, n);
      channel = Arrays.copyOf(channel, n);
      return this;
    }

    /** splitmix64's finalizer: tuple ids that differ in a few bits spread over the partitions. */
    static long mix(long z) {
      z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
      z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
      return z ^ (z >>> 31);
    }
  }

  /** A partition's records, in columns, put in order of tuple id and channel position. */
  static final class Records {
    int n;
    long[] id, tsc;
    int[] domain, channel;

    Records(Iterator<Block> blocks) {
      List<Block> list = new ArrayList<>();
      while (blocks.hasNext()) {
        Block b = blocks.next();
        list.add(b);
        n = Math.addExact(n, b.n);
      }
      id = new long[n];
      tsc = new long[n];
      domain = new int[n];
      channel = new int[n];
      int at = 0;
      for (Block b : list) {
        System.arraycopy(b.id, 0, id, at, b.n);
        System.arraycopy(b.tsc, 0, tsc, at, b.n);
        System.arraycopy(b.domain, 0, domain, at, b.n);
        System.arraycopy(b.channel, 0, channel, at, b.n);
        at += b.n;
      }
    }

    /**
     * The order of the records by tuple id, then channel position: least significant digit first,
     * stable (the position, then the id 8 bits at a time, a digit every record shares skipped),
     * each id moved with its record's number so that every pass reads in sequence. The ids' order
     * is their bits' as unsigned numbers: any order groups a tuple's records.
     */
    int[] order() {
      int channels = 0;
      for (int i = 0; i < n; i++) channels = Math.max(channels, channel[i] + 1);
      int[] count = new int[Math.max(channels, 256) + 1];
      int[] perm = new int[n], sparePerm = new int[n];
      long[] keys = new long[n], spareKeys = new long[n];
      for (int i = 0; i < n; i++) count[channel[i] + 1]++;
      for (int c = 0; c < channels; c++) count[c + 1] += count[c];
      for (int i = 0; i < n; i++) {
        int at = count[channel[i]]++;
        perm[at] = i;
        keys[at] = id[i];
      }
      for (int shift = 0; shift < 64; shift += 8) {
        Arrays.fill(count, 0);
        for (int i = 0; i < n; i++) count[(int) (keys[i] >>> shift) & 0xff]++;
        boolean shared = false;
        for (int d = 0; d < 256; d++) shared |= count[d] == n;
        if (shared) continue;
        for (int d = 0, sum = 0; d < 256; d++) {
          int c = count[d];
          count[d] = sum;
          sum += c;
        }
        for (int i = 0; i < n; i++) {
          int at = count[(int) (keys[i] >>> shift) & 0xff]++;
          sparePerm[at] = perm[i];
          spareKeys[at] = keys[i];
        }
        int[] p = perm;
        perm = sparePerm;
        sparePerm = p;
        long[] k = keys;
        keys = spareKeys;
        spareKeys = k;
      }
      return perm;
    }
  }

  private static final class Partition implements FlatMapFunction<Iterator<Block>, Row> {
    private static final long serialVersionUID = 1L;

    private final Durations durations;
    private final int[][] hops; // hop, from position, to position
    private final String[] channels;
    private final long maxPairs;
    private final Buckets buckets;

    Partition(JsonNode plan) {
      durations = Durations.parse(required(plan, "durations"));
      JsonNode names = required(plan, "channels");
      channels = new String[names.size()];
      for (int i = 0; i < channels.length; i++) channels[i] = names.get(i).asText();
      JsonNode list = required(plan, "hops");
      hops = new int[list.size()][];
      for (int i = 0; i < hops.length; i++) {
        JsonNode h = list.get(i);
        hops[i] = new int[] {h.get(0).asInt(), h.get(1).asInt(), h.get(2).asInt()};
        for (int p = 1; p < 3; p++) {
          if (hops[i][p] < 0 || hops[i][p] >= channels.length)
            throw new IllegalArgumentException(
                "hop " + h + " names a position outside the " + channels.length + " channels");
        }
      }
      maxPairs = required(plan, "max_pairs").asLong();
      buckets = new Buckets(bits(required(plan, "min_ns")), bits(required(plan, "log_gamma")));
    }

    @Override
    public Iterator<Row> call(Iterator<Block> blocks) {
      Records records = new Records(blocks);
      if (records.n == 0) return Collections.emptyIterator();
      int[] order = records.order();
      Tuple tuple = new Tuple(channels.length);
      Sides[] sides = new Sides[hops.length];
      for (int h = 0; h < hops.length; h++) sides[h] = new Sides();
      for (int k = 0; k < order.length; k++) {
        int r = order[k];
        long id = records.id[r];
        if (k > 0 && id != tuple.id) pair(tuple, sides);
        if (k == 0 || id != tuple.id) tuple.start(id);
        tuple.add(records.tsc[r], records.domain[r], records.channel[r]);
      }
      pair(tuple, sides);
      List<Row> out = new ArrayList<>();
      for (int h = 0; h < hops.length; h++) {
        for (int remote = 0; remote < 2; remote++)
          sides[h].of(remote).rows(hops[h][0], remote, out);
      }
      return out.iterator();
    }

    /** Every hop's pairings of one tuple's records, counted. */
    private void pair(Tuple tuple, Sides[] sides) {
      tuple.index();
      for (int h = 0; h < hops.length; h++) {
        int a = hops[h][1], b = hops[h][2];
        int aFrom = tuple.offsets[a], aTo = tuple.offsets[a + 1];
        int bFrom = tuple.offsets[b], bTo = tuple.offsets[b + 1];
        if (aFrom == aTo || bFrom == bTo) continue;
        Sides side = sides[h];
        side.pairs += (long) (aTo - aFrom) * (bTo - bFrom);
        if (side.pairs > maxPairs)
          throw new IllegalArgumentException(
              String.format(
                  "hop %s -> %s: more than %,d pairings in one partition (each record of tuple id"
                      + " %d pairs with %,d); ids that repeat this often name no tuple each, so the"
                      + " hop has no latency",
                  channels[a], channels[b], maxPairs, tuple.id, aTo - aFrom));
        for (int j = bFrom; j < bTo; j++) {
          for (int i = aFrom; i < aTo; i++) {
            int startDomain = tuple.domain[i], endDomain = tuple.domain[j];
            durations.of(startDomain, tuple.tsc[i], endDomain, tuple.tsc[j]);
            side.of(startDomain != endDomain ? 1 : 0).add(durations, buckets);
          }
        }
      }
    }
  }

  /** One tuple's records (its channel positions in order) and where each position's begin. */
  private static final class Tuple {
    long id;
    int n;
    long[] tsc = new long[8];
    int[] domain = new int[8];
    int[] position = new int[8];
    final int[] offsets; // position p's records are offsets[p] .. offsets[p + 1] - 1

    Tuple(int channels) {
      offsets = new int[channels + 1];
    }

    void start(long id) {
      this.id = id;
      n = 0;
    }

    void add(long t, int d, int p) {
      if (n == tsc.length) {
        tsc = Arrays.copyOf(tsc, 2 * n);
        domain = Arrays.copyOf(domain, 2 * n);
        position = Arrays.copyOf(position, 2 * n);
      }
      tsc[n] = t;
      domain[n] = d;
      position[n] = p;
      n++;
    }

    void index() {
      int i = 0;
      for (int p = 0; p < offsets.length; p++) {
        while (i < n && position[i] < p) i++;
        offsets[p] = i;
      }
    }
  }

  /** A hop's counts of local and remote pairings (start and end in one domain, or in two). */
  private static final class Sides {
    final Side local = new Side(), remote = new Side();
    long pairs;

    Side of(int isRemote) {
      return isRemote == 1 ? remote : local;
    }
  }

  /** hops.py's _hop_rows of one hop's local or remote durations in a partition. */
  private static final class Side {
    long count, unbounded, exact;
    double min = Double.POSITIVE_INFINITY, max = Double.NEGATIVE_INFINITY, sum;
    double errMax = Double.NEGATIVE_INFINITY;
    final Buckets.Counts latency = new Buckets.Counts(), error = new Buckets.Counts();

    void add(Durations d, Buckets buckets) {
      if (d.unbounded) {
        unbounded++;
        return;
      }
      double v = d.durationNs, e = d.errNs;
      min = Math.min(min, v);
      max = Math.max(max, v);
      errMax = Math.max(errMax, e);
      count++;
      if (e == 0) exact++;
      sum += v;
      latency.add(buckets.key(v));
      error.add(buckets.key(e));
    }

    void rows(int hop, int isRemote, List<Row> out) {
      if (count + unbounded == 0) return;
      boolean remote = isRemote == 1;
      Double low = count > 0 ? min : null, high = count > 0 ? max : null;
      Double errHigh = count > 0 ? errMax : null;
      out.add(
          RowFactory.create(
              hop, remote, TOTALS, 0, count, unbounded, exact, low, high, sum, errHigh));
      latency.rows(hop, remote, LATENCY, out);
      error.rows(hop, remote, ERROR, out);
    }
  }
}
