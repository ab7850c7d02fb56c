package io.cloudprofiler.spark.sql;

import static io.cloudprofiler.spark.JvmTests.check;
import static io.cloudprofiler.spark.JvmTests.equal;

import java.util.List;
import java.util.Map;

/** Tests of the driver's operator figures on known answers. */
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
}
