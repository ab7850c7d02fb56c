package io.cloudprofiler.spark.ui;

import io.cloudprofiler.spark.sql.ScalaLists;
import javax.servlet.http.HttpServletRequest;
import org.apache.spark.ui.SparkUITab;
import org.apache.spark.ui.UIUtils;
import org.apache.spark.ui.WebUIPage;
import org.json4s.JsonAST.JValue;
import org.json4s.jackson.JsonMethods$;
import scala.Option;
import scala.collection.Seq;
import scala.xml.Node;
import scala.xml.Unparsed;

/**
 * The Cloudprofiler tab's page and its JSON ({@code <ui>/cloudprofiler/json}): the part of Spark's
 * UI whose signatures differ between Spark 3.5 and 4 (servlet API, Scala collections, json4s): this
 * is the Spark 3.5 file (jvm-plugin/src/main/scala-2.13 holds the other). What it shows is {@link
 * TabContent}'s.
 */
final class TabPage extends WebUIPage {
  private final SparkUITab tab;
  private final TabContent content;

  TabPage(SparkUITab tab, TabContent content) {
    super("");
    this.tab = tab;
    this.content = content;
  }

  @Override
  public Seq<Node> render(HttpServletRequest request) {
    return UIUtils.headerSparkPage(
        request,
        "Cloudprofiler",
        () -> ScalaLists.of((Node) new Unparsed(content.html(nonce()))),
        tab,
        Option.empty(),
        false,
        false);
  }

  /** Spark 3.5 sets no content security policy on its pages: inline scripts need no nonce. */
  private static String nonce() {
    return null;
  }

  @Override
  public JValue renderJson(HttpServletRequest request) {
    return JsonMethods$.MODULE$.fromJsonNode(content.json());
  }
}
