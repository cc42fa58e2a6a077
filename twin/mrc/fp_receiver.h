/* The compiled Receiver of twin.mrc._fastpath (_receiver.c). */
#ifndef MRC_TWIN_RECEIVER_H
#define MRC_TWIN_RECEIVER_H

#include <stdint.h>

#include "fp_util.h"

/* Add the part's types to the module; 0, or -1 with an exception set. */
int fp_add_receiver(PyObject *m);

/* Take what the Receiver uses from Python out of bind()'s arguments; 0, or -1 with an
 * exception set (a Receiver is not made until the whole bind succeeds). */
int fp_bind_receiver(FpBind *b);

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
/* Receiver.on_trimmed for a parsed packet whose payload a switch cut off: -1 with an
 * exception set; 0: nothing to send; 1: *sack to send at once, a NAK(TRIMMED) for its
 * PSN when *nack, else a duplicate's SACK. */
int fp_receiver_trimmed(PyObject *receiver, const FpRxData *pkt, FpSack *sack, int *nack);

#endif
