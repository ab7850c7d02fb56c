package io.cloudprofiler.harness.source;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.apache.arrow.flatbuf.Field;
import org.apache.arrow.flatbuf.FloatingPoint;
import org.apache.arrow.flatbuf.Int;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.Precision;
import org.apache.arrow.flatbuf.Schema;
import org.apache.arrow.flatbuf.Type;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The columns the source hands Spark: the payload's (from the emitters' Arrow schema; unsigned
 * integers widen to the next signed type, Spark having none), then id, event_time and emit_tsc,
 * which every bucket's header gives; cut to the {@code columns} option. Payload columns are
 * fixed-width: integers, floats and booleans.
 */
final class PayloadSchema {
  static final String ID = "id";
  static final String EVENT_TIME = "event_time";
  static final String EMIT_TSC = "emit_tsc";

  /** The columns every bucket's header gives, after the payload's. */
  static final List<String> FROM_HEADER = List.of(ID, EVENT_TIME, EMIT_TSC);

  /** How a payload column's values lie in a record batch's body, and the Spark type they get. */
  enum Kind {
    INT8(1, DataTypes.ByteType),
    INT16(2, DataTypes.ShortType),
    INT32(4, DataTypes.IntegerType),
    INT64(8, DataTypes.LongType),
    UINT8(1, DataTypes.ShortType),
    UINT16(2, DataTypes.IntegerType),
    UINT32(4, DataTypes.LongType),
    UINT64(8, DataTypes.LongType),
    FLOAT32(4, DataTypes.FloatType),
    FLOAT64(8, DataTypes.DoubleType),
    BOOL(0, DataTypes.BooleanType);

    final int bytes;
    final DataType sparkType;

    Kind(int bytes, DataType sparkType) {
      this.bytes = bytes;
      this.sparkType = sparkType;
    }
  }

  final List<String> payloadNames;
  final List<Kind> payloadKinds;

  /** The selected output columns, as indexes into payload columns then id, event_time, emit_tsc. */
  final int[] selected;

  /**
   * The most bytes an Arrow record batch message of {@code tuples} rows of the payload columns can
   * take: its metadata (a few hundred bytes, 32 a column), then each column's validity bitmap and
   * values (a bitmap for booleans), each padded to 64 bytes.
   */
  long maxBucketBytes(long tuples) {
    long bitmap = (tuples + 7) / 8 + 64;
    long bytes = (64 << 10) + 64L * payloadKinds.size();
    for (Kind kind : payloadKinds)
      bytes += bitmap + (kind == Kind.BOOL ? bitmap : tuples * kind.bytes + 64);
    return bytes;
  }

  private PayloadSchema(List<String> names, List<Kind> kinds, int[] selected) {
    this.payloadNames = names;
    this.payloadKinds = kinds;
    this.selected = selected;
  }

  /** The schema of an Arrow IPC schema message, cut to {@code columns} (null: every column). */
  static PayloadSchema parse(byte[] schemaMessage, List<String> columns) {
    Message message = message(schemaMessage);
    if (message.headerType() != MessageHeader.Schema)
      throw new IllegalStateException(
          "cloudprofiler source: the emitter's schema is not an Arrow schema");
    Schema schema = (Schema) message.header(new Schema());
    List<String> names = new ArrayList<>();
    List<Kind> kinds = new ArrayList<>();
    for (int i = 0; i < schema.fieldsLength(); i++) {
      Field field = schema.fields(i);
      names.add(field.name());
      kinds.add(kind(field));
    }
    List<String> all = new ArrayList<>(names);
    all.addAll(FROM_HEADER);
    int[] selected;
    if (columns == null) {
      selected = new int[all.size()];
      Arrays.setAll(selected, i -> i);
    } else {
      List<String> bad = new ArrayList<>();
      for (int i = 0; i < columns.size(); i++)
        if (!all.contains(columns.get(i)) || columns.subList(0, i).contains(columns.get(i)))
          bad.add("'" + columns.get(i) + "'");
      if (!bad.isEmpty())
        throw new IllegalArgumentException(
            "cloudprofiler source: option columns names "
                + String.join(", ", bad)
                + ": expected distinct columns of "
                + String.join(", ", all));
      selected = columns.stream().mapToInt(all::indexOf).toArray();
    }
    return new PayloadSchema(
        Collections.unmodifiableList(names), Collections.unmodifiableList(kinds), selected);
  }

  /** The Spark schema of the selected columns. */
  StructType sparkSchema() {
    StructField[] fields = new StructField[selected.length];
    for (int i = 0; i < selected.length; i++) {
      int column = selected[i];
      int extra = column - payloadNames.size();
      fields[i] =
          extra < 0
              ? DataTypes.createStructField(
                  payloadNames.get(column), payloadKinds.get(column).sparkType, true)
              : DataTypes.createStructField(
                  FROM_HEADER.get(extra),
                  extra == 1 ? DataTypes.TimestampType : DataTypes.LongType,
                  false);
    }
    return new StructType(fields);
  }

  private static Kind kind(Field field) {
    switch (field.typeType()) {
      case Type.Int:
        Int type = (Int) field.type(new Int());
        int bits = type.bitWidth();
        int index = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : bits == 64 ? 3 : -1;
        if (index >= 0) return Kind.values()[index + (type.isSigned() ? 0 : 4)];
        break;
      case Type.FloatingPoint:
        short precision = ((FloatingPoint) field.type(new FloatingPoint())).precision();
        if (precision == Precision.SINGLE) return Kind.FLOAT32;
        if (precision == Precision.DOUBLE) return Kind.FLOAT64;
        break;
      case Type.Bool:
        return Kind.BOOL;
      default:
        break;
    }
    throw new IllegalStateException(
        "cloudprofiler source: payload column '"
            + field.name()
            + "' has Arrow type "
            + Type.name(field.typeType())
            + ", which this source does not read (payload columns are integers, floats or"
            + " booleans)");
  }

  /** The flatbuffer Message of an encapsulated IPC message (with or without continuation). */
  static Message message(byte[] ipc) {
    ByteBuffer buffer = ByteBuffer.wrap(ipc).order(ByteOrder.LITTLE_ENDIAN);
    buffer.position(metadataStart(ipc));
    return Message.getRootAsMessage(buffer.slice().order(ByteOrder.LITTLE_ENDIAN));
  }

  /** Where an encapsulated message's flatbuffer starts: after the continuation and the length. */
  static int metadataStart(byte[] ipc) {
    return ByteBuffer.wrap(ipc).order(ByteOrder.LITTLE_ENDIAN).getInt(0) == -1 ? 8 : 4;
  }

  /** Where an encapsulated message's body starts. */
  static int bodyStart(byte[] ipc) {
    int start = metadataStart(ipc);
    return start + ByteBuffer.wrap(ipc).order(ByteOrder.LITTLE_ENDIAN).getInt(start - 4);
  }
}
