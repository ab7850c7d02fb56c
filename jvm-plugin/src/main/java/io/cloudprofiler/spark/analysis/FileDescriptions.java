package io.cloudprofiler.spark.analysis;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.arrow.flatbuf.KeyValue;
import org.apache.arrow.flatbuf.Schema;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.SerializableConfiguration;

/**
 * A row per {@code *.arrows} file below an application's folder, read in the executors' JVMs:
 * {@code spark.read.format("io.cloudprofiler.spark.analysis.FileDescriptions").option("path",
 * ...).load()}, the analysis's catalog (catalog.py's FILE_ROW, the same columns in the same order).
 * The files' bytes stay in the executors: only the schema (an Arrow IPC message), whether the file
 * ended or was cut, its batches, rows and TSC range and median come back. A driver table's row has
 * its schema only. The listing leaves out names starting with "." or "_" below the folder, as
 * Spark's file sources do (a file being written under a hidden name).
 */
public final class FileDescriptions implements TableProvider {
  static final StructType SCHEMA =
      new StructType()
          .add("file", DataTypes.StringType)
          .add("schema", DataTypes.BinaryType)
          .add("ended", DataTypes.BooleanType)
          .add("cut", DataTypes.BooleanType)
          .add("batches", DataTypes.LongType)
          .add("rows", DataTypes.LongType)
          .add("min_tsc", DataTypes.LongType)
          .add("max_tsc", DataTypes.LongType)
          .add("median_tsc", DataTypes.DoubleType)
          .add("error", DataTypes.StringType);

  /** The TSC values a file's median is taken from, at most (a systematic sample beyond). */
  static final int MEDIAN_SAMPLE = 1 << 20;

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return SCHEMA;
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    String folder = properties.get("path");
    if (folder == null)
      throw new IllegalArgumentException("the file descriptions need .option(\"path\", folder)");
    return new BatchTable("cloudprofiler file descriptions", SCHEMA) {
      @Override
      public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        return new Listing(folder);
      }
    };
  }

  /** One file to describe. */
  static final class File implements Serializable {
    private static final long serialVersionUID = 1L;
    final String path;
    final long size;

    File(String path, long size) {
      this.path = path;
      this.size = size;
    }
  }

  private static final class Listing implements ScanBuilder, Scan, Batch {
    private final String folder;

    Listing(String folder) {
      this.folder = folder;
    }

    @Override
    public Scan build() {
      return this;
    }

    @Override
    public StructType readSchema() {
      return SCHEMA;
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      Configuration hadoop = SparkSession.active().sparkContext().hadoopConfiguration();
      try {
        return FilePacks.pack(list(new Path(folder), hadoop), f -> f.size);
      } catch (IOException e) {
        throw new IllegalStateException(folder + ": " + e.getMessage(), e);
      }
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      SparkSession spark = SparkSession.active();
      Configuration hadoop = new Configuration(spark.sparkContext().hadoopConfiguration());
      return new Factory(
          JavaSparkContext.fromSparkContext(spark.sparkContext())
              .broadcast(new SerializableConfiguration(hadoop)));
    }
  }

  /**
   * Folders below an application's folder, at most (the plugin's layout nests two): deeper is a
   * link that leads back up, which the listing would follow forever.
   */
  static final int MAX_DEPTH = 16;

  /**
   * Every {@code *.arrows} file below {@code root}, none below a hidden name, in name order. Listed
   * a folder at a time: Hadoop's recursive listing of the local file system reads each file's
   * permissions, in a process it starts per file (273 files: a second).
   */
  static List<File> list(Path root, Configuration hadoop) throws IOException {
    FileSystem fs = root.getFileSystem(hadoop);
    Path qualified = fs.makeQualified(root);
    if (!fs.getFileStatus(qualified).isDirectory())
      throw new IOException("not a folder (Path does not exist or is a file)");
    String prefix = spelled(qualified);
    List<File> files = new ArrayList<>();
    ArrayDeque<Path> folders = new ArrayDeque<>(List.of(qualified));
    while (!folders.isEmpty()) {
      for (FileStatus status : fs.listStatus(folders.pop())) {
        String path = spelled(status.getPath());
        if (!path.startsWith(prefix)) continue;
        String below = path.substring(prefix.length());
        if (hidden(below)) continue;
        if (status.isDirectory()) {
          if (depth(below) > MAX_DEPTH)
            throw new IOException(
                path
                    + ": folders nested more than "
                    + MAX_DEPTH
                    + " deep (a link that leads back up?)");
          folders.push(status.getPath());
        } else if (path.endsWith(".arrows")) files.add(new File(path, status.getLen()));
      }
    }
    files.sort((a, b) -> a.path.compareTo(b.path));
    return files;
  }

  /**
   * A path as Spark's file sources spell it (binaryFile's path column, which LogFileReader reads):
   * URL-encoded, no empty authority ("file:/tmp/a%20b", "hdfs://host:8020/x").
   */
  static String spelled(Path path) throws IOException {
    URI uri = path.toUri();
    String authority =
        uri.getAuthority() == null || uri.getAuthority().isEmpty() ? null : uri.getAuthority();
    try {
      return new URI(uri.getScheme(), authority, uri.getPath(), null, null).toString();
    } catch (URISyntaxException e) {
      throw new IOException("cannot spell " + path + " as a URI", e);
    }
  }

  /** The folders a path below the application's folder names ("/a/b": 2). */
  private static int depth(String below) {
    int n = 0;
    for (String name : below.split("/")) if (!name.isEmpty()) n++;
    return n;
  }

  /**
   * Whether a name of the path below the folder starts with "." or "_", as Spark's listing says.
   */
  static boolean hidden(String below) {
    for (String name : below.split("/")) {
      if (name.startsWith(".") || (name.startsWith("_") && !name.contains("="))) return true;
    }
    return false;
  }

  private static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final Broadcast<SerializableConfiguration> hadoop;

    Factory(Broadcast<SerializableConfiguration> hadoop) {
      this.hadoop = hadoop;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition pack) {
      return FilePacks.<File, InternalRow>reader(
          pack, file -> row(describe(file, hadoop.value().value())));
    }
  }

  /** A reader of the one row given. */
  private static PartitionReader<InternalRow> row(InternalRow row) {
    return new PartitionReader<>() {
      private boolean read;

      @Override
      public boolean next() {
        if (read) return false;
        read = true;
        return true;
      }

      @Override
      public InternalRow get() {
        return row;
      }

      @Override
      public void close() {}
    };
  }

  /** The row of one file; a file that cannot be read is described by its error. */
  static InternalRow describe(File file, Configuration hadoop) {
    try {
      Path path = new Path(new URI(file.path));
      try (LogBatches batches =
          new LogBatches(path.getFileSystem(hadoop).open(path, 1 << 20), file.size, file.path)) {
        return describe(file.path, batches);
      }
    } catch (IOException | URISyntaxException | RuntimeException e) {
      return row(
          file.path, null, false, true, 0, 0, null, null, null, String.valueOf(e.getMessage()));
    }
  }

  /**
   * A file as catalog.describe_file describes it: ended where it has its end (the file layout's
   * footer, or a stream not marked {@code closed: false}) and no repair's cut; cut where bytes of
   * an incomplete batch follow its last complete one, or a repair recorded its cut.
   */
  static InternalRow describe(String path, LogBatches batches) throws IOException {
    if (!batches.readSchema()) throw new IOException(path + " holds no Arrow schema");
    Schema schema = batches.schema();
    String kind = kind(schema);
    if (kind == null) // a driver table: its schema says which
    return row(path, batches.schemaMessage(), true, false, 0, 0, null, null, null, null);
    Median median = new Median();
    long count = 0;
    long rows = 0;
    long low = Long.MAX_VALUE;
    long high = Long.MIN_VALUE;
    int column = kind.equals("records") ? 1 : 0;
    while (batches.next()) {
      count++;
      rows += batches.rows;
      LongBuffer values =
          ByteBuffer.wrap(batches.columns[column]).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
      for (int i = 0; i < batches.rows; i++) {
        long v = values.get(i);
        if (v < low) low = v;
        if (v > high) high = v;
        median.add(v);
      }
    }
    boolean footer = batches.fileLayout() && batches.endMarker();
    boolean repaired = metadata(schema, "cut.bytes") != null;
    boolean cut = batches.leftover();
    boolean incomplete = !footer && (cut || "false".equals(trimmed(metadata(schema, "closed"))));
    return row(
        path,
        batches.schemaMessage(),
        !incomplete && !repaired,
        cut || repaired,
        count,
        rows,
        rows > 0 ? low : null,
        rows > 0 ? high : null,
        rows > 0 ? median.value() : null,
        null);
  }

  /** "records" (tuple_id, tsc), "counters" (period_start_tsc, count), or null for a table. */
  private static String kind(Schema schema) {
    if (schema.fieldsLength() != 2) return null;
    List<String> names = Arrays.asList(schema.fields(0).name(), schema.fields(1).name());
    if (names.equals(List.of("tuple_id", "tsc"))) return "records";
    if (names.equals(List.of("period_start_tsc", "count"))) return "counters";
    return null;
  }

  private static String metadata(Schema schema, String key) {
    KeyValue pair = new KeyValue();
    for (int i = 0; i < schema.customMetadataLength(); i++) {
      schema.customMetadata(pair, i);
      if (key.equals(pair.key())) return pair.value();
    }
    return null;
  }

  private static String trimmed(String value) {
    return value == null ? null : value.strip(); // padded in place, rewritten when the file closes
  }

  private static InternalRow row(
      String path,
      byte[] schema,
      boolean ended,
      boolean cut,
      long batches,
      long rows,
      Long low,
      Long high,
      Double median,
      String error) {
    return new GenericInternalRow(
        new Object[] {
          UTF8String.fromString(path),
          schema,
          ended,
          cut,
          batches,
          rows,
          low,
          high,
          median,
          error == null ? null : UTF8String.fromString(error)
        });
  }

  /**
   * The median of a file's TSC values: exact up to MEDIAN_SAMPLE values, else of a systematic
   * sample (every 2^k-th value, k doubling as the file grows): a channel's median time orders the
   * trace points, where a sample's median is as good.
   */
  static final class Median {
    private long[] kept = new long[1024]; // grown to MEDIAN_SAMPLE: most files hold far fewer
    private int size;
    private long stride = 1;
    private long seen;

    void add(long value) {
      if (seen++ % stride != 0) return;
      if (size == kept.length && size < MEDIAN_SAMPLE) kept = Arrays.copyOf(kept, 2 * size);
      if (size == kept.length) {
        for (int i = 0; i < size / 2; i++) kept[i] = kept[2 * i];
        size /= 2;
        stride *= 2;
        if ((seen - 1) % stride != 0) return;
      }
      kept[size++] = value;
    }

    /** The value of rank ceil(n / 2) among those kept. */
    double value() {
      long[] sorted = Arrays.copyOf(kept, size);
      Arrays.sort(sorted);
      return sorted[(size + 1) / 2 - 1];
    }
  }
}
