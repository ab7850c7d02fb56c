package io.cloudprofiler.spark.executor;

import io.cloudprofiler.PrivateFiles;
import io.cloudprofiler.spark.tables.ArrowTables;
import io.cloudprofiler.spark.tables.CompleteBatches;
import io.cloudprofiler.spark.tables.Table;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Copies one executor's local log files into its folder under logDir (any Hadoop-compatible URI),
 * each renamed into place so that a reader never finds half a file. While the executor runs, {@link
 * #copyChanged} copies only what changed since the last time: a closed file once, a growing file's
 * complete batches when there are new ones. A channel's file rolls into a new segment at
 * spark.cloudprofiler.roll.bytes, so that what an interval copies again (the open segments) stays
 * bounded however long the application runs. {@link #collectAll} copies every file whole and
 * removes the local copies that reached logDir.
 *
 * <p>The local folder names its target in {@link #TARGET_FILE}, so that the files of an executor
 * that was killed can be collected by another process (LostExecutors).
 */
public final class LogCollector {
  private static final Logger LOG = LoggerFactory.getLogger(LogCollector.class);

  /** In an executor's local folder: the URI its files are collected into. */
  static final String TARGET_FILE = "collect-target";

  /**
   * Written into the collected folder of a process that was killed: the analysis reads its unclosed
   * files as cut.
   */
  public static final Table LOST_MARKER =
      new Table(
          "process_lost",
          "process-lost.arrows",
          Table.EXECUTOR,
          "one row, written where a killed process's files were collected: its local folder and how"
              + " many files came (its unclosed files end where it stopped)",
          List.of("folder", "files"),
          List.of(String.class, Integer.class));

  private static final byte[] NO_END = new byte[0];

  private final File source;
  private final String target;

  /**
   * Per file name: the file as it was (length, modification time) and how many bytes of it logDir
   * has.
   */
  private final Map<String, Copied> copied = new HashMap<>();

  private record Copied(long length, FileTime modified, long copiedLength) {}

  public LogCollector(File source, String target) {
    this.source = source;
    this.target = target;
  }

  /**
   * Names the target in the (existing) local folder, for whoever collects it should this process be
   * killed.
   */
  public void nameTarget() throws Exception {
    PrivateFiles.writeInPlace(new File(source, TARGET_FILE).toPath(), target);
  }

  String target() {
    return target;
  }

  /** The folder's log files: this user's regular files, never a link nor another user's file. */
  private List<File> logFiles() {
    File[] files = source.listFiles((dir, name) -> name.endsWith(".arrows"));
    List<File> owned = new ArrayList<>();
    for (File f : files == null ? new File[0] : files) {
      try {
        if (PrivateFiles.untrustedFile(f.toPath()) == null) owned.add(f);
      } catch (Exception gone) { // removed meanwhile
      }
    }
    return owned;
  }

  /**
   * Copies the files that changed since the last copy: a closed file whole, an open one up to its
   * last complete batch (a reader of logDir then never finds a part of a batch).
   */
  public synchronized void copyChanged() throws Exception {
    long started = System.nanoTime(), bytes = 0;
    int files = 0;
    for (File f : logFiles()) {
      Path path = f.toPath();
      long length = Files.size(path);
      FileTime modified = Files.getLastModifiedTime(path);
      Copied last = copied.get(f.getName());
      if (last != null && last.length == length && last.modified.equals(modified)) continue;
      long complete =
          CompleteBatches.closed(path)
              ? length
              : CompleteBatches.length(
                  path, last == null || last.copiedLength == last.length ? 0 : last.copiedLength);
      if (complete > 0 && (last == null || complete != last.copiedLength || complete == length)) {
        ArrowTables.copy(f, complete, NO_END, target + "/" + f.getName());
        bytes += complete;
        files++;
      } else {
        complete = last == null ? 0 : last.copiedLength;
      }
      copied.put(f.getName(), new Copied(length, modified, complete));
    }
    // what a collection costs: with rolling, the closed segments of the interval and the open ones
    // (bounded)
    LOG.debug(
        "cloudprofiler: copied {} bytes of {} files to {} in {} ms",
        bytes,
        files,
        target,
        (System.nanoTime() - started) / 1_000_000);
  }

  /**
   * Copies every file whole that logDir does not hold as it is, then removes the local folder. A
   * file that could not be copied stays, and one log line names them. {@code lost}: the process
   * that wrote them was killed (its open files end where it stopped), said by {@link #LOST_MARKER}
   * in the target. Returns whether all were copied.
   */
  /**
   * Of the last {@link #collectAll}: the files it collected, those cut where their process died.
   */
  private int collectedFiles, cutFiles;

  synchronized int[] collectedAndCut() {
    return new int[] {collectedFiles, cutFiles};
  }

  public synchronized boolean collectAll(boolean lost) {
    cutFiles = 0;
    List<File> collected = new ArrayList<>();
    List<String> failed = new ArrayList<>();
    Exception firstFailure = null;
    for (File f : logFiles()) {
      try {
        Path path = f.toPath();
        long length = Files.size(path);
        Copied last = copied.get(f.getName());
        if (lost && !CompleteBatches.closed(path)) {
          // killed while it wrote a batch: logDir gets the file whole up to its last complete
          // batch, with a footer every reader opens (none complete: nothing to copy)
          cutFiles++;
          long complete = CompleteBatches.length(path, 0);
          if (complete > 0) {
            byte[] end = CompleteBatches.cutEnd(path, complete);
            ArrowTables.copy(f, complete, end, target + "/" + f.getName());
          }
        } else if (last == null
            || last.copiedLength != length
            || !last.modified.equals(Files.getLastModifiedTime(path))) {
          ArrowTables.copy(f, length, NO_END, target + "/" + f.getName());
        }
        collected.add(f);
      } catch (Exception e) {
        failed.add(f.getName());
        if (firstFailure == null) firstFailure = e;
      }
    }
    if (lost && failed.isEmpty()) {
      try {
        ArrowTables.writeRows(
            LOST_MARKER,
            target,
            Map.of(),
            List.<Object[]>of(new Object[] {source.getPath(), collected.size()}));
      } catch (Exception e) {
        failed.add(LOST_MARKER.file());
        firstFailure = e;
      }
    }
    if (!failed.isEmpty()) {
      LOG.warn(
          "cloudprofiler: kept {} in {}: could not copy them to {}: {}",
          failed,
          source,
          target,
          String.valueOf(firstFailure));
      return false;
    }
    collectedFiles = collected.size();
    for (File f : collected) f.delete();
    new File(source, TARGET_FILE).delete();
    if (source.delete())
      source.getParentFile().delete(); // the application's folder, once its last one is gone
    return true;
  }
}
