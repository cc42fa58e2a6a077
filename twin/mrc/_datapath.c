/* The MRC endpoint's compiled data path: framing, the ICRC and the syscalls, per batch.
 *
 * The transport's decisions are the compiled Sender's and Receiver's (fp_sender.h,
 * fp_receiver.h: this unit sits above them and calls their C entries for a QP bound to
 * it), or the Python reference's (twin.mrc.transport) read back from its objects; this
 * unit does what costs per byte or per syscall, exactly as twin.mrc.wire does, byte for
 * byte:
 *
 *   TxBatch   a window's data packets, built from the transport's TxPackets and their
 *             DataTemplates in one call, sent with one sendmmsg. A packet is four iovecs: the DataTemplate's 96 fixed bytes (IPv6/IPv6/UDP
 *             and BTH bytes 0..7), its 20- or 24-byte variable part (BTH 8..11, RETH,
 *             ImmDt), the payload straight from the registered source buffer, the ICRC.
 *             Nothing is copied in userspace: the kernel copies the payload once.
 *             post_sender takes the compiled Sender's decisions as C records instead
 *             (fp_sender_poll): no TxPacket, no payload view, no attribute read per
 *             packet, the payloads pointing into the one source buffer it holds.
 *   RxRing    recvmmsg of up to `slots` datagrams into a ring (the peer address, the UDP
 *             source port and the IPV6_FLOWINFO cmsg with each: traffic class and flow
 *             label), the ICRC checked first, then a data packet's headers parsed to a
 *             tuple whose payload is a memoryview into its slot: the receiver places it
 *             straight from there into the registered buffer. A data opcode whose
 *             traffic class carries DSCP 7 was trimmed by a switch: no ICRC is left to
 *             check, and its BTH and RETH come back as a tuple of their own. Other
 *             opcodes go back whole to wire's decoder. A receiving QP bound to the
 *             ring (bind) has its data packets checked and handed to its compiled
 *             Receiver here, no tuple made; with acks, its SACKs and NAKs are
 *             coalesced, framed (as wire's) and sent with sendmmsg here too, and recv
 *             returns only what Python acts on for it (events 4..11: rxring_recv). An
 *             ACK to a sending QP bound to the ring (bind_sender) is decoded here and
 *             handed to its compiled Sender's on_sack.
 *   parse     the same parse on one UDP payload (what RxRing does per datagram); the
 *             differential tests hold it to wire.decode.
 *   build     one data packet as bytes, as TxBatch would send it (DataTemplate.build).
 *
 * The CRC is CRC-32 (RoCEv2's ICRC, IBA Annex A17), sent least significant byte first
 * as Linux rxe stores it. It is computed by ISA-L's crc32_gzip_refl where libisal.so.2
 * loads (Debian's libisal2: PCLMULQDQ folding, ~0.2 us for a 4 KiB packet), else by
 * zlib's crc32 (~1.7 us). Both are the same function of the bytes: ISA-L is loaded at
 * import with dlopen, checked against zlib on a fixed buffer, and dropped if it
 * disagrees. MRC_TWIN_ICRC=zlib keeps zlib (to measure the two side by side). `ICRC`
 * says which runs.
 */

#include "fp_datapath.h"
#include "fp_receiver.h"
#include "fp_sender.h"

#include "fp_util.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <zlib.h>

/* -- CRC-32 -------------------------------------------------------------------------- */

typedef uint32_t (*isal_crc_fn)(uint32_t init, const unsigned char *buf, uint64_t len);
static isal_crc_fn isal_crc;  /* NULL: zlib's */
static const char *icrc_impl = "zlib";

static inline uint32_t icrc32(uint32_t crc, const unsigned char *buf, size_t len) {
    return isal_crc ? isal_crc(crc, buf, len) : (uint32_t)crc32(crc, buf, (uInt)len);
}

static void choose_crc(void) {
    const char *want = getenv("MRC_TWIN_ICRC");
    if (want && strcmp(want, "zlib") == 0) {
        icrc_impl = "zlib (MRC_TWIN_ICRC=zlib)";
        return;
    }
    void *lib = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    isal_crc_fn fn = (isal_crc_fn)dlsym(lib, "crc32_gzip_refl");
    unsigned char probe[4133];
    for (size_t i = 0; i < sizeof probe; i++) probe[i] = (unsigned char)(i * 131 + 7);
    for (size_t len = 0; fn && len <= sizeof probe; len += 61)
        if (fn(0x5EED, probe, len) != (uint32_t)crc32(0x5EED, probe, (uInt)len)) fn = NULL;
    if (!fn) {
        dlclose(lib);
        icrc_impl = "zlib (libisal.so.2 disagreed with zlib)";
        return;
    }
    isal_crc = fn;
    icrc_impl = "isa-l";
}

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
#define FLOWINFO_MASK 0x0FFFFFFFu /* the kernel's ip6_flowinfo: traffic class, flow label */
#define TC_SHIFT 20
#define TRIM_DSCP 7         /* wire.TRIM_DSCP: a switch cut this data packet to its headers */

enum { KIND_BAD = 0, KIND_DATA = 1, KIND_OTHER = 2, KIND_TRIMMED = 3 };

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
    return icrc32(0, h, sizeof h);
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

/* -- TxBatch ---------------------------------------------------------------------------- */

/* A window's data packets, built here and sent with one sendmmsg. A packet is four
 * iovecs: the DataTemplate's 96 fixed bytes, its 20- or 24-byte variable part, the
 * payload straight from the registered source buffer, and the ICRC; nothing is copied
 * in userspace. The batch holds its references (the template bytes, the source
 * buffer's export, the caller's tag) until it is sent. A packet the kernel refuses (no
 * route: a NIC port down) comes back as its tag. */

#define PLANES 16           /* an EV's plane is its low 4 bits (twin.fabric.paths) */

typedef struct {
    unsigned char var[24];
    unsigned char icrc[4];
    int plane;           /* the EV's plane (the flow label's low bits): bytes per plane */
    struct sockaddr_in6 to;
    struct iovec iov[4];
    PyObject *head;      /* held until the batch is sent */
    PyObject *tag;       /* the caller's: returned if the kernel refuses the packet */
    Py_buffer payload;   /* held until the batch is sent */
} TxSlot;

typedef struct {
    PyObject_HEAD
    int ready;           /* FP_READY once __init__ ran to its end (fp_util.h) */
    int fd, cap, n;
    TxSlot *slots;
    struct mmsghdr *msgs;
    unsigned long long packets, errors, batches;
    unsigned long long plane_bytes[PLANES];  /* payload sent, per plane (refused: not) */
    FpTx *polled;        /* post_sender's: what the Sender decided, before it is built */
    Py_ssize_t polled_cap;
    int posting;         /* post_sender runs (miss may call back into the batch) */
    struct TplHit *tpl_cache;  /* post_sender's templates, by EV (TPL_CACHE of them) */
} TxBatch;

static void txbatch_release(TxBatch *self) {
    for (int i = 0; i < self->n; i++) {
        Py_CLEAR(self->slots[i].head);
        Py_CLEAR(self->slots[i].tag);
        PyBuffer_Release(&self->slots[i].payload);
    }
    self->n = 0;
}

static void tpl_cache_free(TxBatch *self);

static void txbatch_dealloc(TxBatch *self) {
    if (self->slots) txbatch_release(self);
    tpl_cache_free(self);
    PyMem_Free(self->polled);
    PyMem_Free(self->slots);
    PyMem_Free(self->msgs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int txbatch_init(TxBatch *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"fd", "capacity", NULL};
    int fd, cap = 64;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|i", names, &fd, &cap)) return -1;
    if (cap < 1 || cap > 1024) {
        PyErr_SetString(PyExc_ValueError, "capacity must be in 1..1024");
        return -1;
    }
    self->slots = PyMem_Calloc(cap, sizeof(TxSlot));
    self->msgs = PyMem_Calloc(cap, sizeof(struct mmsghdr));
    if (!self->slots || !self->msgs) { PyErr_NoMemory(); return -1; }
    self->fd = fd;
    self->cap = cap;
    return 0;
}

/* __init__ once; one that fails leaves the batch blank (nothing held, nothing allocated) */
static int txbatch_init_once(TxBatch *self, PyObject *args, PyObject *kw) {
    if (self->ready != FP_BLANK) {
        PyErr_SetString(PyExc_RuntimeError, "TxBatch is initialised once");
        return -1;
    }
    self->ready = FP_INITIALISING;
    if (txbatch_init(self, args, kw) < 0) {
        PyMem_Free(self->slots);
        PyMem_Free(self->msgs);
        self->slots = NULL;
        self->msgs = NULL;
        self->ready = FP_BLANK;
        return -1;
    }
    self->ready = FP_READY;
    return 0;
}

/* Fill the next slot: its payload buffer is already in s->payload; the ICRC is done. */
static void fill_slot(TxBatch *self, PyObject *head_obj, const DataArgs *d, PyObject *tag) {
    TxSlot *s = &self->slots[self->n];
    uint32_t len = (uint32_t)s->payload.len;
    int vlen = data_var(s->var, d->word, d->va, d->rkey, len, d->has_imm, d->imm);
    uint32_t crc = icrc32(d->seed, s->var, vlen);
    put_icrc(s->icrc, icrc32(crc, s->payload.buf, len));
    s->plane = d->head[3] & (PLANES - 1);  /* the outer flow label's low bits: the EV's */
    s->head = Py_NewRef(head_obj);
    s->tag = Py_NewRef(tag);
    memset(&s->to, 0, sizeof s->to);
    s->to.sin6_family = AF_INET6;
    memcpy(&s->to.sin6_addr, d->head + OUTER_DST, 16);
    s->iov[0] = (struct iovec){(void *)d->head, HEAD_BYTES};
    s->iov[1] = (struct iovec){s->var, (size_t)vlen};
    s->iov[2] = (struct iovec){s->payload.buf, len};
    s->iov[3] = (struct iovec){s->icrc, 4};
    struct msghdr *m = &self->msgs[self->n].msg_hdr;
    memset(m, 0, sizeof *m);
    m->msg_name = &s->to;
    m->msg_namelen = sizeof s->to;
    m->msg_iov = s->iov;
    m->msg_iovlen = 4;
    self->n++;
}

/* Send what is batched; append the tags of packets the kernel refused to `refused`. */
static int send_all(TxBatch *self, PyObject *refused) {
    if (!self->n) return 0;
    int i = 0, rc = 0;
    self->batches++;
    while (i < self->n) {
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = sendmmsg(self->fd, self->msgs + i, self->n - i, 0);
        Py_END_ALLOW_THREADS
        if (r < 0) {
            if (errno == EINTR) continue;
            self->errors++;  /* lost, and recovered by the transport */
            if (rc == 0 && PyList_Append(refused, self->slots[i].tag) < 0) rc = -1;
            i++;
            continue;
        }
        for (int k = i; k < i + r; k++)
            self->plane_bytes[self->slots[k].plane] += self->slots[k].payload.len;
        self->packets += r;
        i += r;
    }
    txbatch_release(self);
    return rc;
}

/* data(head, seed, word, va, rkey, payload, imm, tag): add one data packet to the
 * batch. Returns True when the batch is full (the caller flushes). */
static PyObject *txbatch_data(TxBatch *self, PyObject *const *args, Py_ssize_t nargs) {
    FP_REQUIRE_READY(self, NULL);
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "want (head, seed, word, va, rkey, payload, imm, tag)");
        return NULL;
    }
    if (self->n >= self->cap) {
        PyErr_SetString(PyExc_OverflowError, "batch full: flush it first");
        return NULL;
    }
    DataArgs d;
    Py_buffer payload;
    if (data_args(args, 7, &d, &payload) < 0) return NULL;
    /* taking the payload's buffer can run Python (a class's __buffer__, from Python
     * 3.12), which may have filled the batch meanwhile: the slot is taken only now */
    if (self->n >= self->cap) {
        PyBuffer_Release(&payload);
        PyErr_SetString(PyExc_OverflowError, "batch full: flush it first");
        return NULL;
    }
    self->slots[self->n].payload = payload;
    fill_slot(self, args[0], &d, args[7]);
    return PyBool_FromLong(self->n >= self->cap);
}

/* flush() -> [tag, ...]: send the batch; the tags of packets the kernel refused. */
static PyObject *txbatch_flush(TxBatch *self, PyObject *Py_UNUSED(ignored)) {
    FP_REQUIRE_READY(self, NULL);
    PyObject *refused = PyList_New(0);
    if (!refused) return NULL;
    if (send_all(self, refused) < 0) { Py_DECREF(refused); return NULL; }
    return refused;
}

static PyObject *s_ev, *s_psn, *s_va, *s_payload, *s_tries, *s_ack_req, *s_imm, *s_common,
    *s_rkey;

static int attr_u64(PyObject *o, PyObject *name, uint64_t *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    int rc = as_u64(v, out, PyUnicode_AsUTF8(name));
    Py_DECREF(v);
    return rc;
}

/* One TxPacket (twin.mrc.transport) into the batch, which has room for it. */
static int add_tx(TxBatch *self, PyObject *tx, PyObject *templates, PyObject *miss,
                  PyObject *tag) {
    int rc = -1;
    PyObject *ev = NULL, *tpl = NULL, *payload = NULL, *imm = NULL, *common = NULL,
             *pair = NULL, *flag = NULL, *head_obj, *seed_obj;
    DataArgs d = {0};
    uint64_t psn, tries, va, rkey;
    if (!(ev = PyObject_GetAttr(tx, s_ev))) goto out;
    tpl = PyDict_GetItemWithError(templates, ev);
    if (tpl) Py_INCREF(tpl);
    else if (PyErr_Occurred() || !(tpl = PyObject_CallOneArg(miss, ev))) goto out;
    if (!(payload = PyObject_GetAttr(tx, s_payload)) || !(imm = PyObject_GetAttr(tx, s_imm))
        || !(flag = PyObject_GetAttr(tx, s_ack_req)))
        goto out;
    if (attr_u64(tx, s_psn, &psn) < 0 || attr_u64(tx, s_tries, &tries) < 0
        || attr_u64(tx, s_va, &va) < 0 || attr_u64(tpl, s_rkey, &rkey) < 0)
        goto out;
    int ack = PyObject_IsTrue(flag);
    Py_ssize_t n = PyObject_Length(payload);
    if (ack < 0 || n < 0) goto out;
    /* (head, seed): the template's last no-ImmDt pair where the size matches (nearly
     * every packet), else its head() */
    if (imm == Py_None && (common = PyObject_GetAttr(tpl, s_common)) && PyTuple_Check(common)
        && PyTuple_GET_SIZE(common) == 3
        && PyLong_AsSsize_t(PyTuple_GET_ITEM(common, 0)) == n) {
        head_obj = PyTuple_GET_ITEM(common, 1);
        seed_obj = PyTuple_GET_ITEM(common, 2);
    } else {
        if (PyErr_Occurred()) goto out;
        pair = PyObject_CallMethod(tpl, "head", "nO", n, imm == Py_None ? Py_False : Py_True);
        if (!pair) goto out;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "DataTemplate.head gives (head, seed)");
            goto out;
        }
        head_obj = PyTuple_GET_ITEM(pair, 0);
        seed_obj = PyTuple_GET_ITEM(pair, 1);
    }
    if (!PyBytes_Check(head_obj) || PyBytes_GET_SIZE(head_obj) != HEAD_BYTES) {
        PyErr_Format(PyExc_ValueError, "head must be %d bytes", HEAD_BYTES);
        goto out;
    }
    if (rkey > 0xFFFFFFFFu) { PyErr_SetString(PyExc_ValueError, "rkey is 32 bits"); goto out; }
    d.head = (const unsigned char *)PyBytes_AS_STRING(head_obj);
    if (as_u32(seed_obj, &d.seed, "seed") < 0) goto out;
    d.rkey = (uint32_t)rkey;
    d.va = va;
    d.word = (ack ? ACK_REQ : 0) | (uint32_t)(tries & TRY_MASK) << 24
             | (uint32_t)(psn & PSN_MASK);
    d.has_imm = imm != Py_None;
    if (d.has_imm && as_u32(imm, &d.imm, "imm") < 0) goto out;
    Py_buffer buf;
    if (PyObject_GetBuffer(payload, &buf, PyBUF_SIMPLE) < 0) goto out;
    if (buf.len > MTU) {
        PyErr_Format(PyExc_ValueError, "payload is at most %d bytes", MTU);
        PyBuffer_Release(&buf);
        goto out;
    }
    /* the miss callback and the attributes read above ran Python, which may have added
     * to this very batch (post or data from inside miss): the slot is taken only now */
    if (self->n >= self->cap) {
        PyErr_SetString(PyExc_RuntimeError, "TxBatch.post: the batch was filled while a "
                        "packet was being built (by a call from inside miss?)");
        PyBuffer_Release(&buf);
        goto out;
    }
    self->slots[self->n].payload = buf;
    fill_slot(self, head_obj, &d, tag);
    rc = 0;
out:
    Py_XDECREF(ev); Py_XDECREF(tpl); Py_XDECREF(payload); Py_XDECREF(imm);
    Py_XDECREF(common); Py_XDECREF(pair); Py_XDECREF(flag);
    return rc;
}

/* post(txs, templates, miss, tag) -> [tag, ...]: a window's TxPackets built and sent in
 * one call (one sendmmsg per `capacity`): each packet's template is templates[tx.ev],
 * or miss(tx.ev) where there is none. Returns the refused tags, as flush does. */
static PyObject *txbatch_post(TxBatch *self, PyObject *const *args, Py_ssize_t nargs) {
    FP_REQUIRE_READY(self, NULL);
    if (nargs != 4 || !PyList_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "want (txs: list, templates: dict, miss, tag)");
        return NULL;
    }
    PyObject *txs = args[0], *refused = PyList_New(0);
    if (!refused) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(txs); i++) {
        /* held: building it calls Python (getattr, miss), which may empty the list */
        PyObject *tx = Py_NewRef(PyList_GET_ITEM(txs, i));
        int rc = (self->n >= self->cap && send_all(self, refused) < 0)
            || add_tx(self, tx, args[1], args[2], args[3]) < 0 ? -1 : 0;
        Py_DECREF(tx);
        if (rc < 0) {
            PyObject *type, *value, *trace;
            PyErr_Fetch(&type, &value, &trace);
            send_all(self, refused);  /* what was built before the bad one still goes */
            PyErr_Restore(type, value, trace);
            Py_DECREF(refused);
            return NULL;
        }
    }
    if (send_all(self, refused) < 0) { Py_DECREF(refused); return NULL; }
    return refused;
}

/* -- post_sender: the compiled Sender's packets, no object per packet -------------------
 *
 * The Sender writes its decisions as FpTx records (fp_sender.h); each is built here from
 * its EV's template as post builds a TxPacket, its payload pointing into the source
 * buffer, which the batch holds (one Py_buffer) until the packets are sent. A template's
 * (head, seed) for a payload size and its rkey are what its DataTemplate gives, always
 * the same for the same object: they are kept per EV (TPL_CACHE entries) with the
 * template they came from, and used while templates[ev] is still that very object. */

#define TPL_CACHE 256

typedef struct TplHit {
    int64_t ev;
    Py_ssize_t n;        /* the payload size the head is for */
    int imm;             /* ... and whether with an ImmDt */
    uint32_t seed, rkey;
    PyObject *key, *tpl, *head;  /* held: the EV as an int, its template, the 96 bytes */
} TplHit;

static void tpl_cache_free(TxBatch *self) {
    if (!self->tpl_cache) return;
    for (int i = 0; i < TPL_CACHE; i++) {
        Py_CLEAR(self->tpl_cache[i].key);
        Py_CLEAR(self->tpl_cache[i].tpl);
        Py_CLEAR(self->tpl_cache[i].head);
    }
    PyMem_Free(self->tpl_cache);
    self->tpl_cache = NULL;
}

/* The cache entry for f's EV, filled: from the cache while templates[ev] is the template
 * it came from, else read from the template (templates[ev], or miss(ev)). NULL with an
 * exception set. */
static TplHit *tpl_for(TxBatch *self, const FpTx *f, PyObject *templates, PyObject *miss) {
    uint64_t h = (uint64_t)f->ev * 0x9E3779B97F4A7C15ull;
    TplHit *e = &self->tpl_cache[h >> 56];
    if (e->tpl && e->ev == f->ev && e->n == f->length && e->imm == f->has_imm) {
        PyObject *now = PyDict_GetItemWithError(templates, e->key);
        if (now == e->tpl) return e;
        if (!now && PyErr_Occurred()) return NULL;
    }
    PyObject *key = PyLong_FromLongLong(f->ev), *tpl = NULL, *common = NULL, *pair = NULL,
             *head_obj = NULL, *seed_obj = NULL, *rkey_obj = NULL;
    TplHit *out = NULL;
    uint32_t seed, rkey;
    if (!key) return NULL;
    tpl = PyDict_GetItemWithError(templates, key);
    if (tpl) Py_INCREF(tpl);
    else if (PyErr_Occurred() || !(tpl = PyObject_CallOneArg(miss, key))) goto done;
    if (!(rkey_obj = PyObject_GetAttr(tpl, s_rkey)) || as_u32(rkey_obj, &rkey, "rkey") < 0)
        goto done;
    /* (head, seed): the template's last no-ImmDt pair where the size matches, else its
     * head(), as post reads them */
    if (!f->has_imm && (common = PyObject_GetAttr(tpl, s_common)) && PyTuple_Check(common)
        && PyTuple_GET_SIZE(common) == 3
        && PyLong_AsSsize_t(PyTuple_GET_ITEM(common, 0)) == f->length) {
        head_obj = PyTuple_GET_ITEM(common, 1);
        seed_obj = PyTuple_GET_ITEM(common, 2);
    } else {
        if (PyErr_Occurred()) goto done;
        pair = PyObject_CallMethod(tpl, "head", "nO", f->length,
                                   f->has_imm ? Py_True : Py_False);
        if (!pair) goto done;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "DataTemplate.head gives (head, seed)");
            goto done;
        }
        head_obj = PyTuple_GET_ITEM(pair, 0);
        seed_obj = PyTuple_GET_ITEM(pair, 1);
    }
    if (!PyBytes_Check(head_obj) || PyBytes_GET_SIZE(head_obj) != HEAD_BYTES) {
        PyErr_Format(PyExc_ValueError, "head must be %d bytes", HEAD_BYTES);
        goto done;
    }
    if (as_u32(seed_obj, &seed, "seed") < 0) goto done;
    /* miss ran Python, which may have used the cache: the entry is (re)taken only now */
    e = &self->tpl_cache[h >> 56];
    Py_XSETREF(e->key, Py_NewRef(key));
    Py_XSETREF(e->tpl, Py_NewRef(tpl));
    Py_XSETREF(e->head, Py_NewRef(head_obj));
    e->ev = f->ev;
    e->n = f->length;
    e->imm = f->has_imm;
    e->seed = seed;
    e->rkey = rkey;
    out = e;
done:
    Py_DECREF(key); Py_XDECREF(tpl); Py_XDECREF(common); Py_XDECREF(pair);
    Py_XDECREF(rkey_obj);
    return out;
}

/* One FpTx into the batch (sending what is batched first if it is full). */
static int add_fp(TxBatch *self, const FpTx *f, const Py_buffer *src, PyObject *templates,
                  PyObject *miss, PyObject *tag, PyObject *refused) {
    if (f->length > MTU) {
        PyErr_Format(PyExc_ValueError, "payload is at most %d bytes", MTU);
        return -1;
    }
    TplHit *e = tpl_for(self, f, templates, miss);
    if (!e) return -1;
    /* held across send_all: the entry may be replaced by then only through Python,
     * which send_all does not run; the slot holds its own reference */
    if (self->n >= self->cap && send_all(self, refused) < 0) return -1;
    DataArgs d = {
        .head = (const unsigned char *)PyBytes_AS_STRING(e->head), .seed = e->seed,
        .word = (f->ack_req ? ACK_REQ : 0) | (uint32_t)(f->tries & TRY_MASK) << 24
                | (uint32_t)(f->psn & PSN_MASK),
        .rkey = e->rkey, .imm = f->imm, .va = f->va, .has_imm = f->has_imm};
    /* the payload is the source's bytes, the batch's Py_buffer: none of its own */
    self->slots[self->n].payload = (Py_buffer){.buf = (char *)src->buf + f->offset,
                                               .len = f->length};
    fill_slot(self, e->head, &d, tag);
    return 0;
}

/* post_sender(sender, now, source, budget, templates, miss, tag) -> (polled, [tag, ...]):
 * the compiled Sender's poll(now, source, budget), built and sent as post builds and
 * sends its TxPackets, without them: how many packets it decided, and the refused tags
 * (as post returns them). */
static PyObject *txbatch_post_sender(TxBatch *self, PyObject *const *args, Py_ssize_t nargs) {
    FP_REQUIRE_READY(self, NULL);
    if (nargs != 7 || !PyDict_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "want (sender, now, source, budget, "
                        "templates: dict, miss, tag)");
        return NULL;
    }
    if (self->posting) {
        PyErr_SetString(PyExc_RuntimeError, "TxBatch.post_sender: called again while it "
                        "runs (from inside miss?)");
        return NULL;
    }
    long long now = PyLong_AsLongLong(args[1]);
    if (now == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t budget = PyLong_AsSsize_t(args[3]);
    if (budget == -1 && PyErr_Occurred()) return NULL;
    if (budget < 0 || budget > 65536) {
        PyErr_SetString(PyExc_ValueError, "budget must be in 0..65536");
        return NULL;
    }
    if (!self->tpl_cache && !(self->tpl_cache = PyMem_Calloc(TPL_CACHE, sizeof(TplHit))))
        return PyErr_NoMemory();
    if (budget > self->polled_cap) {
        FpTx *grown = PyMem_Realloc(self->polled, budget * sizeof(FpTx));
        if (!grown) return PyErr_NoMemory();
        self->polled = grown;
        self->polled_cap = budget;
    }
    Py_buffer src;
    if (PyObject_GetBuffer(args[2], &src, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *refused = PyList_New(0);
    Py_ssize_t n = refused ? fp_sender_poll(args[0], now, src.len, budget, self->polled) : -1;
    if (n < 0) {
        Py_XDECREF(refused);
        PyBuffer_Release(&src);
        return NULL;
    }
    self->posting = 1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++)
        rc = add_fp(self, &self->polled[i], &src, args[4], args[5], args[6], refused);
    if (rc < 0) {
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace);
        send_all(self, refused);  /* what was built before the bad one still goes */
        PyErr_Restore(type, value, trace);
    } else {
        rc = send_all(self, refused);
    }
    /* every slot pointing into the source went (send_all releases them all) */
    self->posting = 0;
    PyBuffer_Release(&src);
    if (rc < 0) {
        Py_DECREF(refused);
        return NULL;
    }
    return Py_BuildValue("(nN)", n, refused);
}

static PyObject *txbatch_plane_bytes(TxBatch *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int p = 0; p < PLANES; p++) {
        if (!self->plane_bytes[p]) continue;
        PyObject *k = PyLong_FromLong(p), *v = PyLong_FromUnsignedLongLong(self->plane_bytes[p]);
        if (!k || !v || PyDict_SetItem(out, k, v) < 0) {
            Py_XDECREF(k); Py_XDECREF(v); Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(k); Py_DECREF(v);
    }
    return out;
}

static PyObject *txbatch_counters(TxBatch *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    return Py_BuildValue("(KKK)", self->packets, self->errors, self->batches);
}

static PyObject *txbatch_queued(TxBatch *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    return PyLong_FromLong(self->n);
}

static PyMethodDef txbatch_methods[] = {
    {"post", (PyCFunction)(void (*)(void))txbatch_post, METH_FASTCALL,
     "post(txs, templates, miss, tag) -> [tag, ...]: build and send a window of TxPackets"},
    {"post_sender", (PyCFunction)(void (*)(void))txbatch_post_sender, METH_FASTCALL,
     "post_sender(sender, now, source, budget, templates, miss, tag) -> (polled, [tag, ...]):"
     " the compiled Sender's poll, built and sent as post does, no TxPacket made"},
    {"data", (PyCFunction)(void (*)(void))txbatch_data, METH_FASTCALL,
     "data(head, seed, word, va, rkey, payload, imm, tag) -> full: add one data packet"},
    {"flush", (PyCFunction)txbatch_flush, METH_NOARGS,
     "flush() -> [tag, ...]: sendmmsg the batch; the tags of packets the kernel refused"},
    {NULL}
};

static PyGetSetDef txbatch_getset[] = {
    {"queued", (getter)txbatch_queued, NULL, "packets in the batch, not yet sent", NULL},
    {"counters", (getter)txbatch_counters, NULL,
     "(packets sent, packets refused, sendmmsg batches)", NULL},
    {"plane_bytes", (getter)txbatch_plane_bytes, NULL,
     "{plane: payload bytes sent}: what the kernel took, per the EV's plane", NULL},
    {NULL}
};

static PyTypeObject TxBatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "twin.mrc._fastpath.TxBatch",
    .tp_basicsize = sizeof(TxBatch),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TxBatch(fd, capacity=64): a window's data packets, sent with one sendmmsg",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)txbatch_init_once,
    .tp_dealloc = (destructor)txbatch_dealloc,
    .tp_methods = txbatch_methods,
    .tp_getset = txbatch_getset,
};

/* -- parsing ---------------------------------------------------------------------------- */

/* Whether the ICRC of n >= 16 bytes of RoCE (BTH on) from src:sport to dst holds. */
static int icrc_ok(const unsigned char *data, Py_ssize_t n, const unsigned char *src,
                   const unsigned char *dst, unsigned sport) {
    uint32_t crc = icrc32(seed6(src, dst, sport, (unsigned)(n + 8)), data, 4);
    static const unsigned char ff = 0xFF;
    crc = icrc32(crc, &ff, 1);
    crc = icrc32(crc, data + 5, (size_t)(n - 9));
    uint32_t got = (uint32_t)data[n - 4] | (uint32_t)data[n - 3] << 8
                   | (uint32_t)data[n - 2] << 16 | (uint32_t)data[n - 1] << 24;
    return crc == got;
}

/* Parse one UDP payload as wire.decode does: `data` is n bytes at offset `at` of the
 * memoryview `base`, which views are sliced from; src/dst are packed 16-byte addresses. */
static PyObject *parse_one(PyObject *base, Py_ssize_t at, const unsigned char *data,
                           Py_ssize_t n, const unsigned char *src, const unsigned char *dst,
                           unsigned sport, uint32_t flow, PyObject *src_obj) {
    unsigned tc = (flow >> TC_SHIFT) & 0xFF;
    if ((tc >> 2) == TRIM_DSCP && n > 0
        && (data[0] == OP_WRITE_ONLY || data[0] == OP_WRITE_ONLY_IMM)) {
        /* trimmed: BTH and RETH only, nothing authenticated (wire.decode_trimmed) */
        if (n < DATA_HEAD) return Py_BuildValue("(iO)", KIND_BAD, reason_short);
        uint32_t word = get32(data + 8);
        uint32_t ev = (flow & FLOW_MASK) | ((uint32_t)(sport & 0x3FFF) << SPORT_SHIFT);
        /* (3, dest_qp, psn, va, rkey, dma_len, ev, tries, opcode, tc, src) */
        return Py_BuildValue("(iIIKIIIiiIO)", KIND_TRIMMED, get32(data + 4) & PSN_MASK,
                             word & PSN_MASK, (unsigned long long)get64(data + 12),
                             get32(data + 20), get32(data + 24), ev,
                             (int)((word >> 24) & TRY_MASK), (int)data[0], tc, src_obj);
    }
    if (n < 16) return Py_BuildValue("(iO)", KIND_BAD, reason_short);
    if (!icrc_ok(data, n, src, dst, sport)) return Py_BuildValue("(iO)", KIND_BAD, reason_icrc);
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
    /* (1, dest_qp, psn, va, rkey, payload, ev, tries, ack_req, imm, src, tc) */
    return Py_BuildValue("(iIIKINIiNNOI)", KIND_DATA, qp, word & PSN_MASK,
                         (unsigned long long)va, rkey, payload, ev,
                         (int)((word >> 24) & TRY_MASK), PyBool_FromLong(word & ACK_REQ), imm,
                         src_obj, tc);
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
    /* The bytes are read through a simple buffer: contiguous, `len` bytes from `buf`. A
     * strided view (memoryview(b)[::2], [::-1]) has no such buffer and is refused
     * (BufferError) rather than read as if it were one, past its end. Held while the
     * payload views are sliced, so the bytes cannot move or go meanwhile. */
    Py_buffer b;
    if (PyObject_GetBuffer(data, &b, PyBUF_SIMPLE) < 0) return NULL;
    /* the views handed back are slices of a byte view of `data` (format B, so a slice
     * is in bytes whatever data's own format is) */
    PyObject *view = PyMemoryView_FromObject(data), *bytes_view = NULL, *out = NULL;
    if (view) bytes_view = PyObject_CallMethod(view, "cast", "s", "B");
    if (bytes_view)
        out = parse_one(bytes_view, 0, b.buf, b.len,
                        (const unsigned char *)PyBytes_AS_STRING(src),
                        (const unsigned char *)PyBytes_AS_STRING(dst), sport & 0xFFFF,
                        (uint32_t)flow, src);
    Py_XDECREF(bytes_view);
    Py_XDECREF(view);
    PyBuffer_Release(&b);
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
    uint32_t crc = icrc32(d.seed, p + HEAD_BYTES, (size_t)(vlen + len));
    put_icrc(p + HEAD_BYTES + vlen + len, crc);
    PyBuffer_Release(&payload);
    if (_PyBytes_Resize(&out, HEAD_BYTES + vlen + len + 4) < 0) return NULL;
    return out;
}

/* -- RxRing ----------------------------------------------------------------------------- */

#define ACK_HEAD_MAX 88   /* IPv6/IPv6/UDP (srv6); udp-entropy's is 48 */
#define ACK_BODY 36       /* BTH 12 + AETH 4 + SACK 20: wire.encode_ack */
#define ACK_FRAME_MAX (ACK_HEAD_MAX + ACK_BODY + 4)
#define OP_ACKNOWLEDGE 0x11
#define PKEY_DEFAULT 0xFFFF
#define SYNDROME_ACK 0x00
#define NAK_PSN_SEQUENCE_ERROR 0x60
#define SACK_DUP 0x80
#define ACK_QUEUE 64      /* SACK frames per sendmmsg */

/* The way a SACK goes back on one path: what the loop's _reverse gives (its reverse EV
 * drawn from the QP's seeded rng), framed as wire.Framer frames an ACK. */
typedef struct {
    unsigned char head[ACK_HEAD_MAX];
    int head_len;
    uint32_t seed;          /* the ICRC's state after the pseudo-header */
    struct sockaddr_in6 to;
} AckWay;

/* One SACK frame, queued for the next sendmmsg. */
typedef struct {
    unsigned char frame[ACK_FRAME_MAX];
    size_t len;
    uint32_t qpn;
    struct sockaddr_in6 to;
    struct iovec iov;
} AckOut;

/* A receiving QP bound to the ring (RxRing.bind): its data packets are checked and handed
 * to its compiled Receiver here, and what Python must act on comes back as events. */
typedef struct {
    uint32_t qpn, rkey;
    PyObject *receiver;     /* a compiled Receiver that copies into its buffer */
    Py_ssize_t size;        /* that buffer's length */
    int touched;            /* got a packet in this recv: its drops at the batch's end */
    int has_last;           /* the last packet that passed the checks (RxRing.last): */
    int64_t last_psn, last_va, last_t;
    uint32_t last_ev;
    int last_tries, last_ack_req, last_ce;
    long long bad_rkey, out_of_bounds;  /* this recv's drops */
    uint32_t peer_qpn;      /* the sending QP: its ACKs' DestQP */
    /* SACKs framed here (RxRing.acks): per path key, the way back; the batch's plain
     * SACK held for coalescing, and the last before it that went another path */
    AckWay *ways;
    int nways, capways;
    uint16_t *way_of;       /* path key -> index in ways + 1 (0: not known yet) */
    FpSack pending, other;
    int has_pending, has_other;
} RxBinding;

enum {  /* the events recv returns for bound QPs (besides parse's kinds 0..3) */
    EV_SACK = 4, EV_NACK = 5, EV_CE = 6, EV_DROPS = 8, EV_FRAME = 10,
    /* (7 and 9, a QP's last packet and the bytes placed per plane, are not sent per
     * batch: RxRing.last and RxRing.plane_bytes are read when they are needed) */
    EV_SETTLED = 11,  /* a sending QP whose ACKs its bound Sender took: now idle or failed */
};

/* A sending QP whose ACKs go straight to its compiled Sender (bind_sender). */
typedef struct Bound {
    uint32_t qpn;
    PyObject *sender;
} Bound;

static void binding_forget_ways(RxBinding *b) {
    PyMem_Free(b->ways);
    PyMem_Free(b->way_of);
    b->ways = NULL;
    b->way_of = NULL;
    b->nways = b->capways = 0;
    b->has_pending = b->has_other = 0;
}

typedef struct {
    PyObject_HEAD
    int ready;           /* FP_READY once __init__ ran to its end (fp_util.h) */
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
    RxBinding *binds;    /* the QPs whose data packets go straight to their Receiver */
    int nbinds, capbinds;
    int busy;            /* in recv: bind, unbind and recv itself are refused */
    unsigned long long plane_bytes[PLANES];  /* placed for bound QPs, per the EV's plane */
    unsigned long long batch_plane[PLANES];  /* of those, this recv's */
    /* SACKs framed here (RxRing.acks); reverse NULL: handed to Python as EV_SACK */
    PyObject *reverse;   /* reverse(qpn, ev) -> (head, seed, dst) | None */
    int ack_fd;          /* -1: frames handed to Python (EV_FRAME) instead */
    uint32_t path_mask;  /* an EV's bits that name its path (plane, T1) */
    uint16_t port_bitmap;
    AckOut *ackq;
    struct mmsghdr *ackmsgs;
    int nackq;
    unsigned long long acks_sent, acks_refused;
    int received;        /* datagrams the last recv() read (its list may hold fewer) */
    int acks_taken;      /* of those, ACKs a bound Sender took */
    struct Bound *bound; /* sending QPs whose ACKs go straight to their compiled Sender */
    int nbound, bound_cap;
    uint32_t *settled;   /* QPs reported this recv() (room for `slots`) */
    uint32_t *deferred;  /* bound QPs with a packet in this recv()'s list (room for `slots`) */
    long long ack_now;   /* recv's `now` for the ACKs it hands on; -1: the clock's */
} RxRing;

static void unbind_all(RxRing *self);

static void rxring_unbind_all(RxRing *self) {
    for (int i = 0; i < self->nbinds; i++) {
        Py_CLEAR(self->binds[i].receiver);
        binding_forget_ways(&self->binds[i]);
    }
    self->nbinds = 0;
    Py_CLEAR(self->reverse);
}

/* What __init__ made, released: the ring is blank again. */
static void rxring_release(RxRing *self) {
    rxring_unbind_all(self);
    unbind_all(self);
    PyMem_Free(self->binds);
    PyMem_Free(self->settled);
    PyMem_Free(self->deferred);
    self->settled = self->deferred = NULL;
    PyMem_Free(self->ackq);
    PyMem_Free(self->ackmsgs);
    self->binds = NULL;
    self->ackq = NULL;
    self->ackmsgs = NULL;
    self->capbinds = 0;
    self->nackq = 0;
    Py_CLEAR(self->buf_view);
    Py_CLEAR(self->store);
    Py_CLEAR(self->peers);
    PyMem_Free(self->msgs);
    PyMem_Free(self->iov);
    PyMem_Free(self->from);
    PyMem_Free(self->ctl);
    self->msgs = NULL;
    self->iov = NULL;
    self->from = NULL;
    self->ctl = NULL;
    self->buf = NULL;
}

static void rxring_dealloc(RxRing *self) {
    PyObject_GC_UnTrack(self);
    rxring_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A bound Receiver may lead back to the ring (its port_state, a loop's method): GC. */
static int rxring_traverse(RxRing *self, visitproc visit, void *arg) {
    for (int i = 0; i < self->nbinds; i++) Py_VISIT(self->binds[i].receiver);
    for (int i = 0; i < self->nbound; i++) Py_VISIT(self->bound[i].sender);
    Py_VISIT(self->reverse);
    return 0;
}

static int rxring_clear(RxRing *self) {
    if (self->ready == FP_READY) self->ready = FP_CLEARED;
    rxring_unbind_all(self);
    unbind_all(self);
    return 0;
}

static int rxring_init(RxRing *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"fd", "local", "slots", "slot_size", NULL};
    int fd, slots = 64;
    Py_ssize_t slot_size = MTU + 256;
    PyObject *local;
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
    self->settled = PyMem_Calloc(slots, sizeof(uint32_t));
    self->deferred = PyMem_Calloc(slots, sizeof(uint32_t));
    self->peers = PyDict_New();
    self->ackq = PyMem_Calloc(ACK_QUEUE, sizeof(AckOut));
    self->ackmsgs = PyMem_Calloc(ACK_QUEUE, sizeof(struct mmsghdr));
    self->ack_fd = -1;
    self->port_bitmap = 0xFFFF;
    if (!self->buf || !self->msgs || !self->iov || !self->from || !self->ctl || !self->peers
        || !self->ackq || !self->ackmsgs || !self->settled || !self->deferred) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf_view = PyMemoryView_FromObject(self->store);
    return self->buf_view ? 0 : -1;
}

/* __init__ once; one that fails leaves the ring blank (nothing held, nothing allocated) */
static int rxring_init_once(RxRing *self, PyObject *args, PyObject *kw) {
    if (self->ready != FP_BLANK) {
        PyErr_SetString(PyExc_RuntimeError, "RxRing is initialised once");
        return -1;
    }
    self->ready = FP_INITIALISING;
    if (rxring_init(self, args, kw) < 0) {
        rxring_release(self);
        self->ready = FP_BLANK;
        return -1;
    }
    self->ready = FP_READY;
    return 0;
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

/* -- ACKs straight into their compiled Sender --------------------------------------------
 *
 * A sending QP bound here (bind_sender: the loop binds a compiled Sender's QP when it
 * opens it, unbinds it when it closes) has its ACKs taken in C: an ACK (wire.ACK_SIZE
 * bytes, opcode 0x11, AETH syndrome 0x00) to a bound QP whose ICRC checks is decoded as
 * wire.decode_checked decodes it and handed to the Sender as loop._on_ack hands it
 * (fp_sender_on_ack: the PSNs unwrapped, QpFailed caught). Everything else (a NAK, a
 * length or syndrome wire refuses, a bad ICRC, an unbound QP) takes the path it took
 * before, through parse, so it is refused, or counted, by the same rule. recv() then
 * returns, for a QP whose Sender is idle or failed after its ACKs, one (11, qpn) per
 * call: what loop._maybe_done needs. */

#define OP_ACK 0x11
#define ACK_BYTES 40        /* BTH 12, AETH 4, SACK 20, ICRC 4: wire.ACK_SIZE */
#define SACK_DUP 0x80
#define NAK_SEQUENCE 0x60   /* wire.NAK_CODES: the syndromes of a NAK */
#define NAK_TRIMMED 0x61

static void unbind_all(RxRing *self) {
    for (int i = 0; i < self->nbound; i++) Py_CLEAR(self->bound[i].sender);
    PyMem_Free(self->bound);
    self->bound = NULL;
    self->nbound = self->bound_cap = 0;
}

static Bound *bound_of(RxRing *self, uint32_t qpn) {
    for (int i = 0; i < self->nbound; i++)
        if (self->bound[i].qpn == qpn) return &self->bound[i];
    return NULL;
}

/* -- bound QPs: their data packets handed to their Receiver here ---------------------- */

static RxBinding *rx_binding(RxRing *self, uint32_t qpn) {
    for (int i = 0; i < self->nbinds; i++)
        if (self->binds[i].qpn == qpn) return &self->binds[i];
    return NULL;
}

/* loop._unwrap24: the full PSN nearest `ref` (>= 0) whose low 24 bits are `psn`. */
static int64_t unwrap24(uint32_t psn, int64_t ref) {
    int64_t full = (ref & ~(int64_t)PSN_MASK) | psn;
    if (full < ref - (1 << 23)) full += 1 << 24;
    else if (full > ref + (1 << 23) && full >= 1 << 24) full -= 1 << 24;
    return full;
}

static int64_t monotonic_ns(void) {  /* time.monotonic_ns */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int append_new(PyObject *list, PyObject *item) {
    if (!item) return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

/* -- SACKs framed and sent here (RxRing.acks) ------------------------------------------ */

/* wire.encode_ack(dest_qp, psn & 0xFFFFFF, cum & 0xFFFFFF, Sack(cum & 0xFFFFFF, bitmap, ev,
 * tries, congestion, ports, dup)) after `head` (a Framer's headers for ACK_SIZE), its ICRC
 * from `seed`, as wire.Framer.frame; with a NAK's syndrome, wire.encode_nack (its PSN
 * the SACK's). Returns the frame's length. */
static size_t ack_frame(unsigned char *out, const unsigned char *head, int head_len,
                        uint32_t seed, uint32_t dest_qp, int syndrome, const FpSack *sk,
                        uint16_t ports) {
    memcpy(out, head, (size_t)head_len);
    unsigned char *b = out + head_len;
    uint32_t cum = (uint32_t)sk->cum & PSN_MASK;
    b[0] = OP_ACKNOWLEDGE; b[1] = 0; b[2] = PKEY_DEFAULT >> 8; b[3] = PKEY_DEFAULT & 0xFF;
    put32(b + 4, dest_qp & PSN_MASK);
    put32(b + 8, (uint32_t)sk->psn & PSN_MASK);
    put32(b + 12, (uint32_t)syndrome << 24 | cum);
    put32(b + 16, cum);
    put64(b + 20, sk->bitmap);
    put32(b + 28, sk->ev);
    b[32] = (unsigned char)((sk->tries & TRY_MASK) | (sk->dup ? SACK_DUP : 0));
    b[33] = (unsigned char)sk->congestion;
    b[34] = ports >> 8; b[35] = ports & 0xFF;
    uint32_t crc = icrc32(seed, b, 4);
    static const unsigned char ff = 0xFF;
    crc = icrc32(crc, &ff, 1);
    crc = icrc32(crc, b + 5, ACK_BODY - 5);
    put_icrc(b + ACK_BODY, crc);
    return (size_t)head_len + ACK_BODY + 4;
}

/* fp.ack_frame(head, seed, dest_qp, psn, cum, bitmap, ev, tries, congestion, ports, dup,
 * syndrome=0): one ACK (or NAK) frame as RxRing sends it (the tests hold it to wire, in
 * both framings). */
static PyObject *fp_ack_frame(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer head;
    unsigned int seed, dest_qp, ev, ports;
    long long psn, cum, congestion;
    unsigned long long bitmap;
    int tries, dup, syndrome = SYNDROME_ACK;
    if (!PyArg_ParseTuple(args, "y*IILLKIiLIp|i:ack_frame", &head, &seed, &dest_qp, &psn,
                          &cum, &bitmap, &ev, &tries, &congestion, &ports, &dup, &syndrome))
        return NULL;
    if (head.len > ACK_HEAD_MAX) {
        PyBuffer_Release(&head);
        PyErr_Format(PyExc_ValueError, "head is at most %d bytes", ACK_HEAD_MAX);
        return NULL;
    }
    unsigned char out[ACK_FRAME_MAX];
    FpSack sk = {.cum = cum, .psn = psn, .bitmap = bitmap, .ev = ev, .tries = tries,
                 .dup = dup, .congestion = congestion};
    size_t n = ack_frame(out, head.buf, (int)head.len, seed, dest_qp, syndrome & 0xFF, &sk,
                         (uint16_t)ports);
    PyBuffer_Release(&head);
    return PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)n);
}

/* The way back for a SACK of `ev` (its path key's), asking reverse(qpn, ev) the first
 * time: NULL with no exception where there is none (no peer host yet: nothing is sent,
 * and it is asked again next time), NULL with one where reverse failed. reverse runs
 * Python, which may not bind or unbind meanwhile (busy): `b` stays where it is. */
static AckWay *ack_way(RxRing *self, RxBinding *b, uint32_t ev) {
    uint32_t key = ev & self->path_mask;
    if (b->way_of && b->way_of[key]) return &b->ways[b->way_of[key] - 1];
    PyObject *got = PyObject_CallFunction(self->reverse, "II", b->qpn, ev);
    if (!got) return NULL;
    if (got == Py_None) { Py_DECREF(got); return NULL; }
    const char *head, *dst;
    Py_ssize_t head_len, dst_len;
    unsigned int seed;
    PyObject *head_o, *dst_o;
    if (!PyArg_ParseTuple(got, "SIS:reverse gives (head, seed, dst)", &head_o, &seed, &dst_o)) {
        Py_DECREF(got);
        return NULL;
    }
    head = PyBytes_AS_STRING(head_o); head_len = PyBytes_GET_SIZE(head_o);
    dst = PyBytes_AS_STRING(dst_o); dst_len = PyBytes_GET_SIZE(dst_o);
    if (head_len > ACK_HEAD_MAX || dst_len != 16) {
        PyErr_Format(PyExc_ValueError, "reverse: head is at most %d bytes, dst a packed "
                     "16-byte address", ACK_HEAD_MAX);
        Py_DECREF(got);
        return NULL;
    }
    if (!b->way_of && !(b->way_of = PyMem_Calloc((size_t)self->path_mask + 1,
                                                 sizeof(uint16_t)))) {
        Py_DECREF(got);
        PyErr_NoMemory();
        return NULL;
    }
    if (b->nways == b->capways) {
        int cap = b->capways ? 2 * b->capways : 8;
        AckWay *more = PyMem_Realloc(b->ways, (size_t)cap * sizeof *more);
        if (!more) { Py_DECREF(got); PyErr_NoMemory(); return NULL; }
        b->ways = more;
        b->capways = cap;
    }
    AckWay *w = &b->ways[b->nways];
    memcpy(w->head, head, (size_t)head_len);
    w->head_len = (int)head_len;
    w->seed = seed;
    memset(&w->to, 0, sizeof w->to);
    w->to.sin6_family = AF_INET6;
    memcpy(&w->to.sin6_addr, dst, 16);
    Py_DECREF(got);
    b->way_of[key] = (uint16_t)++b->nways;
    return w;
}

/* Send the queued SACK frames (one sendmmsg; a frame the kernel refuses is lost, as
 * the loop's sendto loses it), or with no fd hand them to Python as EV_FRAME events. */
static int ack_send(RxRing *self, PyObject *out) {
    int n = self->nackq, rc = 0;
    self->nackq = 0;
    if (self->ack_fd < 0) {
        for (int i = 0; i < n && rc == 0; i++) {
            AckOut *a = &self->ackq[i];
            rc = append_new(out, Py_BuildValue("(iIy#y#)", EV_FRAME, a->qpn, a->frame,
                                               (Py_ssize_t)a->len, &a->to.sin6_addr,
                                               (Py_ssize_t)16));
        }
        return rc;
    }
    for (int i = 0; i < n; i++) {
        AckOut *a = &self->ackq[i];
        a->iov = (struct iovec){a->frame, a->len};
        struct msghdr *m = &self->ackmsgs[i].msg_hdr;
        memset(m, 0, sizeof *m);
        m->msg_name = &a->to;
        m->msg_namelen = sizeof a->to;
        m->msg_iov = &a->iov;
        m->msg_iovlen = 1;
    }
    int i = 0;
    while (i < n) {
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = sendmmsg(self->ack_fd, self->ackmsgs + i, n - i, 0);
        Py_END_ALLOW_THREADS
        if (r < 0) {
            if (errno == EINTR) continue;
            self->acks_refused++;
            i++;
            continue;
        }
        self->acks_sent += r;
        i += r;
    }
    return 0;
}

/* One SACK (or NAK: syndrome) of a bound QP, framed on its way back and queued (sent
 * when the queue is full, at the end of the recv, or by flush_sacks). */
static int ack_queue(RxRing *self, RxBinding *b, int syndrome, const FpSack *sk,
                     PyObject *out) {
    uint32_t qpn = b->qpn, dest_qp = b->peer_qpn;
    AckWay *w = ack_way(self, b, sk->ev);
    if (!w) return PyErr_Occurred() ? -1 : 0;
    if (self->nackq == ACK_QUEUE && ack_send(self, out) < 0) return -1;
    AckOut *a = &self->ackq[self->nackq++];
    a->len = ack_frame(a->frame, w->head, w->head_len, w->seed, dest_qp, syndrome, sk,
                       self->port_bitmap);
    a->qpn = qpn;
    a->to = w->to;
    return 0;
}

/* loop._on_data's SACK handling, in C: a SACK the sender waits on (a duplicate's, an
 * ACK request's, a message's last packet's) or that echoes CE goes at once and
 * replaces the one held; a plain one is held as the QP's last of the batch, and the one
 * it replaces kept as the companion if that went another path (loop._coalesce). */
static int ack_take(RxRing *self, RxBinding *b, const FpSack *sk, int urgent, PyObject *out) {
    if (urgent) {
        b->has_pending = b->has_other = 0;
        return ack_queue(self, b, SYNDROME_ACK, sk, out);
    }
    if (b->has_pending && ((b->pending.ev ^ sk->ev) & self->path_mask)) {
        b->other = b->pending;
        b->has_other = 1;
    }
    b->pending = *sk;
    b->has_pending = 1;
    return 0;
}

/* loop._flush_sacks, in C: each bound QP's held SACK, after its companion. */
static int ack_flush(RxRing *self, PyObject *out) {
    for (int i = 0; i < self->nbinds; i++) {
        RxBinding *b = &self->binds[i];
        if (!b->has_pending) continue;
        FpSack other = b->other, last = b->pending;
        int has_other = b->has_other;
        b->has_pending = b->has_other = 0;
        if ((has_other && ack_queue(self, b, SYNDROME_ACK, &other, out) < 0)
            || ack_queue(self, b, SYNDROME_ACK, &last, out) < 0)
            return -1;
    }
    return ack_send(self, out);
}

/* A data packet of a bound QP that a switch trimmed (DSCP 7: BTH and RETH only, nothing
 * authenticated, at least DATA_HEAD bytes): what loop._on_trimmed does, in C, so that its
 * NAK(TRIMMED) goes out in order with the batch's SACKs (from Python it left after them,
 * and the sender found the PSN lost before the NAK came). Believed only as far as a NAK
 * goes: its QP's rkey, inside its buffer, no longer than an MTU (drops counted as
 * _on_trimmed counts them). Returns 1 (taken), 0 (not a bound QP's) or -1. */
static int rx_bound_trimmed(RxRing *self, const unsigned char *data, unsigned sport,
                            uint32_t flow, PyObject *out) {
    RxBinding *b = rx_binding(self, get32(data + 4) & PSN_MASK);
    if (!b) return 0;
    uint32_t word = get32(data + 8), rkey = get32(data + 20), dma_len = get32(data + 24);
    uint64_t va = get64(data + 12);
    unsigned tc = (flow >> TC_SHIFT) & 0xFF;
    b->touched = 1;
    if (rkey != b->rkey || va > (uint64_t)b->size || dma_len > (uint64_t)b->size - va
        || dma_len > MTU) {
        if (rkey != b->rkey) b->bad_rkey++;
        else b->out_of_bounds++;
        return 1;
    }
    FpRxData p = {
        .psn = unwrap24(word & PSN_MASK, fp_receiver_cum(b->receiver)),
        .va = (int64_t)va,
        .ev = (flow & FLOW_MASK) | ((uint32_t)(sport & 0x3FFF) << SPORT_SHIFT),
        .tries = (int)((word >> 24) & TRY_MASK),
        .ce = (tc & 3) == 3,  /* wire.ECN_MASK, wire.CE */
    };
    FpSack sk;
    int nack;
    PyObject *receiver = Py_NewRef(b->receiver);
    int rc = fp_receiver_trimmed(receiver, &p, &sk, &nack);
    Py_DECREF(receiver);
    if (rc <= 0) return rc < 0 ? -1 : 1;
    /* loop._send_nack(..., NAK_TRIMMED, report) or _send_sack(report): at once, the held
     * SACK left as it is */
    return ack_queue(self, b, nack ? NAK_TRIMMED : SYNDROME_ACK, &sk, out) < 0 ? -1 : 1;
}

/* One datagram, if it is a data packet for a bound QP that gets that far: what
 * loop._on_data does, in C. Checked as parse checks it (anything parse would drop, a
 * trimmed packet, a QP not bound: 0, parse's), then the QP's rkey and bounds (drops
 * counted in its binding), the PSN unwrapped against the receiver's cum, CE read from
 * the traffic class; the Receiver copies the payload from the ring into its buffer.
 * Its SACK, NAK and CE notice are appended to `out` (events EV_SACK, EV_NACK, EV_CE).
 * Returns 1 (taken), 0 (not a bound QP's: parse it) or -1 with an exception set. */
static int rx_bound_data(RxRing *self, const unsigned char *data, Py_ssize_t n,
                         const unsigned char *src, unsigned sport, uint32_t flow,
                         int64_t now, PyObject *out) {
    if (!self->nbinds || n < DATA_HEAD) return 0;
    int op = data[0];
    unsigned tc = (flow >> TC_SHIFT) & 0xFF;
    if (op != OP_WRITE_ONLY && op != OP_WRITE_ONLY_IMM) return 0;
    if ((tc >> 2) == TRIM_DSCP)  /* framed here only, so its NAK leaves in order */
        return self->reverse ? rx_bound_trimmed(self, data, sport, flow, out) : 0;
    if (n < DATA_HEAD + 4) return 0;
    Py_ssize_t start = op == OP_WRITE_ONLY ? DATA_HEAD : DATA_IMM_HEAD;
    if (n < start + 4) return 0;
    RxBinding *b = rx_binding(self, get32(data + 4) & PSN_MASK);
    if (!b || !icrc_ok(data, n, src, self->local, sport)) return 0;
    uint32_t dma_len = get32(data + 24);
    if ((Py_ssize_t)dma_len != n - start - 4 || dma_len > MTU) return 0;
    uint64_t va = get64(data + 12);
    uint32_t rkey = get32(data + 20);
    b->touched = 1;
    /* va + length, without a sum that wraps near 2**64 */
    if (rkey != b->rkey || va > (uint64_t)b->size || dma_len > (uint64_t)b->size - va) {
        if (rkey != b->rkey) b->bad_rkey++;
        else b->out_of_bounds++;
        return 1;
    }
    uint32_t word = get32(data + 8);
    FpRxData p = {
        .psn = unwrap24(word & PSN_MASK, fp_receiver_cum(b->receiver)),
        .va = (int64_t)va,
        .payload = data + start,
        .len = dma_len,
        .ev = (flow & FLOW_MASK) | ((uint32_t)(sport & 0x3FFF) << SPORT_SHIFT),
        .imm = op == OP_WRITE_ONLY_IMM ? get32(data + 28) : 0,
        .has_imm = op == OP_WRITE_ONLY_IMM,
        .tries = (int)((word >> 24) & TRY_MASK),
        .ack_req = (word & ACK_REQ) != 0,
        .ce = (tc & 3) == 3,  /* wire.ECN_MASK, wire.CE */
    };
    b->has_last = 1;  /* for the delayed ACK: its PSN, EV and try (loop's qp.last_pkt) */
    b->last_t = now;
    b->last_psn = p.psn;
    b->last_va = p.va;
    b->last_ev = p.ev;
    b->last_tries = p.tries;
    b->last_ack_req = p.ack_req;
    b->last_ce = p.ce;
    uint32_t qpn = b->qpn;
    FpSack sk;
    int64_t nack;
    Py_ssize_t placed;
    PyObject *receiver = Py_NewRef(b->receiver);
    int rc = fp_receiver_data(receiver, &p, &sk, &nack, &placed);
    Py_DECREF(receiver);
    if (rc < 0) return -1;
    self->batch_plane[p.ev & (PLANES - 1)] += (unsigned long long)placed;
    /* the sender waits on it, or it echoes a CE mark: never coalesced away */
    int urgent = rc && (sk.dup || p.ack_req || p.has_imm || sk.congestion);
    if (rc && self->reverse) {
        /* `b` is where it was: nothing ran that may bind or unbind (busy) */
        if (ack_take(self, b, &sk, urgent, out) < 0) return -1;
    } else if (rc) {
        if (append_new(out, Py_BuildValue("(iILKILiLOO)", EV_SACK, qpn, (long long)sk.cum,
                                          (unsigned long long)sk.bitmap, sk.ev,
                                          (long long)sk.psn, sk.tries, sk.congestion,
                                          sk.dup ? Py_True : Py_False,
                                          urgent ? Py_True : Py_False)) < 0)
            return -1;
    }
    if (nack >= 0 && self->reverse) {
        /* loop._send_nack: a PSN sequence error at cum (which nack is), in order with
         * the SACKs, its SACK the bare one (no bitmap, EV echoed, no try) */
        FpSack nk = {.cum = nack, .psn = nack, .ev = p.ev};
        if (ack_queue(self, b, NAK_PSN_SEQUENCE_ERROR, &nk, out) < 0) return -1;
    } else if (nack >= 0
               && append_new(out, Py_BuildValue("(iILI)", EV_NACK, qpn, (long long)nack,
                                                p.ev)) < 0) {
        return -1;
    }
    if (p.ce && append_new(out, Py_BuildValue("(iIIL)", EV_CE, qpn, p.ev, (long long)now)) < 0)
        return -1;
    return 1;
}

/* The end of a recv: per bound QP that got packets, its drops (EV_DROPS); the bytes
 * placed per plane added to plane_bytes. Nothing else per batch: the last packet of a
 * QP is kept for the delayed ACK's timer to ask for (RxRing.last), the bytes per plane
 * for whoever reads plane_bytes. */
static int rx_batch_end(RxRing *self, PyObject *out) {
    int rc = 0;
    for (int i = 0; i < self->nbinds; i++) {
        RxBinding *b = &self->binds[i];
        if (!b->touched) continue;
        b->touched = 0;
        if ((b->bad_rkey || b->out_of_bounds) && rc == 0)
            rc = append_new(out, Py_BuildValue("(iILL)", EV_DROPS, b->qpn, b->bad_rkey,
                                               b->out_of_bounds));
        b->bad_rkey = b->out_of_bounds = 0;
    }
    for (int p = 0; p < PLANES; p++) {
        self->plane_bytes[p] += self->batch_plane[p];
        self->batch_plane[p] = 0;
    }
    return rc;
}

/* One datagram: 1 if it was an ACK a bound Sender took (an (11, qpn) appended to `out`
 * if its Sender is now idle or failed, once per recv), 0 if it goes the way it
 * went before, -1 with an exception set. */
static int ack_to_sender(RxRing *self, const unsigned char *data, Py_ssize_t n,
                         const unsigned char *src, unsigned sport, int64_t now,
                         PyObject *out, int *nsettled, int ndeferred) {
    if (n != ACK_BYTES || data[0] != OP_ACK || data[12] != 0) return 0;
    uint32_t qpn = get32(data + 4) & PSN_MASK;
    Bound *b = bound_of(self, qpn);
    if (!b) return 0;
    for (int i = 0; i < ndeferred; i++)
        if (self->deferred[i] == qpn) return 0;  /* after a packet in the list: in order */
    if (!icrc_ok(data, n, src, self->local, sport)) return 0;
    FpAck a = {.psn = get32(data + 8) & PSN_MASK, .cum = get32(data + 16) & PSN_MASK,
                .bitmap = get64(data + 20), .ev = get32(data + 28),
                .tries = data[32] & TRY_MASK, .dup = (data[32] & SACK_DUP) != 0,
                .congestion = data[33], .port_state = data[34] << 8 | data[35]};
    /* held: on_sack runs Python (the event log, the EV set), which may unbind it */
    PyObject *sender = Py_NewRef(b->sender);
    int rc = fp_sender_on_ack(sender, &a, now < 0 ? monotonic_ns() : now);
    int settled = rc >= 0 && fp_sender_settled(sender);
    Py_DECREF(sender);
    if (rc < 0) return -1;
    self->acks_taken++;
    if (!settled) return 1;
    for (int i = 0; i < *nsettled; i++)
        if (self->settled[i] == qpn) return 1;
    if (append_new(out, Py_BuildValue("(iI)", EV_SETTLED, qpn)) < 0) return -1;
    self->settled[(*nsettled)++] = qpn;
    return 1;
}

/* A datagram that goes in recv's list, to a bound QP (a NAK, a CNP, a probe reply, an
 * ACK wire refuses): the rest of this recv's ACKs to that QP go in the list too, after
 * it, so that its Sender sees its packets in the order they came. */
static void defer_after(RxRing *self, const unsigned char *data, Py_ssize_t n,
                        const unsigned char *src, unsigned sport, int *ndeferred) {
    if (n < 16 || data[0] == OP_WRITE_ONLY || data[0] == OP_WRITE_ONLY_IMM) return;
    uint32_t qpn = get32(data + 4) & PSN_MASK;
    if (!bound_of(self, qpn)) return;
    for (int i = 0; i < *ndeferred; i++)
        if (self->deferred[i] == qpn) return;
    /* what parse or wire refuses never reaches the Sender: it keeps no place */
    if (data[0] == OP_ACK && (n != ACK_BYTES || (data[12] != 0 && data[12] != NAK_SEQUENCE
                                                 && data[12] != NAK_TRIMMED)))
        return;
    if (!icrc_ok(data, n, src, self->local, sport)) return;
    self->deferred[(*ndeferred)++] = qpn;
}

/* bind_sender(qpn, sender): QP qpn's ACKs go straight to `sender` (the compiled one). */
static PyObject *rxring_bind_sender(RxRing *self, PyObject *args) {
    FP_REQUIRE_READY(self, NULL);
    unsigned int qpn;
    PyObject *sender;
    if (!PyArg_ParseTuple(args, "IO:bind_sender", &qpn, &sender)) return NULL;
    if (qpn > PSN_MASK) {
        PyErr_SetString(PyExc_ValueError, "a QP number is 24 bits");
        return NULL;
    }
    if (!fp_is_sender(sender)) {
        PyErr_Format(PyExc_TypeError, "want the compiled Sender, got %.100s",
                     Py_TYPE(sender)->tp_name);
        return NULL;
    }
    Bound *b = bound_of(self, qpn);
    if (b) {
        Py_SETREF(b->sender, Py_NewRef(sender));
        Py_RETURN_NONE;
    }
    if (self->nbound == self->bound_cap) {
        int cap = self->bound_cap ? 2 * self->bound_cap : 8;
        Bound *grown = PyMem_Realloc(self->bound, cap * sizeof(Bound));
        if (!grown) return PyErr_NoMemory();
        self->bound = grown;
        self->bound_cap = cap;
    }
    self->bound[self->nbound++] = (Bound){qpn, Py_NewRef(sender)};
    Py_RETURN_NONE;
}

/* unbind_sender(qpn) -> bool: its ACKs go back to recv's list (whether it was bound). */
static PyObject *rxring_unbind_sender(RxRing *self, PyObject *arg) {
    FP_REQUIRE_READY(self, NULL);
    unsigned long qpn = PyLong_AsUnsignedLong(arg);
    if (qpn == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    Bound *b = qpn <= PSN_MASK ? bound_of(self, (uint32_t)qpn) : NULL;
    if (!b) Py_RETURN_FALSE;
    PyObject *sender = b->sender;
    *b = self->bound[--self->nbound];
    Py_DECREF(sender);  /* last: its dealloc may run Python */
    Py_RETURN_TRUE;
}

/* recv() -> [parsed, ...]: what one recvmmsg(MSG_DONTWAIT) returned, each parsed as
 * `parse` does; a bound QP's data packets taken by its Receiver instead, and what
 * Python must act on in their place (the EV_ events). Payload views point into the
 * ring: they are valid until the next recv. */
static PyObject *rxring_recv_batch(RxRing *self) {
    self->acks_taken = 0;
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
    self->received = r;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    /* the time of this batch: recv's `now`, or the clock's (a bound Sender is given the
     * clock's as each ACK comes, as loop._on_ack reads it) */
    int64_t now = self->ack_now >= 0 ? self->ack_now : self->nbinds ? monotonic_ns() : 0;
    int nsettled = 0, ndeferred = 0;
    for (int i = 0; i < r; i++) {
        struct msghdr *m = &self->msgs[i].msg_hdr;
        uint32_t flow = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
            if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_FLOWINFO_OPT
                && c->cmsg_len >= CMSG_LEN(4)) {
                flow = get32(CMSG_DATA(c)) & FLOWINFO_MASK;  /* TC and label */
            }
        }
        Py_ssize_t n = self->msgs[i].msg_len;
        if (n > self->slot_size) n = self->slot_size;  /* cut: its ICRC fails */
        Py_ssize_t at = (Py_ssize_t)i * self->slot_size;
        const unsigned char *src = (const unsigned char *)&self->from[i].sin6_addr;
        unsigned sport = ntohs(self->from[i].sin6_port);
        int taken = rx_bound_data(self, self->buf + at, n, src, sport, flow, now, out);
        if (taken) {
            if (taken < 0) goto fail;
            continue;
        }
        if (self->nbound) {
            taken = ack_to_sender(self, self->buf + at, n, src, sport, self->ack_now, out,
                                  &nsettled, ndeferred);
            if (taken < 0) goto fail;
            if (taken) continue;
            defer_after(self, self->buf + at, n, src, sport, &ndeferred);
        }
        PyObject *src_obj = peer_bytes(self, src);
        PyObject *item = src_obj ? parse_one(self->buf_view, at, self->buf + at, n, src,
                                             self->local, sport, flow, src_obj)
                                 : NULL;
        Py_XDECREF(src_obj);
        if (append_new(out, item) < 0) goto fail;
    }
    if (rx_batch_end(self, out) < 0 || ack_send(self, out) < 0) goto fail;
    return out;
fail:
    self->nackq = 0;  /* what was queued is lost, as a failed sendto loses it */
    rx_batch_end(self, out);  /* the batch's state reset; what it counted is kept */
    Py_DECREF(out);
    return NULL;
}

static PyObject *rxring_recv(RxRing *self, PyObject *const *args, Py_ssize_t nargs) {
    FP_REQUIRE_READY(self, NULL);
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "recv(now=the clock)");
        return NULL;
    }
    /* an allocation may run Python (a GC pass, the finalizers it runs): no bind, unbind
     * or recv until this one is done */
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RxRing.recv: called from inside recv");
        return NULL;
    }
    /* the time bound QPs are given: the clock's as it comes (as loop._on_ack reads it),
     * or `now` for the whole call (tests, replays) */
    long long now = -1;
    if (nargs && args[0] != Py_None) {
        now = PyLong_AsLongLong(args[0]);
        if (now == -1 && PyErr_Occurred()) return NULL;
        if (now < 0) {
            PyErr_SetString(PyExc_ValueError, "now is a time in ns, not negative");
            return NULL;
        }
    }
    self->ack_now = now;
    self->received = 0;
    self->busy = 1;
    PyObject *out = rxring_recv_batch(self);
    self->busy = 0;
    return out;
}

/* wait(epfd, timeout_ns, ack_delay_ns) -> (items, datagrams, first_ns, other): the
 * endpoint loop's sleep, for as long as only this ring's socket wakes it and what it
 * reads needs no Python. epoll_wait on the loop's selector (epfd: level-triggered, so
 * what it reports stays ready for the selector to report again); the ring's socket
 * ready, one recv and the bound QPs' held SACKs sent (what the loop's _recv_batch does
 * per round), again and again in C. It returns, with the events of its last batch (as
 * recv's), when another fd is ready (other), a batch left anything for Python (items),
 * a bound Sender took ACKs (it may send now), timeout_ns passed (-1: never), or
 * ack_delay_ns after the first batch that read anything (first_ns, on the monotonic
 * clock: the delayed ACK's deadline, which the loop keeps), or a signal came. At full
 * rate a receiving endpoint woke every 2-3 packets, and each wakeup was a round of
 * the loop in Python. */
static PyObject *rxring_wait(RxRing *self, PyObject *args) {
    FP_REQUIRE_READY(self, NULL);
    int epfd;
    long long timeout_ns, ack_delay_ns;
    if (!PyArg_ParseTuple(args, "iLL:wait", &epfd, &timeout_ns, &ack_delay_ns)) return NULL;
    if (ack_delay_ns < 0) {
        PyErr_SetString(PyExc_ValueError, "ack_delay_ns is not negative");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RxRing.wait: called from inside recv");
        return NULL;
    }
    PyObject *items = PyList_New(0);
    if (!items) return NULL;
    int64_t deadline = timeout_ns < 0 ? INT64_MAX : monotonic_ns() + timeout_ns;
    long long total = 0;
    int64_t first = -1;
    int other = 0;
    self->ack_now = -1;  /* a bound Sender's ACKs: the clock's time as each comes */
    for (;;) {
        int ms = -1;
        if (deadline != INT64_MAX) {
            int64_t left = deadline - monotonic_ns();
            if (left <= 0) break;
            /* the selector's rounding (selectors.EpollSelector: up to the millisecond) */
            left = (left + 999999) / 1000000;
            ms = left > INT32_MAX ? INT32_MAX : (int)left;
        }
        struct epoll_event ev[16];
        int n;
        Py_BEGIN_ALLOW_THREADS
        n = epoll_wait(epfd, ev, 16, ms);
        Py_END_ALLOW_THREADS
        if (n < 0) {
            if (errno != EINTR) {
                PyErr_SetFromErrno(PyExc_OSError);
                goto fail;
            }
            if (PyErr_CheckSignals() < 0) goto fail;
            break;  /* a signal: its handler ran; the loop looks at what it did */
        }
        int ring = 0;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == self->fd) ring = 1;
            else other = 1;
        }
        if (other) break;
        if (!ring) continue;
        self->received = 0;
        self->busy = 1;
        PyObject *got = rxring_recv_batch(self);
        int rc = got ? ack_flush(self, got) : -1;
        self->busy = 0;
        if (rc < 0 || PyList_SetSlice(items, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, got) < 0) {
            self->nackq = 0;
            Py_XDECREF(got);
            goto fail;
        }
        Py_DECREF(got);
        if (self->received > 0) {
            total += self->received;
            if (first < 0) {
                first = monotonic_ns();
                if (first + ack_delay_ns < deadline) deadline = first + ack_delay_ns;
            }
        }
        if (PyList_GET_SIZE(items) > 0 || self->acks_taken) break;
    }
    return Py_BuildValue("(NLLO)", items, total, (long long)first, other ? Py_True : Py_False);
fail:
    Py_DECREF(items);
    return NULL;
}

/* bind(qpn, receiver, rkey): QP qpn's data packets go to `receiver` (a compiled
 * Receiver copying into its buffer) from the next recv on; bound again, replaced. */
static PyObject *rxring_bind(RxRing *self, PyObject *args) {
    FP_REQUIRE_READY(self, NULL);
    unsigned long long qpn, rkey, peer_qpn = 0;
    PyObject *receiver;
    if (!PyArg_ParseTuple(args, "KOK|K:bind", &qpn, &receiver, &rkey, &peer_qpn)) return NULL;
    if (qpn > PSN_MASK || peer_qpn > PSN_MASK || rkey > 0xFFFFFFFFu) {
        PyErr_SetString(PyExc_ValueError, "qpn and peer_qpn are 24 bits, rkey 32");
        return NULL;
    }
    Py_ssize_t size;
    if (fp_receiver_bindable(receiver, &size) < 0) return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RxRing.bind: called from inside recv");
        return NULL;
    }
    RxBinding *b = rx_binding(self, (uint32_t)qpn);
    if (!b) {
        if (self->nbinds == self->capbinds) {
            int cap = self->capbinds ? 2 * self->capbinds : 8;
            RxBinding *more = PyMem_Realloc(self->binds, (size_t)cap * sizeof *more);
            if (!more) return PyErr_NoMemory();
            self->binds = more;
            self->capbinds = cap;
        }
        b = &self->binds[self->nbinds++];
        memset(b, 0, sizeof *b);
    }
    Py_XSETREF(b->receiver, Py_NewRef(receiver));
    binding_forget_ways(b);  /* its peer may be another: the ways back are asked again */
    b->qpn = (uint32_t)qpn;
    b->rkey = (uint32_t)rkey;
    b->peer_qpn = (uint32_t)peer_qpn;
    b->size = size;
    Py_RETURN_NONE;
}

/* acks(fd, reverse, path_mask): bound QPs' SACKs coalesced, framed and sent here with
 * sendmmsg on fd (-1: handed back as EV_FRAME events instead); reverse(qpn, ev) ->
 * (head, seed, dst) | None gives the way back of a path the first time (head: a
 * wire.Framer's headers for an ACK, seed: the ICRC's state after them, dst: where to
 * send it, packed). acks(-1, None, 0): SACKs handed back as EV_SACK events again. */
static PyObject *rxring_acks(RxRing *self, PyObject *args) {
    FP_REQUIRE_READY(self, NULL);
    int fd;
    PyObject *reverse;
    unsigned long path_mask;
    if (!PyArg_ParseTuple(args, "iOk:acks", &fd, &reverse, &path_mask)) return NULL;
    if (reverse != Py_None && !PyCallable_Check(reverse)) {
        PyErr_SetString(PyExc_TypeError, "reverse: want reverse(qpn, ev) or None");
        return NULL;
    }
    if (path_mask > 0x7FFF) {  /* a QP's ways are counted in 16 bits */
        PyErr_SetString(PyExc_ValueError, "path_mask is at most 15 bits");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RxRing.acks: called from inside recv");
        return NULL;
    }
    for (int i = 0; i < self->nbinds; i++) binding_forget_ways(&self->binds[i]);
    Py_XSETREF(self->reverse, reverse == Py_None ? NULL : Py_NewRef(reverse));
    self->ack_fd = fd;
    self->path_mask = (uint32_t)path_mask;
    Py_RETURN_NONE;
}

/* flush_sacks() -> [event, ...]: each bound QP's held SACK sent, after its companion
 * (loop._flush_sacks); the EV_FRAME events where there is no fd. */
static PyObject *rxring_flush_sacks(RxRing *self, PyObject *Py_UNUSED(ignored)) {
    FP_REQUIRE_READY(self, NULL);
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RxRing.flush_sacks: called from inside recv");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    self->busy = 1;
    int rc = ack_flush(self, out);
    self->busy = 0;
    if (rc < 0) {
        self->nackq = 0;
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *rxring_get_port_bitmap(RxRing *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    return PyLong_FromLong(self->port_bitmap);
}

static int rxring_set_port_bitmap(RxRing *self, PyObject *v, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, -1);
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "port_bitmap cannot be deleted");
        return -1;
    }
    long x = PyLong_AsLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (x < 0 || x > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "port_bitmap is 16 bits");
        return -1;
    }
    self->port_bitmap = (uint16_t)x;
    return 0;
}

static PyObject *rxring_ack_counters(RxRing *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    return Py_BuildValue("(KK)", self->acks_sent, self->acks_refused);
}

/* unbind(qpn) -> bool: QP qpn's packets go back to parse (False: it was not bound). */
static PyObject *rxring_unbind(RxRing *self, PyObject *arg) {
    FP_REQUIRE_READY(self, NULL);
    unsigned long long qpn = PyLong_AsUnsignedLongLong(arg);
    if (qpn == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RxRing.unbind: called from inside recv");
        return NULL;
    }
    for (int i = 0; i < self->nbinds; i++) {
        if (self->binds[i].qpn != qpn) continue;
        PyObject *receiver = self->binds[i].receiver;
        binding_forget_ways(&self->binds[i]);
        self->binds[i] = self->binds[--self->nbinds];
        Py_DECREF(receiver);
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* last(qpn) -> (psn, va, ev, tries, ack_req, ce, t_ns) | None: the last data packet of
 * bound QP qpn that passed the checks, and when it came (None: none since it was bound):
 * what the delayed ACK's timer needs (loop's qp.last_pkt and last_data_ns). */
static PyObject *rxring_last(RxRing *self, PyObject *arg) {
    FP_REQUIRE_READY(self, NULL);
    unsigned long long qpn = PyLong_AsUnsignedLongLong(arg);
    if (qpn == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    RxBinding *b = qpn <= PSN_MASK ? rx_binding(self, (uint32_t)qpn) : NULL;
    if (!b || !b->has_last) Py_RETURN_NONE;
    return Py_BuildValue("(LLIiOOL)", (long long)b->last_psn, (long long)b->last_va,
                         b->last_ev, b->last_tries, b->last_ack_req ? Py_True : Py_False,
                         b->last_ce ? Py_True : Py_False, (long long)b->last_t);
}

static PyObject *rxring_bound(RxRing *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    PyObject *out = PyDict_New();
    for (int i = 0; out && i < self->nbinds; i++) {
        PyObject *k = PyLong_FromUnsignedLong(self->binds[i].qpn);
        if (!k || PyDict_SetItem(out, k, self->binds[i].receiver) < 0) Py_CLEAR(out);
        Py_XDECREF(k);
    }
    return out;
}

static PyObject *rxring_plane_bytes(RxRing *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    PyObject *out = PyDict_New();
    for (int p = 0; out && p < PLANES; p++) {
        if (!self->plane_bytes[p]) continue;
        PyObject *k = PyLong_FromLong(p), *v = PyLong_FromUnsignedLongLong(self->plane_bytes[p]);
        if (!k || !v || PyDict_SetItem(out, k, v) < 0) Py_CLEAR(out);
        Py_XDECREF(k); Py_XDECREF(v);
    }
    return out;
}

static PyObject *rxring_received(RxRing *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    return PyLong_FromLong(self->received);
}

static PyObject *rxring_counters(RxRing *self, void *Py_UNUSED(closure)) {
    FP_REQUIRE_READY(self, NULL);
    return Py_BuildValue("(KK)", self->datagrams, self->batches);
}

static PyMethodDef rxring_methods[] = {
    {"recv", (PyCFunction)(void (*)(void))rxring_recv, METH_FASTCALL,
     "recv(now=None) -> [parsed, ...]: one recvmmsg's datagrams, each as parse() gives "
     "it (now: the time bound QPs are given, None: the monotonic clock's); a "
     "bound QP's data packets taken by its Receiver, and in their place "
     "(4, qpn, cum, bitmap, ev, psn, tries, congestion, dup, urgent) a SACK to send, "
     "(5, qpn, psn, ev) a NAK, (6, qpn, ev, t_ns) a CE-marked packet; at the end, per "
     "bound QP that got any dropped, (8, qpn, bad_rkey, out_of_bounds); "
     "(11, qpn) once for a QP whose ACKs a bound Sender took, if it is then idle or "
     "failed (a QP's last packet: last(qpn); the bytes placed: plane_bytes)"},
    {"wait", (PyCFunction)rxring_wait, METH_VARARGS,
     "wait(epfd, timeout_ns, ack_delay_ns) -> (items, datagrams, first_ns, other): sleep "
     "on the loop's epoll, reading this ring in C while nothing needs Python"},
    {"bind", (PyCFunction)rxring_bind, METH_VARARGS,
     "bind(qpn, receiver, rkey, peer_qpn=0): QP qpn's data packets straight to its "
     "compiled Receiver (peer_qpn: its ACKs' DestQP)"},
    {"acks", (PyCFunction)rxring_acks, METH_VARARGS,
     "acks(fd, reverse, path_mask): bound QPs' SACKs coalesced, framed and sent here "
     "(fd -1: handed back as (10, qpn, frame, dst) events); reverse(qpn, ev) -> "
     "(head, seed, dst) | None the way back of a path"},
    {"flush_sacks", (PyCFunction)rxring_flush_sacks, METH_NOARGS,
     "flush_sacks() -> [event, ...]: each bound QP's held SACK, after its companion"},
    {"last", (PyCFunction)rxring_last, METH_O,
     "last(qpn) -> (psn, va, ev, tries, ack_req, ce, t_ns) | None: bound QP qpn's last "
     "data packet that passed the checks, and when (the delayed ACK's)"},
    {"unbind", (PyCFunction)rxring_unbind, METH_O,
     "unbind(qpn) -> bool: QP qpn's data packets parsed again (False: not bound)"},
    {"bind_sender", (PyCFunction)rxring_bind_sender, METH_VARARGS,
     "bind_sender(qpn, sender): QP qpn's ACKs go straight to its compiled Sender"},
    {"unbind_sender", (PyCFunction)rxring_unbind_sender, METH_O,
     "unbind_sender(qpn) -> bool: its ACKs come back in recv's list"},
    {NULL}
};

static PyGetSetDef rxring_getset[] = {
    {"counters", (getter)rxring_counters, NULL, "(datagrams, recvmmsg calls that got any)",
     NULL},
    {"bound", (getter)rxring_bound, NULL, "{qpn: receiver}: the bound QPs", NULL},
    {"port_bitmap", (getter)rxring_get_port_bitmap, (setter)rxring_set_port_bitmap,
     "the port bitmap the SACKs framed here carry", NULL},
    {"ack_counters", (getter)rxring_ack_counters, NULL,
     "(SACK frames sent here, refused by the kernel)", NULL},
    {"plane_bytes", (getter)rxring_plane_bytes, NULL,
     "{plane: payload bytes placed for bound QPs}, per the EV's plane", NULL},
    {"received", (getter)rxring_received, NULL,
     "datagrams the last recv() read (ACKs a bound Sender took included)", NULL},
    {NULL}
};

static PyTypeObject RxRingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "twin.mrc._fastpath.RxRing",
    .tp_basicsize = sizeof(RxRing),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "RxRing(fd, local, slots=64, slot_size=4352): recvmmsg into a ring, parsed",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)rxring_init_once,
    .tp_dealloc = (destructor)rxring_dealloc,
    .tp_traverse = (traverseproc)rxring_traverse,
    .tp_clear = (inquiry)rxring_clear,
    .tp_methods = rxring_methods,
    .tp_getset = rxring_getset,
};

/* -- the part's registration (_module.c calls it) ------------------------------------- */

static PyMethodDef fp_methods[] = {
    {"parse", fp_parse, METH_VARARGS,
     "parse(udp_payload, src, dst, sport, flow=0) -> tuple: (0, reason) for a bad packet; "
     "(1, dest_qp, psn, va, rkey, payload, ev, tries, ack_req, imm, src, tc) for data; "
     "(2, view, opcode, src, sport, flow, length) for any other opcode; "
     "(3, dest_qp, psn, va, rkey, dma_len, ev, tries, opcode, tc, src) for a data packet "
     "a switch trimmed (DSCP 7 in flow's traffic class, bits 27..20)"},
    {"ack_frame", fp_ack_frame, METH_VARARGS,
     "ack_frame(head, seed, dest_qp, psn, cum, bitmap, ev, tries, congestion, ports, dup) "
     "-> bytes: one ACK frame as RxRing sends it (wire.Framer.frame(wire.encode_ack(...)))"},
    {"build", (PyCFunction)(void (*)(void))fp_build, METH_FASTCALL,
     "build(head, seed, word, va, rkey, payload, imm) -> bytes: one data packet"},
    {NULL}
};

int fp_add_datapath(PyObject *m) {
    choose_crc();
    if (PyType_Ready(&TxBatchType) < 0 || PyType_Ready(&RxRingType) < 0) return -1;
#define INTERN(var, text) if (!(var = PyUnicode_InternFromString(text))) return -1
    INTERN(s_ev, "ev"); INTERN(s_psn, "psn"); INTERN(s_va, "va"); INTERN(s_payload, "payload");
    INTERN(s_tries, "tries"); INTERN(s_ack_req, "ack_req"); INTERN(s_imm, "imm");
    INTERN(s_common, "common"); INTERN(s_rkey, "rkey");
    reason_short = PyUnicode_InternFromString("short");
    reason_icrc = PyUnicode_InternFromString("icrc");
    reason_length = PyUnicode_InternFromString("length");
    if (!reason_short || !reason_icrc || !reason_length) return -1;
    if (PyModule_AddFunctions(m, fp_methods) < 0
        || PyModule_AddObjectRef(m, "TxBatch", (PyObject *)&TxBatchType) < 0
        || PyModule_AddObjectRef(m, "RxRing", (PyObject *)&RxRingType) < 0
        || PyModule_AddIntConstant(m, "HEAD_BYTES", HEAD_BYTES) < 0
        || PyModule_AddStringConstant(m, "ICRC", icrc_impl) < 0)
        return -1;
    return 0;
}
