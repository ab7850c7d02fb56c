package io.cloudprofiler.harness.source;

import io.cloudprofiler.spark.sql.SourceRows;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.readStream.format("cloudprofiler-generator").option("endpoints", ...)}: the
 * generator's serve-mode emitters as a streaming source, read in the executors' JVMs and handed to
 * Spark as columnar batches (no Python worker, no row conversion). Options: endpoints (required,
 * comma-separated tcp://host:port), timeout (seconds per request, default 30), maxTuplesPerTrigger
 * (admission control, default unlimited), traceChannel (log every tuple id with the TSC at which
 * the source delivers it), columns (comma-separated: the columns handed to Spark, in that order,
 * default all). The schema comes from the first emitter: its payload columns, then id, event_time
 * and emit_tsc; Spark reads only those a query uses.
 */
public final class GeneratorSource implements TableProvider, DataSourceRegister {
  public static final String NAME = "cloudprofiler-generator";

  @Override
  public String shortName() {
    return NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return new Stream(new SourceOptions(options)).schema.sparkSchema();
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new GeneratorTable(schema);
  }

  /** The options and the payload schema, asked of the first emitter. */
  private static final class Stream {
    final SourceOptions options;
    final byte[] payloadSchema;
    final PayloadSchema schema;

    Stream(SourceOptions options) {
      this.options = options;
      try (EmitterClient client = new EmitterClient(options.endpoints.get(0), options.timeoutS)) {
        payloadSchema = client.payloadSchema();
      }
      schema = PayloadSchema.parse(payloadSchema, options.columns);
    }
  }

  private static final class GeneratorTable implements Table, SupportsRead {
    private final StructType schema;

    GeneratorTable(StructType schema) {
      this.schema = schema;
    }

    @Override
    public String name() {
      return NAME;
    }

    @Override
    @SuppressWarnings("deprecation") // columns() is Spark 4's; Spark 3.5 asks for schema()
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Set.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return new PrunedScan(new Stream(new SourceOptions(options)), schema);
    }
  }

  /** Spark asks only for the columns a query uses, as of a columnar file. */
  private static final class PrunedScan
      implements ScanBuilder, SupportsPushDownRequiredColumns, Scan, SourceRows.Scan {
    private final Stream stream;
    private StructType schema;

    PrunedScan(Stream stream, StructType schema) {
      this.stream = stream;
      this.schema = schema;
    }

    @Override
    public void pruneColumns(StructType required) {
      schema = required;
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
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new GeneratorStream(
          stream.options.withColumns(Arrays.asList(schema.fieldNames())), stream.payloadSchema);
    }
  }
}
