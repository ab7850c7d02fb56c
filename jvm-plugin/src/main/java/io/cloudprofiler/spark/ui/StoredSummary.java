package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import org.apache.spark.util.kvstore.KVIndex;

/**
 * The latest {@link TabSummaryEvent} of an application, as the History Server keeps it in the
 * application's store (in memory or on disk, which serializes it with Jackson): one entry, under
 * {@link #KEY}.
 */
public final class StoredSummary {
  static final String KEY = "cloudprofiler";

  private final String figures;

  @JsonCreator
  public StoredSummary(@JsonProperty("figures") String figures) {
    this.figures = figures;
  }

  @KVIndex
  @JsonProperty("key")
  public String key() {
    return KEY;
  }

  @JsonProperty("figures")
  public String figures() {
    return figures;
  }
}
