/* The transport's compiled Receiver: twin.mrc.transport.Receiver's decisions, in C.
 *
 * The reference (transport.Receiver) is the specification; this is the same
 * behaviour with C state, held to it by tests/unit/test_transport_differential.py
 * (recorded traces replayed into both, every SACK, NAK, placement and counter compared)
 * and tests/unit/test_receiver_compiled.py (random packet sequences, the edges).
 *
 * What changes is only the representation:
 *   the PSN window   the reference keeps an integer whose bit k says PSN cum + k
 *                    arrived. Here a ring of bits indexed by PSN modulo a power of two
 *                    at least span + 65 wide: a PSN's bit is set when it arrives and
 *                    cleared when cum passes it, so the ring holds exactly the
 *                    reference's bits and a 64-bit SACK bitmap is two word reads.
 *   WRITE_IMM heap   a binary min-heap of (psn, imm) in C arrays, as heapq's.
 *   counters         int64 fields; `stats` builds a transport.ReceiverStats of them
 *                    when read (a snapshot: the reference's is live).
 *   placement        `place` is the reference's callable place(va, payload), or a
 *                    writable buffer (the QP's registered memory): then a payload is
 *                    copied at va with memcpy, bounds checked, and nothing written
 *                    outside.
 * The data path (RxRing, for a QP bound to it) calls fp_receiver_data instead: the
 * packet's fields as parsed, its payload copied from the ring, the SACK as C fields
 * (fp_receiver.h); on_data is that same step with its fields read from an RxPacket.
 * What stays Python: the packets on_data is given (transport.RxPacket, read by attribute),
 * the SackReports it returns (transport.SackReport), `nacks` (a list the data path
 * sends and clears), `completions` (a deque of (n, imm)), and port_state(), called
 * once per report as the reference does.
 */
#include "fp_receiver.h"

#include "fp_util.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* From twin.mrc.transport, handed over by bind() (twin.mrc.core, once: fp_bind_receiver). */
static PyObject *SackReport, *ReceiverStats;
static long long MESSAGES_KEPT, RECV_WINDOW, NACK_DISTANCE, CONGESTION_ECHO_CE,
    CONGESTION_COUNT;
static PyObject *s_psn, *s_va, *s_payload, *s_imm, *s_ev, *s_tries, *s_ack_req, *s_ce;

enum { BITMAP_BITS = 64 };

static PyTypeObject ReceiverType;

typedef struct {
    int64_t packets, bytes, duplicates, out_of_order, acks, nacks, completions,
        out_of_window, ce_marked, trimmed, nacks_trimmed;
} RxCounters;

typedef struct {
    PyObject_HEAD
    int ready;             /* FP_READY once __init__ ran to its end (fp_util.h) */
    PyObject *place;       /* the callable, or NULL: copy into `buf` */
    Py_buffer buf;         /* valid when place is NULL */
    PyObject *port_state;  /* callable, or Py_None: 0xFFFF */
    PyObject *nacks;       /* list of PSNs to NAK */
    PyObject *completions; /* deque(maxlen=MESSAGES_KEPT) of (n, imm) */
    long long span, ack_every;
    int64_t cum;
    uint64_t *ring;        /* bit (psn & mask): psn >= cum arrived */
    int64_t mask;          /* ring bits - 1 */
    int64_t *heap_psn;     /* the WRITE_IMM min-heap, by PSN */
    PyObject **heap_imm;
    Py_ssize_t heap_len, heap_cap;
    int64_t unacked, nacked;
    long long marks;       /* CE-marked packets since the last report, saturating */
    RxCounters st;
} Receiver;

/* -- the ring of PSN bits -------------------------------------------------------- */

static inline int ring_has(const Receiver *r, int64_t psn) {
    int64_t i = psn & r->mask;
    return (int)(r->ring[i >> 6] >> (i & 63) & 1);
}

static inline void ring_set(Receiver *r, int64_t psn) {
    int64_t i = psn & r->mask;
    r->ring[i >> 6] |= (uint64_t)1 << (i & 63);
}

static inline void ring_clear(Receiver *r, int64_t psn) {
    int64_t i = psn & r->mask;
    r->ring[i >> 6] &= ~((uint64_t)1 << (i & 63));
}

/* Bits for PSNs cum + 1 .. cum + 64: the reference's (window >> 1) & MASK64. */
static uint64_t ring_bitmap(const Receiver *r) {
    int64_t i = (r->cum + 1) & r->mask, word = i >> 6, shift = i & 63;
    int64_t words = (r->mask + 1) >> 6;
    uint64_t bits = r->ring[word] >> shift;
    if (shift)
        bits |= r->ring[(word + 1) % words] << (64 - shift);
    return bits;
}

/* -- the WRITE_IMM heap (heapq's, on PSN; PSNs in it are distinct) ----------------- */

static int heap_push(Receiver *r, int64_t psn, PyObject *imm) {
    if (r->heap_len == r->heap_cap) {
        Py_ssize_t cap = r->heap_cap ? 2 * r->heap_cap : 16;
        int64_t *p = PyMem_Realloc(r->heap_psn, cap * sizeof *p);
        if (!p) { PyErr_NoMemory(); return -1; }
        r->heap_psn = p;
        PyObject **q = PyMem_Realloc(r->heap_imm, cap * sizeof *q);
        if (!q) { PyErr_NoMemory(); return -1; }
        r->heap_imm = q;
        r->heap_cap = cap;
    }
    Py_ssize_t k = r->heap_len++;
    while (k > 0) {
        Py_ssize_t up = (k - 1) / 2;
        if (r->heap_psn[up] <= psn) break;
        r->heap_psn[k] = r->heap_psn[up];
        r->heap_imm[k] = r->heap_imm[up];
        k = up;
    }
    r->heap_psn[k] = psn;
    r->heap_imm[k] = Py_NewRef(imm);
    return 0;
}

/* The smallest entry out; its imm is the caller's reference. */
static PyObject *heap_pop(Receiver *r) {
    PyObject *top = r->heap_imm[0];
    Py_ssize_t n = --r->heap_len, k = 0;
    int64_t psn = r->heap_psn[n];
    PyObject *imm = r->heap_imm[n];
    for (;;) {
        Py_ssize_t c = 2 * k + 1;
        if (c >= n) break;
        if (c + 1 < n && r->heap_psn[c + 1] < r->heap_psn[c]) c++;
        if (psn <= r->heap_psn[c]) break;
        r->heap_psn[k] = r->heap_psn[c];
        r->heap_imm[k] = r->heap_imm[c];
        k = c;
    }
    if (n) {
        r->heap_psn[k] = psn;
        r->heap_imm[k] = imm;
    }
    return top;
}

/* Receiver._deliver: messages whose last PSN is now below cum complete, in order. */
static int deliver(Receiver *r) {
    while (r->heap_len && r->heap_psn[0] < r->cum) {
        PyObject *imm = heap_pop(r);
        PyObject *done = Py_BuildValue("(LN)", (long long)r->st.completions, imm);
        if (!done) return -1;
        PyObject *ok = PyObject_CallMethod(r->completions, "append", "(N)", done);
        if (!ok) return -1;
        Py_DECREF(ok);
        r->st.completions++;
    }
    return 0;
}

/* -- reports ------------------------------------------------------------------------ */

/* A packet's fields, as the receiver reads them. */
typedef struct {
    PyObject *obj;
    int64_t psn, va;
    PyObject *psn_o, *ev, *tries, *imm, *payload;  /* new references: pkt_release */
    int ack_req, ce;
} Pkt;

static void pkt_release(Pkt *p) {
    Py_XDECREF(p->psn_o); Py_XDECREF(p->ev); Py_XDECREF(p->tries);
    Py_XDECREF(p->imm); Py_XDECREF(p->payload);
}

static int get_int64(PyObject *obj, PyObject *name, PyObject **keep, int64_t *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) { Py_DECREF(v); return -1; }
    *out = x;
    if (keep) *keep = v; else Py_DECREF(v);
    return 0;
}

static int get_bool(PyObject *obj, PyObject *name, int *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    *out = PyObject_IsTrue(v);
    Py_DECREF(v);
    return *out < 0 ? -1 : 0;
}

static int pkt_read(PyObject *obj, Pkt *p, int with_payload) {
    memset(p, 0, sizeof *p);
    p->obj = obj;
    if (get_int64(obj, s_psn, &p->psn_o, &p->psn) < 0
        || get_int64(obj, s_va, NULL, &p->va) < 0
        || !(p->ev = PyObject_GetAttr(obj, s_ev))
        || !(p->tries = PyObject_GetAttr(obj, s_tries))
        || !(p->imm = PyObject_GetAttr(obj, s_imm))
        || get_bool(obj, s_ack_req, &p->ack_req) < 0
        || get_bool(obj, s_ce, &p->ce) < 0
        || (with_payload && !(p->payload = PyObject_GetAttr(obj, s_payload)))) {
        pkt_release(p);
        return -1;
    }
    return 0;
}

static void mark(Receiver *r) {  /* Receiver._mark */
    r->st.ce_marked++;
    if (r->marks < CONGESTION_COUNT) r->marks++;
}

/* Receiver._report: the state, echoing the packet; the marks start again. */
static PyObject *report(Receiver *r, const Pkt *p, int dup) {
    long long congestion = (p->ce ? CONGESTION_ECHO_CE : 0) | r->marks;
    r->marks = 0;
    PyObject *ports;
    if (r->port_state == Py_None) ports = PyLong_FromLong(0xFFFF);
    else ports = PyObject_CallNoArgs(r->port_state);
    if (!ports) return NULL;
    return PyObject_CallFunction(SackReport, "LKOOONLO", (long long)r->cum,
                                 (unsigned long long)ring_bitmap(r), p->ev, p->psn_o,
                                 p->tries, ports, congestion, dup ? Py_True : Py_False);
}

static PyObject *sack(Receiver *r, const Pkt *p, int dup) {  /* Receiver._sack */
    r->unacked = 0;
    r->st.acks++;
    return report(r, p, dup);
}

/* place(va, payload): the callable, or a copy into the registered buffer. */
static int place(Receiver *r, const Pkt *p, Py_ssize_t *length) {
    if (r->place) {
        Py_ssize_t n = PyObject_Length(p->payload);
        if (n < 0) return -1;
        PyObject *ok = PyObject_CallFunction(r->place, "LO", (long long)p->va, p->payload);
        if (!ok) return -1;
        Py_DECREF(ok);
        *length = n;
        return 0;
    }
    Py_buffer src;
    if (PyObject_GetBuffer(p->payload, &src, PyBUF_SIMPLE) < 0) return -1;
    if (p->va < 0 || p->va > r->buf.len || src.len > r->buf.len - p->va) {
        PyErr_Format(PyExc_ValueError, "placing %zd bytes at va %lld overflows the %zd-byte "
                     "buffer", src.len, (long long)p->va, r->buf.len);
        PyBuffer_Release(&src);
        return -1;
    }
    memcpy((char *)r->buf.buf + p->va, src.buf, src.len);
    *length = src.len;
    PyBuffer_Release(&src);
    return 0;
}

/* -- the methods ------------------------------------------------------------------------ */

/* Receiver.on_data's decisions for one packet whose fields are read (psn, ce, ack_req;
 * imm NULL for none). `placer` places it (the callable or the buffer: `place`; the data
 * path's bytes: place_bytes). Returns -1 with an exception set, 0: no SACK now, 1: a
 * SACK now, 2: a SACK now that answers a duplicate. *nack is the PSN to NAK, or -1. */
typedef int (*placer_fn)(Receiver *r, void *arg, Py_ssize_t *length);

static int data_step(Receiver *r, int64_t psn, int ce, int ack_req, PyObject *imm,
                     placer_fn placer, void *arg, int64_t *nack) {
    *nack = -1;
    int64_t d = psn - r->cum;
    if (d < 0 || (d < r->span && ring_has(r, psn))) {
        r->st.duplicates++;
        if (ce) mark(r);
        r->unacked = 0;  /* Receiver._sack: the sender missed an ack: answer at once */
        r->st.acks++;
        return 2;
    }
    if (d >= r->span) {
        r->st.out_of_window++;
        return 0;
    }
    if (ce) mark(r);
    Py_ssize_t length;
    if (placer(r, arg, &length) < 0) return -1;
    r->st.packets++;
    r->st.bytes += length;
    if (imm && heap_push(r, psn, imm) < 0) return -1;
    if (d == 0) {
        ring_set(r, r->cum);
        while (ring_has(r, r->cum)) {
            ring_clear(r, r->cum);
            r->cum++;
        }
        if (r->heap_len && deliver(r) < 0) return -1;
    } else {
        r->st.out_of_order++;
        ring_set(r, psn);
        if (d >= NACK_DISTANCE && r->nacked != r->cum) {
            r->nacked = r->cum;
            *nack = r->cum;
            r->st.nacks++;
        }
    }
    r->unacked++;
    if (r->unacked >= r->ack_every || ack_req || imm || ce) {
        r->unacked = 0;  /* Receiver._sack */
        r->st.acks++;
        return 1;
    }
    return 0;
}

static int place_pkt(Receiver *r, void *arg, Py_ssize_t *length) {
    return place(r, (const Pkt *)arg, length);
}

static PyObject *on_data(Receiver *r, PyObject *obj) {  /* Receiver.on_data */
    FP_REQUIRE_READY(r, NULL);
    Pkt p;
    if (pkt_read(obj, &p, 1) < 0) return NULL;
    PyObject *out = NULL;
    int64_t nack;
    int rc = data_step(r, p.psn, p.ce, p.ack_req, p.imm == Py_None ? NULL : p.imm,
                       place_pkt, &p, &nack);
    if (rc < 0) goto done;
    if (nack >= 0) {
        PyObject *cum = PyLong_FromLongLong(nack);
        if (!cum || PyList_Append(r->nacks, cum) < 0) { Py_XDECREF(cum); goto done; }
        Py_DECREF(cum);
    }
    out = rc ? report(r, &p, rc == 2) : Py_NewRef(Py_None);
done:
    pkt_release(&p);
    return out;
}

/* -- the data path's entry (fp_receiver.h): no packet object, no attribute read -------- */

int fp_receiver_bindable(PyObject *obj, Py_ssize_t *size) {
    if (!PyObject_TypeCheck(obj, &ReceiverType)) {
        PyErr_SetString(PyExc_TypeError, "want a compiled Receiver (twin.mrc._fastpath)");
        return -1;
    }
    Receiver *r = (Receiver *)obj;
    FP_REQUIRE_READY(r, -1);
    if (r->place) {
        PyErr_SetString(PyExc_TypeError, "the Receiver places through a callable: only "
                        "one that copies into its buffer can be bound");
        return -1;
    }
    *size = r->buf.len;
    return 0;
}

int64_t fp_receiver_cum(PyObject *obj) {
    return ((Receiver *)obj)->cum;
}

typedef struct {
    const FpRxData *pkt;
} BytesArg;

static int place_bytes(Receiver *r, void *arg, Py_ssize_t *length) {
    const FpRxData *p = ((BytesArg *)arg)->pkt;
    if (p->va < 0 || p->va > r->buf.len || p->len > r->buf.len - p->va) {
        PyErr_Format(PyExc_ValueError, "placing %zd bytes at va %lld overflows the %zd-byte "
                     "buffer", p->len, (long long)p->va, r->buf.len);
        return -1;
    }
    memcpy((char *)r->buf.buf + p->va, p->payload, (size_t)p->len);
    *length = p->len;
    return 0;
}

/* Receiver._report for the data path's entries: the receiver's state, echoing `p`, the
 * port bitmap left to the data path (it frames the SACK). */
static void data_report(Receiver *r, const FpRxData *p, FpSack *sack, int dup) {
    sack->cum = r->cum;
    sack->bitmap = ring_bitmap(r);
    sack->ev = p->ev;
    sack->psn = p->psn;
    sack->tries = p->tries;
    sack->congestion = (p->ce ? CONGESTION_ECHO_CE : 0) | r->marks;
    sack->dup = dup;
    r->marks = 0;
}

/* Receiver.on_trimmed for a parsed packet (a switch cut its payload off: never placed),
 * the port bitmap left to the data path: -1 with an exception set; 0, nothing to send (a
 * PSN out of the window); 1, *sack to send at once: a NAK(TRIMMED) for p->psn when
 * *nack, else a duplicate's SACK. */
int fp_receiver_trimmed(PyObject *obj, const FpRxData *p, FpSack *sack, int *nack) {
    Receiver *r = (Receiver *)obj;
    *nack = 0;
    FP_REQUIRE_READY(r, -1);
    int64_t d = p->psn - r->cum;
    int dup = 0;
    r->st.trimmed++;
    if (d < 0 || (d < r->span && ring_has(r, p->psn))) {
        r->st.duplicates++;
        r->unacked = 0;  /* Receiver._sack */
        r->st.acks++;
        dup = 1;
    } else if (d >= r->span) {
        r->st.out_of_window++;
        return 0;
    } else {
        if (p->ce) mark(r);
        r->st.nacks++;
        r->st.nacks_trimmed++;
        *nack = 1;
    }
    data_report(r, p, sack, dup);
    return 1;
}

int fp_receiver_data(PyObject *obj, const FpRxData *p, FpSack *sack, int64_t *nack,
                     Py_ssize_t *placed) {
    Receiver *r = (Receiver *)obj;
    *placed = 0;
    *nack = -1;
    FP_REQUIRE_READY(r, -1);
    if (r->place) {
        PyErr_SetString(PyExc_TypeError, "the Receiver places through a callable");
        return -1;
    }
    PyObject *imm = NULL;
    if (p->has_imm && !(imm = PyLong_FromUnsignedLong(p->imm))) return -1;
    BytesArg arg = {p};
    int64_t before = r->st.bytes;
    int rc = data_step(r, p->psn, p->ce, p->ack_req, imm, place_bytes, &arg, nack);
    Py_XDECREF(imm);
    *placed = (Py_ssize_t)(r->st.bytes - before);
    if (rc <= 0) return rc;
    data_report(r, p, sack, rc == 2);
    return 1;
}

static PyObject *on_trimmed(Receiver *r, PyObject *obj) {  /* Receiver.on_trimmed */
    FP_REQUIRE_READY(r, NULL);
    Pkt p;
    if (pkt_read(obj, &p, 0) < 0) return NULL;
    PyObject *rep = NULL, *out = NULL;
    int nack = 0;
    int64_t d = p.psn - r->cum;
    r->st.trimmed++;
    if (d < 0 || (d < r->span && ring_has(r, p.psn))) {
        r->st.duplicates++;
        rep = sack(r, &p, 1);
    } else if (d >= r->span) {
        r->st.out_of_window++;
        rep = Py_NewRef(Py_None);
    } else {
        if (p.ce) mark(r);
        r->st.nacks++;
        r->st.nacks_trimmed++;
        rep = report(r, &p, 0);
        nack = 1;
    }
    if (rep) out = Py_BuildValue("(NO)", rep, nack ? Py_True : Py_False);
    pkt_release(&p);
    return out;
}

static PyObject *flush(Receiver *r, PyObject *obj) {  /* Receiver.flush */
    FP_REQUIRE_READY(r, NULL);
    if (!r->unacked || obj == Py_None) Py_RETURN_NONE;
    Pkt p;
    if (pkt_read(obj, &p, 0) < 0) return NULL;
    PyObject *out = sack(r, &p, 0);
    pkt_release(&p);
    return out;
}

/* -- the type -------------------------------------------------------------------------- */

int fp_bind_receiver(FpBind *b) {
    if (fp_take(b, "SackReport", &SackReport) < 0
        || fp_take(b, "ReceiverStats", &ReceiverStats) < 0) return -1;
    FpInt consts[] = {
        {"MESSAGES_KEPT", &MESSAGES_KEPT}, {"RECV_WINDOW", &RECV_WINDOW},
        {"NACK_DISTANCE", &NACK_DISTANCE}, {"CONGESTION_ECHO_CE", &CONGESTION_ECHO_CE},
        {"CONGESTION_COUNT", &CONGESTION_COUNT}};
    return fp_take_ints(b, consts, sizeof consts / sizeof *consts);
}

static int Receiver_init(Receiver *r, PyObject *args, PyObject *kw) {
    static char *names[] = {"place", "ack_every", "port_state", "span", NULL};
    PyObject *placer, *port_state = Py_None;
    long long ack_every = 2, span = -1;
    if (fp_require_bound((PyObject *)r) < 0) return -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|LOL:Receiver", names, &placer, &ack_every,
                                     &port_state, &span))
        return -1;
    if (span < 0) span = RECV_WINDOW;
    if (span < 1 || span > (1LL << 30)) {
        PyErr_Format(PyExc_ValueError, "span %lld: want 1 .. 2**30 PSNs", span);
        return -1;
    }
    if (PyCallable_Check(placer)) {
        r->place = Py_NewRef(placer);
    } else if (PyObject_GetBuffer(placer, &r->buf, PyBUF_WRITABLE) < 0) {
        PyErr_SetString(PyExc_TypeError, "place: want place(va, payload), or a writable "
                        "buffer to copy payloads into");
        return -1;
    }
    if (port_state != Py_None && !PyCallable_Check(port_state)) {
        PyErr_SetString(PyExc_TypeError, "port_state: want a callable returning the port bitmap");
        return -1;
    }
    int64_t bits = 128;
    while (bits < span + BITMAP_BITS + 1) bits <<= 1;
    if (!(r->ring = PyMem_Calloc(bits / 64, sizeof(uint64_t)))) {
        PyErr_NoMemory();
        return -1;
    }
    r->mask = bits - 1;
    r->span = span;
    r->ack_every = ack_every;
    r->port_state = Py_NewRef(port_state);
    r->nacked = -1;
    if (!(r->nacks = PyList_New(0))) return -1;
    r->completions = fp_bounded_deque(MESSAGES_KEPT);
    return r->completions ? 0 : -1;
}

static int Receiver_traverse(Receiver *r, visitproc visit, void *arg) {
    Py_VISIT(r->place); Py_VISIT(r->port_state); Py_VISIT(r->nacks);
    Py_VISIT(r->completions);
    for (Py_ssize_t i = 0; i < r->heap_len; i++) Py_VISIT(r->heap_imm[i]);
    return 0;
}

static int Receiver_clear(Receiver *r) {
    r->ready = FP_CLEARED;  /* its objects are gone: a finalizer that still holds it must
                             * get an error, not a NULL */
    Py_CLEAR(r->place); Py_CLEAR(r->port_state); Py_CLEAR(r->nacks);
    Py_CLEAR(r->completions);
    for (Py_ssize_t i = 0; i < r->heap_len; i++) Py_CLEAR(r->heap_imm[i]);
    r->heap_len = 0;
    return 0;
}

/* __init__ once; one that fails part-way leaves the receiver blank, what it had taken
 * released (so a method refuses it instead of reaching a NULL, and __init__ may run
 * again) */
static int Receiver_init_once(Receiver *r, PyObject *args, PyObject *kw) {
    if (r->ready != FP_BLANK) {
        PyErr_SetString(PyExc_TypeError, "a Receiver is initialised once");
        return -1;
    }
    r->ready = FP_INITIALISING;
    if (Receiver_init(r, args, kw) < 0) {
        Receiver_clear(r);
        if (r->buf.obj) PyBuffer_Release(&r->buf);
        memset(&r->buf, 0, sizeof r->buf);
        PyMem_Free(r->ring);
        r->ring = NULL;
        r->ready = FP_BLANK;
        return -1;
    }
    r->ready = FP_READY;
    return 0;
}

static void Receiver_dealloc(Receiver *r) {
    PyObject_GC_UnTrack(r);
    Receiver_clear(r);
    if (r->buf.obj) PyBuffer_Release(&r->buf);
    PyMem_Free(r->ring);
    PyMem_Free(r->heap_psn);
    PyMem_Free(r->heap_imm);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *get_stats(Receiver *r, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, NULL);
    const RxCounters *s = &r->st;
    return PyObject_CallFunction(ReceiverStats, "LLLLLLLLLLL", (long long)s->packets,
                                 (long long)s->bytes, (long long)s->duplicates,
                                 (long long)s->out_of_order, (long long)s->acks,
                                 (long long)s->nacks, (long long)s->completions,
                                 (long long)s->out_of_window, (long long)s->ce_marked,
                                 (long long)s->trimmed, (long long)s->nacks_trimmed);
}

static PyObject *get_owes_ack(Receiver *r, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, NULL);
    return PyBool_FromLong(r->unacked > 0);
}

static PyObject *get_cum(Receiver *r, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, NULL);
    return PyLong_FromLongLong(r->cum);
}

static PyObject *get_bytes_placed(Receiver *r, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, NULL);
    return PyLong_FromLongLong(r->st.bytes);
}

static PyObject *get_place(Receiver *r, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, NULL);
    return Py_NewRef(r->place ? r->place : r->buf.obj);
}

/* What were members (a member of a blank Receiver reads 0 or None): getters, so that
 * they too refuse a Receiver that is not ready. */
static PyObject *get_span(Receiver *r, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, NULL);
    return PyLong_FromLongLong(r->span);
}

static PyObject *get_ack_every(Receiver *r, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, NULL);
    return PyLong_FromLongLong(r->ack_every);
}

/* An object field; `closure` is its offset in Receiver. */
static PyObject *get_object(Receiver *r, void *closure) {
    FP_REQUIRE_READY(r, NULL);
    return Py_NewRef(*(PyObject **)((char *)r + (Py_ssize_t)closure));
}

static PyGetSetDef Receiver_getset[] = {
    {"stats", (getter)get_stats, NULL, "the counters: a transport.ReceiverStats, as of now"},
    {"owes_ack", (getter)get_owes_ack, NULL, "packets arrived since the last SACK"},
    {"cum", (getter)get_cum, NULL, "every PSN below it arrived"},
    {"bytes_placed", (getter)get_bytes_placed, NULL, "stats.bytes, without the snapshot"},
    {"place", (getter)get_place, NULL, "place(va, payload), or the buffer payloads go to"},
    {"span", (getter)get_span, NULL, "PSNs above cum it accepts"},
    {"ack_every", (getter)get_ack_every, NULL, "a SACK per this many packets"},
    {"port_state", (getter)get_object, NULL,
     "port_state() -> the port bitmap SACKs carry (None: 0xFFFF)",
     (void *)offsetof(Receiver, port_state)},
    {"nacks", (getter)get_object, NULL, "PSNs to NAK; the data path sends and clears them",
     (void *)offsetof(Receiver, nacks)},
    {"completions", (getter)get_object, NULL, "the last completed messages, (n, imm), in order",
     (void *)offsetof(Receiver, completions)},
    {NULL},
};

static PyMethodDef Receiver_methods[] = {
    {"on_data", (PyCFunction)on_data, METH_O,
     "on_data(pkt) -> SackReport | None: take one data packet (transport.Receiver.on_data)"},
    {"on_trimmed", (PyCFunction)on_trimmed, METH_O,
     "on_trimmed(pkt) -> (SackReport | None, nack): a trimmed packet, never placed"},
    {"flush", (PyCFunction)flush, METH_O,
     "flush(pkt | None) -> SackReport | None: the delayed-ack timer fired"},
    {NULL},
};

static PyTypeObject ReceiverType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "twin.mrc._fastpath.Receiver",
    .tp_doc = "Receiver(place, ack_every=2, port_state=None, span=RECV_WINDOW): "
              "twin.mrc.transport.Receiver in C (the same decisions; see _receiver.c)",
    .tp_basicsize = sizeof(Receiver),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Receiver_init_once,
    .tp_dealloc = (destructor)Receiver_dealloc,
    .tp_traverse = (traverseproc)Receiver_traverse,
    .tp_clear = (inquiry)Receiver_clear,
    .tp_methods = Receiver_methods,
    .tp_getset = Receiver_getset,
};

int fp_add_receiver(PyObject *m) {
    FpName names[] = {
        {&s_psn, "psn"}, {&s_va, "va"}, {&s_payload, "payload"}, {&s_imm, "imm"},
        {&s_ev, "ev"}, {&s_tries, "tries"}, {&s_ack_req, "ack_req"}, {&s_ce, "ce"}};
    if (fp_intern(names, sizeof names / sizeof *names) < 0) return -1;
    if (PyType_Ready(&ReceiverType) < 0) return -1;
    return PyModule_AddObjectRef(m, "Receiver", (PyObject *)&ReceiverType);
}
