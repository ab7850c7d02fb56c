package io.cloudprofiler.harness.source;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import org.apache.arrow.flatbuf.Buffer;
import org.apache.arrow.flatbuf.FieldNode;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A bucket as a Spark columnar batch without copying it: the payload's columns read their values
 * where they lie in the received Arrow record batch message, and id, event_time and emit_tsc are
 * computed from the bucket's header (first id + row; the emission time and TSC, the same for the
 * whole bucket). Spark's generated code reads each column through one class, so its calls inline.
 */
final class BucketColumns {
  private BucketColumns() {}

  static ColumnarBatch batch(PayloadSchema schema, EmitterClient.Bucket bucket) {
    byte[] ipc = bucket.payload();
    Message message = PayloadSchema.message(ipc);
    if (message.headerType() != MessageHeader.RecordBatch)
      throw new IllegalStateException(
          "cloudprofiler source: a bucket is not an Arrow record batch");
    RecordBatch records = (RecordBatch) message.header(new RecordBatch());
    if (records.compression() != null)
      throw new IllegalStateException(
          "cloudprofiler source: a bucket's record batch is compressed, which this source does not"
              + " read");
    int rows = (int) records.length();
    if (rows != bucket.tuples() || records.nodesLength() != schema.payloadKinds.size())
      throw new IllegalStateException(
          "cloudprofiler source: a bucket of "
              + bucket.tuples()
              + " tuples holds "
              + rows
              + " rows of "
              + records.nodesLength()
              + " columns, the schema has "
              + schema.payloadKinds.size());
    int body = PayloadSchema.bodyStart(ipc);
    ColumnVector[] columns = new ColumnVector[schema.selected.length];
    for (int i = 0; i < columns.length; i++) {
      int column = schema.selected[i];
      int extra = column - schema.payloadKinds.size();
      if (extra == 0) columns[i] = new Ids(bucket.firstId());
      else if (extra == 1)
        columns[i] = new Constant(DataTypes.TimestampType, bucket.wallNs() / 1000);
      else if (extra == 2) columns[i] = new Constant(DataTypes.LongType, bucket.tsc());
      else {
        columns[i] = payload(schema.payloadKinds.get(column), ipc, body, records, column, rows);
        if (schema.payloadKinds.get(column) == PayloadSchema.Kind.UINT64)
          checkBigint(columns[i], schema.payloadNames.get(column), rows);
      }
    }
    return new ColumnarBatch(columns, rows);
  }

  /**
   * A uint64 column reads as Spark's bigint: a value past 2^63 - 1 fails the query, naming it,
   * instead of reading negative.
   */
  private static void checkBigint(ColumnVector column, String name, int rows) {
    for (int row = 0; row < rows; row++) {
      if (!column.isNullAt(row) && column.getLong(row) < 0)
        throw new IllegalStateException(
            "cloudprofiler source: uint64 column "
                + name
                + " holds "
                + Long.toUnsignedString(column.getLong(row))
                + ", past the range of Spark's bigint (2^63 - 1)");
    }
  }

  /**
   * Column {@code column}'s vector: its buffers are the 2 * column-th (validity) and next (data).
   */
  private static ColumnVector payload(
      PayloadSchema.Kind kind, byte[] ipc, int body, RecordBatch records, int column, int rows) {
    FieldNode node = records.nodes(column);
    Buffer validity = records.buffers(2 * column);
    Buffer data = records.buffers(2 * column + 1);
    long need = kind == PayloadSchema.Kind.BOOL ? (rows + 7) / 8 : (long) rows * kind.bytes;
    if (body + data.offset() + need > ipc.length || data.length() < need)
      throw new IllegalStateException(
          "cloudprofiler source: a bucket's column " + column + " is shorter than its rows");
    int nullBits =
        node.nullCount() > 0 && validity.length() > 0 ? body + (int) validity.offset() : -1;
    int at = body + (int) data.offset();
    switch (kind) {
      case INT8:
        return new Int8(ipc, at, nullBits, node.nullCount());
      case INT16:
        return new Int16(ipc, at, nullBits, node.nullCount());
      case INT32:
        return new Int32(ipc, at, nullBits, node.nullCount());
      case INT64:
        return new Int64(ipc, at, nullBits, node.nullCount());
      case UINT8:
        return new UInt8(ipc, at, nullBits, node.nullCount());
      case UINT16:
        return new UInt16(ipc, at, nullBits, node.nullCount());
      case UINT32:
        return new UInt32(ipc, at, nullBits, node.nullCount());
      case UINT64:
        return new Int64(ipc, at, nullBits, node.nullCount());
      case FLOAT32:
        return new Float32(ipc, at, nullBits, node.nullCount());
      case FLOAT64:
        return new Float64(ipc, at, nullBits, node.nullCount());
      default:
        return new Bool(ipc, at, nullBits, node.nullCount());
    }
  }

  /** A column that answers only the getter of its type; the others are never called by Spark. */
  private abstract static class Column extends ColumnVector {
    Column(DataType type) {
      super(type);
    }

    @Override
    public void close() {}

    @Override
    public boolean hasNull() {
      return false;
    }

    @Override
    public int numNulls() {
      return 0;
    }

    @Override
    public boolean isNullAt(int row) {
      return false;
    }

    @Override
    public boolean getBoolean(int row) {
      throw unsupported();
    }

    @Override
    public byte getByte(int row) {
      throw unsupported();
    }

    @Override
    public short getShort(int row) {
      throw unsupported();
    }

    @Override
    public int getInt(int row) {
      throw unsupported();
    }

    @Override
    public long getLong(int row) {
      throw unsupported();
    }

    @Override
    public float getFloat(int row) {
      throw unsupported();
    }

    @Override
    public double getDouble(int row) {
      throw unsupported();
    }

    @Override
    public ColumnarArray getArray(int row) {
      throw unsupported();
    }

    @Override
    public ColumnarMap getMap(int row) {
      throw unsupported();
    }

    @Override
    public Decimal getDecimal(int row, int precision, int scale) {
      throw unsupported();
    }

    @Override
    public UTF8String getUTF8String(int row) {
      throw unsupported();
    }

    @Override
    public byte[] getBinary(int row) {
      throw unsupported();
    }

    @Override
    public ColumnVector getChild(int ordinal) {
      throw unsupported();
    }

    private UnsupportedOperationException unsupported() {
      return new UnsupportedOperationException(
          "cloudprofiler source: a " + dataType().simpleString() + " column read as another type");
    }
  }

  /** Tuple ids: the bucket's first id plus the row. */
  private static final class Ids extends Column {
    private final long first;

    Ids(long first) {
      super(DataTypes.LongType);
      this.first = first;
    }

    @Override
    public long getLong(int row) {
      return first + row;
    }
  }

  /** One value for every row (a bucket's emission time or TSC). */
  private static final class Constant extends Column {
    private final long value;

    Constant(DataType type, long value) {
      super(type);
      this.value = value;
    }

    @Override
    public long getLong(int row) {
      return value;
    }
  }

  private static final VarHandle SHORTS =
      MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle INTS =
      MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LONGS =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle FLOATS =
      MethodHandles.byteArrayViewVarHandle(float[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle DOUBLES =
      MethodHandles.byteArrayViewVarHandle(double[].class, ByteOrder.LITTLE_ENDIAN);

  /** A payload column: values from {@code at} in {@code ipc}, validity bits from {@code nulls}. */
  private abstract static class Payload extends Column {
    final byte[] ipc;
    final int at;
    private final int nullBits;
    private final long nullCount;

    Payload(PayloadSchema.Kind kind, byte[] ipc, int at, int nullBits, long nullCount) {
      super(kind.sparkType);
      this.ipc = ipc;
      this.at = at;
      this.nullBits = nullBits;
      this.nullCount = nullBits < 0 ? 0 : nullCount;
    }

    @Override
    public boolean hasNull() {
      return nullCount > 0;
    }

    @Override
    public int numNulls() {
      return (int) nullCount;
    }

    @Override
    public boolean isNullAt(int row) {
      return nullBits >= 0 && (ipc[nullBits + (row >>> 3)] & (1 << (row & 7))) == 0;
    }
  }

  private static final class Int8 extends Payload {
    Int8(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.INT8, ipc, at, nullBits, nullCount);
    }

    @Override
    public byte getByte(int row) {
      return ipc[at + row];
    }
  }

  private static final class Int16 extends Payload {
    Int16(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.INT16, ipc, at, nullBits, nullCount);
    }

    @Override
    public short getShort(int row) {
      return (short) SHORTS.get(ipc, at + 2 * row);
    }
  }

  private static final class Int32 extends Payload {
    Int32(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.INT32, ipc, at, nullBits, nullCount);
    }

    @Override
    public int getInt(int row) {
      return (int) INTS.get(ipc, at + 4 * row);
    }
  }

  /** int64, and uint64 read as int64, the type Spark gives it (checkBigint: within its range). */
  private static final class Int64 extends Payload {
    Int64(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.INT64, ipc, at, nullBits, nullCount);
    }

    @Override
    public long getLong(int row) {
      return (long) LONGS.get(ipc, at + 8 * row);
    }
  }

  private static final class UInt8 extends Payload {
    UInt8(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.UINT8, ipc, at, nullBits, nullCount);
    }

    @Override
    public short getShort(int row) {
      return (short) (ipc[at + row] & 0xFF);
    }
  }

  private static final class UInt16 extends Payload {
    UInt16(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.UINT16, ipc, at, nullBits, nullCount);
    }

    @Override
    public int getInt(int row) {
      return Short.toUnsignedInt((short) SHORTS.get(ipc, at + 2 * row));
    }
  }

  private static final class UInt32 extends Payload {
    UInt32(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.UINT32, ipc, at, nullBits, nullCount);
    }

    @Override
    public long getLong(int row) {
      return Integer.toUnsignedLong((int) INTS.get(ipc, at + 4 * row));
    }
  }

  private static final class Float32 extends Payload {
    Float32(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.FLOAT32, ipc, at, nullBits, nullCount);
    }

    @Override
    public float getFloat(int row) {
      return (float) FLOATS.get(ipc, at + 4 * row);
    }
  }

  private static final class Float64 extends Payload {
    Float64(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.FLOAT64, ipc, at, nullBits, nullCount);
    }

    @Override
    public double getDouble(int row) {
      return (double) DOUBLES.get(ipc, at + 8 * row);
    }
  }

  private static final class Bool extends Payload {
    Bool(byte[] ipc, int at, int nullBits, long nullCount) {
      super(PayloadSchema.Kind.BOOL, ipc, at, nullBits, nullCount);
    }

    @Override
    public boolean getBoolean(int row) {
      return (ipc[at + (row >>> 3)] & (1 << (row & 7))) != 0;
    }
  }
}
