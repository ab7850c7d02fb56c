package io.cloudprofiler.spark.tables;

import com.google.flatbuffers.FlatBufferBuilder;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.flatbuf.Field;
import org.apache.arrow.flatbuf.Int;
import org.apache.arrow.flatbuf.KeyValue;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.Schema;
import org.apache.arrow.flatbuf.Type;

/**
 * How much of a log file a reader can use while its process still writes it: the file's leading
 * magic and every complete Arrow IPC message after it (the schema, then record batches), found from
 * the messages' framing alone (continuation marker, metadata length, the metadata's body length),
 * never from the bodies; and the end that makes such a part a whole Arrow IPC file, for the files
 * of a process that was killed.
 */
public final class CompleteBatches {
  /** The first 8 bytes of an Arrow IPC file; a closed one ends with its first 6. */
  private static final byte[] MAGIC = "ARROW1\0\0".getBytes(StandardCharsets.US_ASCII);

  private static final int CONTINUATION = 0xFFFFFFFF;

  private CompleteBatches() {}

  /** Whether the file ends with the footer's magic: its writer closed it. */
  public static boolean closed(Path file) throws IOException {
    try (FileChannel in = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = in.size();
      if (size < 2 * MAGIC.length) return false;
      ByteBuffer tail = read(in, size - 6, 6);
      return ByteBuffer.wrap(MAGIC, 0, 6).equals(tail);
    }
  }

  /**
   * The length of the file's part that ends with its last complete message, reading the framing
   * from {@code from} (0, or a length this method returned before for the same growing file); 0
   * while not even the schema is whole.
   */
  public static long length(Path file, long from) throws IOException {
    try (FileChannel in = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = in.size();
      long offset = from;
      if (offset == 0) {
        if (size < MAGIC.length) return 0;
        offset = ByteBuffer.wrap(MAGIC).equals(read(in, 0, MAGIC.length)) ? MAGIC.length : 0;
      }
      long end = walk(in, offset, size, (at, framed, message, metadata) -> {});
      return end == offset ? from : end;
    }
  }

  /** What {@link #walk} hands on of each complete message: its offset, framed metadata length. */
  private interface Visitor {
    void message(long offset, int framedLength, Message message, ByteBuffer metadata);
  }

  /**
   * Walks the complete messages from {@code offset} up to {@code limit}, from their framing alone
   * (continuation marker, metadata length, the metadata's body length), handing each to {@code
   * visitor}; returns the end of the last (offset when there is none).
   */
  private static long walk(FileChannel in, long offset, long limit, Visitor visitor)
      throws IOException {
    while (offset + 8 <= limit) {
      ByteBuffer head = read(in, offset, 8).order(ByteOrder.LITTLE_ENDIAN);
      int prefix = head.getInt(0) == CONTINUATION ? 8 : 4; // 4: the framing of Arrow before 0.15
      int metadataLength = head.getInt(prefix - 4);
      if (metadataLength <= 0 || offset + prefix + metadataLength > limit)
        break; // the end marker, or a part
      ByteBuffer metadata =
          read(in, offset + prefix, metadataLength).order(ByteOrder.LITTLE_ENDIAN);
      Message message = Message.getRootAsMessage(metadata);
      long end = offset + prefix + metadataLength + message.bodyLength();
      if (end > limit) break;
      visitor.message(offset, prefix + metadataLength, message, metadata);
      offset = end;
    }
    return offset;
  }

  /**
   * Footer metadata of a file completed from the part a killed process left (cloudprofiler/logs.py
   * reads them): the bytes left out after its last complete batch, and the batches kept.
   */
  static final String CUT_BYTES = "cut.bytes";

  static final String CUT_BATCHES = "cut.batches";

  /**
   * The end that makes the file's first {@code complete} bytes (a length {@link #length} returned)
   * a whole Arrow IPC file that every reader opens (polars, DuckDB, pyarrow's file reader): the
   * end-of-stream marker, a footer listing its record batches, the footer's length and the magic.
   * The footer's schema is the file's own, its metadata saying {@code closed: false} and the cut
   * ({@link #CUT_BYTES}, {@link #CUT_BATCHES}); the batches keep their bytes.
   */
  public static byte[] cutEnd(Path file, long complete) throws IOException {
    try (FileChannel in = FileChannel.open(file, StandardOpenOption.READ)) {
      List<ByteBuffer> schemas = new ArrayList<>();
      List<long[]> blocks = new ArrayList<>();
      walk(
          in,
          MAGIC.length,
          complete,
          (offset, framed, message, metadata) -> {
            if (message.headerType() == MessageHeader.Schema) schemas.add(metadata);
            else if (message.headerType() == MessageHeader.RecordBatch)
              blocks.add(new long[] {offset, framed, message.bodyLength()});
          });
      if (schemas.isEmpty()) throw new IOException(file + ": no complete schema message");
      ByteBuffer schemaMessage = schemas.get(0);
      Map<String, String> extra = new LinkedHashMap<>();
      extra.put("closed", "false");
      extra.put(CUT_BYTES, Long.toString(in.size() - complete));
      extra.put(CUT_BATCHES, Integer.toString(blocks.size()));
      FlatBufferBuilder b = new FlatBufferBuilder(1024);
      int schema =
          copySchema(
              b, (Schema) Message.getRootAsMessage(schemaMessage).header(new Schema()), extra);
      return ArrowIpc.fileEnd(b, schema, blocks);
    }
  }

  /**
   * A log file's schema (integer columns, as the library writes them) rebuilt in {@code b}, its
   * metadata's values without the padding of the in-place header and {@code extra} set over them.
   */
  private static int copySchema(FlatBufferBuilder b, Schema from, Map<String, String> extra)
      throws IOException {
    int[] fields = new int[from.fieldsLength()];
    for (int i = 0; i < fields.length; i++) {
      Field f = from.fields(i);
      if (f.typeType() != Type.Int) throw new IOException("not a log file: column " + f.name());
      Int type = (Int) f.type(new Int());
      int name = b.createString(f.name());
      int intType = Int.createInt(b, type.bitWidth(), type.isSigned());
      int children = Field.createChildrenVector(b, new int[0]);
      fields[i] = Field.createField(b, name, f.nullable(), Type.Int, intType, 0, children, 0);
    }
    Map<String, String> metadata = new LinkedHashMap<>();
    for (int i = 0; i < from.customMetadataLength(); i++) {
      KeyValue kv = from.customMetadata(i);
      metadata.put(kv.key(), kv.value().stripTrailing());
    }
    metadata.putAll(extra);
    int[] pairs = new int[metadata.size()];
    int i = 0;
    for (Map.Entry<String, String> e : metadata.entrySet())
      pairs[i++] =
          KeyValue.createKeyValue(b, b.createString(e.getKey()), b.createString(e.getValue()));
    return Schema.createSchema(
        b,
        from.endianness(),
        Schema.createFieldsVector(b, fields),
        Schema.createCustomMetadataVector(b, pairs),
        0);
  }

  private static ByteBuffer read(FileChannel in, long position, int length) throws IOException {
    ByteBuffer buffer = ByteBuffer.allocate(length);
    while (buffer.hasRemaining()) {
      if (in.read(buffer, position + buffer.position()) < 0)
        throw new EOFException("file shrank while read");
    }
    return buffer.flip();
  }
}
