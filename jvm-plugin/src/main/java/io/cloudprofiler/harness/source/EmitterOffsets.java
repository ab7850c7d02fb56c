package io.cloudprofiler.harness.source;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * A micro-batch's end: per emitter endpoint, the offset (in buckets) below which the batch reads.
 * Checkpointed as JSON, {"tcp://host:port": offset, ...}.
 */
final class EmitterOffsets extends Offset {
  private static final ObjectMapper JSON = new ObjectMapper();

  final Map<String, Long> offsets;

  EmitterOffsets(Map<String, Long> offsets) {
    this.offsets = offsets;
  }

  long of(String endpoint) {
    return offsets.getOrDefault(endpoint, 0L);
  }

  @Override
  public String json() {
    try {
      return JSON.writeValueAsString(offsets);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  static EmitterOffsets fromJson(String json) {
    try {
      return new EmitterOffsets(
          JSON.readValue(json, new TypeReference<LinkedHashMap<String, Long>>() {}));
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "cloudprofiler source: the checkpoint's offset " + json + " is not {endpoint: offset}",
          e);
    }
  }
}
