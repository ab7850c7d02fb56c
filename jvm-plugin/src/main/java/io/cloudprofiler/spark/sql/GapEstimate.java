package io.cloudprofiler.spark.sql;

/**
 * The sum of a probe's gaps in one task, from the gaps it timed ({@link ProbeCounters}): the exact
 * ones summed, and the sampled ones (each timed with probability 1 / its weight, {@link GapSample})
 * standing for the rest through the rows each gap spans: the rows of the probe below that came in
 * it (one row, the probe's own, where none is below).
 *
 * <p>Why through the rows: a gap above a filter or a join spans as many rows below as the operator
 * dropped meanwhile, from one to thousands, and its time grows with them. Each sampled gap counted
 * 1 / its probability times (Horvitz-Thompson) made the estimate swing with how many long gaps the
 * sample happened to hold: a join over a shuffle's read of 6 M rows in a TPC-H query came out at
 * 1.97 s with a standard error of 1.07 s. The rows of every gap are known exactly (the probe below
 * counts them), so the sampled gaps give the time per row below, and the rows their sum does not
 * cover are counted at that rate (a ratio estimator): a gap's length in rows no longer moves the
 * estimate, only the time per row does, and the standard error comes from each gap's departure from
 * that rate. Gaps that span no row below (the gap after a probe's last row, where nothing came
 * after it) stand for themselves, 1 / their probability times, as before.
 */
final class GapEstimate {
  private long exactTicks;
  private long exactRows;
  private long gaps;

  /** The sampled gaps that spanned rows: their ticks and rows weighted, and the sums of squares. */
  private double ticks;

  private double rows;
  private double ticksSquares;
  private double rowsSquares;
  private double products;

  /** The sampled gaps that spanned no row: their weighted ticks and the variance of that sum. */
  private double emptyTicks;

  private double emptyVariance;

  /**
   * A timed gap of {@code ticks} that spanned {@code rows} rows, timed with probability 1 / weight.
   */
  void add(long ticks, long rows, int weight) {
    gaps++;
    if (weight == 1) {
      exactTicks += ticks;
      exactRows += rows;
      return;
    }
    double w = weight, v = w * (w - 1);
    if (rows == 0) {
      emptyTicks += w * ticks;
      emptyVariance += v * ticks * ticks;
      return;
    }
    this.ticks += w * ticks;
    this.rows += w * rows;
    ticksSquares += v * ticks * ticks;
    rowsSquares += v * (double) rows * rows;
    products += v * (double) ticks * rows;
  }

  /** The gaps timed. */
  long gaps() {
    return gaps;
  }

  /** The sum of all the gaps, whose rows were {@code allRows} in all. */
  double ticks(long allRows) {
    long others = allRows - exactRows; // the rows of the gaps the sampled ones stand for
    double sampled = rows > 0 && others > 0 ? ticks / rows * others : ticks;
    return exactTicks + emptyTicks + sampled;
  }

  /**
   * The standard error of {@link #ticks}: 0 where every gap was timed. Where the rows do not tell
   * (none sampled, or the books do not balance), each sampled gap stands for 1 / its probability
   * gaps, as each empty one does.
   */
  double error(long allRows) {
    long others = allRows - exactRows;
    double sampled = ticksSquares;
    if (rows > 0 && others > 0) {
      double rate = ticks / rows;
      sampled = Math.max(0, ticksSquares - 2 * rate * products + rate * rate * rowsSquares);
    }
    return Math.sqrt(sampled + emptyVariance);
  }
}
