package io.cloudprofiler.spark.ui;

import io.cloudprofiler.spark.sql.ScalaLists;
import org.apache.spark.ui.SparkUITab;
import org.apache.spark.ui.WebUIPage;
import scala.collection.immutable.List;
import scala.xml.Node;
import scala.xml.Unparsed;

/**
 * What the tab's page is in every Spark: its tab, its content and its body as Spark's pages take
 * it. {@code TabPage} (one file per Spark version, whose servlet API, collections and json4s
 * differ) renders it.
 */
abstract class TabPageBase extends WebUIPage {
  static final String TITLE = "Cloudprofiler";
  final SparkUITab tab;
  final TabContent content;

  TabPageBase(SparkUITab tab, TabContent content) {
    super("");
    this.tab = tab;
    this.content = content;
  }

  /** The body, one node of the content's HTML; {@code nonce} as {@link TabContent#html}'s. */
  List<Node> body(String nonce) {
    return ScalaLists.of((Node) new Unparsed(content.html(nonce)));
  }
}
