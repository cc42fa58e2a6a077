/* The utility unit of twin.mrc._fastpath: what every part uses (fp_util.h says what). */
#include "fp_util.h"

void fp_not_ready(PyObject *self, int state) {
    const char *name = Py_TYPE(self)->tp_name;
    if (state == FP_INITIALISING)
        PyErr_Format(PyExc_RuntimeError, "%s: not initialised yet (called while its "
                     "__init__ runs)", name);
    else if (state == FP_CLEARED)
        PyErr_Format(PyExc_RuntimeError, "%s: cleared by the garbage collector", name);
    else
        PyErr_Format(PyExc_RuntimeError, "%s: not initialised (its __init__ did not run or "
                     "failed)", name);
}

PyObject *fp_bounded_deque(long long maxlen) {
    PyObject *collections = PyImport_ImportModule("collections"), *deque = NULL, *out = NULL;
    PyObject *empty = PyTuple_New(0), *kw = Py_BuildValue("{sL}", "maxlen", maxlen);
    if (collections && empty && kw && (deque = PyObject_GetAttrString(collections, "deque")))
        out = PyObject_Call(deque, empty, kw);
    Py_XDECREF(collections); Py_XDECREF(deque); Py_XDECREF(empty); Py_XDECREF(kw);
    return out;
}

int fp_intern(const FpName *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(*names[i].var = PyUnicode_InternFromString(names[i].text))) return -1;
    return 0;
}

/* -- bind ------------------------------------------------------------------------------ */

static int bound;

int fp_is_bound(void) { return bound; }

void fp_set_bound(void) { bound = 1; }

int fp_require_bound(PyObject *self) {
    if (bound) return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: twin.mrc._fastpath is not bound yet: "
                 "twin.mrc.core.compiled() binds it (bind(...)) before any Sender or "
                 "Receiver is made", Py_TYPE(self)->tp_name);
    return -1;
}

int fp_take(FpBind *b, const char *name, PyObject **into) {
    PyObject *v = PyDict_GetItemString(b->given, name);  /* borrowed */
    if (!v) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "bind() missing the keyword argument '%s'", name);
        return -1;
    }
    PyObject *key = PyUnicode_FromString(name);
    int rc = key ? PySet_Add(b->taken, key) : -1;
    Py_XDECREF(key);
    if (rc < 0) return -1;
    Py_XSETREF(*into, Py_NewRef(v));
    return 0;
}

int fp_take_ints(FpBind *b, const FpInt *table, size_t n) {
    for (size_t i = 0; i < n; i++) {
        PyObject *v = NULL;
        if (fp_take(b, table[i].name, &v) < 0) return -1;
        long long x = PyLong_AsLongLong(v);
        Py_DECREF(v);
        if (x == -1 && PyErr_Occurred()) return -1;
        *table[i].into = x;
    }
    return 0;
}

int fp_take_floats(FpBind *b, const FpFloat *table, size_t n) {
    for (size_t i = 0; i < n; i++) {
        PyObject *v = NULL;
        if (fp_take(b, table[i].name, &v) < 0) return -1;
        double x = PyFloat_AsDouble(v);
        Py_DECREF(v);
        if (x == -1 && PyErr_Occurred()) return -1;
        *table[i].into = x;
    }
    return 0;
}
