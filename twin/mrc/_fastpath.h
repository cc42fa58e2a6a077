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

/* One data packet the compiled Sender sends (a TxPacket's fields, without the object):
 * its payload is [offset, offset + length) of the source buffer, as a slice of it would
 * be (clamped to its length). */
typedef struct {
    int64_t psn, ev, tries;
    uint64_t va;
    Py_ssize_t offset, length;
    int ack_req, has_imm;
    uint32_t imm;
} FpTx;

/* The compiled Sender's poll(now, source, budget) with its packets written to `out`
 * (room for `budget`) instead of made into TxPackets; `source_len` is the source
 * buffer's length. How many, or -1 with an exception set (TypeError: not the compiled
 * Sender; RuntimeError: not ready). */
Py_ssize_t fp_sender_poll(PyObject *sender, int64_t now, Py_ssize_t source_len,
                          Py_ssize_t budget, FpTx *out);

/* Whether `o` is (a subclass of) the compiled Sender. */
int fp_is_sender(PyObject *o);

/* An ACK's SACK as it is on the wire (wire.Ack, wire.Sack): cum and psn are 24 bits. */
typedef struct {
    uint32_t cum, psn;
    uint64_t bitmap;
    int64_t ev;
    int tries, congestion, port_state, dup;
} FpSack;

/* What loop._on_ack does with an ACK for a compiled Sender: its PSNs unwrapped against
 * the sender's cum (loop._unwrap24), then on_sack(report, now). 0; 1 when the QP failed
 * (QpFailed, caught); -1 with an exception set. */
int fp_sender_on_ack(PyObject *sender, const FpSack *ack, int64_t now);

/* The compiled Sender has nothing left to send (idle) or failed: loop._maybe_done's. */
int fp_sender_settled(PyObject *sender);

/* collections.deque(maxlen=maxlen): a new reference, or NULL with an exception set. */
PyObject *fp_bounded_deque(long long maxlen);

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
