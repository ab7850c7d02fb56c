/* `Channel.log` as a C function bound to its channel. cffi releases and re-takes the GIL around every call it
 * makes (about 150 ns here even for a function without arguments: several times what cp_log costs); cp_log
 * never blocks, so this call keeps the GIL and costs one METH_O call plus the record. */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "cloudprofiler.h"

static PyObject *log_one(PyObject *channel, PyObject *arg) {
  long long id = PyLong_AsLongLong(arg);
  if (id == -1 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      return PyErr_Format(PyExc_OverflowError, "tuple id %R is outside the int64 range", arg);
    }
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      return PyErr_Format(PyExc_TypeError, "tuple id must be an integer, got %R", arg);
    }
    return NULL;
  }
  /* A capsule without a name: PyCapsule_GetPointer then skips the name comparison. */
  cp_log(PyCapsule_GetPointer(channel, NULL), (int64_t)id);
  Py_RETURN_NONE;
}

static PyMethodDef log_def = {"log", log_one, METH_O, "log(tuple_id): one (TSC, tuple id) record"};

static PyObject *bind(PyObject *module, PyObject *arg) {
  (void)module;
  void *address = PyLong_AsVoidPtr(arg);
  if (!address) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bind() needs a channel address, got 0");
    return NULL;
  }
  PyObject *channel = PyCapsule_New(address, NULL, NULL);
  if (!channel) return NULL;
  PyObject *fn = PyCFunction_New(&log_def, channel);
  Py_DECREF(channel);
  return fn;
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_O, "bind(address): the log function of the channel at address (a cp_channel* as an int)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "cloudprofiler._log_call", NULL, -1, module_methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__log_call(void) { return PyModule_Create(&module_def); }
