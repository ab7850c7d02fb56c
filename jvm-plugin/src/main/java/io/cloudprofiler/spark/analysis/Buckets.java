package io.cloudprofiler.spark.analysis;

import java.io.Serializable;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * The log buckets of the analysis's sketches (python/cloudprofiler/analysis/sketch.py, whose note
 * gives the accuracy): a value's bucket as sketch.keys computes it, with its constants as Python
 * has them (sent as bits), and counts per bucket.
 */
final class Buckets implements Serializable {
  private static final long serialVersionUID = 1L;

  private final double minNs;
  private final double logGamma;

  Buckets(double minNs, double logGamma) {
    this.minNs = minNs;
    this.logGamma = logGamma;
  }

  /** sketch.keys of one value: 0 under MIN_NS in magnitude (and NaN), else +-(bucket + 1). */
  int key(double value) {
    double magnitude = Math.abs(value);
    if (!(magnitude >= minNs)) return 0;
    double k = Math.ceil(Math.log(magnitude / minNs) / logGamma) + 1;
    return (int) (Math.signum(value) * k);
  }

  /** Counts per bucket key, over the range of keys met (a few thousand at most). */
  static final class Counts {
    private long[] counts = new long[0];
    private int low; // counts[i] counts key low + i

    void add(int key) {
      int i = key - low;
      if (i < 0 || i >= counts.length) {
        grow(key);
        i = key - low;
      }
      counts[i]++;
    }

    private void grow(int key) {
      if (counts.length == 0) {
        low = key - 32;
        counts = new long[64];
        return;
      }
      int newLow = Math.min(low, key), newHigh = Math.max(low + counts.length - 1, key);
      int size = Math.max(2 * counts.length, newHigh - newLow + 1);
      newLow = Math.min(newLow, low - (size - counts.length) / 2); // room on both sides
      newLow = Math.max(newLow, newHigh - size + 1);
      long[] grown = new long[size];
      System.arraycopy(counts, 0, grown, low - newLow, counts.length);
      counts = grown;
      low = newLow;
    }

    /** A row of hops.py's SKETCH_SCHEMA per key counted, in key order. */
    void rows(int hop, boolean remote, byte measure, List<Row> out) {
      for (int i = 0; i < counts.length; i++) {
        if (counts[i] != 0)
          out.add(
              RowFactory.create(
                  hop, remote, measure, low + i, counts[i], null, null, null, null, null, null));
      }
    }
  }
}
