package io.cloudprofiler.spark.sql;

import static io.cloudprofiler.spark.JvmTests.check;
import static io.cloudprofiler.spark.JvmTests.equal;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.JvmTests;
import java.io.FileInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;

/** Tests of the driver's operator figures and of a row's event time, on known answers. */
public final class SqlTests {
  private SqlTests() {}

  private static Map<String, Object> row(List<Map<String, Object>> rows, long probe) {
    return rows.stream().filter(r -> r.get("probe_id").equals(probe)).findFirst().orElseThrow();
  }

  /**
   * A filter (probe 2) over a scan (probe 1) in two tasks: the filter's own time is its time minus
   * the scan's in the same task, clipped at 0 in the task where sampling put the scan above it;
   * ticks become seconds at the given rate.
   */
  public static void testAnOperatorsOwnTimeIsItsTimeLessItsChildrensInTheSameTask() {
    LiveOperators live = new LiveOperators();
    live.placed(1, 2, "Range", 7L);
    live.placed(2, OperatorNodes.NO_PROBE, "Filter", 7L);
    live.taskEnded(Map.of(1L, new long[] {100, 30}, 2L, new long[] {25, 100}));
    live.taskEnded(Map.of(1L, new long[] {100, 50}, 2L, new long[] {25, 40}));
    List<Map<String, Object>> rows = live.rows(10.0);
    Map<String, Object> filter = row(rows, 2), range = row(rows, 1);
    equal(50L, filter.get("rows"));
    equal(2L, filter.get("tasks"));
    equal(14.0, filter.get("inclusive_s"));
    equal(7.0, filter.get("exclusive_s")); // (100 - 30) + max(0, 40 - 50), at 10 ticks a second
    equal(8.0, range.get("exclusive_s"));
    check(filter.get("parent_probe_id") == null, () -> "the filter has no parent");
    equal(2L, range.get("parent_probe_id"));
  }

  /** Only the latest EXECUTIONS executions are kept, newest first; unplaced probes are ignored. */
  public static void testOnlyTheLatestExecutionsAreKept() {
    LiveOperators live = new LiveOperators();
    for (long e = 0; e <= LiveOperators.EXECUTIONS; e++) {
      live.placed(100 + e, OperatorNodes.NO_PROBE, "Project", e);
      live.taskEnded(Map.of(100 + e, new long[] {1, 1}, 999L, new long[] {1, 1}));
    }
    List<Map<String, Object>> rows = live.rows(1.0);
    equal(LiveOperators.EXECUTIONS, rows.size());
    equal((long) LiveOperators.EXECUTIONS, rows.get(0).get("sql_execution_id"));
    check(rows.stream().noneMatch(r -> r.get("sql_execution_id").equals(0L)), () -> "0 kept");
  }

  /**
   * Over many seeds the gap sample times every one of the first gaps, then each gap with the
   * probability its weight states (also just past the change of rate, where a draw at the first
   * rate crosses it), so that the weighted sum of gaps of one tick estimates their count.
   */
  public static void testTheGapSampleTimesEachGapWithTheProbabilityItsWeightStates() {
    int seeds = 400;
    long rows = 100_000, boundary = GapSample.SPARSE_FROM;
    long[] timed = new long[4]; // [0, EXACT), [EXACT, boundary), [boundary, boundary + 4096), rest
    double estimates = 0;
    for (int seed = 1; seed <= seeds; seed++) {
      GapSample sample = new GapSample(seed * 0x9E3779B97F4A7C15L);
      for (long row = 0; row < rows; row += sample.skip(row)) {
        int region = row < GapSample.EXACT ? 0 : row < boundary ? 1 : row < boundary + 4096 ? 2 : 3;
        timed[region]++;
        estimates += GapSample.weight(row);
      }
    }
    equal((long) GapSample.EXACT * seeds, timed[0]);
    double[] expected = {
      0,
      (boundary - GapSample.EXACT) / (double) GapSample.SAMPLE_EVERY * seeds,
      4096.0 / GapSample.SPARSE_EVERY * seeds,
      (rows - boundary - 4096) / (double) GapSample.SPARSE_EVERY * seeds
    };
    for (int region = 1; region < 4; region++) {
      double ratio = timed[region] / expected[region];
      int r = region;
      check(Math.abs(ratio - 1) < 0.05, () -> "region " + r + ": timed " + ratio + " of expected");
    }
    double mean = estimates / seeds;
    check(Math.abs(mean / rows - 1) < 0.01, () -> "the estimate of " + rows + " gaps: " + mean);
  }

  /**
   * The sum of gaps that span from 1 to 1,000 rows below each, estimated from the gap sample: exact
   * in every draw where each gap's time is its rows' (a join's lookups: the rows a gap spans no
   * longer move the estimate), and where the time per row varies, centred on the sum, with a
   * standard error that states how far the draws lie from it.
   */
  public static void testGapsThatSpanManyRowsBelowAreEstimatedThroughTheirRows() {
    int gaps = 100_000, seeds = 300;
    long[] rows = new long[gaps];
    java.util.Random random = new java.util.Random(11);
    long allRows = 0;
    for (int i = 0; i < gaps; i++) {
      rows[i] = random.nextInt(50) == 0 ? 200 + random.nextInt(800) : 1 + random.nextInt(8);
      allRows += rows[i];
    }
    long[] noisy = new long[gaps];
    double truth = 0;
    for (int i = 0; i < gaps; i++) {
      noisy[i] = rows[i] * (40 + random.nextInt(20)) + random.nextInt(200);
      truth += noisy[i];
    }
    double total = truth, sum = 0, squares = 0, errors = 0, gapSquares = 0;
    for (int seed = 1; seed <= seeds; seed++) {
      GapEstimate proportional = new GapEstimate(), varied = new GapEstimate();
      double each = 0; // each sampled gap counted 1 / its probability times (Horvitz-Thompson)
      GapSample sample = new GapSample(seed * 0x9E3779B97F4A7C15L);
      for (long gap = 0; gap < gaps; gap += sample.skip(gap)) {
        int i = (int) gap;
        proportional.add(50 * rows[i], rows[i], GapSample.weight(gap));
        varied.add(noisy[i], rows[i], GapSample.weight(gap));
        each += (double) noisy[i] * GapSample.weight(gap);
      }
      long all = allRows;
      check(
          Math.abs(proportional.ticks(all) - 50.0 * all) < 1e-6 * all
              && proportional.error(all) < 1e-3 * all,
          () -> "proportional gaps: " + proportional.ticks(all) + " +- " + proportional.error(all));
      double off = varied.ticks(all) - total;
      sum += off;
      squares += off * off;
      errors += varied.error(all);
      gapSquares += (each - total) * (each - total);
    }
    double bias = sum / seeds / total, rms = Math.sqrt(squares / seeds) / total;
    double stated = errors / seeds / total, gapsRms = Math.sqrt(gapSquares / seeds) / total;
    String figures =
        "bias " + bias + ", rms " + rms + ", stated " + stated + ", gap by gap rms " + gapsRms;
    check(Math.abs(bias) < 0.02 && rms < gapsRms / 4, () -> figures);
    check(Math.abs(stated / rms - 1) < 0.3, () -> figures);
  }

  /**
   * The times of a TPC-H q01 task's chain as the probes estimated them (an aggregation, exact, over
   * a project, a filter and a scan; a stall counted many times at the filter and the scan), made to
   * agree: none above its parent's, none below the batches', the stalled ones given way to their
   * well-measured neighbours, errors no larger than before. A chain that agrees already keeps its
   * times, and probes that are not chains (an operator with two inputs in the pipeline) are left as
   * they are.
   */
  public static void testAPipelinesTimesAreMadeToAgreeAlongItsChains() {
    double[] estimate = {7.39e9, 4.08e9, 5.82e9, 5.08e9};
    double[] error = {0, 0.049e9, 2.25e9, 1.02e9};
    double[] before = error.clone();
    check(NestedTimes.settle(estimate, error, new int[] {-1, 0, 1, 2}, 3.9e9), () -> "chains");
    String figures =
        java.util.Arrays.toString(estimate) + " +- " + java.util.Arrays.toString(error);
    check(
        estimate[0] == 7.39e9 && estimate[1] >= estimate[2] && estimate[2] >= estimate[3],
        () -> figures);
    for (int i = 1; i < 4; i++) {
      int probe = i;
      check(
          Math.abs(estimate[i] - 4.08e9) < 0.01e9 && error[i] <= before[i],
          () -> figures + " " + probe);
    }
    check(error[2] < 0.1e9 && error[3] < 0.2e9, () -> figures);

    double[] agreeing = {10, 8, 3};
    double[] agreeingError = {0, 1, 1};
    NestedTimes.settle(agreeing, agreeingError, new int[] {-1, 0, 1}, 0);
    check(java.util.Arrays.equals(agreeing, new double[] {10, 8, 3}), () -> "agreeing times moved");

    double[] branching = {1, 5, 2};
    check(
        !NestedTimes.settle(branching, new double[] {1, 1, 1}, new int[] {-1, 0, 0}, 0),
        () -> "branch");
    check(
        java.util.Arrays.equals(branching, new double[] {1, 5, 2}), () -> "branching times moved");
  }

  /**
   * A chain of known times below an exact top (cheap operators over a costly scan, as most of a
   * pipeline is), estimated with noise of 3% and, one estimate in seven, a stall that it counts
   * with an error as large: made to agree, the times lie nearer the truth, with smaller errors, and
   * no more often beyond three of them from it than the estimates were beyond three of theirs.
   */
  public static void testAgreeingTimesLieNearerTheTruthWithinTheirErrors() {
    double[] truth = {10e6, 6e6, 5.95e6, 5.9e6, 5.85e6, 5.8e6};
    int[] above = {-1, 0, 1, 2, 3, 4};
    java.util.Random random = new java.util.Random(5);
    double rawSquares = 0, settledSquares = 0, rawErrors = 0, settledErrors = 0;
    int draws = 4000, rawMissed = 0, settledMissed = 0;
    for (int draw = 0; draw < draws; draw++) {
      double[] estimate = truth.clone();
      double[] error = new double[truth.length];
      for (int i = 1; i < truth.length; i++) {
        error[i] = 0.03 * truth[i];
        estimate[i] += error[i] * random.nextGaussian();
        if (random.nextInt(7) == 0) {
          double stall = (0.5 + 3.5 * random.nextDouble()) * 1e6;
          estimate[i] += stall;
          error[i] = Math.hypot(error[i], stall);
        }
      }
      for (int i = 1; i < truth.length; i++) {
        rawSquares += Math.pow(estimate[i] - truth[i], 2);
        rawErrors += error[i];
        if (Math.abs(estimate[i] - truth[i]) > 3 * error[i]) rawMissed++;
      }
      NestedTimes.settle(estimate, error, above, 1.5e6);
      for (int i = 1; i < truth.length; i++) {
        settledSquares += Math.pow(estimate[i] - truth[i], 2);
        settledErrors += error[i];
        if (Math.abs(estimate[i] - truth[i]) > 3 * error[i]) settledMissed++;
      }
    }
    double rms = Math.sqrt(settledSquares / rawSquares), errors = settledErrors / rawErrors;
    int missedRaw = rawMissed, missed = settledMissed;
    String figures =
        "rms x" + rms + ", errors x" + errors + ", beyond 3 errors " + missedRaw + " -> " + missed;
    check(rms < 0.6 && errors < 0.7 && missed <= missedRaw, () -> figures);
  }

  /**
   * A row's event time is logged at the TSC of that moment on this machine: now, less its age at
   * the TSC's rate. One further from now than the TSC's count (before the machine started), or any
   * long at all, is not logged and throws nothing.
   */
  public static void testARowsEventTimeIsLoggedAtTheTscOfThatMoment() throws Exception {
    Path folder = JvmTests.startLibrary("cp-event-time");
    double hz = CloudProfiler.tscHz();
    long before;
    long after;
    List<String> said;
    try {
      Instant now = Instant.now();
      long aSecondAgo = now.getEpochSecond() * 1_000_000L + now.getNano() / 1000 - 1_000_000L;
      before = CloudProfiler.tsc();
      SourceRows.logEventTime(7, aSecondAgo);
      after = CloudProfiler.tsc();
      said =
          JvmTests.warnings(
              SourceRows.class,
              () -> {
                for (long micros : new long[] {0, Long.MIN_VALUE, Long.MAX_VALUE})
                  SourceRows.logEventTime(8, micros);
                return null;
              });
    } finally {
      CloudProfiler.stop();
      SourceRows.forget();
    }
    List<long[]> records = new ArrayList<>();
    try (Stream<Path> files = Files.walk(folder);
        BufferAllocator allocator = new RootAllocator()) {
      for (Path file : files.toList()) {
        String name = file.getFileName().toString();
        if (!name.startsWith(SourceRows.CHANNEL_PREFIX + SourceRows.EVENT_TIME + ".")) continue;
        try (FileInputStream in = new FileInputStream(file.toFile());
            ArrowFileReader reader = new ArrowFileReader(in.getChannel(), allocator)) {
          VectorSchemaRoot root = reader.getVectorSchemaRoot();
          while (reader.loadNextBatch()) {
            BigIntVector ids = (BigIntVector) root.getVector("tuple_id");
            BigIntVector tscs = (BigIntVector) root.getVector("tsc");
            for (int i = 0; i < root.getRowCount(); i++)
              records.add(new long[] {ids.get(i), tscs.get(i)});
          }
        }
      }
    }
    equal(1, said.size()); // once, for the three
    check(said.get(0).contains("further than this machine's TSC count"), () -> "said " + said);
    equal(1, records.size());
    equal(7L, records.get(0)[0]);
    long at = records.get(0)[1];
    check(
        at >= before - Math.round(1.001 * hz) && at <= after - Math.round(0.999 * hz),
        () ->
            "logged at " + at + ", a second before " + before + "-" + after + " at " + hz + " Hz");
  }

  /**
   * The emissions of at most 16 clocks get a channel each in a JVM, whatever other source channels
   * it has; a further clock's are not logged, and one line says so, once.
   */
  public static void testEmissionsOfMoreThanSixteenClocksAreNotLoggedAndOneLineSaysSo()
      throws Exception {
    JvmTests.startLibrary("cp-clocks");
    try {
      SourceRows.logEventTime(1, 0); // an event-time channel beside: not a clock
      List<Long> channels = new ArrayList<>();
      List<String> said =
          JvmTests.warnings(
              SourceRows.class,
              () -> {
                for (int i = 0; i < SourceRows.MAX_CLOCKS + 2; i++)
                  channels.add(
                      SourceRows.emittedChannel(new SourceRows.Clock("boot-" + i, "null")));
                return null;
              });
      for (int i = 0; i < SourceRows.MAX_CLOCKS; i++) {
        int clock = i;
        check(channels.get(i) != 0, () -> "clock " + clock + " has no channel");
      }
      equal(List.of(0L, 0L), channels.subList(SourceRows.MAX_CLOCKS, SourceRows.MAX_CLOCKS + 2));
      equal(channels.get(3), SourceRows.emittedChannel(new SourceRows.Clock("boot-3", "null")));
      equal(1, said.size());
      check(
          said.get(0).contains("more than 16 clocks") && said.get(0).contains("boot-16"),
          () -> "said " + said);
    } finally {
      CloudProfiler.stop();
      SourceRows.forget();
    }
  }
}
