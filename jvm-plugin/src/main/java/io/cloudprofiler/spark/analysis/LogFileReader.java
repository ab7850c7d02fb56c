package io.cloudprofiler.spark.analysis;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.SerializableConfiguration;

/**
 * The reader of one log file of a task's pack: each Arrow batch becomes a columnar batch of the
 * columns the query asks for, the file's two integer columns copied in once, its per-file columns
 * as constants, the time columns computed from the TSC column by the domain's translation.
 */
final class LogFileReader implements PartitionReader<ColumnarBatch> {
  /** Serialized to the executors with the columns asked for and the Hadoop settings. */
  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final StructType schema;
    private final Broadcast<SerializableConfiguration> hadoop;

    Factory(StructType schema, Broadcast<SerializableConfiguration> hadoop) {
      this.schema = schema;
      this.hadoop = hadoop;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition pack) {
      return FilePacks.<LogFilePart, ColumnarBatch>reader(
          pack, part -> new LogFileReader(part, schema, hadoop.value()));
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new UnsupportedOperationException("log files are read as columnar batches only");
    }
  }

  /** Where a column's values come from. */
  private enum Source {
    FIRST, // the file's first column (tuple_id, period_start_tsc)
    SECOND, // its second (tsc, count)
    T_NS,
    ERR_NS,
    EXTRAPOLATED,
    UNBOUNDED,
    CONSTANT
  }

  private final LogFilePart part;
  private final StructType schema;
  private final SerializableConfiguration hadoop;
  private final Source[] sources;
  private final boolean translates;
  private LogBatches batches;
  private OnHeapColumnVector[] vectors;
  private int capacity;
  private long[] tsc = new long[0];
  private double[] tNs = new double[0];
  private double[] errNs = new double[0];
  private boolean[] extrapolated = new boolean[0];
  private boolean[] unbounded = new boolean[0];
  private ColumnarBatch current;

  private LogFileReader(LogFilePart part, StructType schema, SerializableConfiguration hadoop) {
    this.part = part;
    this.schema = schema;
    this.hadoop = hadoop;
    StructField[] fields = schema.fields();
    sources = new Source[fields.length];
    boolean time = false;
    for (int c = 0; c < fields.length; c++) {
      sources[c] = source(fields[c].name());
      time |= sources[c].ordinal() >= Source.T_NS.ordinal() && sources[c] != Source.CONSTANT;
    }
    translates = time;
  }

  private Source source(String column) {
    switch (column) {
      case "tuple_id":
        return part.records ? Source.FIRST : Source.CONSTANT;
      case "tsc":
        return part.records ? Source.SECOND : Source.CONSTANT;
      case "period_start_tsc":
        return part.records ? Source.CONSTANT : Source.FIRST;
      case "count":
        return part.records ? Source.CONSTANT : Source.SECOND;
      case "task_attempt_id":
        return part.taskChannel ? Source.FIRST : Source.CONSTANT;
      case "t_ns":
        return Source.T_NS;
      case "err_ns":
        return Source.ERR_NS;
      case "extrapolated":
        return Source.EXTRAPOLATED;
      case "unbounded":
        return Source.UNBOUNDED;
      default:
        return Source.CONSTANT; // a per-file column, or null where the file has none
    }
  }

  @Override
  public boolean next() throws IOException {
    if (batches == null) batches = open();
    if (!batches.next()) return false;
    int n = batches.rows;
    if (n > capacity) grow(n);
    if (translates) {
      byte[] ticks = batches.columns[part.records ? 1 : 0];
      ByteBuffer.wrap(ticks).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(tsc, 0, n);
      part.axis.translate(tsc, n, tNs, errNs, extrapolated, unbounded);
    }
    StructField[] fields = schema.fields();
    ColumnVector[] columns = new ColumnVector[fields.length];
    for (int c = 0; c < fields.length; c++) {
      if (sources[c] == Source.CONSTANT) {
        columns[c] = constant(fields[c], n);
        continue;
      }
      OnHeapColumnVector v = vectors[c];
      v.reset();
      switch (sources[c]) {
        case FIRST:
        case SECOND:
          v.putLongsLittleEndian(0, n, batches.columns[sources[c] == Source.FIRST ? 0 : 1], 0);
          break;
        case T_NS:
          v.putDoubles(0, n, tNs, 0);
          break;
        case ERR_NS:
          v.putDoubles(0, n, errNs, 0);
          break;
        case EXTRAPOLATED:
          for (int i = 0; i < n; i++) v.putBoolean(i, extrapolated[i]);
          break;
        default:
          for (int i = 0; i < n; i++) v.putBoolean(i, unbounded[i]);
          break;
      }
      columns[c] = v;
    }
    current = new ColumnarBatch(columns, n);
    return true;
  }

  private LogBatches open() throws IOException {
    Path path;
    try {
      path = new Path(new URI(part.path)); // a path as Spark's file listing spells it (URL-encoded)
    } catch (URISyntaxException e) {
      throw new IOException("not a file URI: " + part.path, e);
    }
    FileSystem fs = path.getFileSystem(hadoop.value());
    long size = fs.getFileStatus(path).getLen();
    return new LogBatches(fs.open(path, 1 << 20), size, part.path);
  }

  private void grow(int n) {
    StructField[] fields = schema.fields();
    if (vectors != null) for (OnHeapColumnVector v : vectors) if (v != null) v.close();
    vectors = new OnHeapColumnVector[fields.length];
    for (int c = 0; c < fields.length; c++) {
      if (sources[c] != Source.CONSTANT)
        vectors[c] = new OnHeapColumnVector(n, fields[c].dataType());
    }
    if (translates) {
      tsc = new long[n];
      tNs = new double[n];
      errNs = new double[n];
      extrapolated = new boolean[n];
      unbounded = new boolean[n];
    }
    capacity = n;
  }

  private ConstantColumnVector constant(StructField field, int n) {
    ConstantColumnVector v = new ConstantColumnVector(n, field.dataType());
    Object value = part.constants.get(field.name());
    DataType type = field.dataType();
    if (value == null) v.setNull();
    else if (type.equals(DataTypes.StringType))
      v.setUtf8String(UTF8String.fromString((String) value));
    else if (type.equals(DataTypes.LongType)) v.setLong(((Number) value).longValue());
    else if (type.equals(DataTypes.IntegerType)) v.setInt(((Number) value).intValue());
    else throw new IllegalArgumentException("column " + field.name() + " of type " + type);
    return v;
  }

  @Override
  public ColumnarBatch get() {
    return current;
  }

  @Override
  public void close() throws IOException {
    if (vectors != null) for (OnHeapColumnVector v : vectors) if (v != null) v.close();
    if (batches != null) batches.close();
  }
}
