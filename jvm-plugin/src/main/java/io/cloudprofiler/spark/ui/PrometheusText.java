package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.databind.JsonNode;
import io.cloudprofiler.spark.calibration.PairQuality;
import java.util.function.Function;

/**
 * The tab's figures ({@link LiveFigures}) in Prometheus' text format (version 0.0.4), served at
 * {@code <ui>/cloudprofiler/metrics/prometheus}: names carry their unit, labels name the stage, the
 * executor, the channel, the pair of TSC domains, the operator or the streaming query. Series are
 * bounded: the {@value LiveFigures#STAGES_SHOWN} newest stage attempts, at most {@value
 * LiveExecutors#KEPT} executors, {@value LiveFigures#CHANNEL_ROWS} channels of executors, {@value
 * PairQuality#KEPT} pairs of TSC domains, {@value #OPERATORS} operators of the latest SQL
 * executions, the streaming queries the driver keeps, {@value LiveHops#PAIRS} hops.
 */
public final class PrometheusText {
  /** The media type Prometheus asks for and this text is. */
  public static final String CONTENT_TYPE = "text/plain; version=0.0.4"; // Spark adds the charset

  static final double[] QUANTILES = {0.5, 0.9, 0.99};
  static final String[] QUANTILE_FIELDS = {"median_ms", "p90_ms", "p99_ms"};
  static final String[] HOP_QUANTILE_FIELDS = {"last_p50_s", "last_p90_s", "last_p99_s"};
  static final int OPERATORS = 1000;

  private PrometheusText() {}

  /** The metrics of these figures, as text. */
  public static String of(JsonNode figures) {
    StringBuilder out = new StringBuilder();
    JsonNode stages = figures.path("stages");
    family(
        out,
        "cloudprofiler_stage_task_duration_seconds",
        "summary",
        "Run time of a stage attempt's successful tasks (Spark's launch to finish), exact up to "
            + LiveStages.SAMPLE
            + " tasks, else from a uniform sample of them");
    for (JsonNode s : stages) {
      if (s.path("median_ms").isNull()) continue; // no task has ended
      String stage = stageLabels(s);
      for (int i = 0; i < QUANTILES.length; i++)
        sample(
            out,
            "cloudprofiler_stage_task_duration_seconds",
            stage + ",quantile=\"" + QUANTILES[i] + "\"",
            s.path(QUANTILE_FIELDS[i]).asLong() / 1000.0);
      sample(
          out,
          "cloudprofiler_stage_task_duration_seconds_count",
          stage,
          s.path("tasks").asLong() - s.path("failed").asLong());
    }
    family(
        out,
        "cloudprofiler_stage_task_duration_max_seconds",
        "gauge",
        "Run time of a stage attempt's slowest successful task");
    for (JsonNode s : stages)
      if (!s.path("max_ms").isNull())
        sample(
            out,
            "cloudprofiler_stage_task_duration_max_seconds",
            stageLabels(s),
            s.path("max_ms").asLong() / 1000.0);
    family(
        out,
        "cloudprofiler_stage_stragglers",
        "gauge",
        "A stage attempt's successful tasks that took over "
            + LiveStages.STRAGGLER_RATIO
            + " x its median");
    for (JsonNode s : stages)
      sample(out, "cloudprofiler_stage_stragglers", stageLabels(s), s.path("stragglers").asLong());
    executors(out, figures.path("executors"));
    family(
        out,
        "cloudprofiler_executors_left_out",
        "gauge",
        "Executors whose counters the driver no longer keeps (it keeps the "
            + LiveExecutors.KEPT
            + " heard from last)");
    sample(
        out, "cloudprofiler_executors_left_out", "", figures.path("executors_left_out").asLong());
    family(
        out,
        "cloudprofiler_executors_removed_total",
        "counter",
        "Executors Spark removed (lost, killed or released) since the application started");
    sample(
        out,
        "cloudprofiler_executors_removed_total",
        "",
        figures.path("executors_removed_count").asLong());
    operators(out, figures.path("operators"));
    streaming(out, figures.path("streaming"));
    channels(out, figures);
    calibration(out, figures.path("calibration"));
    hops(out, figures.path("hops"));
    tabWork(out, figures.path("tab_work"));
    return out.toString();
  }

  /** The tab's own work so far, per process and part ({@link TabWork}). */
  private static void tabWork(StringBuilder out, JsonNode work) {
    if (work.isMissingNode()) return; // an event log's figures from before they had it
    String name = "cloudprofiler_tab_work_seconds_total";
    family(
        out,
        name,
        "counter",
        "Time the Cloudprofiler tab's and metrics' own work took: the driver's listeners, the"
            + " executors' messages and the figures; the executors' messages and the hops' samples'"
            + " scan, as their latest messages said");
    for (String process : new String[] {"driver", "executors"})
      for (var part : work.path(process + "_s").properties()) // the parts as the figures name them
      sample(
            out,
            name,
            label("process", process) + "," + label("part", part.getKey()),
            part.getValue().asDouble());
  }

  private static void operators(StringBuilder out, JsonNode operators) {
    String[][] counters = {
      {
        "exclusive_s",
        "cloudprofiler_operator_exclusive_seconds_total",
        "Time in the operator itself"
      },
      {
        "inclusive_s",
        "cloudprofiler_operator_inclusive_seconds_total",
        "Time in the operator with its children in the same tasks"
      },
      {"rows", "cloudprofiler_operator_rows_total", "Rows out of the operator"}
    };
    counters(
        out,
        counters,
        ", summed over the tasks that ended, for the operators of the latest SQL executions"
            + " (spark.cloudprofiler.operators)",
        operators,
        OPERATORS,
        o ->
            label("sql_execution_id", o.path("sql_execution_id").asText())
                + ","
                + label("probe_id", o.path("probe_id").asText())
                + ","
                + label("operator", o.path("operator").asText()));
  }

  private static void executors(StringBuilder out, JsonNode executors) {
    String[][] counters = {
      {"records_logged", "cloudprofiler_executor_records_logged_total", "Records logged"},
      {"records_dropped", "cloudprofiler_executor_records_dropped_total", "Records dropped"},
      {"bytes_written", "cloudprofiler_executor_written_bytes_total", "Bytes of log written"}
    };
    counters(
        out,
        counters,
        " by an executor's Cloudprofiler library since it started, as it last told the driver",
        executors,
        LiveExecutors.KEPT,
        e -> label("executor_id", e.path("executor_id").asText()));
  }

  /**
   * Counter families, each {field, name, help} of {@code counters}: a sample per row (the first
   * {@code limit}) of the row's field, under the row's labels.
   */
  private static void counters(
      StringBuilder out,
      String[][] counters,
      String help,
      JsonNode rows,
      int limit,
      Function<JsonNode, String> labels) {
    for (String[] c : counters) {
      family(out, c[1], "counter", c[2] + help);
      int n = 0;
      for (JsonNode row : rows) {
        if (n++ == limit) break;
        sample(out, c[1], labels.apply(row), row.path(c[0]).asDouble());
      }
    }
  }

  private static void channels(StringBuilder out, JsonNode figures) {
    JsonNode channels = figures.path("channels");
    Function<JsonNode, String> labels =
        c ->
            label("executor_id", c.path("executor_id").asText())
                + ","
                + label("channel", c.path("channel").asText());
    String[][] rates = {
      {"records_per_second", "cloudprofiler_channel_records_per_second", "Records logged"},
      {"drops_per_second", "cloudprofiler_channel_drops_per_second", "Records dropped"}
    };
    for (String[] r : rates) {
      family(
          out,
          r[1],
          "gauge",
          r[2] + " per second by a channel of an executor over the executor's last interval");
      for (JsonNode c : channels) sample(out, r[1], labels.apply(c), c.path(r[0]).asDouble());
    }
    String[][] counters = {
      {"records_logged", "cloudprofiler_channel_records_logged_total", "Records logged"},
      {"records_dropped", "cloudprofiler_channel_records_dropped_total", "Records dropped"}
    };
    counters(
        out,
        counters,
        " by a channel of an executor since the executor's library started",
        channels,
        LiveFigures.CHANNEL_ROWS,
        labels);
    family(
        out,
        "cloudprofiler_channels_left_out",
        "gauge",
        "Channels of executors without series: beyond an executor's "
            + LiveExecutors.CHANNELS_PER_EXECUTOR
            + " busiest or the "
            + LiveFigures.CHANNEL_ROWS
            + " busiest of all");
    sample(out, "cloudprofiler_channels_left_out", "", figures.path("channels_left_out").asLong());
  }

  private static void calibration(StringBuilder out, JsonNode pairs) {
    Function<JsonNode, String> labels =
        p ->
            label("domain_a", p.path("domain_a").asText())
                + ","
                + label("domain_b", p.path("domain_b").asText())
                + ","
                + label("host_a", p.path("host_a").asText())
                + ","
                + label("host_b", p.path("host_b").asText());
    String[][] gauges = {
      {
        "bound_s",
        "cloudprofiler_calibration_bound_seconds",
        "Bound of the anchor the latest calibration round of a pair of TSC domains gives"
      },
      {
        "best_bound_s",
        "cloudprofiler_calibration_best_bound_seconds",
        "Smallest bound of an anchor any calibration round of a pair of TSC domains gave"
      },
      {
        "min_rtt_a_b_s",
        "cloudprofiler_calibration_min_rtt_a_to_b_seconds",
        "Smallest probe round trip from domain a to b in the latest round"
      },
      {
        "min_rtt_b_a_s",
        "cloudprofiler_calibration_min_rtt_b_to_a_seconds",
        "Smallest probe round trip from domain b to a in the latest round"
      }
    };
    gauges(out, gauges, pairs, labels);
    String[][] counters = {
      {"rounds", "cloudprofiler_calibration_rounds_total", "Calibration rounds that ran"},
      {"failures", "cloudprofiler_calibration_failures_total", "Calibration rounds that failed"}
    };
    counters(out, counters, " for a pair of TSC domains", pairs, PairQuality.KEPT, labels);
  }

  private static void hops(StringBuilder out, JsonNode hops) {
    Function<JsonNode, String> labels =
        h ->
            label("from_channel", h.path("from_channel").asText())
                + ","
                + label("to_channel", h.path("to_channel").asText());
    String name = "cloudprofiler_hop_latency_seconds";
    family(
        out,
        name,
        "summary",
        "Latency of the sampled records from one trace point to the next: quantiles over the last"
            + " collection interval (NaN without any; within "
            + HopSketch.RELATIVE_ACCURACY * 100
            + "% of the value at their rank), count and sum since the start");
    for (JsonNode h : hops) {
      for (int i = 0; i < QUANTILES.length; i++) {
        JsonNode q = h.path(HOP_QUANTILE_FIELDS[i]);
        sample(
            out,
            name,
            labels.apply(h) + ",quantile=\"" + QUANTILES[i] + "\"",
            q.isNumber() ? q.asDouble() : Double.NaN);
      }
      sample(out, name + "_count", labels.apply(h), h.path("count").asLong());
      sample(out, name + "_sum", labels.apply(h), h.path("sum_s").asDouble());
    }
    String[][] gauges = {
      {
        "last_max_s",
        "cloudprofiler_hop_latency_max_seconds",
        "Largest latency of a hop's sampled records over the last collection interval"
      },
      {
        "bound_max_s",
        "cloudprofiler_hop_bound_max_seconds",
        "Largest bound of a hop's latencies since the start (0 within one TSC domain)"
      }
    };
    gauges(out, gauges, hops, labels);
  }

  /** Gauges {field, name, help} of each row that has the field, under the row's labels. */
  private static void gauges(
      StringBuilder out, String[][] gauges, JsonNode rows, Function<JsonNode, String> labels) {
    for (String[] g : gauges) {
      family(out, g[1], "gauge", g[2]);
      for (JsonNode r : rows)
        if (r.path(g[0]).isNumber()) sample(out, g[1], labels.apply(r), r.path(g[0]).asDouble());
    }
  }

  private static void streaming(StringBuilder out, JsonNode queries) {
    String[][] gauges = {
      {"trigger_execution_ms", "cloudprofiler_streaming_batch_duration_seconds", "Duration"},
      {"batch_id", "cloudprofiler_streaming_batch_id", "Id"},
      {"num_input_rows", "cloudprofiler_streaming_batch_input_rows", "Input rows"},
      {"input_rows_per_second", "cloudprofiler_streaming_input_rows_per_second", "Input rate"},
      {
        "processed_rows_per_second",
        "cloudprofiler_streaming_processed_rows_per_second",
        "Processing rate"
      }
    };
    for (String[] g : gauges) {
      family(out, g[1], "gauge", g[2] + " of a streaming query's latest micro-batch");
      for (JsonNode q : queries) {
        JsonNode batches = q.path("batches");
        if (batches.size() == 0) continue;
        JsonNode value = batches.get(batches.size() - 1).path(g[0]);
        if (value.isNull() || value.isMissingNode()) continue;
        String labels =
            label("query_id", q.path("query_id").asText())
                + ","
                + label(
                    "query_name",
                    q.path("query_name").isNull() ? "" : q.path("query_name").asText());
        sample(
            out, g[1], labels, g[0].endsWith("_ms") ? value.asLong() / 1000.0 : value.asDouble());
      }
    }
  }

  private static String stageLabels(JsonNode s) {
    return label("stage_id", s.path("stage_id").asText())
        + ","
        + label("stage_attempt", s.path("stage_attempt").asText());
  }

  private static void family(StringBuilder out, String name, String type, String help) {
    out.append("# HELP ")
        .append(name)
        .append(' ')
        .append(help.replace("\\", "\\\\").replace("\n", "\\n"))
        .append('\n');
    out.append("# TYPE ").append(name).append(' ').append(type).append('\n');
  }

  private static void sample(StringBuilder out, String name, String labels, double value) {
    out.append(name);
    if (!labels.isEmpty()) out.append('{').append(labels).append('}');
    out.append(' ');
    if (value == Math.rint(value) && Math.abs(value) < 1e15) out.append((long) value);
    else out.append(Double.toString(value)); // the format reads Java's notation, 1.5E-4 too
    out.append('\n');
  }

  /** A label, its value escaped as the format asks (backslash, double quote, line feed). */
  static String label(String name, String value) {
    return name
        + "=\""
        + value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")
        + "\"";
  }
}
