/* What the Python UDF timing (spark/udf_timing.py) does per batch, in C, so that no batch runs Python of ours: at a
 * pickled batch of 100 cheap rows (20 us, `bench udfs`) each Python step per batch costs a few tenths of a percent,
 * and the budget is 2% in all. A timed cycle in Python cost 3 us where every batch was timed and about 9 us where it
 * came once in 64 batches (its code no longer in the CPU's caches): the 31 timed cycles of a 1,000-batch task were
 * most of the budget. `Timing` is a task's timing: which output batches' cycles are timed, and their records, logged
 * through the task's channel (`log`, a C function of the channel). `counted` is an iterator that counts the batches
 * and rows passing through it and, around a timed batch, logs that batch's events; the timing puts one on each side
 * of the UDF's function, where a generator of ours cost 0.35-0.45 us a batch. The records' layout is udf_records'. */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>
#include <time.h>

/* The record kinds and values of udf_records, given by the Python that makes a Timing (declared there once). */
enum { OUT_ENTER, OUT_EXIT, UNTIMED, IN_ENTER, IN_EXIT, WAIT, TRANSFER, KINDS };

typedef struct {
  PyObject_HEAD PyObject *log; /* log(record): the task's channel */
  PyObject *on_failure;        /* on_failure(exception): a record could not be logged; the timing stops */
  PyObject *peek;              /* the input stream's peek (consumes nothing), or None */
  long long kinds[KINDS], ended;
  int kind_bits;
  long long next;   /* the index of the next output batch whose cycle is timed */
  long long exact;  /* the first output batches, all timed */
  double log_keep;  /* log(1 - 1 / sample_every): the log of a later batch's chance to be left untimed */
  uint64_t random;  /* splitmix64's state, seeded by the task's partition: a run again draws the same */
  int timed, off;   /* whether the cycle under way is timed; whether the timing stopped */
  int transfers;    /* whether a timed read's time off the CPU is logged (TRANSFER): not a read from a queue */
  int reading;      /* a timed input batch's read is under way since: */
  long long read_wall, read_cpu, read_waited;
} Timing;

static long long clock_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* One record, value << kind_bits | kind; a failure to log stops the timing (on_failure says why), never the UDF. */
static void record(Timing *t, long long value, int kind) {
  if (t->off) return;
  PyObject *id = PyLong_FromLongLong((long long)((uint64_t)value << t->kind_bits) | t->kinds[kind]);
  PyObject *r = id ? PyObject_CallFunctionObjArgs(t->log, id, NULL) : NULL;
  Py_XDECREF(id);
  if (r) {
    Py_DECREF(r);
    return;
  }
  t->off = 1;
  PyObject *type, *value_, *traceback;
  PyErr_Fetch(&type, &value_, &traceback);
  PyErr_NormalizeException(&type, &value_, &traceback);
  PyObject *said = PyObject_CallFunctionObjArgs(t->on_failure, value_ ? value_ : Py_None, NULL);
  Py_XDECREF(said);
  PyErr_Clear(); /* on_failure's own failure too: the UDF runs on */
  Py_XDECREF(type);
  Py_XDECREF(value_);
  Py_XDECREF(traceback);
}

static double uniform(Timing *t) { /* [0, 1): splitmix64's next 53 bits */
  uint64_t z = (t->random += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* The serializer asks for output batch `index` (at the next timed index, and after a timed cycle): whether its cycle
 * is timed, and the next timed index: the first `exact` all, then geometric skips (each later batch timed with
 * probability 1 / sample_every). */
static void cycle(Timing *t, long long index) {
  int timed = index == t->next;
  if (timed) t->next = index + 1 < t->exact ? index + 1 : index + 1 + (long long)(log1p(-uniform(t)) / t->log_keep);
  t->timed = timed;
  if (timed)
    record(t, index, OUT_ENTER);
  else
    record(t, 0, UNTIMED);
}

/* A timed cycle's function asks for input batch `index`: IN_ENTER, then the wait for its first bytes (the JVM
 * computing and starting to write it), taken on the stream's own buffer where the deserializer will find them. */
static void input_enter(Timing *t, long long index) {
  record(t, index, IN_ENTER);
  long long began = clock_ns(CLOCK_MONOTONIC);
  int peeked = t->peek && t->peek != Py_None; /* NULL: deleted */
  if (peeked) {
    PyObject *one = PyLong_FromLong(1);
    PyObject *r = one ? PyObject_CallFunctionObjArgs(t->peek, one, NULL) : NULL;
    Py_XDECREF(one);
    if (r) {
      Py_DECREF(r);
    } else { /* the deserializer's own read meets the error, as without the timing */
      PyErr_Clear();
      Py_INCREF(Py_None);
      PyObject *failed = t->peek;
      t->peek = Py_None;
      Py_DECREF(failed);
      peeked = 0;
    }
  }
  /* the CPU clock read before the wall clock here, after it at the exit: a read that never leaves the CPU spans less
   * wall time than CPU time, and logs no transfer */
  t->read_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  t->read_wall = clock_ns(CLOCK_MONOTONIC);
  t->read_waited = peeked ? t->read_wall - began : 0;
  t->reading = 1;
}

/* A timed cycle's input batch is read (`rows`; ended: the input ended): the wait for its first bytes (WAIT), the
 * time its read spent off the CPU since (TRANSFER: the JVM still writing the rest, which a large batch's reads wait
 * for), then IN_EXIT. */
static void input_exit(Timing *t, long long rows) {
  if (t->reading) {
    long long wall = clock_ns(CLOCK_MONOTONIC) - t->read_wall;
    long long transferred = wall - (clock_ns(CLOCK_THREAD_CPUTIME_ID) - t->read_cpu);
    t->reading = 0;
    if (t->read_waited) record(t, t->read_waited, WAIT);
    if (transferred > 0 && t->transfers) record(t, transferred, TRANSFER);
  }
  record(t, rows, IN_EXIT);
}

static PyObject *timing_cycle(PyObject *op, PyObject *arg) {
  long long index = PyLong_AsLongLong(arg);
  if (index == -1 && PyErr_Occurred()) return NULL;
  cycle((Timing *)op, index);
  Py_RETURN_NONE;
}

static int timing_traverse(PyObject *op, visitproc visit, void *arg) {
  Timing *t = (Timing *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(t->log);
  Py_VISIT(t->on_failure);
  Py_VISIT(t->peek);
  return 0;
}

static int timing_clear(PyObject *op) {
  Timing *t = (Timing *)op;
  Py_CLEAR(t->log);
  Py_CLEAR(t->on_failure);
  Py_CLEAR(t->peek);
  return 0;
}

static void dealloc(PyObject *op, inquiry clear) {
  PyTypeObject *type = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  clear(op);
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(op);
  Py_DECREF(type);
}

static void timing_dealloc(PyObject *op) { dealloc(op, timing_clear); }

static PyMemberDef timing_members[] = {
    {"timed", T_INT, offsetof(Timing, timed), READONLY, "nonzero: the cycle under way is timed"},
    {"next", T_LONGLONG, offsetof(Timing, next), READONLY, "the index of the next output batch whose cycle is timed"},
    {"off", T_INT, offsetof(Timing, off), 0, "nonzero: nothing more is logged"},
    {"peek", T_OBJECT, offsetof(Timing, peek), 0, "the input stream's peek(n), or None: a timed read's wait"},
    {"transfers", T_INT, offsetof(Timing, transfers), 0,
     "nonzero (the default): a timed read's time off the CPU is logged as its transfer"},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef timing_methods[] = {
    {"cycle", timing_cycle, METH_O, "cycle(index): the serializer asks for output batch `index`"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot timing_slots[] = {
    {Py_tp_traverse, timing_traverse}, {Py_tp_clear, timing_clear},     {Py_tp_dealloc, timing_dealloc},
    {Py_tp_members, timing_members},   {Py_tp_methods, timing_methods}, {Py_tp_doc, "A task's UDF timing"},
    {0, NULL},
};

static PyType_Spec timing_spec = {"cloudprofiler._udf_timing.Timing", sizeof(Timing), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, timing_slots};

typedef struct {
  PyObject_HEAD PyObject *it; /* NULL once it has ended */
  PyObject *rows_of;          /* the rows of a batch; `len` is called as PyObject_Length; None: each item a row */
  Timing *timing;
  int output; /* the function's output batches (a cycle each), else its input batches */
  long long batches, rows;
} Counted;

static PyObject *builtin_len, *timing_type, *counted_type;

/* The rows of `item`, or -1 with the Python error set (rows_of's own negative answers are counted as no rows). */
static int rows_of(Counted *self, PyObject *item, long long *rows) {
  if (self->rows_of == Py_None) { /* an RDD's items, one by one */
    *rows = 1;
    return 0;
  }
  if (self->rows_of == builtin_len) {
    Py_ssize_t n = PyObject_Length(item);
    *rows = n;
    return n < 0 ? -1 : 0;
  }
  PyObject *n = PyObject_CallFunctionObjArgs(self->rows_of, item, NULL);
  if (!n) return -1;
  *rows = PyLong_AsLongLong(n);
  Py_DECREF(n);
  return *rows == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Before a batch is asked for: an output batch's cycle begins (at the next timed index, and after a timed cycle); a
 * timed cycle's input batch is read. */
static void enter(Counted *self) {
  Timing *t = self->timing;
  if (self->output) {
    if (t->timed || self->batches == t->next) cycle(t, self->batches);
  } else if (t->timed) {
    input_enter(t, self->batches);
  }
}

/* After a batch arrived (its `rows`), or after the iterator ended (the timing's `ended`), in a timed cycle. */
static void exit_(Counted *self, long long rows) {
  Timing *t = self->timing;
  if (!t->timed) return;
  if (self->output)
    record(t, rows, OUT_EXIT);
  else
    input_exit(t, rows);
}

static PyObject *counted_next(PyObject *op) {
  Counted *self = (Counted *)op;
  if (!self->it) return NULL;
  enter(self);
  PyObject *item = PyIter_Next(self->it);
  if (!item) {
    if (PyErr_Occurred()) return NULL;
    Py_CLEAR(self->it);
    exit_(self, self->timing->ended);
    return NULL;
  }
  long long rows;
  if (rows_of(self, item, &rows)) {
    Py_DECREF(item);
    return NULL;
  }
  self->batches++;
  if (rows > 0) self->rows += rows;
  exit_(self, rows);
  return item;
}

static int counted_traverse(PyObject *op, visitproc visit, void *arg) {
  Counted *self = (Counted *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(self->it);
  Py_VISIT(self->rows_of);
  Py_VISIT(self->timing);
  return 0;
}

static int counted_clear(PyObject *op) {
  Counted *self = (Counted *)op;
  Py_CLEAR(self->it);
  Py_CLEAR(self->rows_of);
  Py_CLEAR(self->timing);
  return 0;
}

static void counted_dealloc(PyObject *op) { dealloc(op, counted_clear); }

static PyObject *self_iter(PyObject *op) {
  Py_INCREF(op);
  return op;
}

static PyMemberDef counted_members[] = {
    {"batches", T_LONGLONG, offsetof(Counted, batches), READONLY, "batches that passed"},
    {"rows", T_LONGLONG, offsetof(Counted, rows), READONLY, "their rows (those rows_of found)"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot counted_slots[] = {
    {Py_tp_iter, self_iter},           {Py_tp_iternext, counted_next},   {Py_tp_traverse, counted_traverse},
    {Py_tp_clear, counted_clear},      {Py_tp_dealloc, counted_dealloc}, {Py_tp_members, counted_members},
    {Py_tp_doc, "A counting iterator"}, {0, NULL},
};

static PyType_Spec counted_spec = {"cloudprofiler._udf_timing.Counted", sizeof(Counted), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, counted_slots};

static PyObject *new_of(PyObject *type) {
  return ((allocfunc)PyType_GetSlot((PyTypeObject *)type, Py_tp_alloc))((PyTypeObject *)type, 0);
}

static PyObject *timing(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *log, *on_failure;
  unsigned long long seed;
  long long exact, sample_every, ended;
  long long k[KINDS];
  int kind_bits;
  if (!PyArg_ParseTuple(args, "OOKLLi(LLLLLLL)L:timing", &log, &on_failure, &seed, &exact, &sample_every,
                        &kind_bits, &k[OUT_ENTER], &k[OUT_EXIT], &k[UNTIMED], &k[IN_ENTER], &k[IN_EXIT], &k[WAIT],
                        &k[TRANSFER], &ended))
    return NULL;
  if (!PyCallable_Check(log) || !PyCallable_Check(on_failure)) {
    PyErr_SetString(PyExc_TypeError, "timing(): log and on_failure must be callable");
    return NULL;
  }
  if (exact < 0 || sample_every < 2 || kind_bits < 1 || kind_bits > 16) {
    PyErr_Format(PyExc_ValueError, "timing(): exact %lld must be >= 0, sample_every %lld >= 2, kind_bits %d 1-16",
                 exact, sample_every, kind_bits);
    return NULL;
  }
  Timing *t = (Timing *)new_of(timing_type);
  if (!t) return NULL;
  Py_INCREF(log);
  t->log = log;
  Py_INCREF(on_failure);
  t->on_failure = on_failure;
  Py_INCREF(Py_None);
  t->peek = Py_None;
  t->transfers = 1;
  memcpy(t->kinds, k, sizeof k);
  t->ended = ended;
  t->kind_bits = kind_bits;
  t->exact = exact;
  t->log_keep = log1p(-1.0 / (double)sample_every);
  t->random = seed;
  return (PyObject *)t;
}

static PyObject *counted(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *iterable, *rows, *timing;
  int output;
  if (!PyArg_ParseTuple(args, "OOO!p:counted", &iterable, &rows, (PyTypeObject *)timing_type, &timing, &output))
    return NULL;
  if (!(rows == Py_None || PyCallable_Check(rows))) {
    PyErr_SetString(PyExc_TypeError, "counted(): rows_of must be callable or None");
    return NULL;
  }
  PyObject *it = PyObject_GetIter(iterable);
  if (!it) return NULL;
  Counted *self = (Counted *)new_of(counted_type);
  if (!self) {
    Py_DECREF(it);
    return NULL;
  }
  self->it = it;
  Py_INCREF(rows);
  self->rows_of = rows;
  Py_INCREF(timing);
  self->timing = (Timing *)timing;
  self->output = output;
  return (PyObject *)self;
}

static PyMethodDef module_methods[] = {
    {"timing", timing, METH_VARARGS,
     "timing(log, on_failure, seed, exact, sample_every, kind_bits, (OUT_ENTER, OUT_EXIT, UNTIMED, IN_ENTER, "
     "IN_EXIT, WAIT, TRANSFER), ENDED): a task's timing, logging each record with log(value << kind_bits | kind)"},
    {"counted", counted, METH_VARARGS,
     "counted(iterable, rows_of, timing, output): iterate, counting batches and rows (rows_of None: one an item); "
     "output: each batch a cycle of `timing`, else each an input batch of the cycle under way"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "cloudprofiler._udf_timing", NULL, -1, module_methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__udf_timing(void) {
  PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
  builtin_len = builtins ? PyDict_GetItemString(builtins, "len") : NULL;
  if (!builtin_len) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ImportError, "builtins.len not found");
    return NULL;
  }
  Py_INCREF(builtin_len);
  timing_type = PyType_FromSpec(&timing_spec);
  counted_type = timing_type ? PyType_FromSpec(&counted_spec) : NULL;
  if (!counted_type) return NULL;
  return PyModule_Create(&module_def);
}
