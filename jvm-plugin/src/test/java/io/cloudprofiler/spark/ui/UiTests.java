package io.cloudprofiler.spark.ui;

import static io.cloudprofiler.spark.JvmTests.check;
import static io.cloudprofiler.spark.JvmTests.equal;

/** Tests of the Cloudprofiler tab's figures on known answers. */
public final class UiTests {
  private UiTests() {}

  private static LiveStages.Task task(
      long id, long durationMs, long gcMs, long fetchMs, long delayMs) {
    return new LiveStages.Task(id, (int) id, "1", "host", durationMs, gcMs, fetchMs, delayMs);
  }

  /**
   * A stage of 10,000 tasks of 1..10,000 ms: a sample of 4,096 of them, whose median lies near the
   * true 5,000 ms and whose stragglers (over 1.5 x the median), scaled to the stage, near the true
   * count; the slowest tasks kept exactly.
   */
  public static void testALargeStageIsSampledUniformlyAndItsStragglersEstimated() {
    LiveStages.Stage stage = new LiveStages.Stage(3, 0, "a stage", 0);
    for (long d = 1; d <= 10_000; d++) stage.add(task(d, d, 0, 0, 0));
    check(!stage.exact(), () -> "10,000 tasks: sampled");
    long[] sorted = stage.sorted();
    equal(LiveStages.SAMPLE, sorted.length);
    long median = LiveFigures.quantile(sorted, 0.5);
    check(Math.abs(median - 5_000) < 250, () -> "median " + median);
    long stragglers = LiveFigures.stragglers(stage, sorted, median);
    long truth = 10_000 - (long) Math.floor(1.5 * median);
    check(Math.abs(stragglers - truth) < 250, () -> stragglers + " stragglers, truly " + truth);
    equal(10_000L, stage.slowest.get(0).durationMs());
    equal(9_998L, stage.slowest.get(2).durationMs());
  }

  /** A small stage: every duration, its median at its rank, its stragglers counted exactly. */
  public static void testASmallStageIsExact() {
    LiveStages.Stage stage = new LiveStages.Stage(1, 0, "a stage", 0);
    for (long d : new long[] {100, 100, 110, 120, 400}) stage.add(task(d, d, 0, 0, 0));
    long[] sorted = stage.sorted();
    check(stage.exact(), () -> "5 tasks: exact");
    equal(110L, LiveFigures.quantile(sorted, 0.5));
    equal(400L, LiveFigures.quantile(sorted, 0.9));
    equal(1L, LiveFigures.stragglers(stage, sorted, 110));
  }

  /**
   * The part of a task's time named: the largest of GC, fetch wait and scheduler delay, from 10%.
   */
  public static void testTheCauseIsTheLargestPartFromTenPercent() {
    equal("GC 40%", LiveFigures.cause(task(1, 1000, 400, 100, 0)));
    equal("waiting for shuffle blocks 25%", LiveFigures.cause(task(1, 1000, 50, 250, 100)));
    equal("", LiveFigures.cause(task(1, 1000, 90, 50, 20)));
  }
}
