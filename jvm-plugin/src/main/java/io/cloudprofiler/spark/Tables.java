package io.cloudprofiler.spark;

import io.cloudprofiler.spark.calibration.CalibrationCoordinator;
import io.cloudprofiler.spark.driver.StreamingBatches;
import io.cloudprofiler.spark.driver.TaskListener;
import io.cloudprofiler.spark.executor.LogCollector;
import io.cloudprofiler.spark.executor.WorkerSamples;
import io.cloudprofiler.spark.rules.RuleChanges;
import io.cloudprofiler.spark.sql.OperatorNodes;
import io.cloudprofiler.spark.sql.OperatorRows;
import io.cloudprofiler.spark.sql.ShuffledRows;
import io.cloudprofiler.spark.sql.SourceRows;
import io.cloudprofiler.spark.tables.Table;
import io.cloudprofiler.spark.ui.ReportDownload;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Every table the plugin writes into an application's folder, each declared beside its writer
 * ({@link Table}); the build writes them into the jar ({@code io/cloudprofiler/spark/tables.json}),
 * where the Python analysis reads their file names and schemas (cloudprofiler.tables), as it reads
 * the options ({@link Config#json}).
 */
public final class Tables {
  private Tables() {}

  public static final List<Table> ALL =
      List.of(
          TaskListener.TABLE,
          CalibrationCoordinator.PROBES,
          CalibrationCoordinator.DOMAINS,
          OperatorNodes.NODES_TABLE,
          OperatorNodes.TASKS_TABLE,
          StreamingBatches.TABLE,
          RuleChanges.TABLE,
          LogCollector.LOST_MARKER,
          WorkerSamples.TABLE);

  /**
   * {"tables": [{"id", "file", "folder", "meaning", "columns": [{"name", "type"}, ...]}, ...],
   * "channels": {...}}: the columns' types as Arrow names (int32, int64, float64, utf8); the
   * channels the analysis finds by name and metadata, by id: {"prefix", "event" (their {@code
   * spark.event}), "keys": {id: metadata key}}, "files": {"report": the full report's name in the
   * application's folder, where the tab finds it}.
   */
  static String json() {
    StringBuilder out = new StringBuilder("{\"tables\": [");
    for (Table table : ALL) {
      out.append(table == ALL.get(0) ? "\n  " : ",\n  ")
          .append("{\"id\": ")
          .append(Config.quote(table.id()))
          .append(", \"file\": ")
          .append(Config.quote(table.file()))
          .append(", \"folder\": ")
          .append(Config.quote(table.folder()))
          .append(", \"meaning\": ")
          .append(Config.quote(table.meaning()))
          .append(", \"columns\": [");
      for (int c = 0; c < table.columns().size(); c++) {
        out.append(c == 0 ? "\n    " : ",\n    ")
            .append("{\"name\": ")
            .append(Config.quote(table.columns().get(c)))
            .append(", \"type\": ")
            .append(Config.quote(table.arrowType(c)))
            .append('}');
      }
      out.append("]}");
    }
    out.append("\n],\n\"channels\": {");
    channel(
        out,
        "operator_rows",
        OperatorRows.CHANNEL_PREFIX,
        OperatorRows.EVENT,
        List.of(),
        "probe",
        OperatorRows.PROBE_KEY,
        "first_probe",
        OperatorRows.FIRST_PROBE_KEY,
        "source",
        OperatorRows.SOURCE_KEY,
        "events_only",
        OperatorRows.EVENTS_ONLY_KEY);
    out.append(",\n");
    channel(
        out,
        "source_rows",
        SourceRows.CHANNEL_PREFIX,
        SourceRows.EVENT,
        SourceRows.KINDS,
        "tsc",
        SourceRows.TSC_KEY,
        "clock_boot_id",
        SourceRows.CLOCK_BOOT_ID_KEY,
        "clock_simulation",
        SourceRows.CLOCK_SIMULATION_KEY);
    out.append(",\n");
    channel(
        out,
        "shuffled_rows",
        ShuffledRows.CHANNEL,
        ShuffledRows.EVENT,
        List.of(),
        "partition_bits",
        ShuffledRows.PARTITION_BITS_KEY);
    return out.append("},\n\"files\": {\"report\": ")
        .append(Config.quote(ReportDownload.FILE))
        .append("}}\n")
        .toString();
  }

  /**
   * One kind of channel: {@code "id": {"prefix", "event", "keys": {name: metadata key, ...},
   * "kinds": [{"name", "bounded", "from"}, ...]}}, its kinds those of the TSC its records carry, in
   * order.
   */
  private static void channel(
      StringBuilder out,
      String id,
      String prefix,
      String event,
      List<SourceRows.Kind> kinds,
      String... keys) {
    out.append(Config.quote(id))
        .append(": {\"prefix\": ")
        .append(Config.quote(prefix))
        .append(", \"event\": ")
        .append(Config.quote(event))
        .append(", \"keys\": {");
    for (int k = 0; k < keys.length; k += 2)
      out.append(k == 0 ? "" : ", ")
          .append(Config.quote(keys[k]))
          .append(": ")
          .append(Config.quote(keys[k + 1]));
    out.append("}, \"kinds\": [");
    for (int k = 0; k < kinds.size(); k++)
      out.append(k == 0 ? "" : ", ")
          .append("{\"name\": ")
          .append(Config.quote(kinds.get(k).name()))
          .append(", \"bounded\": ")
          .append(kinds.get(k).bounded())
          .append(", \"from\": ")
          .append(Config.quote(kinds.get(k).from()))
          .append('}');
    out.append("]}");
  }

  /**
   * Writes {@link #json} to the file named by the argument (jvm-plugin/build.sh, at build time).
   */
  public static void main(String[] args) throws IOException {
    Files.writeString(Path.of(args[0]), json());
  }
}
