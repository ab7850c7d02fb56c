package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * What the Cloudprofiler tab shows, as the page's HTML and as JSON (the same figures): the stages
 * with their stragglers and where the slowest tasks' time went ({@link LiveStages}), the streaming
 * queries' latest micro-batches, and the command that writes the full report. Figures come from the
 * driver's listeners, never from re-reading the log files.
 */
public final class TabContent {
  static final int STAGES_SHOWN = 50;
  static final double CAUSE_SHARE = 0.10; // a part of a task's time worth naming, as the analysis's
  static final int REFRESH_MS = 5000;

  private final LiveStages stages;
  private final Supplier<List<List<Object[]>>> batches;
  private final List<String> batchColumns;
  private final Supplier<String> appFolder;

  /**
   * {@code batches}: the streaming queries' latest batches (rows of {@code batchColumns}, which
   * begin with query_id, run_id, query_name, batch_id); {@code appFolder}: the application's log
   * folder.
   */
  public TabContent(
      LiveStages stages,
      Supplier<List<List<Object[]>>> batches,
      List<String> batchColumns,
      Supplier<String> appFolder) {
    this.stages = stages;
    this.batches = batches;
    this.batchColumns = batchColumns;
    this.appFolder = appFolder;
  }

  /** The figures as a JSON tree: {app_folder, stages: [...], streaming: [...]}. */
  public JsonNode json() {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("app_folder", appFolder.get());
    List<Object> stageRows = new ArrayList<>();
    for (LiveStages.Stage s : shown()) stageRows.add(stageJson(s));
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
    return new ObjectMapper().valueToTree(out);
  }

  private List<LiveStages.Stage> shown() {
    List<LiveStages.Stage> all = stages.newestFirst();
    return all.subList(0, Math.min(STAGES_SHOWN, all.size()));
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

  /**
   * The tab's body: HTML inside Spark's page, refreshing itself every REFRESH_MS by a script that
   * carries {@code nonce}, the page's content security policy's (null where Spark sets none).
   */
  public String html(String nonce) {
    JsonNode figures = json();
    StringBuilder h = new StringBuilder();
    h.append("<div id=\"cloudprofiler\">");
    h.append("<p>Live figures of this application from the Cloudprofiler plugin, refreshed every ")
        .append(REFRESH_MS / 1000)
        .append(
            " s (also as JSON: <a href=\"json/\">json</a>). The full report of its logs: <code>")
        .append(escape("cloudprofiler report " + appFolder.get()))
        .append("</code>.</p>");
    h.append("<h4>Stages</h4><p>A straggler takes over ")
        .append(LiveStages.STRAGGLER_RATIO)
        .append(" x its stage's median (Spark's duration, launch to finish); a stage of more than ")
        .append(LiveStages.SAMPLE)
        .append(" tasks is counted on a uniform sample of them.</p>");
    h.append(
        "<table class=\"table table-bordered table-sm\" id=\"cloudprofiler-stages\"><thead><tr>");
    for (String c :
        List.of(
            "Stage",
            "Name",
            "Status",
            "Tasks",
            "Failed",
            "Median",
            "p90",
            "Max",
            "Stragglers",
            "Slowest task")) h.append("<th>").append(c).append("</th>");
    h.append("</tr></thead><tbody>");
    for (JsonNode s : figures.get("stages")) {
      JsonNode slowest = s.get("slowest").size() > 0 ? s.get("slowest").get(0) : null;
      h.append("<tr>")
          .append(td(s.get("stage_id").asText() + "." + s.get("stage_attempt").asText()))
          .append(td(s.get("name").asText()))
          .append(td(s.get("completed").asBoolean() ? "completed" : "running"))
          .append(td(s.get("tasks").asText()))
          .append(td(s.get("failed").asText()))
          .append(td(ms(s.get("median_ms"))))
          .append(td(ms(s.get("p90_ms"))))
          .append(td(ms(s.get("max_ms"))))
          .append(td(s.get("stragglers").asText() + (s.get("exact").asBoolean() ? "" : " (est.)")))
          .append(td(slowest == null ? "-" : slowestText(slowest)))
          .append("</tr>");
    }
    h.append("</tbody></table>");
    JsonNode streaming = figures.get("streaming");
    if (streaming.size() > 0) {
      h.append("<h4>Streaming queries</h4>");
      for (JsonNode q : streaming) {
        String name = q.get("query_name").isNull() ? "" : q.get("query_name").asText() + " ";
        h.append("<h5>")
            .append(escape(name + "(" + q.get("query_id").asText() + ")"))
            .append("</h5>");
        h.append(
            "<table class=\"table table-bordered table-sm cloudprofiler-batches\"><thead><tr>");
        for (String c :
            List.of(
                "Batch",
                "Input rows",
                "Batch time",
                "Jobs (addBatch)",
                "Planning",
                "Rows/s in",
                "Rows/s processed")) h.append("<th>").append(c).append("</th>");
        h.append("</tr></thead><tbody>");
        for (JsonNode b : q.get("batches"))
          h.append("<tr>")
              .append(td(b.get("batch_id").asText()))
              .append(td(b.get("num_input_rows").asText()))
              .append(td(ms(b.get("trigger_execution_ms"))))
              .append(td(ms(b.get("add_batch_ms"))))
              .append(td(ms(b.get("query_planning_ms"))))
              .append(td(rate(b.get("input_rows_per_second"))))
              .append(td(rate(b.get("processed_rows_per_second"))))
              .append("</tr>");
        h.append("</tbody></table>");
      }
    }
    h.append("</div><script")
        .append(nonce == null ? "" : " nonce=\"" + escape(nonce) + "\"")
        .append(">setTimeout(function () { location.reload(); }, ")
        .append(REFRESH_MS)
        .append(");</script>");
    return h.toString();
  }

  private static String slowestText(JsonNode t) {
    String cause = t.get("cause").asText();
    return "task "
        + t.get("task_id").asText()
        + " (partition "
        + t.get("partition").asText()
        + ", executor "
        + t.get("executor_id").asText()
        + "): "
        + ms(t.get("duration_ms"))
        + (cause.isEmpty() ? "" : ", " + cause);
  }

  private static String td(String text) {
    return "<td>" + escape(text) + "</td>";
  }

  private static String ms(JsonNode value) {
    if (value == null || value.isNull()) return "-";
    long ms = value.asLong();
    return ms >= 1000 ? String.format("%.2f s", ms / 1000.0) : ms + " ms";
  }

  private static String rate(JsonNode value) {
    return value == null || value.isNull() ? "-" : String.format("%,.0f", value.asDouble());
  }

  static String escape(String text) {
    return text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\"", "&quot;")
        .replace("'", "&#39;");
  }
}
