package io.cloudprofiler.spark.analysis;

import static io.cloudprofiler.spark.analysis.PlanJson.bits;
import static io.cloudprofiler.spark.analysis.PlanJson.required;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One log file of a scan: where it is, its records' bytes, whether it holds records or counters,
 * the values of its per-file columns, and its domain's translation onto the time axis.
 */
final class LogFilePart implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The channels whose tuple id is the task attempt's (reader.py's translated_batches). */
  private static final List<String> TASK_CHANNELS = List.of("spark.task.start", "spark.task.end");

  final String path;

  /** Its records' bytes (16 a record or counter), which its partition is packed by. */
  final long bytes;

  final boolean records;
  final boolean taskChannel;

  /** column name -> its value in every row of the file (a String, Long, Integer or null). */
  final Map<String, Object> constants;

  final AxisTranslation axis;

  private LogFilePart(
      String path,
      long bytes,
      boolean records,
      Map<String, Object> constants,
      AxisTranslation axis) {
    this.path = path;
    this.bytes = bytes;
    this.records = records;
    this.constants = constants;
    this.axis = axis;
    this.taskChannel = records && TASK_CHANNELS.contains(constants.get("channel"));
  }

  /** The per-file columns: name -> whether a number (int64) or text. */
  private static final Map<String, Boolean> FILE_COLUMNS =
      Map.of(
          "channel", false,
          "handler", false,
          "host", false,
          "executor_id", false,
          "pid", true,
          "domain", false,
          "task_attempt_id", true,
          "file", false);

  /**
   * The partitions of the option {@code plan}, JSON the analysis writes (reader.py's jvm_plan):
   * {"start_tick", "hz": the axis's doubles as their IEEE bits (exact); "domains": {name:
   * "reference" or its anchors, as Durations.anchors reads them}; "files": [{"path", "kind":
   * records or counters, "rows", the per-file columns, "channel_id", "domain_id"}]}. A domain the
   * plan does not name is unbounded.
   */
  static List<LogFilePart> parse(String plan) {
    JsonNode root = PlanJson.parse(plan, "the option plan");
    double startTick = bits(required(root, "start_tick"));
    double hz = bits(required(root, "hz"));
    Map<String, AxisTranslation> axes = new HashMap<>();
    for (Map.Entry<String, JsonNode> e : required(root, "domains").properties()) {
      JsonNode d = e.getValue();
      axes.put(
          e.getKey(),
          d.isTextual() && d.asText().equals("reference")
              ? AxisTranslation.reference(startTick, hz)
              : AxisTranslation.calibrated(startTick, hz, Durations.anchors(d)));
    }
    List<LogFilePart> parts = new ArrayList<>();
    for (JsonNode f : required(root, "files")) {
      String kind = required(f, "kind").asText();
      if (!kind.equals("records") && !kind.equals("counters"))
        throw new IllegalArgumentException(
            "a file's kind is records or counters, not " + kind + " (" + f.get("path") + ")");
      Map<String, Object> constants = new HashMap<>();
      FILE_COLUMNS.forEach((name, number) -> constants.put(name, value(f.get(name), number)));
      for (String name : List.of("channel_id", "domain_id")) {
        Object id = value(f.get(name), true);
        constants.put(name, id == null ? null : Math.toIntExact((Long) id));
      }
      String domain = (String) constants.get("domain");
      AxisTranslation axis = domain == null ? null : axes.get(domain);
      parts.add(
          new LogFilePart(
              required(f, "path").asText(),
              16 * (Long) value(required(f, "rows"), true),
              kind.equals("records"),
              constants,
              axis == null ? AxisTranslation.unbounded() : axis));
    }
    return parts;
  }

  private static Object value(JsonNode node, boolean number) {
    if (node == null || node.isNull()) return null;
    if (!number) return node.asText();
    if (!node.canConvertToLong())
      throw new IllegalArgumentException("not an integer: " + node + " in the option plan");
    return node.asLong();
  }
}
