package io.cloudprofiler.harness.source;

import io.cloudprofiler.spark.sql.SourceRows;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;

/**
 * The driver's side of the source: a micro-batch is a range of offsets per emitter, one Spark
 * partition each; Spark's commit of a batch lets the emitters free its buckets. A batch replayed
 * after a failure or a restart reads the same buckets, so every tuple is delivered exactly once
 * while its emitter retains it; a range that is gone fails the query naming the emitter and the
 * offsets.
 */
final class GeneratorStream implements MicroBatchStream, SupportsAdmissionControl {
  private final SourceOptions options;
  private final byte[] payloadSchema;
  private final Map<String, EmitterClient> clients = new LinkedHashMap<>();
  private final Map<String, Long> bucketTuples = new LinkedHashMap<>();

  /**
   * Per emitter, the offset after its end-of-period pill, once it said so: an emitter stops once
   * its pill was fetched, so a batch planned after that must not ask it again (a query whose
   * emitters end in different batches would else wait for the gone one until the timeout and fail).
   */
  private final Map<String, Long> finalOffsets = new LinkedHashMap<>();

  GeneratorStream(SourceOptions options, byte[] payloadSchema) {
    this.options = options;
    this.payloadSchema = payloadSchema;
  }

  private EmitterClient client(String endpoint) {
    return clients.computeIfAbsent(endpoint, e -> new EmitterClient(e, options.timeoutS));
  }

  @Override
  public Offset initialOffset() {
    Map<String, Long> offsets = new LinkedHashMap<>();
    for (String e : options.endpoints) offsets.put(e, 0L);
    return new EmitterOffsets(offsets);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return options.maxTuplesPerTrigger > 0
        ? ReadLimit.maxRows(options.maxTuplesPerTrigger)
        : ReadLimit.allAvailable();
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException(
        "cloudprofiler source: latestOffset(start, limit) is the one Spark calls");
  }

  @Override
  public Offset latestOffset(Offset start, ReadLimit limit) {
    Map<String, Long> end = new LinkedHashMap<>();
    for (String e : options.endpoints) {
      Long last = finalOffsets.get(e);
      if (start != null && last != null && ((EmitterOffsets) start).of(e) >= last) {
        end.put(e, last);
        continue;
      }
      var state = client(e).latest();
      if (state.path("final").isIntegralNumber()) finalOffsets.put(e, state.path("final").asLong());
      long latest = state.path("latest").asLong();
      bucketTuples.put(e, state.path("bucket_tuples").asLong());
      if (start != null && limit instanceof ReadMaxRows rows) {
        // the budget shared evenly, in whole buckets, at least one bucket each
        long bucketTuples = Math.max(1, state.path("bucket_tuples").asLong());
        long budget = Math.max(1, rows.maxRows() / options.endpoints.size() / bucketTuples);
        latest = Math.min(latest, ((EmitterOffsets) start).of(e) + budget);
      }
      end.put(e, latest);
    }
    return new EmitterOffsets(end);
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    List<InputPartition> ranges = new ArrayList<>();
    for (String e : options.endpoints) {
      long from = ((EmitterOffsets) start).of(e);
      long to = ((EmitterOffsets) end).of(e);
      if (to > from) ranges.add(new EmitterRange(e, from, to, bucketTuples(e)));
    }
    return ranges.toArray(new InputPartition[0]);
  }

  /** The tuples of the emitter's buckets: from its last state, else asked (a restarted query). */
  private long bucketTuples(String endpoint) {
    return bucketTuples.computeIfAbsent(
        endpoint, e -> client(e).latest().path("bucket_tuples").asLong());
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    // the batch's settings: its rows are logged as the operator probe above the scan numbers them
    return new BucketReader.Factory(options, payloadSchema, SourceRows.sample());
  }

  @Override
  public Offset deserializeOffset(String json) {
    return EmitterOffsets.fromJson(json);
  }

  @Override
  public void commit(Offset end) {
    for (var entry : ((EmitterOffsets) end).offsets.entrySet()) {
      // the pill's own batch holds no data: its commit frees nothing, and its emitter may be gone
      Long last = finalOffsets.get(entry.getKey());
      if (last != null && entry.getValue() >= last) continue;
      client(entry.getKey()).commit(entry.getValue());
    }
  }

  @Override
  public void stop() {
    clients.values().forEach(EmitterClient::close);
    clients.clear();
  }
}
