/* The compiled Sender of twin.mrc._fastpath (_sender.c). */
#ifndef MRC_TWIN_SENDER_H
#define MRC_TWIN_SENDER_H

#include "_util.h"

/* Add the part's types to the module; 0, or -1 with an exception set. */
int fp_add_sender(PyObject *m);

/* Take what the Sender uses from Python out of bind()'s arguments; 0, or -1 with an
 * exception set (a Sender is not made until the whole bind succeeds). */
int fp_bind_sender(FpBind *b);

#endif
