package io.cloudprofiler.spark;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.TaskInfo;

/** Spark's view of every task attempt (job, stage, partition, executor, host, status, times), written as an
 * Arrow IPC stream so analysis can join it with the TSC records on the task attempt id. */
public class TaskListener extends SparkListener {
  private static final class Row {
    long taskAttemptId, launchTime, finishTime;
    int jobId, stageId, stageAttempt, partition, attemptNumber;
    String executorId, host, status, failureReason;
  }

  private final List<Row> rows = new ArrayList<>();
  private final Map<Integer, Integer> jobOfStage = new HashMap<>();

  @Override
  public synchronized void onJobStart(SparkListenerJobStart event) {
    scala.collection.Iterator<Object> it = event.stageIds().iterator();
    while (it.hasNext()) jobOfStage.put((Integer) it.next(), event.jobId());
  }

  @Override
  public synchronized void onTaskEnd(SparkListenerTaskEnd event) {
    TaskInfo info = event.taskInfo();
    Row r = new Row();
    r.taskAttemptId = info.taskId();
    r.jobId = jobOfStage.getOrDefault(event.stageId(), -1);
    r.stageId = event.stageId();
    r.stageAttempt = event.stageAttemptId();
    r.partition = info.partitionId();
    r.attemptNumber = info.attemptNumber();
    r.executorId = info.executorId();
    r.host = info.host();
    r.launchTime = info.launchTime();
    r.finishTime = info.finishTime();
    r.status = info.status();
    r.failureReason = info.successful() ? "" : String.valueOf(event.reason());
    rows.add(r);
  }

  synchronized int size() {
    return rows.size();
  }

  /** Writes every row seen so far to {@code target} (any Hadoop-compatible URI), replacing an older table. */
  public synchronized void writeTable(String target) throws Exception {
    int n = rows.size();
    try (BufferAllocator allocator = new RootAllocator();
        BigIntVector attempt = new BigIntVector("task_attempt_id", allocator);
        IntVector job = new IntVector("job_id", allocator);
        IntVector stage = new IntVector("stage_id", allocator);
        IntVector stageAttempt = new IntVector("stage_attempt", allocator);
        IntVector partition = new IntVector("partition", allocator);
        IntVector attemptNumber = new IntVector("attempt_number", allocator);
        VarCharVector executor = new VarCharVector("executor_id", allocator);
        VarCharVector host = new VarCharVector("host", allocator);
        BigIntVector launch = new BigIntVector("launch_time_ms", allocator);
        BigIntVector finish = new BigIntVector("finish_time_ms", allocator);
        VarCharVector status = new VarCharVector("status", allocator);
        VarCharVector reason = new VarCharVector("failure_reason", allocator)) {
      List<FieldVector> vectors = List.of(attempt, job, stage, stageAttempt, partition, attemptNumber, executor, host,
          launch, finish, status, reason);
      for (FieldVector v : vectors) v.setInitialCapacity(n);
      for (FieldVector v : vectors) v.allocateNew();
      for (int i = 0; i < n; i++) {
        Row r = rows.get(i);
        attempt.setSafe(i, r.taskAttemptId);
        job.setSafe(i, r.jobId);
        stage.setSafe(i, r.stageId);
        stageAttempt.setSafe(i, r.stageAttempt);
        partition.setSafe(i, r.partition);
        attemptNumber.setSafe(i, r.attemptNumber);
        executor.setSafe(i, r.executorId.getBytes(StandardCharsets.UTF_8));
        host.setSafe(i, r.host.getBytes(StandardCharsets.UTF_8));
        launch.setSafe(i, r.launchTime);
        finish.setSafe(i, r.finishTime);
        status.setSafe(i, r.status.getBytes(StandardCharsets.UTF_8));
        reason.setSafe(i, r.failureReason.getBytes(StandardCharsets.UTF_8));
      }
      for (FieldVector v : vectors) v.setValueCount(n);
      try (VectorSchemaRoot root = new VectorSchemaRoot(vectors)) {
        ArrowTables.write(target, root);
      }
    }
  }
}
