/* JNI glue for io.cloudprofiler.CloudProfiler: each function turns the jlong handle into a channel pointer,
 * calls one library function and turns a cp_error into a CloudProfilerException. */
#include <errno.h>
#include <jni.h>
#include <stdlib.h>
#include <string.h>

#include "cloudprofiler.h"

#define JNI_FN(name) JNIEXPORT Java_io_cloudprofiler_CloudProfiler_##name

static cp_channel *as_channel(jlong handle) { return (cp_channel *)(intptr_t)handle; }

/* Throws CloudProfilerException(code, message); returns the code so callers can `return fail(...)`. */
static int fail(JNIEnv *env, int code, const char *message) {
  jclass cls = (*env)->FindClass(env, "io/cloudprofiler/CloudProfilerException");
  if (!cls) return code;
  jmethodID ctor = (*env)->GetMethodID(env, cls, "<init>", "(ILjava/lang/String;)V");
  jstring text = (*env)->NewStringUTF(env, message);
  jobject ex = ctor && text ? (*env)->NewObject(env, cls, ctor, (jint)code, text) : NULL;
  if (ex) (*env)->Throw(env, (jthrowable)ex);
  return code;
}

static int check(JNIEnv *env, int rc, const cp_error *error) { return rc ? fail(env, rc, error->message) : 0; }

#define MAX_PARAMS 8
/* A handler's parameters into `out`; their number in *n. Throws (and returns EINVAL) when there are too many. */
static int params_of(JNIEnv *env, jlongArray params, int64_t out[MAX_PARAMS], jsize *n) {
  *n = params ? (*env)->GetArrayLength(env, params) : 0;
  if (*n > MAX_PARAMS) return fail(env, EINVAL, "at most 8 handler parameters");
  if (*n) (*env)->GetLongArrayRegion(env, params, 0, *n, (jlong *)out);
  return 0;
}

/* int version() */
jint JNI_FN(version)(JNIEnv *env, jclass cls) {
  (void)env, (void)cls;
  return cp_version();
}

/* void start(String logDir, int compression, int channelBlocks, int blockRecords, int fullPolicy, int tscRead,
 *            long rollBytes) */
void JNI_FN(start)(JNIEnv *env, jclass cls, jstring log_dir, jint compression, jint channel_blocks, jint block_records,
                   jint full_policy, jint tsc_read, jlong roll_bytes) {
  (void)cls;
  cp_options o;
  cp_options_init(&o);
  const char *dir = log_dir ? (*env)->GetStringUTFChars(env, log_dir, NULL) : NULL;
  o.log_dir = dir;
  o.compression = (cp_compression)compression;
  o.channel_blocks = (uint32_t)channel_blocks;
  o.block_records = (uint32_t)block_records;
  o.full_policy = (cp_full_policy)full_policy;
  o.tsc_read = (cp_tsc_read)tsc_read;
  o.roll_bytes = roll_bytes;
  cp_error error;
  int rc = cp_start(&o, &error);
  if (dir) (*env)->ReleaseStringUTFChars(env, log_dir, dir);
  check(env, rc, &error);
}

/* String logDir() */
jstring JNI_FN(logDir)(JNIEnv *env, jclass cls) {
  (void)cls;
  const char *dir = cp_log_dir();
  return dir ? (*env)->NewStringUTF(env, dir) : NULL;
}

/* A channel's name and metadata pairs as C strings, held while a channel opens. */
typedef struct jni_names {
  jstring name;
  const char *c_name;
  jsize n_meta;
  const char **k, **v;
  jstring *ks, *vs;
} jni_names;

/* 0, or throws (and returns its code) */
static int names_get(JNIEnv *env, jstring name, jobjectArray keys, jobjectArray values, jni_names *m) {
  memset(m, 0, sizeof *m);
  m->n_meta = keys ? (*env)->GetArrayLength(env, keys) : 0;
  if (values && (*env)->GetArrayLength(env, values) != m->n_meta)
    return fail(env, EINVAL, "metadata keys and values differ in length");
  m->k = calloc((size_t)m->n_meta + 1, sizeof *m->k), m->v = calloc((size_t)m->n_meta + 1, sizeof *m->v);
  m->ks = calloc((size_t)m->n_meta + 1, sizeof *m->ks), m->vs = calloc((size_t)m->n_meta + 1, sizeof *m->vs);
  m->name = name;
  m->c_name = (*env)->GetStringUTFChars(env, name, NULL);
  if (!m->k || !m->v || !m->ks || !m->vs || !m->c_name) return fail(env, ENOMEM, "out of memory");
  for (jsize i = 0; i < m->n_meta; i++) {
    m->ks[i] = (jstring)(*env)->GetObjectArrayElement(env, keys, i);
    m->vs[i] = (jstring)(*env)->GetObjectArrayElement(env, values, i);
    m->k[i] = (*env)->GetStringUTFChars(env, m->ks[i], NULL);
    m->v[i] = (*env)->GetStringUTFChars(env, m->vs[i], NULL);
  }
  return 0;
}

static void names_release(JNIEnv *env, jni_names *m) {
  for (jsize i = 0; m->k && m->v && m->ks && m->vs && i < m->n_meta; i++) {
    if (m->k[i]) (*env)->ReleaseStringUTFChars(env, m->ks[i], m->k[i]);
    if (m->v[i]) (*env)->ReleaseStringUTFChars(env, m->vs[i], m->v[i]);
  }
  if (m->c_name) (*env)->ReleaseStringUTFChars(env, m->name, m->c_name);
  free(m->k), free(m->v), free(m->ks), free(m->vs);
}

static jlong opened(JNIEnv *env, cp_channel *ch, const cp_error *error) {
  if (!ch) check(env, error->code ? error->code : EIO, error);
  return (jlong)(intptr_t)ch;
}

/* long openChannel(String name, String handler, long[] params, String[] keys, String[] values) */
jlong JNI_FN(openChannel)(JNIEnv *env, jclass cls, jstring name, jstring handler_name, jlongArray params,
                          jobjectArray keys, jobjectArray values) {
  (void)cls;
  cp_error error;
  cp_handler handler;
  const char *h = (*env)->GetStringUTFChars(env, handler_name, NULL);
  int rc = cp_handler_from_name(h, &handler, &error);
  (*env)->ReleaseStringUTFChars(env, handler_name, h);
  if (check(env, rc, &error)) return 0;
  int64_t p[MAX_PARAMS] = {0};
  jsize n_params;
  if (params_of(env, params, p, &n_params)) return 0;
  jni_names m;
  jlong ch = 0;
  if (!names_get(env, name, keys, values, &m))
    ch = opened(env, cp_channel_open(m.c_name, handler, p, (size_t)n_params, m.k, m.v, (size_t)m.n_meta, &error),
                &error);
  names_release(env, &m);
  return ch;
}

/* long openByRules(String name, String[] keys, String[] values) */
jlong JNI_FN(openByRules)(JNIEnv *env, jclass cls, jstring name, jobjectArray keys, jobjectArray values) {
  (void)cls;
  cp_error error;
  jni_names m;
  jlong ch = 0;
  if (!names_get(env, name, keys, values, &m))
    ch = opened(env, cp_channel_open_by_rules(m.c_name, m.k, m.v, (size_t)m.n_meta, &error), &error);
  names_release(env, &m);
  return ch;
}

/* A library call that takes one string; `null_message` is the exception's for a null one. */
static void with_string(JNIEnv *env, jstring value, const char *null_message, int (*fn)(const char *, cp_error *)) {
  if (!value) {
    fail(env, EINVAL, null_message);
    return;
  }
  const char *text = (*env)->GetStringUTFChars(env, value, NULL);
  if (!text) return; /* OutOfMemoryError pending */
  cp_error error;
  int rc = fn(text, &error);
  (*env)->ReleaseStringUTFChars(env, value, text);
  check(env, rc, &error);
}

/* void inboxStart(String dir) */
void JNI_FN(inboxStart)(JNIEnv *env, jclass cls, jstring dir) {
  (void)cls;
  with_string(env, dir, "inbox folder is null", cp_inbox_start);
}

/* void setRules(String rules) */
void JNI_FN(setRules)(JNIEnv *env, jclass cls, jstring rules) {
  (void)cls;
  with_string(env, rules, "rules text is null", cp_rules_set);
}

/* String rules() */
jstring JNI_FN(rules)(JNIEnv *env, jclass cls) {
  (void)cls;
  for (size_t cap = 4096;; cap *= 2) {
    char *text = malloc(cap);
    if (!text) return fail(env, ENOMEM, "out of memory"), NULL;
    size_t len = cp_rules_get(text, cap);
    jstring out = len < cap ? (*env)->NewStringUTF(env, text) : NULL;
    free(text);
    if (len < cap) return out;
  }
}

/* int channelHandler(long channel) */
jint JNI_FN(channelHandler)(JNIEnv *env, jclass cls, jlong channel) {
  (void)env, (void)cls;
  return (jint)cp_channel_handler(as_channel(channel));
}

/* int handlerFromName(String name) */
jint JNI_FN(handlerFromName)(JNIEnv *env, jclass cls, jstring name) {
  (void)cls;
  cp_error error;
  cp_handler handler = CP_HANDLER_NULL;
  const char *n = (*env)->GetStringUTFChars(env, name, NULL);
  if (!n) return 0; /* OutOfMemoryError pending */
  int rc = cp_handler_from_name(n, &handler, &error);
  (*env)->ReleaseStringUTFChars(env, name, n);
  check(env, rc, &error);
  return (jint)handler;
}

/* void checkHandler(int handler, long[] params) */
void JNI_FN(checkHandler)(JNIEnv *env, jclass cls, jint handler, jlongArray params) {
  (void)cls;
  int64_t p[MAX_PARAMS] = {0};
  jsize n;
  if (params_of(env, params, p, &n)) return;
  cp_error error;
  check(env, cp_handler_check((cp_handler)handler, p, (size_t)n, &error), &error);
}

/* void log(long channel, long tupleId) -- the hot path: no JNIEnv call, so the JVM pays only its transition */
void JNI_FN(log)(JNIEnv *env, jclass cls, jlong channel, jlong tuple_id) {
  (void)env, (void)cls;
  cp_log(as_channel(channel), tuple_id);
}

/* void logAt(long channel, long tupleId, long tsc) */
void JNI_FN(logAt)(JNIEnv *env, jclass cls, jlong channel, jlong tuple_id, jlong tsc) {
  (void)env, (void)cls;
  cp_log_at(as_channel(channel), tuple_id, (uint64_t)tsc);
}

/* void logMany(long channel, long[] tupleIds) */
void JNI_FN(logMany)(JNIEnv *env, jclass cls, jlong channel, jlongArray ids) {
  (void)cls;
  jsize n = (*env)->GetArrayLength(env, ids);
  jlong *data = (*env)->GetPrimitiveArrayCritical(env, ids, NULL);
  if (!data) return;
  cp_log_many(as_channel(channel), (const int64_t *)data, (size_t)n);
  (*env)->ReleasePrimitiveArrayCritical(env, ids, data, JNI_ABORT);
}

/* void parameterize(long channel, int index, long value) */
void JNI_FN(parameterize)(JNIEnv *env, jclass cls, jlong channel, jint index, jlong value) {
  (void)cls;
  cp_error error;
  check(env, cp_channel_parameterize(as_channel(channel), (uint32_t)index, value, &error), &error);
}

/* void flush(long channel) */
void JNI_FN(flush)(JNIEnv *env, jclass cls, jlong channel) {
  (void)cls;
  cp_error error;
  check(env, cp_channel_flush(as_channel(channel), &error), &error);
}

/* void close(long channel) */
void JNI_FN(close)(JNIEnv *env, jclass cls, jlong channel) {
  (void)cls;
  cp_error error;
  check(env, cp_channel_close(as_channel(channel), &error), &error);
}

/* void flushAll() */
void JNI_FN(flushAll)(JNIEnv *env, jclass cls) {
  (void)cls;
  cp_error error;
  check(env, cp_flush_all(&error), &error);
}

/* void stop() */
void JNI_FN(stop)(JNIEnv *env, jclass cls) {
  (void)env, (void)cls;
  cp_stop();
}

/* long[] stats(long channel): logged, kept, written, dropped, afterClose, bytesWritten */
jlongArray JNI_FN(stats)(JNIEnv *env, jclass cls, jlong channel) {
  (void)cls;
  cp_error error;
  cp_channel_stats s;
  if (check(env, cp_channel_stats_get(as_channel(channel), &s, &error), &error)) return NULL;
  jlong values[6] = {(jlong)s.logged,  (jlong)s.kept,        (jlong)s.written,
                     (jlong)s.dropped, (jlong)s.after_close, (jlong)s.bytes_written};
  jlongArray out = (*env)->NewLongArray(env, 6);
  if (out) (*env)->SetLongArrayRegion(env, out, 0, 6, values);
  return out;
}

/* long[] libraryStats(): channelsOpened, channelsOpen, nullHandleLogs, dropped, bytesWritten, logged, sampleScanned,
 * sampleScanTicks */
jlongArray JNI_FN(libraryStats)(JNIEnv *env, jclass cls) {
  (void)cls;
  cp_library_stats s;
  cp_library_stats_get(&s);
  jlong values[8] = {(jlong)s.channels_opened, (jlong)s.channels_open,    (jlong)s.null_handle_logs,
                     (jlong)s.dropped,         (jlong)s.bytes_written,    (jlong)s.logged,
                     (jlong)s.sample_scanned,  (jlong)s.sample_scan_ticks};
  jlongArray out = (*env)->NewLongArray(env, 8);
  if (out) (*env)->SetLongArrayRegion(env, out, 0, 8, values);
  return out;
}

/* Object[] channelCounts(): {String[] names, long[] logged, long[] dropped}, a channel each */
jobjectArray JNI_FN(channelCounts)(JNIEnv *env, jclass cls) {
  (void)cls;
  cp_channel_count *counts = NULL;
  size_t n = 0;
  for (size_t cap = 64;; cap *= 2) { /* channels opened meanwhile: again with room for them */
    cp_channel_count *more = realloc(counts, cap * sizeof *counts);
    if (!more) {
      free(counts);
      fail(env, ENOMEM, "out of memory");
      return NULL;
    }
    counts = more;
    if ((n = cp_channel_counts(counts, cap)) <= cap) break;
  }
  jclass string = (*env)->FindClass(env, "java/lang/String"), object = (*env)->FindClass(env, "java/lang/Object");
  jobjectArray names = string ? (*env)->NewObjectArray(env, (jsize)n, string, NULL) : NULL;
  jlongArray logged = (*env)->NewLongArray(env, (jsize)n), dropped = (*env)->NewLongArray(env, (jsize)n);
  jobjectArray out = object ? (*env)->NewObjectArray(env, 3, object, NULL) : NULL;
  for (size_t i = 0; out && names && logged && dropped && i < n; i++) {
    jstring name = (*env)->NewStringUTF(env, counts[i].name);
    if (!name) break; /* OutOfMemoryError pending */
    (*env)->SetObjectArrayElement(env, names, (jsize)i, name);
    (*env)->DeleteLocalRef(env, name);
    jlong l = (jlong)counts[i].logged, d = (jlong)counts[i].dropped;
    (*env)->SetLongArrayRegion(env, logged, (jsize)i, 1, &l);
    (*env)->SetLongArrayRegion(env, dropped, (jsize)i, 1, &d);
  }
  free(counts);
  if ((*env)->ExceptionCheck(env) || !out || !names || !logged || !dropped) return NULL;
  (*env)->SetObjectArrayElement(env, out, 0, names);
  (*env)->SetObjectArrayElement(env, out, 1, logged);
  (*env)->SetObjectArrayElement(env, out, 2, dropped);
  return out;
}

/* Object[] takeSamples(): {String[] names, int[] levels, int[] nameOfSample, long[] ids, long[] tscs}, the samples the
 * channels kept since the last take (cp_channel_samples_take), each name once (with the highest level of its
 * channels) */
jobjectArray JNI_FN(takeSamples)(JNIEnv *env, jclass cls) {
  (void)cls;
  /* Room for every channel's samples; the segments and hand-off channels the counts leave out may not fit: a take
   * that fills the room is followed by another into more. Without more memory, what was taken is returned (the rest
   * stays with its channels for the next take). */
  size_t cap = CP_SAMPLES_PER_CHANNEL * (cp_channel_counts(NULL, 0) + 1), n = 0;
  cp_channel_sample *samples = NULL;
  for (;; cap *= 2) {
    cp_channel_sample *more = realloc(samples, cap * sizeof *samples);
    if (!more) break;
    samples = more;
    if ((n += cp_channel_samples_take(samples + n, cap - n)) < cap) break;
  }
  if (!samples) return fail(env, ENOMEM, "out of memory"), NULL;
  jclass string = (*env)->FindClass(env, "java/lang/String"), object = (*env)->FindClass(env, "java/lang/Object");
  jintArray name_of = (*env)->NewIntArray(env, (jsize)n);
  jlongArray ids = (*env)->NewLongArray(env, (jsize)n), tscs = (*env)->NewLongArray(env, (jsize)n);
  /* One pass: the samples' name numbers, ids and TSCs go out a chunk at a time; the distinct names and their levels
   * gather in place at the start of `samples`, over samples already read (never more names than samples read). */
  enum { CHUNK = 512 };
  jint of[CHUNK];
  jlong id[CHUNK], tsc[CHUNK];
  size_t n_names = 0, k = 0;
  const char *previous = NULL; /* the name pointer of the sample before: the same channel, mostly */
  for (size_t i = 0; string && object && name_of && ids && tscs && i < n; i++) {
    cp_channel_sample s = samples[i];
    if (s.name != previous)
      for (k = 0; k < n_names && strcmp(samples[k].name, s.name); k++) continue;
    if (k == n_names) samples[n_names++] = (cp_channel_sample){.name = s.name, .level = s.level};
    if (s.level > samples[k].level) samples[k].level = s.level;
    previous = s.name;
    of[i % CHUNK] = (jint)k, id[i % CHUNK] = (jlong)s.id, tsc[i % CHUNK] = (jlong)s.tsc;
    if (i % CHUNK == CHUNK - 1 || i == n - 1) {
      jsize at = (jsize)(i - i % CHUNK), len = (jsize)(i % CHUNK + 1);
      (*env)->SetIntArrayRegion(env, name_of, at, len, of);
      (*env)->SetLongArrayRegion(env, ids, at, len, id);
      (*env)->SetLongArrayRegion(env, tscs, at, len, tsc);
    }
  }
  jobjectArray names = string ? (*env)->NewObjectArray(env, (jsize)n_names, string, NULL) : NULL;
  jintArray levels = (*env)->NewIntArray(env, (jsize)n_names);
  jobjectArray out = object ? (*env)->NewObjectArray(env, 5, object, NULL) : NULL;
  for (size_t j = 0; out && names && levels && j < n_names; j++) {
    jstring name = (*env)->NewStringUTF(env, samples[j].name);
    if (!name) break; /* OutOfMemoryError pending */
    (*env)->SetObjectArrayElement(env, names, (jsize)j, name);
    (*env)->DeleteLocalRef(env, name);
    jint level = (jint)samples[j].level;
    (*env)->SetIntArrayRegion(env, levels, (jsize)j, 1, &level);
  }
  free(samples);
  if ((*env)->ExceptionCheck(env) || !out || !names || !levels || !name_of || !ids || !tscs) return NULL;
  (*env)->SetObjectArrayElement(env, out, 0, names);
  (*env)->SetObjectArrayElement(env, out, 1, levels);
  (*env)->SetObjectArrayElement(env, out, 2, name_of);
  (*env)->SetObjectArrayElement(env, out, 3, ids);
  (*env)->SetObjectArrayElement(env, out, 4, tscs);
  return out;
}

/* String channelPath(long channel) */
jstring JNI_FN(channelPath)(JNIEnv *env, jclass cls, jlong channel) {
  (void)cls;
  const char *path = cp_channel_path(as_channel(channel));
  return path ? (*env)->NewStringUTF(env, path) : NULL;
}

/* long tsc() */
jlong JNI_FN(tsc)(JNIEnv *env, jclass cls) {
  (void)env, (void)cls;
  return (jlong)cp_tsc();
}

/* double tscHz() */
jdouble JNI_FN(tscHz)(JNIEnv *env, jclass cls) {
  (void)cls;
  cp_error error;
  cp_tsc_frequency f;
  if (check(env, cp_tsc_frequency_get(&f, &error), &error)) return 0;
  return f.hz;
}

/* String tscSimulation() */
jstring JNI_FN(tscSimulation)(JNIEnv *env, jclass cls) {
  (void)cls;
  return (*env)->NewStringUTF(env, cp_tsc_simulation());
}

/* void requireInvariantTsc(boolean force) */
void JNI_FN(requireInvariantTsc)(JNIEnv *env, jclass cls, jboolean force) {
  (void)cls;
  cp_error error;
  check(env, cp_require_invariant_tsc(force ? 1 : 0, &error), &error);
}

/* long[] clockRead() */
jlongArray JNI_FN(clockRead)(JNIEnv *env, jclass cls) {
  (void)cls;
  cp_error error;
  cp_clock_reading r;
  if (check(env, cp_clock_read(&r, &error), &error)) return NULL;
  jlong out[5] = {(jlong)r.tsc, r.monotonic_raw_ns, r.realtime_ns, (jlong)r.uncertainty_ticks, (jlong)r.cpu_id};
  jlongArray array = (*env)->NewLongArray(env, 5);
  if (array) (*env)->SetLongArrayRegion(env, array, 0, 5, out);
  return array;
}

/* long responderStart(String address, int port, byte[] secret) */
jlong JNI_FN(responderStart)(JNIEnv *env, jclass cls, jstring address, jint port, jbyteArray secret) {
  (void)cls;
  const char *addr = (*env)->GetStringUTFChars(env, address, NULL);
  jsize n = secret ? (*env)->GetArrayLength(env, secret) : 0;
  jbyte key[64];
  if (n > 64) n = 65; /* the library reports the length */
  if (n && n <= 64) (*env)->GetByteArrayRegion(env, secret, 0, n, key);
  cp_responder *r = NULL;
  cp_error error;
  int rc = cp_responder_start(addr, (uint16_t)port, (const uint8_t *)key, (size_t)n, &r, &error);
  (*env)->ReleaseStringUTFChars(env, address, addr);
  check(env, rc, &error);
  return (jlong)(intptr_t)r;
}

/* int responderPort(long responder) */
jint JNI_FN(responderPort)(JNIEnv *env, jclass cls, jlong responder) {
  (void)env, (void)cls;
  return cp_responder_port((cp_responder *)(intptr_t)responder);
}

/* void responderStop(long responder) */
void JNI_FN(responderStop)(JNIEnv *env, jclass cls, jlong responder) {
  (void)env, (void)cls;
  cp_responder_stop((cp_responder *)(intptr_t)responder);
}

/* long[] probePeer(String address, int port, int count, int timeoutMs, byte[] secret, boolean spin):
 * (send, remote, recv) per probe; recv is 0 for an unanswered probe. */
jlongArray JNI_FN(probePeer)(JNIEnv *env, jclass cls, jstring address, jint port, jint count, jint timeout_ms,
                             jbyteArray secret, jboolean spin) {
  (void)cls;
  /* the number of probes is the caller's (spark.cloudprofiler.calibration.probes): only what calloc needs here */
  if (count < 1) return fail(env, EINVAL, "probe count out of range: expected at least 1"), NULL;
  const char *addr = (*env)->GetStringUTFChars(env, address, NULL);
  jsize n = secret ? (*env)->GetArrayLength(env, secret) : 0;
  jbyte key[64];
  if (n > 64) n = 65;
  if (n && n <= 64) (*env)->GetByteArrayRegion(env, secret, 0, n, key);
  cp_probe *probes = calloc((size_t)count, sizeof *probes);
  jlong *flat = calloc((size_t)count * 3, sizeof *flat);
  uint32_t answered = 0;
  cp_error error;
  int rc = probes && flat ? cp_probe_peer(addr, (uint16_t)port, (const uint8_t *)key, (size_t)n, (uint32_t)count,
                                          (uint32_t)timeout_ms, spin ? 1 : 0, probes, &answered, &error)
                          : ENOMEM;
  (*env)->ReleaseStringUTFChars(env, address, addr);
  jlongArray out = NULL;
  if (rc == ENOMEM && !probes) fail(env, rc, "out of memory");
  else if (!check(env, rc, &error)) {
    for (jint i = 0; i < count; i++) {
      flat[3 * i] = (jlong)probes[i].send_tsc;
      flat[3 * i + 1] = (jlong)probes[i].remote_tsc;
      flat[3 * i + 2] = (jlong)probes[i].recv_tsc;
    }
    out = (*env)->NewLongArray(env, count * 3);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, count * 3, flat);
  }
  free(probes);
  free(flat);
  return out;
}
