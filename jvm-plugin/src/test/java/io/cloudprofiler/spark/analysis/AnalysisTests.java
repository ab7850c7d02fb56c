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
}
