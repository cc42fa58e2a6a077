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

/* Add the part's types to the module; 0 on success, -1 with an exception set. */
int fp_add_sender(PyObject *m);
int fp_add_receiver(PyObject *m);

/* collections.deque(maxlen=maxlen): a new reference, or NULL with an exception set. */
PyObject *fp_bounded_deque(long long maxlen);

#endif
