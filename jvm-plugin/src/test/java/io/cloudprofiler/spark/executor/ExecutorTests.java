package io.cloudprofiler.spark.executor;

import static io.cloudprofiler.spark.JvmTests.equal;
import static io.cloudprofiler.spark.JvmTests.startLibrary;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Messages;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileWriter;

/** Tests of the executor's task records, on the real native library. */
public final class ExecutorTests {
  private ExecutorTests() {}

  /**
   * Records of tasks that start or end before the channels open reach them when they open; after an
   * abandon, none is kept.
   */
  public static void testTaskRecordsWaitForTheirChannels() throws Exception {
    startLibrary("cp-task-records");
    try {
      TaskRecords tasks = new TaskRecords();
      equal(0, tasks.channels().length);
      tasks.startAt(1, CloudProfiler.tsc());
      tasks.start(2);
      tasks.end(1);
      long start =
          CloudProfiler.openChannel(
              "t.start", "buffered", new long[0], new String[0], new String[0]);
      long end =
          CloudProfiler.openChannel("t.end", "buffered", new long[0], new String[0], new String[0]);
      tasks.open(start, end);
      tasks.end(2);
      equal(2L, CloudProfiler.stats(start)[0]);
      equal(2L, CloudProfiler.stats(end)[0]);
      equal(0L, tasks.abandon());
      TaskRecords never = new TaskRecords();
      never.start(3);
      never.end(3);
      equal(2L, never.abandon());
      never.start(4);
      equal(3L, never.abandon());
    } finally {
      CloudProfiler.stop();
    }
  }

  /**
   * A Python worker's samples file, untrusted: a whole one is read (256 records a channel at most,
   * its level kept) and removed; one with other columns, a level out of range or no Arrow at all is
   * left out and removed; a link of that name is neither followed nor removed.
   */
  public static void testWorkerSamplesAreCheckedReadAndRemoved() throws Exception {
    Path folder = Files.createTempDirectory("cp-worker-samples");
    try {
      writeSamples(folder.resolve("1-0." + WorkerSamples.SUFFIX), "channel", 3, 300);
      writeSamples(folder.resolve("1-1." + WorkerSamples.SUFFIX), "name", 3, 10);
      writeSamples(folder.resolve("1-2." + WorkerSamples.SUFFIX), "channel", 70, 10);
      Files.writeString(folder.resolve("1-3." + WorkerSamples.SUFFIX), "not arrow");
      Path target = folder.resolve("elsewhere");
      writeSamples(target, "channel", 3, 10);
      Files.createSymbolicLink(folder.resolve("1-4." + WorkerSamples.SUFFIX), target);
      List<Messages.ChannelSamples> taken = WorkerSamples.take(folder.toFile());
      equal(1, taken.size());
      equal("py.a", taken.get(0).channel());
      equal(3, taken.get(0).level());
      equal(WorkerSamples.PER_CHANNEL, taken.get(0).ids().length);
      equal(5L, taken.get(0).ticks()[5] - taken.get(0).ids()[5]);
      try (var left = Files.list(folder)) {
        equal(
            List.of("1-4." + WorkerSamples.SUFFIX, "elsewhere"),
            left.map(f -> f.getFileName().toString()).sorted().toList());
      }
    } finally {
      try (var left = Files.list(folder)) {
        for (Path f : left.toList()) Files.delete(f);
      }
      Files.delete(folder);
    }
  }

  /** A samples file of channel py.a: {@code rows} records at {@code level}, tsc = id + 5. */
  private static void writeSamples(Path path, String first, int level, int rows) throws Exception {
    var allocator = new RootAllocator();
    var channel = new VarCharVector(first, allocator);
    var levels = new IntVector("level", allocator);
    var ids = new BigIntVector("tuple_id", allocator);
    var tscs = new BigIntVector("tsc", allocator);
    for (int r = 0; r < rows; r++) {
      channel.setSafe(r, "py.a".getBytes(StandardCharsets.UTF_8));
      levels.setSafe(r, level);
      ids.setSafe(r, 1000L + r);
      tscs.setSafe(r, 1005L + r);
    }
    var root = new VectorSchemaRoot(List.of(channel, levels, ids, tscs));
    root.setRowCount(rows);
    try (var out = FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        var writer = new ArrowFileWriter(root, null, out)) {
      writer.start();
      writer.writeBatch();
      writer.end();
    } finally {
      root.close();
      allocator.close();
    }
  }
}
