package io.cloudprofiler.spark.tables;

import io.cloudprofiler.PrivateFiles;
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
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StreamCapabilities;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.spark.SparkConf;

/**
 * Tables of rows as Arrow IPC files on any Hadoop-compatible URI (a plain path means the local
 * disk), which pyarrow, polars and DuckDB read with no project code. A row holds one value per
 * column of the table's declaration ({@link Table}), or null.
 */
public final class ArrowTables {
  private ArrowTables() {}

  public static Path path(String target) throws Exception {
    return new Path(
        target.contains("://") ? new URI(target) : new File(target).getAbsoluteFile().toURI());
  }

  /** The spark.hadoop.* keys of the application, for its file systems (credentials, endpoints). */
  private static volatile Map<String, String> hadoopKeys = Map.of();

  /**
   * Hadoop's settings made of {@link #hadoopKeys}, once a file system other than file: needs them.
   */
  private static volatile Configuration hadoopSettings;

  /**
   * Takes the spark.hadoop.* keys of {@code conf}, as Spark does for its own reads and writes.
   * Hadoop's settings are made of them only when a file system other than the local disk is used:
   * making them loads Hadoop's configuration, and a file system's first use its classes, about 0.6
   * s of CPU in a JVM that has not yet (measured in a new JVM: 2,200 classes), which every executor
   * of a cluster paid at its start, beside the application's own start, for a local logDir.
   */
  public static void useHadoopSettingsOf(SparkConf conf) {
    Map<String, String> keys = new java.util.HashMap<>();
    for (scala.Tuple2<String, String> entry : conf.getAllWithPrefix("spark.hadoop.")) {
      keys.put(entry._1(), entry._2());
    }
    hadoopKeys = Map.copyOf(keys);
    hadoopSettings = null;
  }

  private static Configuration hadoopSettings() {
    Configuration settings = hadoopSettings;
    if (settings == null) {
      settings = new Configuration();
      for (var entry : hadoopKeys.entrySet()) settings.set(entry.getKey(), entry.getValue());
      hadoopSettings = settings;
    }
    return settings;
  }

  /**
   * On the local disk the raw file system: Hadoop's default one writes a hidden .crc file beside
   * each file.
   */
  public static FileSystem fileSystem(Path path) throws Exception {
    FileSystem fs = FileSystem.get(path.toUri(), hadoopSettings());
    return fs instanceof LocalFileSystem local ? local.getRawFileSystem() : fs;
  }

  /** {@code path} on the local disk (file:), which java.nio reads and writes; else null. */
  public static java.nio.file.Path local(Path path) {
    URI uri = path.toUri();
    return "file".equals(uri.getScheme()) ? java.nio.file.Path.of(uri) : null;
  }

  /**
   * Creates {@code folder} and a file in it, then removes the file; throws with the file system's
   * reason.
   */
  public static void checkWritable(String folder) throws Exception {
    java.nio.file.Path local = local(path(folder));
    if (local == null) {
      probe(folder);
      return;
    }
    Files.createDirectories(local);
    Files.delete(Files.createTempFile(local, WRITE_CHECK, ""));
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
   * Replaces {@code table}'s file in {@code folder} with {@code rows} in one record batch. Nothing
   * is written for no rows.
   */
  public static void writeRows(
      Table table, String folder, Map<String, String> metadata, List<Object[]> rows)
      throws Exception {
    if (rows.isEmpty()) return;
    ArrowIpc.Layout layout = new ArrowIpc.Layout(table.columns(), table.types(), metadata);
    replace(table.in(folder), out -> ArrowIpc.writeFile(out, layout, rows));
  }

  /**
   * Replaces {@code target} with an Arrow IPC file: the magic, the first {@code length} bytes of
   * the local Arrow IPC stream {@code stream} (its schema and batches, see {@link ArrowSpool}),
   * then {@code end} (the footer).
   */
  static void publishStream(File stream, long length, byte[] end, String target) throws Exception {
    replace(
        target,
        out -> {
          try (InputStream in = new FileInputStream(stream)) {
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
        out -> {
          try (InputStream in = Files.newInputStream(local.toPath(), LinkOption.NOFOLLOW_LINKS)) {
            copyPrefix(
                in, out, length, () -> local + " shrank below " + length + " bytes while copied");
            out.write(end);
          }
        });
  }

  /** Writes a file's bytes into {@code out}, which {@link #replace} opens and closes. */
  public interface Writer {
    void write(OutputStream out) throws Exception;
  }

  /**
   * {@link #replace(String, FsPermission, Writer)} with the file system's settings for new files.
   */
  public static void replace(String target, Writer writer) throws Exception {
    replace(target, null, writer);
  }

  /**
   * Replaces {@code target} with what {@code writer} writes, so that a reader (the analysis of a
   * running application) never finds a part of it under the target's name; {@code permission}: the
   * new file's, else (null) the file system's settings for new files decide. On the local disk
   * ({@link #replaceLocal}) every file is this user's only (0600).
   *
   * <p>Where the file system's output streams can be aborted (s3a://: an object appears as its
   * stream closes, an aborted one never), the target is written in place: a reader finds the
   * previous version until the new one is whole, then the new one, and a failed write is aborted,
   * leaving the previous one. Elsewhere a hidden sibling (a random name, created exclusively: no
   * one can plant a link at it ahead of the write) is written and renamed over the target: a local
   * file system renames over the old file in one step; where the file system does not rename over
   * an existing file (HDFS), the old one is deleted first, and a reader in between finds none
   * (README, "Folder layout").
   */
  public static void replace(String target, FsPermission permission, Writer writer)
      throws Exception {
    Path path = path(target);
    java.nio.file.Path local = local(path);
    if (local != null) {
      replaceLocal(local, writer);
      return;
    }
    FileSystem fs = fileSystem(path);
    fs.mkdirs(path.getParent());
    if (fs.hasPathCapability(path, CommonPathCapabilities.ABORTABLE_STREAM)) {
      writeWhole(fs, path, true, permission, writer);
      return;
    }
    Path aside =
        new Path(path.getParent(), "." + path.getName() + "." + UUID.randomUUID() + ".tmp");
    try {
      writeWhole(fs, aside, false, permission, writer);
      if (!renamedOnto(fs, aside, path) && !(fs.delete(path, false) && fs.rename(aside, path))) {
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

  /**
   * {@link #replace} on the local disk, with java.nio: this user's only (0600; its folders, where
   * missing, 0700), renamed into place ({@link PrivateFiles#replace}).
   */
  private static void replaceLocal(java.nio.file.Path target, Writer writer) throws Exception {
    Files.createDirectories(target.getParent(), PrivateFiles.FOLDER_MODE);
    PrivateFiles.replace(target, writer::write);
  }

  /**
   * Creates {@code path} and closes it once {@code writer} has written it whole; a stream that a
   * failure leaves half written is aborted where it can be, so that it never appears.
   */
  private static void writeWhole(
      FileSystem fs, Path path, boolean overwrite, FsPermission permission, Writer writer)
      throws Exception {
    var create = fs.createFile(path).overwrite(overwrite);
    if (permission != null) create.permission(permission);
    FSDataOutputStream out = create.build();
    try {
      writer.write(out);
    } catch (Throwable e) {
      try {
        if (out.hasCapability(StreamCapabilities.ABORTABLE_STREAM)) out.abort();
        else out.close();
      } catch (Exception second) {
        e.addSuppressed(second);
      }
      throw e;
    }
    out.close();
  }

  /**
   * Renames {@code from} onto an existing {@code to} where the file system does; Hadoop's contract
   * lets one that does not return false or throw FileAlreadyExistsException (s3a://, for one).
   */
  private static boolean renamedOnto(FileSystem fs, Path from, Path to) throws IOException {
    try {
      return fs.rename(from, to);
    } catch (FileAlreadyExistsException e) {
      return false;
    }
  }
}
