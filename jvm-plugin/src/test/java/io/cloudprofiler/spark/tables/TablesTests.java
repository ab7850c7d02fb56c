package io.cloudprofiler.spark.tables;

import static io.cloudprofiler.spark.JvmTests.check;
import static io.cloudprofiler.spark.JvmTests.equal;
import static io.cloudprofiler.spark.JvmTests.thrown;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.channels.Channels;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel;

/** Tests of the Arrow tables: the complete batches of a growing or cut log file. */
public final class TablesTests {
  private TablesTests() {}

  /**
   * An Arrow IPC file of three record batches, in the layout of the library's log files (magic,
   * messages with the continuation marker, end marker, footer).
   */
  static byte[] threeBatches() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        BigIntVector tsc = new BigIntVector("tsc", allocator);
        VectorSchemaRoot root = VectorSchemaRoot.of(tsc)) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowFileWriter writer = new ArrowFileWriter(root, null, Channels.newChannel(out))) {
        writer.start();
        for (int batch = 0; batch < 3; batch++) {
          tsc.allocateNew(100);
          for (int i = 0; i < 100; i++) tsc.set(i, batch * 100L + i);
          tsc.setValueCount(100);
          root.setRowCount(100);
          writer.writeBatch();
        }
        writer.end();
      }
      return out.toByteArray();
    }
  }

  /**
   * The batches an Arrow stream reader reads from the messages after the magic; throws inside a
   * message.
   */
  static int batchesIn(byte[] prefix) throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        ArrowStreamReader reader =
            new ArrowStreamReader(
                new ByteArrayInputStream(prefix, 8, prefix.length - 8), allocator)) {
      int n = 0;
      while (reader.loadNextBatch()) n++;
      return n;
    }
  }

  public static void testACopyOfAGrowingLogFileEndsAfterItsLastCompleteBatch() throws Exception {
    byte[] whole = threeBatches();
    Path file = Files.createTempFile("growing", ".arrows");
    try {
      Set<Long> ends = new HashSet<>();
      long previous = 0;
      for (int length = 0;
          length < whole.length;
          length++) { // the file at every length its writer may leave it
        int cut = length;
        long last = previous;
        Files.write(file, Arrays.copyOf(whole, cut));
        long n = CompleteBatches.length(file, 0);
        check(n <= cut && n >= last, () -> n + " of " + cut + " bytes after " + last);
        equal(n, CompleteBatches.length(file, previous)); // resumed where the last answer ended
        if (n > 0)
          batchesIn(Arrays.copyOf(whole, (int) n)); // whole messages only: reads without an error
        check(!CompleteBatches.closed(file), () -> cut + " bytes read as closed");
        ends.add(n);
        previous = n;
      }
      equal(5, ends.size()); // nothing yet, the schema, then each of the three batches
      equal(3, batchesIn(Arrays.copyOf(whole, (int) previous)));
      Files.write(file, whole);
      check(CompleteBatches.closed(file), () -> "the closed file read as open");
    } finally {
      Files.delete(file);
    }
  }

  /**
   * A file cut at every length its killed writer may leave it, completed as the collector completes
   * a lost executor's files: Arrow's file reader (which needs the footer) reads its complete
   * batches, and the footer says the file was not closed and what was cut.
   */
  public static void testACutFileIsCompletedUpToItsLastBatchForFileReaders() throws Exception {
    byte[] whole = threeBatches();
    byte[] withoutEnd = Arrays.copyOf(whole, (int) lengthBeforeItsEnd(whole));
    Path file = Files.createTempFile("cut", ".arrows");
    try {
      Set<Integer> seen = new HashSet<>();
      for (int length = 200; length <= withoutEnd.length; length++) {
        Files.write(file, Arrays.copyOf(withoutEnd, length));
        long complete = CompleteBatches.length(file, 0);
        byte[] tail = CompleteBatches.cutEnd(file, complete);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(withoutEnd, 0, (int) complete);
        out.write(tail);
        int cut = length;
        try (BufferAllocator allocator = new RootAllocator();
            SeekableByteChannel in = new ByteArrayReadableSeekableByteChannel(out.toByteArray());
            ArrowFileReader reader = new ArrowFileReader(in, allocator)) {
          int batches = reader.getRecordBlocks().size();
          long rows = 0;
          while (reader.loadNextBatch()) rows += reader.getVectorSchemaRoot().getRowCount();
          equal(100L * batches, rows);
          Map<String, String> meta = reader.getVectorSchemaRoot().getSchema().getCustomMetadata();
          equal("false", meta.get("closed"));
          equal(Long.toString(cut - complete), meta.get(CompleteBatches.CUT_BYTES));
          equal(Integer.toString(batches), meta.get(CompleteBatches.CUT_BATCHES));
          seen.add(batches);
        }
      }
      equal(Set.of(0, 1, 2, 3), seen);
    } finally {
      Files.delete(file);
    }
  }

  public static void testEveryTableIsDeclaredOnceAndWrittenWithItsDeclaredTypes() throws Exception {
    List<Table> all = io.cloudprofiler.spark.Tables.ALL;
    equal((long) all.size(), all.stream().map(Table::id).distinct().count());
    equal((long) all.size(), all.stream().map(Table::file).distinct().count());
    Table table =
        new Table(
            "t",
            "t.arrows",
            Table.APPLICATION,
            "a test's",
            List.of("i", "l", "d", "s"),
            List.of(Integer.class, Long.class, Double.class, String.class));
    Path dir = Files.createTempDirectory("tables");
    try {
      // a first row of nulls: the types are the declaration's, not its values'
      ArrowTables.writeRows(
          table,
          dir.toString(),
          Map.of(),
          List.of(new Object[] {null, null, null, null}, new Object[] {1, 2L, 3.0, "x"}));
      try (BufferAllocator allocator = new RootAllocator();
          ArrowFileReader reader =
              new ArrowFileReader(
                  Files.newByteChannel(Path.of(table.in(dir.toString()))), allocator)) {
        String types =
            reader.getVectorSchemaRoot().getSchema().getFields().stream()
                .map(Field::getType)
                .map(String::valueOf)
                .collect(Collectors.joining(", "));
        equal("Int(32, true), Int(64, true), FloatingPoint(DOUBLE), Utf8", types);
      }
    } finally {
      Files.delete(Path.of(table.in(dir.toString())));
      Files.delete(dir);
    }
    String sizes =
        thrown(
            () ->
                new Table(
                    "t",
                    "t.arrows",
                    Table.APPLICATION,
                    "",
                    List.of("a", "b"),
                    List.of(Long.class)));
    equal("t.arrows declares 2 columns and 1 types", sizes);
    String type =
        thrown(
            () ->
                new Table(
                    "t", "t.arrows", Table.EXECUTOR, "", List.of("a"), List.of(Boolean.class)));
    check(type.startsWith("t.arrows: class java.lang.Boolean is no column type"), () -> type);
  }

  /** The length of a whole file's part before its end-of-stream marker: its last batch's end. */
  private static long lengthBeforeItsEnd(byte[] whole) throws Exception {
    Path file = Files.createTempFile("whole", ".arrows");
    try {
      Files.write(
          file, Arrays.copyOf(whole, whole.length - 1)); // no magic at its end: read as open
      return CompleteBatches.length(file, 0);
    } finally {
      Files.delete(file);
    }
  }
}
