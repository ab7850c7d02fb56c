package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;
import org.apache.spark.scheduler.SparkListenerEvent;

/**
 * The Cloudprofiler tab's figures ({@link TabContent#json}, as text) written into the application's
 * event log, so that the History Server shows the tab of a finished application ({@link
 * HistoryTab}). Spark's event log writes an event of its own class as its Jackson fields beside an
 * "Event" field naming the class, and reads it back into this class.
 */
@JsonIgnoreProperties(ignoreUnknown = true)
public final class TabSummaryEvent implements SparkListenerEvent {
  /** The figures' layout: a reader of a later layout says so rather than misreading it. */
  public static final int VERSION = 1;

  private final int version;
  private final String figures;

  @JsonCreator
  public TabSummaryEvent(
      @JsonProperty("version") int version, @JsonProperty("figures") String figures) {
    this.version = version;
    this.figures = figures;
  }

  @JsonProperty("version")
  public int version() {
    return version;
  }

  @JsonProperty("figures")
  public String figures() {
    return figures;
  }
}
