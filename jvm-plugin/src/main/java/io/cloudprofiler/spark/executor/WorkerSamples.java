package io.cloudprofiler.spark.executor;

import io.cloudprofiler.PrivateFiles;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.tables.Table;
import java.io.File;
import java.io.InputStream;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The hops' samples of Python workers that log to files of their own (no hand-off: their records do
 * not pass through this executor's library, whose scan keeps the others'): a worker takes its
 * library's samples as each task's channel closes and writes them into the executor's folder as
 * {@code <pid>-<n>.}{@value #SUFFIX} (cloudprofiler.spark.worker.hand_samples_over), which the
 * collection thread reads, adds to the executor's and removes. The worker runs the user's code: a
 * file is read only if it is this user's regular file (no link) of at most {@link #MAX_BYTES} with
 * the declared columns; a channel's name is cut as the driver cuts it, its level must be one the
 * library gives (0 to 64), and at most {@link #PER_CHANNEL} samples of a channel a file are kept. A
 * file that fails is removed all the same, said once in the executor's log.
 */
public final class WorkerSamples {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerSamples.class);

  static final String SUFFIX = "hop-samples.arrow";

  public static final Table TABLE =
      new Table(
          "worker_samples",
          SUFFIX,
          Table.EXECUTOR,
          "a record a Python worker's own library kept for the tab's latency between trace points,"
              + " in a file <pid>-<n>."
              + SUFFIX
              + " of its executor's local folder, which the executor reads and removes (never"
              + " collected)",
          List.of("channel", "level", "tuple_id", "tsc"),
          List.of(String.class, Integer.class, Long.class, Long.class));

  static final long MAX_BYTES = 1 << 20;
  static final int PER_CHANNEL = 256; // CP_SAMPLES_PER_CHANNEL: what a take holds of a channel
  static final int NAME_CHARS = 200;

  private static boolean said;

  private WorkerSamples() {}

  /**
   * The samples the workers left in {@code folder} since the last take, a channel of a file each.
   */
  static List<Messages.ChannelSamples> take(File folder) {
    File[] files = folder.listFiles((dir, name) -> name.endsWith("." + SUFFIX));
    List<Messages.ChannelSamples> out = new ArrayList<>();
    for (File f : files == null ? new File[0] : files) {
      Path path = f.toPath();
      try {
        out.addAll(read(path));
      } catch (Exception | LinkageError e) {
        if (!said) {
          said = true;
          LOG.warn(
              "cloudprofiler: left out a Python worker's samples in {}: {}", path, e.toString());
        }
      } finally {
        try {
          if (PrivateFiles.untrustedFile(path) == null) Files.delete(path);
        } catch (Exception gone) { // removed meanwhile, or not ours to remove
        }
      }
    }
    return out;
  }

  private static List<Messages.ChannelSamples> read(Path path) throws Exception {
    String why = PrivateFiles.untrustedFile(path);
    if (why != null) throw new IllegalArgumentException(why);
    byte[] bytes;
    try (InputStream in =
        Files.newInputStream(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
      bytes = in.readNBytes((int) MAX_BYTES + 1);
    }
    if (bytes.length > MAX_BYTES)
      throw new IllegalArgumentException("larger than " + MAX_BYTES + " bytes");
    Map<String, Channel> channels = new LinkedHashMap<>();
    try (BufferAllocator allocator = new RootAllocator(4 * MAX_BYTES);
        SeekableByteChannel in = new ByteArrayReadableSeekableByteChannel(bytes);
        ArrowFileReader reader = new ArrowFileReader(in, allocator)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      List<String> names = new ArrayList<>();
      root.getSchema().getFields().forEach(field -> names.add(field.getName()));
      if (!names.equals(TABLE.columns())
          || !(root.getVector(0) instanceof VarCharVector channel)
          || !(root.getVector(1) instanceof IntVector level)
          || !(root.getVector(2) instanceof BigIntVector id)
          || !(root.getVector(3) instanceof BigIntVector tsc))
        throw new IllegalArgumentException("columns " + names + ", expected " + TABLE.columns());
      while (reader.loadNextBatch()) {
        for (int r = 0; r < root.getRowCount(); r++) {
          if (channel.isNull(r) || level.isNull(r) || id.isNull(r) || tsc.isNull(r)) continue;
          int l = level.get(r);
          if (l < 0 || l > 64) throw new IllegalArgumentException("level " + l);
          String name = new String(channel.get(r), StandardCharsets.UTF_8);
          if (name.length() > NAME_CHARS) name = name.substring(0, NAME_CHARS);
          channels.computeIfAbsent(name, n -> new Channel(l)).add(l, id.get(r), tsc.get(r));
        }
      }
    }
    List<Messages.ChannelSamples> out = new ArrayList<>();
    channels.forEach(
        (name, c) ->
            out.add(
                new Messages.ChannelSamples(
                    name, c.level, Arrays.copyOf(c.ids, c.n), Arrays.copyOf(c.ticks, c.n))));
    return out;
  }

  /** A channel's samples of one file: those of its level, at most PER_CHANNEL. */
  private static final class Channel {
    final int level;
    final long[] ids = new long[PER_CHANNEL], ticks = new long[PER_CHANNEL];
    int n;

    Channel(int level) {
      this.level = level;
    }

    void add(int l, long id, long tick) {
      if (l != level) throw new IllegalArgumentException("levels " + level + " and " + l);
      if (n == PER_CHANNEL) return;
      ids[n] = id;
      ticks[n++] = tick;
    }
  }
}
