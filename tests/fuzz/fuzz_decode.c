/*
 * Bytes -> one attention call (see fuzz_decode.h; the layout is in
 * tests/fuzz/README.md).  Most byte values decode to valid choices and a
 * minority to malformed ones (a wrong extent, a negative or overflowing
 * stride, a foreign dtype, a short workspace), so the fuzzer spends its time
 * both inside the kernels and on the validation's edges.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "tests/fuzz/fuzz_decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fmsa_half.h"

/* No single view may need more host memory than this: a decoded extent past
 * it must be one the library refuses (an overflow), so its buffer is a stub. */
#define FUZZ_MAX_VIEW_BYTES ((int64_t)64 << 20)
#define FUZZ_STUB_BYTES 64

typedef struct fuzz_bytes {
    const uint8_t *p;
    size_t n, at;
} fuzz_bytes;

/* The next byte, 0 past the end (the plainest choice). */
static unsigned fz_u8(fuzz_bytes *b) { return b->at < b->n ? b->p[b->at++] : 0u; }

static const char *const fuzz_names[FUZZ_NT] = {
    "q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv", "desc.mask", "desc.alibi_slopes",
    "desc.cu_seqlens_q", "desc.cu_seqlens_k", "desc.block_table", "desc.seqused_k"};

const char *fuzz_tensor_name(int i) { return i >= 0 && i < FUZZ_NT ? fuzz_names[i] : "?"; }

void fuzz_env_apply(int env) {
    /* parts / ordered / recompute: the backward's three dQ owners; then tiles
     * the planner would not pick for these small shapes (cpu_plan.c checks them) */
    static const char *const bwd[FUZZ_ENV_COUNT] = {NULL,  "parts", "ordered", "recompute",
                                                    NULL,  NULL,    "ordered", NULL};
    static const char *const tiles[FUZZ_ENV_COUNT] = {
        NULL, NULL, NULL, NULL, "fwd=8x8,bwd=8x8", "fwd=16x32,bwd=16x32", "bwd=8x16",
        "fwd=64x128"};
    if (bwd[env]) setenv("FLASHMSA_CPU_BWD", bwd[env], 1);
    else unsetenv("FLASHMSA_CPU_BWD");
    if (tiles[env]) setenv("FLASHMSA_CPU_TILES", tiles[env], 1);
    else unsetenv("FLASHMSA_CPU_TILES");
}

/* Counter-based fill, so a tensor's values depend only on (seed, tensor, index). */
static float fuzz_value(uint32_t seed, int which, int64_t i, float amp) {
    uint64_t x = ((uint64_t)seed << 40) ^ ((uint64_t)which << 32) ^ (uint64_t)i;
    x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
    x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return amp * ((float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

static int fuzz_float_dtype(fmsa_dtype d) {
    return d == FMSA_DTYPE_F32 || d == FMSA_DTYPE_F16 || d == FMSA_DTYPE_BF16;
}

float fuzz_load(const fmsa_tensor *t, int64_t off) {
    const unsigned char *base = (const unsigned char *)t->data + t->byte_offset;
    return fmsa_load_f32(base, (int)t->dtype, off);
}

static void fuzz_store(const fmsa_tensor *t, int64_t off, float v) {
    unsigned char *base = (unsigned char *)t->data + t->byte_offset;
    fmsa_store_f32(base, (int)t->dtype, off, v);
}

/* Dense strides of `shape` in the element order `order` (innermost last). */
static void fuzz_strides(int32_t nd, const int64_t *shape, const int *order, const int64_t *pad,
                         int64_t *strides) {
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; --i) {
        int d = order[i];
        strides[d] = s;
        s *= (shape[d] > 0 ? shape[d] : 1) + pad[d];
    }
}

/*
 * One view of `nd` dims: a layout byte (contiguous, heads/sequence swapped in
 * memory, padded rows, a zero stride; a byte offset) and a mutation byte
 * (none for most values; else one malformed detail).  The buffer is sized to
 * exactly the bytes the view can reach from data + byte_offset; a view whose
 * reach overflows or is absurd gets a stub the library must never touch.
 */
static void fuzz_view(fuzz_call *c, int which, fmsa_dtype dt, int32_t nd, const int64_t *shape,
                      unsigned layout, unsigned mutation) {
    fmsa_tensor *t = &c->t[which];
    fuzz_buf *b = &c->buf[which];
    int order[FMSA_MAX_DIMS] = {0, 1, 2, 3};
    int64_t pad[FMSA_MAX_DIMS] = {0, 0, 0, 0};
    const int dim = (int)((layout >> 4) & 3u) % nd;
    size_t es;
    int64_t last = 0, bytes = 0;
    int empty = 0, overflow = 0;

    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->ndim = nd;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)nd);
    es = fmsa_dtype_size(dt);
    switch (layout & 3u) {
    case 1: /* [B, H, S, D] in memory (or the first two dims swapped) */
        if (nd >= 3) order[1] = 2, order[2] = 1;
        else if (nd == 2) order[0] = 1, order[1] = 0;
        break;
    case 2: pad[dim == nd - 1 && nd > 1 ? nd - 2 : dim] = 1 + ((layout >> 6) & 3u); break;
    default: break;
    }
    fuzz_strides(nd, shape, order, pad, t->strides);
    if ((layout & 3u) == 3u) t->strides[dim] = 0; /* broadcast (legal for some inputs) */
    switch ((layout >> 2) & 3u) {
    case 1: t->byte_offset = (int64_t)es; break;
    case 2: t->byte_offset = 1; break; /* misaligned unless a byte view */
    case 3: t->byte_offset = 64 * (int64_t)es; break;
    default: break;
    }
    if (mutation >= 232) {
        switch (mutation & 7u) {
        case 0: t->shape[dim] += 1; break;
        case 1: t->shape[dim] -= 1; break;
        case 2: t->ndim = nd > 1 ? nd - 1 : nd + 1; break;
        case 3: t->strides[dim] = -t->strides[dim] - 1; break;
        case 4: t->strides[dim] = INT64_MAX; break;
        case 5: t->dtype = (fmsa_dtype)((mutation >> 3) % 7u); break; /* incl. invalid 0, 6 */
        case 6: /* a non-unit last stride: refused where the head dim must be
                 * dense; an lse may have it, unless its rows then overlap */
            t->strides[nd - 1] = 2;
            break;
        case 7: t->shape[dim] = -t->shape[dim] - 1; break;
        }
        es = fmsa_dtype_size(t->dtype);
    }
    if (es == 0) es = 4;
    /* reach: largest element offset + 1, in bytes, past byte_offset */
    for (int i = 0; i < FMSA_MAX_DIMS; ++i)
        if (t->shape[i] <= 0 && i < t->ndim) empty = 1;
    for (int i = 0; i < t->ndim && !empty && !overflow; ++i) {
        int64_t step;
        if (t->strides[i] <= 0) continue;
        if (__builtin_mul_overflow(t->shape[i] - 1, t->strides[i], &step) ||
            __builtin_add_overflow(last, step, &last))
            overflow = 1;
    }
    if (!empty && !overflow &&
        (__builtin_add_overflow(last, 1, &last) ||
         __builtin_mul_overflow(last, (int64_t)es, &bytes) || bytes > FUZZ_MAX_VIEW_BYTES))
        overflow = 1;
    if (empty) bytes = 0;
    b->stub = overflow;
    b->bytes = overflow ? FUZZ_STUB_BYTES : (size_t)(t->byte_offset + bytes);
    if (b->bytes == 0) b->bytes = 1; /* data != NULL: an empty view still names memory */
    b->mem = malloc(b->bytes);
    b->snap = malloc(b->bytes);
    if (b->mem) memset(b->mem, 0xff, b->bytes);
    t->data = b->mem;
}

int64_t fuzz_element_offset(const fmsa_tensor *t, int64_t e) {
    int64_t off = 0;
    for (int i = t->ndim - 1; i >= 0; --i) {
        off += (e % t->shape[i]) * t->strides[i];
        e /= t->shape[i];
    }
    return off;
}

/* Fills a floating-point view's elements (inputs): amplitude amp, and where
 * `special` the element at `special_at` is NaN or Inf. */
static void fuzz_fill(fuzz_call *c, int which, uint32_t seed, float amp, int special,
                      unsigned special_at) {
    fmsa_tensor *t = &c->t[which];
    int64_t count = 1;
    if (!t->data || !fuzz_float_dtype(t->dtype) || c->buf[which].stub ||
        t->byte_offset % (int64_t)fmsa_dtype_size(t->dtype))
        return;
    for (int i = 0; i < t->ndim; ++i) {
        if (t->shape[i] <= 0 || t->strides[i] < 0) return;
        count *= t->shape[i];
    }
    for (int64_t e = 0; e < count; ++e) {
        const int64_t off = fuzz_element_offset(t, e);
        float v = fuzz_value(seed, which, off, amp);
        if (special && (uint64_t)e == special_at % (uint64_t)count)
            v = special == 1 ? NAN : (special == 2 ? INFINITY : -INFINITY);
        fuzz_store(t, off, v);
    }
}

/* An int32 view filled with input bytes mod `mod` (a u8 view: with their
 * complements, so a missing byte keeps every key). */
static void fuzz_fill_meta(fuzz_call *c, int which, fuzz_bytes *in, int64_t mod) {
    fmsa_tensor *t = &c->t[which];
    fuzz_buf *bf = &c->buf[which];
    const size_t es = t->dtype == FMSA_DTYPE_U8 ? 1 : 4;
    if (bf->stub) return;
    for (size_t at = (size_t)t->byte_offset; at + es <= bf->bytes; at += es) {
        if (es == 1) {
            bf->mem[at] = (unsigned char)~fz_u8(in);
        } else {
            int32_t w = (int32_t)((int64_t)fz_u8(in) % mod);
            memcpy(bf->mem + at, &w, 4);
        }
    }
}

int fuzz_decode(const uint8_t *data, size_t size, fuzz_call *c) {
    static const int64_t dims[16] = {8, 16, 24, 32, 40, 48, 64, 72, 96, 128, 136, 256,
                                     0, 12, 264, 300};
    static const float softcaps[8] = {1.0f, 5.0f, 30.0f, 50.0f, 0.5f, -1.0f, NAN, INFINITY};
    static const float scales[8] = {0.5f, 2.0f, 10.0f, 0.0f, -0.3f, NAN, INFINITY, 1e30f};
    static const float slopes[8] = {0.0f, 0.125f, 0.5f, 1.0f, 2.0f, -0.25f, NAN, 1e30f};
    fuzz_bytes in = {data, size, 0};
    unsigned flags, v, lay[FUZZ_NT], mut[FUZZ_NT];
    fmsa_dtype dt;
    int64_t B, Sq, Sk, Hkv, Hq, D, qs[4], ks[4], ls[3];
    int varlen = 0, paged = 0, special;
    int64_t total_q, total_k, max_q, max_k, page_size = 0, max_pages = 0, pages = 0;
    float amp, scale;
    uint32_t seed;

    if (size > 4096) return -1; /* the problem is decoded from the first bytes anyway */
    memset(c, 0, sizeof *c);
    c->inputs_tame = 1;
    flags = fz_u8(&in);
    c->backward = flags & 1u;
    c->lse_given = !(flags & 8u);
    v = fz_u8(&in);
    dt = (fmsa_dtype)(FMSA_DTYPE_F32 + v % 3u);
    if (v >= 250) dt = (fmsa_dtype)(v % 2u ? FMSA_DTYPE_I32 : FMSA_DTYPE_INVALID);
    v = fz_u8(&in);
    B = v == 255 ? 0 : 1 + v % 3u;
    Sq = fz_u8(&in) % 49u;
    Sk = fz_u8(&in) % 49u;
    v = fz_u8(&in);
    Hkv = 1 + v % 3u;
    Hq = Hkv * (1 + (v >> 2) % 3u) + ((v >> 4) == 15u);
    D = dims[fz_u8(&in) % 16u];

    c->desc = fmsa_attention_desc_init(D > 0 ? D : 8);
    c->desc.causal = (flags >> 1) & 1u;
    c->desc.deterministic = (flags >> 2) & 1u;
    /* 255: a window wider than any sequence (INT64_MAX: the same as -1) */
    v = fz_u8(&in);
    c->desc.window_left = v < 128 ? -1 : (int64_t)((v - 128) % 20) - 1;
    if (v == 255) c->desc.window_left = INT64_MAX;
    v = fz_u8(&in);
    c->desc.window_right = v < 128 ? -1 : (int64_t)((v - 128) % 20) - 1;
    if (v == 255) c->desc.window_right = INT64_MAX;
    v = fz_u8(&in);
    if (flags & 64u) {
        c->desc.softcap = softcaps[v % 8u];
        if (v % 8u >= 5) c->inputs_tame = 0;
    }
    v = fz_u8(&in);
    if (v >= 160) {
        scale = scales[v % 8u];
        c->desc.softmax_scale = scale;
        if (v % 8u >= 5) c->inputs_tame = 0;
    }
    c->env = (int)(fz_u8(&in) % FUZZ_ENV_COUNT);
    v = fz_u8(&in);
    amp = v & 1u ? 5.0f : 1.0f;
    special = (int)((v >> 1) & 3u);
    seed = v >> 3;
    if (special) c->inputs_tame = 0;
    c->ws_code = (int)(fz_u8(&in) % 8u);
    if (flags & 128u) {
        v = fz_u8(&in);
        varlen = !(v & 1u);
        paged = !varlen;
        page_size = 1 + (v >> 1) % 16u;
        v = fz_u8(&in);
        max_pages = 1 + v % 4u;
        pages = 1 + (v >> 2) % 8u;
    }
    for (int i = 0; i < FUZZ_NT; ++i) {
        lay[i] = fz_u8(&in);
        mut[i] = fz_u8(&in);
    }

    /* sequences: dense, varlen (cu_seqlens from bytes) or paged */
    total_q = B * Sq, total_k = B * Sk, max_q = Sq, max_k = Sk;
    if (varlen) {
        int64_t n = B + 1;
        int32_t cq = 0, ck = 0;
        fuzz_view(c, FUZZ_CU_Q, FMSA_DTYPE_I32, 1, &n, lay[FUZZ_CU_Q] & ~3u, mut[FUZZ_CU_Q]);
        fuzz_view(c, FUZZ_CU_K, FMSA_DTYPE_I32, 1, &n, lay[FUZZ_CU_K] & ~3u, mut[FUZZ_CU_K]);
        max_q = max_k = 0;
        for (int64_t b = 0; b <= B; ++b) {
            unsigned lq = b ? fz_u8(&in) % (unsigned)(Sq + 1) : 0;
            unsigned lk = b ? fz_u8(&in) % (unsigned)(Sk + 1) : 0;
            cq += (int32_t)lq, ck += (int32_t)lk;
            if (lq > max_q) max_q = lq;
            if (lk > max_k) max_k = lk;
            if (c->buf[FUZZ_CU_Q].bytes >= (size_t)(c->t[FUZZ_CU_Q].byte_offset + 4 * (b + 1)) &&
                c->t[FUZZ_CU_Q].strides[0] == 1)
                memcpy(c->buf[FUZZ_CU_Q].mem + c->t[FUZZ_CU_Q].byte_offset + 4 * b, &cq, 4);
            if (c->buf[FUZZ_CU_K].bytes >= (size_t)(c->t[FUZZ_CU_K].byte_offset + 4 * (b + 1)) &&
                c->t[FUZZ_CU_K].strides[0] == 1)
                memcpy(c->buf[FUZZ_CU_K].mem + c->t[FUZZ_CU_K].byte_offset + 4 * b, &ck, 4);
        }
        total_q = cq, total_k = ck;
        v = fz_u8(&in);
        c->desc.max_seqlen_q = v < 200 ? 0 : (v < 240 ? max_q : (int64_t)(v % 4u) - 1);
        c->desc.max_seqlen_k = v < 200 ? 0 : (v < 240 ? max_k : (int64_t)(v % 4u));
        c->desc.cu_seqlens_q = c->t[FUZZ_CU_Q];
        c->desc.cu_seqlens_k = c->t[FUZZ_CU_K];
        B = 1;
    } else if (paged) {
        int64_t ts[2] = {B, max_pages};
        fuzz_view(c, FUZZ_TABLE, FMSA_DTYPE_I32, 2, ts, lay[FUZZ_TABLE] & ~3u, mut[FUZZ_TABLE]);
        /* one value in 9 is past the pool: a page index the library must refuse */
        fuzz_fill_meta(c, FUZZ_TABLE, &in, pages + 1 + pages / 8);
        c->desc.block_table = c->t[FUZZ_TABLE];
        c->desc.page_size = page_size;
        max_k = max_pages * page_size;
        if (lay[FUZZ_USED] & 1u) {
            fuzz_view(c, FUZZ_USED, FMSA_DTYPE_I32, 1, &B, lay[FUZZ_USED] & ~3u, mut[FUZZ_USED]);
            fuzz_fill_meta(c, FUZZ_USED, &in, max_k + 2);
            c->desc.seqused_k = c->t[FUZZ_USED];
        }
    }

    qs[0] = varlen ? 1 : B, qs[1] = varlen ? total_q : Sq, qs[2] = Hq, qs[3] = D;
    ks[0] = paged ? pages : qs[0], ks[1] = varlen ? total_k : (paged ? page_size : Sk);
    ks[2] = Hkv, ks[3] = D;
    ls[0] = qs[0], ls[1] = Hq, ls[2] = qs[1];
    for (int i = FUZZ_Q; i <= FUZZ_DV; ++i) {
        const int kv = i == FUZZ_K || i == FUZZ_V || i == FUZZ_DK || i == FUZZ_DV;
        if (i == FUZZ_LSE) fuzz_view(c, i, FMSA_DTYPE_F32, 3, ls, lay[i], mut[i]);
        else fuzz_view(c, i, dt, 4, kv ? ks : qs, lay[i], mut[i]);
        if (!c->buf[i].mem) {
            fuzz_release(c);
            return -1;
        }
    }
    if (flags & 16u) { /* ALiBi: [Hq] or [B, Hq] */
        int64_t as[2] = {B, Hq};
        const int two = (lay[FUZZ_ALIBI] >> 6) & 1u;
        fuzz_view(c, FUZZ_ALIBI, FMSA_DTYPE_F32, two ? 2 : 1, two ? as : as + 1,
                  lay[FUZZ_ALIBI] & ~3u, mut[FUZZ_ALIBI]);
        for (size_t at = (size_t)c->t[FUZZ_ALIBI].byte_offset;
             !c->buf[FUZZ_ALIBI].stub && at + 4 <= c->buf[FUZZ_ALIBI].bytes; at += 4) {
            unsigned s = fz_u8(&in) % 8u;
            if (s >= 6) c->inputs_tame = 0;
            memcpy(c->buf[FUZZ_ALIBI].mem + at, &slopes[s], 4);
        }
        c->desc.alibi_slopes = c->t[FUZZ_ALIBI];
    }
    if (flags & 32u) { /* bit mask [B|1, Hq|1, Sq, ceil(Sk / 8)], bits from the input */
        const unsigned l = lay[FUZZ_MASK];
        int64_t ms[4] = {l & 64u ? 1 : B, l & 128u ? 1 : Hq, max_q, (max_k + 7) / 8};
        fuzz_view(c, FUZZ_MASK, FMSA_DTYPE_U8, 4, ms, l, mut[FUZZ_MASK]);
        fuzz_fill_meta(c, FUZZ_MASK, &in, 1);
        c->desc.mask = c->t[FUZZ_MASK];
    }
    /* inputs; O and LSE are the forward's outputs and the backward's inputs */
    v = fz_u8(&in);
    fuzz_fill(c, FUZZ_Q, seed, amp, special == 3 ? 1 : 0, v);
    fuzz_fill(c, FUZZ_K, seed, amp, special == 1 ? 1 : 0, v);
    fuzz_fill(c, FUZZ_V, seed, amp, special == 2 ? 2 : 0, v);
    fuzz_fill(c, FUZZ_DOUT, seed, amp, 0, v);
    return 0;
}

void fuzz_workspace(fuzz_call *c, size_t need) {
    size_t bytes = need;
    free(c->ws);
    c->ws = NULL;
    switch (c->ws_code) {
    case 5: bytes = need > 0 ? need - 1 : 0; break; /* one byte short */
    case 6: bytes = 0; break;                       /* none at all */
    case 7: bytes = need + 64; break;
    default: break;
    }
    c->ws_bytes = bytes;
    if (bytes > 0) {
        c->ws = malloc(bytes);
        if (c->ws) memset(c->ws, 0xff, bytes);
        else c->ws_bytes = 0;
    }
}

void fuzz_snapshot(fuzz_call *c, const int *which, int n) {
    for (int i = 0; i < n; ++i) {
        fuzz_buf *b = &c->buf[which[i]];
        if (b->mem && b->snap) memcpy(b->snap, b->mem, b->bytes);
    }
}

void fuzz_fill_nan(fuzz_call *c, const int *which, int n) {
    for (int i = 0; i < n; ++i) {
        fuzz_buf *b = &c->buf[which[i]];
        if (b->mem) memset(b->mem, 0xff, b->bytes); /* NaN in fp32, fp16 and bf16 alike */
    }
}

void fuzz_poison(fuzz_call *c, const int *which, int n) {
    fuzz_fill_nan(c, which, n);
    fuzz_snapshot(c, which, n);
}

void fuzz_release(fuzz_call *c) {
    for (int i = 0; i < FUZZ_NT; ++i) {
        free(c->buf[i].mem);
        free(c->buf[i].snap);
        c->buf[i].mem = c->buf[i].snap = NULL;
    }
    free(c->ws);
    c->ws = NULL;
}
