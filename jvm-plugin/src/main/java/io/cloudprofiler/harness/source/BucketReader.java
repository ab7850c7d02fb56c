package io.cloudprofiler.harness.source;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.sql.SourceRows;
import io.cloudprofiler.spark.sql.TraceExpression;
import java.util.Collections;
import java.util.Iterator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * A task's reader of one emitter's offset range: it fetches the range's buckets a few at a time and
 * hands each to Spark as a columnar batch, in place. A replayed range (a task retry, a restart from
 * the checkpoint) fetches the same buckets again. With the option traceChannel, every tuple id is
 * logged with the TSC at which the source delivers its bucket, through this executor's library.
 * Where operator timing samples rows, the sampled rows are logged for their latency from the source
 * to each operator ({@link SourceRows}).
 */
final class BucketReader implements PartitionReader<ColumnarBatch> {
  /**
   * What one fetch may bring: a reader holds about this many bytes of received buckets (at least
   * one bucket, at most MAX_FETCH_BUCKETS), whatever the size of the emitters' buckets.
   */
  static final long FETCH_BYTES = 8 << 20;

  static final long MAX_FETCH_BUCKETS = 64;

  /** Serialized to the executors with the payload's Arrow schema. */
  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final SourceOptions options;
    private final byte[] payloadSchema;

    /**
     * The XoY of the rows logged for their latency to the operators ({@link SourceRows}), or null.
     */
    private final long[] rowSample;

    Factory(SourceOptions options, byte[] payloadSchema, long[] rowSample) {
      this.options = options;
      this.payloadSchema = payloadSchema;
      this.rowSample = rowSample;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new BucketReader(
          options,
          PayloadSchema.parse(payloadSchema, options.columns),
          (EmitterRange) partition,
          rowSample);
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new UnsupportedOperationException("cloudprofiler source: reads columnar batches only");
    }
  }

  private final PayloadSchema schema;
  private final EmitterRange range;
  private final EmitterClient client;
  private final long trace;
  private final long[] rowSample;

  /**
   * Whose TSC the emitter's stamps are, as it states it (asked only where rows are sampled), or
   * null: the emission is then not logged.
   */
  private final SourceRows.Clock emitterClock;

  /** The rows handed to Spark so far: the next row's ordinal in the task. */
  private long delivered;

  private long next;
  private long fetchBuckets = 1; // until the size of a bucket is known
  private Iterator<EmitterClient.Bucket> fetched = Collections.emptyIterator();
  private ColumnarBatch current;

  private BucketReader(
      SourceOptions options, PayloadSchema schema, EmitterRange range, long[] rowSample) {
    this.schema = schema;
    this.rowSample = rowSample;
    this.range = range;
    this.client =
        new EmitterClient(
            range.endpoint(),
            options.timeoutS,
            range.bucketTuples(),
            schema.maxBucketBytes(range.bucketTuples()));
    this.emitterClock = rowSample == null ? null : emitterClock(client);
    this.trace =
        options.traceChannel == null ? 0 : TraceExpression.channel(options.traceChannel, 0, 0);
    this.next = range.start();
  }

  @Override
  public boolean next() {
    while (true) {
      while (fetched.hasNext()) {
        EmitterClient.Bucket bucket = fetched.next();
        if (bucket.kind() != EmitterClient.DATA) continue; // pills hold no tuples
        current = BucketColumns.batch(schema, bucket);
        if (trace != 0) CloudProfiler.logMany(trace, ids(bucket));
        SourceRows.log(rowSample, delivered, bucket.tuples(), bucket.tsc(), emitterClock);
        delivered += bucket.tuples();
        return true;
      }
      if (next >= range.end()) return false;
      var buckets = client.fetch(next, range.end(), fetchBuckets);
      if (buckets.isEmpty())
        throw new IllegalStateException(
            "cloudprofiler source: the emitter at "
                + range.endpoint()
                + " sent no bucket of "
                + next);
      next += buckets.size();
      long bytes = buckets.stream().mapToLong(b -> b.payload().length).sum();
      fetchBuckets =
          Math.max(
              1, Math.min(MAX_FETCH_BUCKETS, FETCH_BYTES * buckets.size() / Math.max(1, bytes)));
      fetched = buckets.iterator();
    }
  }

  /**
   * The emitter's clock, or null where asking for it failed: the fetches will say why, if they
   * fail.
   */
  private static SourceRows.Clock emitterClock(EmitterClient client) {
    try {
      return client.clock();
    } catch (RuntimeException e) {
      return null;
    }
  }

  private static long[] ids(EmitterClient.Bucket bucket) {
    long[] ids = new long[(int) bucket.tuples()];
    for (int i = 0; i < ids.length; i++) ids[i] = bucket.firstId() + i;
    return ids;
  }

  @Override
  public ColumnarBatch get() {
    return current;
  }

  @Override
  public void close() {
    client.close();
  }
}
