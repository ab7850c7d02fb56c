package io.cloudprofiler.harness.source;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The source's options, checked where the query is defined: a bad one fails naming it and its
 * value. Keys are case-insensitive.
 */
final class SourceOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  final List<String> endpoints;
  final double timeoutS;
  final long maxTuplesPerTrigger; // 0: no limit
  final String traceChannel; // null: no trace
  final List<String> columns; // null: every column

  SourceOptions(CaseInsensitiveStringMap options) {
    String raw = options.getOrDefault("endpoints", "");
    endpoints = new ArrayList<>();
    for (String e : raw.split(",")) if (!e.isBlank()) endpoints.add(e.strip());
    if (endpoints.isEmpty())
      throw new IllegalArgumentException(
          "cloudprofiler source: option endpoints is required (comma-separated tcp://host:port of"
              + " the generator's serve-mode emitters), got '"
              + raw
              + "'");
    for (String e : endpoints) ZmtpDealer.address(e);
    timeoutS = positive(options, "timeout", "30");
    String limit = options.get("maxTuplesPerTrigger");
    double tuples = limit == null ? 0 : positive(options, "maxTuplesPerTrigger", limit);
    if (tuples != Math.rint(tuples) || tuples > Long.MAX_VALUE)
      throw bad("maxTuplesPerTrigger", limit, "must be a positive whole number");
    maxTuplesPerTrigger = (long) tuples;
    String trace = options.get("traceChannel");
    traceChannel = trace == null || trace.isBlank() ? null : trace.strip();
    String selected = options.getOrDefault("columns", "");
    List<String> names =
        Arrays.stream(selected.split(",")).map(String::strip).filter(c -> !c.isEmpty()).toList();
    columns = names.isEmpty() ? null : names;
  }

  private SourceOptions(SourceOptions options, List<String> columns) {
    endpoints = options.endpoints;
    timeoutS = options.timeoutS;
    maxTuplesPerTrigger = options.maxTuplesPerTrigger;
    traceChannel = options.traceChannel;
    this.columns = columns;
  }

  /** These options reading only {@code columns} (Spark's column pruning). */
  SourceOptions withColumns(List<String> columns) {
    return new SourceOptions(this, List.copyOf(columns));
  }

  private static double positive(CaseInsensitiveStringMap options, String key, String fallback) {
    String raw = options.getOrDefault(key, fallback);
    double value;
    try {
      value = Double.parseDouble(raw.strip());
    } catch (NumberFormatException e) {
      value = Double.NaN;
    }
    if (!(value > 0) || Double.isInfinite(value)) throw bad(key, raw, "must be a positive number");
    return value;
  }

  private static IllegalArgumentException bad(String key, String raw, String what) {
    return new IllegalArgumentException(
        "cloudprofiler source: option " + key + "='" + raw + "' " + what);
  }
}
