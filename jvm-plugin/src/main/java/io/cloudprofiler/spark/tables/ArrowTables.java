package io.cloudprofiler.spark.tables;

import io.cloudprofiler.spark.DaemonThreads;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Supplier;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkConf;

/**
 * Tables of rows as Arrow IPC files on any Hadoop-compatible URI (a plain path means the local
 * disk), which pyarrow, polars and DuckDB read with no project code. A row holds one value per
 * column name, an Integer (int32), Long (int64), Double (float64) or anything else (its text as
 * utf8), or null; the types come from the first row, or are given ({@link ArrowIpc}).
 */
public final class ArrowTables {
  private ArrowTables() {}

  public static Path path(String target) throws Exception {
    return new Path(
        target.contains("://") ? new URI(target) : new File(target).getAbsoluteFile().toURI());
  }

  /**
   * Hadoop's settings for the application's file systems (credentials, endpoints): Spark's
   * spark.hadoop.* keys.
   */
  private static volatile Configuration hadoopSettings = new Configuration();

  /** Takes the spark.hadoop.* keys of {@code conf}, as Spark does for its own reads and writes. */
  public static void useHadoopSettingsOf(SparkConf conf) {
    Configuration settings = new Configuration();
    for (scala.Tuple2<String, String> entry : conf.getAllWithPrefix("spark.hadoop.")) {
      settings.set(entry._1(), entry._2());
    }
    hadoopSettings = settings;
  }

  /**
   * On the local disk the raw file system: Hadoop's default one writes a hidden .crc file beside
   * each file.
   */
  public static FileSystem fileSystem(Path path) throws Exception {
    FileSystem fs = FileSystem.get(path.toUri(), hadoopSettings);
    return fs instanceof LocalFileSystem local ? local.getRawFileSystem() : fs;
  }

  /**
   * Creates {@code folder} and a file in it, then removes the file; throws with the file system's
   * reason. A local folder is checked with java.nio, and Hadoop's write path, whose loading costs
   * an application's start about 40 ms, loads in the background for the tables written later.
   */
  public static void checkWritable(String folder) throws Exception {
    URI uri = path(folder).toUri();
    if (!"file".equals(uri.getScheme())) {
      probe(folder);
      return;
    }
    java.nio.file.Path local = java.nio.file.Path.of(uri);
    Files.createDirectories(local);
    Files.delete(Files.createTempFile(local, WRITE_CHECK, ""));
    DaemonThreads.start(
        "cloudprofiler-load-hadoop-writes",
        () -> {
          try {
            probe(folder);
          } catch (Exception e) {
            // the tables' own writes report what fails there
          }
        });
  }

  private static final String WRITE_CHECK = ".cloudprofiler-write-check-";

  private static void probe(String folder) throws Exception {
    Path probe = new Path(path(folder), WRITE_CHECK + UUID.randomUUID());
    FileSystem fs = fileSystem(probe);
    if (!fs.mkdirs(probe.getParent()))
      throw new IOException("could not create " + probe.getParent());
    fs.create(probe, false).close();
    fs.delete(probe, false);
  }

  /**
   * Replaces {@code target} with a table of {@code rows} in one record batch. Nothing is written
   * for no rows.
   */
  public static void writeRows(
      String target, Map<String, String> metadata, List<String> names, List<Object[]> rows)
      throws Exception {
    if (rows.isEmpty()) return;
    ArrowIpc.Layout layout = new ArrowIpc.Layout(names, ArrowIpc.typesOf(rows.get(0)), metadata);
    replace(
        target,
        (fs, path) -> {
          try (OutputStream out = fs.create(path, false)) {
            ArrowIpc.writeFile(out, layout, rows);
          }
        });
  }

  /**
   * Replaces {@code target} with an Arrow IPC file: the magic, the first {@code length} bytes of
   * the local Arrow IPC stream {@code stream} (its schema and batches, see {@link ArrowSpool}),
   * then {@code end} (the footer).
   */
  static void publishStream(File stream, long length, byte[] end, String target) throws Exception {
    replace(
        target,
        (fs, path) -> {
          try (InputStream in = new FileInputStream(stream);
              OutputStream out = fs.create(path, false)) {
            out.write(ArrowIpc.MAGIC);
            copyPrefix(in, out, length, () -> stream + " ends before its " + length + " bytes");
            out.write(end);
          }
        });
  }

  /**
   * Copies the first {@code length} bytes of {@code in} to {@code out}; throws with {@code
   * shortMessage} if fewer.
   */
  private static void copyPrefix(
      InputStream in, OutputStream out, long length, Supplier<String> shortMessage)
      throws IOException {
    byte[] buffer = new byte[1 << 16];
    for (long left = length; left > 0; ) {
      int n = in.read(buffer, 0, (int) Math.min(buffer.length, left));
      if (n < 0) throw new IOException(shortMessage.get());
      out.write(buffer, 0, n);
      left -= n;
    }
  }

  /**
   * Replaces {@code target} with a copy of the first {@code length} bytes of the local file {@code
   * local}, followed by {@code end} (empty, or what completes a cut file: CompleteBatches.cutEnd).
   */
  public static void copy(File local, long length, byte[] end, String target) throws Exception {
    replace(
        target,
        (fs, path) -> {
          try (InputStream in = Files.newInputStream(local.toPath(), LinkOption.NOFOLLOW_LINKS);
              OutputStream out = fs.create(path, false)) {
            copyPrefix(
                in, out, length, () -> local + " shrank below " + length + " bytes while copied");
            out.write(end);
          }
        });
  }

  public interface Writer {
    void write(FileSystem fs, Path path) throws Exception;
  }

  /**
   * Writes a hidden sibling of {@code target} (a random name, created exclusively with the file
   * system's settings for new files) and renames it over the target, so that a reader (the analysis
   * of a running application) never finds a part of a table. A local file system renames over the
   * old table in one step; where the file system does not rename over an existing file (HDFS,
   * object stores), the old one is deleted first, and a reader in between finds none (README,
   * "Folder layout").
   */
  public static void replace(String target, Writer writer) throws Exception {
    Path path = path(target);
    FileSystem fs = fileSystem(path);
    fs.mkdirs(path.getParent());
    // a random name, created exclusively: no one can plant a link at it ahead of the write
    Path aside =
        new Path(path.getParent(), "." + path.getName() + "." + UUID.randomUUID() + ".tmp");
    try {
      writer.write(fs, aside);
      if (!fs.rename(aside, path) && !(fs.delete(path, false) && fs.rename(aside, path))) {
        throw new IOException("could not rename " + aside + " to " + path);
      }
    } catch (Exception e) { // its random name would stay behind for good
      try {
        fs.delete(aside, false);
      } catch (Exception ignored) { // the first failure is the one to report
      }
      throw e;
    }
  }
}
