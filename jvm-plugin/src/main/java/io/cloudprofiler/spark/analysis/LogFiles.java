package io.cloudprofiler.spark.analysis;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.util.SerializableConfiguration;

/**
 * The records or counters of an application's log files, read in the executors' JVMs: {@code
 * spark.read.format("io.cloudprofiler.spark.analysis.LogFiles").schema(...).option("plan",
 * ...).load()}, as the analysis's reader.log_frame does. The plan (see {@link LogFilePart#parse})
 * lists the files with their per-file columns and the time axis's translation of each TSC domain;
 * the schema names the columns of reader.py's RECORD_SCHEMA or COUNTER_SCHEMA (and the internal
 * domain_id, channel_id) wanted. Files are packed into partitions as Spark packs small files
 * ({@link FilePacks}); Spark reads only the columns a query uses, and a filter on a per-file text
 * column (channel, host, ...) keeps the files it holds for.
 */
public final class LogFiles implements TableProvider {
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    throw new IllegalArgumentException("the log files' reader needs its schema: .schema(...)");
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new BatchTable("cloudprofiler log files", schema) {
      @Override
      public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        String plan = options.get("plan");
        if (plan == null)
          throw new IllegalArgumentException("the log files' reader needs .option(\"plan\", ...)");
        return new FilesScan(LogFilePart.parse(plan), schema);
      }
    };
  }

  /** The per-file text columns a filter can select files by. */
  private static final Set<String> FILE_TEXT =
      Set.of("channel", "handler", "host", "executor_id", "domain", "file");

  private static final class FilesScan
      implements ScanBuilder,
          SupportsPushDownRequiredColumns,
          SupportsPushDownFilters,
          Scan,
          Batch {
    private List<LogFilePart> files;
    private StructType schema;
    private Filter[] pushed = new Filter[0];

    FilesScan(List<LogFilePart> files, StructType schema) {
      this.files = files;
      this.schema = schema;
    }

    @Override
    public void pruneColumns(StructType required) {
      schema = required;
    }

    /** Equality and IN on a per-file text column select files; the rest Spark applies to rows. */
    @Override
    public Filter[] pushFilters(Filter[] filters) {
      List<Filter> kept = new ArrayList<>();
      List<Filter> rest = new ArrayList<>();
      for (Filter f : filters) {
        String column =
            f instanceof EqualTo
                ? ((EqualTo) f).attribute()
                : f instanceof In ? ((In) f).attribute() : null;
        if (column == null || !FILE_TEXT.contains(column)) {
          rest.add(f);
          continue;
        }
        Set<Object> values =
            new HashSet<>(
                f instanceof EqualTo
                    ? List.of(((EqualTo) f).value())
                    : Arrays.asList(((In) f).values()));
        List<LogFilePart> selected = new ArrayList<>();
        for (LogFilePart part : files) {
          Object value = part.constants.get(column);
          if (value != null && values.contains(value)) selected.add(part);
        }
        files = selected;
        kept.add(f);
      }
      pushed = kept.toArray(new Filter[0]);
      return rest.toArray(new Filter[0]);
    }

    @Override
    public Filter[] pushedFilters() {
      return pushed;
    }

    @Override
    public Scan build() {
      return this;
    }

    @Override
    public StructType readSchema() {
      return schema;
    }

    @Override
    public String description() {
      return "cloudprofiler log files (" + files.size() + ")";
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      return FilePacks.pack(files, f -> f.bytes);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      SparkSession spark = SparkSession.active();
      Configuration hadoop = new Configuration(spark.sparkContext().hadoopConfiguration());
      return new LogFileReader.Factory(
          schema,
          JavaSparkContext.fromSparkContext(spark.sparkContext())
              .broadcast(new SerializableConfiguration(hadoop)));
    }
  }
}
