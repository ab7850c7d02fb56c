package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.cloudprofiler.spark.Messages;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The Cloudprofiler tab's figures of the running application, from the driver's listeners and the
 * executors' messages (never from re-reading the log files): the stages with their stragglers and
 * where the slowest tasks' time went ({@link LiveStages}), the streaming queries' latest
 * micro-batches, the operators of the latest SQL executions (where operator timing is on), each
 * executor's records logged and dropped, in all and per channel ({@link LiveExecutors}), the
 * calibration's quality per pair of TSC domains, the latency between trace points ({@link
 * LiveHops}), and the application's log folder. The tab, its JSON, the History Server and the
 * metrics show these.
 */
public final class LiveFigures implements Supplier<JsonNode> {
  static final int STAGES_SHOWN = 50;
  static final double CAUSE_SHARE = 0.10; // a part of a task's time worth naming, as the analysis's
  static final int CHANNEL_ROWS = 2000;

  private final LiveStages stages;
  private final LiveExecutors executors;
  private final Supplier<List<List<Object[]>>> batches;
  private final Supplier<List<Map<String, Object>>> operators;
  private final Supplier<List<Map<String, Object>>> calibration;
  private final LiveHops hops;
  private final TabWork work;
  private final List<String> batchColumns;
  private final Supplier<String> appFolder;

  /**
   * {@code batches}: the streaming queries' latest batches (rows of {@code batchColumns}, which
   * begin with query_id, run_id, query_name, batch_id); {@code operators}: the operators of the
   * latest SQL executions, newest first, as rows {sql_execution_id, probe_id, parent_probe_id,
   * operator, tasks, rows, inclusive_s, exclusive_s}; {@code calibration}: per pair of TSC domains
   * its calibration's quality (as {@code CalibrationCoordinator.quality} gives it); {@code hops}:
   * the latency between trace points; {@code work}: the driver's time on the tab's work, the
   * figures' own counted there; {@code appFolder}: the application's log folder.
   */
  public LiveFigures(
      LiveStages stages,
      LiveExecutors executors,
      Supplier<List<List<Object[]>>> batches,
      List<String> batchColumns,
      Supplier<List<Map<String, Object>>> operators,
      Supplier<List<Map<String, Object>>> calibration,
      LiveHops hops,
      TabWork work,
      Supplier<String> appFolder) {
    this.stages = stages;
    this.executors = executors;
    this.batches = batches;
    this.batchColumns = batchColumns;
    this.operators = operators;
    this.calibration = calibration;
    this.hops = hops;
    this.work = work;
    this.appFolder = appFolder;
  }

  /**
   * The figures now, as a JSON tree: {app_folder, stages: [...], streaming: [...], operators:
   * [...], executors: [...], executors_left_out, executors_removed: [...], executors_removed_count,
   * lost_collected: [...], channels: [...], channels_left_out, calibration: [...], hops: [...],
   * hop_samples: {received, evicted, repeated, left_out}, tab_work: {driver_s: {listeners,
   * messages, figures}, executors_s: {messages, scan}, executors_scanned_records}}: the tab's own
   * work so far, in seconds ({@link TabWork}; the executors' as their latest messages said).
   */
  @Override
  public JsonNode get() {
    long began = System.nanoTime();
    try {
      return figures();
    } finally {
      work.since(TabWork.Part.FIGURES, began);
    }
  }

  private JsonNode figures() {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("app_folder", appFolder.get());
    List<Object> stageRows = new ArrayList<>();
    for (LiveStages.Stage s : stages.newestFirst(STAGES_SHOWN)) stageRows.add(stageJson(s));
    out.put("stages", stageRows);
    List<Object> queries = new ArrayList<>();
    for (List<Object[]> query : batches.get()) {
      Map<String, Object> q = new LinkedHashMap<>();
      q.put("query_id", query.get(0)[0]);
      q.put("query_name", query.get(0)[2]);
      List<Object> rows = new ArrayList<>();
      for (Object[] row : query) {
        Map<String, Object> r = new LinkedHashMap<>();
        for (int i = 3; i < batchColumns.size(); i++) r.put(batchColumns.get(i), row[i]);
        rows.add(r);
      }
      q.put("batches", rows);
      queries.add(q);
    }
    out.put("streaming", queries);
    out.put("operators", operators.get());
    List<Object> executorRows = new ArrayList<>();
    for (LiveExecutors.Counters c : executors.all()) {
      Map<String, Object> e = new LinkedHashMap<>();
      e.put("executor_id", c.executorId());
      e.put("records_logged", c.logged());
      e.put("records_dropped", c.dropped());
      e.put("bytes_written", c.bytes());
      executorRows.add(e);
    }
    out.put("executors", executorRows);
    out.put("executors_left_out", executors.leftOut());
    List<Object> removedRows = new ArrayList<>();
    for (LiveExecutors.Removed r : executors.removed()) {
      Map<String, Object> e = new LinkedHashMap<>();
      e.put("executor_id", r.executorId());
      e.put("time_ms", r.timeMs());
      e.put("reason", r.reason());
      removedRows.add(e);
    }
    out.put("executors_removed", removedRows);
    out.put("executors_removed_count", executors.removedCount());
    List<Object> lostRows = new ArrayList<>();
    for (LiveExecutors.LostCollected l : executors.lostCollected()) {
      Map<String, Object> e = new LinkedHashMap<>();
      e.put("collected_by", l.by());
      e.put("pid", l.pid());
      e.put("folder", l.folder());
      e.put("files", l.files());
      e.put("cut_files", l.cut());
      lostRows.add(e);
    }
    out.put("lost_collected", lostRows);
    channels(out, executors.all());
    out.put("calibration", calibration.get());
    out.put("hops", hops.rows());
    long[] counts = hops.counts();
    out.put(
        "hop_samples",
        Map.of(
            "received",
            counts[0],
            "evicted",
            counts[1],
            "repeated",
            counts[2],
            "left_out",
            counts[3]));
    double[] executorWork = executors.work();
    out.put(
        "tab_work",
        Map.of(
            "driver_s",
            work.seconds(),
            "executors_s",
            Map.of("messages", executorWork[0], "scan", executorWork[1]),
            "executors_scanned_records",
            (long) executorWork[2]));
    return new ObjectMapper().valueToTree(out);
  }

  /**
   * Into {@code out}: "channels", a row per executor and channel (the {@value #CHANNEL_ROWS} with
   * the most records per second over their executor's last interval), and "channels_left_out",
   * those beyond them or that executors did not send.
   */
  private static void channels(Map<String, Object> out, List<LiveExecutors.Counters> executors) {
    List<Map<String, Object>> rows = new ArrayList<>();
    long leftOut = 0;
    for (LiveExecutors.Counters c : executors) {
      leftOut += c.channelsLeftOut();
      for (Messages.ChannelCount ch : c.channels()) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("executor_id", c.executorId());
        r.put("channel", ch.channel());
        r.put("records_per_second", ch.recordsPerSecond());
        r.put("drops_per_second", ch.dropsPerSecond());
        r.put("interval", c.interval());
        r.put("interval_s", c.intervalSeconds());
        r.put("records_logged", ch.recordsLogged());
        r.put("records_dropped", ch.recordsDropped());
        rows.add(r);
      }
    }
    rows.sort(
        Comparator.comparingDouble((Map<String, Object> r) -> (Double) r.get("records_per_second"))
            .reversed());
    if (rows.size() > CHANNEL_ROWS) {
      leftOut += rows.size() - CHANNEL_ROWS;
      rows = rows.subList(0, CHANNEL_ROWS);
    }
    out.put("channels", rows);
    out.put("channels_left_out", leftOut);
  }

  /** The stragglers of the {@value #STAGES_SHOWN} newest stage attempts, as the tab counts them. */
  public long stragglers() {
    long n = 0;
    for (LiveStages.Stage s : stages.newestFirst(STAGES_SHOWN)) {
      long[] sorted = s.sorted();
      n += stragglers(s, sorted, quantile(sorted, 0.5));
    }
    return n;
  }

  private static Map<String, Object> stageJson(LiveStages.Stage s) {
    long[] sorted = s.sorted();
    long median = quantile(sorted, 0.5);
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("stage_id", s.id);
    r.put("stage_attempt", s.attempt);
    r.put("name", s.name);
    r.put("completed", s.completed);
    r.put("tasks", s.tasks);
    r.put("failed", s.failed);
    r.put("exact", s.exact());
    r.put("median_ms", sorted.length == 0 ? null : median);
    r.put("p90_ms", sorted.length == 0 ? null : quantile(sorted, 0.9));
    r.put("p99_ms", sorted.length == 0 ? null : quantile(sorted, 0.99));
    r.put("max_ms", sorted.length == 0 ? null : sorted[sorted.length - 1]);
    r.put("stragglers", stragglers(s, sorted, median));
    List<Object> slowest = new ArrayList<>();
    for (LiveStages.Task t : s.slowest) {
      Map<String, Object> task = new LinkedHashMap<>();
      task.put("task_id", t.taskId());
      task.put("partition", t.partition());
      task.put("executor_id", t.executor());
      task.put("host", t.host());
      task.put("duration_ms", t.durationMs());
      task.put("gc_ms", t.gcMs());
      task.put("fetch_wait_ms", t.fetchWaitMs());
      task.put("scheduler_delay_ms", t.schedulerDelayMs());
      task.put("cause", cause(t));
      slowest.add(task);
    }
    r.put("slowest", slowest);
    return r;
  }

  /** The value at rank ceil(q n) of sorted values (the inverted CDF, as the analysis's). */
  static long quantile(long[] sorted, double q) {
    if (sorted.length == 0) return 0;
    int rank = (int) Math.ceil(q * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }

  /**
   * Successful attempts over STRAGGLER_RATIO x the median: counted in the sample, and scaled to the
   * stage's attempts where the sample holds only some of them.
   */
  static long stragglers(LiveStages.Stage s, long[] sorted, long median) {
    if (sorted.length == 0 || median <= 0) return 0;
    long over = 0;
    for (long d : sorted) if (d > LiveStages.STRAGGLER_RATIO * median) over++;
    long successful = s.tasks - s.failed;
    return s.exact() ? over : Math.round((double) over * successful / sorted.length);
  }

  /** Where a task's time went in Spark's metrics, its largest part of CAUSE_SHARE or more. */
  static String cause(LiveStages.Task t) {
    if (t.durationMs() <= 0) return "";
    String[] names = {"GC", "waiting for shuffle blocks", "scheduler delay"};
    long[] parts = {t.gcMs(), t.fetchWaitMs(), t.schedulerDelayMs()};
    int top = 0;
    for (int i = 1; i < parts.length; i++) if (parts[i] > parts[top]) top = i;
    double share = (double) parts[top] / t.durationMs();
    return share >= CAUSE_SHARE ? String.format("%s %.0f%%", names[top], share * 100) : "";
  }
}
