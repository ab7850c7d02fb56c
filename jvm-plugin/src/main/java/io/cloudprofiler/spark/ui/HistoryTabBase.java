package io.cloudprofiler.spark.ui;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.NoSuchElementException;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.status.ElementTrackingStore;
import org.apache.spark.ui.SparkUI;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Cloudprofiler tab in Spark's History Server: while the History Server replays an
 * application's event log, a listener keeps the last {@link TabSummaryEvent} in the application's
 * store; the application's UI then gets the tab with those figures. An application whose event log
 * holds none (it ran without the plugin) gets no tab. {@code HistoryTab} (one file per Spark
 * version, whose collections differ) is the History Server's plugin, found by its service file.
 */
abstract class HistoryTabBase {
  private static final Logger LOG = LoggerFactory.getLogger(HistoryTabBase.class);

  /** The listener that keeps the latest summary of the replayed application in {@code store}. */
  static SparkListener keeper(ElementTrackingStore store) {
    return new SparkListener() {
      @Override
      public void onOtherEvent(SparkListenerEvent event) {
        if (!(event instanceof TabSummaryEvent summary)) return;
        if (summary.version() != TabSummaryEvent.VERSION) {
          LOG.warn(
              "cloudprofiler: an event log's tab summary has layout {}, this plugin reads {}: left"
                  + " out",
              summary.version(),
              TabSummaryEvent.VERSION);
          return;
        }
        store.write(new StoredSummary(summary.figures()));
      }
    };
  }

  public void setupUI(SparkUI ui) {
    StoredSummary stored;
    try {
      stored = ui.store().store().read(StoredSummary.class, StoredSummary.KEY);
    } catch (NoSuchElementException e) {
      return; // the application ran without the plugin
    } catch (Exception e) {
      LOG.warn("cloudprofiler: the History Server shows no Cloudprofiler tab: {}", e.toString());
      return;
    }
    try {
      JsonNode figures = new ObjectMapper().readTree(stored.figures());
      CloudprofilerTab.attach(ui, new TabContent(() -> figures, false));
    } catch (Exception e) {
      LOG.warn("cloudprofiler: the History Server shows no Cloudprofiler tab: {}", e.toString());
    }
  }
}
