package io.cloudprofiler.spark;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * A table that grows for as long as the application runs (every task attempt, every calibration
 * probe): each {@link #append} writes one record batch to an Arrow IPC stream in a local temporary
 * file, so the driver's memory holds one batch at most, and {@link #copyTo} publishes the batches
 * so far to any Hadoop-compatible URI as an Arrow IPC file (with its footer: readable by pyarrow,
 * polars and DuckDB), rewritten whole at each publish and renamed into place. {@link #finish}
 * publishes it a last time and removes the local file. Rows are as in {@link ArrowIpc}.
 */
final class ArrowSpool {
  private final String prefix;
  private final List<String> names;
  private final Supplier<Map<String, String>> metadata;
  private final List<Class<?>> types; // null: those of the first row's values
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

  ArrowSpool(String prefix, List<String> names, Map<String, String> metadata) {
    this(prefix, names, null, () -> metadata);
  }

  /**
   * With the columns' types given (see {@link ArrowIpc}), so that any value may be null, and the
   * schema's metadata asked for when the first rows come.
   */
  ArrowSpool(
      String prefix,
      List<String> names,
      List<Class<?>> types,
      Supplier<Map<String, String>> metadata) {
    this.prefix = prefix;
    this.names = names;
    this.types = types;
    this.metadata = metadata;
  }

  synchronized void append(List<Object[]> rows) throws IOException {
    if (rows.isEmpty() || finished) return;
    if (out == null) {
      file = File.createTempFile(prefix, ".arrows");
      file.deleteOnExit();
      layout =
          new ArrowIpc.Layout(
              names, types != null ? types : ArrowIpc.typesOf(rows.get(0)), metadata.get());
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
   * Publishes the batches written so far to {@code target}; nothing before the first row, nor when
   * no batch came since the last time.
   */
  synchronized void copyTo(String target) throws Exception {
    if (out == null || finished || !unpublished) return;
    ArrowTables.publishStream(file, length, layout.end(blocks), target);
    unpublished = false;
  }

  /**
   * Publishes the table to {@code target} a last time and removes the local file; later calls do
   * nothing.
   */
  synchronized void finish(String target) throws Exception {
    if (finished) return;
    finished = true;
    if (out == null) return;
    try {
      out.close();
      ArrowTables.publishStream(file, length, layout.end(blocks), target);
    } finally {
      file.delete();
    }
  }
}
