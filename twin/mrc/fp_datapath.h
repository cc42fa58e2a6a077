/* The data path of twin.mrc._fastpath (_datapath.c): TxBatch, RxRing, parse, build. */
#ifndef MRC_TWIN_DATAPATH_H
#define MRC_TWIN_DATAPATH_H

#include "fp_util.h"

/* Add the part's types, functions and constants to the module; 0, or -1 with an
 * exception set. */
int fp_add_datapath(PyObject *m);

#endif
