/* What the parts of twin.mrc._fastpath share: each part adds its types to the module.
 *
 *   _fastpath.c   the data path: TxBatch, RxRing, parse, build, the ICRC
 *   _sender.c     the transport's compiled Sender (twin.mrc.transport.Sender's twin)
 *   _receiver.c   the transport's compiled Receiver (twin.mrc.transport.Receiver's twin)
 */
#ifndef MRC_TWIN_FASTPATH_H
#define MRC_TWIN_FASTPATH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Add the part's types to the module; 0 on success, -1 with an exception set. */
int fp_add_sender(PyObject *m);
int fp_add_receiver(PyObject *m);

/* collections.deque(maxlen=maxlen): a new reference, or NULL with an exception set. */
PyObject *fp_bounded_deque(long long maxlen);

/* A data packet as RxRing parsed and checked it (its QP's rkey, its bounds), for the
 * QP's compiled Receiver: psn unwrapped against the receiver's cum, the payload in the
 * ring. */
typedef struct {
    int64_t psn, va;
    const unsigned char *payload;
    Py_ssize_t len;
    uint32_t ev, imm;
    int has_imm, tries, ack_req, ce;
} FpRxData;

/* A SACK the Receiver wants sent (transport.SackReport's fields but port_state, which
 * the data path adds when it frames it). */
typedef struct {
    int64_t cum, psn;
    uint64_t bitmap;
    uint32_t ev;
    int tries, dup;
    long long congestion;
} FpSack;

/* 0 if `receiver` is a ready compiled Receiver that copies into its buffer (its size in
 * *size); -1 with an exception set otherwise. */
int fp_receiver_bindable(PyObject *receiver, Py_ssize_t *size);
/* Its cum (every PSN below arrived): what a 24-bit PSN is unwrapped against. */
int64_t fp_receiver_cum(PyObject *receiver);
/* Receiver.on_data for a parsed packet: -1 with an exception set; 0: no SACK now; 1: a
 * SACK now, in *sack. *nack: the PSN to NAK, or -1; *placed: the bytes placed. */
int fp_receiver_data(PyObject *receiver, const FpRxData *pkt, FpSack *sack, int64_t *nack,
                     Py_ssize_t *placed);

/* Where an object of the module's types is in its life. tp_new (PyType_GenericNew) makes
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
