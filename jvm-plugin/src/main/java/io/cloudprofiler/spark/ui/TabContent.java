package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * What the Cloudprofiler tab shows, as the page's HTML and as JSON (the same figures): those of the
 * running application ({@link LiveFigures}) or, in the History Server, the last ones its event log
 * holds ({@link HistoryTabBase}). Figures from an event log are read as they come: a field missing
 * or of another type shows as "-", never as an error page.
 */
public final class TabContent {
  static final int REFRESH_MS = 5000;
  static final int EXECUTIONS_SHOWN = 10;
  static final int OPERATORS_SHOWN = 5;
  static final int CHANNELS_SHOWN = 100;

  private static final DateTimeFormatter WRITTEN =
      DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss").withZone(ZoneOffset.UTC);

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

  /**
   * The figures as a JSON tree ({@link LiveFigures#get}) with the findings drawn from them:
   * findings: [{level, text}].
   */
  public JsonNode json() {
    JsonNode got = figures.get();
    if (!(got instanceof ObjectNode object)) return got; // an event log's figures of another shape
    ObjectNode out = object.deepCopy(); // the History Server's are shared between requests
    ArrayNode findings = out.putArray("findings");
    for (TabFindings.Finding f : TabFindings.of(got))
      findings.addObject().put("level", f.level()).put("text", f.text());
    return out;
  }

  /** The application's folder, where its logs and its latest report lie. */
  String appFolder() {
    return figures.get().path("app_folder").asText();
  }

  /** The full report's link where the folder holds one, else how to make one. */
  private static String reportLink(String appFolder) {
    ReportDownload.Found found = ReportDownload.find(appFolder);
    if (found == null) return "The full report: " + escape(ReportDownload.howToMake(appFolder));
    String app = appFolder.substring(appFolder.lastIndexOf('/') + 1);
    return String.format(
        "The full report: <a id=\"cloudprofiler-report\" href=\"report\" download=\"%s\">"
            + "download</a> (made %s UTC, %.1f MB; a newer one replaces it).",
        escape("cloudprofiler-report-" + app + ".html"),
        WRITTEN.format(found.written()),
        found.bytes() / 1e6);
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
        .append(" (also as JSON: <a href=\"json/\">json</a>). ")
        .append(reportLink(figures.path("app_folder").asText()))
        .append("</p>");
    h.append("<h4>Findings</h4><ul id=\"cloudprofiler-findings\">");
    for (JsonNode f : figures.path("findings"))
      h.append("<li class=\"")
          .append(escape(f.path("level").asText()))
          .append("\">")
          .append(f.path("level").asText().equals("warning") ? "<strong>warning</strong>: " : "")
          .append(escape(f.path("text").asText()))
          .append("</li>");
    h.append("</ul>");
    h.append("<h4>Stages</h4><p>A straggler takes over ")
        .append(LiveStages.STRAGGLER_RATIO)
        .append(" x its stage's median (Spark's duration, launch to finish); a stage of more than ")
        .append(LiveStages.SAMPLE)
        .append(" tasks is counted on a uniform sample of them.</p>");
    tableHead(
        h,
        "",
        "cloudprofiler-stages",
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
            "Slowest task"));
    for (JsonNode s : figures.path("stages")) {
      JsonNode slowest = s.path("slowest").size() > 0 ? s.path("slowest").get(0) : null;
      h.append("<tr>")
          .append(td(stage(s)))
          .append(td(s.path("name").asText()))
          .append(td(s.path("completed").asBoolean() ? "completed" : "running"))
          .append(td(s.path("tasks").asText()))
          .append(td(s.path("failed").asText()))
          .append(td(ms(s.path("median_ms"))))
          .append(td(ms(s.path("p90_ms"))))
          .append(td(ms(s.path("max_ms"))))
          .append(
              td(s.path("stragglers").asText() + (s.path("exact").asBoolean() ? "" : " (est.)")))
          .append(td(slowest == null ? "-" : slowestText(slowest)))
          .append("</tr>");
    }
    h.append("</tbody></table>");
    JsonNode streaming = figures.path("streaming");
    if (streaming.size() > 0) {
      h.append("<h4>Streaming queries</h4>");
      for (JsonNode q : streaming) {
        String name = q.path("query_name").isNull() ? "" : q.path("query_name").asText() + " ";
        h.append("<h5>")
            .append(escape(name + "(" + q.path("query_id").asText() + ")"))
            .append("</h5>");
        tableHead(
            h,
            " cloudprofiler-batches",
            null,
            List.of(
                "Batch",
                "Input rows",
                "Batch time",
                "Jobs (addBatch)",
                "Planning",
                "Rows/s in",
                "Rows/s processed"));
        for (JsonNode b : q.path("batches"))
          h.append("<tr>")
              .append(td(b.path("batch_id").asText()))
              .append(td(b.path("num_input_rows").asText()))
              .append(td(ms(b.path("trigger_execution_ms"))))
              .append(td(ms(b.path("add_batch_ms"))))
              .append(td(ms(b.path("query_planning_ms"))))
              .append(td(rate(b.path("input_rows_per_second"))))
              .append(td(rate(b.path("processed_rows_per_second"))))
              .append("</tr>");
        h.append("</tbody></table>");
      }
    }
    operators(h, figures);
    executors(h, figures);
    channels(h, figures);
    calibration(h, figures);
    hops(h, figures);
    tabWork(h, figures.path("tab_work"));
    h.append("</div>");
    if (live)
      h.append("<script")
          .append(nonce == null ? "" : " nonce=\"" + escape(nonce) + "\"")
          .append(">setTimeout(function () { location.reload(); }, ")
          .append(REFRESH_MS)
          .append(");</script>");
    return h.toString();
  }

  /** A stage's id as Spark's stages page gives it, with its attempt where it is a retry. */
  private static String stage(JsonNode s) {
    int attempt = s.path("stage_attempt").asInt();
    return s.path("stage_id").asText() + (attempt > 0 ? " (retry " + attempt + ")" : "");
  }

  /**
   * The operators with the most time of their own in each of the latest SQL executions (figures of
   * an event log written before the tab had them have none).
   */
  private static void operators(StringBuilder h, JsonNode figures) {
    Map<Long, List<JsonNode>> byExecution = new LinkedHashMap<>();
    for (JsonNode o : figures.path("operators"))
      byExecution
          .computeIfAbsent(o.path("sql_execution_id").asLong(), e -> new ArrayList<>())
          .add(o);
    if (byExecution.isEmpty()) return;
    h.append("<h4>Operators</h4><p>The ")
        .append(OPERATORS_SHOWN)
        .append(" operators with the most time of their own in each of the latest ")
        .append(EXECUTIONS_SHOWN)
        .append(" SQL executions (spark.cloudprofiler.operators), summed over the tasks that")
        .append(" ended; own time is the operator's minus its children's in the same task.</p>");
    tableHead(
        h,
        "",
        "cloudprofiler-operators",
        List.of(
            "SQL execution", "Operator", "Own time", "Share", "With children", "Rows", "Tasks"));
    int executions = 0;
    for (Map.Entry<Long, List<JsonNode>> e : byExecution.entrySet()) {
      if (executions++ == EXECUTIONS_SHOWN) break;
      List<JsonNode> ops = new ArrayList<>(e.getValue());
      double total = 0;
      for (JsonNode o : ops) total += o.path("exclusive_s").asDouble();
      ops.sort(
          (a, b) ->
              Double.compare(b.path("exclusive_s").asDouble(), a.path("exclusive_s").asDouble()));
      for (JsonNode o : ops.subList(0, Math.min(OPERATORS_SHOWN, ops.size()))) {
        double own = o.path("exclusive_s").asDouble();
        h.append("<tr>")
            .append(td(Long.toString(e.getKey())))
            .append(
                td(o.path("operator").asText() + " (probe " + o.path("probe_id").asText() + ")"))
            .append(td(seconds(own)))
            .append(td(total > 0 ? String.format("%.0f%%", 100 * own / total) : "-"))
            .append(td(seconds(o.path("inclusive_s").asDouble())))
            .append(td(count(o.path("rows"))))
            .append(td(o.path("tasks").asText()))
            .append("</tr>");
      }
    }
    h.append("</tbody></table>");
  }

  /**
   * A table's start and its header row: Spark's classes for its tables and {@code moreClasses}, its
   * {@code id} where one is given.
   */
  private static void tableHead(
      StringBuilder h, String moreClasses, String id, List<String> columns) {
    h.append("<table class=\"table table-bordered table-sm").append(moreClasses).append('"');
    if (id != null) h.append(" id=\"").append(id).append('"');
    h.append("><thead><tr>");
    for (String c : columns) h.append("<th>").append(c).append("</th>");
    h.append("</tr></thead><tbody>");
  }

  static String seconds(double s) {
    if (s >= 1) return String.format("%.2f s", s);
    return s >= 1e-3 ? String.format("%.1f ms", s * 1000) : String.format("%.1f us", s * 1e6);
  }

  /**
   * Each executor's records logged and dropped and bytes written (figures of an event log written
   * before the tab had them have none).
   */
  private static void executors(StringBuilder h, JsonNode figures) {
    removedExecutors(h, figures);
    JsonNode executors = figures.path("executors");
    if (executors.size() == 0) return;
    h.append(
            "<h4>Executors</h4><p>Records each executor's library logged and dropped and the bytes")
        .append(" it wrote, as it last told the driver (at each collection interval); also for")
        .append(" Prometheus: <a href=\"metrics/prometheus/\">metrics/prometheus</a>.</p>");
    tableHead(
        h,
        "",
        "cloudprofiler-executors",
        List.of("Executor", "Records logged", "Records dropped", "Bytes written"));
    for (JsonNode e : executors)
      h.append("<tr>")
          .append(td(e.path("executor_id").asText()))
          .append(td(count(e.path("records_logged"))))
          .append(td(count(e.path("records_dropped"))))
          .append(td(count(e.path("bytes_written"))))
          .append("</tr>");
    h.append("</tbody></table>");
  }

  /**
   * The busiest channels per executor, over its last collection interval (figures of an event log
   * written before the tab had them have none).
   */
  private static void channels(StringBuilder h, JsonNode figures) {
    JsonNode channels = figures.path("channels");
    if (channels.size() == 0) return;
    h.append("<h4>Channels</h4><p>Records each channel logged and dropped per second over its")
        .append(" executor's last collection interval, and in all; the ")
        .append(CHANNELS_SHOWN)
        .append(" busiest here, ")
        .append(LiveFigures.CHANNEL_ROWS)
        .append(" in the JSON and the metrics (")
        .append(figures.path("channels_left_out").asLong())
        .append(" left out).</p>");
    tableHead(
        h,
        "",
        "cloudprofiler-channels",
        List.of(
            "Executor",
            "Channel",
            "Records/s",
            "Drops/s",
            "Interval",
            "Records logged",
            "Records dropped"));
    int shown = 0;
    for (JsonNode c : channels) {
      if (shown++ == CHANNELS_SHOWN) break;
      h.append("<tr>")
          .append(td(c.path("executor_id").asText()))
          .append(td(c.path("channel").asText()))
          .append(td(rate(c.path("records_per_second"))))
          .append(td(rate(c.path("drops_per_second"))))
          .append(td(seconds(c.path("interval_s").asDouble())))
          .append(td(count(c.path("records_logged"))))
          .append(td(count(c.path("records_dropped"))))
          .append("</tr>");
    }
    h.append("</tbody></table>");
  }

  /**
   * The calibration's quality per pair of TSC domains (figures of an event log written before the
   * tab had them, or of an application with one domain, have none).
   */
  private static void calibration(StringBuilder h, JsonNode figures) {
    JsonNode pairs = figures.path("calibration");
    if (pairs.size() == 0) return;
    h.append("<h4>Calibration</h4><p>Per pair of TSC domains (machines), the latest round's")
        .append(" smallest probe round trip each way and the bound of the anchor it gives (the")
        .append(" analysis's min-pair anchor of the round): a duration from one machine to the")
        .append(" other is known within about twice that.</p>");
    tableHead(
        h,
        "",
        "cloudprofiler-calibration",
        List.of(
            "Hosts",
            "Domains",
            "Rounds",
            "Failed",
            "Latest round",
            "MinRTT a to b",
            "MinRTT b to a",
            "Bound",
            "Best bound"));
    for (JsonNode p : pairs)
      h.append("<tr>")
          .append(td(p.path("host_a").asText() + " / " + p.path("host_b").asText()))
          .append(td(p.path("domain_a").asText() + " / " + p.path("domain_b").asText()))
          .append(td(p.path("rounds").asText()))
          .append(
              td(p.path("failures").asText() + (p.path("failing").asBoolean() ? " (failing)" : "")))
          .append(td(p.path("round").asText("-")))
          .append(td(optionalSeconds(p.path("min_rtt_a_b_s"))))
          .append(td(optionalSeconds(p.path("min_rtt_b_a_s"))))
          .append(td(optionalSeconds(p.path("bound_s"))))
          .append(td(optionalSeconds(p.path("best_bound_s"))))
          .append("</tr>");
    h.append("</tbody></table>");
  }

  /**
   * The executors Spark removed and why: a lost one's records since its last collection reach the
   * log folder only when another executor of its host collects them (figures of an event log
   * written before the tab had them have none).
   */
  private static void removedExecutors(StringBuilder h, JsonNode figures) {
    JsonNode removed = figures.path("executors_removed");
    lostCollected(h, figures.path("lost_collected"));
    if (removed.size() == 0) return;
    h.append("<h4>Removed executors</h4><p>")
        .append(count(figures.path("executors_removed_count")))
        .append(" removed by Spark. A lost executor's records since its last collection reach the")
        .append(" log folder when the next executor on its host collects them, cut at their last")
        .append(" complete batch.</p>");
    tableHead(
        h, "", "cloudprofiler-removed-executors", List.of("Executor", "Removed at", "Reason"));
    for (JsonNode r : removed)
      h.append("<tr>")
          .append(td(r.path("executor_id").asText()))
          .append(td(java.time.Instant.ofEpochMilli(r.path("time_ms").asLong()).toString()))
          .append(td(r.path("reason").asText()))
          .append("</tr>");
    h.append("</tbody></table>");
  }

  /** The lost processes whose files an executor of their host collected, and the files cut. */
  private static void lostCollected(StringBuilder h, JsonNode lost) {
    if (lost.size() == 0) return;
    h.append("<h4>Files of lost processes</h4><p>Collected into the log folder by the next")
        .append(" executor on their host; a cut file ends at its last complete batch.</p>");
    tableHead(
        h,
        "",
        "cloudprofiler-lost-collected",
        List.of("Process", "Folder", "Collected by", "Files", "Cut"));
    for (JsonNode l : lost)
      h.append("<tr>")
          .append(td(l.path("pid").asText()))
          .append(td(l.path("folder").asText()))
          .append(td(l.path("collected_by").asText()))
          .append(td(count(l.path("files"))))
          .append(td(count(l.path("cut_files"))))
          .append("</tr>");
    h.append("</tbody></table>");
  }

  /**
   * Latency from each trace point to the next along the pipelines, from the records the executors
   * sampled (figures of an event log written before the tab had them have none).
   */
  private static void hops(StringBuilder h, JsonNode figures) {
    JsonNode hops = figures.path("hops");
    if (hops.size() == 0) return;
    h.append("<h4>Latency between trace points</h4><p>From each trace point to the next, over the")
        .append(" records the executors sampled (the same tuple ids at every point) since the")
        .append(" application started (the last column: over the last collection interval);")
        .append(" percentiles within ")
        .append(HopSketch.RELATIVE_ACCURACY * 100)
        .append("% of the value at their rank. Across machines each latency is known within its")
        .append(" bound (from the calibration's latest round); unbounded pairs are counted, not")
        .append(" measured. The report gives every record's.</p>");
    tableHead(
        h,
        "",
        "cloudprofiler-hops",
        List.of(
            "From",
            "To",
            "Sampled (1 in)",
            "Across machines",
            "Unbounded",
            "p50",
            "p90",
            "p99",
            "Max",
            "Largest bound",
            "p99, last interval"));
    for (JsonNode r : hops)
      h.append("<tr>")
          .append(td(r.path("from_channel").asText()))
          .append(td(r.path("to_channel").asText()))
          .append(td(count(r.path("count")) + " (" + count(r.path("sampled_one_in")) + ")"))
          .append(td(count(r.path("remote_count"))))
          .append(td(count(r.path("unbounded_count"))))
          .append(td(optionalSignedSeconds(r.path("p50_s"))))
          .append(td(optionalSignedSeconds(r.path("p90_s"))))
          .append(td(optionalSignedSeconds(r.path("p99_s"))))
          .append(td(optionalSignedSeconds(r.path("max_s"))))
          .append(td(optionalSeconds(r.path("bound_max_s"))))
          .append(td(optionalSignedSeconds(r.path("last_p99_s"))))
          .append("</tr>");
    h.append("</tbody></table>");
  }

  /** What this tab's own work has cost so far, in one line ({@link TabWork}). */
  private static void tabWork(StringBuilder h, JsonNode work) {
    if (work.isMissingNode()) return;
    JsonNode driver = work.path("driver_s"), executors = work.path("executors_s");
    h.append("<p id=\"cloudprofiler-tab-work\">What this tab and its metrics have cost so far: ")
        .append("the driver ")
        .append(seconds(driver.path("listeners").asDouble()))
        .append(" in its listeners, ")
        .append(seconds(driver.path("messages").asDouble()))
        .append(" on the executors' messages, ")
        .append(seconds(driver.path("figures").asDouble()))
        .append(" building these figures; the executors ")
        .append(seconds(executors.path("messages").asDouble()))
        .append(" on their messages and ")
        .append(seconds(executors.path("scan").asDouble()))
        .append(" scanning ")
        .append(count(work.path("executors_scanned_records")))
        .append(" records for the latency's samples.</p>");
  }

  /** A latency that can be negative (two machines' clocks within their bound). */
  private static String optionalSignedSeconds(JsonNode value) {
    if (!value.isNumber()) return "-";
    double s = value.asDouble();
    return s < 0 ? "-" + seconds(-s) : seconds(s);
  }

  private static String optionalSeconds(JsonNode value) {
    return value.isNumber() ? seconds(value.asDouble()) : "-";
  }

  private static String slowestText(JsonNode t) {
    String cause = t.path("cause").asText();
    return "task "
        + t.path("task_id").asText()
        + " (partition "
        + t.path("partition").asText()
        + ", executor "
        + t.path("executor_id").asText()
        + "): "
        + ms(t.path("duration_ms"))
        + (cause.isEmpty() ? "" : ", " + cause);
  }

  private static String td(String text) {
    return "<td>" + escape(text) + "</td>";
  }

  static String ms(JsonNode value) {
    if (value == null || value.isNull() || value.isMissingNode()) return "-";
    long ms = value.asLong();
    return ms >= 1000 ? String.format("%.2f s", ms / 1000.0) : ms + " ms";
  }

  /** A count with thousands separators. */
  private static String count(JsonNode value) {
    return String.format("%,d", value.asLong());
  }

  private static String rate(JsonNode value) {
    return value == null || value.isNull() || value.isMissingNode()
        ? "-"
        : String.format("%,.0f", value.asDouble());
  }

  static String escape(String text) {
    return text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\"", "&quot;")
        .replace("'", "&#39;");
  }
}
