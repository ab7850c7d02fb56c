package io.cloudprofiler;

/** A failure reported by libcloudprofiler: the errno-style code and the library's message. */
public class CloudProfilerException extends RuntimeException {
  private final int code;

  public CloudProfilerException(int code, String message) {
    super(message);
    this.code = code;
  }

  public int code() {
    return code;
  }
}
