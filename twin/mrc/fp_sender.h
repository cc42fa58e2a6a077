/* The compiled Sender of twin.mrc._fastpath (_sender.c). */
#ifndef MRC_TWIN_SENDER_H
#define MRC_TWIN_SENDER_H

#include <stdint.h>

#include "fp_util.h"

/* Add the part's types to the module; 0, or -1 with an exception set. */
int fp_add_sender(PyObject *m);

/* Take what the Sender uses from Python out of bind()'s arguments; 0, or -1 with an
 * exception set (a Sender is not made until the whole bind succeeds). */
int fp_bind_sender(FpBind *b);

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
} FpAck;

/* What loop._on_ack does with an ACK for a compiled Sender: its PSNs unwrapped against
 * the sender's cum (loop._unwrap24), then on_sack(report, now). 0; 1 when the QP failed
 * (QpFailed, caught); -1 with an exception set. */
int fp_sender_on_ack(PyObject *sender, const FpAck *ack, int64_t now);

/* The compiled Sender has nothing left to send (idle) or failed: loop._maybe_done's. */
int fp_sender_settled(PyObject *sender);

#endif
