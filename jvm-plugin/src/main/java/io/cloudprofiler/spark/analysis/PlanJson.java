package io.cloudprofiler.spark.analysis;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;

/**
 * The JSON plans the Python analysis hands its JVM parts (the reader's files and time axis, the
 * durations, the hops to sketch): parsed with a message naming what is missing or wrong. Doubles
 * travel as the int64 of their IEEE bits, so that a value is the same to the bit on both sides.
 */
final class PlanJson {
  private PlanJson() {}

  private static final ObjectMapper JSON = new ObjectMapper();

  static JsonNode parse(String text, String what) {
    try {
      return JSON.readTree(text);
    } catch (IOException e) {
      throw new IllegalArgumentException(what + " is not JSON: " + e.getMessage(), e);
    }
  }

  static JsonNode required(JsonNode node, String key) {
    JsonNode value = node.get(key);
    if (value == null || value.isNull())
      throw new IllegalArgumentException(
          "the analysis's plan lacks " + key + " in " + abbreviated(node));
    return value;
  }

  static String abbreviated(JsonNode node) {
    String text = node.toString();
    return text.length() > 200 ? text.substring(0, 200) + "..." : text;
  }

  static long[] longs(JsonNode array) {
    long[] out = new long[array.size()];
    for (int i = 0; i < out.length; i++) out[i] = array.get(i).asLong();
    return out;
  }

  /** A double sent as its IEEE bits. */
  static double bits(JsonNode node) {
    return Double.longBitsToDouble(node.asLong());
  }

  static double[] doubles(JsonNode bits) {
    double[] out = new double[bits.size()];
    for (int i = 0; i < out.length; i++) out[i] = bits(bits.get(i));
    return out;
  }
}
