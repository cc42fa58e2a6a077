/* The MRC endpoint's compiled data path: framing, the ICRC and the syscalls, per batch.
 *
 * The transport's logic (EV sets, loss detection, the window, the receiver's PSN
 * window) stays in Python (twin.mrc.transport); this module only does what costs per
 * byte or per syscall, and it does it exactly as twin.mrc.wire does, byte for byte:
 *
 *   TxQueue   data packets of a window, posted one call each, sent with one sendmmsg by
 *             an engine thread (a NIC's send queue). A packet is four iovecs: the DataTemplate's 96 fixed bytes (IPv6/IPv6/UDP
 *             and BTH bytes 0..7), its 20- or 24-byte variable part (BTH 8..11, RETH,
 *             ImmDt), the payload straight from the registered source buffer, the ICRC.
 *             Nothing is copied in userspace: the kernel copies the payload once.
 *   RxRing    recvmmsg of up to `slots` datagrams into a ring (the peer address, the UDP
 *             source port and the IPV6_FLOWINFO cmsg with each), the ICRC checked first,
 *             then a data packet's headers parsed to a tuple whose payload is a
 *             memoryview into its slot: the receiver places it straight from there into
 *             the registered buffer. Other opcodes go back whole to wire's decoder.
 *   parse     the same parse on one UDP payload (what RxRing does per datagram); the
 *             differential tests hold it to wire.decode.
 *   build     one data packet as bytes, as TxQueue would send it (DataTemplate.build).
 *
 * The CRC is zlib's crc32 (RoCEv2's ICRC is CRC-32, IBA Annex A17), sent least
 * significant byte first as Linux rxe stores it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <zlib.h>

#define HEADROOM 88         /* outer IPv6 + inner IPv6 + UDP */
#define HEAD_BYTES 96       /* HEADROOM + BTH bytes 0..7 */
#define OUTER_DST 24        /* the uSID path: the outer IPv6 destination */
#define ROCE_PORT 4791
#define NH_UDP 17
#define MTU 4096
#define PSN_MASK 0xFFFFFFu
#define TRY_MASK 0x7F
#define ACK_REQ 0x80000000u
#define SPORT_SHIFT 18
#define FLOW_MASK 0xFFFFFu
#define OP_WRITE_ONLY 0x0A
#define OP_WRITE_ONLY_IMM 0x0B
#define DATA_HEAD 28        /* BTH 12 + RETH 16: the payload's offset */
#define DATA_IMM_HEAD 32    /* + ImmDt 4 */
#define IPV6_FLOWINFO_OPT 11

enum { KIND_BAD = 0, KIND_DATA = 1, KIND_OTHER = 2 };

static PyObject *reason_short, *reason_icrc, *reason_length;

/* -- bytes in network order --------------------------------------------------------- */

static inline void put32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static inline void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)(v >> 32)); put32(p + 4, (uint32_t)v);
}
static inline uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t get64(const unsigned char *p) {
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}
static inline void put_icrc(unsigned char *p, uint32_t crc) {
    p[0] = crc; p[1] = crc >> 8; p[2] = crc >> 16; p[3] = crc >> 24;
}

/* Fill the variable part of a data packet: BTH 8..11, RETH, ImmDt. Returns its length. */
static inline int data_var(unsigned char *v, uint32_t word, uint64_t va, uint32_t rkey,
                           uint32_t len, int has_imm, uint32_t imm) {
    put32(v, word); put64(v + 4, va); put32(v + 12, rkey); put32(v + 16, len);
    if (has_imm) { put32(v + 20, imm); return 24; }
    return 20;
}

/* The CRC state after the ICRC's IPv6 pseudo-header (wire._seed6). */
static uint32_t seed6(const unsigned char *src, const unsigned char *dst, unsigned sport,
                      unsigned udp_len) {
    unsigned char h[8 + 40 + 8];
    memset(h, 0xFF, 8);
    put32(h + 8, 0x6FFFFFFFu);
    h[12] = udp_len >> 8; h[13] = udp_len;
    h[14] = NH_UDP; h[15] = 0xFF;
    memcpy(h + 16, src, 16); memcpy(h + 32, dst, 16);
    h[48] = sport >> 8; h[49] = sport;
    h[50] = ROCE_PORT >> 8; h[51] = ROCE_PORT & 0xFF;
    h[52] = udp_len >> 8; h[53] = udp_len;
    h[54] = 0xFF; h[55] = 0xFF;
    return (uint32_t)crc32(0, h, sizeof h);
}

/* -- arguments ------------------------------------------------------------------------- */

static int as_u64(PyObject *o, uint64_t *out, const char *what) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "%s out of range", what);
        return -1;
    }
    *out = v;
    return 0;
}

static int as_u32(PyObject *o, uint32_t *out, const char *what) {
    uint64_t v;
    if (as_u64(o, &v, what) < 0) return -1;
    if (v > 0xFFFFFFFFu) {
        PyErr_Format(PyExc_ValueError, "%s is 32 bits", what);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* The fields of one data packet: (head, seed, word, va, rkey, payload, imm). */
typedef struct {
    const unsigned char *head;
    uint32_t seed, word, rkey, imm;
    uint64_t va;
    int has_imm;
} DataArgs;

static int data_args(PyObject *const *args, Py_ssize_t nargs, DataArgs *d, Py_buffer *payload) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "want (head, seed, word, va, rkey, payload, imm)");
        return -1;
    }
    if (!PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != HEAD_BYTES) {
        PyErr_Format(PyExc_ValueError, "head must be %d bytes", HEAD_BYTES);
        return -1;
    }
    d->head = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    if (as_u32(args[1], &d->seed, "seed") < 0 || as_u32(args[2], &d->word, "word") < 0
        || as_u64(args[3], &d->va, "va") < 0 || as_u32(args[4], &d->rkey, "rkey") < 0)
        return -1;
    d->has_imm = args[6] != Py_None;
    d->imm = 0;
    if (d->has_imm && as_u32(args[6], &d->imm, "imm") < 0) return -1;
    if (PyObject_GetBuffer(args[5], payload, PyBUF_SIMPLE) < 0) return -1;
    if (payload->len > MTU) {
        PyErr_Format(PyExc_ValueError, "payload is at most %d bytes, got %zd", MTU,
                     payload->len);
        PyBuffer_Release(payload);
        return -1;
    }
    return 0;
}

/* -- TxQueue ---------------------------------------------------------------------------- */

/* A send queue and the engine that drains it, as a NIC has: the transport posts a
 * window's packets (`data`, one call each) and rings the doorbell (`flush`); an engine
 * thread of its own sends each batch with sendmmsg, without the GIL, while the
 * transport goes on. A sendmmsg costs the kernel's whole forwarding path through the
 * fabric's routers (all of it runs in the sender's softirq), so this is what lets the
 * transport's Python and the kernel's forwarding use both cores. Batches are sent in the
 * order they were posted. A batch's references (the template bytes, the source buffer's
 * export, the caller's tags) are dropped by the posting thread once the batch is sent,
 * and a packet the kernel refused (no route: a NIC port down) comes back from a later
 * flush as its tag, as a completion queue reports an error. With threaded=False the
 * doorbell sends at once, in the caller's thread. */

#define TX_BATCHES 4

typedef struct {
    unsigned char var[24];
    unsigned char icrc[4];
    struct sockaddr_in6 to;
    struct iovec iov[4];
    PyObject *head;      /* held until the batch is sent */
    PyObject *tag;       /* the caller's: returned if the kernel refuses the packet */
    Py_buffer payload;   /* held until the batch is sent */
} TxSlot;

typedef struct {
    TxSlot *slots;
    struct mmsghdr *msgs;
    int *refused;        /* indexes the kernel refused */
    int n, n_refused;
    int state;           /* TX_FREE (being filled), TX_POSTED, TX_SENT */
} TxBatchBuf;

enum { TX_FREE = 0, TX_POSTED = 1, TX_SENT = 2 };

typedef struct {
    PyObject_HEAD
    int fd, cap, threaded, started, stop;
    int cur;             /* the batch being filled */
    int next_send;       /* the engine's next batch */
    TxBatchBuf b[TX_BATCHES];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t posted, sent;
    PyObject *refused;   /* tags of refused packets, not yet returned */
    unsigned long long packets, errors, batches;
} TxQueue;

/* Send one batch; the refused indexes are recorded. No Python here: any thread. */
static void send_batch(int fd, TxBatchBuf *b, unsigned long long *packets,
                       unsigned long long *errors) {
    int i = 0;
    b->n_refused = 0;
    while (i < b->n) {
        int r = sendmmsg(fd, b->msgs + i, b->n - i, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            b->refused[b->n_refused++] = i++;  /* lost, and recovered by the transport */
            (*errors)++;
            continue;
        }
        *packets += r;
        i += r;
    }
}

static void *tx_engine(void *arg) {
    TxQueue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        TxBatchBuf *b = &q->b[q->next_send];
        while (b->state != TX_POSTED && !q->stop) pthread_cond_wait(&q->posted, &q->mu);
        if (b->state != TX_POSTED) break;  /* stopping, and nothing is posted */
        pthread_mutex_unlock(&q->mu);
        unsigned long long packets = 0, errors = 0;
        send_batch(q->fd, b, &packets, &errors);
        pthread_mutex_lock(&q->mu);
        q->packets += packets;
        q->errors += errors;
        b->state = TX_SENT;
        q->next_send = (q->next_send + 1) % TX_BATCHES;
        pthread_cond_broadcast(&q->sent);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* With the GIL: drop a sent batch's references, its refused tags to q->refused. */
static int reclaim(TxQueue *q, TxBatchBuf *b) {
    int rc = 0;
    for (int k = 0; k < b->n_refused; k++) {
        PyObject *tag = b->slots[b->refused[k]].tag;
        if (rc == 0 && PyList_Append(q->refused, tag ? tag : Py_None) < 0) rc = -1;
    }
    for (int i = 0; i < b->n; i++) {
        Py_CLEAR(b->slots[i].head);
        Py_CLEAR(b->slots[i].tag);
        PyBuffer_Release(&b->slots[i].payload);
    }
    b->n = b->n_refused = 0;
    pthread_mutex_lock(&q->mu);
    b->state = TX_FREE;
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* Wait (without the GIL) until the engine has sent batch b; then reclaim it. */
static int wait_sent(TxQueue *q, TxBatchBuf *b) {
    if (b->state == TX_POSTED) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&q->mu);
        while (b->state == TX_POSTED) pthread_cond_wait(&q->sent, &q->mu);
        pthread_mutex_unlock(&q->mu);
        Py_END_ALLOW_THREADS
    }
    if (b->state == TX_SENT) return reclaim(q, b);
    return 0;
}

/* Reclaim every batch the engine has finished, without waiting. */
static int reclaim_sent(TxQueue *q) {
    int rc = 0;
    for (int i = 0; i < TX_BATCHES; i++) {
        if (i == q->cur) continue;
        int sent;
        pthread_mutex_lock(&q->mu);
        sent = q->b[i].state == TX_SENT;
        pthread_mutex_unlock(&q->mu);
        if (sent && reclaim(q, &q->b[i]) < 0) rc = -1;
    }
    return rc;
}

static void txqueue_stop(TxQueue *q) {
    if (!q->started) return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_broadcast(&q->posted);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);  /* it sends what was posted first */
    Py_END_ALLOW_THREADS
    q->started = 0;
}

static void txqueue_dealloc(TxQueue *self) {
    txqueue_stop(self);
    for (int i = 0; i < TX_BATCHES; i++) {
        TxBatchBuf *b = &self->b[i];
        if (b->slots && self->cap && self->refused) {  /* initialised: drop what it holds */
            b->state = TX_SENT;
            b->n_refused = 0;
            reclaim(self, b);
        }
        PyMem_Free(b->slots);
        PyMem_Free(b->msgs);
        PyMem_Free(b->refused);
    }
    Py_CLEAR(self->refused);
    if (self->cap) {
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->posted);
        pthread_cond_destroy(&self->sent);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int txqueue_init(TxQueue *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"fd", "capacity", "threaded", NULL};
    int fd, cap = 64, threaded = 1;
    if (self->cap) {
        PyErr_SetString(PyExc_RuntimeError, "TxQueue is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|ip", names, &fd, &cap, &threaded))
        return -1;
    if (cap < 1 || cap > 1024) {
        PyErr_SetString(PyExc_ValueError, "capacity must be in 1..1024");
        return -1;
    }
    for (int i = 0; i < TX_BATCHES; i++) {
        TxBatchBuf *b = &self->b[i];
        b->slots = PyMem_Calloc(cap, sizeof(TxSlot));
        b->msgs = PyMem_Calloc(cap, sizeof(struct mmsghdr));
        b->refused = PyMem_Calloc(cap, sizeof(int));
        if (!b->slots || !b->msgs || !b->refused) { PyErr_NoMemory(); return -1; }
    }
    self->refused = PyList_New(0);
    if (!self->refused) return -1;
    self->fd = fd;
    self->cap = cap;
    self->threaded = threaded;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->posted, NULL);
    pthread_cond_init(&self->sent, NULL);
    if (threaded) {
        int e = pthread_create(&self->thread, NULL, tx_engine, self);
        if (e) {
            errno = e;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        self->started = 1;
    }
    return 0;
}

/* data(head, seed, word, va, rkey, payload, imm, tag): post one data packet to the
 * batch being filled. Returns True when that batch is full (the caller flushes). */
static PyObject *txqueue_data(TxQueue *self, PyObject *const *args, Py_ssize_t nargs) {
    TxBatchBuf *b = &self->b[self->cur];
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "want (head, seed, word, va, rkey, payload, imm, tag)");
        return NULL;
    }
    if (b->n >= self->cap) {
        PyErr_SetString(PyExc_OverflowError, "batch full: flush it first");
        return NULL;
    }
    TxSlot *s = &b->slots[b->n];
    DataArgs d;
    if (data_args(args, 7, &d, &s->payload) < 0) return NULL;
    uint32_t len = (uint32_t)s->payload.len;
    int vlen = data_var(s->var, d.word, d.va, d.rkey, len, d.has_imm, d.imm);
    uint32_t crc = (uint32_t)crc32(d.seed, s->var, vlen);
    crc = (uint32_t)crc32(crc, s->payload.buf, len);
    put_icrc(s->icrc, crc);
    s->head = Py_NewRef(args[0]);
    s->tag = Py_NewRef(args[7]);
    memset(&s->to, 0, sizeof s->to);
    s->to.sin6_family = AF_INET6;
    memcpy(&s->to.sin6_addr, d.head + OUTER_DST, 16);
    s->iov[0] = (struct iovec){(void *)d.head, HEAD_BYTES};
    s->iov[1] = (struct iovec){s->var, (size_t)vlen};
    s->iov[2] = (struct iovec){s->payload.buf, len};
    s->iov[3] = (struct iovec){s->icrc, 4};
    struct msghdr *m = &b->msgs[b->n].msg_hdr;
    memset(m, 0, sizeof *m);
    m->msg_name = &s->to;
    m->msg_namelen = sizeof s->to;
    m->msg_iov = s->iov;
    m->msg_iovlen = 4;
    b->n++;
    return PyBool_FromLong(b->n >= self->cap);
}

/* flush() -> [tag, ...]: ring the doorbell for what is posted; return the tags of
 * packets the kernel refused since the last flush (of this or earlier batches). */
static PyObject *txqueue_flush(TxQueue *self, PyObject *Py_UNUSED(ignored)) {
    TxBatchBuf *b = &self->b[self->cur];
    if (b->n) {
        self->batches++;
        if (self->threaded) {
            pthread_mutex_lock(&self->mu);
            b->state = TX_POSTED;
            pthread_cond_signal(&self->posted);
            pthread_mutex_unlock(&self->mu);
            self->cur = (self->cur + 1) % TX_BATCHES;
            /* the next batch to fill may still be in the engine's hands: wait for it */
            if (wait_sent(self, &self->b[self->cur]) < 0) return NULL;
        } else {
            Py_BEGIN_ALLOW_THREADS
            send_batch(self->fd, b, &self->packets, &self->errors);
            Py_END_ALLOW_THREADS
            b->state = TX_SENT;
            if (reclaim(self, b) < 0) return NULL;
        }
    }
    if (self->threaded && reclaim_sent(self) < 0) return NULL;
    PyObject *out = self->refused;
    self->refused = PyList_New(0);
    if (!self->refused) { self->refused = out; return NULL; }
    return out;
}

/* drain() -> [tag, ...]: wait until everything posted is sent (a QP closing, a test). */
static PyObject *txqueue_drain(TxQueue *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *first = txqueue_flush(self, NULL);
    if (!first) return NULL;
    for (int i = 0; i < TX_BATCHES; i++) {
        if (wait_sent(self, &self->b[i]) < 0) { Py_DECREF(first); return NULL; }
    }
    Py_ssize_t n = PyList_GET_SIZE(first);
    if (PyList_SetSlice(first, n, n, self->refused) < 0
        || PyList_SetSlice(self->refused, 0, PyList_GET_SIZE(self->refused), NULL) < 0) {
        Py_DECREF(first);
        return NULL;
    }
    return first;
}

static PyObject *txqueue_counters(TxQueue *self, void *Py_UNUSED(closure)) {
    unsigned long long p, e;
    pthread_mutex_lock(&self->mu);
    p = self->packets;
    e = self->errors;
    pthread_mutex_unlock(&self->mu);
    return Py_BuildValue("(KKK)", p, e, self->batches);
}

static PyObject *txqueue_queued(TxQueue *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLong(self->b[self->cur].n);
}

static PyMethodDef txqueue_methods[] = {
    {"data", (PyCFunction)(void (*)(void))txqueue_data, METH_FASTCALL,
     "data(head, seed, word, va, rkey, payload, imm, tag) -> full: post one data packet"},
    {"flush", (PyCFunction)txqueue_flush, METH_NOARGS,
     "flush() -> [tag, ...]: send what is posted; tags of packets the kernel refused"},
    {"drain", (PyCFunction)txqueue_drain, METH_NOARGS,
     "drain() -> [tag, ...]: flush, and wait until every posted packet is sent"},
    {NULL}
};

static PyGetSetDef txqueue_getset[] = {
    {"queued", (getter)txqueue_queued, NULL, "packets posted to the batch being filled", NULL},
    {"counters", (getter)txqueue_counters, NULL,
     "(packets sent, packets refused, batches)", NULL},
    {NULL}
};

static PyTypeObject TxQueueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "twin.mrc._fastpath.TxQueue",
    .tp_basicsize = sizeof(TxQueue),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TxQueue(fd, capacity=64, threaded=True): a send queue and its engine",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)txqueue_init,
    .tp_dealloc = (destructor)txqueue_dealloc,
    .tp_methods = txqueue_methods,
    .tp_getset = txqueue_getset,
};

/* -- parsing ---------------------------------------------------------------------------- */

/* Parse one UDP payload as wire.decode does: `data` is n bytes at offset `at` of the
 * memoryview `base`, which views are sliced from; src/dst are packed 16-byte addresses. */
static PyObject *parse_one(PyObject *base, Py_ssize_t at, const unsigned char *data,
                           Py_ssize_t n, const unsigned char *src, const unsigned char *dst,
                           unsigned sport, uint32_t flow, PyObject *src_obj) {
    if (n < 16) return Py_BuildValue("(iO)", KIND_BAD, reason_short);
    uint32_t crc = (uint32_t)crc32(seed6(src, dst, sport, (unsigned)(n + 8)), data, 4);
    static const unsigned char ff = 0xFF;
    crc = (uint32_t)crc32(crc, &ff, 1);
    crc = (uint32_t)crc32(crc, data + 5, (unsigned)(n - 9));
    uint32_t got = (uint32_t)data[n - 4] | (uint32_t)data[n - 3] << 8
                   | (uint32_t)data[n - 2] << 16 | (uint32_t)data[n - 1] << 24;
    if (crc != got) return Py_BuildValue("(iO)", KIND_BAD, reason_icrc);
    int op = data[0];
    Py_ssize_t start;
    if (op == OP_WRITE_ONLY) {
        if (n < DATA_HEAD + 4) return Py_BuildValue("(iO)", KIND_BAD, reason_short);
        start = DATA_HEAD;
    } else if (op == OP_WRITE_ONLY_IMM) {
        if (n < DATA_IMM_HEAD + 4) return Py_BuildValue("(iO)", KIND_BAD, reason_short);
        start = DATA_IMM_HEAD;
    } else {
        PyObject *whole = PySequence_GetSlice(base, at, at + n);
        if (!whole) return NULL;
        return Py_BuildValue("(iNiOIIn)", KIND_OTHER, whole, op, src_obj, sport, flow, n);
    }
    uint32_t dma_len = get32(data + 24);
    if ((Py_ssize_t)dma_len != n - start - 4 || dma_len > MTU)
        return Py_BuildValue("(iO)", KIND_BAD, reason_length);
    uint32_t qp = get32(data + 4) & PSN_MASK, word = get32(data + 8);
    uint64_t va = get64(data + 12);
    uint32_t rkey = get32(data + 20);
    uint32_t ev = (flow & FLOW_MASK) | ((uint32_t)(sport & 0x3FFF) << SPORT_SHIFT);
    PyObject *payload = PySequence_GetSlice(base, at + start, at + n - 4);
    if (!payload) return NULL;
    PyObject *imm;
    if (op == OP_WRITE_ONLY_IMM) {
        imm = PyLong_FromUnsignedLong(get32(data + 28));
        if (!imm) { Py_DECREF(payload); return NULL; }
    } else {
        imm = Py_NewRef(Py_None);
    }
    /* (1, dest_qp, psn, va, rkey, payload, ev, tries, ack_req, imm, src) */
    return Py_BuildValue("(iIIKINIiNNO)", KIND_DATA, qp, word & PSN_MASK,
                         (unsigned long long)va, rkey, payload, ev,
                         (int)((word >> 24) & TRY_MASK), PyBool_FromLong(word & ACK_REQ), imm,
                         src_obj);
}

static PyObject *fp_parse(PyObject *Py_UNUSED(mod), PyObject *args) {
    PyObject *data, *src, *dst;
    unsigned sport;
    unsigned long flow = 0;
    if (!PyArg_ParseTuple(args, "OSSI|k", &data, &src, &dst, &sport, &flow)) return NULL;
    if (PyBytes_GET_SIZE(src) != 16 || PyBytes_GET_SIZE(dst) != 16) {
        PyErr_SetString(PyExc_ValueError, "src and dst are packed 16-byte IPv6 addresses");
        return NULL;
    }
    PyObject *view = PyMemoryView_FromObject(data);
    if (!view) return NULL;
    Py_buffer *b = PyMemoryView_GET_BUFFER(view);
    PyObject *out = parse_one(view, 0, b->buf, b->len,
                              (const unsigned char *)PyBytes_AS_STRING(src),
                              (const unsigned char *)PyBytes_AS_STRING(dst), sport & 0xFFFF,
                              (uint32_t)flow, src);
    Py_DECREF(view);
    return out;
}

static PyObject *fp_build(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs) {
    DataArgs d;
    Py_buffer payload;
    if (data_args(args, nargs, &d, &payload) < 0) return NULL;
    uint32_t len = (uint32_t)payload.len;
    PyObject *out = PyBytes_FromStringAndSize(NULL, HEAD_BYTES + 24 + len + 4);
    if (!out) { PyBuffer_Release(&payload); return NULL; }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(p, d.head, HEAD_BYTES);
    int vlen = data_var(p + HEAD_BYTES, d.word, d.va, d.rkey, len, d.has_imm, d.imm);
    memcpy(p + HEAD_BYTES + vlen, payload.buf, len);
    uint32_t crc = (uint32_t)crc32(d.seed, p + HEAD_BYTES, vlen + len);
    put_icrc(p + HEAD_BYTES + vlen + len, crc);
    PyBuffer_Release(&payload);
    if (_PyBytes_Resize(&out, HEAD_BYTES + vlen + len + 4) < 0) return NULL;
    return out;
}

/* -- RxRing ----------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    int fd;
    int slots;
    Py_ssize_t slot_size;
    unsigned char *buf;  /* the bytes of `store` */
    PyObject *store;     /* a bytearray: every view sliced from buf_view keeps it alive */
    PyObject *buf_view;  /* a memoryview over store: payload views are slices of it */
    struct mmsghdr *msgs;
    struct iovec *iov;
    struct sockaddr_in6 *from;
    unsigned char *ctl;
    size_t ctl_size;
    unsigned char local[16];
    PyObject *peers;     /* packed address -> the same bytes object (no alloc per packet) */
    unsigned long long datagrams, batches;
} RxRing;

static void rxring_dealloc(RxRing *self) {
    Py_CLEAR(self->buf_view);
    Py_CLEAR(self->store);
    Py_CLEAR(self->peers);
    PyMem_Free(self->msgs);
    PyMem_Free(self->iov);
    PyMem_Free(self->from);
    PyMem_Free(self->ctl);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int rxring_init(RxRing *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"fd", "local", "slots", "slot_size", NULL};
    int fd, slots = 64;
    Py_ssize_t slot_size = MTU + 256;
    PyObject *local;
    if (self->store) {
        PyErr_SetString(PyExc_RuntimeError, "RxRing is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iS|in", names, &fd, &local, &slots,
                                     &slot_size))
        return -1;
    if (PyBytes_GET_SIZE(local) != 16) {
        PyErr_SetString(PyExc_ValueError, "local is a packed 16-byte IPv6 address");
        return -1;
    }
    if (slots < 1 || slots > 1024 || slot_size < 64 || slot_size > 65536) {
        PyErr_SetString(PyExc_ValueError, "slots in 1..1024, slot_size in 64..65536");
        return -1;
    }
    self->fd = fd;
    self->slots = slots;
    self->slot_size = slot_size;
    memcpy(self->local, PyBytes_AS_STRING(local), 16);
    self->ctl_size = CMSG_SPACE(sizeof(uint32_t));
    self->store = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)slots * slot_size);
    self->buf = self->store ? (unsigned char *)PyByteArray_AS_STRING(self->store) : NULL;
    self->msgs = PyMem_Calloc(slots, sizeof(struct mmsghdr));
    self->iov = PyMem_Calloc(slots, sizeof(struct iovec));
    self->from = PyMem_Calloc(slots, sizeof(struct sockaddr_in6));
    self->ctl = PyMem_Calloc(slots, self->ctl_size);
    self->peers = PyDict_New();
    if (!self->buf || !self->msgs || !self->iov || !self->from || !self->ctl || !self->peers) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf_view = PyMemoryView_FromObject(self->store);
    return self->buf_view ? 0 : -1;
}

static PyObject *peer_bytes(RxRing *self, const unsigned char *addr) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)addr, 16);
    if (!key) return NULL;
    PyObject *hit = PyDict_GetItemWithError(self->peers, key);
    if (hit) { Py_DECREF(key); return Py_NewRef(hit); }
    if (PyErr_Occurred()) { Py_DECREF(key); return NULL; }
    if (PyDict_GET_SIZE(self->peers) >= 1024) PyDict_Clear(self->peers);
    if (PyDict_SetItem(self->peers, key, key) < 0) { Py_DECREF(key); return NULL; }
    return key;
}

/* recv() -> [parsed, ...]: what one recvmmsg(MSG_DONTWAIT) returned, each parsed as
 * `parse` does. Payload views point into the ring: they are valid until the next recv. */
static PyObject *rxring_recv(RxRing *self, PyObject *Py_UNUSED(ignored)) {
    for (int i = 0; i < self->slots; i++) {
        self->iov[i] = (struct iovec){self->buf + (size_t)i * self->slot_size,
                                      (size_t)self->slot_size};
        struct msghdr *m = &self->msgs[i].msg_hdr;
        m->msg_name = &self->from[i];
        m->msg_namelen = sizeof(struct sockaddr_in6);
        m->msg_iov = &self->iov[i];
        m->msg_iovlen = 1;
        m->msg_control = self->ctl + (size_t)i * self->ctl_size;
        m->msg_controllen = self->ctl_size;
        m->msg_flags = 0;
    }
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = recvmmsg(self->fd, self->msgs, self->slots, MSG_DONTWAIT, NULL);
    Py_END_ALLOW_THREADS
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return PyList_New(0);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->batches++;
    self->datagrams += r;
    PyObject *out = PyList_New(r);
    if (!out) return NULL;
    for (int i = 0; i < r; i++) {
        struct msghdr *m = &self->msgs[i].msg_hdr;
        uint32_t flow = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
            if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_FLOWINFO_OPT
                && c->cmsg_len >= CMSG_LEN(4)) {
                flow = get32(CMSG_DATA(c)) & FLOW_MASK;
            }
        }
        Py_ssize_t n = self->msgs[i].msg_len;
        if (n > self->slot_size) n = self->slot_size;  /* cut: its ICRC fails */
        Py_ssize_t at = (Py_ssize_t)i * self->slot_size;
        const unsigned char *src = (const unsigned char *)&self->from[i].sin6_addr;
        PyObject *src_obj = peer_bytes(self, src);
        PyObject *item = src_obj ? parse_one(self->buf_view, at, self->buf + at, n, src,
                                             self->local, ntohs(self->from[i].sin6_port),
                                             flow, src_obj)
                                 : NULL;
        Py_XDECREF(src_obj);
        if (!item) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, item);
    }
    return out;
}

static PyObject *rxring_counters(RxRing *self, void *Py_UNUSED(closure)) {
    return Py_BuildValue("(KK)", self->datagrams, self->batches);
}

static PyMethodDef rxring_methods[] = {
    {"recv", (PyCFunction)rxring_recv, METH_NOARGS,
     "recv() -> [parsed, ...]: one recvmmsg's datagrams, each as parse() gives it"},
    {NULL}
};

static PyGetSetDef rxring_getset[] = {
    {"counters", (getter)rxring_counters, NULL, "(datagrams, recvmmsg calls that got any)",
     NULL},
    {NULL}
};

static PyTypeObject RxRingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "twin.mrc._fastpath.RxRing",
    .tp_basicsize = sizeof(RxRing),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RxRing(fd, local, slots=64, slot_size=4352): recvmmsg into a ring, parsed",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)rxring_init,
    .tp_dealloc = (destructor)rxring_dealloc,
    .tp_methods = rxring_methods,
    .tp_getset = rxring_getset,
};

/* -- the module ------------------------------------------------------------------------- */

static PyMethodDef fp_methods[] = {
    {"parse", fp_parse, METH_VARARGS,
     "parse(udp_payload, src, dst, sport, flow=0) -> tuple: (0, reason) for a bad packet; "
     "(1, dest_qp, psn, va, rkey, payload, ev, tries, ack_req, imm, src) for data; "
     "(2, view, opcode, src, sport, flow, length) for any other opcode"},
    {"build", (PyCFunction)(void (*)(void))fp_build, METH_FASTCALL,
     "build(head, seed, word, va, rkey, payload, imm) -> bytes: one data packet"},
    {NULL}
};

static struct PyModuleDef fp_module = {
    PyModuleDef_HEAD_INIT, "_fastpath",
    "The MRC endpoint's compiled data path (sendmmsg, recvmmsg, the ICRC).", -1, fp_methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    if (PyType_Ready(&TxQueueType) < 0 || PyType_Ready(&RxRingType) < 0) return NULL;
    reason_short = PyUnicode_InternFromString("short");
    reason_icrc = PyUnicode_InternFromString("icrc");
    reason_length = PyUnicode_InternFromString("length");
    if (!reason_short || !reason_icrc || !reason_length) return NULL;
    PyObject *m = PyModule_Create(&fp_module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "TxQueue", (PyObject *)&TxQueueType) < 0
        || PyModule_AddObjectRef(m, "RxRing", (PyObject *)&RxRingType) < 0
        || PyModule_AddIntConstant(m, "HEAD_BYTES", HEAD_BYTES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
