package io.cloudprofiler.spark.sql;

/**
 * Which gaps between an operator probe's rows it times in a task, and what each timed gap stands
 * for in the estimate of their sum ({@link ProbeCounters}). The first {@link #EXACT} gaps are all
 * timed; after them each gap is timed independently with probability 1 / {@link #SAMPLE_EVERY} up
 * to the {@link #SPARSE_FROM}-th, and 1 / {@link #SPARSE_EVERY} from there on, drawn by geometric
 * skips from a generator seeded by the probe and the partition, so that runs repeat and no period
 * in the data (a scan's batch of 4,096 rows) lines up with the sample.
 *
 * <p>Why two rates: a timed gap costs two TSC reads through JNI (27 ns each on the 2-core VM of
 * docs/operators.md) and a draw of the next skip (15 ns), about the cost of a whole row of a cheap
 * pipeline, so at 1 in 64 the timed gaps were most of what a probe cost per row. By the sparse rate
 * a task already has about 250 sampled gaps, enough for a standard error of a few percent of the
 * sum; past it a probe pays a quarter of that per row. Each timed gap counts 1 / its probability
 * (Horvitz-Thompson), so the estimate stays unbiased across the change of rate.
 */
final class GapSample {
  static final int EXACT = 64;
  static final int SAMPLE_EVERY = 64;

  /** The gap from which on the sample is sparser, and its rate: 1 in {@link #SPARSE_EVERY}. */
  static final long SPARSE_FROM = 16_384;

  static final int SPARSE_EVERY = 256;

  private static final double LOG_KEEP = Math.log1p(-1.0 / SAMPLE_EVERY);
  private static final double LOG_KEEP_SPARSE = Math.log1p(-1.0 / SPARSE_EVERY);

  private long random;

  /** {@code seed}: anything but 0 (xorshift's one fixed point). */
  GapSample(long seed) {
    random = seed == 0 ? 1 : seed;
  }

  /** The gaps that one timed gap {@code gap} (the gap the {@code gap}-th row ends) stands for. */
  static int weight(long gap) {
    return gap < EXACT ? 1 : gap < SPARSE_FROM ? SAMPLE_EVERY : SPARSE_EVERY;
  }

  /**
   * Rows from the timed row {@code row} to the next timed one: each later row's gap is timed with
   * its probability, independently. A draw at the first rate that passes {@link #SPARSE_FROM} means
   * that no gap before it is timed; the next one is then drawn at the sparse rate from there (the
   * draws have no memory).
   */
  long skip(long row) {
    if (row + 1 < EXACT) return 1;
    if (row >= SPARSE_FROM - 1) return geometric(LOG_KEEP_SPARSE);
    long skip = geometric(LOG_KEEP);
    if (row + skip < SPARSE_FROM) return skip;
    return SPARSE_FROM - 1 - row + geometric(LOG_KEEP_SPARSE);
  }

  /** P(k) = p (1 - p)^(k - 1), k >= 1, where {@code logKeep} = log(1 - p). */
  private long geometric(double logKeep) {
    random ^= random << 13; // xorshift64
    random ^= random >>> 7;
    random ^= random << 17;
    double u = ((random >>> 11) + 0.5) / (1L << 53);
    return 1 + (long) Math.floor(Math.log(u) / logKeep);
  }
}
