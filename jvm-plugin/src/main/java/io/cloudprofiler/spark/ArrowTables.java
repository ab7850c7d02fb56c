package io.cloudprofiler.spark;

import java.io.File;
import java.io.OutputStream;
import java.net.URI;
import java.nio.channels.Channels;
import org.apache.arrow.vector.VectorSchemaRoot;
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
}
