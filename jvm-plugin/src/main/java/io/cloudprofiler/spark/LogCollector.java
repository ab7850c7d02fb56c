package io.cloudprofiler.spark;

import java.io.File;

/**
 * Copies an executor's local log files into the collection folder (any Hadoop-compatible URI), each one renamed
 * into place so that a reader never finds half a file.
 */
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
    if (files == null) return;
    for (File f : files) ArrowTables.copy(f, target + "/" + f.getName());
  }
}
