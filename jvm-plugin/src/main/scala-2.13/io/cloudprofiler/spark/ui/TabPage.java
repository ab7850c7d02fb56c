package io.cloudprofiler.spark.ui;

import jakarta.servlet.http.HttpServletRequest;
import org.apache.spark.ui.CspNonce;
import org.apache.spark.ui.SparkUITab;
import org.apache.spark.ui.UIUtils;
import org.json4s.JValue;
import org.json4s.jackson.JsonMethods$;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.xml.Node;

/**
 * The Cloudprofiler tab's page and its JSON ({@code <ui>/cloudprofiler/json}) in Spark 4's servlet
 * API, collections and json4s (jvm-plugin/src/main/scala-2.12 holds Spark 3.5's).
 */
final class TabPage extends TabPageBase {
  TabPage(SparkUITab tab, TabContent content) {
    super(tab, content);
  }

  @Override
  public Seq<Node> render(HttpServletRequest request) {
    String nonce = nonce();
    return UIUtils.headerSparkPage(
        request, TITLE, () -> body(nonce), tab, Option.empty(), false, false, false);
  }

  @Override
  public JValue renderJson(HttpServletRequest request) {
    return JsonMethods$.MODULE$.fromJsonNode(content.json());
  }

  /**
   * The request's nonce of the content security policy Spark 4 sets on its pages (its inline
   * scripts need it); null where this Spark has none.
   */
  private static String nonce() {
    try {
      return CspNonce.get();
    } catch (LinkageError e) {
      return null;
    }
  }
}
