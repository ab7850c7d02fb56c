/* `Channel.log` and `Handoff.log` as C functions bound to their handle. cffi releases and re-takes the GIL around every call it
 * makes (about 150 ns here even for a function without arguments: several times what cp_log costs); cp_log
 * never blocks, so this call keeps the GIL and costs one METH_O call plus the record. */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "cloudprofiler.h"

/* The id of a tuple_id argument: 0, or -1 with the Python error set. */
static int tuple_id_of(PyObject *arg, int64_t *out) {
  long long id = PyLong_AsLongLong(arg);
  if (id == -1 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_OverflowError, "tuple id %R is outside the int64 range", arg);
    } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "tuple id must be an integer, got %R", arg);
    }
    return -1;
  }
  *out = (int64_t)id;
  return 0;
}

/* A capsule without a name: PyCapsule_GetPointer then skips the name comparison. */
static PyObject *log_one(PyObject *channel, PyObject *arg) {
  int64_t id;
  if (tuple_id_of(arg, &id)) return NULL;
  cp_log(PyCapsule_GetPointer(channel, NULL), id);
  Py_RETURN_NONE;
}

static PyObject *log_handoff(PyObject *handoff, PyObject *arg) {
  int64_t id;
  if (tuple_id_of(arg, &id)) return NULL;
  cp_handoff_log(PyCapsule_GetPointer(handoff, NULL), id);
  Py_RETURN_NONE;
}

static PyMethodDef log_def = {"log", log_one, METH_O, "log(tuple_id): one (TSC, tuple id) record"};
static PyMethodDef handoff_def = {"log", log_handoff, METH_O, "log(tuple_id): one (TSC, tuple id) record"};

static PyObject *bound(PyObject *arg, PyMethodDef *def) {
  void *address = PyLong_AsVoidPtr(arg);
  if (!address) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bind() needs a handle's address, got 0");
    return NULL;
  }
  PyObject *handle = PyCapsule_New(address, NULL, NULL);
  if (!handle) return NULL;
  PyObject *fn = PyCFunction_New(def, handle);
  Py_DECREF(handle);
  return fn;
}

static PyObject *bind(PyObject *module, PyObject *arg) {
  (void)module;
  return bound(arg, &log_def);
}

static PyObject *bind_handoff(PyObject *module, PyObject *arg) {
  (void)module;
  return bound(arg, &handoff_def);
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_O, "bind(address): the log function of the channel at address (a cp_channel* as an int)"},
    {"bind_handoff", bind_handoff, METH_O, "bind_handoff(address): the log function of a cp_handoff* as an int"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "cloudprofiler._log_call", NULL, -1, module_methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__log_call(void) { return PyModule_Create(&module_def); }
