/* The utility unit of twin.mrc._fastpath (_util.c): what every part uses, and nothing of
 * theirs. The module's units, lowest first; each includes only the headers of the units
 * before it in this list, so no unit depends on one that depends on it:
 *
 *   _util.c       the bounded deque, interning a table of names, the values bind()
 *                 hands the parts, where an object is in its life (FP_READY)
 *   _sender.c     the transport's compiled Sender (twin.mrc.transport.Sender's twin) and
 *                 the EvRing; its entries for the data path (fp_sender.h)
 *   _receiver.c   the transport's compiled Receiver (twin.mrc.transport.Receiver's twin);
 *                 its entries for the data path (fp_receiver.h)
 *   _datapath.c   the data path: TxBatch, RxRing, parse, build, the ICRC; a bound QP's
 *                 packets handed to its Sender or Receiver in C (fp_datapath.h)
 *   _module.c     PyInit__fastpath: registers each part (fp_add_<part>) and bind()
 *
 * A unit's header is fp_<unit>.h (tests/unit/test_layers.py holds the includes to this
 * order).
 *
 * The parts import nothing of twin: the Python classes, functions and constants they use
 * are handed to them by one call, twin.mrc._fastpath.bind(...), which twin.mrc.core makes
 * (core.compiled()) before any Sender or Receiver is made.
 */
#ifndef MRC_TWIN_UTIL_H
#define MRC_TWIN_UTIL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* collections.deque(maxlen=maxlen): a new reference, or NULL with an exception set. */
PyObject *fp_bounded_deque(long long maxlen);

/* A table of names to intern: *var = the interned `text`. */
typedef struct { PyObject **var; const char *text; } FpName;

/* Intern every name of the table; 0, or -1 with an exception set. */
int fp_intern(const FpName *names, size_t n);

/* -- bind ----------------------------------------------------------------------------
 * bind(**given) hands each part the values it takes by name (fp_take...); `taken`
 * collects the names the parts took, so that bind can refuse a name nobody takes. */
typedef struct { PyObject *given; PyObject *taken; } FpBind;
typedef struct { const char *name; long long *into; } FpInt;
typedef struct { const char *name; double *into; } FpFloat;

/* *into = given[name] (a new reference; the one it held is released): 0, or -1 with a
 * TypeError that names what is missing. */
int fp_take(FpBind *b, const char *name, PyObject **into);
/* Each int (each float) of the table from `given`: 0, or -1 with an exception set. */
int fp_take_ints(FpBind *b, const FpInt *table, size_t n);
int fp_take_floats(FpBind *b, const FpFloat *table, size_t n);

/* Whether bind() has run to its end; set by the module unit alone. */
int fp_is_bound(void);
void fp_set_bound(void);
/* 0 where bound; else -1 with the RuntimeError that says `self` cannot be made yet. */
int fp_require_bound(PyObject *self);

/* -- an object's life -------------------------------------------------------------------
 * Where an object of the module's types is in its life. tp_new (PyType_GenericNew) makes
 * it zero-filled, FP_BLANK; its __init__ sets FP_INITIALISING while it runs, FP_READY at
 * its very end, and puts an object whose __init__ failed part-way back to FP_BLANK (its
 * fields released); the cyclic GC's tp_clear leaves FP_CLEARED. Only a FP_READY object
 * has the state its methods use: anything else has NULL objects and a zero MTU where
 * they would follow a pointer or divide, so every method, getter and setter starts with
 * FP_REQUIRE_READY, and a misuse from Python is a RuntimeError, never a crash. */
enum { FP_BLANK = 0, FP_INITIALISING, FP_READY, FP_CLEARED };

/* Set the RuntimeError that says why `self` (whose state is `state`) cannot be used. */
void fp_not_ready(PyObject *self, int state);

/* The first line of every method, getter and setter: `fail` is what it returns on error
 * (NULL, or -1 for a setter). */
#define FP_REQUIRE_READY(self, fail)                                  \
    do {                                                              \
        if ((self)->ready != FP_READY) {                              \
            fp_not_ready((PyObject *)(self), (self)->ready);          \
            return fail;                                              \
        }                                                             \
    } while (0)

#endif
