package io.cloudprofiler.harness.source;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * A micro-batch's part of one emitter: offsets [start, end), of buckets of at most {@code
 * bucketTuples} tuples (the emitter's state says how many).
 */
record EmitterRange(String endpoint, long start, long end, long bucketTuples)
    implements InputPartition {}
