package io.cloudprofiler.spark.ui;

import javax.servlet.http.HttpServletRequest;
import org.apache.spark.ui.SparkUITab;
import org.apache.spark.ui.UIUtils;
import org.json4s.JsonAST.JValue;
import org.json4s.jackson.JsonMethods$;
import scala.Option;
import scala.collection.Seq;
import scala.xml.Node;

/**
 * The Cloudprofiler tab's page and its JSON ({@code <ui>/cloudprofiler/json}) in Spark 3.5's
 * servlet API, collections and json4s (jvm-plugin/src/main/scala-2.13 holds Spark 4's). Spark 3.5
 * sets no content security policy on its pages: the inline script needs no nonce.
 */
final class TabPage extends TabPageBase {
  TabPage(SparkUITab tab, TabContent content) {
    super(tab, content);
  }

  @Override
  public Seq<Node> render(HttpServletRequest request) {
    return UIUtils.headerSparkPage(
        request, TITLE, () -> body(null), tab, Option.empty(), false, false);
  }

  @Override
  public JValue renderJson(HttpServletRequest request) {
    return JsonMethods$.MODULE$.fromJsonNode(content.json());
  }
}
