/* The compiled Receiver of twin.mrc._fastpath (_receiver.c). */
#ifndef MRC_TWIN_RECEIVER_H
#define MRC_TWIN_RECEIVER_H

#include "_util.h"

/* Add the part's types to the module; 0, or -1 with an exception set. */
int fp_add_receiver(PyObject *m);

/* Take what the Receiver uses from Python out of bind()'s arguments; 0, or -1 with an
 * exception set (a Receiver is not made until the whole bind succeeds). */
int fp_bind_receiver(FpBind *b);

#endif
