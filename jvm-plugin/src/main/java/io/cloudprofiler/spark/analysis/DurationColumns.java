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

  private DurationColumns(Durations durations) {
    this.durations = durations;
  }

  /**
   * Registers the function {@code name} in {@code spark} for the durations of {@code plan}
   * (Timebase.jvm_durations), returning {@code type}'s struct (DURATION_FIELDS, as JSON).
   */
  public static void register(SparkSession spark, String name, String plan, String type) {
    Durations durations = Durations.parse(PlanJson.parse(plan, "the durations' plan"));
    spark.udf().register(name, new DurationColumns(durations), DataType.fromJson(type));
  }

  @Override
  public Row call(Integer startDomain, Long start, Integer endDomain, Long end) {
    if (start == null || end == null)
      return RowFactory.create(null, null, Durations.pathName(Durations.UNBOUNDED), false, true);
    Durations d = durations;
    synchronized (d) { // one instance serves a task's rows; its results are fields
      d.of(startDomain == null ? -1 : startDomain, start, endDomain == null ? -1 : endDomain, end);
      return RowFactory.create(
          d.durationNs, d.errNs, Durations.pathName(d.pathCode), d.flagged, d.unbounded);
    }
  }
}
