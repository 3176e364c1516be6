"""The hand-written C every generated program shares: bit access, tables, hashes and the API.

:data:`RUNTIME` goes before the generated code, :data:`DRIVER` after it (it calls the
generated ``P_parser`` ... ``D_deparser``). :data:`CDEF` is what Python sees through cffi: only
64-bit integers cross the boundary (128-bit values travel as (high, low) pairs).
"""

from __future__ import annotations

RING_TYPES = """
/* one port's rings and counters for tf_ring_round (switch.device.fastpath) */
typedef struct {
    uint8_t *rx; int rx_fs, rx_nfr, rx_idx, check_outgoing;
    uint8_t *tx; int tx_fs, tx_nfr, tx_idx, tx_data, tx_pending, fd;
    int number, max_untagged, max_frame, fast, qlen, depth;
    double rate_bps, rate_pps, next_free;
    uint64_t rx_n, out_n, enq_n, tx_malformed, tx_errors, tail_drops; int64_t tx_n;
    /* the port's egress queue in C (one queue per port): cq_cap slots of cq_slot bytes from
       cq, cq_n of them queued from cq_head; used while cq_on */
    uint8_t *cq; int cq_cap, cq_slot, cq_head, cq_n, cq_on, cq_max;
    uint64_t cq_enq, cq_deq;
    int tx_busy;  /* the last kick got ENOBUFS: the device takes no frame now */
} tf_port;
typedef struct {
    int nq; double burst, catchup; int odd; uint64_t touched;
    int spill_kind, spill_port, spill_len; uint8_t *spill;
    int nspill, spill_cap; int *job_port, *job_prio, *job_len, *job_poff;
    uint8_t *jobs; uint8_t *state;
    int ndrop, drop_cap; int *drop_code; int *drop_port;
    int ndeq;
} tf_round;
"""

CDEF = (
    """
typedef struct tf_sw tf_sw;
tf_sw *tf_new(void);
void tf_free(tf_sw *X);
void tf_set_handle(tf_sw *X, void *h);
void tf_bind(tf_sw *X, int idx, uint64_t *a, uint64_t *b);
void tf_bind_stats(tf_sw *X, uint64_t *stats, uint64_t *ext_errors, uint64_t *digests,
                   int digest_cap);
int tf_table_load(tf_sw *X, int t, int n, const uint64_t *kv, const uint64_t *kr,
                  const int *cls, int ncls, const uint64_t *cls_mask, const int *act,
                  const uint64_t *args, const int *goff, const int *gn, const int *mact,
                  const uint64_t *margs, int def_act, const uint64_t *def_args, int early);
int tf_run(tf_sw *X, int n, const int *in_port, int port, const uint8_t *in,
           const int *in_len, uint64_t now, uint8_t *out, int out_cap, int *res, int *out_port,
           int *out_off);
int tf_max_growth(void);
int tf_state_size(void);
int tf_ingress(tf_sw *X, int port, const uint8_t *data, int len, uint64_t now,
               uint8_t *state, int *res);
int tf_egress(tf_sw *X, const uint8_t *state, const uint8_t *payload, int plen,
              int eport, uint64_t now, const uint64_t *enq, int has_enq,
              uint8_t *out, int *res);
int tf_table_hits(tf_sw *X, int t, int *out, int cap);
"""
    + RING_TYPES
    + """
int tf_ring_round(tf_sw *X, tf_port *P, int np, int start, int limit, uint64_t now,
                  const int16_t *pmap, int pmap_n, tf_round *R);
int tf_cq_slot_size(int max_frame);
int tf_cq_state_offset(void);
int tf_cq_frame_offset(void);
extern "Python" uint64_t tf_py_random(void *, uint64_t, uint64_t);
"""
)

RUNTIME = (
    r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct tf_sw tf_sw;
"""
    + RING_TYPES
    + r"""
static uint64_t tf_py_random(void *, uint64_t, uint64_t);  /* extern "Python" (cffi) */
typedef unsigned __int128 u128;
typedef uint8_t u8;
typedef uint64_t u64;

#define U128(hi, lo) ((((u128)(hi)) << 64) | (u128)(lo))
#define MASKW(w) ((w) >= 128 ? ~(u128)0 : ((((u128)1) << (w)) - 1))

enum { ST_RECEIVED, ST_SENT, ST_DROPPED, ST_PARSER_ERRORS, ST_EGRESS_DIGESTS_IGNORED,
       ST_DIGESTS, ST_EXT_ERRORS, ST_N };

static inline u64 be64(const u8 *p) { u64 v; memcpy(&v, p, 8); return __builtin_bswap64(v); }
static inline void put_be64(u8 *p, u64 v) { v = __builtin_bswap64(v); memcpy(p, &v, 8); }

/* `w` bits at bit offset `off` of p, big-endian (p has 8 readable bytes past the field) */
static inline u128 getbits(const u8 *p, unsigned off, unsigned w) {
    unsigned first = off >> 3, sh = off & 7;
    if (sh + w <= 64) {
        u64 v = be64(p + first) << sh;
        return (u128)(w == 64 ? v : v >> (64 - w));
    }
    if (sh == 0 && w == 128) return U128(be64(p + first), be64(p + first + 8));
    unsigned last = (off + w - 1) >> 3;
    u128 v = 0;
    for (unsigned i = first; i <= last; i++) v = (v << 8) | p[i];
    v >>= 8 * (last + 1) - (off + w);
    return v & MASKW(w);
}

/* OR `w` bits into p at bit offset `off` (the bits are zero; p has 8 writable bytes past) */
static inline void putbits(u8 *p, unsigned off, unsigned w, u128 v) {
    unsigned first = off >> 3, sh = off & 7;
    v &= MASKW(w);
    if (sh + w <= 64) {
        put_be64(p + first, be64(p + first) | ((u64)v << (64 - sh - w)));
        return;
    }
    if (sh == 0 && w == 128) {
        put_be64(p + first, (u64)(v >> 64));
        put_be64(p + first + 8, (u64)v);
        return;
    }
    unsigned last = (off + w - 1) >> 3;
    u128 x = v << (8 * (last + 1) - (off + w));
    for (int i = (int)last; i >= (int)first; i--) { p[i] |= (u8)x; x >>= 8; }
}

static inline u128 shl(u128 a, u128 b, unsigned w) { return b >= w ? 0 : (a << b) & MASKW(w); }
static inline u128 shr(u128 a, u128 b) { return b >= 128 ? 0 : a >> b; }
static inline u128 divz(u128 a, u128 b) { return b ? a / b : 0; }
static inline u128 modz(u128 a, u128 b) { return b ? a % b : 0; }
static inline u128 sat_add(u128 a, u128 b, u128 m) { u128 s = a + b; return s > m ? m : s; }
static inline u128 sat_sub(u128 a, u128 b) { return a > b ? a - b : 0; }
typedef __int128 i128;
/* int<w>: sign-extend a w-bit pattern; arithmetic shift; signed saturation */
static inline i128 sext(u128 v, unsigned w) {
    unsigned s = 128 - w;
    return (i128)(v << s) >> s;
}
static inline i128 sar(i128 a, u128 b) { return b >= 127 ? (a < 0 ? -1 : 0) : a >> (unsigned)b; }
static inline i128 sat_signed(i128 v, unsigned w) {
    i128 hi = ((i128)1 << (w - 1)) - 1, lo = -((i128)1 << (w - 1));
    return v > hi ? hi : v < lo ? lo : v;
}

/* -- hashes (BMv2's calculations: crc16 is CRC-16/ARC, crc32 the Ethernet CRC) ----------- */

static u64 crc16_arc(const u8 *d, int n) {
    unsigned c = 0;
    for (int i = 0; i < n; i++) {
        c ^= d[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xA001 : c >> 1;
    }
    return c & 0xFFFF;
}

static u64 crc32_eth(const u8 *d, int n) {
    uint32_t c = 0xFFFFFFFFu;
    for (int i = 0; i < n; i++) {
        c ^= d[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

enum { ALGO_NONE, ALGO_CRC16, ALGO_CRC32, ALGO_IDENTITY, ALGO_CSUM16, ALGO_XOR16 };

/* big-endian 16-bit words, an odd tail byte padded with zero at the end */
static u64 csum16(const u8 *d, int n) {
    u64 s = 0;
    for (int i = 0; i + 1 < n; i += 2) s += ((u64)d[i] << 8) | d[i + 1];
    if (n & 1) s += (u64)d[n - 1] << 8;
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return ~s & 0xFFFF;
}

static u64 xor16(const u8 *d, int n) {
    u64 x = 0;
    for (int i = 0; i + 1 < n; i += 2) x ^= ((u64)d[i] << 8) | d[i + 1];
    if (n & 1) x ^= (u64)d[n - 1] << 8;
    return x;
}

static u64 hash_bytes(int algo, const u8 *d, int n) {
    if (algo == ALGO_CRC16) return crc16_arc(d, n);
    if (algo == ALGO_CRC32) return crc32_eth(d, n);
    if (algo == ALGO_CSUM16) return csum16(d, n);
    if (algo == ALGO_XOR16) return xor16(d, n);
    u64 v = 0;
    for (int i = 0; i < n && i < 8; i++) v = (v << 8) | d[i];
    return v;
}

/* fields MSB first, padding zero bits at the end of the last byte (pack_bits) */
static int pack_fields(u8 *buf, const u128 *v, const int *w, int n) {
    int total = 0;
    for (int i = 0; i < n; i++) total += w[i];
    int nbytes = (total + 7) / 8;
    memset(buf, 0, nbytes);
    int off = 0;
    for (int i = 0; i < n; i++) { if (w[i]) putbits(buf, off, w[i], v[i]); off += w[i]; }
    return nbytes;
}

/* -- tables ---------------------------------------------------------------------------------
 * Entries come sorted by rank (the best first). Entries without a range key live in classes
 * of one mask each (a hash of masked value -> best entry); ranged entries are scanned. With
 * `early`, the first class that hits holds the best entry (exact and LPM tables). */

#define MAXK 16
#define MAXSEL 16

typedef struct {
    int nk, nargs, nsel, algo;
    const u8 *is_range;
    const int *selw;
    int n, ncls, nranged, early;
    u128 *kv, *kr;         /* n*nk: value (or range lo), range hi */
    int *cls_of;           /* n: class, -1 for ranged */
    u128 *cls_mask;        /* ncls*nk */
    int *cap, **slots;     /* per class: hash capacity and slots (entry index or -1) */
    int *ranged;           /* nranged, ascending */
    int *act;              /* n: action index, -1 no-op, -2 group */
    u128 *args;            /* n*nargs */
    int *goff, *gn;        /* group entries: members */
    int *mact; u128 *margs;
    int nmem;
    int def_act;
    u128 *def_args;
    u8 *hits;              /* n: hit since the last tf_table_hits (idle timeouts) */
    int any_hit;
} tf_table;

static u64 mix(u64 h, u128 v) {
    h ^= (u64)v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= (u64)(v >> 64) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xFF51AFD7ED558CCDull;
}

static void table_free(tf_table *t) {
    free(t->kv); free(t->kr); free(t->cls_of); free(t->cls_mask); free(t->ranged);
    free(t->act); free(t->args); free(t->goff); free(t->gn); free(t->mact); free(t->margs);
    free(t->def_args); free(t->hits);
    t->hits = NULL; t->any_hit = 0;
    if (t->slots) for (int c = 0; c < t->ncls; c++) free(t->slots[c]);
    free(t->slots); free(t->cap);
    t->kv = t->kr = t->cls_mask = t->args = t->margs = t->def_args = NULL;
    t->cls_of = t->ranged = t->act = t->goff = t->gn = t->mact = t->cap = NULL;
    t->slots = NULL;
    t->n = t->ncls = t->nranged = t->nmem = 0;
}

static int entry_matches_class(const tf_table *t, int e, const u128 *mk) {
    for (int k = 0; k < t->nk; k++) if (t->kv[e * t->nk + k] != mk[k]) return 0;
    return 1;
}

static int table_lookup(const tf_table *t, const u128 *key) {
    int best = 0x7FFFFFFF;
    u128 mk[MAXK];
    for (int c = 0; c < t->ncls; c++) {
        const u128 *m = t->cls_mask + c * t->nk;
        u64 h = 0;
        for (int k = 0; k < t->nk; k++) { mk[k] = key[k] & m[k]; h = mix(h, mk[k]); }
        int cap = t->cap[c];
        const int *s = t->slots[c];
        for (int i = 0; i < cap; i++) {
            int e = s[(h + i) & (cap - 1)];
            if (e < 0) break;
            if (entry_matches_class(t, e, mk)) { if (e < best) best = e; break; }
        }
        if (t->early && best != 0x7FFFFFFF) return best;
    }
    for (int i = 0; i < t->nranged; i++) {
        int e = t->ranged[i];
        if (e >= best) break;
        int ok = 1;
        const u128 *m = t->cls_mask + (t->ncls) * t->nk + i * t->nk; /* per-ranged masks */
        for (int k = 0; k < t->nk && ok; k++) {
            u128 v = t->kv[e * t->nk + k];
            if (t->is_range[k]) ok = v <= key[k] && key[k] <= t->kr[e * t->nk + k];
            else ok = (key[k] & m[k]) == v;
        }
        if (ok) { best = e; break; }
    }
    return best == 0x7FFFFFFF ? -1 : best;
}

/* the action of a lookup: returns (hit << 16) | action index (0xFFFF for the no-op) */
static int table_apply(tf_table *t, const u128 *key, const u128 *sel, const u128 **args) {
    int e = t->n ? table_lookup(t, key) : -1;
    if (e >= 0) {
        t->hits[e] = 1;
        t->any_hit = 1;
        int a = t->act[e];
        if (a != -2) { *args = t->args + e * t->nargs; return (1 << 16) | (a & 0xFFFF); }
        int n = t->gn[e];
        if (n > 0) {
            int m = 0;
            if (n > 1) {
                u8 buf[MAXSEL * 16 + 1];
                int nb = pack_fields(buf, sel, t->selw, t->nsel);
                m = (int)(hash_bytes(t->algo, buf, nb) % (u64)n);
            }
            int mi = t->goff[e] + m;
            *args = t->margs + mi * t->nargs;
            return (1 << 16) | (t->mact[mi] & 0xFFFF);
        }
    }
    *args = t->def_args;
    return t->def_act & 0xFFFF;
}

static int table_load(tf_table *t, int n, const u64 *kv, const u64 *kr, const int *cls,
                      int ncls, const u64 *cls_mask, const int *act, const u64 *args,
                      const int *goff, const int *gn, const int *mact, const u64 *margs,
                      int def_act, const u64 *def_args, int early) {
    int nk = t->nk, na = t->nargs;
    table_free(t);
    t->n = n; t->ncls = ncls; t->early = early; t->def_act = def_act;
    int nr = 0, nmem = 0;
    for (int e = 0; e < n; e++) {
        if (cls[e] < 0) nr++;
        if (act[e] == -2 && gn[e] > 0 && goff[e] + gn[e] > nmem) nmem = goff[e] + gn[e];
    }
    t->nranged = nr; t->nmem = nmem;
    t->kv = calloc((size_t)n * nk + 1, sizeof(u128));
    t->kr = calloc((size_t)n * nk + 1, sizeof(u128));
    t->cls_of = calloc((size_t)n + 1, sizeof(int));
    t->cls_mask = calloc((size_t)(ncls + nr) * nk + 1, sizeof(u128));
    t->ranged = calloc((size_t)nr + 1, sizeof(int));
    t->act = calloc((size_t)n + 1, sizeof(int));
    t->args = calloc((size_t)n * na + 1, sizeof(u128));
    t->goff = calloc((size_t)n + 1, sizeof(int));
    t->gn = calloc((size_t)n + 1, sizeof(int));
    t->mact = calloc((size_t)nmem + 1, sizeof(int));
    t->margs = calloc((size_t)nmem * na + 1, sizeof(u128));
    t->def_args = calloc((size_t)na + 1, sizeof(u128));
    t->cap = calloc((size_t)ncls + 1, sizeof(int));
    t->slots = calloc((size_t)ncls + 1, sizeof(int *));
    t->hits = calloc((size_t)n + 1, 1);
    if (!t->hits || !t->kv || !t->kr || !t->cls_of || !t->cls_mask || !t->ranged || !t->act || !t->args
        || !t->goff || !t->gn || !t->mact || !t->margs || !t->def_args || !t->cap || !t->slots)
        return -1;
    for (int i = 0; i < n * nk; i++) {
        t->kv[i] = U128(kv[2 * i], kv[2 * i + 1]);
        t->kr[i] = U128(kr[2 * i], kr[2 * i + 1]);
    }
    for (int i = 0; i < ncls * nk; i++) t->cls_mask[i] = U128(cls_mask[2 * i], cls_mask[2 * i + 1]);
    for (int i = 0; i < n * na; i++) t->args[i] = U128(args[2 * i], args[2 * i + 1]);
    for (int i = 0; i < nmem; i++) t->mact[i] = mact[i];
    for (int i = 0; i < nmem * na; i++) t->margs[i] = U128(margs[2 * i], margs[2 * i + 1]);
    for (int i = 0; i < na; i++) t->def_args[i] = U128(def_args[2 * i], def_args[2 * i + 1]);
    int r = 0;
    for (int e = 0; e < n; e++) {
        t->cls_of[e] = cls[e]; t->act[e] = act[e]; t->goff[e] = goff[e]; t->gn[e] = gn[e];
        if (cls[e] < 0) {
            /* ranged entries keep their own masks after the class masks (kr holds the
               mask of a non-range key: see the Python loader) */
            u128 *m = t->cls_mask + (ncls + r) * nk;
            for (int k = 0; k < nk; k++) m[k] = t->is_range[k] ? 0 : t->kr[e * nk + k];
            t->ranged[r++] = e;
        }
    }
    for (int c = 0; c < ncls; c++) {
        int cnt = 0;
        for (int e = 0; e < n; e++) if (cls[e] == c) cnt++;
        int cap = 4;
        while (cap < 2 * cnt + 2) cap <<= 1;
        t->cap[c] = cap;
        t->slots[c] = malloc(sizeof(int) * (size_t)cap);
        if (!t->slots[c]) return -1;
        for (int i = 0; i < cap; i++) t->slots[c][i] = -1;
        const u128 *m = t->cls_mask + c * nk;
        for (int e = 0; e < n; e++) {
            if (cls[e] != c) continue;
            u64 h = 0;
            for (int k = 0; k < nk; k++) h = mix(h, t->kv[e * nk + k] & m[k]);
            for (int i = 0; i < cap; i++) {
                int *s = &t->slots[c][(h + i) & (cap - 1)];
                if (*s < 0) { *s = e; break; }
                if (entry_matches_class(t, *s, t->kv + e * nk)) break; /* better one there */
            }
        }
    }
    return 0;
}
"""
)

DRIVER = r"""
#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>
tf_sw *tf_new(void) {
    tf_sw *X = calloc(1, sizeof(tf_sw));
    if (!X) return NULL;
    tf_init_tables(X);
    return X;
}

void tf_free(tf_sw *X) {
    if (!X) return;
    for (int i = 0; i < NTABLES; i++) table_free(&X->tables[i]);
    free(X);
}

void tf_set_handle(tf_sw *X, void *h) { X->handle = h; }

void tf_bind(tf_sw *X, int idx, uint64_t *a, uint64_t *b) {
    if (idx >= 0 && idx < NEXTERNS) { X->ext_a[idx] = a; X->ext_b[idx] = b; }
}

void tf_bind_stats(tf_sw *X, uint64_t *stats, uint64_t *ext_errors, uint64_t *digests,
                   int digest_cap) {
    X->stats = stats; X->ext_err = ext_errors; X->dig = digests; X->dig_cap = digest_cap;
}

int tf_table_load(tf_sw *X, int t, int n, const uint64_t *kv, const uint64_t *kr,
                  const int *cls, int ncls, const uint64_t *cls_mask, const int *act,
                  const uint64_t *args, const int *goff, const int *gn, const int *mact,
                  const uint64_t *margs, int def_act, const uint64_t *def_args, int early) {
    if (t < 0 || t >= NTABLES) return -1;
    return table_load(&X->tables[t], n, kv, kr, cls, ncls, cls_mask, act, args, goff, gn, mact,
                      margs, def_act, def_args, early);
}

int tf_max_growth(void) { return MAX_HEADER_BYTES; }

int tf_table_hits(tf_sw *X, int t, int *out, int cap) {
    if (t < 0 || t >= NTABLES) return 0;
    tf_table *tb = &X->tables[t];
    int k = 0;
    if (!tb->any_hit) return 0;
    for (int e = 0; e < tb->n && k < cap; e++)
        if (tb->hits[e]) { tb->hits[e] = 0; out[k++] = e; }
    tb->any_hit = k == cap;
    return k;
}

/* in_port: each packet's ingress port (NULL: all arrived on `port`); res per packet: status (0 sent, 1 ingress drop, 2 egress drop) | 16 if parser_error set;
   out_port: the egress port (the ingress port for an ingress drop); out_off[i]..out_off[i+1]:
   the output bytes (none for a drop) */
int tf_run(tf_sw *X, int n, const int *in_port, int port, const uint8_t *in,
           const int *in_len, uint64_t now, uint8_t *out, int out_cap, int *res, int *out_port,
           int *out_off) {
    int o = 0, in_o = 0;
    out_off[0] = 0;
    for (int i = 0; i < n; i++) {
        const u8 *data = in + in_o;
        int len = in_len[i];
        if (o + len + MAX_HEADER_BYTES + 16 > out_cap) return i;
        if (X->stats[ST_DIGESTS] >= (u64)X->dig_cap) return i;
        in_o += len;
        X->stats[ST_RECEIVED]++;
        int r[4] = {0, 0, 0, 0};
        int st = run_packet(X, in_port ? in_port[i] : port, data, len, now, out + o, r);
        res[i] = st;
        out_port[i] = r[1];
        if ((st & 15) == 0) { o += r[3]; X->stats[ST_SENT]++; }
        else X->stats[ST_DROPPED]++;
        out_off[i + 1] = o;
    }
    return n;
}

/* -- the data path's fast round on PACKET_MMAP TPACKET_V2 rings (switch.device.fastpath) ----
 * Reads ready frames from the ports' RX rings in place (fair across ports, as
 * PortSet.recv_batch), runs ingress, and where the per-packet path would cut the packet through
 * the traffic manager (the port's queues empty, its rate allows it now within the burst, a
 * queue for its priority) runs egress and writes the frame into the egress port's TX ring,
 * with the traffic manager's accounting (enqueued and dequeued, the rate's next departure).
 * Stops before a frame it does not handle (VLAN-stripped, partial checksum, truncated, runt,
 * outgoing, jumbo: left in the ring, R->odd = its port's index + 1). A packet the traffic
 * manager must take (its port's queues are not empty, its rate says wait, no queue for its
 * priority) becomes a job for Python (R->jobs: its ingress state and frame, in order), and the
 * rest of the round's packets for that port become jobs too (the port's FIFO), or tail drops
 * (q->tail_drops) once its queue is full (one queue per port: q->qlen of q->depth); the round
 * stops after a job for a port without a ring (the CPU port, an unknown one: its egress runs
 * in Python before any later packet's), and after an output whose TX ring is full
 * (R->spill_kind 2: sent by Python on the plain socket). Every TX ring with requested slots is
 * kicked before returning. R->touched: bit k set when port k's indices or counters changed
 * (the caller reads back only those). */

#define TF_RING_MAX_FRAME 16384
#define TPS_USER 1u
#define TPS_CSUMNOTREADY (1u << 3)
#define TPS_VLAN_VALID (1u << 4)
#define TPS_SEND_REQUEST 1u
#define TPS_WRONG_FORMAT 4u

static inline uint32_t ring_status(const u8 *slot) {
    return __atomic_load_n((const uint32_t *)slot, __ATOMIC_ACQUIRE);
}
static inline void ring_set_status(u8 *slot, uint32_t v) {
    __atomic_store_n((uint32_t *)slot, v, __ATOMIC_RELEASE);
}

/* the requested slots taken back (the kernel refused them): how many */
static int ring_drop_requested(tf_port *q) {
    int idx = q->tx_idx, dropped = 0;
    while (dropped < q->tx_nfr) {
        int prev = idx ? idx - 1 : q->tx_nfr - 1;
        u8 *slot = q->tx + (size_t)prev * q->tx_fs;
        if (ring_status(slot) != TPS_SEND_REQUEST) break;
        ring_set_status(slot, 0);
        idx = prev;
        dropped++;
    }
    q->tx_idx = idx;
    return dropped;
}

/* send every requested slot (never blocks); as PacketRings.kick: ENOBUFS (the peer's queue
   is full; the kernel left the frame it could not hand over requested) keeps them for the
   next kick, like EAGAIN */
static void ring_kick(tf_port *q) {
    if (!q->tx_pending) return;
    if (send(q->fd, NULL, 0, MSG_DONTWAIT) < 0) {
        if (errno == ENOBUFS) q->tx_busy = 1;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOBUFS)
            return;
        q->tx_busy = 0;
        q->tx_pending = 0;
        int d = ring_drop_requested(q);
        q->tx_errors += (uint64_t)d;
        q->tx_n -= d;
        return;
    }
    q->tx_busy = 0;
    q->tx_pending = 0;
}

static inline void ring_release_rx(tf_port *p, u8 *slot) {
    ring_set_status(slot, 0);
    if (++p->rx_idx == p->rx_nfr) p->rx_idx = 0;
}

static inline void ring_drop(tf_round *R, int code, int port) {
    R->drop_code[R->ndrop] = code;
    R->drop_port[R->ndrop] = port;
    R->ndrop++;
}

/* whether q's next TX slot is free (kicking the ring once when it is not) */
static inline int ring_tx_free(tf_port *q) {
    u8 *ts = q->tx + (size_t)q->tx_idx * q->tx_fs;
    uint32_t tst = ring_status(ts);
    if (tst == 0 || tst == TPS_WRONG_FORMAT) return 1;
    ring_kick(q);
    tst = ring_status(ts);
    return tst == 0 || tst == TPS_WRONG_FORMAT;
}

/* an egress output of n bytes in obuf into q's TX ring: 1 done (sent, counted malformed, or
   dropped: the ring is full and the device refuses frames, q->tx_busy),
   0 the ring is full (nothing written) */
static int ring_put(tf_port *q, const u8 *obuf, int n) {
    if (n < 14 || (n > q->max_untagged
                   && !(n <= q->max_frame && obuf[12] == 0x81 && obuf[13] == 0x00)
                   && !(n <= q->max_frame && obuf[12] == 0x88 && obuf[13] == 0xA8))
        || n > q->tx_fs - q->tx_data) {
        q->tx_malformed++;
        return 1;
    }
    u8 *ts = q->tx + (size_t)q->tx_idx * q->tx_fs;
    uint32_t tst = ring_status(ts);
    if (tst != 0 && tst != TPS_WRONG_FORMAT) {
        ring_kick(q);  /* ring full: push out what is requested, look again */
        tst = ring_status(ts);
    }
    if (tst == TPS_WRONG_FORMAT) q->tx_errors++;
    else if (tst != 0 && q->tx_busy) {
        /* full, and the device refuses frames (ENOBUFS): a full transmit queue drops here,
           as a NIC's would, instead of a per-packet send from Python that would fail too */
        q->tx_errors++;
        return 1;
    } else if (tst != 0) return 0;
    memcpy(ts + q->tx_data, obuf, (size_t)n);
    uint32_t n32 = (uint32_t)n;
    memcpy(ts + 4, &n32, 4);
    ring_set_status(ts, TPS_SEND_REQUEST);
    if (++q->tx_idx == q->tx_nfr) q->tx_idx = 0;
    q->tx_pending++;
    q->tx_n++;
    return 1;
}

/* TrafficManager._charge: a packet of nbytes leaving q now advances its next departure. Late
   by more than a packet: a cut-through packet (since < 0) starts now, a queued one catches up
   at most `catchup` us back and not before it came (`since`, its enqueue time) */
static inline void tm_charge(tf_port *q, uint64_t nbytes, uint64_t now, double catchup,
                             double since) {
    if (!(q->rate_bps > 0 || q->rate_pps > 0)) return;
    double cost = q->rate_bps > 0 ? (double)(nbytes * 8) * 1e6 / q->rate_bps
                                  : 1e6 / q->rate_pps;
    double start = q->next_free;
    if (start <= (double)now - cost) {
        if (since < 0) start = (double)now;
        else {
            double floor = (double)now - catchup;
            if (floor > start) start = floor;
            if (since > start) start = since;
        }
    }
    q->next_free = start + cost;
}

/* -- the egress queues in C (TrafficManager.enqueue / dequeue_ready for one queue per port) --
 * A slot: u32 frame length, u32 payload offset, u32 enq_qdepth, u32 0, u64 enqueue time (us),
 * u64 0, then the packet's tf_state (ingress done) at CQ_HDR, then the received frame at
 * CQ_HDR + CQ_STATE. */
#define CQ_HDR 32
#define CQ_STATE ((sizeof(tf_state) + 15) & ~(size_t)15)

int tf_cq_slot_size(int max_frame) { return (int)(CQ_HDR + CQ_STATE) + max_frame; }
int tf_cq_state_offset(void) { return CQ_HDR; }
int tf_cq_frame_offset(void) { return (int)(CQ_HDR + CQ_STATE); }

/* queue the packet whose ingress state is in X: 1 queued, 0 tail-dropped (full queue) */
static int cq_push(tf_sw *X, tf_port *q, const u8 *data, uint32_t len, int poff, uint64_t now) {
    if (q->cq_n >= q->depth || (int)(CQ_HDR + CQ_STATE + len) > q->cq_slot) {
        q->tail_drops++;
        return 0;
    }
    int i = q->cq_head + q->cq_n;
    if (i >= q->cq_cap) i -= q->cq_cap;
    u8 *s = q->cq + (size_t)i * q->cq_slot;
    uint32_t h[4] = {len, (uint32_t)poff, (uint32_t)q->cq_n, 0};
    memcpy(s, h, 16);
    memcpy(s + 16, &now, 8);
    tf_state *S = (tf_state *)(s + CQ_HDR);
    memcpy(&S->hdr, &X->hdr, sizeof X->hdr);
    memcpy(&S->meta, &X->meta, sizeof X->meta);
    memcpy(&S->sm, &X->sm, sizeof X->sm);
    S->itrunc = X->trunc;
    memcpy(s + CQ_HDR + CQ_STATE, data, len);
    q->cq_n++;
    q->cq_enq++;
    if (q->cq_n > q->cq_max) q->cq_max = q->cq_n;
    return 1;
}

/* dequeue what the ports' rates allow now (round robin, one packet per port per pass, as
   TrafficManager.dequeue_ready; ports in ring order, where Python's are in the order it first
   saw them: departures in one instant may interleave across ports differently), egress, into
   the TX rings; at most `budget` packets. A port whose TX ring is full keeps its packets for
   a later round. */
static int cq_drain(tf_sw *X, tf_port *P, int np, uint64_t now, tf_round *R, u8 *obuf,
                    int budget) {
    int done = 0, progress = 1;
    uint64_t blocked = 0;
    double horizon = (double)now + R->burst;
    while (progress && done < budget) {
        progress = 0;
        for (int k = 0; k < np && done < budget; k++) {
            tf_port *q = &P[k];
            if (!q->cq_n || q->next_free > horizon || (blocked >> k) & 1) continue;
            if (!ring_tx_free(q)) { blocked |= 1ull << k; continue; }
            u8 *s = q->cq + (size_t)q->cq_head * q->cq_slot;
            uint32_t h[4];
            uint64_t enq_us;
            memcpy(h, s, 16);
            memcpy(&enq_us, s + 16, 8);
            if (++q->cq_head == q->cq_cap) q->cq_head = 0;
            q->cq_n--;
            q->cq_deq++;
            R->touched |= 1ull << k;
            done++;
            progress = 1;
            int len = (int)h[0], poff = (int)h[1];
            tm_charge(q, (uint64_t)(len - poff) + 64, now, R->catchup, (double)enq_us);
            const tf_state *S = (const tf_state *)(s + CQ_HDR);
            memcpy(&X->hdr, &S->hdr, sizeof X->hdr);
            memcpy(&X->meta, &S->meta, sizeof X->meta);
            memcpy(&X->sm, &S->sm, sizeof X->sm);
            u64 enq[4] = {enq_us & 0xFFFFFFFFull, h[2], (now - enq_us) & 0xFFFFFFFFull,
                          (u64)q->cq_n};
            set_enq(X, enq, 1);
            int r[4] = {0, 0, 0, 0};
            const u8 *frame = s + CQ_HDR + CQ_STATE;
            if (egress_part(X, q->number, S->itrunc, frame + poff, len - poff, now, obuf, r)) {
                X->stats[ST_DROPPED]++;
                ring_drop(R, 2, q->number);
                continue;
            }
            q->out_n++;
            ring_put(q, obuf, r[3]);  /* a free slot: checked above */
        }
    }
    R->ndeq = done;
    return done;
}

/* one frame of port p: 0 none ready, 1 done, -1 done and the round must stop, -2 odd */
static int ring_one(tf_sw *X, tf_port *P, tf_port *p, uint64_t now, const int16_t *pmap,
                    int pmap_n, tf_round *R, u8 *obuf) {
    u8 *slot = p->rx + (size_t)p->rx_idx * p->rx_fs;
    uint32_t status = ring_status(slot);
    if (!(status & TPS_USER)) return 0;
    if (R->nspill >= R->spill_cap) return -3;  /* no room for another job: stop before it */
    uint32_t len, snap;
    uint16_t mac;
    memcpy(&len, slot + 4, 4);
    memcpy(&snap, slot + 8, 4);
    memcpy(&mac, slot + 12, 2);
    if ((status & (TPS_VLAN_VALID | TPS_CSUMNOTREADY)) || snap != len || len < 14
        || len > TF_RING_MAX_FRAME || (p->check_outgoing && slot[32 + 10] == 4)) {
        R->odd = (int)(p - P) + 1;
        return -2;
    }
    const u8 *data = slot + mac;
    int r[4] = {0, 0, 0, 0};
    p->rx_n++;
    R->touched |= 1ull << (p - P);
    X->stats[ST_RECEIVED]++;
    int st = ingress_part(X, p->number, data, (int)len, now, r);
    if (st) {
        X->stats[ST_DROPPED]++;
        ring_drop(R, st, p->number);
        ring_release_rx(p, slot);
        return 1;
    }
    int eport = r[1], poff = r[2], prio = sm_priority(X);
    int k = eport >= 0 && eport < pmap_n ? pmap[eport] : -1;
    tf_port *q = k >= 0 ? &P[k] : NULL;
    int fast = q != NULL && q->fast && !q->cq_n && prio >= 0 && prio < R->nq;
    int rated = fast && (q->rate_bps > 0 || q->rate_pps > 0);
    if (rated && (R->burst <= 0 || q->next_free > (double)now + R->burst)) fast = 0;
    if (!fast && q != NULL && q->cq_on && prio == 0 && R->nq == 1) {
        /* it waits in the port's queue in C (tail-dropped when the queue is full) */
        cq_push(X, q, data, len, poff, now);
        R->touched |= 1ull << k;
        ring_release_rx(p, slot);
        return 1;
    }
    if (!fast && q != NULL && q->depth > 0 && prio == 0 && R->nq == 1) {
        /* one queue per port, the packet will queue: tail-dropped when the queue is full */
        if (q->qlen >= q->depth) {
            q->tail_drops++;
            R->touched |= 1ull << k;
            ring_release_rx(p, slot);
            return 1;
        }
        q->qlen++;
    }
    if (!fast) {  /* the traffic manager decides in Python: queue it, or a port it has no ring of */
        int j = R->nspill++;
        u8 *st = R->state + (size_t)j * sizeof(tf_state);
        memcpy(st + offsetof(tf_state, hdr), &X->hdr, sizeof X->hdr);
        memcpy(st + offsetof(tf_state, meta), &X->meta, sizeof X->meta);
        memcpy(st + offsetof(tf_state, sm), &X->sm, sizeof X->sm);
        ((tf_state *)st)->itrunc = X->trunc;
        memcpy(R->jobs + (size_t)j * TF_RING_MAX_FRAME, data, len);
        R->job_port[j] = eport; R->job_prio[j] = prio;
        R->job_len[j] = (int)len; R->job_poff[j] = poff;
        ring_release_rx(p, slot);
        if (q == NULL) return -1;
        q->fast = 0;  /* its queue: the rest of the round's packets for it follow this one */
        R->touched |= 1ull << k;
        return 1;
    }
    q->enq_n++;
    R->touched |= 1ull << k;
    if (rated)  /* TrafficManager._charge with nbytes = payload + 64, in the same arithmetic */
        tm_charge(q, (uint64_t)((int)len - poff) + 64, now, R->catchup, -1.0);
    u64 enq[4] = {now & 0xFFFFFFFFull, 0, 0, 0};
    set_enq(X, enq, 1);
    int e = egress_part(X, eport, X->trunc, data + poff, (int)len - poff, now, obuf, r);
    if (e) {
        X->stats[ST_DROPPED]++;
        ring_drop(R, 2, eport);
        ring_release_rx(p, slot);
        return 1;
    }
    int n = r[3];
    q->out_n++;
    ring_release_rx(p, slot);
    if (!ring_put(q, obuf, n)) {
        memcpy(R->spill, obuf, (size_t)n);
        R->spill_kind = 2; R->spill_port = eport; R->spill_len = n;
        return -1;
    }
    return 1;
}

int tf_ring_round(tf_sw *X, tf_port *P, int np, int start, int limit, uint64_t now,
                  const int16_t *pmap, int pmap_n, tf_round *R) {
    u8 obuf[TF_RING_MAX_FRAME + MAX_HEADER_BYTES + 64];
    int got = 0, room = limit, stop = 0;
    R->odd = 0; R->spill_kind = 0; R->ndrop = 0; R->touched = 0; R->nspill = 0; R->ndeq = 0;
    if (np <= 0 || np > 64) return 0;
    if (limit > R->drop_cap) room = limit = R->drop_cap;
    int queued = 0;
    for (int i = 0; i < np; i++) queued |= P[i].cq_n;
    if (queued) {  /* the queues first: what may leave now goes before new arrivals */
        cq_drain(X, P, np, now, R, obuf, limit);
        room = limit - R->ndrop;
    }
    while (room > 0 && !stop) {
        int quota = room / np ? room / np : 1, busy = 0;
        for (int i = 0; i < np && !stop; i++) {
            tf_port *p = &P[(start + i) % np];
            if (!p->rx) continue;
            int take = quota < room ? quota : room, n = 0;
            while (n < take) {
                if (X->stats[ST_DIGESTS] >= (u64)X->dig_cap) { stop = 1; break; }
                int rc = ring_one(X, P, p, now, pmap, pmap_n, R, obuf);
                if (rc == 0) break;
                if (rc == -2 || rc == -3) { stop = 1; break; }
                n++;
                if (rc < 0) { stop = 1; break; }
            }
            room -= n;
            got += n;
            if (n == take) busy = 1;
            if (room <= 0) break;
        }
        if (!busy) break;
    }
    for (int i = 0; i < np; i++)
        if (P[i].tx_pending) { ring_kick(&P[i]); R->touched |= 1ull << i; }
    return got;
}
"""
