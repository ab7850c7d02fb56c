package io.cloudprofiler.spark.ui;

import org.apache.spark.ui.JettyUtils;
import org.apache.spark.ui.SparkUI;
import org.apache.spark.ui.SparkUITab;

/**
 * The "Cloudprofiler" tab of a Spark UI ({@code <ui>/cloudprofiler/}) and, beside it, the same
 * figures for Prometheus ({@code <ui>/cloudprofiler}{@value #METRICS_PATH}) and the full report
 * ({@code <ui>/cloudprofiler}{@value #REPORT_PATH}, {@link ReportDownload}).
 */
public final class CloudprofilerTab extends SparkUITab {
  static final String PREFIX = "cloudprofiler";
  static final String METRICS_PATH = "/metrics/prometheus";
  static final String REPORT_PATH = "/report";

  private CloudprofilerTab(SparkUI ui, TabContent content) {
    super(ui, PREFIX);
    attachPage(new TabPage(this, content));
  }

  /**
   * Adds the tab, its metrics page and its report to {@code ui}: a page of Spark's own making (its
   * servlet answers GET and HEAD with Spark's headers), under the tab's page wherever the UI put
   * that (the History Server's pages of an application lie under its /history/... path, which the
   * UI's base path does not say).
   */
  public static void attach(SparkUI ui, TabContent content) {
    ui.attachTab(new CloudprofilerTab(ui, content));
    String tab = "/" + PREFIX;
    var handlers = ui.getHandlers().iterator(); // of Spark 3.5's Jetty or Spark 4's
    while (handlers.hasNext()) {
      String path = handlers.next().getContextPath();
      if (path.endsWith("/" + PREFIX)) tab = path;
    }
    ui.attachHandler(
        JettyUtils.createServletHandler(
            tab + METRICS_PATH,
            new JettyUtils.ServletParams<String>(
                request -> PrometheusText.of(content.json()), PrometheusText.CONTENT_TYPE, s -> s),
            ui.conf(),
            ""));
    ui.attachHandler(
        JettyUtils.createServletHandler(
            tab + REPORT_PATH,
            new JettyUtils.ServletParams<String>(
                request -> ReportDownload.page(content.appFolder()),
                "text/html;charset=utf-8",
                s -> s),
            ui.conf(),
            ""));
  }
}
