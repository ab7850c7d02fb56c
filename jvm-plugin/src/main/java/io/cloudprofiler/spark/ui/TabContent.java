package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.function.Supplier;

/**
 * What the Cloudprofiler tab shows, as the page's HTML and as JSON (the same figures): those of the
 * running application ({@link LiveFigures}) or, in the History Server, the last ones its event log
 * holds ({@link HistoryTabBase}).
 */
public final class TabContent {
  static final int REFRESH_MS = 5000;

  private final Supplier<JsonNode> figures;
  private final boolean live;

  /**
   * {@code figures}: as {@link LiveFigures} makes them; {@code live}: those of a running
   * application (the page refreshes itself), else the last ones of an ended application.
   */
  public TabContent(Supplier<JsonNode> figures, boolean live) {
    this.figures = figures;
    this.live = live;
  }

  /** The figures as a JSON tree: {app_folder, stages: [...], streaming: [...]}. */
  public JsonNode json() {
    return figures.get();
  }

  /**
   * The tab's body: HTML inside Spark's page; a live one refreshes itself every REFRESH_MS by a
   * script that carries {@code nonce}, the page's content security policy's (null where Spark sets
   * none).
   */
  public String html(String nonce) {
    JsonNode figures = json();
    StringBuilder h = new StringBuilder();
    h.append("<div id=\"cloudprofiler\">");
    h.append(
            live
                ? "<p>Live figures of this application from the Cloudprofiler plugin, refreshed"
                    + " every "
                    + REFRESH_MS / 1000
                    + " s"
                : "<p>The application has ended: its figures as the Cloudprofiler plugin last wrote"
                    + " them into its event log")
        .append(" (also as JSON: <a href=\"json/\">json</a>). The full report of its logs: <code>")
        .append(escape("cloudprofiler report " + figures.get("app_folder").asText()))
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
    h.append("</div>");
    if (live)
      h.append("<script")
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
