/* The transport's compiled Sender: twin.mrc.transport.Sender's decisions, in C.
 *
 * The reference (transport.Sender) is the specification and stays the readable one;
 * every function here is named after the method it mirrors and does what it does, in
 * the same order, so that the same inputs give the same packets, EVs, losses, events
 * and window, float for float. tests/unit/test_transport_differential.py holds the two
 * equal on recorded traces (link cuts, loss, reordering, trims, ECN marks, CNPs, port
 * and probe events), decision by decision; tests/unit/test_sender_compiled.py covers
 * what traces do not.
 *
 * In C, per packet and per batch:
 *   records      a packet's record (_Tx) lives in a ring indexed by PSN, grown by
 *                doubling when the outstanding PSNs outgrow it; `present` is the
 *                reference's `psn in self._txs`
 *   queues       the send order, the per-path send orders, the retransmit and unsent
 *                queues: deques of (seq, psn) in C; the per-path ones in a hash map
 *   the SACK walk, RACK and per-path loss detection, the retransmit timer and its tail
 *   probe, the window (nscc and delay: the same double arithmetic, in the same order),
 *   NACK and trim handling, message completion; the counters (`stats` is a transport.SenderStats
 *   made from them when read: a snapshot, where the reference's is live)
 *   the EV set's per-packet state and steps: an EvRing (evset.Rotation's twin, the
 *   same public interface), which the EvSet holds as its `ring` and calls on its rare
 *   paths; the Sender calls it here per packet (next, sent_unproven, gone, delivered).
 *   Ev and PathState fields, public slots of dataclasses, are read and written in
 *   place (see `EvSet access`); no private name of a Python object is read
 * In Python, called from here as the reference calls them: everything else of the EV
 * set (retirement, replacement, revival, SKIP, denylist, planes), the event log
 * (transport.EventLog of transport.Event), the acked-bytes bins, DCQCN's rate and
 * pacer, the record of losses (an OrderedDict, touched only on loss), and messages
 * (transport.Msg). Packets go out as TxPacket objects (poll: what the reference's
 * callers and tests read), or as FpTx records straight into the data path
 * (fp_sender_poll, fp_sender.h: TxBatch.post_sender builds them, no object per packet).
 *
 * Divergences, on purpose: numbers read back as floats where the reference may hold
 * an int of the same value (window, srtt); the config is read once (the reference
 * reads self.cfg per use; nothing changes it after construction); a non-positive MTU
 * is refused at construction (the reference fails at the first post); PSNs, times
 * and VAs are 64-bit.
 */
#include "fp_sender.h"

#include "fp_util.h"

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "structmember.h"

/* -- what bind() hands the Sender (twin.mrc.core, once: fp_bind_sender) --------------- */

static PyObject *Event, *SenderStats, *Msg, *QpFailed, *NoUsableEv, *weakly, *EventLog,
    *AckedBins, *for_sender, *wire_bytes, *OrderedDict, *SenderConfig,
    *MODES, *CCS, *EvType, *PathType, *EvSetType, *EvState_GOOD, *EvState_SKIP,
    *EvState_DENIED, *EvState_BAD;
static long long BUILD_CHUNK, LOST_REMEMBERED, REORDER_STEPS_MAX, REORDERING_LEARNED,
    TRY_MASK, BITMAP_BITS, CONGESTION_ECHO_CE, CONGESTION_COUNT, MESSAGES_KEPT, COMPACT_AFTER,
    FRAME_OVERHEAD;
static double REORDERING_DECAY, CNP_SPACING;

/* Numbered here, named in twin.mrc.modes.Mode and twin.mrc.cc.Cc (both bound): the bind
 * finds each member by its Python name (MODE_NAMES, CC_NAMES) and refuses a type with any
 * other. Each number indexes a table Sender_init picks its entry of once: MODE_RULES (what
 * the mode does where the modes differ, transport.MODE_RULES) and WINDOWS (the cc's
 * window, transport.WINDOWS); nothing after tests the numbers, and the bind refuses a
 * member with no entry in either (tables_complete) */
enum { MODE_MRC, MODE_SPRAY_STATIC, MODE_SINGLE, MODE_COUNT };
enum { CC_NSCC, CC_DELAY, CC_DCQCN, CC_COUNT };
static const char *const MODE_NAMES[MODE_COUNT] = {"MRC", "SPRAY_STATIC", "SINGLE_PATH"};
static const char *const CC_NAMES[CC_COUNT] = {"NSCC", "DELAY", "DCQCN"};
static PyObject *MODE_OF[MODE_COUNT], *CC_OF[CC_COUNT];  /* the members, by number */
enum { PLANES_MAX = 64 };

static PyObject *s_next, *s_sent, *s_sent_unproven, *s_proving, *s_gone, *s_delivered, *s_congested, *s_find,
    *s_unretire, *s_lost, *s_path_lost, *s_set_plane, *s_probe_result, *s_deny, *s_hashed,
    *s_set_unproven_cap, *s_planes_in_use, *s_planes, *s_paths_per_plane, *s_size,
    *s_planes_down, *s_retired, *s_append, *s_start, *s_at, *s_allowance, *s_consume,
    *s_next_send_ns, *s_on_cnp, *s_value, *s_plane, *s_path, *s_dead_since,
    *s_first_loss_ns, *s_rtt_ns, *s_probed, *s_done_ns, *s_move_to_end, *s_pop,
    *s_popitem, *s_get, *s_on_change, *s_mode, *s_cc, *s_mtu, *s_init_window,
    *s_min_window, *s_max_window, *s_target_ns, *s_ecn, *s_trim, *s_pi_gain,
    *s_fair_increase, *s_md_gain, *s_md_max, *s_reorder_ns, *s_rto_min_ns, *s_tail_probe_min_ns,
    *s_retry_limit, *s_loss_limit, *s_trim_limit, *s_backoff_max, *s_p,
    *s_min_time_between_cnps_ns, *s_ring, *s_use_ring, *s_proven, *s_inflight, *s_state,
    *s_delivered_ns, *s_suspects, *s_check,
    *s_clear, *k_loss, *k_first_loss, *k_retire, *k_retransmit, *k_repaired,
    *k_spurious, *k_port, *k_probe, *k_revive, *k_trim, *k_ev_state, *r_per_path,
    *r_rack, *r_nack, *r_timeout, *r_dead_path, *r_trim, *r_probe, *w_ecn, *w_trim, *w_rtt, *a_ok,
    *a_lost, *k_cum, *k_ev, *k_psn, *k_tries, *k_port_state, *k_congestion, *k_bitmap, *k_dup, *k_empty, *k_resent_at_once, *k_alive_why;

/* -- EvSet access ---------------------------------------------------------------------
 * Ev and PathState are slotted dataclasses: their fields are member descriptors at
 * fixed offsets, read and written here in place (a pointer load, not an attribute
 * lookup) when the object is exactly that type, else through getattr. */

typedef struct {
    PyObject **name;
    Py_ssize_t offset;  /* -1: use getattr */
} Field;

static Field F_VALUE = {&s_value, -1}, F_PLANE = {&s_plane, -1}, F_SENT = {&s_sent, -1},
             F_PATH = {&s_path, -1}, F_FIRST_LOSS = {&s_first_loss_ns, -1},
             F_RTT = {&s_rtt_ns, -1}, F_PROBED = {&s_probed, -1}, F_STATE = {&s_state, -1},
             P_PROVEN = {&s_proven, -1}, P_INFLIGHT = {&s_inflight, -1},
             P_DEAD = {&s_dead_since, -1}, P_DELIVERED = {&s_delivered_ns, -1};

static int field_offset(PyObject *type, Field *f) {
    PyObject *d = PyObject_GetAttr(type, *f->name);
    if (!d) return -1;
    if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX) f->offset = m->offset;
    }
    Py_DECREF(d);
    return 0;
}

/* Whether every field the EV set's hot steps touch is a slot (else they call Python) */
static int fields_fast(void) {
    const Field *all[] = {&F_VALUE, &F_PLANE, &F_SENT, &F_PATH, &F_STATE, &P_PROVEN,
                          &P_INFLIGHT, &P_DEAD, &P_DELIVERED};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]->offset < 0) return 0;
    return 1;
}

static inline int fast(PyObject *o, const Field *f, PyObject *type) {
    return f->offset >= 0 && Py_IS_TYPE(o, (PyTypeObject *)type);
}

/* A field of an Ev (type EvType) or PathState (PathType): a new reference. */
static PyObject *fget(PyObject *o, const Field *f, PyObject *type) {
    if (fast(o, f, type)) {
        PyObject *v = *(PyObject **)((char *)o + f->offset);
        if (v) return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, *f->name);
}

/* Set it; steals v (which may be NULL: then fails). */
static int fset(PyObject *o, const Field *f, PyObject *type, PyObject *v) {
    if (!v) return -1;
    if (fast(o, f, type)) {
        PyObject **p = (PyObject **)((char *)o + f->offset), *old = *p;
        *p = v;
        Py_XDECREF(old);
        return 0;
    }
    int rc = PyObject_SetAttr(o, *f->name, v);
    Py_DECREF(v);
    return rc;
}

static int fget_i64(PyObject *o, const Field *f, PyObject *type, int64_t *out) {
    PyObject *v = fget(o, f, type);
    if (!v) return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

#define EV_I64(ev, F, out) fget_i64((ev), &(F), EvType, (out))

/* -- small containers -------------------------------------------------------------- */

typedef struct {
    int64_t a, b;  /* (seq, psn); a single PSN in a */
} Pair;

typedef struct {
    Pair *buf;
    int64_t head, len, cap;  /* cap: 0 or a power of two */
} Deque;

static int dq_grow(Deque *q) {
    int64_t cap = q->cap ? 2 * q->cap : 16;
    Pair *buf = PyMem_Malloc(cap * sizeof *buf);
    if (!buf) { PyErr_NoMemory(); return -1; }
    for (int64_t i = 0; i < q->len; i++) buf[i] = q->buf[(q->head + i) & (q->cap - 1)];
    PyMem_Free(q->buf);
    q->buf = buf;
    q->head = 0;
    q->cap = cap;
    return 0;
}

static inline int dq_push(Deque *q, int64_t a, int64_t b) {
    if (q->len == q->cap && dq_grow(q) < 0) return -1;
    Pair *p = &q->buf[(q->head + q->len++) & (q->cap - 1)];
    p->a = a;
    p->b = b;
    return 0;
}

static inline int dq_push_front(Deque *q, int64_t a, int64_t b) {
    if (q->len == q->cap && dq_grow(q) < 0) return -1;
    q->head = (q->head - 1) & (q->cap - 1);
    q->len++;
    q->buf[q->head].a = a;
    q->buf[q->head].b = b;
    return 0;
}

static inline Pair *dq_front(Deque *q) { return &q->buf[q->head]; }
static inline Pair *dq_at(Deque *q, int64_t i) { return &q->buf[(q->head + i) & (q->cap - 1)]; }

static inline Pair dq_pop(Deque *q) {
    Pair p = q->buf[q->head];
    q->head = (q->head + 1) & (q->cap - 1);
    q->len--;
    return p;
}

static void dq_free(Deque *q) {
    PyMem_Free(q->buf);
    memset(q, 0, sizeof *q);
}

/* Path key -> its send order (the reference's _per_path dict of deques; path_key).
 * Open addressing with tombstones; never resized while a detection walks one of its
 * deques (only a send adds), and nothing but compact() deletes. */
typedef struct {
    int64_t key;
    int state;  /* 0 empty, 1 in use, 2 deleted */
    Deque q;
} EvQ;

typedef struct {
    EvQ *slots;
    int64_t cap, used, deleted;
} EvMap;

static inline uint64_t evmap_hash(int64_t key) {
    return (uint64_t)key * 0x9E3779B97F4A7C15ull;
}

static Deque *evmap_get(EvMap *m, int64_t key) {
    if (!m->cap) return NULL;
    for (uint64_t i = evmap_hash(key) >> 32;; i++) {
        EvQ *e = &m->slots[i & (m->cap - 1)];
        if (e->state == 0) return NULL;
        if (e->state == 1 && e->key == key) return &e->q;
    }
}

static int evmap_resize(EvMap *m, int64_t cap) {
    EvQ *slots = PyMem_Calloc(cap, sizeof *slots), *old = m->slots;
    if (!slots) { PyErr_NoMemory(); return -1; }
    for (int64_t j = 0; j < m->cap; j++) {
        if (old[j].state != 1) continue;
        for (uint64_t i = evmap_hash(old[j].key) >> 32;; i++) {
            EvQ *e = &slots[i & (cap - 1)];
            if (e->state == 0) { *e = old[j]; break; }
        }
    }
    PyMem_Free(old);
    m->slots = slots;
    m->cap = cap;
    m->deleted = 0;
    return 0;
}

/* The deque of `key`, made empty if there is none. */
static Deque *evmap_add(EvMap *m, int64_t key) {
    Deque *q = evmap_get(m, key);
    if (q) return q;
    if ((m->used + m->deleted + 1) * 2 > m->cap) {
        int64_t cap = m->cap ? m->cap : 64;
        while ((m->used + 1) * 4 > cap) cap *= 2;
        if (evmap_resize(m, cap) < 0) return NULL;
    }
    for (uint64_t i = evmap_hash(key) >> 32;; i++) {
        EvQ *e = &m->slots[i & (m->cap - 1)];
        if (e->state == 0) {
            e->state = 1;
            e->key = key;
            memset(&e->q, 0, sizeof e->q);
            m->used++;
            return &e->q;
        }
    }
}

/* Forget `key`'s deque; `keep` leaves its memory to the caller (who walks it). */
static void evmap_del(EvMap *m, int64_t key, int keep) {
    if (!m->cap) return;
    for (uint64_t i = evmap_hash(key) >> 32;; i++) {
        EvQ *e = &m->slots[i & (m->cap - 1)];
        if (e->state == 0) return;
        if (e->state == 1 && e->key == key) {
            if (!keep) dq_free(&e->q);
            e->state = 2;
            m->used--;
            m->deleted++;
            return;
        }
    }
}

static void evmap_free(EvMap *m) {
    for (int64_t j = 0; j < m->cap; j++)
        if (m->slots[j].state == 1) dq_free(&m->slots[j].q);
    PyMem_Free(m->slots);
    memset(m, 0, sizeof *m);
}

/* Python's f"{v:#x}" (PyUnicode_FromFormat has no %llx) */
typedef struct { char s[24]; } Hex;

static Hex hex(long long v) {
    Hex h;
    snprintf(h.s, sizeof h.s, v < 0 ? "-0x%llx" : "0x%llx",
             v < 0 ? -(unsigned long long)v : (unsigned long long)v);
    return h;
}

/* -- the packet the data path sends (transport.TxPacket's fields) -------------------- */

typedef struct {
    PyObject_HEAD
    long long psn, ev, tries;
    unsigned long long va;
    char ack_req;
    PyObject *payload, *imm;
} Packet;

static void Packet_dealloc(Packet *p) {
    Py_XDECREF(p->payload);
    Py_XDECREF(p->imm);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyObject *Packet_repr(Packet *p) {
    Py_ssize_t len = PyObject_Length(p->payload);
    if (len < 0) return NULL;
    return PyUnicode_FromFormat("TxPacket(psn=%lld, ev=%s, va=%llu, len=%zd, tries=%lld, "
                                "ack_req=%s, imm=%R)", p->psn, hex(p->ev).s, p->va,
                                len, p->tries,
                                p->ack_req ? "True" : "False", p->imm);
}

static PyMemberDef Packet_members[] = {
    {"psn", T_LONGLONG, offsetof(Packet, psn), READONLY, NULL},
    {"ev", T_LONGLONG, offsetof(Packet, ev), READONLY, "the EV value it goes on"},
    {"va", T_ULONGLONG, offsetof(Packet, va), READONLY, "where it lands, remote"},
    {"payload", T_OBJECT, offsetof(Packet, payload), READONLY,
     "a memoryview of the source buffer"},
    {"tries", T_LONGLONG, offsetof(Packet, tries), READONLY,
     "transmission number on the wire (0: first copy), modulo 128"},
    {"ack_req", T_BOOL, offsetof(Packet, ack_req), READONLY, NULL},
    {"imm", T_OBJECT, offsetof(Packet, imm), READONLY, "WRITE with immediate: the last packet"},
    {NULL},
};

static PyTypeObject PacketType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "twin.mrc._fastpath.TxPacket",
    .tp_doc = "One data packet to put on the wire (transport.TxPacket's fields).",
    .tp_basicsize = sizeof(Packet),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Packet_dealloc,
    .tp_repr = (reprfunc)Packet_repr,
    .tp_members = Packet_members,
};

/* -- the sender's state -------------------------------------------------------------- */

typedef struct {  /* transport._Tx */
    int64_t psn, offset, length, last_psn;
    PyObject *imm;  /* its message's imm, on its last packet only (else NULL) */
    PyObject *ev;   /* NULL until sent */
    int64_t sent_ns, seq, tries, losses, timeouts, trims;
    PyObject *probed_ev;  /* a tail probe's first copy went on it (NULL: none to judge) */
    int64_t probed_ns;    /* and when */
    char acked, in_flight, present;
} Tx;

typedef struct {  /* a posted write whose records are not all built */
    PyObject *msg, *imm;
    int64_t off, end, psn, last_psn;
} Seg;

typedef struct {
    PyObject *msg;
    int64_t last_psn;
} MsgRef;

typedef struct {  /* a record just acked, kept for loss detection after it is gone */
    int64_t seq, psn, value, sent_ns, key;
} Newly;

typedef struct {
    int64_t packets, bytes, retransmits, lost_per_ev, lost_rack, lost_timeout, lost_nack,
        spurious, acked, acks_unsent, lost_dead_path, ecn_marks, ecn_echoes, nacks_seq,
        nacks_trimmed, trims_ignored, quick_adapts, window_decreases, sack_bits_unsent,
        nacks_stale, trims_stale, cnps_limited, lost_trim, tail_probes, lost_probe;
    int64_t per_plane[PLANES_MAX];
    int plane_order[PLANES_MAX], planes_seen;
} TxCounters;

typedef struct {
    PyObject_HEAD
    PyObject *weakrefs;
    int ready;  /* FP_READY once __init__ ran to its end (fp_util.h) */
    PyObject *cfg, *rp, *pacer, *evs, *log, *acked_bins, *completed, *lost, *single,
        *failed;
    int mode, cc, ecn, trim;  /* mode, cc: numbers, read once (rules, WINDOWS[cc]) */
    const struct mode_rules *rules;  /* MODE_RULES[mode] */
    int64_t mtu, target_ns, reorder_ns, rto_min_ns, tail_probe_min_ns, retry_limit, loss_limit, trim_limit,
        backoff_max;
    double init_window, min_window, max_window, pi_gain, fair_increase, md_gain, md_max;
    double window, base_rtt, srtt, rttvar, reordering_ns, delay_ns;
    int64_t rtt_samples, cnps_ignored, remote_va, local_ports, remote_ports, posted_bytes,
        messages_completed;
    int fabric_marks, stuck;
    PyObject *ring;  /* the EV set's EvRing, called in C (NULL: not an evset.EvSet) */
    int64_t now;
    Tx *txs;
    int64_t tx_cap, ring_lo, ntx;
    Deque order, retx, unsent;
    EvMap per_path;
    Seg *segs;
    int64_t seg_head, seg_len, seg_cap;
    MsgRef *msgs;
    int64_t msg_head, msg_len, msg_cap;
    int64_t built_psn, next_psn, next_msn, sent_high, seq, inflight, cum, rack_sent;
    uint64_t sacked;
    int64_t low, last_cut_ns, reorder_steps, last_md_ns, last_qa_ns, epoch_ns,
        acked_epoch, acked_prev;
    int64_t since_compact;  /* send-order entries added since the last compact() */
    int64_t cnp_gap_ns, last_cnp_ns;  /* dcqcn: CNPs closer than the gap are ignored */
    int cnp_seen;
    TxCounters st;
    int64_t *scratch;  /* PSNs a SACK acks */
    int64_t scratch_cap;
    Newly *newly;
    int64_t newly_cap;
} Sender;

/* What a mode does where the modes differ: transport.ModeRules, one entry a mode in
 * MODE_RULES (below, by the loss steps it calls), the Sender's chosen once (s->rules).
 * Each function is its Python method's namesake; -1 is an error (Python's exception),
 * else as said. Stateless, as the reference's: the Sender's fields stay its own. */
typedef struct mode_rules {
    int tail_probes;  /* the timer sends the oldest first copy again (tail_probe_ns) */
    int backoff;      /* a PSN's timer doubles per timeout in a row (on_timer) */
    /* EvSet.set_unproven_cap's argument (a new reference: an int, or None) */
    PyObject *(*unproven_cap)(double init_window, int64_t paths);
    /* the one EV a single-path QP sends on (a new reference; None: it sprays) */
    PyObject *(*single_ev)(PyObject *evset);
    /* ev carried a packet the fabric marked, trimmed or delayed (why): 0 */
    int (*congested)(PyObject *evs, PyObject *ev, PyObject *why);
    /* the SACK (from EV sack_ev) echoes a CE-marked packet, echoed's copy if known: 0 */
    int (*echoed)(Sender *s, const Tx *echoed, int64_t sack_ev);
    /* a copy declared lost on EV value arrived late: 1 if its retirement was undone */
    int (*unretire)(PyObject *evs, PyObject *value);
    /* a copy sent on ev (of value) was lost (reason): blame it. 0, *died whether its
     * path died now, that path then in *path_out (a new reference) */
    int (*blame)(Sender *s, PyObject *ev, int64_t value, int64_t psn, int64_t sent_ns,
                 PyObject *reason, int64_t now, int *died, PyObject **path_out);
    /* after a loss of tx: fail the QP (QpFailed, -1) if that was one too many; else 0 */
    int (*give_up)(Sender *s, const Tx *tx);
    /* queue the lost PSN to send again: 0 (the PSN, not its Tx: blame, before, called
     * Python) */
    int (*resend)(Sender *s, int64_t psn);
} ModeRules;

/* -- records ------------------------------------------------------------------------- */

static inline Tx *tx_get(Sender *s, int64_t psn) {
    if (!s->tx_cap || psn < 0) return NULL;
    Tx *t = &s->txs[psn & (s->tx_cap - 1)];
    return t->present && t->psn == psn ? t : NULL;
}

static void tx_release(Tx *t) {
    Py_CLEAR(t->ev);
    Py_CLEAR(t->probed_ev);
    Py_CLEAR(t->imm);
    t->present = 0;
}

static int ring_room(Sender *s, int64_t psn) {
    while (s->ring_lo < s->built_psn && !tx_get(s, s->ring_lo)) s->ring_lo++;
    int64_t lo = s->ntx ? s->ring_lo : psn;
    if (psn - lo < s->tx_cap) return 0;
    int64_t cap = s->tx_cap ? s->tx_cap : 1024;
    while (psn - lo >= cap) cap *= 2;
    Tx *txs = PyMem_Calloc(cap, sizeof *txs);
    if (!txs) { PyErr_NoMemory(); return -1; }
    for (int64_t i = 0; i < s->tx_cap; i++)
        if (s->txs[i].present) txs[s->txs[i].psn & (cap - 1)] = s->txs[i];
    PyMem_Free(s->txs);
    s->txs = txs;
    s->tx_cap = cap;
    if (!s->ntx) s->ring_lo = psn;
    return 0;
}

/* -- events ------------------------------------------------------------------------ */

static int event(Sender *s, int64_t now, PyObject *kind, int64_t ev, int64_t psn,
                 PyObject *detail) {
    PyObject *e = PyObject_CallFunction(Event, "LOLLO", (long long)now, kind, (long long)ev,
                                        (long long)psn, detail ? detail : k_empty);
    if (!e) return -1;
    PyObject *r = PyObject_CallMethodOneArg(s->log, s_append, e);
    Py_DECREF(e);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* An event whose detail is formatted (PyUnicode_FromFormat's formats). */
static int eventf(Sender *s, int64_t now, PyObject *kind, int64_t ev, int64_t psn,
                  const char *fmt, ...) {
    va_list va;
    va_start(va, fmt);
    PyObject *detail = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (!detail) return -1;
    int rc = event(s, now, kind, ev, psn, detail);
    Py_DECREF(detail);
    return rc;
}

static PyObject *replaced(PyObject *replacement) {  /* transport._replaced */
    if (replacement == Py_None)
        return PyUnicode_FromString("; not replaced: every path of its plane failed");
    int64_t v;
    if (EV_I64(replacement, F_VALUE, &v) < 0) return NULL;
    return PyUnicode_FromFormat("; replaced by %s", hex(v).s);
}

static inline void count_plane(TxCounters *st, int64_t plane) {
    if (plane < 0 || plane >= PLANES_MAX) return;
    if (!st->per_plane[plane]++) st->plane_order[st->planes_seen++] = (int)plane;
}

/* -- the EV set's per-packet state: EvRing (evset.Rotation) ---------------------------
 * The rotation's cursor, the SKIP EVs it passed over in this rotation, whether a path
 * is still unproven (and the cap it is held to), the per-plane failed paths: the same
 * state and the same public interface as twin.mrc.evset.Rotation, which is its
 * specification. The EvSet holds one (EvSet.ring; the compiled Sender makes the set run
 * on one with EvSet.use_ring) and calls it through that interface on its rare paths;
 * the Sender calls it here, in C, per packet. The slots, the planes down and the paths
 * are the set's, shared (the set changes them on its rare paths); Ev and PathState
 * fields are read by offset (`EvSet access`). */

typedef struct {
    PyObject_HEAD
    int ready;  /* FP_READY once __init__ ran to its end */
    PyObject *active;       /* list of Ev: the slots */
    PyObject *planes_down;  /* set of planes */
    PyObject *paths;        /* dict (plane, t1) -> PathState */
    PyObject *failed;       /* dict plane -> set of paths failed since it last delivered */
    PyObject *skipped;      /* set of the values of SKIP EVs passed over this rotation */
    PyObject *cap_obj;      /* unproven_cap: an int, or None */
    PyObject *on_alive;     /* on_alive(path, why): a dead path delivered (None: unset) */
    int64_t cap;            /* cap_obj as a number (INT64_MAX for None) */
    int64_t cursor;
    int proving;
} EvRing;

static PyTypeObject EvRingType;

static PyObject *call0(PyObject *o, PyObject *name) {
    return PyObject_CallMethodNoArgs(o, name);
}

static int set_i64(PyObject *o, const Field *f, PyObject *type, int64_t v) {
    return fset(o, f, type, PyLong_FromLongLong(v));
}

/* path.proven as 0/1 and path.inflight; -1 on error */
static int path_load(PyObject *path, int *proven, int64_t *inflight) {
    PyObject *p = fget(path, &P_PROVEN, PathType);
    if (!p) return -1;
    int is = PyObject_IsTrue(p);
    Py_DECREF(p);
    if (is < 0 || fget_i64(path, &P_INFLIGHT, PathType, inflight) < 0) return -1;
    *proven = is;
    return 0;
}

/* Rotation.end_of_rotation: the SKIP EVs passed over are GOOD again */
static int ring_end_of_rotation(EvRing *r) {
    if (!PySet_GET_SIZE(r->skipped)) return 0;
    PyObject *active = Py_NewRef(r->active);
    int rc = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(active); i++) {
        PyObject *ev = Py_NewRef(PyList_GET_ITEM(active, i));
        PyObject *state = fget(ev, &F_STATE, EvType), *value = NULL;
        int in = 0;
        if (state && state == EvState_SKIP) {
            value = fget(ev, &F_VALUE, EvType);
            in = value ? PySet_Contains(r->skipped, value) : -1;
            if (in > 0) in = fset(ev, &F_STATE, EvType, Py_NewRef(EvState_GOOD)) < 0 ? -1 : 1;
        }
        Py_XDECREF(value);
        Py_XDECREF(state);
        Py_DECREF(ev);
        if (!state || in < 0) goto out;
    }
    rc = PySet_Clear(r->skipped);
out:
    Py_DECREF(active);
    return rc;
}

/* Rotation.update_proving: whether some live path is still unproven */
static int ring_update_proving(EvRing *r) {
    int proving = 0;
    if (r->cap_obj != Py_None) {
        PyObject *paths = PyDict_Values(r->paths);
        if (!paths) return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(paths) && !proving; i++) {
            PyObject *path = PyList_GET_ITEM(paths, i), *dead;
            int proven;
            int64_t inflight;
            if (path_load(path, &proven, &inflight) < 0
                || !(dead = fget(path, &P_DEAD, PathType))) {
                Py_DECREF(paths);
                return -1;
            }
            proving = !proven && dead == Py_None;
            Py_DECREF(dead);
        }
        Py_DECREF(paths);
    }
    r->proving = proving;
    return 0;
}

/* Rotation.capped: unproven paths carrying their cap now; -1 on error */
static Py_ssize_t ring_capped(EvRing *r) {
    if (r->cap_obj == Py_None) return 0;
    PyObject *paths = PyDict_Values(r->paths);
    if (!paths) return -1;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(paths); i++) {
        int proven;
        int64_t inflight;
        if (path_load(PyList_GET_ITEM(paths, i), &proven, &inflight) < 0) {
            Py_DECREF(paths);
            return -1;
        }
        n += !proven && inflight >= r->cap;
    }
    Py_DECREF(paths);
    return n;
}

/* Rotation.next: the next usable EV in rotation (SKIP ones are passed over once). A new
 * reference, or NULL (NoUsableEv when there is none). */
static PyObject *ring_next(EvRing *r) {
    PyObject *active = Py_NewRef(r->active), *ev = NULL;
    int64_t cursor = r->cursor;
    Py_ssize_t n = PyList_GET_SIZE(active);
    for (Py_ssize_t i = 0; i < 2 * n; i++) {
        if (cursor < 0 || cursor >= PyList_GET_SIZE(active)) {
            PyErr_SetString(PyExc_IndexError, "EvRing.cursor out of its slots");
            goto out;
        }
        PyObject *cand = Py_NewRef(PyList_GET_ITEM(active, cursor));
        if (++cursor == n) {
            cursor = 0;
            if (ring_end_of_rotation(r) < 0) {  /* may turn it SKIP -> GOOD */
                Py_DECREF(cand);
                goto out;
            }
        }
        PyObject *state = fget(cand, &F_STATE, EvType);
        if (!state) { Py_DECREF(cand); goto out; }
        Py_DECREF(state);  /* an enum member: compared by identity only */
        int skip = state == EvState_DENIED || state == EvState_BAD;
        if (!skip && PySet_GET_SIZE(r->planes_down)) {
            PyObject *plane = fget(cand, &F_PLANE, EvType);
            skip = plane ? PySet_Contains(r->planes_down, plane) : -1;
            Py_XDECREF(plane);
            if (skip < 0) { Py_DECREF(cand); goto out; }
        }
        if (!skip && state == EvState_SKIP) {
            PyObject *value = fget(cand, &F_VALUE, EvType);
            int rc = value ? PySet_Add(r->skipped, value) : -1;
            Py_XDECREF(value);
            if (rc < 0) { Py_DECREF(cand); goto out; }
            skip = 1;
        }
        if (!skip && r->proving) {
            PyObject *path = fget(cand, &F_PATH, EvType);
            int proven = 0, rc = path ? 0 : -1;
            int64_t inflight = 0;
            if (path) rc = path_load(path, &proven, &inflight);
            Py_XDECREF(path);
            if (rc < 0) { Py_DECREF(cand); goto out; }
            skip = !proven && inflight >= r->cap;
        }
        if (!skip) {
            ev = cand;
            break;
        }
        Py_DECREF(cand);
    }
    if (!ev) {
        PyObject *sorted = PySequence_List(r->planes_down);
        Py_ssize_t capped = sorted && PyList_Sort(sorted) == 0 ? ring_capped(r) : -1;
        if (capped >= 0)
            PyErr_Format(NoUsableEv, "no usable EV: planes down %R, %zd unproven paths full",
                         sorted, capped);
        Py_XDECREF(sorted);
    }
out:
    r->cursor = cursor;
    Py_DECREF(active);
    return ev;
}

/* The packets outstanding on `ev`'s path while it is not proven, moved by `delta` (+1 a
 * packet sent, -1 one no longer outstanding; never below 0). */
static int unproven_inflight(PyObject *ev, int delta) {
    PyObject *path = fget(ev, &F_PATH, EvType);
    if (!path) return -1;
    int proven, rc;
    int64_t inflight;
    rc = path_load(path, &proven, &inflight);
    if (rc == 0 && !proven && inflight + delta >= 0)
        rc = set_i64(path, &P_INFLIGHT, PathType, inflight + delta);
    Py_DECREF(path);
    return rc;
}

/* Rotation.sent_unproven: a packet goes out on `ev` while some path is unproven */
static int ring_sent_unproven(EvRing *r, PyObject *ev) {
    (void)r;
    return unproven_inflight(ev, +1);
}

/* Rotation.gone: a packet on `ev` is no longer outstanding (acked, or declared lost) */
static int ring_gone(EvRing *r, PyObject *ev) {
    (void)r;
    return unproven_inflight(ev, -1);
}

/* Rotation.delivered: a packet sent on `ev` at `sent_ns` got through: its plane and its
 * path work. A dead path that delivers one sent after its death began goes to
 * on_alive (the EvSet's, which puts its EVs back). */
static int ring_delivered(EvRing *r, PyObject *ev, int64_t sent_ns) {
    PyObject *path = fget(ev, &F_PATH, EvType), *dead = NULL, *plane = NULL, *failed = NULL;
    int64_t delivered_ns;
    int rc = -1;
    if (!path || fget_i64(path, &P_DELIVERED, PathType, &delivered_ns) < 0) goto out;
    if (sent_ns > delivered_ns) {
        if (set_i64(path, &P_DELIVERED, PathType, sent_ns) < 0) goto out;
        if (!(dead = fget(path, &P_DEAD, PathType))) goto out;
        if (dead != Py_None) {
            long long since = PyLong_AsLongLong(dead);
            if (since == -1 && PyErr_Occurred()) goto out;
            if (sent_ns >= since) {
                PyObject *r2 = PyObject_CallFunctionObjArgs(r->on_alive, path, k_alive_why,
                                                            NULL);
                if (!r2) goto out;
                Py_DECREF(r2);
            }
            Py_SETREF(dead, fget(path, &P_DEAD, PathType));
            if (!dead) goto out;
        }
        int proven;
        int64_t inflight;
        if (path_load(path, &proven, &inflight) < 0) goto out;
        if (!proven && dead == Py_None) {
            if (fset(path, &P_PROVEN, PathType, Py_NewRef(Py_True)) < 0
                || set_i64(path, &P_INFLIGHT, PathType, 0) < 0 || ring_update_proving(r) < 0)
                goto out;
        }
    }
    if (!(plane = fget(ev, &F_PLANE, EvType)) || !(failed = PyObject_GetItem(r->failed, plane)))
        goto out;
    int any = PySet_Check(failed) ? PySet_GET_SIZE(failed) > 0 : PyObject_IsTrue(failed);
    if (any < 0) goto out;
    if (any) {
        PyObject *r2 = call0(failed, s_clear);
        if (!r2) goto out;
        Py_DECREF(r2);
    }
    rc = 0;
out:
    Py_XDECREF(failed);
    Py_XDECREF(plane);
    Py_XDECREF(dead);
    Py_XDECREF(path);
    return rc;
}

/* -- EvRing, the Python type (evset.Rotation's interface) -- */

static int EvRing_traverse(EvRing *r, visitproc visit, void *arg) {
    Py_VISIT(r->active); Py_VISIT(r->planes_down); Py_VISIT(r->paths); Py_VISIT(r->failed);
    Py_VISIT(r->skipped); Py_VISIT(r->cap_obj); Py_VISIT(r->on_alive);
    return 0;
}

static int EvRing_clear(EvRing *r) {
    r->ready = r->ready == FP_READY ? FP_CLEARED : r->ready;
    Py_CLEAR(r->active); Py_CLEAR(r->planes_down); Py_CLEAR(r->paths); Py_CLEAR(r->failed);
    Py_CLEAR(r->skipped); Py_CLEAR(r->cap_obj); Py_CLEAR(r->on_alive);
    return 0;
}

static void EvRing_dealloc(EvRing *r) {
    PyObject_GC_UnTrack(r);
    EvRing_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int ring_set_cap(EvRing *r, PyObject *v) {
    int64_t cap = INT64_MAX;
    if (v != Py_None) {
        cap = PyLong_AsLongLong(v);
        if (cap == -1 && PyErr_Occurred()) return -1;
    }
    Py_XSETREF(r->cap_obj, Py_NewRef(v));
    r->cap = cap;
    return 0;
}

static int EvRing_init(EvRing *r, PyObject *args, PyObject *kw) {
    static char *names[] = {"active", "planes_down", "paths", "failed", "unproven_cap",
                            "cursor", "skipped", "proving", NULL};
    PyObject *active, *down, *paths, *failed, *cap, *skipped = NULL;
    long long cursor = 0;
    int proving = 1;
    if (r->ready != FP_BLANK) {
        PyErr_SetString(PyExc_TypeError, "an EvRing is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!O!O|LOp:EvRing", names,
                                     &PyList_Type, &active, &PySet_Type, &down,
                                     &PyDict_Type, &paths, &PyDict_Type, &failed, &cap,
                                     &cursor, &skipped, &proving))
        return -1;
    if (fp_require_bound((PyObject *)r) < 0) return -1;
    r->ready = FP_INITIALISING;
    r->active = Py_NewRef(active);
    r->planes_down = Py_NewRef(down);
    r->paths = Py_NewRef(paths);
    r->failed = Py_NewRef(failed);
    r->on_alive = Py_NewRef(Py_None);
    r->cursor = cursor;
    r->proving = proving;
    if (!(r->skipped = skipped ? PySet_New(skipped) : PySet_New(NULL))
        || ring_set_cap(r, cap) < 0) {
        EvRing_clear(r);
        r->ready = FP_BLANK;
        return -1;
    }
    r->ready = FP_READY;
    return 0;
}

static PyObject *EvRing_next(EvRing *r, PyObject *Py_UNUSED(unused)) {
    FP_REQUIRE_READY(r, NULL);
    return ring_next(r);
}

static PyObject *EvRing_end_of_rotation(EvRing *r, PyObject *Py_UNUSED(unused)) {
    FP_REQUIRE_READY(r, NULL);
    if (ring_end_of_rotation(r) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *EvRing_sent_unproven(EvRing *r, PyObject *ev) {
    FP_REQUIRE_READY(r, NULL);
    if (ring_sent_unproven(r, ev) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *EvRing_gone(EvRing *r, PyObject *ev) {
    FP_REQUIRE_READY(r, NULL);
    if (ring_gone(r, ev) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *EvRing_delivered(EvRing *r, PyObject *args, PyObject *kw) {
    FP_REQUIRE_READY(r, NULL);
    static char *names[] = {"ev", "sent_ns", NULL};
    PyObject *ev;
    long long sent_ns = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|L:delivered", names, &ev, &sent_ns))
        return NULL;
    if (ring_delivered(r, ev, sent_ns) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *EvRing_update_proving(EvRing *r, PyObject *Py_UNUSED(unused)) {
    FP_REQUIRE_READY(r, NULL);
    if (ring_update_proving(r) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *EvRing_capped(EvRing *r, PyObject *Py_UNUSED(unused)) {
    FP_REQUIRE_READY(r, NULL);
    Py_ssize_t n = ring_capped(r);
    return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

static PyMethodDef EvRing_methods[] = {
    {"next", (PyCFunction)EvRing_next, METH_NOARGS, "Rotation.next"},
    {"end_of_rotation", (PyCFunction)EvRing_end_of_rotation, METH_NOARGS,
     "Rotation.end_of_rotation"},
    {"sent_unproven", (PyCFunction)EvRing_sent_unproven, METH_O, "Rotation.sent_unproven"},
    {"gone", (PyCFunction)EvRing_gone, METH_O, "Rotation.gone"},
    {"delivered", (PyCFunction)EvRing_delivered, METH_VARARGS | METH_KEYWORDS,
     "Rotation.delivered"},
    {"update_proving", (PyCFunction)EvRing_update_proving, METH_NOARGS,
     "Rotation.update_proving"},
    {"capped", (PyCFunction)EvRing_capped, METH_NOARGS, "Rotation.capped"},
    {NULL},
};

#define RING_GET(name, expr)                                               \
    static PyObject *EvRing_get_##name(EvRing *r, void *closure) {         \
        (void)closure;                                                     \
        FP_REQUIRE_READY(r, NULL);                                         \
        return expr;                                                       \
    }
RING_GET(active, Py_NewRef(r->active))
RING_GET(planes_down, Py_NewRef(r->planes_down))
RING_GET(paths, Py_NewRef(r->paths))
RING_GET(failed, Py_NewRef(r->failed))
RING_GET(skipped, Py_NewRef(r->skipped))
RING_GET(unproven_cap, Py_NewRef(r->cap_obj))
RING_GET(on_alive, Py_NewRef(r->on_alive))
RING_GET(cursor, PyLong_FromLongLong(r->cursor))
RING_GET(proving, PyBool_FromLong(r->proving))
#undef RING_GET

static int EvRing_set_unproven_cap(EvRing *r, PyObject *v, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, -1);
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "unproven_cap cannot be deleted");
        return -1;
    }
    return ring_set_cap(r, v);
}

static int EvRing_set_on_alive(EvRing *r, PyObject *v, void *closure) {
    (void)closure;
    FP_REQUIRE_READY(r, -1);
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "on_alive cannot be deleted");
        return -1;
    }
    Py_XSETREF(r->on_alive, Py_NewRef(v));
    return 0;
}

static PyGetSetDef EvRing_getset[] = {
    {"active", (getter)EvRing_get_active, NULL, "the slots (the EvSet's list)", NULL},
    {"planes_down", (getter)EvRing_get_planes_down, NULL, "the EvSet's planes down", NULL},
    {"paths", (getter)EvRing_get_paths, NULL, "the EvSet's paths", NULL},
    {"failed", (getter)EvRing_get_failed, NULL,
     "plane -> paths that lost a packet since it last delivered", NULL},
    {"skipped", (getter)EvRing_get_skipped, NULL,
     "values of the SKIP EVs passed over in this rotation", NULL},
    {"unproven_cap", (getter)EvRing_get_unproven_cap, (setter)EvRing_set_unproven_cap,
     "packets an unproven path may carry at once (None: no cap)", NULL},
    {"on_alive", (getter)EvRing_get_on_alive, (setter)EvRing_set_on_alive,
     "on_alive(path, why): a dead path delivered", NULL},
    {"cursor", (getter)EvRing_get_cursor, NULL, "the next slot the rotation looks at", NULL},
    {"proving", (getter)EvRing_get_proving, NULL, "some live path is not proven yet", NULL},
    {NULL},
};

static PyTypeObject EvRingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "twin.mrc._fastpath.EvRing",
    .tp_doc = "EvRing(active, planes_down, paths, failed, unproven_cap, cursor=0, "
              "skipped=(), proving=True): twin.mrc.evset.Rotation in C (the EV set's "
              "per-packet state; see _sender.c)",
    .tp_basicsize = sizeof(EvRing),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)EvRing_init,
    .tp_dealloc = (destructor)EvRing_dealloc,
    .tp_traverse = (traverseproc)EvRing_traverse,
    .tp_clear = (inquiry)EvRing_clear,
    .tp_methods = EvRing_methods,
    .tp_getset = EvRing_getset,
};

/* -- the Sender's calls on the EV set's per-packet state: the EvRing's, in C; where the
 * EV set is not exactly twin.mrc.evset.EvSet (no ring), its own public methods --- */

/* evs.proving, or -1 */
static int proving(Sender *s) {
    if (s->ring) return ((EvRing *)s->ring)->proving;
    PyObject *v = PyObject_GetAttr(s->evs, s_proving);
    if (!v) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static int evs_call1(Sender *s, PyObject *name, PyObject *ev) {
    PyObject *r = PyObject_CallMethodOneArg(s->evs, name, ev);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* EvSet.next. A new reference, or NULL (NoUsableEv when there is none). */
static PyObject *ev_next(Sender *s) {
    return s->ring ? ring_next((EvRing *)s->ring) : call0(s->evs, s_next);
}

/* EvSet.gone */
static int ev_gone(Sender *s, PyObject *ev) {
    return s->ring ? ring_gone((EvRing *)s->ring, ev) : evs_call1(s, s_gone, ev);
}

/* EvSet.delivered */
static int ev_delivered(Sender *s, PyObject *ev, int64_t sent_ns) {
    if (s->ring) return ring_delivered((EvRing *)s->ring, ev, sent_ns);
    PyObject *t = PyLong_FromLongLong(sent_ns);
    if (!t) return -1;
    PyObject *r = PyObject_CallMethodObjArgs(s->evs, s_delivered, ev, t, NULL);
    Py_DECREF(t);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* ev.sent += 1; and EvSet.sent_unproven(ev) while some path is unproven */
static int ev_sent(Sender *s, PyObject *ev, int is_proving) {
    int64_t n;
    if (EV_I64(ev, F_SENT, &n) < 0) return -1;
    if (fset(ev, &F_SENT, EvType, PyLong_FromLongLong(n + 1)) < 0) return -1;
    if (!is_proving) return 0;
    return s->ring ? ring_sent_unproven((EvRing *)s->ring, ev)
                   : evs_call1(s, s_sent_unproven, ev);
}

/* -- the window ---------------------------------------------------------------------- */

static inline double hold_ns(Sender *s) {  /* max(self.srtt, self.cfg.reorder_ns) */
    return fmax(s->srtt, (double)s->reorder_ns);
}

/* Sender.reorder_window_ns: the reordering seen, a quarter of the lowest RTT, the floor */
static int64_t reorder_window_ns(Sender *s) {
    int64_t base = s->reorder_ns, r = (int64_t)s->reordering_ns;
    if (r > base) base = r;
    if (s->rtt_samples) {
        int64_t q = (int64_t)(s->base_rtt / 4);
        if (q > base) base = q;
    }
    if (s->rtt_samples < REORDERING_LEARNED && (int64_t)s->srtt > base) base = (int64_t)s->srtt;
    int64_t w = base * s->reorder_steps, cap = s->rto_min_ns / 2;
    return w < cap ? w : cap;
}

/* max(cfg.rto_min_ns, int(3 * srtt)) */
static inline int64_t rto_now(Sender *s) {
    int64_t rto = (int64_t)(3 * s->srtt);
    return rto < s->rto_min_ns ? s->rto_min_ns : rto;
}

/* Sender.tail_probe_ns: srtt + 4 * rttvar in a mode that sends tail probes, between the
 * floor and the RTO */
static int64_t tail_probe_ns(Sender *s) {
    int64_t rto = rto_now(s);
    if (!s->rules->tail_probes || s->rtt_samples < REORDERING_LEARNED) return rto;
    int64_t t = (int64_t)(s->srtt + 4 * s->rttvar);
    if (t < s->tail_probe_min_ns) t = s->tail_probe_min_ns;
    return t < rto ? t : rto;
}

/* The window, one congestion control (twin.mrc.cc.Cc) at a time: the reference's Window
 * classes (twin.mrc.transport), and WINDOWS below, the table Sender_init picks from. */

/* _delay_step: steered by queueing delay alone */
static inline double delay_step(double w, double delay, double target) {
    if (delay <= target)
        return w + fmax(0.1, (target - delay) / target);
    return w - fmin(w / 4, (delay - target) / delay * 2);
}

/* Window.adjust (delay): on one RTT sample (or one SACK reporting marks) */
static void adjust_delay(Sender *s, double delay, int marked, int64_t now) {
    (void)marked; (void)now;
    double w = delay_step(s->window, delay, (double)s->target_ns);
    s->window = fmin(s->max_window, fmax(s->min_window, w));
}

/* NsccWindow.adjust (nscc, dcqcn): four quadrants once the fabric has marked */
static void adjust_nscc(Sender *s, double delay, int marked, int64_t now) {
    double target = (double)s->target_ns, w = s->window;
    if (!s->fabric_marks) {
        w = delay_step(w, delay, target);
    } else if (delay <= target) {
        if (!marked) w += s->pi_gain * fmax(0.1, (target - delay) / target);
    } else if (marked) {
        if ((double)(now - s->last_md_ns) > hold_ns(s)) {
            s->last_md_ns = now;
            w *= 1 - fmin(s->md_max, s->md_gain * (delay - target) / delay);
            s->st.window_decreases++;
        }
    } else {
        w += s->fair_increase / fmax(w, 1.0);
    }
    s->window = fmin(s->max_window, fmax(s->min_window, w));
}

static void cut_window(Sender *s, int64_t now) {  /* Window.on_loss: as a loss cuts it */
    if ((double)(now - s->last_cut_ns) > hold_ns(s)) {
        s->window = fmax(s->min_window, s->window * 0.85);
        s->last_cut_ns = now;
    }
}

/* NsccWindow.on_trim: QuickAdapt */
static void quick_adapt(Sender *s, int64_t now) {
    if ((double)(now - s->last_qa_ns) <= hold_ns(s)) return;
    s->last_qa_ns = now;
    int64_t achieved = s->acked_prev > s->acked_epoch ? s->acked_prev : s->acked_epoch;
    if ((double)achieved < s->window) {
        s->window = fmax(s->min_window, (double)achieved);
        s->st.quick_adapts++;
    }
}

/* What each cc does to the window (transport.WINDOWS), indexed by Sender.cc; a loss cuts
 * it alike in all (cut_window) */
static const struct window {
    void (*adjust)(Sender *s, double delay, int marked, int64_t now);
    void (*on_trim)(Sender *s, int64_t now);
} WINDOWS[CC_COUNT] = {
    [CC_NSCC] = {adjust_nscc, quick_adapt},
    [CC_DELAY] = {adjust_delay, cut_window},
    [CC_DCQCN] = {adjust_nscc, cut_window},  /* a fixed cap: what moves it is clamped */
};

/* Sender._rtt_sample */
static int rtt_sample(Sender *s, PyObject *ev, int64_t rtt, int64_t now, int marked) {
    if ((double)rtt < s->base_rtt) s->base_rtt = (double)rtt;
    s->rtt_samples++;
    s->reordering_ns *= REORDERING_DECAY;  /* on_sack raises it to what it sees */
    s->rttvar = s->srtt == 0 ? (double)rtt / 2
                             : 0.75 * s->rttvar + 0.25 * fabs(s->srtt - (double)rtt);
    s->srtt = s->srtt == 0 ? (double)rtt : 0.875 * s->srtt + 0.125 * (double)rtt;
    PyObject *old = fget(ev, &F_RTT, EvType);
    if (!old) return -1;
    double ev_rtt = PyFloat_AsDouble(old);
    Py_DECREF(old);
    if (ev_rtt == -1 && PyErr_Occurred()) return -1;
    PyObject *v;
    if (ev_rtt == 0) {
        v = PyLong_FromLongLong(rtt);
        ev_rtt = (double)rtt;
    } else {
        ev_rtt = 0.75 * ev_rtt + 0.25 * (double)rtt;
        v = PyFloat_FromDouble(ev_rtt);
    }
    if (fset(ev, &F_RTT, EvType, v) < 0) return -1;
    double delay = (double)rtt - s->base_rtt;
    s->delay_ns = delay;
    WINDOWS[s->cc].adjust(s, delay, marked, now);
    if (ev_rtt - s->base_rtt > 2 * (double)s->target_ns)
        return s->rules->congested(s->evs, ev, w_rtt);
    return 0;
}

/* Sender._count_acked: packets acked per RTT (QuickAdapt's measure) */
static void count_acked(Sender *s, int64_t count, int64_t now) {
    if ((double)(now - s->epoch_ns) >= hold_ns(s)) {
        s->acked_prev = s->acked_epoch;
        s->acked_epoch = 0;
        s->epoch_ns = now;
    }
    s->acked_epoch += count;
}

/* -- sending ----------------------------------------------------------------------- */

static int is_no_ev(void) {
    if (!PyErr_ExceptionMatches(NoUsableEv)) return 0;
    PyErr_Clear();
    return 1;
}

static int plane_down(Sender *s, PyObject *ev, int64_t *plane) {
    if (EV_I64(ev, F_PLANE, plane) < 0) return -1;
    PyObject *down = PyObject_GetAttr(s->evs, s_planes_down), *p = PyLong_FromLongLong(*plane);
    int r = down && p ? PySequence_Contains(down, p) : -1;
    Py_XDECREF(down);
    Py_XDECREF(p);
    return r;
}

/* EvSet.check, asked while evs.suspects is not empty: an EV on a path that has just
 * lost a packet, to check it with. A new reference (Py_None: no path waits), or NULL. */
static PyObject *check_ev(Sender *s) {
    PyObject *q = PyObject_GetAttr(s->evs, s_suspects);
    if (!q) return NULL;
    int any = PyObject_IsTrue(q);
    Py_DECREF(q);
    if (any <= 0) return any < 0 ? NULL : Py_NewRef(Py_None);
    return call0(s->evs, s_check);
}

/* Sender._pick_ev: the next EV; a retransmission avoids the lost copy's plane when it
 * can. A new reference, or NULL (NoUsableEv when there is none). */
static PyObject *pick_ev(Sender *s, PyObject *avoid) {
    if (s->single != Py_None)  /* RoCE: sent into a port that is down all the same */
        return Py_NewRef(s->single);
    PyObject *ev = ev_next(s);
    if (!ev || avoid == NULL) return ev;
    int64_t avoid_plane, avoid_value, plane, value;
    if (EV_I64(avoid, F_PLANE, &avoid_plane) < 0 || EV_I64(avoid, F_VALUE, &avoid_value) < 0)
        goto fail;
    for (int i = 0; i < 8; i++) {
        if (EV_I64(ev, F_PLANE, &plane) < 0 || EV_I64(ev, F_VALUE, &value) < 0) goto fail;
        if (plane != avoid_plane && value != avoid_value) break;
        Py_SETREF(ev, ev_next(s));
        if (!ev) return NULL;
    }
    if (EV_I64(ev, F_VALUE, &value) < 0) goto fail;
    if (value == avoid_value) {
        /* Not the very EV the copy took: any other will do, if there is one. */
        PyObject *size = PyObject_GetAttr(s->evs, s_size);
        if (!size) goto fail;
        Py_ssize_t n = PyLong_AsSsize_t(size);
        Py_DECREF(size);
        if (n == -1 && PyErr_Occurred()) goto fail;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *other = ev_next(s);
            if (!other) goto fail;
            int64_t v;
            if (EV_I64(other, F_VALUE, &v) < 0) { Py_DECREF(other); goto fail; }
            if (v != avoid_value) {
                Py_DECREF(ev);
                return other;
            }
            Py_DECREF(other);
        }
    }
    return ev;
fail:
    Py_DECREF(ev);
    return NULL;
}

/* The key of ev's path's send order: the PathState object (static SRv6 puts every EV of
 * a path on the same links; the EvSet keeps its paths for its life, so the address names
 * one), or the EV's value where it has none (an EV value is 32 bits, an address not). */
static int path_key(PyObject *ev, int64_t value, int64_t *key) {
    PyObject *path = fget(ev, &F_PATH, EvType);
    if (!path) return -1;
    *key = path == Py_None ? value : (int64_t)(intptr_t)path;
    Py_DECREF(path);
    return 0;
}

/* Record that `tx` leaves on `ev` now (the bookkeeping _emit_new and _resend share):
 * the send order, the path's send order, ev.sent, the path's count while unproven. */
static int sent_on(Sender *s, Tx *tx, PyObject *ev, int64_t value, int64_t now,
                   int is_proving) {
    Py_XSETREF(tx->ev, Py_NewRef(ev));
    tx->sent_ns = now;
    tx->seq = s->seq;
    tx->in_flight = 1;
    if (dq_push(&s->order, s->seq, tx->psn) < 0) return -1;
    int64_t key;
    if (path_key(ev, value, &key) < 0) return -1;
    Deque *q = evmap_add(&s->per_path, key);
    if (!q || dq_push(q, s->seq, tx->psn) < 0) return -1;
    s->seq++;
    return ev_sent(s, ev, is_proving);
}

/* Sender._compact: drop the send orders' entries that name no copy in flight (acked,
 * declared lost, trimmed, resent since). Every reader skips them anyway; this bounds
 * the orders at O(in flight) where nothing reads them from the front. Never called
 * while a detection walks an EV's order (only sends call it). */
static inline int live_entry(Sender *s, Pair e) {
    Tx *tx = tx_get(s, e.b);
    return tx && tx->seq == e.a && tx->in_flight;
}

static void keep_live(Sender *s, Deque *q) {
    int64_t kept = 0;
    for (int64_t i = 0; i < q->len; i++) {
        Pair e = *dq_at(q, i);
        if (live_entry(s, e)) *dq_at(q, kept++) = e;  /* kept <= i: read before written */
    }
    q->len = kept;
}

static void compact(Sender *s) {
    keep_live(s, &s->order);
    EvMap *m = &s->per_path;
    for (int64_t j = 0; j < m->cap; j++) {
        EvQ *e = &m->slots[j];
        if (e->state != 1) continue;
        keep_live(s, &e->q);
        if (!e->q.len) {
            dq_free(&e->q);
            e->state = 2;
            m->used--;
            m->deleted++;
        }
    }
    s->since_compact = 0;
}

static inline void count_appends(Sender *s, int64_t n) {
    s->since_compact += n;
    if (s->since_compact > 2 * s->inflight + COMPACT_AFTER) compact(s);
}

static PyObject *packet(Sender *s, Tx *tx, int64_t value, PyObject *source, int64_t tries,
                        int ack_req) {
    Packet *p = PyObject_New(Packet, &PacketType);
    if (!p) return NULL;
    p->psn = tx->psn;
    p->ev = value;
    p->va = (unsigned long long)s->remote_va + (unsigned long long)tx->offset;
    p->tries = tries;
    p->ack_req = (char)ack_req;
    p->imm = Py_NewRef(tx->psn == tx->last_psn && tx->imm ? tx->imm : Py_None);
    p->payload = PySequence_GetSlice(source, tx->offset, tx->offset + tx->length);
    if (!p->payload) {
        Py_DECREF(p);
        return NULL;
    }
    return (PyObject *)p;
}

/* Where poll's packets go: TxPacket objects appended to a list (poll, for the reference's
 * callers), or FpTx records in an array (fp_sender_poll: the data path fills its slots
 * from them, nothing made per packet). */
typedef struct {
    PyObject *list;          /* TxPackets, or NULL: into `arr` */
    PyObject *source;        /* the list's: what payload views are sliced from */
    FpTx *arr;
    Py_ssize_t n;            /* packets out so far */
    Py_ssize_t source_len;   /* the array's: the source buffer's length */
    int64_t payload_bytes;   /* the array's: its payloads' bytes (the pacer's) */
} Out;

static int out_put(Sender *s, Out *o, Tx *tx, int64_t value, int64_t tries, int ack_req) {
    if (o->list) {
        PyObject *p = packet(s, tx, value, o->source, tries, ack_req);
        if (!p || PyList_Append(o->list, p) < 0) {
            Py_XDECREF(p);
            return -1;
        }
        Py_DECREF(p);
        o->n++;
        return 0;
    }
    FpTx *f = &o->arr[o->n];
    PyObject *imm = tx->psn == tx->last_psn && tx->imm ? tx->imm : Py_None;
    f->has_imm = imm != Py_None;
    f->imm = 0;
    if (f->has_imm) {
        unsigned long long v = PyLong_AsUnsignedLongLong(imm);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "imm out of range");
            return -1;
        }
        if (v > 0xFFFFFFFFu) {
            PyErr_SetString(PyExc_ValueError, "imm is 32 bits");
            return -1;
        }
        f->imm = (uint32_t)v;
    }
    /* the bytes a slice source[offset:offset + length] would view */
    Py_ssize_t start = (Py_ssize_t)tx->offset, stop = (Py_ssize_t)(tx->offset + tx->length);
    f->length = PySlice_AdjustIndices(o->source_len, &start, &stop, 1);
    f->offset = start;
    f->psn = tx->psn;
    f->ev = value;
    f->va = (uint64_t)s->remote_va + (uint64_t)tx->offset;
    f->tries = tries;
    f->ack_req = ack_req;
    o->payload_bytes += f->length;
    o->n++;
    return 0;
}

/* Sender._build: the records of the next `count` posted packets, queued to send */
static int64_t build(Sender *s, int64_t count) {
    int64_t built = 0;
    while (built < count && s->seg_len) {
        Seg *seg = &s->segs[s->seg_head];
        int64_t off = seg->off, end = seg->end, psn = seg->psn;
        while (built < count && off < end) {
            int64_t size = end - off < s->mtu ? end - off : s->mtu;
            if (ring_room(s, psn) < 0) return -1;
            Tx *t = &s->txs[psn & (s->tx_cap - 1)];
            memset(t, 0, sizeof *t);
            t->psn = psn;
            t->offset = off;
            t->length = size;
            t->last_psn = seg->last_psn;
            if (psn == seg->last_psn) t->imm = Py_NewRef(seg->imm);
            t->present = 1;
            s->ntx++;
            if (dq_push(&s->unsent, psn, 0) < 0) return -1;
            off += size;
            psn++;
            built++;
        }
        if (off < end) {
            seg->off = off;
            seg->psn = psn;
        } else {
            Py_CLEAR(seg->msg);
            Py_CLEAR(seg->imm);
            s->seg_head++;
            s->seg_len--;
        }
        s->built_psn = psn;
    }
    return built;
}

/* Sender._emit_new: first transmissions, as many as the window and the budget let go.
 * 1: went on; 0: no EV could be had (the packet is held); -1: an error. */
static int emit_new(Sender *s, int64_t now, Out *out, int64_t budget) {
    int64_t room = budget - out->n, win = (int64_t)s->window - s->inflight;
    if (win < room) room = win;
    int64_t sent = 0, nbytes = 0;
    int ok = 1, is_proving = proving(s), checking = s->single == Py_None;
    if (is_proving < 0) return -1;
    while (sent < room) {
        if (!s->unsent.len) {
            if (!s->seg_len) break;
            int64_t b = build(s, BUILD_CHUNK);
            if (b < 0) { ok = -1; break; }
            if (!b) break;
        }
        int64_t psn = dq_pop(&s->unsent).a;
        Tx *tx = tx_get(s, psn);
        /* a new packet goes on a path that has just lost one, to check it (EvSet.check;
         * retransmissions never do), asked until none waits */
        PyObject *ev = checking ? check_ev(s) : NULL;  /* NULL from it: an error */
        if (ev == Py_None) {  /* none waits: nothing adds one during this call */
            Py_CLEAR(ev);
            checking = 0;
        }
        if (!checking) ev = pick_ev(s, NULL);
        if (!ev) {
            ok = is_no_ev() ? 0 : -1;
            if (!ok) {
                if (dq_push_front(&s->unsent, psn, 0) < 0) ok = -1;
                s->stuck = 1;
            }
            break;
        }
        int64_t value, plane;
        if (EV_I64(ev, F_VALUE, &value) < 0 || EV_I64(ev, F_PLANE, &plane) < 0) {
            Py_DECREF(ev);
            ok = -1;
            break;
        }
        tx->tries = 1;
        if (psn > s->sent_high) s->sent_high = psn;
        int rc = sent_on(s, tx, ev, value, now, is_proving);
        Py_DECREF(ev);
        if (rc < 0) { ok = -1; break; }
        count_plane(&s->st, plane);
        sent++;
        nbytes += tx->length;
        int last = psn == tx->last_psn;
        if (out_put(s, out, tx, value, 0, last || !(s->unsent.len || s->seg_len)) < 0) {
            ok = -1;
            break;
        }
    }
    s->inflight += sent;
    s->st.packets += sent;
    s->st.bytes += nbytes;
    count_appends(s, sent);
    return ok;
}

/* Sender._resend: a packet sent before, again, on another EV, asking for an ack. 0: it
 * went out; -1: an error, or (is_no_ev) no EV could be had */
static int resend(Sender *s, Tx *tx, int64_t now, Out *out) {
    PyObject *before = Py_NewRef(tx->ev);
    PyObject *ev = pick_ev(s, before);
    int rc = -1;
    if (!ev) goto out;
    int64_t value, plane, before_value;
    int is_proving;
    if (EV_I64(ev, F_VALUE, &value) < 0 || EV_I64(ev, F_PLANE, &plane) < 0
        || EV_I64(before, F_VALUE, &before_value) < 0)
        goto out;
    tx->tries++;
    s->inflight++;
    if ((is_proving = proving(s)) < 0 || sent_on(s, tx, ev, value, now, is_proving) < 0)
        goto out;
    count_appends(s, 1);
    s->st.packets++;
    s->st.bytes += tx->length;
    count_plane(&s->st, plane);
    s->st.retransmits++;
    if (eventf(s, now, k_retransmit, value, tx->psn, "before on %s",
               hex(before_value).s) < 0)
        goto out;
    rc = out_put(s, out, tx, value, (tx->tries - 1) & TRY_MASK, 1);
out:
    Py_XDECREF(ev);
    Py_DECREF(before);
    return rc;
}

/* Sender.poll's decisions into `out`: 0, or -1 with an exception set. The pacer (dcqcn)
 * is told the wire bytes of what went: wire_bytes of the TxPackets, or (the array) the
 * same sum made here. */
static int poll_into(Sender *s, int64_t now, int64_t budget, Out *out) {
    if (s->failed != Py_None) return 0;
    s->now = now;
    if (s->pacer != Py_None) {  /* dcqcn: no faster than the QP's rate */
        PyObject *t = PyLong_FromLongLong(now);
        PyObject *a = t ? PyObject_CallMethodOneArg(s->pacer, s_allowance, t) : NULL;
        Py_XDECREF(t);
        if (!a) return -1;
        long long n = PyLong_AsLongLong(a);
        Py_DECREF(a);
        if (n == -1 && PyErr_Occurred()) return -1;
        if (n < budget) budget = n;
        if (budget <= 0) return 0;
    }
    while (out->n < budget && (s->retx.len || s->inflight < (int64_t)s->window)) {
        Tx *tx;
        if (s->retx.len) {
            int64_t psn = dq_pop(&s->retx).a;
            tx = tx_get(s, psn);
            if (!tx || tx->acked || tx->in_flight) continue;
        } else if (s->unsent.len || s->seg_len) {
            if (!s->unsent.len) {
                int64_t b = build(s, BUILD_CHUNK);
                if (b < 0) return -1;
                if (!b) break;
            }
            int r = emit_new(s, now, out, budget);
            if (r < 0) return -1;
            if (r) continue;
            break;
        } else {
            break;
        }
        if (resend(s, tx, now, out) < 0) {
            if (!is_no_ev()) return -1;
            /* every plane is down (or every unproven path is full): hold the packet
             * until an ack, the timer or a port change frees one */
            if (dq_push_front(&s->retx, tx->psn, 0) < 0) return -1;
            s->stuck = 1;
            break;
        }
    }
    if (s->pacer != Py_None && out->n) {
        PyObject *nbytes = out->list ? PyObject_CallOneArg(wire_bytes, out->list)
            : PyLong_FromLongLong(out->payload_bytes + FRAME_OVERHEAD * (int64_t)out->n);
        if (!nbytes) return -1;
        PyObject *t = PyLong_FromLongLong(now);
        PyObject *r = t ? PyObject_CallMethodObjArgs(s->pacer, s_consume, nbytes, t, NULL)
                        : NULL;
        Py_DECREF(nbytes);
        Py_XDECREF(t);
        if (!r) return -1;
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *Sender_poll(Sender *s, PyObject *args, PyObject *kw) {
    FP_REQUIRE_READY(s, NULL);
    static char *names[] = {"now", "source", "budget", NULL};
    long long now, budget = 64;
    PyObject *source;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LO|L:poll", names, &now, &source, &budget))
        return NULL;
    Out out = {.list = PyList_New(0), .source = source};
    if (!out.list) return NULL;
    if (poll_into(s, now, budget, &out) < 0) {
        Py_DECREF(out.list);
        return NULL;
    }
    return out.list;
}

static PyTypeObject SenderType;

int fp_is_sender(PyObject *o) {
    return PyObject_TypeCheck(o, &SenderType);
}

Py_ssize_t fp_sender_poll(PyObject *sender, int64_t now, Py_ssize_t source_len,
                          Py_ssize_t budget, FpTx *arr) {
    if (!fp_is_sender(sender)) {
        PyErr_Format(PyExc_TypeError, "want the compiled Sender, got %.100s",
                     Py_TYPE(sender)->tp_name);
        return -1;
    }
    Sender *s = (Sender *)sender;
    FP_REQUIRE_READY(s, -1);
    Out out = {.arr = arr, .source_len = source_len};
    /* on an error what was decided before it is not sent, as poll's list is not */
    return poll_into(s, now, budget, &out) < 0 ? -1 : out.n;
}

/* A queue kept as an array from `head`: room for one more at its end (moved to the
 * front, or grown). */
static int room_at_end(void **buf, int64_t *head, int64_t len, int64_t *cap, size_t size) {
    if (*head + len < *cap) return 0;
    if (*head) {
        memmove(*buf, (char *)*buf + *head * size, len * size);
        *head = 0;
    }
    if (len < *cap) return 0;
    int64_t more = *cap ? 2 * *cap : 8;
    void *grown = PyMem_Realloc(*buf, more * size);
    if (!grown) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = grown;
    *cap = more;
    return 0;
}

static PyObject *Sender_post(Sender *s, PyObject *args, PyObject *kw) {
    FP_REQUIRE_READY(s, NULL);
    static char *names[] = {"length", "offset", "imm", "now", NULL};
    long long length, offset = 0, now = 0;
    PyObject *imm = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L|LOL:post", names, &length, &offset, &imm,
                                     &now))
        return NULL;
    if (length <= 0) {
        PyErr_SetString(PyExc_ValueError, "a write moves at least one byte");
        return NULL;
    }
    int64_t n = (length + s->mtu - 1) / s->mtu;
    s->posted_bytes += length;
    PyObject *t = PyLong_FromLongLong(now);
    PyObject *r = t ? PyObject_CallMethodOneArg(s->acked_bins, s_start, t) : NULL;
    Py_XDECREF(t);
    if (!r) return NULL;
    Py_DECREF(r);
    int64_t last_psn = s->next_psn + n - 1;
    PyObject *msg = PyObject_CallFunction(Msg, "LLOL", (long long)s->next_msn,
                                          (long long)last_psn, imm, now);
    if (!msg) return NULL;
    if (room_at_end((void **)&s->segs, &s->seg_head, s->seg_len, &s->seg_cap, sizeof *s->segs) < 0
        || room_at_end((void **)&s->msgs, &s->msg_head, s->msg_len, &s->msg_cap,
                       sizeof *s->msgs) < 0) {
        Py_DECREF(msg);
        return NULL;
    }
    int64_t msn = s->next_msn++;
    Seg *seg = &s->segs[s->seg_head + s->seg_len++];
    seg->msg = Py_NewRef(msg);
    seg->imm = Py_NewRef(imm);
    seg->off = offset;
    seg->end = offset + length;
    seg->psn = s->next_psn;
    seg->last_psn = last_psn;
    s->next_psn += n;
    MsgRef *m = &s->msgs[s->msg_head + s->msg_len++];
    m->msg = msg;  /* the reference we made */
    m->last_psn = last_psn;
    return PyLong_FromLongLong(msn);
}

/* -- losses ------------------------------------------------------------------------ */

static int declare_lost(Sender *s, Tx *tx, int64_t now, PyObject *reason);

/* Sender._resend_dead_path: what is still in flight on a path just proved dead */
static int resend_dead_path(Sender *s, PyObject *path, int64_t now) {
    int64_t n = 0;
    for (int64_t p = s->ring_lo; p < s->built_psn; p++) {
        Tx *t = tx_get(s, p);
        if (!t || !t->in_flight) continue;
        PyObject *tp = fget(t->ev, &F_PATH, EvType);
        if (!tp) return -1;
        int same = tp == path;
        Py_DECREF(tp);
        if (!same) continue;
        if (n == s->scratch_cap) {
            int64_t cap = s->scratch_cap ? 2 * s->scratch_cap : 256;
            int64_t *b = PyMem_Realloc(s->scratch, cap * sizeof *b);
            if (!b) { PyErr_NoMemory(); return -1; }
            s->scratch = b;
            s->scratch_cap = cap;
        }
        s->scratch[n++] = p;
    }
    /* declare_lost may grow nothing, but copy: the scratch buffer is the SACK walk's */
    int64_t *psns = PyMem_Malloc((n ? n : 1) * sizeof *psns);
    if (!psns) { PyErr_NoMemory(); return -1; }
    if (n) memcpy(psns, s->scratch, n * sizeof *psns);  /* scratch is NULL until first used */
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        s->st.lost_dead_path++;
        rc = declare_lost(s, tx_get(s, psns[i]), now, r_dead_path);
    }
    PyMem_Free(psns);
    return rc;
}

/* Sender._fail: the QP gives up; `what` happened to tx's PSN, past `limit` */
static int fail_qp(Sender *s, const Tx *tx, PyObject *what, const char *limit) {
    if (!what) return -1;
    PyObject *why = tx->trims
        ? PyUnicode_FromFormat("%U, trimmed %lld time%s (%s)", what, (long long)tx->trims,
                               tx->trims == 1 ? "" : "s", limit)
        : PyUnicode_FromFormat("%U (%s)", what, limit);
    Py_DECREF(what);
    if (!why) return -1;
    Py_SETREF(s->failed, why);
    PyErr_SetObject(QpFailed, why);
    return -1;
}

/* Sender._lost_copy: remember a lost copy (a late arrival undoes its loss), log it */
static int lost_copy(Sender *s, int64_t psn, PyObject *ev, int64_t value, int64_t sent_ns,
                     PyObject *reason, int64_t now) {
    PyObject *key = PyLong_FromLongLong(psn), *r;
    PyObject *rec = Py_BuildValue("(LOL)", (long long)value, reason, (long long)sent_ns);
    if (!key || !rec || PyObject_SetItem(s->lost, key, rec) < 0) {
        Py_XDECREF(key); Py_XDECREF(rec);
        return -1;
    }
    Py_DECREF(rec);
    r = PyObject_CallMethodOneArg(s->lost, s_move_to_end, key);
    Py_DECREF(key);
    if (!r) return -1;
    Py_DECREF(r);
    Py_ssize_t remembered = PyObject_Length(s->lost);
    if (remembered < 0) return -1;
    if (remembered > LOST_REMEMBERED) {
        r = PyObject_CallMethodObjArgs(s->lost, s_popitem, Py_False, NULL);
        if (!r) return -1;
        Py_DECREF(r);
    }
    if (event(s, now, k_loss, value, psn, reason) < 0) return -1;
    int64_t first;
    if (EV_I64(ev, F_FIRST_LOSS, &first) < 0) return -1;
    if (first < 0) {
        if (fset(ev, &F_FIRST_LOSS, EvType, PyLong_FromLongLong(now)) < 0
            || event(s, now, k_first_loss, value, psn, reason) < 0)
            return -1;
    }
    return 0;
}

/* Sender._blame: a copy of psn sent on ev at sent_ns was lost. The EV retires, and its
 * path may be shown dead (its other EVs go now). *died: whether the path died now, its
 * path then in *path_out (a new reference). 0, or -1. */
static int blame(Sender *s, PyObject *ev, int64_t value, int64_t psn, int64_t sent_ns,
                 PyObject *reason, int64_t now, int *died, PyObject **path_out) {
    PyObject *path = NULL, *victims = NULL;
    int rc = -1;
    *died = 0;
    *path_out = NULL;
    PyObject *why = PyUnicode_FromFormat("%U loss of PSN %lld", reason, (long long)psn);
    if (!why) return -1;
    PyObject *res = PyObject_CallMethodObjArgs(s->evs, s_lost, ev, why, NULL);
    Py_DECREF(why);
    if (!res) return -1;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
        PyErr_SetString(PyExc_TypeError, "EvSet.lost gives (retired, replacement)");
        Py_DECREF(res);
        return -1;
    }
    int retired = PyObject_IsTrue(PyTuple_GET_ITEM(res, 0));
    if (retired < 0) { Py_DECREF(res); return -1; }
    if (retired) {
        PyObject *repl = replaced(PyTuple_GET_ITEM(res, 1));
        if (!repl) { Py_DECREF(res); return -1; }
        int e = eventf(s, now, k_retire, value, psn, "%U%U", reason, repl);
        Py_DECREF(repl);
        if (e < 0) { Py_DECREF(res); return -1; }
    }
    Py_DECREF(res);
    path = fget(ev, &F_PATH, EvType);
    if (!path) goto out;
    int alive = 0;
    if (path != Py_None) {
        PyObject *dead = fget(path, &P_DEAD, PathType);
        if (!dead) goto out;
        alive = dead == Py_None;
        Py_DECREF(dead);
    }
    PyObject *t = PyLong_FromLongLong(sent_ns);
    if (!t) goto out;
    victims = PyObject_CallMethodObjArgs(s->evs, s_path_lost, ev, t, NULL);
    Py_DECREF(t);
    /* a tuple of its own: the loop calls Python, which must not empty it under us */
    if (victims) Py_SETREF(victims, PySequence_Tuple(victims));
    if (!victims) goto out;
    Py_ssize_t nv = PyTuple_GET_SIZE(victims);
    for (Py_ssize_t i = 0; i < nv; i++) {
        PyObject *pair = PyTuple_GET_ITEM(victims, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "EvSet.path_lost gives (ev, replacement)s");
            goto out;
        }
        int64_t sib;
        if (EV_I64(PyTuple_GET_ITEM(pair, 0), F_VALUE, &sib) < 0) goto out;
        PyObject *repl = replaced(PyTuple_GET_ITEM(pair, 1));
        if (!repl) goto out;
        int e = eventf(s, now, k_retire, sib, psn, "path dead, as %s showed%U",
                       hex(value).s, repl);
        Py_DECREF(repl);
        if (e < 0) goto out;
    }
    if (alive && path != Py_None) {
        PyObject *dead = fget(path, &P_DEAD, PathType);
        if (!dead) goto out;
        *died = dead != Py_None;
        Py_DECREF(dead);
    }
    if (*died) *path_out = Py_NewRef(path);
    rc = 0;
out:
    Py_XDECREF(victims);
    Py_XDECREF(path);
    return rc;
}

/* -- what a mode does: MODE_RULES ---------------------------------------------------
 * transport.ModeRules and its subclasses, function by function. The rules_* are the
 * base's (spray-static's: spray, selective repeat, never retire nor SKIP an EV); mrc_*
 * and single_* are what MrcRules and SinglePathRules override. */

/* _BLAMELESS: a loss that names no EV. A timeout names no path (a stalled receiver looks
 * the same); a packet resent because its path died was blamed already; a PSN trimmed
 * past trim_limit was trimmed on many paths, not lost on one. */
static inline int blameless(PyObject *reason) {
    return reason == r_timeout || reason == r_dead_path || reason == r_trim;
}

static PyObject *rules_unproven_cap(double init_window, int64_t paths) {
    (void)init_window; (void)paths;
    return Py_NewRef(Py_None);
}

/* mrc holds a path not yet heard from to a share of the first window: -(-iw // paths) */
static PyObject *mrc_unproven_cap(double init_window, int64_t paths) {
    if (paths == 0) {  /* the reference's // raises it; C would trap */
        PyErr_SetString(PyExc_ZeroDivisionError, "the EV set has no paths (planes times "
                        "paths_per_plane is 0)");
        return NULL;
    }
    int64_t iw = (int64_t)init_window, q = -iw / paths;
    if ((-iw % paths) && ((-iw < 0) != (paths < 0))) q--;  /* floor division */
    return PyLong_FromLongLong(-q);
}

static PyObject *rules_single_ev(PyObject *evset) {
    (void)evset;
    return Py_NewRef(Py_None);
}

static PyObject *single_single_ev(PyObject *evset) {  /* one hashed EV, for the QP's life */
    return call0(evset, s_hashed);
}

static int rules_congested(PyObject *evs, PyObject *ev, PyObject *why) {
    (void)evs; (void)ev; (void)why;
    return 0;
}

static int mrc_congested(PyObject *evs, PyObject *ev, PyObject *why) {  /* it SKIPs */
    PyObject *r = PyObject_CallMethodObjArgs(evs, s_congested, ev, why, NULL);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static int rules_echoed(Sender *s, const Tx *echoed, int64_t sack_ev) {
    (void)s; (void)echoed; (void)sack_ev;
    return 0;
}

/* the echoed copy's EV if the SACK names it, else the EV the SACK names, if any */
static int mrc_echoed(Sender *s, const Tx *echoed, int64_t sack_ev) {
    PyObject *ev = NULL;
    int64_t v;
    if (echoed && echoed->ev) {
        if (EV_I64(echoed->ev, F_VALUE, &v) < 0) return -1;
        if (v == sack_ev) ev = Py_NewRef(echoed->ev);
    }
    if (!ev) {
        PyObject *v = PyLong_FromLongLong(sack_ev);
        ev = v ? PyObject_CallMethodOneArg(s->evs, s_find, v) : NULL;
        Py_XDECREF(v);
        if (!ev) return -1;
    }
    int rc = ev == Py_None ? 0 : mrc_congested(s->evs, ev, w_ecn);
    Py_DECREF(ev);
    return rc;
}

static int rules_unretire(PyObject *evs, PyObject *value) {
    (void)evs; (void)value;
    return 0;
}

static int mrc_unretire(PyObject *evs, PyObject *value) {
    PyObject *u = PyObject_CallMethodOneArg(evs, s_unretire, value);
    if (!u) return -1;
    int undone = PyObject_IsTrue(u);
    Py_DECREF(u);
    return undone;
}

static int rules_blame(Sender *s, PyObject *ev, int64_t value, int64_t psn, int64_t sent_ns,
                       PyObject *reason, int64_t now, int *died, PyObject **path_out) {
    (void)s; (void)ev; (void)value; (void)psn; (void)sent_ns; (void)reason; (void)now;
    *died = 0;
    *path_out = NULL;
    return 0;
}

static int mrc_blame(Sender *s, PyObject *ev, int64_t value, int64_t psn, int64_t sent_ns,
                     PyObject *reason, int64_t now, int *died, PyObject **path_out) {
    if (blameless(reason))
        return rules_blame(s, ev, value, psn, sent_ns, reason, now, died, path_out);
    return blame(s, ev, value, psn, sent_ns, reason, now, died, path_out);
}

/* timed out retry_limit times in a row, or lost loss_limit times however found */
static int rules_give_up(Sender *s, const Tx *tx) {
    if (tx->timeouts > s->retry_limit)
        return fail_qp(s, tx, PyUnicode_FromFormat("PSN %lld timed out %lld times in a row",
                                                   (long long)tx->psn,
                                                   (long long)tx->timeouts),
                       "retry limit");
    if (tx->losses > s->loss_limit)
        return fail_qp(s, tx, PyUnicode_FromFormat("PSN %lld lost %lld times",
                                                   (long long)tx->psn, (long long)tx->losses),
                       "loss limit");
    return 0;
}

/* RoCE: retry_limit losses of one PSN, however they were found */
static int single_give_up(Sender *s, const Tx *tx) {
    if (tx->losses > s->retry_limit)
        return fail_qp(s, tx, PyUnicode_FromFormat("PSN %lld lost %lld times",
                                                   (long long)tx->psn, (long long)tx->losses),
                       "retry limit");
    return 0;
}

static int rules_resend(Sender *s, int64_t psn) {  /* selective repeat: itself alone */
    return dq_push(&s->retx, psn, 0) < 0 ? -1 : 0;
}

/* go-back-N: everything in flight from the hole on is sent again */
static int single_resend(Sender *s, int64_t psn) {
    if (dq_push(&s->retx, psn, 0) < 0) return -1;
    for (int64_t p = psn + 1; p <= s->sent_high; p++) {
        Tx *t = tx_get(s, p);
        if (t && t->in_flight) {
            t->in_flight = 0;
            s->inflight--;
            if (dq_push(&s->retx, p, 0) < 0) return -1;
        }
    }
    return 0;
}

/* transport.MODE_RULES, indexed by Sender.mode (the enum's order) */
static const ModeRules MODE_RULES[MODE_COUNT] = {
    [MODE_MRC] = {  /* MrcRules: retire, SKIP, undo, hold an unproven path */
        .tail_probes = 1, .backoff = 1,
        .unproven_cap = mrc_unproven_cap, .single_ev = rules_single_ev,
        .congested = mrc_congested, .echoed = mrc_echoed, .unretire = mrc_unretire,
        .blame = mrc_blame, .give_up = rules_give_up, .resend = rules_resend},
    [MODE_SPRAY_STATIC] = {  /* ModeRules, the base */
        .tail_probes = 1, .backoff = 1,
        .unproven_cap = rules_unproven_cap, .single_ev = rules_single_ev,
        .congested = rules_congested, .echoed = rules_echoed, .unretire = rules_unretire,
        .blame = rules_blame, .give_up = rules_give_up, .resend = rules_resend},
    [MODE_SINGLE] = {  /* SinglePathRules: one EV, go-back-N, no probe, no backoff */
        .tail_probes = 0, .backoff = 0,
        .unproven_cap = rules_unproven_cap, .single_ev = single_single_ev,
        .congested = rules_congested, .echoed = rules_echoed, .unretire = rules_unretire,
        .blame = rules_blame, .give_up = single_give_up, .resend = single_resend},
};

/* Whether every mode and every cc has a whole entry in its table (the bind refuses the
 * module if not: a member added to an enum and not to its table would find NULLs) */
static int tables_complete(void) {
    for (int i = 0; i < MODE_COUNT; i++) {
        const ModeRules *r = &MODE_RULES[i];
        if (!r->unproven_cap || !r->single_ev || !r->congested || !r->echoed
            || !r->unretire || !r->blame || !r->give_up || !r->resend) {
            PyErr_Format(PyExc_RuntimeError, "the compiled Sender has no rules (MODE_RULES) "
                         "for mode %s", MODE_NAMES[i]);
            return -1;
        }
    }
    for (int i = 0; i < CC_COUNT; i++)
        if (!WINDOWS[i].adjust || !WINDOWS[i].on_trim) {
            PyErr_Format(PyExc_RuntimeError, "the compiled Sender has no window (WINDOWS) "
                         "for cc %s", CC_NAMES[i]);
            return -1;
        }
    return 0;
}

/* Sender._declare_lost */
static int declare_lost(Sender *s, Tx *tx, int64_t now, PyObject *reason) {
    if (!tx || tx->acked || !tx->in_flight) return 0;
    tx->in_flight = 0;  /* declared lost, not yet resent */
    s->inflight--;
    tx->losses++;
    PyObject *ev = Py_NewRef(tx->ev), *path = NULL;
    int64_t psn = tx->psn, sent_ns = tx->sent_ns, value;
    int rc = -1, died = 0;
    if (EV_I64(ev, F_VALUE, &value) < 0 || ev_gone(s, ev) < 0) goto out;
    if (lost_copy(s, psn, ev, value, sent_ns, reason, now) < 0) goto out;
    tx->timeouts = reason == r_timeout ? tx->timeouts + 1 : 0;
    const ModeRules *rules = s->rules;
    if (rules->give_up(s, tx) < 0) goto out;  /* QpFailed past the mode's limit */
    /* mrc blames the EV, unless the loss names none (blameless) */
    if (rules->blame(s, ev, value, psn, sent_ns, reason, now, &died, &path) < 0) goto out;
    cut_window(s, now);
    if (rules->resend(s, psn) < 0) goto out;  /* single-path: go-back-N */
    rc = died ? resend_dead_path(s, path, now) : 0;
out:
    Py_XDECREF(path);
    Py_DECREF(ev);
    return rc;
}

/* Sender._probe_showed_lost: the SACK echoes a tail probe's copy of psn, not as a
 * duplicate: the first copy, sent on ev at sent_ns, never arrived. Lost and blamed,
 * the window cut; nothing resent (the PSN is acked). Logged as the loss, then the
 * repair by the probe's copy (on probe_value). */
static int probe_showed_lost(Sender *s, PyObject *ev, int64_t psn, int64_t sent_ns,
                             int64_t probe_value, int64_t now) {
    PyObject *path = NULL;
    int64_t value;
    int died = 0, rc = -1;
    s->st.lost_probe++;
    if (EV_I64(ev, F_VALUE, &value) < 0
        || lost_copy(s, psn, ev, value, sent_ns, r_probe, now) < 0
        || event(s, now, k_repaired, probe_value, psn, NULL) < 0)
        return -1;
    if (s->rules->blame(s, ev, value, psn, sent_ns, r_probe, now, &died, &path) < 0)
        return -1;
    cut_window(s, now);
    rc = died ? resend_dead_path(s, path, now) : 0;
    Py_XDECREF(path);
    return rc;
}

/* Sender._detect_per_path: packets sent on the same path before `tx`, still unacked,
 * are lost (a path's packets keep their order, whichever of its EVs they took) */
static int detect_per_path(Sender *s, const Newly *tx, int64_t now, int64_t covered) {
    int64_t key = tx->key;
    Deque *q = evmap_get(&s->per_path, key);
    if (!q) return 0;
    if (q->len && dq_front(q)->a == tx->seq) {  /* in order on its path: the common case */
        dq_pop(q);
        if (!q->len) evmap_del(&s->per_path, key, 0);
        return 0;
    }
    Deque unjudged = {0};
    int rc = 0;
    while (q->len && dq_front(q)->a < tx->seq) {
        Pair e = dq_pop(q);
        Tx *old = tx_get(s, e.b);
        if (!old || old->seq != e.a || !old->in_flight) continue;  /* acked, lost, trimmed */
        if (e.b >= covered) {
            if ((rc = dq_push(&unjudged, e.a, e.b)) < 0) break;
            continue;
        }
        s->st.lost_per_ev++;
        /* declare_lost adds to no send order and deletes none: q stays valid */
        if ((rc = declare_lost(s, old, now, r_per_path)) < 0) break;
    }
    if (rc == 0) {
        if (q->len && dq_front(q)->a == tx->seq) dq_pop(q);
        for (int64_t i = unjudged.len - 1; i >= 0 && rc == 0; i--)
            rc = dq_push_front(q, dq_at(&unjudged, i)->a, dq_at(&unjudged, i)->b);
    }
    if (rc == 0 && !q->len) evmap_del(&s->per_path, key, 0);
    dq_free(&unjudged);
    return rc;
}

/* Sender._detect_rack: sent a reordering window before the latest delivered: lost. A
 * PSN beyond what the SACK speaks for is passed over (kept), not a stop. */
static int detect_rack(Sender *s, int64_t rack_sent, int64_t now, int64_t covered) {
    int64_t reo = reorder_window_ns(s);
    Deque unjudged = {0};
    int rc = 0;
    while (s->order.len) {
        Pair e = *dq_front(&s->order);
        Tx *tx = tx_get(s, e.b);
        if (!tx || tx->seq != e.a || !tx->in_flight) {  /* acked, lost or resent */
            dq_pop(&s->order);
            continue;
        }
        if (tx->sent_ns + reo >= rack_sent) break;
        dq_pop(&s->order);
        if (e.b >= covered) {
            if ((rc = dq_push(&unjudged, e.a, e.b)) < 0) break;
            continue;
        }
        s->st.lost_rack++;
        if ((rc = declare_lost(s, tx, now, r_rack)) < 0) break;
    }
    for (int64_t i = unjudged.len - 1; i >= 0 && rc == 0; i--)
        rc = dq_push_front(&s->order, dq_at(&unjudged, i)->a, dq_at(&unjudged, i)->b);
    dq_free(&unjudged);
    return rc;
}

/* Sender._late: a copy of `psn` declared lost was delivered after all */
static int late(Sender *s, int64_t psn, int64_t now) {
    PyObject *key = PyLong_FromLongLong(psn);
    if (!key) return -1;
    PyObject *lost = PyObject_CallMethodObjArgs(s->lost, s_pop, key, Py_None, NULL);
    Py_DECREF(key);
    if (!lost) return -1;
    if (lost == Py_None) {
        Py_DECREF(lost);
        return 0;
    }
    PyObject *ev_value = PyTuple_GET_ITEM(lost, 0), *reason = PyTuple_GET_ITEM(lost, 1);
    int64_t value = PyLong_AsLongLong(ev_value),
            sent_ns = PyLong_AsLongLong(PyTuple_GET_ITEM(lost, 2));
    int rc = -1, undone;
    if (PyErr_Occurred()) goto out;
    s->st.spurious++;
    if ((undone = s->rules->unretire(s->evs, ev_value)) < 0) goto out;
    if ((undone ? eventf(s, now, k_spurious, value, psn, "%U; retirement undone", reason)
                : event(s, now, k_spurious, value, psn, reason)) < 0)
        goto out;
    if (!blameless(reason)) {  /* reordering deeper than the window */
        s->reordering_ns = fmax(s->reordering_ns, (double)(s->rack_sent - sent_ns));
        if (s->reorder_steps < REORDER_STEPS_MAX) s->reorder_steps++;
    }
    rc = 0;
out:
    Py_DECREF(lost);
    return rc;
}

/* Sender._names_sent: whether an ACK or NAK could come from the receiver */
static int names_sent(Sender *s, int64_t psn, int has_cum, int64_t cum) {
    int64_t high = s->sent_high;
    if (0 <= psn && psn <= high && (!has_cum || (0 <= cum && cum <= high + 1))) return 1;
    s->st.acks_unsent++;
    return 0;
}

/* -- acks -------------------------------------------------------------------------- */

static int set_plane(Sender *s, int64_t plane, int up) {
    PyObject *p = PyLong_FromLongLong(plane);
    PyObject *r = p ? PyObject_CallMethodObjArgs(s->evs, s_set_plane, p,
                                                 up ? Py_True : Py_False, NULL) : NULL;
    Py_XDECREF(p);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* Sender._port_state: a plane is used only if both ends' ports on it are up */
static int port_state(Sender *s, int64_t remote, int64_t local, int64_t now) {
    int64_t old_remote = s->remote_ports, old_local = s->local_ports, both = remote & local;
    s->remote_ports = remote;
    s->local_ports = local;
    s->stuck = 0;
    PyObject *planes = PyObject_GetAttr(s->evs, s_planes);
    if (!planes) return -1;
    PyObject *seq = PySequence_Fast(planes, "evs.planes");
    Py_DECREF(planes);
    if (!seq) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && rc == 0; i++) {
        int64_t p = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (p == -1 && PyErr_Occurred()) { rc = -1; break; }
        struct { const char *side; int64_t old, new; } sides[] = {
            {"local", old_local, local}, {"peer", old_remote, remote}};
        for (int k = 0; k < 2 && rc == 0; k++)
            if ((sides[k].old ^ sides[k].new) >> p & 1)
                rc = eventf(s, now, k_port, 0, -1, "plane %lld %s (%s)", (long long)p,
                            sides[k].new >> p & 1 ? "up" : "down", sides[k].side);
        if (rc == 0) rc = set_plane(s, p, (int)(both >> p & 1));
    }
    Py_DECREF(seq);
    return rc;
}

/* Sender._marks: the SACK's congestion byte */
static int marks(Sender *s, int64_t congestion, Tx *echoed, int64_t sack_ev) {
    s->st.ecn_marks += congestion & CONGESTION_COUNT;
    int echo = (congestion & CONGESTION_ECHO_CE) != 0;
    s->st.ecn_echoes += echo;
    if (!s->ecn) return 0;
    s->fabric_marks = 1;
    if (echo && s->rules->echoed(s, echoed, sack_ev) < 0) return -1;
    return 1;
}

static int complete(Sender *s, int64_t now);

static int64_t *scratch_push(Sender *s, int64_t n, int64_t psn) {
    if (n == s->scratch_cap) {
        int64_t cap = s->scratch_cap ? 2 * s->scratch_cap : 256;
        int64_t *b = PyMem_Realloc(s->scratch, cap * sizeof *b);
        if (!b) { PyErr_NoMemory(); return NULL; }
        s->scratch = b;
        s->scratch_cap = cap;
    }
    s->scratch[n] = psn;
    return s->scratch;
}

static int newly_cmp(const void *a, const void *b) {
    int64_t x = ((const Newly *)a)->seq, y = ((const Newly *)b)->seq;
    return (x > y) - (x < y);
}

typedef struct {
    int64_t cum, ev, psn, tries, port_state, congestion;
    uint64_t bitmap;
    int dup;
} Sack;

static int read_sack(PyObject *o, Sack *k) {
    PyObject *v;
#define I64(field)                                                    \
    if (!(v = PyObject_GetAttr(o, k_##field))) return -1;             \
    k->field = PyLong_AsLongLong(v);                                  \
    Py_DECREF(v);                                                     \
    if (k->field == -1 && PyErr_Occurred()) return -1;
    I64(cum) I64(ev) I64(psn) I64(tries) I64(port_state) I64(congestion)
#undef I64
    if (!(v = PyObject_GetAttr(o, k_bitmap))) return -1;
    k->bitmap = PyLong_AsUnsignedLongLongMask(v);
    Py_DECREF(v);
    if (k->bitmap == (uint64_t)-1 && PyErr_Occurred()) return -1;
    if (!(v = PyObject_GetAttr(o, k_dup))) return -1;
    k->dup = PyObject_IsTrue(v);
    Py_DECREF(v);
    return k->dup < 0 ? -1 : 0;
}

static PyObject *on_sack(Sender *s, Sack k, long long now);

/* Sender.on_sack */
static PyObject *Sender_on_sack(Sender *s, PyObject *const *args, Py_ssize_t nargs) {
    FP_REQUIRE_READY(s, NULL);
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "on_sack(sack, now)");
        return NULL;
    }
    Sack k;
    long long now = PyLong_AsLongLong(args[1]);
    if ((now == -1 && PyErr_Occurred()) || read_sack(args[0], &k) < 0) return NULL;
    return on_sack(s, k, now);
}

/* Sender.on_sack's work, the SACK read */
static PyObject *on_sack(Sender *s, Sack k, long long now) {
    if (s->failed != Py_None) Py_RETURN_NONE;
    if (!names_sent(s, k.psn, 1, k.cum)) Py_RETURN_NONE;
    s->now = now;
    s->stuck = 0;
    if (k.port_state != s->remote_ports && port_state(s, k.port_state, s->local_ports, now) < 0)
        return NULL;
    int64_t c0 = s->cum, n = 0;
    uint64_t bits;
    if (k.cum > c0) {
        for (int64_t p = c0; p < k.cum; p++)
            if (tx_get(s, p) && !scratch_push(s, n++, p)) return NULL;
        int64_t shift = k.cum - c0;
        s->cum = k.cum;
        s->sacked = shift >= 64 ? 0 : s->sacked >> shift;
        bits = k.bitmap;
    } else {  /* an older SACK (they can pass each other): align it to our cum */
        int64_t shift = c0 - k.cum;
        bits = shift >= 64 ? 0 : k.bitmap >> shift;
    }
    /* Bits for PSNs never sent are not believed: nothing of them was on the wire */
    int64_t unsent = s->sent_high - s->cum > 0 ? s->sent_high - s->cum : 0;
    if (unsent < 64 && (bits >> unsent)) {
        s->st.sack_bits_unsent++;
        bits &= ((uint64_t)1 << unsent) - 1;
    }
    uint64_t fresh = bits & ~s->sacked;  /* only bits no earlier SACK reported */
    s->sacked |= bits;
    int64_t base = s->cum + 1;
    while (fresh) {
        int64_t p = base + __builtin_ctzll(fresh);
        if (tx_get(s, p) && !scratch_push(s, n++, p)) return NULL;
        fresh &= fresh - 1;
    }
    Tx *echoed = tx_get(s, k.psn), *exact = NULL;
    int marked = 0;
    if (k.congestion && (marked = marks(s, k.congestion, echoed, k.ev)) < 0) return NULL;
    if (echoed) {
        if (!scratch_push(s, n++, k.psn)) return NULL;
        if (((echoed->tries - 1) & TRY_MASK) == k.tries) {
            exact = echoed;
            if (!echoed->ev) {
                PyErr_SetString(PyExc_AttributeError, "the echoed PSN was never sent");
                return NULL;
            }
            if (rtt_sample(s, echoed->ev, now - echoed->sent_ns, now, marked) < 0) return NULL;
            marked = 0;  /* the window has seen it */
        }
    }
    if (marked)  /* a mark without an RTT sample */
        WINDOWS[s->cc].adjust(s, s->delay_ns, 1, now);
    if ((k.dup || (echoed && !exact)) && late(s, k.psn, now) < 0) return NULL;
    int64_t rack_sent = -1, count = 0, left_flight = 0, nnew = 0;
    /* a tail probe's copy the SACK echoes, arrived alone: its first copy was lost */
    PyObject *probed_ev = NULL;
    int64_t probed_ns = 0, probed_psn = 0, probed_by = 0;
    /* reordering: how long before the latest-sent packet already delivered a packet
     * delivered now was sent (only where an earlier SACK could have reported it) */
    int64_t rack_before = s->rack_sent, reported = c0 + 1 + BITMAP_BITS, trailed = 0;
    int64_t plane_bytes[PLANES_MAX] = {0};
    int is_proving = proving(s), rc = -1;
    if (is_proving < 0) return NULL;
    PyObject *t = PyLong_FromLongLong(now);
    PyObject *bins = t ? PyObject_CallMethodOneArg(s->acked_bins, s_at, t) : NULL;
    Py_XDECREF(t);
    if (!bins) return NULL;
    if (!PyList_Check(bins)) {
        Py_DECREF(bins);
        PyErr_SetString(PyExc_TypeError, "AckedBins.at gives a list");
        return NULL;
    }
    if (n > s->newly_cap) {
        Newly *b = PyMem_Realloc(s->newly, n * sizeof *b);
        if (!b) { Py_DECREF(bins); return PyErr_NoMemory(); }
        s->newly = b;
        s->newly_cap = n;
    }
    for (int64_t i = 0; i < n; i++) {  /* every PSN this SACK covers, before any loss */
        int64_t psn = s->scratch[i];
        Tx *tx = tx_get(s, psn);
        if (!tx || tx->acked) continue;
        int is_exact = tx == exact;
        tx->acked = 1;
        PyObject *ev = tx->ev;
        int64_t value, plane;
        if (EV_I64(ev, F_VALUE, &value) < 0 || EV_I64(ev, F_PLANE, &plane) < 0) goto out;
        if (tx->in_flight) {
            tx->in_flight = 0;
            left_flight++;
            if (is_proving && ev_gone(s, ev) < 0) goto out;
        }
        count++;
        if (plane >= 0 && plane < PLANES_MAX) plane_bytes[plane] += tx->length;
        if (tx->probed_ev && is_exact && !k.dup) {
            /* its first copy's loss, then this repair, are logged after the walk */
            Py_XSETREF(probed_ev, tx->probed_ev);  /* the record's reference, taken */
            tx->probed_ev = NULL;
            probed_ns = tx->probed_ns;
            probed_psn = psn;
            probed_by = value;
        } else if (tx->tries > 1 && event(s, now, k_repaired, value, psn, NULL) < 0) {
            goto out;
        }
        /* Only an ack that names one transmission can judge the packets sent before it
         * (Karn): a first transmission, or the copy the SACK echoes. */
        if (tx->tries == 1 || is_exact) {
            if (tx->sent_ns > rack_sent) rack_sent = tx->sent_ns;
            if (tx->sent_ns < rack_before && rack_before - tx->sent_ns > trailed
                && (psn < reported || is_exact))
                trailed = rack_before - tx->sent_ns;
            int64_t key;
            if (path_key(ev, value, &key) < 0) goto out;
            s->newly[nnew++] = (Newly){tx->seq, psn, value, tx->sent_ns, key};
            if (ev_delivered(s, ev, tx->sent_ns) < 0) goto out;
        }
        tx_release(tx);  /* txs.pop */
        s->ntx--;
        if (is_exact) exact = NULL;
    }
    for (int64_t p = 0; p < PLANES_MAX; p++) {
        if (!plane_bytes[p] || p >= PyList_GET_SIZE(bins)) continue;
        PyObject *old = Py_NewRef(PyList_GET_ITEM(bins, p));  /* held: + may run Python */
        PyObject *add = PyLong_FromLongLong(plane_bytes[p]);
        PyObject *sum = add ? PyNumber_Add(old, add) : NULL;
        Py_DECREF(old);
        Py_XDECREF(add);
        if (!sum || PyList_SetItem(bins, p, sum) < 0) goto out;
    }
    s->inflight -= left_flight;
    s->st.acked += count;
    count_acked(s, count, now);
    if ((double)trailed > s->reordering_ns) s->reordering_ns = (double)trailed;
    /* A SACK speaks for PSNs below cum + 1 + 64 only */
    int64_t covered = k.cum + 1 + BITMAP_BITS;
    if (probed_ev && probe_showed_lost(s, probed_ev, probed_psn, probed_ns, probed_by, now) < 0)
        goto out;
    if (nnew > 1) qsort(s->newly, nnew, sizeof *s->newly, newly_cmp);
    for (int64_t i = 0; i < nnew; i++)
        if (detect_per_path(s, &s->newly[i], now, covered) < 0) goto out;
    if (rack_sent >= 0) {
        if (rack_sent > s->rack_sent) s->rack_sent = rack_sent;
        if (detect_rack(s, rack_sent, now, covered) < 0) goto out;
    }
    if (complete(s, now) < 0) goto out;
    rc = 0;
out:
    Py_XDECREF(probed_ev);
    Py_DECREF(bins);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* Sender._lowest_unacked */
/* loop._unwrap24: the full PSN nearest `ref` whose low 24 bits are `psn` */
static int64_t unwrap24(int64_t psn, int64_t ref) {
    int64_t full = (ref & ~(int64_t)0xFFFFFF) | psn;
    if (full < ref - (1 << 23)) full += 1 << 24;
    else if (full > ref + (1 << 23) && full >= 1 << 24) full -= 1 << 24;
    return full;
}

int fp_sender_on_ack(PyObject *sender, const FpAck *a, int64_t now) {
    if (!fp_is_sender(sender)) {
        PyErr_Format(PyExc_TypeError, "want the compiled Sender, got %.100s",
                     Py_TYPE(sender)->tp_name);
        return -1;
    }
    Sender *s = (Sender *)sender;
    FP_REQUIRE_READY(s, -1);
    /* what loop._on_ack makes of a wire.Ack: the SackReport, its PSNs unwrapped */
    Sack k = {.cum = unwrap24(a->cum, s->cum), .ev = a->ev, .tries = a->tries,
              .port_state = a->port_state, .congestion = a->congestion,
              .bitmap = a->bitmap, .dup = a->dup};
    k.psn = unwrap24(a->psn, k.cum);
    PyObject *r = on_sack(s, k, now);
    if (r) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyErr_ExceptionMatches(QpFailed)) return -1;
    PyErr_Clear();  /* the QP failed: the loop sees it (failed), as _on_ack does */
    return 1;
}

int fp_sender_settled(PyObject *sender) {
    Sender *s = (Sender *)sender;
    return s->ready == FP_READY && ((!s->ntx && !s->seg_len) || s->failed != Py_None);
}

static int64_t lowest_unacked(Sender *s) {
    int64_t low = s->low;
    while (low < s->built_psn && !tx_get(s, low)) low++;
    s->low = low;
    return low;
}

/* Sender._complete */
static int complete(Sender *s, int64_t now) {
    while (s->msg_len && s->msgs[s->msg_head].last_psn < lowest_unacked(s)) {
        PyObject *msg = s->msgs[s->msg_head].msg;
        s->msg_head++;
        s->msg_len--;
        PyObject *t = PyLong_FromLongLong(now);
        int rc = t ? PyObject_SetAttr(msg, s_done_ns, t) : -1;
        Py_XDECREF(t);
        PyObject *r = rc < 0 ? NULL : PyObject_CallMethodOneArg(s->completed, s_append, msg);
        Py_DECREF(msg);
        if (!r) return -1;
        Py_DECREF(r);
        s->messages_completed++;
    }
    return 0;
}

/* Sender.on_nack */
static PyObject *Sender_on_nack(Sender *s, PyObject *args, PyObject *kw) {
    FP_REQUIRE_READY(s, NULL);
    static char *names[] = {"psn", "now", "trimmed", "ev", "tries", NULL};
    long long psn, now, ev = -1, tries = -1;
    int trimmed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LL|pLL:on_nack", names, &psn, &now, &trimmed,
                                     &ev, &tries))
        return NULL;
    if (s->failed != Py_None || !names_sent(s, psn, 0, 0)) Py_RETURN_NONE;
    s->now = now;
    Tx *tx = tx_get(s, psn);
    if (trimmed) {  /* Sender._on_trimmed: congested, not broken: resend at once */
        if (!s->trim) {
            s->st.trims_ignored++;
            Py_RETURN_NONE;
        }
        int64_t value = -1;
        if (tx && tx->ev && EV_I64(tx->ev, F_VALUE, &value) < 0) return NULL;
        if (!tx || !tx->in_flight || !tx->ev || value != ev
            || ((tx->tries - 1) & TRY_MASK) != tries) {
            s->st.trims_ignored++;
            s->st.trims_stale++;
            Py_RETURN_NONE;
        }
        s->st.nacks_trimmed++;
        if (++tx->trims >= s->trim_limit) {
            /* trimmed on path after path: a loss, which the QP's loss limit bounds */
            s->st.lost_trim++;
            s->stuck = 0;
            if (declare_lost(s, tx, now, r_trim) < 0) return NULL;
            Py_RETURN_NONE;
        }
        PyObject *e = Py_NewRef(tx->ev);
        tx->in_flight = 0;
        s->inflight--;
        int rc = ev_gone(s, e);
        s->stuck = 0;
        if (rc == 0) rc = event(s, now, k_trim, value, psn, k_resent_at_once);
        if (rc == 0) rc = s->rules->congested(s->evs, e, w_trim);
        Py_DECREF(e);
        if (rc < 0) return NULL;
        WINDOWS[s->cc].on_trim(s, now);  /* nscc: QuickAdapt; else as a loss */
        if (dq_push_front(&s->retx, psn, 0) < 0) return NULL;
        Py_RETURN_NONE;
    }
    s->st.nacks_seq++;
    if (!tx || !tx->in_flight) {  /* acked, or lost and not yet resent */
        s->st.nacks_stale++;
        Py_RETURN_NONE;
    }
    /* Only the first copy, and only once a packet sent a reordering window after it
     * has arrived (Karn; a deep hole a sprayed burst reaches without loss) */
    if (tx->tries > 1 || tx->sent_ns + reorder_window_ns(s) >= s->rack_sent)
        Py_RETURN_NONE;
    s->st.lost_nack++;
    if (declare_lost(s, tx, now, r_nack) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Sender.on_timer: anything outstanding longer than the RTO is lost */
static PyObject *Sender_on_timer(Sender *s, PyObject *arg) {
    FP_REQUIRE_READY(s, NULL);
    long long now = PyLong_AsLongLong(arg);
    if (now == -1 && PyErr_Occurred()) return NULL;
    s->now = now;
    s->stuck = 0;
    int64_t rto = rto_now(s), probe = tail_probe_ns(s);  /* == rto in single-path */
    int backoff = s->rules->backoff;  /* RoCE's (single-path's) timer does not back off */
    int64_t judgeable = s->cum + 1 + BITMAP_BITS, n = 0;
    Tx *tail = NULL;  /* the tail probe: the oldest first copy past `probe`, not the RTO */
    while (s->order.len) {
        Pair e = *dq_front(&s->order);
        Tx *tx = tx_get(s, e.b);
        if (tx && tx->seq == e.a && tx->in_flight) break;
        dq_pop(&s->order);
    }
    for (int64_t i = 0; i < s->order.len; i++) {
        Pair *e = dq_at(&s->order, i);
        Tx *tx = tx_get(s, e->b);
        if (!tx || tx->seq != e->a || !tx->in_flight || e->b >= judgeable) continue;
        int64_t waited = now - tx->sent_ns;
        if (waited < probe) break;  /* in send order: nothing later waited the probe's */
        if (waited < rto) {
            if (!tail && tx->tries == 1) tail = tx;
            continue;
        }
        int64_t shift = tx->timeouts < s->backoff_max ? tx->timeouts : s->backoff_max;
        if (backoff && waited < (rto << shift)) continue;  /* backed off */
        if (!scratch_push(s, n++, e->b)) return NULL;
    }
    if (tail) {  /* sent again by the next poll, first in line; not lost */
        s->st.tail_probes++;
        Py_XSETREF(tail->probed_ev, Py_NewRef(tail->ev));
        tail->probed_ns = tail->sent_ns;
        tail->in_flight = 0;
        s->inflight--;
        if (ev_gone(s, tail->ev) < 0 || dq_push_front(&s->retx, tail->psn, 0) < 0)
            return NULL;
    }
    int64_t *psns = PyMem_Malloc((n ? n : 1) * sizeof *psns);
    if (!psns) return PyErr_NoMemory();
    if (n) memcpy(psns, s->scratch, n * sizeof *psns);  /* scratch is NULL until first used */
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        s->st.lost_timeout++;
        rc = declare_lost(s, tx_get(s, psns[i]), now, r_timeout);
    }
    PyMem_Free(psns);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Sender_on_cnp(Sender *s, PyObject *arg) {
    FP_REQUIRE_READY(s, NULL);
    long long now = PyLong_AsLongLong(arg);
    if (now == -1 && PyErr_Occurred()) return NULL;
    if (s->rp == Py_None) {
        s->cnps_ignored++;
        Py_RETURN_NONE;
    }
    if (s->cnp_seen && now - s->last_cnp_ns < s->cnp_gap_ns) {
        s->st.cnps_limited++;  /* sooner than any notification point sends one */
        Py_RETURN_NONE;
    }
    s->cnp_seen = 1;
    s->last_cnp_ns = now;
    return PyObject_CallMethodOneArg(s->rp, s_on_cnp, arg);
}

static PyObject *Sender_wants_to_send(Sender *s, PyObject *args, PyObject *kw) {
    FP_REQUIRE_READY(s, NULL);
    static char *names[] = {"now", NULL};
    PyObject *now = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wants_to_send", names, &now)) return NULL;
    int want = s->failed == Py_None && !s->stuck
        && (s->retx.len || ((s->unsent.len || s->seg_len)
                            && s->inflight < (int64_t)s->window));
    if (!want || s->pacer == Py_None || now == Py_None) return PyBool_FromLong(want);
    PyObject *a = PyObject_CallMethodOneArg(s->pacer, s_allowance, now);
    if (!a) return NULL;
    long long n = PyLong_AsLongLong(a);
    Py_DECREF(a);
    if (n == -1 && PyErr_Occurred()) return NULL;
    return PyBool_FromLong(n > 0);
}

static PyObject *Sender_next_send_ns(Sender *s, PyObject *arg) {
    FP_REQUIRE_READY(s, NULL);
    if (s->pacer == Py_None) Py_RETURN_NONE;
    return PyObject_CallMethodOneArg(s->pacer, s_next_send_ns, arg);
}

static PyObject *Sender_set_local_ports(Sender *s, PyObject *args, PyObject *kw) {
    FP_REQUIRE_READY(s, NULL);
    static char *names[] = {"bitmap", "now", NULL};
    long long bitmap, now = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L|L:set_local_ports", names, &bitmap, &now))
        return NULL;
    if (bitmap != s->local_ports) {
        s->now = now;
        if (port_state(s, s->remote_ports, bitmap, now) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* Sender.probe_result: a background probe's answer (or its timeout) on a retired EV */
static PyObject *Sender_probe_result(Sender *s, PyObject *args) {
    FP_REQUIRE_READY(s, NULL);
    PyObject *value, *ok_obj;
    long long now;
    if (!PyArg_ParseTuple(args, "OOL:probe_result", &value, &ok_obj, &now)) return NULL;
    int ok = PyObject_IsTrue(ok_obj);
    if (ok < 0) return NULL;
    s->now = now;
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) return NULL;
    PyObject *retired = PyObject_GetAttr(s->evs, s_retired);
    if (!retired) return NULL;
    PyObject *ev = PyObject_CallMethodObjArgs(retired, s_get, value, NULL);
    Py_DECREF(retired);
    if (!ev) return NULL;
    if (ev != Py_None) {
        PyObject *answer = ok ? a_ok : a_lost;
        PyObject *probed = fget(ev, &F_PROBED, EvType);
        int same = probed ? PyObject_RichCompareBool(probed, answer, Py_EQ) : -1;
        Py_XDECREF(probed);
        if (same < 0 || ((ok || !same) && event(s, now, k_probe, v, -1, answer) < 0)
            || fset(ev, &F_PROBED, EvType, Py_NewRef(answer)) < 0) {
            Py_DECREF(ev);
            return NULL;
        }
    }
    Py_DECREF(ev);
    PyObject *revived = PyObject_CallMethodObjArgs(s->evs, s_probe_result, value,
                                                   ok ? Py_True : Py_False, NULL);
    if (!revived) return NULL;
    int r = PyObject_IsTrue(revived);
    if (r < 0) {
        Py_DECREF(revived);
        return NULL;
    }
    if (r > 0) {
        s->stuck = 0;
        if (event(s, now, k_revive, v, -1, NULL) < 0) {
            Py_DECREF(revived);
            return NULL;
        }
    }
    return revived;
}

static PyObject *Sender_deny(Sender *s, PyObject *args) {
    FP_REQUIRE_READY(s, NULL);
    PyObject *values;
    long long now;
    if (!PyArg_ParseTuple(args, "OL:deny", &values, &now)) return NULL;
    s->now = now;
    s->stuck = 0;
    PyObject *it = PyObject_GetIter(values), *v;
    if (!it) return NULL;
    while ((v = PyIter_Next(it))) {
        PyObject *r = PyObject_CallMethodOneArg(s->evs, s_deny, v);
        Py_DECREF(v);
        if (!r) break;
        Py_DECREF(r);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Sender_planes_in_use(Sender *s, PyObject *Py_UNUSED(ignored)) {
    FP_REQUIRE_READY(s, NULL);
    if (s->single == Py_None) return call0(s->evs, s_planes_in_use);
    int64_t plane;
    int down = plane_down(s, s->single, &plane);
    if (down < 0) return NULL;
    return down ? PyList_New(0) : Py_BuildValue("[L]", (long long)plane);
}

static PyObject *Sender_reorder_window_ns(Sender *s, PyObject *Py_UNUSED(ignored)) {
    FP_REQUIRE_READY(s, NULL);
    return PyLong_FromLongLong(reorder_window_ns(s));
}

static PyObject *Sender_tail_probe_ns(Sender *s, PyObject *Py_UNUSED(ignored)) {
    FP_REQUIRE_READY(s, NULL);
    return PyLong_FromLongLong(tail_probe_ns(s));
}

/* The EV set's change handler calls this (through transport.weakly): the change is
 * logged at the time of the call being handled. */
static PyObject *Sender_ev_changed(Sender *s, PyObject *args) {
    if (!(s->ready == FP_INITIALISING && s->log)) FP_REQUIRE_READY(s, NULL);
    PyObject *ev, *old, *new, *why;
    if (!PyArg_ParseTuple(args, "OOOO:ev_changed", &ev, &old, &new, &why)) return NULL;
    int64_t value;
    if (EV_I64(ev, F_VALUE, &value) < 0) return NULL;
    if (eventf(s, s->now, k_ev_state, value, -1, "%S->%S: %S", old, new, why) < 0) return NULL;
    Py_RETURN_NONE;
}

/* -- attributes -------------------------------------------------------------------- */

static PyObject *get_stats(Sender *s, void *c) {
    FP_REQUIRE_READY(s, NULL);
    (void)c;
    const TxCounters *t = &s->st;
    PyObject *per_plane = PyDict_New(), *kw = NULL, *out = NULL, *empty = NULL;
    if (!per_plane) return NULL;
    for (int i = 0; i < t->planes_seen; i++) {
        PyObject *k = PyLong_FromLong(t->plane_order[i]);
        PyObject *v = PyLong_FromLongLong(t->per_plane[t->plane_order[i]]);
        int rc = k && v ? PyDict_SetItem(per_plane, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc < 0) goto out;
    }
    kw = Py_BuildValue(
        "{sLsLsLsLsLsLsLsLsLsOsLsLsLsLsLsLsLsLsL}", "packets", (long long)t->packets,
        "bytes", (long long)t->bytes, "retransmits", (long long)t->retransmits,
        "lost_per_ev", (long long)t->lost_per_ev, "lost_rack", (long long)t->lost_rack,
        "lost_timeout", (long long)t->lost_timeout, "lost_nack", (long long)t->lost_nack,
        "spurious", (long long)t->spurious, "acked", (long long)t->acked,
        "per_plane_packets", per_plane, "acks_unsent", (long long)t->acks_unsent,
        "lost_dead_path", (long long)t->lost_dead_path, "ecn_marks", (long long)t->ecn_marks,
        "ecn_echoes", (long long)t->ecn_echoes, "nacks_seq", (long long)t->nacks_seq,
        "nacks_trimmed", (long long)t->nacks_trimmed,
        "trims_ignored", (long long)t->trims_ignored,
        "quick_adapts", (long long)t->quick_adapts,
        "window_decreases", (long long)t->window_decreases);
    if (kw) {
        struct { const char *name; int64_t v; } more[] = {
            {"sack_bits_unsent", t->sack_bits_unsent}, {"nacks_stale", t->nacks_stale},
            {"trims_stale", t->trims_stale}, {"cnps_limited", t->cnps_limited},
            {"lost_trim", t->lost_trim}, {"tail_probes", t->tail_probes},
            {"lost_probe", t->lost_probe}};
        for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
            PyObject *v = PyLong_FromLongLong(more[i].v);
            int rc = v ? PyDict_SetItemString(kw, more[i].name, v) : -1;
            Py_XDECREF(v);
            if (rc < 0) goto out;
        }
    }
    if (!kw || !(empty = PyTuple_New(0))) goto out;
    out = PyObject_Call(SenderStats, empty, kw);
out:
    Py_XDECREF(empty);
    Py_XDECREF(kw);
    Py_DECREF(per_plane);
    return out;
}

#define GET_I64(name, expr)                                         \
    static PyObject *get_##name(Sender *s, void *c) {               \
        (void)c;                                                    \
        FP_REQUIRE_READY(s, NULL);                                  \
        return PyLong_FromLongLong(expr);                           \
    }
GET_I64(cum, s->cum)
GET_I64(rtt_samples, s->rtt_samples)
GET_I64(cnps_ignored, s->cnps_ignored)
GET_I64(remote_va, s->remote_va)
GET_I64(local_ports, s->local_ports)
GET_I64(remote_ports, s->remote_ports)
GET_I64(posted_bytes, s->posted_bytes)
GET_I64(messages_completed, s->messages_completed)
GET_I64(inflight, s->inflight)
GET_I64(records, s->ntx)
GET_I64(record_slots, s->tx_cap)
GET_I64(per_path_queues, s->per_path.used)
GET_I64(send_order_len, s->order.len)
#undef GET_I64

static PyObject *get_per_path_entries(Sender *s, void *c) {
    (void)c;
    FP_REQUIRE_READY(s, NULL);
    int64_t n = 0;
    for (int64_t j = 0; j < s->per_path.cap; j++)
        if (s->per_path.slots[j].state == 1) n += s->per_path.slots[j].q.len;
    return PyLong_FromLongLong(n);
}

#define FLOAT_ATTR(name)                                            \
    static PyObject *get_##name(Sender *s, void *c) {               \
        (void)c;                                                    \
        FP_REQUIRE_READY(s, NULL);                                  \
        return PyFloat_FromDouble(s->name);                         \
    }                                                               \
    static int set_##name(Sender *s, PyObject *v, void *c) {        \
        (void)c;                                                    \
        FP_REQUIRE_READY(s, -1);                                    \
        double x = v ? PyFloat_AsDouble(v) : -1;                    \
        if (!v) PyErr_SetString(PyExc_AttributeError, #name);      \
        if (x == -1 && PyErr_Occurred()) return -1;                 \
        s->name = x;                                                \
        return 0;                                                   \
    }
FLOAT_ATTR(window)
FLOAT_ATTR(srtt)
FLOAT_ATTR(rttvar)
FLOAT_ATTR(base_rtt)
FLOAT_ATTR(reordering_ns)
FLOAT_ATTR(delay_ns)
#undef FLOAT_ATTR

static PyObject *get_idle(Sender *s, void *c) {
    FP_REQUIRE_READY(s, NULL);
    (void)c;
    return PyBool_FromLong(!s->ntx && !s->seg_len);
}

static PyObject *get_fabric_marks(Sender *s, void *c) {
    FP_REQUIRE_READY(s, NULL);
    (void)c;
    return PyBool_FromLong(s->fabric_marks);
}

/* An object field (what were members, which would read None on a blank Sender);
 * `closure` is its offset in Sender. */
static PyObject *get_object(Sender *s, void *closure) {
    FP_REQUIRE_READY(s, NULL);
    return Py_NewRef(*(PyObject **)((char *)s + (Py_ssize_t)closure));
}

#define OBJECT_ATTR(name, field, doc) \
    {name, (getter)get_object, NULL, doc, (void *)offsetof(Sender, field)},

static PyGetSetDef Sender_getset[] = {
    OBJECT_ATTR("cfg", cfg, "its SenderConfig")
    OBJECT_ATTR("rp", rp, "dcqcn's reaction point, or None")
    OBJECT_ATTR("pacer", pacer, "dcqcn's pacer, or None")
    OBJECT_ATTR("evs", evs, "the EvSet")
    OBJECT_ATTR("log", log, "the EventLog")
    OBJECT_ATTR("acked_bins", acked_bins, NULL)
    OBJECT_ATTR("completed", completed, NULL)
    OBJECT_ATTR("failed", failed, "why the QP failed, or None")
    OBJECT_ATTR("single_ev", single, "single-path's one EV (None in the spraying modes)")
    {"stats", (getter)get_stats, NULL, "the counters: a transport.SenderStats, as of now"},
    {"cum", (getter)get_cum, NULL, "every PSN below this one has been acknowledged"},
    {"idle", (getter)get_idle, NULL, "nothing outstanding, nothing left to build"},
    {"window", (getter)get_window, (setter)set_window, "packets in flight allowed"},
    {"srtt", (getter)get_srtt, (setter)set_srtt, "smoothed RTT, ns"},
    {"rttvar", (getter)get_rttvar, (setter)set_rttvar, "the RTT's mean deviation, ns"},
    {"base_rtt", (getter)get_base_rtt, (setter)set_base_rtt, "the lowest RTT seen, ns"},
    {"reordering_ns", (getter)get_reordering_ns, (setter)set_reordering_ns,
     "how late a packet can be and still arrive (a decaying maximum)"},
    {"delay_ns", (getter)get_delay_ns, (setter)set_delay_ns, "the latest queueing delay"},
    {"rtt_samples", (getter)get_rtt_samples, NULL, NULL},
    {"cnps_ignored", (getter)get_cnps_ignored, NULL, "CNPs for a QP that runs no dcqcn"},
    {"remote_va", (getter)get_remote_va, NULL, NULL},
    {"local_ports", (getter)get_local_ports, NULL, NULL},
    {"remote_ports", (getter)get_remote_ports, NULL, NULL},
    {"posted_bytes", (getter)get_posted_bytes, NULL, NULL},
    {"messages_completed", (getter)get_messages_completed, NULL, NULL},
    {"fabric_marks", (getter)get_fabric_marks, NULL, "a CE mark came back"},
    {"inflight", (getter)get_inflight, NULL, "packets sent and not yet acked or lost"},
    {"records", (getter)get_records, NULL, "packet records kept (unacked PSNs built)"},
    {"record_slots", (getter)get_record_slots, NULL, "the record ring's size"},
    {"per_path_queues", (getter)get_per_path_queues, NULL, "paths with a send order kept"},
    {"send_order_len", (getter)get_send_order_len, NULL, "entries in the send order"},
    {"per_path_entries", (getter)get_per_path_entries, NULL,
     "entries in the per-path send orders, together"},
    {NULL},
};

static PyMemberDef Sender_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(Sender, weakrefs), READONLY},
    {NULL},
};

static PyMethodDef Sender_methods[] = {
    {"post", (PyCFunction)(void (*)(void))Sender_post, METH_VARARGS | METH_KEYWORDS,
     "post(length, offset=0, imm=None, now=0) -> msn: queue an RDMA WRITE"},
    {"poll", (PyCFunction)(void (*)(void))Sender_poll, METH_VARARGS | METH_KEYWORDS,
     "poll(now, source, budget=64) -> [TxPacket]: retransmissions first, then new ones"},
    {"on_sack", (PyCFunction)(void (*)(void))Sender_on_sack, METH_FASTCALL,
     "on_sack(sack, now)"},
    {"on_nack", (PyCFunction)(void (*)(void))Sender_on_nack, METH_VARARGS | METH_KEYWORDS,
     "on_nack(psn, now, trimmed=False, ev=-1, tries=-1)"},
    {"on_timer", (PyCFunction)Sender_on_timer, METH_O, "on_timer(now)"},
    {"on_cnp", (PyCFunction)Sender_on_cnp, METH_O, "on_cnp(now)"},
    {"wants_to_send", (PyCFunction)(void (*)(void))Sender_wants_to_send,
     METH_VARARGS | METH_KEYWORDS, "wants_to_send(now=None) -> bool"},
    {"next_send_ns", (PyCFunction)Sender_next_send_ns, METH_O, "dcqcn: when the pacer lets go"},
    {"set_local_ports", (PyCFunction)(void (*)(void))Sender_set_local_ports,
     METH_VARARGS | METH_KEYWORDS, "set_local_ports(bitmap, now=0)"},
    {"probe_result", (PyCFunction)Sender_probe_result, METH_VARARGS,
     "probe_result(value, ok, now) -> revived"},
    {"deny", (PyCFunction)Sender_deny, METH_VARARGS, "deny(values, now)"},
    {"planes_in_use", (PyCFunction)Sender_planes_in_use, METH_NOARGS, NULL},
    {"reorder_window_ns", (PyCFunction)Sender_reorder_window_ns, METH_NOARGS,
     "RACK's window now, ns"},
    {"tail_probe_ns", (PyCFunction)Sender_tail_probe_ns, METH_NOARGS,
     "how long the oldest first copy waits before a tail probe, ns"},
    {"ev_changed", (PyCFunction)Sender_ev_changed, METH_VARARGS, NULL},
    {NULL},
};

/* -- construction ------------------------------------------------------------------ */

static int cfg_i64(PyObject *cfg, PyObject *name, int64_t *out) {
    PyObject *v = PyObject_GetAttr(cfg, name);
    if (!v) return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

static int cfg_f64(PyObject *cfg, PyObject *name, double *out) {
    PyObject *v = PyObject_GetAttr(cfg, name);
    if (!v) return -1;
    double x = PyFloat_AsDouble(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

static int cfg_bool(PyObject *cfg, PyObject *name, int *out) {
    PyObject *v = PyObject_GetAttr(cfg, name);
    if (!v) return -1;
    *out = PyObject_IsTrue(v);
    Py_DECREF(v);
    return *out < 0 ? -1 : 0;
}

static int choices(PyObject *name, PyObject *options) {  /* ValueError: "... one of a, b" */
    PyObject *sep = PyUnicode_FromString(", "), *joined = NULL;
    if (sep) joined = PyUnicode_Join(sep, options);
    Py_XDECREF(sep);
    if (joined) PyErr_Format(PyExc_ValueError, "%U must be one of %U", name, joined);
    Py_XDECREF(joined);
    return -1;
}

/* The EV set runs on an EvRing (EvSet.use_ring), which this Sender then calls in C per
 * packet; the set keeps it for its life. */
static int use_evring(Sender *s) {
    PyObject *ring = PyObject_GetAttr(s->evs, s_ring);
    if (ring && !Py_IS_TYPE(ring, &EvRingType)) {
        PyObject *r = PyObject_CallMethodOneArg(s->evs, s_use_ring, (PyObject *)&EvRingType);
        Py_SETREF(ring, r ? PyObject_GetAttr(s->evs, s_ring) : NULL);
        Py_XDECREF(r);
    }
    if (!ring) return -1;
    if (Py_IS_TYPE(ring, &EvRingType))
        s->ring = ring;
    else
        Py_DECREF(ring);
    return 0;
}

static int choices_of(const char *name, PyObject *options) {
    PyObject *what = PyUnicode_FromString(name);
    if (what) choices(what, options);
    Py_XDECREF(what);
    return -1;
}

/* The index in members[0..n) of the one `v` equals; -1 (no error set) for none */
static int member_of(PyObject *v, PyObject *const *members, int n) {
    if (!PyUnicode_Check(v)) return -1;
    for (int i = 0; i < n; i++) {
        int eq = PyUnicode_Compare(v, members[i]);
        if (eq == 0) return i;
        if (eq == -1 && PyErr_Occurred()) return -1;
    }
    return -1;
}

static int Sender_init(Sender *s, PyObject *args, PyObject *kw) {
    static char *names[] = {"evset", "remote_va", "config", NULL};
    PyObject *evset, *config = Py_None;
    long long remote_va;
    if (fp_require_bound((PyObject *)s) < 0) return -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OL|O:Sender", names, &evset, &remote_va,
                                     &config))
        return -1;
    if (remote_va < 0) {
        PyErr_SetString(PyExc_ValueError, "remote_va: want a non-negative address");
        return -1;
    }
    PyObject *cfg = config == Py_None ? PyObject_CallNoArgs(SenderConfig) : Py_NewRef(config);
    if (!cfg) return -1;
    PyObject *mode = PyObject_GetAttr(cfg, s_mode);
    int in = mode ? PySequence_Contains(MODES, mode) : -1;
    Py_XDECREF(mode);
    if (in <= 0) {
        Py_DECREF(cfg);
        if (in == 0) {
            PyObject *what = PyUnicode_FromString("mode");
            if (what) choices(what, MODES);
            Py_XDECREF(what);
        }
        return -1;
    }
    /* dcqcn: a rate (rp) and its pacer; the window becomes a fixed in-flight cap */
    PyObject *triple = PyObject_CallOneArg(for_sender, cfg);
    Py_DECREF(cfg);
    if (!triple) return -1;
    if (!PyTuple_Check(triple) || PyTuple_GET_SIZE(triple) != 3) {
        Py_DECREF(triple);
        PyErr_SetString(PyExc_TypeError, "dcqcn.for_sender gives (config, rp, pacer)");
        return -1;
    }
    s->cfg = Py_NewRef(PyTuple_GET_ITEM(triple, 0));
    s->rp = Py_NewRef(PyTuple_GET_ITEM(triple, 1));
    s->pacer = Py_NewRef(PyTuple_GET_ITEM(triple, 2));
    Py_DECREF(triple);
    cfg = s->cfg;
    PyObject *m = PyObject_GetAttr(cfg, s_mode), *cc = PyObject_GetAttr(cfg, s_cc);
    if (!m || !cc) { Py_XDECREF(m); Py_XDECREF(cc); return -1; }
    if (!PyUnicode_Check(m)) {  /* equal to one of MODES, yet not a str: compared as one */
        PyObject *what = PyUnicode_FromString("mode");
        if (what) choices(what, MODES);
        Py_XDECREF(what);
        Py_DECREF(m);
        Py_DECREF(cc);
        return -1;
    }
    /* the number of the member it equals (for_sender refused a cc that is none) */
    int mi = member_of(m, MODE_OF, MODE_COUNT), ci = mi < 0 ? -1 : member_of(cc, CC_OF, CC_COUNT);
    Py_DECREF(m);
    if (mi < 0 || ci < 0) {
        Py_DECREF(cc);
        if (!PyErr_Occurred()) choices_of(mi < 0 ? "mode" : "cc", mi < 0 ? MODES : CCS);
        return -1;
    }
    s->mode = mi;
    s->rules = &MODE_RULES[s->mode];  /* what it does where the modes differ */
    s->cc = ci;  /* its window: WINDOWS[s->cc] */
    if (cfg_i64(cfg, s_mtu, &s->mtu) < 0 || cfg_f64(cfg, s_init_window, &s->init_window) < 0
        || cfg_f64(cfg, s_min_window, &s->min_window) < 0
        || cfg_f64(cfg, s_max_window, &s->max_window) < 0
        || cfg_i64(cfg, s_target_ns, &s->target_ns) < 0 || cfg_bool(cfg, s_ecn, &s->ecn) < 0
        || cfg_bool(cfg, s_trim, &s->trim) < 0 || cfg_f64(cfg, s_pi_gain, &s->pi_gain) < 0
        || cfg_f64(cfg, s_fair_increase, &s->fair_increase) < 0
        || cfg_f64(cfg, s_md_gain, &s->md_gain) < 0 || cfg_f64(cfg, s_md_max, &s->md_max) < 0
        || cfg_i64(cfg, s_reorder_ns, &s->reorder_ns) < 0
        || cfg_i64(cfg, s_rto_min_ns, &s->rto_min_ns) < 0
        || cfg_i64(cfg, s_tail_probe_min_ns, &s->tail_probe_min_ns) < 0
        || cfg_i64(cfg, s_retry_limit, &s->retry_limit) < 0
        || cfg_i64(cfg, s_loss_limit, &s->loss_limit) < 0
        || cfg_i64(cfg, s_trim_limit, &s->trim_limit) < 0
        || cfg_i64(cfg, s_backoff_max, &s->backoff_max) < 0) {
        Py_DECREF(cc);
        return -1;
    }
    if (s->mtu <= 0) {
        Py_DECREF(cc);
        PyErr_Format(PyExc_ValueError, "mtu %lld: want a positive packet payload size",
                     (long long)s->mtu);
        return -1;
    }
    s->evs = Py_NewRef(evset);
    if (Py_IS_TYPE(evset, (PyTypeObject *)EvSetType) && fields_fast() && use_evring(s) < 0) {
        Py_DECREF(cc);
        return -1;
    }
    s->remote_va = remote_va;
    s->window = s->init_window;
    s->base_rtt = INFINITY;
    s->failed = Py_NewRef(Py_None);
    s->single = Py_NewRef(Py_None);
    s->local_ports = s->remote_ports = 0xFFFF;
    s->sent_high = -1;
    s->rack_sent = -1;
    s->last_cut_ns = s->last_md_ns = s->last_qa_ns = -1;
    s->reorder_steps = 1;
    if (s->rp != Py_None) {  /* dcqcn: CNP_SPACING of the notification point's interval */
        PyObject *p = PyObject_GetAttr(s->rp, s_p);
        int64_t gap;
        int rc = p ? cfg_i64(p, s_min_time_between_cnps_ns, &gap) : -1;
        Py_XDECREF(p);
        if (rc < 0) { Py_DECREF(cc); return -1; }
        s->cnp_gap_ns = (int64_t)((double)gap * CNP_SPACING);
    }
    PyObject *planes = PyObject_GetAttr(evset, s_planes), *ppp = NULL, *weak = NULL, *cap;
    if (!planes || !(s->log = PyObject_CallNoArgs(EventLog))
        || !(s->acked_bins = PyObject_CallOneArg(AckedBins, planes))
        || !(s->lost = PyObject_CallNoArgs(OrderedDict))
        || !(weak = PyObject_CallOneArg(weakly, (PyObject *)s))
        || PyObject_SetAttr(evset, s_on_change, weak) < 0
        || !(ppp = PyObject_GetAttr(evset, s_paths_per_plane))) {
        Py_XDECREF(planes); Py_XDECREF(weak); Py_DECREF(cc);
        return -1;
    }
    s->completed = fp_bounded_deque(MESSAGES_KEPT);
    int64_t paths = (int64_t)PyObject_Length(planes) * PyLong_AsLongLong(ppp);
    Py_DECREF(planes);
    Py_DECREF(ppp);
    Py_DECREF(weak);
    if (!s->completed || PyErr_Occurred()) { Py_DECREF(cc); return -1; }
    cap = s->rules->unproven_cap(s->init_window, paths);  /* mrc: a share of the first window */
    PyObject *r = cap ? PyObject_CallMethodOneArg(evset, s_set_unproven_cap, cap) : NULL;
    Py_XDECREF(cap);
    if (!r) { Py_DECREF(cc); return -1; }
    Py_DECREF(r);
    PyObject *single = s->rules->single_ev(evset);  /* single-path's one EV, else None */
    if (!single) { Py_DECREF(cc); return -1; }
    Py_SETREF(s->single, single);
    Py_DECREF(cc);  /* a member of Cc: member_of numbered it above */
    return 0;
}

static int Sender_traverse(Sender *s, visitproc visit, void *arg) {
    Py_VISIT(s->cfg); Py_VISIT(s->rp); Py_VISIT(s->pacer); Py_VISIT(s->evs);
    Py_VISIT(s->log); Py_VISIT(s->acked_bins); Py_VISIT(s->completed); Py_VISIT(s->lost);
    Py_VISIT(s->single); Py_VISIT(s->failed); Py_VISIT(s->ring);
    for (int64_t i = 0; i < s->tx_cap; i++) {
        Py_VISIT(s->txs[i].ev);
        Py_VISIT(s->txs[i].imm);
        Py_VISIT(s->txs[i].probed_ev);
    }
    for (int64_t i = 0; i < s->seg_len; i++) {
        Py_VISIT(s->segs[s->seg_head + i].msg);
        Py_VISIT(s->segs[s->seg_head + i].imm);
    }
    for (int64_t i = 0; i < s->msg_len; i++) Py_VISIT(s->msgs[s->msg_head + i].msg);
    return 0;
}

static int Sender_clear(Sender *s) {
    s->ready = FP_CLEARED;  /* a finalizer that still holds it gets an error, not a NULL */
    Py_CLEAR(s->cfg); Py_CLEAR(s->rp); Py_CLEAR(s->pacer); Py_CLEAR(s->evs);
    Py_CLEAR(s->log); Py_CLEAR(s->acked_bins); Py_CLEAR(s->completed); Py_CLEAR(s->lost);
    Py_CLEAR(s->single); Py_CLEAR(s->failed); Py_CLEAR(s->ring);
    for (int64_t i = 0; i < s->tx_cap; i++) tx_release(&s->txs[i]);
    s->ntx = 0;
    for (int64_t i = 0; i < s->seg_len; i++) {
        Py_CLEAR(s->segs[s->seg_head + i].msg);
        Py_CLEAR(s->segs[s->seg_head + i].imm);
    }
    s->seg_len = 0;
    for (int64_t i = 0; i < s->msg_len; i++) Py_CLEAR(s->msgs[s->msg_head + i].msg);
    s->msg_len = 0;
    return 0;
}

/* __init__ once; one that fails part-way leaves the Sender blank, every object it had
 * taken released (no method runs before it is ready, so nothing else was allocated),
 * and __init__ may run again */
static int Sender_init_once(Sender *s, PyObject *args, PyObject *kw) {
    if (s->ready != FP_BLANK) {
        PyErr_SetString(PyExc_TypeError, "a Sender is initialised once");
        return -1;
    }
    s->ready = FP_INITIALISING;
    if (Sender_init(s, args, kw) < 0) {
        Sender_clear(s);
        s->ready = FP_BLANK;
        return -1;
    }
    s->ready = FP_READY;
    return 0;
}

static void Sender_dealloc(Sender *s) {
    PyObject_GC_UnTrack(s);
    if (s->weakrefs) PyObject_ClearWeakRefs((PyObject *)s);
    Sender_clear(s);
    PyMem_Free(s->txs);
    dq_free(&s->order);
    dq_free(&s->retx);
    dq_free(&s->unsent);
    evmap_free(&s->per_path);
    PyMem_Free(s->segs);
    PyMem_Free(s->msgs);
    PyMem_Free(s->scratch);
    PyMem_Free(s->newly);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyTypeObject SenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "twin.mrc._fastpath.Sender",
    .tp_doc = "Sender(evset, remote_va, config=None): twin.mrc.transport.Sender in C "
              "(the same decisions; see _sender.c)",
    .tp_basicsize = sizeof(Sender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Sender_init_once,
    .tp_dealloc = (destructor)Sender_dealloc,
    .tp_traverse = (traverseproc)Sender_traverse,
    .tp_clear = (inquiry)Sender_clear,
    .tp_weaklistoffset = offsetof(Sender, weakrefs),
    .tp_methods = Sender_methods,
    .tp_members = Sender_members,
    .tp_getset = Sender_getset,
};

/* -- the module's part ---------------------------------------------------------------- */

/* The members of class `cls` named `type` (twin.mrc.modes.Mode, twin.mrc.cc.Cc, bound) in C's numbering:
 * members[i] = getattr(type, names[i]); *all = tuple(type), every member in the type's
 * order (the error for a bad config lists them). A type with a member C does not number
 * is refused: the Python Sender would run it, the compiled one could not. */
static int members(PyObject *cls, const char *type, const char *const *names,
                   PyObject **out, int n, PyObject **all) {
    PyObject *tuple = NULL;
    int rc = -1;
    if (!(tuple = PySequence_Tuple(cls))) goto done;
    if (PyTuple_GET_SIZE(tuple) != n) {
        PyErr_Format(PyExc_RuntimeError, "%s has %zd members; the compiled Sender knows %d",
                     type, PyTuple_GET_SIZE(tuple), n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        PyObject *v = PyObject_GetAttrString(cls, names[i]);
        if (!v) goto done;
        if (!PyUnicode_Check(v)) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a str", type, names[i]);
            Py_DECREF(v);
            goto done;
        }
        Py_XSETREF(out[i], v);
    }
    Py_XSETREF(*all, tuple);
    tuple = NULL;
    rc = 0;
done:
    Py_XDECREF(tuple);
    return rc;
}

int fp_bind_sender(FpBind *b) {
    PyObject *c = PyImport_ImportModule("collections"), *states = NULL, *mode_type = NULL,
             *cc_type = NULL;
    int rc = -1;
    if (!c) goto out;
#define GET(var, name) if (fp_take(b, name, &var) < 0) goto out
    GET(SenderStats, "SenderStats"); GET(Msg, "Msg"); GET(QpFailed, "QpFailed");
    GET(weakly, "weakly"); GET(EventLog, "EventLog"); GET(AckedBins, "AckedBins");
    GET(SenderConfig, "SenderConfig"); GET(mode_type, "Mode"); GET(cc_type, "Cc");
    if (tables_complete() < 0
        || members(mode_type, "Mode", MODE_NAMES, MODE_OF, MODE_COUNT, &MODES) < 0
        || members(cc_type, "Cc", CC_NAMES, CC_OF, CC_COUNT, &CCS) < 0)
        goto out;
    GET(NoUsableEv, "NoUsableEv"); GET(EvType, "Ev"); GET(PathType, "PathState");
    GET(EvSetType, "EvSet");
    GET(states, "EvState");
    Py_XSETREF(EvState_GOOD, PyObject_GetAttrString(states, "GOOD"));
    Py_XSETREF(EvState_SKIP, PyObject_GetAttrString(states, "SKIP"));
    Py_XSETREF(EvState_DENIED, PyObject_GetAttrString(states, "DENIED"));
    Py_XSETREF(EvState_BAD, PyObject_GetAttrString(states, "ASSUMED_BAD"));
    if (!EvState_GOOD || !EvState_SKIP || !EvState_DENIED || !EvState_BAD) goto out;
    GET(for_sender, "for_sender"); GET(wire_bytes, "wire_bytes");
    Py_XSETREF(OrderedDict, PyObject_GetAttrString(c, "OrderedDict"));
    if (!OrderedDict) goto out;
    FpInt ints[] = {
        {"BUILD_CHUNK", &BUILD_CHUNK}, {"LOST_REMEMBERED", &LOST_REMEMBERED},
        {"REORDER_STEPS_MAX", &REORDER_STEPS_MAX}, {"REORDERING_LEARNED", &REORDERING_LEARNED},
        {"TRY_MASK", &TRY_MASK}, {"BITMAP_BITS", &BITMAP_BITS},
        {"CONGESTION_ECHO_CE", &CONGESTION_ECHO_CE}, {"CONGESTION_COUNT", &CONGESTION_COUNT},
        {"MESSAGES_KEPT", &MESSAGES_KEPT}, {"COMPACT_AFTER", &COMPACT_AFTER}};
    if (fp_take_ints(b, ints, sizeof ints / sizeof *ints) < 0) goto out;
    FpFloat floats[] = {{"REORDERING_DECAY", &REORDERING_DECAY}, {"CNP_SPACING", &CNP_SPACING}};
    if (fp_take_floats(b, floats, sizeof floats / sizeof *floats) < 0) goto out;
    FpInt frame[] = {{"FRAME_OVERHEAD", &FRAME_OVERHEAD}};  /* dcqcn.wire_bytes' */
    if (fp_take_ints(b, frame, 1) < 0) goto out;
    if (BITMAP_BITS != 64) {
        PyErr_SetString(PyExc_RuntimeError, "the compiled Sender reads 64-bit SACK bitmaps");
        goto out;
    }
    Field *ev_fields[] = {&F_VALUE, &F_PLANE, &F_SENT, &F_PATH, &F_FIRST_LOSS, &F_RTT,
                          &F_PROBED, &F_STATE};
    for (size_t i = 0; i < sizeof ev_fields / sizeof *ev_fields; i++)
        if (field_offset(EvType, ev_fields[i]) < 0) goto out;
    Field *path_fields[] = {&P_PROVEN, &P_INFLIGHT, &P_DEAD, &P_DELIVERED};
    for (size_t i = 0; i < sizeof path_fields / sizeof *path_fields; i++)
        if (field_offset(PathType, path_fields[i]) < 0) goto out;
    GET(Event, "Event");
#undef GET
    rc = 0;
out:
    Py_XDECREF(c); Py_XDECREF(states); Py_XDECREF(mode_type); Py_XDECREF(cc_type);
    return rc;
}

int fp_add_sender(PyObject *m) {
    FpName names[] = {
        {&s_next, "next"}, {&s_sent, "sent"}, {&s_sent_unproven, "sent_unproven"},
        {&s_proving, "proving"}, {&s_gone, "gone"}, {&s_delivered, "delivered"},
        {&s_congested, "congested"}, {&s_find, "find"}, {&s_unretire, "unretire"},
        {&s_lost, "lost"}, {&s_path_lost, "path_lost"}, {&s_set_plane, "set_plane"},
        {&s_probe_result, "probe_result"}, {&s_deny, "deny"}, {&s_hashed, "hashed"},
        {&s_set_unproven_cap, "set_unproven_cap"}, {&s_planes_in_use, "planes_in_use"},
        {&s_planes, "planes"}, {&s_paths_per_plane, "paths_per_plane"}, {&s_size, "size"},
        {&s_planes_down, "planes_down"}, {&s_retired, "retired"}, {&s_append, "append"},
        {&s_start, "start"}, {&s_at, "at"}, {&s_allowance, "allowance"},
        {&s_consume, "consume"}, {&s_next_send_ns, "next_send_ns"}, {&s_on_cnp, "on_cnp"},
        {&s_value, "value"}, {&s_plane, "plane"}, {&s_path, "path"},
        {&s_dead_since, "dead_since"}, {&s_first_loss_ns, "first_loss_ns"},
        {&s_rtt_ns, "rtt_ns"}, {&s_probed, "probed"}, {&s_done_ns, "done_ns"},
        {&s_move_to_end, "move_to_end"}, {&s_pop, "pop"}, {&s_popitem, "popitem"},
        {&s_get, "get"}, {&s_on_change, "on_change"}, {&s_mode, "mode"},
        {&s_cc, "cc"}, {&s_mtu, "mtu"}, {&s_init_window, "init_window"},
        {&s_min_window, "min_window"}, {&s_max_window, "max_window"},
        {&s_target_ns, "target_ns"}, {&s_ecn, "ecn"}, {&s_trim, "trim"},
        {&s_pi_gain, "pi_gain"}, {&s_fair_increase, "fair_increase"},
        {&s_md_gain, "md_gain"}, {&s_md_max, "md_max"}, {&s_reorder_ns, "reorder_ns"},
        {&s_rto_min_ns, "rto_min_ns"}, {&s_tail_probe_min_ns, "tail_probe_min_ns"}, {&s_retry_limit, "retry_limit"},
        {&s_loss_limit, "loss_limit"}, {&s_trim_limit, "trim_limit"},
        {&s_backoff_max, "backoff_max"}, {&s_p, "p"},
        {&s_min_time_between_cnps_ns, "min_time_between_cnps_ns"},
        {&s_ring, "ring"}, {&s_use_ring, "use_ring"}, {&s_proven, "proven"},
        {&s_inflight, "inflight"}, {&s_state, "state"}, {&s_delivered_ns, "delivered_ns"},
        {&s_suspects, "suspects"}, {&s_check, "check"},
        {&s_clear, "clear"}, {&k_loss, "loss"}, {&k_first_loss, "first_loss"},
        {&k_retire, "retire"}, {&k_retransmit, "retransmit"}, {&k_repaired, "repaired"},
        {&k_spurious, "spurious"}, {&k_port, "port"}, {&k_probe, "probe"},
        {&k_revive, "revive"}, {&k_trim, "trim"}, {&k_ev_state, "ev_state"},
        {&r_per_path, "per_path"}, {&r_rack, "rack"}, {&r_nack, "nack"},
        {&r_timeout, "timeout"}, {&r_dead_path, "dead_path"}, {&r_trim, "trim"},
        {&r_probe, "probe"},
        {&w_ecn, "ecn"},
        {&w_trim, "trim"}, {&w_rtt, "rtt"}, {&a_ok, "ok"}, {&a_lost, "lost"},
        {&k_cum, "cum"}, {&k_ev, "ev"}, {&k_psn, "psn"}, {&k_tries, "tries"},
        {&k_port_state, "port_state"}, {&k_congestion, "congestion"}, {&k_bitmap, "bitmap"},
        {&k_dup, "dup"}, {&k_empty, ""},
        {&k_resent_at_once, "resent at once on another EV"},
        {&k_alive_why, "a packet sent on it after its first loss arrived"}};
    if (fp_intern(names, sizeof names / sizeof *names) < 0) return -1;
    if (PyType_Ready(&PacketType) < 0 || PyType_Ready(&SenderType) < 0
        || PyType_Ready(&EvRingType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "TxPacket", (PyObject *)&PacketType) < 0
        || PyModule_AddObjectRef(m, "EvRing", (PyObject *)&EvRingType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Sender", (PyObject *)&SenderType);
}
