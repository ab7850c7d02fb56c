package io.cloudprofiler.spark.analysis;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.types.DataType;

/**
 * The analysis's durations as a SQL function of the session, so that a join of records gets its
 * durations without a row going to a Python worker (joins.py's with_durations): {@code
 * name(start_domain_id, start_tsc, end_domain_id, end_tsc)} gives the struct of joins.py's
 * DURATION_FIELDS, the duration and its bound null where an end is missing (then path "unbounded").
 */
public final class DurationColumns implements UDF4<Integer, Long, Integer, Long, Row> {
  private static final long serialVersionUID = 1L;

  private final Durations durations;
  private final String[] paths; // translate.py's PATHS: a path's name by its code

  private DurationColumns(Durations durations, String[] paths) {
    this.durations = durations;
    this.paths = paths;
  }

  /**
   * Registers the function {@code name} in {@code spark} for the durations of {@code plan}
   * (Timebase.jvm_durations), returning {@code type}'s struct (DURATION_FIELDS, as JSON).
   */
  public static void register(SparkSession spark, String name, String plan, String type) {
    com.fasterxml.jackson.databind.JsonNode root = PlanJson.parse(plan, "the durations' plan");
    com.fasterxml.jackson.databind.JsonNode names = PlanJson.required(root, "paths");
    String[] paths = new String[names.size()];
    for (int i = 0; i < paths.length; i++) paths[i] = names.get(i).asText();
    spark
        .udf()
        .register(name, new DurationColumns(Durations.parse(root), paths), DataType.fromJson(type));
  }

  @Override
  public Row call(Integer startDomain, Long start, Integer endDomain, Long end) {
    if (start == null || end == null)
      return RowFactory.create(null, null, paths[Durations.UNBOUNDED], false, true);
    Durations d = durations;
    synchronized (d) { // one instance serves a task's rows; its results are fields
      d.of(startDomain == null ? -1 : startDomain, start, endDomain == null ? -1 : endDomain, end);
      return RowFactory.create(d.durationNs, d.errNs, paths[d.pathCode], d.flagged, d.unbounded);
    }
  }
}
