/* Rules (channel name pattern -> handler and parameters), the channels opened by them, their switches when the
 * rules change (segments.c makes them), and the rules file a process follows (CLOUDPROFILER_RULES). */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

#define RULE_PARAMS_MAX 8 /* parsed, so that a rule with too many is refused by cp_handler_check's message */

typedef struct rule {
  char text[320]; /* pattern=handler[:param...], as it is applied */
  char pattern[200];
  cp_handler handler;
  int64_t params[3];
  int n_params;
} rule;

/* A name no rule matches. */
static const rule default_rule = {"*=buffered", "*", CP_HANDLER_BUFFERED, {0}, 0};

static struct {
  pthread_mutex_t mutex; /* the rules and the handles; taken before a handle's mutex and the library's */
  rule *rules;
  size_t n;
  cp_channel **handles; /* channels opened by rules (closed ones are dropped at the next cp_rules_set) */
  size_t n_handles, handles_cap;
} R = {.mutex = PTHREAD_MUTEX_INITIALIZER};

/* ---- parsing ---- */

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  char *end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) *--end = '\0';
  return s;
}

/* What fnmatch would misread: an unterminated bracket, a trailing escape, blanks or control bytes. */
static const char *pattern_problem(const char *p) {
  if (!*p) return "the pattern is empty";
  for (const char *c = p; *c; c++) {
    if ((unsigned char)*c <= ' ') return "the pattern holds a blank or control character";
    if (*c == '\\' && !*++c) return "the pattern ends with an escape '\\'";
    if (*c == '[') {
      const char *close = c + 1;
      if (*close == '!' || *close == '^') close++;
      if (*close == ']') close++; /* a leading ']' is a member of the set */
      close = strchr(close, ']');
      if (!close) return "the pattern has a '[' without its ']'";
      c = close;
    }
  }
  return NULL;
}

static int rule_fail(cp_error *error, int line, const char *text, const char *problem) {
  return cp__fail(error, EINVAL, "rule at line %d '%.200s': %s", line, text, problem);
}

/* One line `pattern=handler[:param...]` into r; EINVAL naming the line. */
static int parse_rule(char *line, int number, rule *r, cp_error *error) {
  char original[256];
  snprintf(original, sizeof original, "%s", line);
  char *eq = strchr(line, '=');
  if (!eq) return rule_fail(error, number, original, "expected <pattern>=<handler>[:<param>...]");
  *eq = '\0';
  char *pattern = trim(line), *spec = trim(eq + 1);
  const char *problem = pattern_problem(pattern);
  if (problem) return rule_fail(error, number, original, problem);
  if (strlen(pattern) >= sizeof r->pattern) return rule_fail(error, number, original, "the pattern is too long");
  char *save = NULL, *name = strtok_r(spec, ":", &save);
  cp_error e = {0};
  if (!name || cp_handler_from_name(trim(name), &r->handler, &e)) {
    return rule_fail(error, number, original, name ? e.message : "the handler is missing");
  }
  if (r->handler == CP_HANDLER_RET_START || r->handler == CP_HANDLER_RET_END)
    return rule_fail(error, number, original, "ret_start and ret_end are not chosen by rules (each needs its peer)");
  int64_t params[RULE_PARAMS_MAX];
  size_t n = 0;
  for (char *p; (p = strtok_r(NULL, ":", &save));) {
    char *end, *value = trim(p);
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (!*value || *end || errno) {
      char msg[300];
      snprintf(msg, sizeof msg, "parameter '%.100s' is not a 64-bit integer", value);
      return rule_fail(error, number, original, msg);
    }
    if (n == RULE_PARAMS_MAX) return rule_fail(error, number, original, "too many parameters");
    params[n++] = v;
  }
  if (cp_handler_check(r->handler, params, n, &e)) return rule_fail(error, number, original, e.message);
  snprintf(r->pattern, sizeof r->pattern, "%s", pattern);
  memcpy(r->params, params, n * sizeof *params);
  r->n_params = (int)n;
  int used = snprintf(r->text, sizeof r->text, "%s=%s", pattern, cp_handler_name(r->handler));
  for (size_t i = 0; i < n; i++)
    used += snprintf(r->text + used, sizeof r->text - (size_t)used, ":%" PRId64, params[i]);
  return 0;
}

/* Every rule of the text, or EINVAL naming the first bad one (nothing is returned then). */
static int parse_rules(const char *text, rule **out, size_t *n_out, cp_error *error) {
  char *copy = strdup(text);
  rule *rules = calloc(CP_RULES_MAX, sizeof *rules);
  int rc = copy && rules ? 0 : cp__fail(error, ENOMEM, "out of memory");
  size_t n = 0;
  int number = 0;
  for (char *rest = copy, *line; !rc && (line = strsep(&rest, "\n"));) {
    number++;
    line = trim(line);
    if (!*line || *line == '#') continue;
    if (n == CP_RULES_MAX) rc = rule_fail(error, number, line, "more rules than CP_RULES_MAX (256)");
    else rc = parse_rule(line, number, &rules[n++], error);
  }
  free(copy);
  if (rc) free(rules), rules = NULL, n = 0;
  *out = rules;
  *n_out = n;
  return rc;
}

/* ---- resolution and switches ---- */

/* The one place a channel's handler is chosen: the first rule whose pattern matches the name; R.mutex held. */
static const rule *resolve(const char *name) {
  for (size_t i = 0; i < R.n; i++)
    if (fnmatch(R.rules[i].pattern, name, 0) == 0) return &R.rules[i];
  return &default_rule;
}

static bool same_handler(const cp_channel *handle, const rule *r) {
  if (handle->handler != r->handler) return false;
  for (int i = 0; i < r->n_params; i++)
    if (handle->params[i] != r->params[i]) return false;
  return true;
}

static void adopt(cp_channel *handle, const rule *r) {
  handle->handler = r->handler;
  memcpy(handle->params, r->params, sizeof handle->params);
}

/* Switches the handle to a new segment (segments.c) when the rule gives it another handler. */
static void switch_handle(cp_channel *handle, const rule *r) {
  pthread_mutex_lock(&handle->mutex);
  cp_channel *old = atomic_load(&handle->current);
  if (atomic_load(&handle->open) && atomic_load(&old->open) && !same_handler(handle, r)) {
    cp_error error;
    if (cp__handle_switch(handle, cp__handler_kind(r->handler), r->params, r->text, "rules", &error) == 0)
      adopt(handle, r);
    else
      fprintf(stderr, "cloudprofiler: channel '%s' keeps its handler %s, rule '%s' not applied: %s\n", handle->name,
              cp_handler_name(handle->handler), r->text, error.message);
  }
  pthread_mutex_unlock(&handle->mutex);
}

int cp_rules_set(const char *text, cp_error *error) {
  if (!text) return cp__fail(error, EINVAL, "rules text is NULL");
  rule *rules;
  size_t n;
  int rc = parse_rules(text, &rules, &n, error);
  if (rc) return rc;
  pthread_mutex_lock(&R.mutex);
  free(R.rules);
  R.rules = rules;
  R.n = n;
  size_t kept = 0;
  for (size_t i = 0; i < R.n_handles; i++) {
    cp_channel *handle = R.handles[i];
    if (!atomic_load(&handle->open)) continue;
    R.handles[kept++] = handle;
    switch_handle(handle, resolve(handle->name));
  }
  R.n_handles = kept;
  pthread_mutex_unlock(&R.mutex);
  return 0;
}

int cp_rules_check(const char *text, cp_error *error) {
  if (!text) return cp__fail(error, EINVAL, "rules text is NULL");
  rule *rules;
  size_t n;
  int rc = parse_rules(text, &rules, &n, error);
  free(rules);
  return rc;
}

size_t cp_rules_get(char *out, size_t cap) {
  pthread_mutex_lock(&R.mutex);
  size_t len = 0;
  for (size_t i = 0; i < R.n; i++) {
    size_t room = len < cap ? cap - len : 0;
    len += (size_t)snprintf(room ? out + len : NULL, room, "%s\n", R.rules[i].text);
  }
  pthread_mutex_unlock(&R.mutex);
  if (cap && !R.n) out[0] = '\0';
  return len;
}

cp_channel *cp_channel_open_by_rules(const char *name, const char *const *meta_keys, const char *const *meta_values,
                                     size_t n_meta, cp_error *error) {
  if (cp__channel_args_check(name, meta_keys, meta_values, n_meta, CP_META_MAX - CP_SEGMENT_KEYS, error) ||
      cp__ensure_started(error))
    return NULL;
  cp_channel *handle = NULL;
  pthread_mutex_lock(&R.mutex);
  if (R.n_handles == R.handles_cap) {
    size_t cap = R.handles_cap ? 2 * R.handles_cap : 16;
    cp_channel **grown = realloc(R.handles, cap * sizeof *grown);
    if (grown) R.handles = grown, R.handles_cap = cap;
  }
  if (R.n_handles == R.handles_cap) {
    cp__fail(error, ENOMEM, "out of memory");
  } else {
    const rule *r = resolve(name);
    handle =
        cp__handle_open(name, cp__handler_kind(r->handler), r->params, r->text, meta_keys, meta_values, n_meta, error);
    if (handle) R.handles[R.n_handles++] = handle;
  }
  pthread_mutex_unlock(&R.mutex);
  return handle;
}

/* ---- the rules file ---- */

#define RULES_FILE_MAX (1 << 20)

static char *read_text(const char *path, int *code) {
  FILE *f = fopen(path, "r");
  if (!f) return *code = errno, NULL;
  char *text = malloc(RULES_FILE_MAX + 1);
  size_t n = text ? fread(text, 1, RULES_FILE_MAX + 1, f) : 0;
  *code = !text ? ENOMEM : ferror(f) ? EIO : n > RULES_FILE_MAX ? EFBIG : 0;
  fclose(f);
  if (*code) return free(text), NULL;
  text[n] = '\0';
  return text;
}

static bool same_file(const struct stat *a, const struct stat *b) {
  return a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         a->st_size == b->st_size && a->st_ino == b->st_ino;
}

/* A changed file is read once it has stayed the same for one poll, so that one caught half-written (truncated,
 * not yet filled) is not applied; the first read, at the library's start, takes it as it is. */
bool cp__rules_file_poll(void) {
  static const char *path;
  static struct stat seen, changed; /* the version read last (or refused); a newer one waiting to settle */
  static bool read_once, waiting;
  static int stat_error;
  if (!path) path = getenv("CLOUDPROFILER_RULES");
  if (!path || !*path) return false;
  struct stat now;
  if (stat(path, &now) != 0) {
    if (errno != stat_error)
      fprintf(stderr, "cloudprofiler: rules file %s cannot be read (%s); the rules in force stay\n", path,
              strerror(errno));
    stat_error = errno;
    return true;
  }
  stat_error = 0;
  if (read_once && same_file(&now, &seen)) return waiting = false, true;
  if (read_once && !(waiting && same_file(&now, &changed))) return changed = now, waiting = true, true;
  seen = now;
  read_once = true, waiting = false;
  int code;
  char *text = read_text(path, &code);
  cp_error error = {0};
  if (!text) cp__fail(&error, code, "%s", strerror(code));
  else cp_rules_set(text, &error);
  free(text);
  if (error.code)
    fprintf(stderr, "cloudprofiler: rules file %s refused: %s; the rules in force stay\n", path, error.message);
  else fprintf(stderr, "cloudprofiler: rules from %s in force\n", path);
  return true;
}
