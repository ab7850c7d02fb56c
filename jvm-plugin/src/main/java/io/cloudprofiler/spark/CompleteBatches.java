package io.cloudprofiler.spark;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.apache.arrow.flatbuf.Message;

/**
 * How much of a log file a reader can use while its process still writes it: the file's leading
 * magic and every complete Arrow IPC message after it (the schema, then record batches), found from
 * the messages' framing alone (continuation marker, metadata length, the metadata's body length),
 * never from the bodies.
 */
final class CompleteBatches {
  /** The first 8 bytes of an Arrow IPC file; a closed one ends with its first 6. */
  private static final byte[] MAGIC = "ARROW1\0\0".getBytes(StandardCharsets.US_ASCII);

  private static final int CONTINUATION = 0xFFFFFFFF;

  private CompleteBatches() {}

  /** Whether the file ends with the footer's magic: its writer closed it. */
  static boolean closed(Path file) throws IOException {
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
  static long length(Path file, long from) throws IOException {
    try (FileChannel in = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = in.size();
      long offset = from;
      if (offset == 0) {
        if (size < MAGIC.length) return 0;
        offset = ByteBuffer.wrap(MAGIC).equals(read(in, 0, MAGIC.length)) ? MAGIC.length : 0;
      }
      long complete = from;
      while (offset + 8 <= size) {
        ByteBuffer head = read(in, offset, 8).order(ByteOrder.LITTLE_ENDIAN);
        int prefix = head.getInt(0) == CONTINUATION ? 8 : 4; // 4: the framing of Arrow before 0.15
        int metadataLength = head.getInt(prefix - 4);
        if (metadataLength <= 0 || offset + prefix + metadataLength > size)
          break; // the end marker, or a part
        ByteBuffer metadata =
            read(in, offset + prefix, metadataLength).order(ByteOrder.LITTLE_ENDIAN);
        long end =
            offset + prefix + metadataLength + Message.getRootAsMessage(metadata).bodyLength();
        if (end > size) break;
        offset = complete = end;
      }
      return complete;
    }
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
