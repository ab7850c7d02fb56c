package io.cloudprofiler.spark;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.channels.Channels;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * A table that grows for as long as the application runs (every task attempt, every calibration probe): each
 * {@link #append} writes one record batch to an Arrow IPC stream in a local temporary file, so the driver's memory
 * holds one batch at most, and {@link #copyTo} publishes the batches so far to any Hadoop-compatible URI as an
 * Arrow IPC file (with its footer: readable by pyarrow, polars and DuckDB), rewritten whole at each publish and
 * renamed into place. {@link #finish} ends the stream, publishes it and removes the local file. Rows are as in
 * {@link ArrowTables}.
 */
final class ArrowSpool {
  private final String prefix;
  private final List<String> names;
  private final Map<String, String> metadata;
  private BufferAllocator allocator;
  private VectorSchemaRoot root;
  private FileOutputStream out;
  private ArrowStreamWriter writer;
  private boolean finished;
  /** Batches appended since the last {@link #copyTo}. */
  private boolean unpublished;

  private File file;

  ArrowSpool(String prefix, List<String> names, Map<String, String> metadata) {
    this.prefix = prefix;
    this.names = names;
    this.metadata = metadata;
  }

  synchronized void append(List<Object[]> rows) throws IOException {
    if (rows.isEmpty() || finished) return;
    if (writer == null) {
      file = File.createTempFile(prefix, ".arrows");
      file.deleteOnExit();
      allocator = new RootAllocator();
      List<FieldVector> vectors = ArrowTables.vectors(names, rows.get(0), allocator);
      Schema schema = new Schema(vectors.stream().map(FieldVector::getField).toList(), metadata);
      root = new VectorSchemaRoot(schema, vectors, 0);
      out = new FileOutputStream(file);
      writer = new ArrowStreamWriter(root, null, Channels.newChannel(out));
      writer.start();
    }
    ArrowTables.fill(root.getFieldVectors(), rows);
    root.setRowCount(rows.size());
    writer.writeBatch();
    out.flush();
    unpublished = true;
  }

  /** Publishes the batches written so far to {@code target}; nothing before the first row, nor when no batch
   * came since the last time. */
  synchronized void copyTo(String target) throws Exception {
    if (writer == null || finished || !unpublished) return;
    ArrowTables.publishStream(file, target);
    unpublished = false;
  }

  /** Ends the stream, publishes it to {@code target} and releases everything; later calls do nothing. */
  synchronized void finish(String target) throws Exception {
    if (finished) return;
    finished = true;
    try {
      if (writer != null) {
        writer.end();
        out.close();
        ArrowTables.publishStream(file, target);
      }
    } finally {
      if (writer != null) {
        writer.close();
        root.close();
        allocator.close();
        file.delete();
      }
    }
  }
}
