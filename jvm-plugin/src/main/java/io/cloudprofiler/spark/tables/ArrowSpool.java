package io.cloudprofiler.spark.tables;

import io.cloudprofiler.PrivateFiles;
import io.cloudprofiler.spark.Config;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;
import org.apache.spark.SparkEnv;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A table that grows for as long as the application runs (every task attempt, every calibration
 * probe): each {@link #append} writes one record batch to an Arrow IPC stream in a local file
 * (0600, a random name, in the application's local folder: {@link #spoolFolder}), so the driver's
 * memory holds one batch at most, and {@link #copyTo} publishes the batches so far to any
 * Hadoop-compatible URI as an Arrow IPC file (with its footer: readable by pyarrow, polars and
 * DuckDB), rewritten whole at each publish and renamed into place. {@link #finish} publishes it a
 * last time and removes the local file. Rows hold the values of the table's columns ({@link
 * Table}).
 */
public final class ArrowSpool {
  private static final Logger LOG = LoggerFactory.getLogger(ArrowSpool.class);
  private final Table table;
  private final Supplier<Map<String, String>> metadata;
  private ArrowIpc.Layout layout;

  /** Batches appended since the last {@link #copyTo}. */
  private boolean unpublished;

  private File file;
  private FileOutputStream out;

  /**
   * Bytes of the local stream so far, and each batch's {offset in the published file, metadata,
   * body length}.
   */
  private long length;

  private final List<long[]> blocks = new ArrayList<>();
  private boolean finished;

  /**
   * A spool of {@code table}'s rows (any value may be null), the schema's metadata asked for when
   * the first rows come.
   */
  public ArrowSpool(Table table, Supplier<Map<String, String>> metadata) {
    this.table = table;
    this.metadata = metadata;
  }

  public synchronized void append(List<Object[]> rows) throws IOException {
    if (rows.isEmpty() || finished) return;
    if (out == null) {
      file =
          Files.createTempFile(
                  spoolFolder(),
                  "cloudprofiler-" + table.file().replaceAll("[.]arrows$", ""),
                  ".arrows",
                  PrivateFiles.FILE_MODE)
              .toFile();
      file.deleteOnExit();
      layout = new ArrowIpc.Layout(table.columns(), table.types(), metadata.get());
      out = new FileOutputStream(file);
      byte[] head = layout.message();
      out.write(head);
      length = head.length;
    }
    byte[][] batch = layout.batch(rows);
    out.write(batch[0]);
    out.write(batch[1]);
    out.flush();
    blocks.add(new long[] {ArrowIpc.MAGIC.length + length, batch[0].length, batch[1].length});
    length += batch[0].length + batch[1].length;
    unpublished = true;
  }

  /**
   * Appends {@code rows} and empties the list, for a table that takes rows as they come: rows the
   * local spool cannot take are lost, said in one log line naming the table.
   */
  public void appendAndClear(List<Object[]> rows) {
    try {
      append(rows);
    } catch (Exception e) {
      LOG.warn(
          "cloudprofiler: {} lost {} rows (its local spool failed)", table.file(), rows.size(), e);
    }
    rows.clear();
  }

  /**
   * Publishes the batches written so far to {@code target}; nothing before the first row, nor when
   * no batch came since the last time.
   */
  public synchronized void copyTo(String target) throws Exception {
    if (out == null || finished || !unpublished) return;
    ArrowTables.publishStream(file, length, layout.end(blocks), target);
    unpublished = false;
  }

  /**
   * Publishes the table to {@code target} a last time and removes the local file; later calls do
   * nothing.
   */
  public synchronized void finish(String target) throws Exception {
    if (finished) return;
    finished = true;
    if (out == null) return;
    try {
      out.close();
      ArrowTables.publishStream(file, length, layout.end(blocks), target);
    } finally {
      file.delete();
      removeIfEmpty(file.getParentFile());
    }
  }

  /** Where the spools of this process go, and the application it was made for. */
  private static File folder;

  private static String folderApplication;

  /**
   * {@code <localDir>/<application id>/driver-spool-<pid>} (0700, this user's), where the driver's
   * local files go with the application's others; first removes what killed drivers of this host
   * left ({@link #removeLeft}). Outside a Spark driver (no application id), or where that folder
   * cannot be this user's alone, a fresh private folder in java.io.tmpdir.
   */
  private static synchronized java.nio.file.Path spoolFolder() throws IOException {
    SparkEnv env = SparkEnv.get();
    String appId = env == null ? null : env.conf().get("spark.app.id", null);
    if (folder != null && folder.isDirectory() && Objects.equals(appId, folderApplication))
      return folder.toPath();
    java.nio.file.Path made = null;
    if (appId != null && !appId.contains("/") && !appId.startsWith(".")) {
      java.nio.file.Path localDir =
          java.nio.file.Path.of(Config.LOCAL_DIR.text(env.conf())).toAbsolutePath().normalize();
      removeLeft(localDir);
      made = localDir.resolve(appId).resolve(SPOOL_PREFIX + ProcessHandle.current().pid());
      try {
        PrivateFiles.folder(made);
      } catch (IOException e) { // the table is kept all the same
        made = null;
      }
    }
    if (made == null) {
      made =
          Files.createTempDirectory(
              java.nio.file.Path.of(System.getProperty("java.io.tmpdir")),
              "cloudprofiler-spool-",
              PrivateFiles.FOLDER_MODE);
      made.toFile().deleteOnExit();
    }
    folder = made.toFile();
    folderApplication = appId;
    return made;
  }

  private static final String SPOOL_PREFIX = "driver-spool-";

  /**
   * Removes the spool folders ({@code <localDir>/<application>/driver-spool-<pid>}) of this user's
   * drivers whose process is gone (killed: its exit hooks never ran), with their files; never
   * through a link, nor another user's.
   */
  static void removeLeft(java.nio.file.Path localDir) {
    File[] apps = localDir.toFile().listFiles();
    for (File app : apps == null ? new File[0] : apps) {
      File[] spools = app.listFiles((dir, name) -> name.matches(SPOOL_PREFIX + "[0-9]+"));
      for (File spool : spools == null ? new File[0] : spools) {
        try {
          if (PrivateFiles.untrustedFolder(spool.toPath()) != null
              || PrivateFiles.untrustedFolder(app.toPath()) != null) continue;
          long pid = Long.parseLong(spool.getName().substring(SPOOL_PREFIX.length()));
          Optional<Instant> started = ProcessHandle.of(pid).flatMap(p -> p.info().startInstant());
          if (ProcessHandle.of(pid).isPresent()
              && started.map(s -> s.toEpochMilli() <= spool.lastModified()).orElse(true)) continue;
          File[] files = spool.listFiles();
          for (File f : files == null ? new File[0] : files) {
            if (PrivateFiles.untrustedFile(f.toPath()) == null) f.delete();
          }
          removeIfEmpty(spool);
        } catch (Exception e) { // another's, or gone meanwhile: left alone
        }
      }
    }
  }

  /**
   * Removes {@code spool} if empty, then (a spool in an application's folder) that folder if it is
   * empty too.
   */
  private static void removeIfEmpty(File spool) {
    if (spool.delete() && spool.getName().startsWith(SPOOL_PREFIX)) spool.getParentFile().delete();
  }
}
