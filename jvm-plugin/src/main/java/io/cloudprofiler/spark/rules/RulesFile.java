package io.cloudprofiler.spark.rules;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.tables.ArrowTables;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import org.apache.hadoop.fs.Path;

/**
 * A rules file in JSON, read by the driver at start ({@code spark.cloudprofiler.rules.file}, on any
 * Hadoop file system) with the Jackson that Spark ships: {@code {"rules": [{"pattern": "ysb.*",
 * "handler": "downsample", "params": [64]}, ...]}}, the schema of cloudprofiler.read_rules_file
 * (which reads TOML too). Turned into the rules text the native library checks and resolves, one
 * rule a line: rule i of the file is line i of its messages.
 */
public final class RulesFile {
  private static final Set<String> KEYS = Set.of("pattern", "handler", "params");

  private RulesFile() {}

  /** The file's rules, one a line; throws naming the file and the bad entry. */
  public static String read(String file) {
    JsonNode document;
    try {
      Path path = ArrowTables.path(file);
      try (InputStream in = ArrowTables.fileSystem(path).open(path)) {
        document = new ObjectMapper().readTree(in);
      }
    } catch (Exception e) {
      String toml =
          file.endsWith(".toml")
              ? " (the driver reads JSON; from PySpark, cps.builder(rules=pathlib.Path(file)) reads"
                  + " TOML)"
              : "";
      throw bad(file, "cannot be read as JSON: " + e.getMessage() + toml);
    }
    JsonNode entries = document == null ? null : document.get("rules");
    if (entries == null || !entries.isArray()) {
      throw bad(
          file,
          "expected a list 'rules' of tables with 'pattern', 'handler' and optional 'params'");
    }
    List<String> lines = new ArrayList<>();
    for (JsonNode entry : entries) lines.add(line(file, lines.size() + 1, entry));
    return String.join("\n", lines);
  }

  private static String line(String file, int number, JsonNode entry) {
    String where = "rule " + number + " " + entry;
    if (!entry.isObject()) {
      throw bad(file, where + ": expected a table with 'pattern', 'handler' and optional 'params'");
    }
    for (Iterator<String> keys = entry.fieldNames(); keys.hasNext(); ) {
      String key = keys.next();
      if (!KEYS.contains(key)) {
        throw bad(file, where + ": unknown key " + key + ": expected pattern, handler, params");
      }
    }
    StringBuilder rule =
        new StringBuilder(text(file, where, entry.get("pattern"), "pattern", "=;\n"))
            .append('=')
            .append(text(file, where, entry.get("handler"), "handler", "=:;\n"));
    JsonNode params = entry.get("params");
    if (params != null && !params.isArray())
      throw bad(file, where + ": 'params' must be a list of integers");
    for (JsonNode param : params == null ? List.<JsonNode>of() : params) {
      if (!param.isIntegralNumber() || !param.canConvertToLong()) {
        throw bad(file, where + ": 'params' must be a list of integers");
      }
      rule.append(':').append(param.longValue());
    }
    return rule.toString();
  }

  private static String text(
      String file, String where, JsonNode value, String key, String reserved) {
    boolean ok =
        value != null
            && value.isTextual()
            && !value.asText().isEmpty()
            && value.asText().chars().noneMatch(c -> reserved.indexOf(c) >= 0);
    if (!ok) {
      throw bad(
          file,
          where
              + ": '"
              + key
              + "' must be a non-empty string without any of "
              + reserved.replace("\n", " and a new line"));
    }
    return value.asText();
  }

  private static IllegalArgumentException bad(String file, String problem) {
    return new IllegalArgumentException(
        Config.RULES_FILE.name + "=" + file + " is invalid: " + problem);
  }
}
