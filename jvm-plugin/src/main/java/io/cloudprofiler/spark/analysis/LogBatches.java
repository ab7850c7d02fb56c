package io.cloudprofiler.spark.analysis;

import com.github.luben.zstd.Zstd;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.arrow.flatbuf.BodyCompression;
import org.apache.arrow.flatbuf.CompressionType;
import org.apache.arrow.flatbuf.Field;
import org.apache.arrow.flatbuf.FieldNode;
import org.apache.arrow.flatbuf.Int;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.flatbuf.Schema;
import org.apache.arrow.flatbuf.Type;

/**
 * The record batches of one log file, read in order from its bytes with the Arrow IPC format's
 * flatbuffers alone (Spark 3.5 and 4 ship different Arrow Java versions; the format is the same):
 * either layout (the file's magic, then the stream; or the stream alone), the framing before Arrow
 * 0.15 too, zstd-compressed bodies (the library's option). Reading stops at the end-of-stream
 * marker or, in a file its process never finished (killed, or still writing), after the last
 * complete message, as cloudprofiler.logs.read_log does. A log file has two integer columns; each
 * batch comes out as two arrays of little-endian int64 values.
 */
final class LogBatches implements Closeable {
  private static final byte[] MAGIC = "ARROW1\0\0".getBytes(StandardCharsets.US_ASCII);

  /** Larger metadata than this is no log file's (a batch's is under 300 bytes). */
  private static final int MAX_METADATA = 16 << 20;

  private final InputStream in;
  private final String name;
  private final long size;
  private long offset;
  private boolean[] unsigned;
  private final byte[] head = new byte[8];
  private boolean headRead;
  private boolean ended;
  private boolean endMarker;
  private final boolean fileLayout;
  private Schema schema;
  private byte[] schemaMetadata;
  private byte[] body;

  /** rows of the batch {@link #next} read, and its columns' values (8 bytes each). */
  int rows;

  final byte[][] columns = {new byte[0], new byte[0]};

  /** {@code in} holds the file's {@code size} bytes; {@code name} names it in errors. */
  LogBatches(InputStream in, long size, String name) throws IOException {
    this.in = in;
    this.name = name;
    this.size = size;
    if (size < 8 || readUpTo(head, 8) < 8) {
      ended = true;
      fileLayout = false;
      return;
    }
    offset = 8;
    fileLayout = Arrays.equals(head, MAGIC);
    headRead = !fileLayout; // the stream layout starts with its first message
  }

  /** Reads the next record batch; false at the file's end or the end of its complete part. */
  boolean next() throws IOException {
    Message message;
    while ((message = message()) != null) {
      byte type = message.headerType();
      if (type == MessageHeader.Schema) {
        schema = (Schema) message.header(new Schema());
      } else if (type == MessageHeader.RecordBatch) {
        if (schema == null) throw new IOException(name + ": a record batch before the schema");
        if (unsigned == null) unsigned = columnsSigned(schema);
        batch((RecordBatch) message.header(new RecordBatch()), body);
        return true;
      } else {
        throw new IOException(
            name + ": an Arrow message of type " + type + " (a log file has record batches only)");
      }
    }
    return false;
  }

  /**
   * Reads the file's first message, its schema (of any columns: a driver table's too); false where
   * the file holds none.
   */
  boolean readSchema() throws IOException {
    Message message = message();
    if (message == null || message.headerType() != MessageHeader.Schema) return false;
    schema = (Schema) message.header(new Schema());
    return true;
  }

  /** The schema read, or null. */
  Schema schema() {
    return schema;
  }

  /**
   * The schema as an encapsulated Arrow IPC message (continuation, length, metadata padded to 8
   * bytes), whatever the file's framing: what pyarrow.ipc.read_schema reads.
   */
  byte[] schemaMessage() {
    int padded = (schemaMetadata.length + 7) & ~7;
    ByteBuffer out = ByteBuffer.allocate(8 + padded).order(ByteOrder.LITTLE_ENDIAN);
    out.putInt(-1).putInt(padded).put(schemaMetadata);
    return out.array();
  }

  /** Whether reading stopped at the end-of-stream marker (not at the end of the bytes). */
  boolean endMarker() {
    return endMarker;
  }

  /** Whether bytes follow the last complete message (a batch cut where its process stopped). */
  boolean leftover() {
    return ended && !endMarker && offset < size;
  }

  /** Whether the file has the file layout's magic at its start. */
  boolean fileLayout() {
    return fileLayout;
  }

  /** The next message, its body in {@link #body}; null at the end of the complete messages. */
  private Message message() throws IOException {
    while (!ended) {
      long start = offset - (headRead ? 8 : 0);
      if (!headRead) {
        if (start + 8 > size || readUpTo(head, 8) < 8) return end(false);
        offset += 8;
      }
      headRead = false;
      ByteBuffer framing = ByteBuffer.wrap(head).order(ByteOrder.LITTLE_ENDIAN);
      int prefix = framing.getInt(0) == -1 ? 8 : 4; // 4: the framing of Arrow before 0.15
      int length = framing.getInt(prefix - 4);
      if (length <= 0) return end(true); // the end-of-stream marker
      if (length > MAX_METADATA || start + prefix + length > size) return end(false);
      byte[] metadata = new byte[length];
      int carried = 8 - prefix; // the old framing's first 4 bytes of metadata came with the head
      if (length < carried) return end(false);
      System.arraycopy(head, prefix, metadata, 0, carried);
      if (length > carried) {
        if (readUpTo(metadata, carried, length - carried) < length - carried) return end(false);
        offset += length - carried;
      }
      Message message = Message.getRootAsMessage(ByteBuffer.wrap(metadata));
      long bodyLength = message.bodyLength();
      if (bodyLength < 0 || start + prefix + length + bodyLength > size) return end(false);
      if (bodyLength > Integer.MAX_VALUE - 8)
        throw new IOException(name + ": a batch of " + bodyLength + " bytes (2 GiB at most)");
      body = new byte[(int) bodyLength];
      if (readUpTo(body, 0, body.length) < body.length) return end(false);
      offset += body.length;
      if (message.headerType() == MessageHeader.Schema) schemaMetadata = metadata;
      return message;
    }
    return null;
  }

  private Message end(boolean marker) {
    ended = true;
    endMarker = marker;
    return null;
  }

  /**
   * Which of the two columns are unsigned; an IOException where they are not two 64-bit integers.
   */
  private boolean[] columnsSigned(Schema schema) throws IOException {
    if (schema.fieldsLength() != 2)
      throw new IOException(
          name + ": " + schema.fieldsLength() + " columns (a log file has 2 integer columns)");
    boolean[] unsigned = new boolean[2];
    for (int c = 0; c < 2; c++) {
      Field field = schema.fields(c);
      Int type = field.typeType() == Type.Int ? (Int) field.type(new Int()) : null;
      if (type == null || type.bitWidth() != 64)
        throw new IOException(
            name
                + ": column "
                + field.name()
                + " is not a 64-bit integer (type "
                + field.typeType()
                + ")");
      unsigned[c] = !type.isSigned();
    }
    return unsigned;
  }

  private void batch(RecordBatch batch, byte[] body) throws IOException {
    long length = batch.length();
    if (length < 0
        || length > Integer.MAX_VALUE / 8
        || batch.nodesLength() != 2
        || batch.buffersLength() != 4)
      throw new IOException(
          name
              + ": a batch of "
              + length
              + " rows, "
              + batch.nodesLength()
              + " columns and "
              + batch.buffersLength()
              + " buffers (a log file's have 2 columns of 2 buffers)");
    rows = (int) length;
    BodyCompression compression = batch.compression();
    if (compression != null && compression.codec() != CompressionType.ZSTD)
      throw new IOException(
          name
              + ": compressed with codec "
              + compression.codec()
              + " (log files are compressed with zstd, or not)");
    for (int c = 0; c < 2; c++) {
      FieldNode node = batch.nodes(c);
      if (node.length() != length || node.nullCount() != 0)
        throw new IOException(
            name
                + ": column "
                + c
                + " holds "
                + node.length()
                + " values, "
                + node.nullCount()
                + " null, in a batch of "
                + length
                + " rows (log values are never null)");
      org.apache.arrow.flatbuf.Buffer values = batch.buffers(2 * c + 1);
      long at = values.offset();
      long bytes = values.length();
      if (at < 0 || bytes < 0 || at + bytes > body.length)
        throw new IOException(
            name
                + ": a buffer at "
                + at
                + " of "
                + bytes
                + " bytes lies outside its batch's body of "
                + body.length);
      columns[c] =
          compression == null
              ? Arrays.copyOfRange(body, (int) at, (int) (at + bytes))
              : decompress(body, (int) at, (int) bytes);
      if (columns[c].length < 8L * rows)
        throw new IOException(
            name + ": column " + c + " has " + columns[c].length + " bytes for " + rows + " rows");
      if (unsigned[c]) checkInt64(columns[c], c);
    }
  }

  /** A buffer of Arrow's BodyCompression: its uncompressed length, then zstd's frame (-1: raw). */
  private byte[] decompress(byte[] body, int at, int bytes) throws IOException {
    if (bytes == 0) return new byte[0];
    if (bytes < 8) throw new IOException(name + ": a compressed buffer of " + bytes + " bytes");
    long plain = ByteBuffer.wrap(body, at, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
    if (plain == -1) return Arrays.copyOfRange(body, at + 8, at + bytes);
    if (plain < 0 || plain > Integer.MAX_VALUE - 8)
      throw new IOException(name + ": a compressed buffer of " + plain + " bytes uncompressed");
    byte[] out = new byte[(int) plain];
    long got = Zstd.decompressByteArray(out, 0, out.length, body, at + 8, bytes - 8);
    if (Zstd.isError(got) || got != plain)
      throw new IOException(
          name
              + ": a zstd buffer does not decompress to its "
              + plain
              + " bytes ("
              + (Zstd.isError(got) ? Zstd.getErrorName(got) : got + " bytes")
              + ")");
    return out;
  }

  /** Older files wrote uint64: the analysis reads int64, which holds every TSC for centuries. */
  private void checkInt64(byte[] values, int c) throws IOException {
    for (int i = 0; i < rows; i++) {
      if (values[8 * i + 7] < 0)
        throw new IOException(
            name
                + ": column "
                + c
                + " holds "
                + Long.toUnsignedString(
                    ByteBuffer.wrap(values, 8 * i, 8).order(ByteOrder.LITTLE_ENDIAN).getLong())
                + ", beyond int64");
    }
  }

  private int readUpTo(byte[] into, int n) throws IOException {
    return readUpTo(into, 0, n);
  }

  private int readUpTo(byte[] into, int from, int n) throws IOException {
    int got = 0;
    while (got < n) {
      int r = in.read(into, from + got, n - got);
      if (r < 0) break;
      got += r;
    }
    return got;
  }

  @Override
  public void close() throws IOException {
    in.close();
  }
}
