/* The module unit of twin.mrc._fastpath: it registers the parts and binds them, nothing
 * more. The parts (fp_util.h lists them, lowest first):
 *
 *   _datapath.c   TxBatch, RxRing, parse, build, the ICRC      fp_add_datapath
 *   _sender.c     the compiled Sender                         fp_add_sender, fp_bind_sender
 *   _receiver.c   the compiled Receiver                       fp_add_receiver, fp_bind_receiver
 *
 * bind(**values) is how the parts get the Python classes, functions and constants they
 * use: twin.mrc.core calls it once (core.compiled(), with core.bindings()) before any
 * Sender or Receiver is made, so that the one place the compiled module's Python
 * dependencies are written is a Python file the layer test reads
 * (tests/unit/test_layers.py). It takes keyword arguments only; each part takes the
 * names it uses, a name no part takes is refused (TypeError), as is a second bind
 * (RuntimeError). Until bind has run to its end, making a Sender or a Receiver is a
 * RuntimeError; the data path needs nothing bound.
 */
#include "fp_datapath.h"
#include "fp_receiver.h"
#include "fp_sender.h"
#include "fp_util.h"

/* setup.py passes the SHA-256 of the sources the module is built from (the one hash of
 * twin/mrc/build_hash.py); twin.mrc.core compares it with the tree's to tell a stale
 * build. Built some other way, the module cannot say, and counts as stale. */
#ifndef MRC_SOURCES_HASH
#define MRC_SOURCES_HASH "unknown"
#endif

/* The names of `given` no part took, sorted, as a list; NULL with an exception set. */
static PyObject *untaken(FpBind *b) {
    PyObject *keys = PyDict_Keys(b->given), *out = keys ? PyList_New(0) : NULL;
    for (Py_ssize_t i = 0; out && i < PyList_GET_SIZE(keys); i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        int has = PySet_Contains(b->taken, k);
        if (has < 0 || (!has && PyList_Append(out, k) < 0)) Py_CLEAR(out);
    }
    Py_XDECREF(keys);
    if (out && PyList_Sort(out) < 0) Py_CLEAR(out);
    return out;
}

static PyObject *fp_bind(PyObject *Py_UNUSED(mod), PyObject *args, PyObject *kw) {
    if (PyTuple_GET_SIZE(args) > 0) {
        PyErr_SetString(PyExc_TypeError, "bind() takes keyword arguments only");
        return NULL;
    }
    if (fp_is_bound()) {
        PyErr_SetString(PyExc_RuntimeError, "twin.mrc._fastpath is bound already (bind() "
                        "runs once: twin.mrc.core.compiled())");
        return NULL;
    }
    FpBind b = {kw ? Py_NewRef(kw) : PyDict_New(), PySet_New(NULL)};
    PyObject *extra = NULL, *out = NULL;
    if (!b.given || !b.taken || fp_bind_sender(&b) < 0 || fp_bind_receiver(&b) < 0
        || !(extra = untaken(&b)))
        goto done;
    if (PyList_GET_SIZE(extra) > 0) {
        PyErr_Format(PyExc_TypeError, "bind() got keyword arguments no part takes: %R", extra);
        goto done;
    }
    fp_set_bound();
    out = Py_NewRef(Py_None);
done:
    Py_XDECREF(b.given); Py_XDECREF(b.taken); Py_XDECREF(extra);
    return out;
}

static PyObject *fp_bound(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored)) {
    return PyBool_FromLong(fp_is_bound());
}

static PyMethodDef module_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))fp_bind, METH_VARARGS | METH_KEYWORDS,
     "bind(**values): hand the compiled core the Python classes, functions and constants "
     "it uses, by name (twin.mrc.core.bindings()); once, before any Sender or Receiver"},
    {"bound", fp_bound, METH_NOARGS, "bound() -> bool: whether bind() has run"},
    {NULL}
};

static struct PyModuleDef fp_module = {
    PyModuleDef_HEAD_INIT, "twin.mrc._fastpath",
    "The MRC endpoint's compiled data path (sendmmsg, recvmmsg, the ICRC) and its "
    "transport's compiled core (Sender, Receiver; bound by twin.mrc.core).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    PyObject *m = PyModule_Create(&fp_module);
    if (!m) return NULL;
    if (fp_add_datapath(m) < 0 || fp_add_sender(m) < 0 || fp_add_receiver(m) < 0
        || PyModule_AddStringConstant(m, "SOURCES_HASH", MRC_SOURCES_HASH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
