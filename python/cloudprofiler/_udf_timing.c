/* What the Python UDF timing (spark/udf_timing.py) does per batch, in C, so that an untimed batch runs no Python of
 * ours: at a pickled batch of 100 cheap rows (20 us, `bench udfs`) each Python step per batch costs a few tenths of a
 * percent, and the budget is 2% in all. `counted` is an iterator that counts the batches and rows passing through it
 * and calls back into Python only around a timed batch; the timing puts one on each side of the UDF's function, where
 * a generator of ours cost 0.35-0.45 us a batch. */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
  PyObject_HEAD PyObject *it; /* NULL once it has ended */
  PyObject *rows_of;          /* the rows of a batch; `len` is called as PyObject_Length; None: each item a row */
  PyObject *enter;            /* enter(index) before a batch is asked for, when timed or at call_at */
  PyObject *exit;             /* exit(rows) after it arrives, when timed; exit(ended) where the iterator ended */
  long long batches, rows, call_at, ended;
  int timed;
} Counted;

static PyObject *builtin_len;

static int call(PyObject *fn, PyObject *arg) {
  PyObject *r = PyObject_CallFunctionObjArgs(fn, arg, NULL);
  Py_XDECREF(r);
  return r ? 0 : -1;
}

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

static PyObject *counted_next(PyObject *op) {
  Counted *self = (Counted *)op;
  if (!self->it) return NULL;
  if (self->timed || self->batches == self->call_at) {
    PyObject *index = PyLong_FromLongLong(self->batches);
    int failed = !index || call(self->enter, index);
    Py_XDECREF(index);
    if (failed) return NULL;
  }
  PyObject *item = PyIter_Next(self->it);
  if (!item) {
    if (PyErr_Occurred()) return NULL;
    Py_CLEAR(self->it);
    if (self->timed) {
      PyObject *ended = PyLong_FromLongLong(self->ended);
      if (ended) call(self->exit, ended);
      Py_XDECREF(ended);
    }
    return NULL;
  }
  long long rows;
  if (rows_of(self, item, &rows)) {
    Py_DECREF(item);
    return NULL;
  }
  self->batches++;
  if (rows > 0) self->rows += rows;
  if (self->timed) {
    PyObject *n = PyLong_FromLongLong(rows);
    int failed = !n || call(self->exit, n);
    Py_XDECREF(n);
    if (failed) {
      Py_DECREF(item);
      return NULL;
    }
  }
  return item;
}

static int counted_traverse(PyObject *op, visitproc visit, void *arg) {
  Counted *self = (Counted *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(self->it);
  Py_VISIT(self->rows_of);
  Py_VISIT(self->enter);
  Py_VISIT(self->exit);
  return 0;
}

static int counted_clear(PyObject *op) {
  Counted *self = (Counted *)op;
  Py_CLEAR(self->it);
  Py_CLEAR(self->rows_of);
  Py_CLEAR(self->enter);
  Py_CLEAR(self->exit);
  return 0;
}

static void counted_dealloc(PyObject *op) {
  PyTypeObject *type = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  counted_clear(op);
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(op);
  Py_DECREF(type);
}

static PyObject *self_iter(PyObject *op) {
  Py_INCREF(op);
  return op;
}

static PyMemberDef counted_members[] = {
    {"batches", T_LONGLONG, offsetof(Counted, batches), READONLY, "batches that passed"},
    {"rows", T_LONGLONG, offsetof(Counted, rows), READONLY, "their rows (those rows_of found)"},
    {"timed", T_INT, offsetof(Counted, timed), 0, "nonzero: enter and exit are called around every batch"},
    {"call_at", T_LONGLONG, offsetof(Counted, call_at), 0, "the batch index before which enter is called anyway"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot counted_slots[] = {
    {Py_tp_iter, self_iter},           {Py_tp_iternext, counted_next},   {Py_tp_traverse, counted_traverse},
    {Py_tp_clear, counted_clear},      {Py_tp_dealloc, counted_dealloc}, {Py_tp_members, counted_members},
    {Py_tp_doc, "A counting iterator"}, {0, NULL},
};

static PyType_Spec counted_spec = {"cloudprofiler._udf_timing.Counted", sizeof(Counted), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, counted_slots};

static PyObject *counted_type;

static PyObject *counted(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *iterable, *rows, *enter, *exit;
  long long call_at, ended;
  if (!PyArg_ParseTuple(args, "OOOOLL:counted", &iterable, &rows, &enter, &exit, &call_at, &ended)) return NULL;
  if (!(rows == Py_None || PyCallable_Check(rows)) || !PyCallable_Check(enter) || !PyCallable_Check(exit)) {
    PyErr_SetString(PyExc_TypeError, "counted(): rows_of (or None), enter and exit must be callable");
    return NULL;
  }
  PyObject *it = PyObject_GetIter(iterable);
  if (!it) return NULL;
  PyTypeObject *type = (PyTypeObject *)counted_type;
  Counted *self = (Counted *)((allocfunc)PyType_GetSlot(type, Py_tp_alloc))(type, 0);
  if (!self) {
    Py_DECREF(it);
    return NULL;
  }
  self->it = it;
  Py_INCREF(rows);
  self->rows_of = rows;
  Py_INCREF(enter);
  self->enter = enter;
  Py_INCREF(exit);
  self->exit = exit;
  self->call_at = call_at;
  self->ended = ended;
  return (PyObject *)self;
}

static PyMethodDef module_methods[] = {
    {"counted", counted, METH_VARARGS,
     "counted(iterable, rows_of, enter, exit, call_at, ended): iterate, counting batches and rows (rows_of None: "
     "one an item); around a timed "
     "batch (attribute `timed`), enter(index) and exit(rows), exit(ended) at the end; before batch `call_at`, "
     "enter(index) anyway"},
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
  counted_type = PyType_FromSpec(&counted_spec);
  if (!counted_type) return NULL;
  return PyModule_Create(&module_def);
}
