package io.cloudprofiler.spark.analysis;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.ToLongFunction;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.internal.SQLConf;

/**
 * Log files packed into a scan's partitions as Spark's own file sources pack small files
 * (FilePartition.getFilePartitions): an application folder holds hundreds of files of a few hundred
 * kB, and a task per file spent most of a pass starting tasks (the demo's 273 files: a task each).
 */
final class FilePacks {
  private FilePacks() {}

  /** The files of one partition, read one after the other. */
  static final class Pack<T extends Serializable> implements InputPartition {
    private static final long serialVersionUID = 1L;
    final List<T> files;

    Pack(List<T> files) {
      this.files = files;
    }
  }

  /**
   * The files in partitions, by Spark's settings spark.sql.files.maxPartitionBytes and
   * openCostInBytes: each partition at most the smaller of the first and the files' bytes (each
   * counted with the cost of opening it) over minPartitions, largest files first, every file in
   * exactly one.
   */
  static <T extends Serializable> InputPartition[] pack(List<T> files, ToLongFunction<T> bytes) {
    SQLConf conf = SQLConf.get();
    long openCost = conf.filesOpenCostInBytes();
    long total = 0;
    for (T f : files) total += bytes.applyAsLong(f) + openCost;
    int cores = minPartitions(conf);
    long most =
        Math.min(conf.filesMaxPartitionBytes(), Math.max(openCost, total / Math.max(1, cores)));
    List<T> largestFirst = new ArrayList<>(files);
    largestFirst.sort(Comparator.comparingLong(bytes).reversed());
    List<InputPartition> packs = new ArrayList<>();
    List<T> current = new ArrayList<>();
    long size = 0;
    for (T f : largestFirst) {
      long b = bytes.applyAsLong(f);
      if (!current.isEmpty() && size + b > most) {
        packs.add(new Pack<>(current));
        current = new ArrayList<>();
        size = 0;
      }
      current.add(f);
      size += b + openCost;
    }
    if (!current.isEmpty()) packs.add(new Pack<>(current));
    return packs.toArray(new InputPartition[0]);
  }

  /**
   * The partitions Spark's file sources spread the bytes over: spark.sql.files.minPartitionNum,
   * else spark.sql.leafNodeDefaultParallelism, else the context's default parallelism.
   */
  private static int minPartitions(SQLConf conf) {
    for (String key :
        List.of("spark.sql.files.minPartitionNum", "spark.sql.leafNodeDefaultParallelism")) {
      String given = conf.getConfString(key, null);
      if (given != null) return Integer.parseInt(given.strip());
    }
    return SparkSession.active().sparkContext().defaultParallelism();
  }

  /** Opens the reader of one file of a pack. */
  interface Opener<T, R> {
    PartitionReader<R> open(T file) throws IOException;
  }

  /** A pack's files read one after the other, each reader closed before the next opens. */
  static <T extends Serializable, R> PartitionReader<R> reader(
      InputPartition pack, Opener<T, R> opener) {
    @SuppressWarnings("unchecked")
    List<T> files = ((Pack<T>) pack).files;
    return new PartitionReader<>() {
      private int next;
      private PartitionReader<R> current;

      @Override
      public boolean next() throws IOException {
        while (current == null || !current.next()) {
          close();
          if (next == files.size()) return false;
          current = opener.open(files.get(next++));
        }
        return true;
      }

      @Override
      public R get() {
        return current.get();
      }

      @Override
      public void close() throws IOException {
        if (current == null) return;
        PartitionReader<R> closing = current;
        current = null;
        closing.close();
      }
    };
  }
}
