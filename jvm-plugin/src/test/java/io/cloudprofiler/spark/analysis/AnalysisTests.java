package io.cloudprofiler.spark.analysis;

import static io.cloudprofiler.spark.JvmTests.check;
import static io.cloudprofiler.spark.JvmTests.equal;

import org.apache.hadoop.fs.Path;

/**
 * Tests of the analysis's JVM readers: what the file descriptions list and the median they take.
 */
public final class AnalysisTests {
  private AnalysisTests() {}

  public static void testAFilesMedianIsExactUpToItsSampleAndClosePastIt() {
    FileDescriptions.Median exact = new FileDescriptions.Median();
    for (long v : new long[] {5, 1, 4, 2, 3, 6}) exact.add(v);
    equal(3.0, exact.value()); // rank ceil(6 / 2) of 1..6
    int n = 3 * FileDescriptions.MEDIAN_SAMPLE + 7;
    FileDescriptions.Median sampled = new FileDescriptions.Median();
    for (long i = 0; i < n; i++) sampled.add((i * 7919) % n); // every value once, out of order
    double median = sampled.value();
    check(Math.abs(median - n / 2.0) < n * 0.002, () -> "sampled median " + median + " of 0.." + n);
  }

  public static void testTheListingLeavesOutHiddenNamesAndSpellsPathsAsSpark() throws Exception {
    check(FileDescriptions.hidden("/x/.a.arrows.tmp"), () -> "a dot name is hidden");
    check(
        FileDescriptions.hidden("/_temporary/0/a.arrows"), () -> "an underscore folder is hidden");
    check(!FileDescriptions.hidden("/date=_1/a.arrows"), () -> "a partition column's value is not");
    check(!FileDescriptions.hidden("/vm-0/a.arrows"), () -> "a plain name is not");
    equal(
        "file:/tmp/a%20b/c.arrows", FileDescriptions.spelled(new Path("file:///tmp/a b/c.arrows")));
    equal(
        "hdfs://nn:8020/x/c.arrows",
        FileDescriptions.spelled(new Path("hdfs://nn:8020/x/c.arrows")));
  }

  public static void testASegmentIsTheOneABinarySearchFinds() {
    java.util.Random random = new java.util.Random(7);
    long[] other = new long[40];
    for (int i = 1; i < other.length; i++) // rounds at an uneven pace, with a long gap
    other[i] = other[i - 1] + 1 + random.nextInt(i == 20 ? 1_000_000 : 1_000);
    Anchors anchors =
        new Anchors(other, new double[other.length], new double[other.length], 0, other[39]);
    for (int k = 0; k < 20_000; k++) {
      long value = other[0] - 5_000 + (long) (random.nextDouble() * (other[39] + 10_000));
      int expected = 0; // np.searchsorted(other, value, "right") - 1, clipped to 0 .. 38
      while (expected + 1 < other.length && other[expected + 1] <= value) expected++;
      int wanted = Math.min(expected, other.length - 2);
      int found = anchors.segment(value);
      check(found == wanted, () -> value + " lies in segment " + wanted + ", not " + found);
    }
  }

  public static void testAPartitionsRecordsComeGroupedByTupleInChannelOrder() {
    java.util.Random random = new java.util.Random(11);
    HopSketches.Block block = new HopSketches.Block();
    java.util.List<HopSketches.Block> blocks = new java.util.ArrayList<>();
    int n = 3 * HopSketches.BLOCK_RECORDS + 17;
    for (int i = 0; i < n; i++) {
      if (block.n == HopSketches.BLOCK_RECORDS) {
        blocks.add(block);
        block = new HopSketches.Block();
      }
      long id = i % 3 == 0 ? random.nextLong() : random.nextInt(500) - 250; // wide and repeated
      block.add(id, i, 0, random.nextInt(5));
    }
    blocks.add(block.trimmed());
    HopSketches.Records records = new HopSketches.Records(blocks.iterator());
    int[] order = records.order();
    equal(n, order.length);
    check(
        java.util.Arrays.stream(order.clone()).sorted().distinct().count() == n,
        () -> "the order is a permutation of the records");
    java.util.Set<Long> ended = new java.util.HashSet<>();
    for (int k = 1; k < n; k++) {
      long id = records.id[order[k]], before = records.id[order[k - 1]];
      int at = k;
      if (id == before)
        check(
            records.channel[order[k]] >= records.channel[order[k - 1]],
            () -> "tuple " + id + "'s records out of channel order at " + at);
      else check(ended.add(before) && !ended.contains(id), () -> "tuple " + id + " comes twice");
    }
  }
}
