package io.cloudprofiler.spark.executor;

import static io.cloudprofiler.spark.JvmTests.equal;
import static io.cloudprofiler.spark.JvmTests.startLibrary;

import io.cloudprofiler.CloudProfiler;

/** Tests of the executor's task records, on the real native library. */
public final class ExecutorTests {
  private ExecutorTests() {}

  /**
   * Records of tasks that start or end before the channels open reach them when they open; after an
   * abandon, none is kept.
   */
  public static void testTaskRecordsWaitForTheirChannels() throws Exception {
    startLibrary("cp-task-records");
    try {
      TaskRecords tasks = new TaskRecords();
      equal(0, tasks.channels().length);
      tasks.startAt(1, CloudProfiler.tsc());
      tasks.start(2);
      tasks.end(1);
      long start =
          CloudProfiler.openChannel(
              "t.start", "buffered", new long[0], new String[0], new String[0]);
      long end =
          CloudProfiler.openChannel("t.end", "buffered", new long[0], new String[0], new String[0]);
      tasks.open(start, end);
      tasks.end(2);
      equal(2L, CloudProfiler.stats(start)[0]);
      equal(2L, CloudProfiler.stats(end)[0]);
      equal(0L, tasks.abandon());
      TaskRecords never = new TaskRecords();
      never.start(3);
      never.end(3);
      equal(2L, never.abandon());
      never.start(4);
      equal(3L, never.abandon());
    } finally {
      CloudProfiler.stop();
    }
  }
}
