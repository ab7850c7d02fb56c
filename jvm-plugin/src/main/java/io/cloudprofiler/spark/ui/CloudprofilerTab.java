package io.cloudprofiler.spark.ui;

import org.apache.spark.ui.SparkUI;
import org.apache.spark.ui.SparkUITab;

/** The "Cloudprofiler" tab of the driver's Spark UI ({@code <ui>/cloudprofiler/}). */
public final class CloudprofilerTab extends SparkUITab {
  public CloudprofilerTab(SparkUI ui, TabContent content) {
    super(ui, "cloudprofiler");
    attachPage(new TabPage(this, content));
  }
}
