package io.cloudprofiler.spark.tables;

import com.google.flatbuffers.FlatBufferBuilder;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.arrow.flatbuf.Block;
import org.apache.arrow.flatbuf.Buffer;
import org.apache.arrow.flatbuf.Field;
import org.apache.arrow.flatbuf.FieldNode;
import org.apache.arrow.flatbuf.FloatingPoint;
import org.apache.arrow.flatbuf.Footer;
import org.apache.arrow.flatbuf.Int;
import org.apache.arrow.flatbuf.KeyValue;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.MetadataVersion;
import org.apache.arrow.flatbuf.Precision;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.flatbuf.Type;
import org.apache.arrow.flatbuf.Utf8;

/**
 * The bytes of Arrow IPC messages and of the file's frame for the driver's tables, written with the
 * format's flatbuffers alone: Arrow Java's vectors need its allocator, whose start costs an
 * application a good part of a second, for tables of a few rows. Columns are int32 (Integer), int64
 * (Long), float64 (Double) or utf8 (anything else, as its text), any value may be null; no
 * compression (the Arrow columnar format, version 5).
 */
final class ArrowIpc {
  private ArrowIpc() {}

  static final byte[] MAGIC = "ARROW1\0\0".getBytes(StandardCharsets.US_ASCII);

  /** The end-of-stream marker: a continuation and a zero length. */
  static final byte[] END_OF_STREAM = {-1, -1, -1, -1, 0, 0, 0, 0};

  /**
   * A table's columns: their names and types (by the class of their values), and the schema's
   * metadata.
   */
  static final class Layout {
    private final List<String> names;
    private final byte[] types;
    private final boolean[] int32;
    private final Map<String, String> metadata;

    Layout(List<String> names, List<Class<?>> classes, Map<String, String> metadata) {
      this.names = names;
      this.metadata = metadata;
      types = new byte[names.size()];
      int32 = new boolean[names.size()];
      for (int c = 0; c < types.length; c++) {
        Class<?> k = classes.get(c);
        types[c] =
            k == Long.class || k == Integer.class
                ? Type.Int
                : k == Double.class ? Type.FloatingPoint : Type.Utf8;
        int32[c] = k == Integer.class;
      }
    }

    private boolean int32(int c) {
      return int32[c];
    }

    /** The Schema table, for a message or the footer. */
    int write(FlatBufferBuilder b) {
      int[] fields = new int[names.size()];
      for (int c = 0; c < fields.length; c++) {
        int name = b.createString(names.get(c));
        int type;
        if (types[c] == Type.Int) {
          type = Int.createInt(b, int32(c) ? 32 : 64, true);
        } else if (types[c] == Type.FloatingPoint) {
          type = FloatingPoint.createFloatingPoint(b, Precision.DOUBLE);
        } else {
          Utf8.startUtf8(b);
          type = Utf8.endUtf8(b);
        }
        int children = Field.createChildrenVector(b, new int[0]);
        fields[c] = Field.createField(b, name, true, types[c], type, 0, children, 0);
      }
      int fieldVector = org.apache.arrow.flatbuf.Schema.createFieldsVector(b, fields);
      int[] pairs = new int[metadata.size()];
      int i = 0;
      for (Map.Entry<String, String> e : metadata.entrySet()) {
        pairs[i++] =
            KeyValue.createKeyValue(b, b.createString(e.getKey()), b.createString(e.getValue()));
      }
      int meta = org.apache.arrow.flatbuf.Schema.createCustomMetadataVector(b, pairs);
      return org.apache.arrow.flatbuf.Schema.createSchema(b, (short) 0, fieldVector, meta, 0);
    }

    /** The schema message, framed. */
    byte[] message() {
      FlatBufferBuilder b = new FlatBufferBuilder(1024);
      int schema = write(b);
      b.finish(Message.createMessage(b, MetadataVersion.V5, MessageHeader.Schema, schema, 0, 0));
      return framed(b.sizedByteArray());
    }

    /**
     * A record batch of {@code rows}: {framed metadata, body}. Each column has a validity buffer
     * (of length 0 when no value is null), then its values (utf8: offsets, then bytes; a null's
     * slot is zero or empty), every buffer padded to 8 bytes.
     */
    byte[][] batch(List<Object[]> rows) {
      int n = rows.size();
      ByteArrayOutputStream body = new ByteArrayOutputStream();
      List<long[]> buffers = new ArrayList<>();
      int[] nulls = new int[types.length];
      for (int c = 0; c < types.length; c++) {
        byte[] validity = new byte[(n + 7) / 8];
        for (int i = 0; i < n; i++) {
          if (rows.get(i)[c] == null) nulls[c]++;
          else validity[i / 8] |= (byte) (1 << (i % 8));
        }
        if (nulls[c] == 0) buffers.add(new long[] {body.size(), 0});
        else append(body, buffers, validity);
        if (types[c] == Type.Utf8) {
          ByteBuffer offsets = little(4L * (n + 1));
          ByteArrayOutputStream data = new ByteArrayOutputStream();
          offsets.putInt(0);
          for (Object[] row : rows) {
            if (row[c] != null)
              data.writeBytes(String.valueOf(row[c]).getBytes(StandardCharsets.UTF_8));
            offsets.putInt(data.size());
          }
          append(body, buffers, offsets.array());
          append(body, buffers, data.toByteArray());
        } else {
          ByteBuffer values = little((long) n * (int32(c) ? 4 : 8));
          for (Object[] row : rows) {
            Object v = row[c];
            if (int32(c)) values.putInt(v == null ? 0 : (Integer) v);
            else if (types[c] == Type.Int)
              values.putLong(v == null ? 0L : ((Number) v).longValue());
            else values.putDouble(v == null ? 0.0 : (Double) v);
          }
          append(body, buffers, values.array());
        }
      }
      FlatBufferBuilder b = new FlatBufferBuilder(1024);
      RecordBatch.startNodesVector(b, types.length);
      for (int c = types.length - 1; c >= 0; c--) FieldNode.createFieldNode(b, n, nulls[c]);
      int nodes = b.endVector();
      RecordBatch.startBuffersVector(b, buffers.size());
      for (int i = buffers.size() - 1; i >= 0; i--)
        Buffer.createBuffer(b, buffers.get(i)[0], buffers.get(i)[1]);
      int bufferVector = b.endVector();
      RecordBatch.startRecordBatch(b);
      RecordBatch.addLength(b, n);
      RecordBatch.addNodes(b, nodes);
      RecordBatch.addBuffers(b, bufferVector);
      int batch = RecordBatch.endRecordBatch(b);
      b.finish(
          Message.createMessage(
              b, MetadataVersion.V5, MessageHeader.RecordBatch, batch, body.size(), 0));
      return new byte[][] {framed(b.sizedByteArray()), body.toByteArray()};
    }

    /**
     * The file's end: the end-of-stream marker, the footer that lists the batches ({offset in the
     * file, framed metadata length, body length} each), its length and the magic.
     */
    byte[] end(List<long[]> blocks) {
      FlatBufferBuilder b = new FlatBufferBuilder(1024);
      return fileEnd(b, write(b), blocks);
    }
  }

  /**
   * A file's end after its last batch: the end-of-stream marker, the footer of {@code schema} (a
   * Schema table built in {@code b}) listing the batches ({offset in the file, framed metadata
   * length, body length} each), its length and the magic.
   */
  static byte[] fileEnd(FlatBufferBuilder b, int schema, List<long[]> blocks) {
    Footer.startRecordBatchesVector(b, blocks.size());
    for (int i = blocks.size() - 1; i >= 0; i--) {
      Block.createBlock(b, blocks.get(i)[0], (int) blocks.get(i)[1], blocks.get(i)[2]);
    }
    int batches = b.endVector();
    Footer.startDictionariesVector(b, 0);
    int dictionaries = b.endVector();
    b.finish(Footer.createFooter(b, MetadataVersion.V5, schema, dictionaries, batches, 0));
    byte[] footer = b.sizedByteArray();
    ByteBuffer out = little(END_OF_STREAM.length + footer.length + 4 + 6);
    out.put(END_OF_STREAM).put(footer).putInt(footer.length).put(MAGIC, 0, 6);
    return out.array();
  }

  private static ByteBuffer little(long size) {
    return ByteBuffer.allocate(Math.toIntExact(size)).order(ByteOrder.LITTLE_ENDIAN);
  }

  /** A buffer appended to the body, its {offset, length} noted, padded to 8 bytes. */
  private static void append(ByteArrayOutputStream body, List<long[]> buffers, byte[] bytes) {
    buffers.add(new long[] {body.size(), bytes.length});
    body.writeBytes(bytes);
    body.writeBytes(new byte[(8 - bytes.length % 8) % 8]);
  }

  /**
   * A message's flatbuffer framed: the continuation marker, its length (padded to 8 with the
   * prefix), itself.
   */
  private static byte[] framed(byte[] flatbuffer) {
    int padded = (flatbuffer.length + 8 + 7) / 8 * 8 - 8;
    ByteBuffer out = little(8 + padded);
    out.putInt(-1).putInt(padded).put(flatbuffer);
    return out.array();
  }

  /** A whole file of one batch of {@code rows} (at least one). */
  static void writeFile(OutputStream out, Layout layout, List<Object[]> rows) throws IOException {
    byte[] head = layout.message();
    byte[][] batch = layout.batch(rows);
    out.write(MAGIC);
    out.write(head);
    out.write(batch[0]);
    out.write(batch[1]);
    out.write(
        layout.end(
            List.of(new long[] {MAGIC.length + head.length, batch[0].length, batch[1].length})));
  }
}
