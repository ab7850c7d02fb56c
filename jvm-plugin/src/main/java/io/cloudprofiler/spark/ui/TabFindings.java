package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The tab's findings in plain words, computed from its figures (so the History Server's tab has
 * them from the event log too), most important first, as the report orders its own: records the
 * profiler dropped, executors Spark removed and the files of lost processes cut where they died
 * (figures are incomplete), then where the time goes (each stage's worst straggler, up to {@value
 * #STAGES_NAMED} stages by the time it took over its median; the operator that dominates the latest
 * SQL execution; the slowest hop between trace points), then how far cross-machine durations can be
 * trusted. The report reads every record: its findings are the complete ones.
 */
final class TabFindings {
  static final int STAGES_NAMED = 3;
  static final int REMOVED_NAMED = 3;
  static final double DOMINANT_SHARE = 0.5;

  /** A finding: "warning" or "info", and its text. */
  record Finding(String level, String text) {}

  private TabFindings() {}

  static List<Finding> of(JsonNode figures) {
    List<Finding> out = new ArrayList<>();
    dropped(out, figures.path("executors"));
    removed(out, figures.path("executors_removed"), figures.path("executors_removed_count"));
    lostCut(out, figures.path("lost_collected"));
    stragglers(out, figures.path("stages"));
    boolean warned = !out.isEmpty();
    operators(out, figures.path("operators"));
    hops(out, figures.path("hops"));
    calibration(out, figures.path("calibration"));
    if (!warned) out.add(0, new Finding("info", "Nothing stands out so far."));
    return out;
  }

  private static void dropped(List<Finding> out, JsonNode executors) {
    long total = 0, most = 0;
    String worst = null;
    for (JsonNode e : executors) {
      long n = e.path("records_dropped").asLong();
      total += n;
      if (n > most) {
        most = n;
        worst = e.path("executor_id").asText();
      }
    }
    if (total > 0)
      out.add(
          new Finding(
              "warning",
              String.format(
                  "%,d records were dropped by the profiler (executor %s the most: %,d): the"
                      + " figures drawn from the logs miss them.",
                  total, worst, most)));
  }

  private static void removed(List<Finding> out, JsonNode removed, JsonNode count) {
    List<JsonNode> rows = new ArrayList<>();
    removed.forEach(rows::add);
    for (JsonNode r : rows.subList(Math.max(0, rows.size() - REMOVED_NAMED), rows.size()))
      out.add(
          new Finding(
              "warning",
              "Executor "
                  + r.path("executor_id").asText()
                  + " was removed ("
                  + r.path("reason").asText()
                  + "): its records since its last collection reach the log folder when the next"
                  + " executor on its host collects them."));
    long more = count.asLong() - Math.min(rows.size(), REMOVED_NAMED);
    if (more > 0)
      out.add(new Finding("warning", String.format("%,d more executors were removed.", more)));
  }

  private static void lostCut(List<Finding> out, JsonNode lost) {
    for (JsonNode l : lost)
      if (l.path("cut_files").asLong() > 0)
        out.add(
            new Finding(
                "warning",
                String.format(
                    "The files of lost process %s (%s) were collected by executor %s: %,d of %,d"
                        + " cut where it died, read up to their last complete batch.",
                    l.path("pid").asText(),
                    l.path("folder").asText(),
                    l.path("collected_by").asText(),
                    l.path("cut_files").asLong(),
                    l.path("files").asLong())));
  }

  private static void stragglers(List<Finding> out, JsonNode stages) {
    List<JsonNode> withStragglers = new ArrayList<>();
    for (JsonNode s : stages)
      if (s.path("stragglers").asLong() > 0 && s.path("slowest").size() > 0) withStragglers.add(s);
    withStragglers.sort(Comparator.comparingLong(TabFindings::excessMs).reversed());
    for (JsonNode s : withStragglers.subList(0, Math.min(STAGES_NAMED, withStragglers.size()))) {
      JsonNode t = s.path("slowest").get(0);
      long median = s.path("median_ms").asLong(), others = s.path("stragglers").asLong() - 1;
      String cause = t.path("cause").asText();
      out.add(
          new Finding(
              "warning",
              String.format(
                  "Stage %s (%s): task %s (partition %s, executor %s on %s) took %s, %.1fx the"
                      + " stage's median %s%s%s.",
                  s.path("stage_id").asText(),
                  s.path("name").asText(),
                  t.path("task_id").asText(),
                  t.path("partition").asText(),
                  t.path("executor_id").asText(),
                  t.path("host").asText(),
                  TabContent.ms(t.path("duration_ms")),
                  median > 0 ? (double) t.path("duration_ms").asLong() / median : 0.0,
                  TabContent.ms(s.path("median_ms")),
                  cause.isEmpty() ? "" : "; " + cause,
                  others > 0 ? String.format("; %,d more stragglers in this stage", others) : "")));
    }
  }

  /** The time the stage's slowest task took over its median. */
  private static long excessMs(JsonNode s) {
    return s.path("slowest").get(0).path("duration_ms").asLong() - s.path("median_ms").asLong();
  }

  private static void operators(List<Finding> out, JsonNode operators) {
    Map<Long, List<JsonNode>> byExecution = new LinkedHashMap<>(); // newest first
    for (JsonNode o : operators)
      byExecution
          .computeIfAbsent(o.path("sql_execution_id").asLong(), e -> new ArrayList<>())
          .add(o);
    if (byExecution.isEmpty()) return;
    Map.Entry<Long, List<JsonNode>> latest = byExecution.entrySet().iterator().next();
    double total = 0;
    JsonNode top = null;
    for (JsonNode o : latest.getValue()) {
      total += o.path("exclusive_s").asDouble();
      if (top == null || o.path("exclusive_s").asDouble() > top.path("exclusive_s").asDouble())
        top = o;
    }
    double share = total > 0 ? top.path("exclusive_s").asDouble() / total : 0;
    if (share >= DOMINANT_SHARE)
      out.add(
          new Finding(
              "info",
              String.format(
                  "SQL execution %d: %s (probe %s) takes %.0f%% of its timed operators' own time.",
                  latest.getKey(),
                  top.path("operator").asText(),
                  top.path("probe_id").asText(),
                  100 * share)));
  }

  private static void hops(List<Finding> out, JsonNode hops) {
    JsonNode slowest = null;
    long unbounded = 0;
    for (JsonNode h : hops) {
      unbounded += h.path("unbounded_count").asLong();
      if (h.path("p99_s").isNumber()
          && (slowest == null || h.path("p99_s").asDouble() > slowest.path("p99_s").asDouble()))
        slowest = h;
    }
    if (slowest != null && hops.size() > 1)
      out.add(
          new Finding(
              "info",
              String.format(
                  "Between trace points, %s -> %s is the slowest hop: p99 %s over %,d sampled"
                      + " records (1 in %,d).",
                  slowest.path("from_channel").asText(),
                  slowest.path("to_channel").asText(),
                  TabContent.seconds(slowest.path("p99_s").asDouble()),
                  slowest.path("count").asLong(),
                  slowest.path("sampled_one_in").asLong())));
    if (unbounded > 0)
      out.add(
          new Finding(
              "info",
              String.format(
                  "%,d sampled pairs of records cross machines that no calibration round relates"
                      + " yet: counted, not measured.",
                  unbounded)));
  }

  private static void calibration(List<Finding> out, JsonNode pairs) {
    JsonNode widest = null;
    for (JsonNode p : pairs)
      if (p.path("bound_s").isNumber()
          && (widest == null || p.path("bound_s").asDouble() > widest.path("bound_s").asDouble()))
        widest = p;
    if (widest != null)
      out.add(
          new Finding(
              "info",
              String.format(
                  "Cross-machine durations are known within about %s (twice the widest anchor"
                      + " bound of the latest calibration round, %s / %s).",
                  TabContent.seconds(2 * widest.path("bound_s").asDouble()),
                  widest.path("host_a").asText(),
                  widest.path("host_b").asText())));
  }
}
