package io.cloudprofiler.spark;

import java.io.File;
import java.io.OutputStream;
import java.net.URI;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/** Writes a table as an Arrow IPC stream to any Hadoop-compatible URI (a plain path means the local disk). */
final class ArrowTables {
  private ArrowTables() {}

  /** Replaces {@code target} with one record batch holding {@code root}. */
  static void write(String target, VectorSchemaRoot root) throws Exception {
    URI uri = target.contains("://") ? new URI(target) : new File(target).getAbsoluteFile().toURI();
    FileSystem fs = FileSystem.get(uri, new Configuration());
    Path path = new Path(uri);
    fs.mkdirs(path.getParent());
    try (OutputStream out = fs.create(path, true);
        ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
      writer.start();
      writer.writeBatch();
      writer.end();
    }
  }

  /**
   * Replaces {@code target} with a table of {@code rows}: each row holds one value per name, a String (utf8),
   * Integer (int32), Long (int64) or anything else (its text as utf8); the types come
   * from the first row. Nothing is written for no rows.
   */
  static void writeRows(String target, Map<String, String> metadata, List<String> names, List<Object[]> rows)
      throws Exception {
    if (rows.isEmpty()) return;
    int n = rows.size();
    try (BufferAllocator allocator = new RootAllocator()) {
      List<FieldVector> vectors = new ArrayList<>();
      try {
        for (int c = 0; c < names.size(); c++) {
          Object first = rows.get(0)[c];
          FieldVector v = first instanceof Long ? new BigIntVector(names.get(c), allocator)
              : first instanceof Integer ? new IntVector(names.get(c), allocator)
              : new VarCharVector(names.get(c), allocator);
          vectors.add(v);
          v.setInitialCapacity(n);
          v.allocateNew();
          for (int i = 0; i < n; i++) {
            Object value = rows.get(i)[c];
            if (v instanceof BigIntVector) ((BigIntVector) v).setSafe(i, (Long) value);
            else if (v instanceof IntVector) ((IntVector) v).setSafe(i, (Integer) value);
            else ((VarCharVector) v).setSafe(i, String.valueOf(value).getBytes(StandardCharsets.UTF_8));
          }
          v.setValueCount(n);
        }
        Schema schema = new Schema(vectors.stream().map(FieldVector::getField).toList(), metadata);
        try (VectorSchemaRoot root = new VectorSchemaRoot(schema, vectors, n)) {
          write(target, root);
        }
      } finally {
        for (FieldVector v : vectors) v.close();
      }
    }
  }
}
