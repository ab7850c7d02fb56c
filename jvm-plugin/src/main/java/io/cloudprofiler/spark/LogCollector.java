package io.cloudprofiler.spark;

import java.io.File;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/** Copies an executor's local log files into the collection folder (any Hadoop-compatible URI). */
final class LogCollector {
  private final File source;
  private final String target;

  LogCollector(File source, String target) {
    this.source = source;
    this.target = target;
  }

  String target() {
    return target;
  }

  void copy() throws Exception {
    File[] files = source.listFiles((dir, name) -> name.endsWith(".arrows"));
    if (files == null || files.length == 0) return;
    URI uri = target.contains("://") ? new URI(target) : new File(target).getAbsoluteFile().toURI();
    FileSystem fs = FileSystem.get(uri, new Configuration());
    Path dst = new Path(uri);
    fs.mkdirs(dst);
    for (File f : files) fs.copyFromLocalFile(false, true, new Path(f.getAbsolutePath()), new Path(dst, f.getName()));
  }
}
