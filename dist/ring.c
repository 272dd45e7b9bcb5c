/*
 * The ring driver (flashmsa_dist.h): one loop over P steps per pass, over the
 * transport vtable and the public passes.  Forward: K/V (packed in one
 * buffer) go to the next rank while this rank attends to the block it holds;
 * each block's (O, lse) merges into an fp32 state through fmsa_merge_states.
 * Backward: the same rotation, with the fp32 dK/dV partials of each block
 * travelling behind it (sent once the block's local pass is done), dQ summed
 * locally in fp32, dsink summed over the ranks at the end.
 *
 * Every piece of arithmetic runs on the context's device through the
 * backend's elementwise op (common/accumulate.h: pack, fill, fp32 sums, the
 * final rounding) on the context's default stream, so a GPU ring never
 * touches its data on the host; the host waits only where the transport does
 * (and once at the end of the backward, for dsink's all-reduce).
 *
 * ALiBi with the striped layout (ring_plan.c): the calls run with the slopes
 * times P (a copy in the workspace, made on the device) and the constant of
 * their side of the diagonal moves their lse: added to the forward's partial
 * lse before the merge, taken from the lse the backward's call reads (a copy
 * of its rows), each by the elementwise op with the slopes broadcast over
 * rows.  A bit mask: each call reads a view of the rank's mask rows starting
 * at the byte of its first key's global column.
 *
 * Failures: arguments are checked on every rank before the ring starts, and
 * the ranks agree (an all-reduce of the verdict) so that none is left waiting
 * for a rank that returned; a failure inside the ring (out of memory in a
 * local pass) can leave the other ranks waiting, as an MPI program's would.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/accumulate.h"
#include "common/attention_offset.h"
#include "common/context.h"
#include "common/error.h"
#include "common/validate.h"
#include "dist/ring_plan.h"
#include "dist/transport.h"

/* ------------------------------------------------------------------ views */

/// Rows [row0, row0 + rows) of a [B, S, H, D] view.
static fmsa_tensor ring_rows4(const fmsa_tensor *t, int64_t row0, int64_t rows) {
    fmsa_tensor v = *t;
    v.byte_offset += row0 * t->strides[1] * (int64_t)fmsa_dtype_size(t->dtype);
    v.shape[1] = rows;
    return v;
}

/// Rows [row0, row0 + rows) of a [B, H, S] view (lse, dlse).
static fmsa_tensor ring_rows3(const fmsa_tensor *t, int64_t row0, int64_t rows) {
    fmsa_tensor v = *t;
    if (!t->data) return v;
    v.byte_offset += row0 * t->strides[2] * (int64_t)fmsa_dtype_size(t->dtype);
    v.shape[2] = rows;
    return v;
}

/* ------------------------------------------------------------- workspace */

/// Carves 64-byte aligned pieces out of the caller's host workspace; with
/// base == NULL it only counts.
typedef struct ring_arena {
    char *base;
    size_t used;
} ring_arena;

static void *ring_take(ring_arena *a, size_t bytes) {
    void *p = a->base ? a->base + a->used : NULL;
    a->used += (bytes + 63) & ~(size_t)63;
    return p;
}

/// A contiguous tensor of the given shape in the arena.
static fmsa_tensor ring_tensor(ring_arena *a, fmsa_dtype dt, int32_t nd, const int64_t *shape) {
    size_t n = 1;
    for (int32_t i = 0; i < nd; ++i) n *= (size_t)shape[i];
    return fmsa_tensor_contiguous(ring_take(a, n * fmsa_dtype_size(dt)), dt, nd, shape);
}

static size_t ring_numel(const fmsa_tensor *t) {
    size_t n = 1;
    for (int32_t i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
    return n;
}

/* ------------------------------------------------- device arithmetic */

/// dst (fp32) += src (any float dtype), on the context's device.
static fmsa_status ring_add(fmsa_context *ctx, const fmsa_tensor *dst, const fmsa_tensor *src) {
    return fmsa_accumulate(ctx, FMSA_ACC_ADD, dst, src, 0.0f, NULL);
}

/// dst = src, rounded to dst's dtype (bitwise between equal dtypes).
static fmsa_status ring_copy(fmsa_context *ctx, const fmsa_tensor *dst, const fmsa_tensor *src) {
    return fmsa_accumulate(ctx, FMSA_ACC_COPY, dst, src, 0.0f, NULL);
}

static fmsa_status ring_fill(fmsa_context *ctx, const fmsa_tensor *t, float x) {
    return fmsa_accumulate(ctx, FMSA_ACC_FILL, t, NULL, x, NULL);
}

/* ------------------------------------------------------------ validation */

typedef struct ring_shape {
    int P, r;
    int64_t B, c, Hq, Hkv, D, Dv;
    fmsa_dtype dt;
    int striped_alibi;       ///< ALiBi with the striped layout: scaled slopes, lse shifts
    int32_t slopes_ndim;     ///< with it: desc.alibi_slopes' shape
    int64_t slopes_shape[2];
} ring_shape;

/* A bit mask (flashmsa_dist.h): the rank's own rows (in its shard's order)
 * over the whole sequence's key columns, which the calls read through views
 * starting at a byte, so every chunk of keys must start at a multiple of 8. */
static fmsa_status ring_check_mask(const fmsa_attention_desc *desc, fmsa_ring_layout layout,
                                   const ring_shape *sh) {
    const fmsa_tensor *m = &desc->mask;
    const int64_t S = (int64_t)sh->P * sh->c;
    const int64_t chunk = layout == FMSA_RING_ZIGZAG ? sh->c / 2 : sh->c;
    if (m->ndim != 4)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "desc.mask.ndim = %d: expected 4",
                         (int)m->ndim);
    if (m->shape[2] != sh->c || m->shape[3] < (S + 7) / 8)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "desc.mask.shape = [., ., %lld, %lld]: a ring rank passes its own rows "
                         "over the whole sequence's keys, [., ., %lld, >= %lld] here (c = "
                         "q.shape[1] rows, ceil(P c / 8) bytes)",
                         (long long)m->shape[2], (long long)m->shape[3], (long long)sh->c,
                         (long long)((S + 7) / 8));
    /* contiguous: blocks start at columns j c (only 0 when P = 1); zigzag: chunks at j c/2 */
    if ((layout == FMSA_RING_ZIGZAG || sh->P > 1) && chunk % 8)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "ring: desc.mask with the %s layout needs %s (%lld) a multiple of 8: "
                         "the calls read the keys of each chunk through a view of the bit-packed "
                         "mask, which can start only at a byte (8 columns)",
                         layout == FMSA_RING_ZIGZAG ? "zigzag" : "contiguous",
                         layout == FMSA_RING_ZIGZAG ? "the chunk q.shape[1] / 2"
                                                    : "q.shape[1] with P > 1",
                         (long long)chunk);
    return FMSA_SUCCESS;
}

/* What the ring refuses before any rank starts, and the shard's shape. */
static fmsa_status ring_check_local(fmsa_context *ctx, const fmsa_dist_comm *comm,
                                    fmsa_ring_layout layout, const fmsa_attention_desc *desc,
                                    const fmsa_tensor *q, const fmsa_tensor *k,
                                    const fmsa_tensor *v, ring_shape *sh) {
    fmsa_device_info info;
    if (!ctx) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ctx is NULL");
    if (!comm) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "comm is NULL");
    if (!desc) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "desc is NULL");
    if (layout != FMSA_RING_CONTIGUOUS && layout != FMSA_RING_ZIGZAG &&
        layout != FMSA_RING_STRIPED)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "layout = %d is not an fmsa_ring_layout",
                         (int)layout);
    FMSA_TRY(fmsa_context_device(ctx, &info));
    if (ctx->vt->data_handles || !ctx->vt->accumulate || !ctx->vt->copy_device)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "ring: the %s backend is not supported (%s)",
                         fmsa_backend_name(info.backend),
                         ctx->vt->data_handles
                             ? "its buffers are handles, which the transports cannot address"
                             : "it lacks the elementwise op and device copy the ring needs");
    if (desc->mask.data && layout == FMSA_RING_STRIPED)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "ring: desc.mask with the striped layout is not supported: a rank's "
                         "mask rows span the whole sequence's key columns, and the keys a "
                         "striped rank holds are every P-th column, which no view of the "
                         "bit-packed rows can select; use the contiguous or zigzag layout");
    if (desc->cu_seqlens_q.data || desc->block_table.data)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED, "ring: desc.%s: varlen and paged KV are not "
                         "supported", desc->cu_seqlens_q.data ? "cu_seqlens_q" : "block_table");
    if (!q || !k || !v)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s: tensor pointer is NULL",
                         !q ? "q" : !k ? "k" : "v");
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "q/k/v.ndim = %d/%d/%d: expected 4",
                         (int)q->ndim, (int)k->ndim, (int)v->ndim);
    if (k->shape[1] != q->shape[1] || v->shape[1] != q->shape[1])
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "k.shape[1] = %lld, v.shape[1] = %lld: a ring shard holds the same "
                         "tokens' queries and keys (q.shape[1] = %lld)",
                         (long long)k->shape[1], (long long)v->shape[1], (long long)q->shape[1]);
    sh->P = comm->size;
    sh->r = comm->rank;
    sh->B = q->shape[0];
    sh->c = q->shape[1];
    sh->Hq = q->shape[2];
    sh->Hkv = k->shape[2];
    sh->D = q->shape[3];
    sh->Dv = v->shape[3];
    sh->dt = q->dtype;
    sh->striped_alibi = desc->alibi_slopes.data && layout == FMSA_RING_STRIPED;
    sh->slopes_ndim = 0;
    if (sh->striped_alibi) {
        /* the local passes validate the slopes; this sizes their copy */
        if (desc->alibi_slopes.ndim < 1 || desc->alibi_slopes.ndim > 2)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "desc.alibi_slopes.ndim = %d: expected "
                             "1 ([Hq]) or 2 ([B, Hq])", (int)desc->alibi_slopes.ndim);
        sh->slopes_ndim = desc->alibi_slopes.ndim;
        for (int32_t i = 0; i < sh->slopes_ndim; ++i)
            sh->slopes_shape[i] = desc->alibi_slopes.shape[i];
    }
    if (layout == FMSA_RING_ZIGZAG && sh->c % 2)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "q.shape[1] = %lld: the zigzag layout holds two equal chunks per rank "
                         "(an even count)",
                         (long long)sh->c);
    if (desc->mask.data) return ring_check_mask(desc, layout, sh);
    return FMSA_SUCCESS;
}

/* The ranks agree on whether every rank's arguments passed: a rank that
 * failed keeps its own message, the others name it. */
static fmsa_status ring_agree(fmsa_dist_comm *comm, fmsa_status local) {
    float bad[2] = {local != FMSA_SUCCESS ? 1.0f : 0.0f,
                    local != FMSA_SUCCESS ? (float)comm->rank + 1.0f : 0.0f};
    char msg[512];
    snprintf(msg, sizeof msg, "%s", fmsa_last_error());
    FMSA_TRY(fmsa_dist_allreduce(comm, bad, 2));
    if (local != FMSA_SUCCESS) return fmsa_fail(local, "%s", msg);
    if (bad[0] > 0.0f)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "ring: %d rank(s) refused their arguments (e.g. rank %d): see their "
                         "messages; nothing was written",
                         (int)bad[0], (int)(bad[1] / bad[0]) - 1);
    return FMSA_SUCCESS;
}

/* ------------------------------------------------------------- the plan */

/// The local description of one call: the ring's, with its causal flag and
/// window, the sinks only where the call carries them, the mask's view of the
/// call's rows and key columns, and (striped ALiBi) the scaled slopes, when
/// slopes is not NULL (sizes need no values: NULL keeps the description's).
static fmsa_attention_desc ring_desc(const fmsa_attention_desc *desc, const fmsa_ring_call *c,
                                     const fmsa_tensor *slopes) {
    fmsa_attention_desc d = *desc;
    d.causal = c->causal;
    d.window_left = c->window_left;
    d.window_right = c->window_right;
    if (!c->sinks) memset(&d.sinks, 0, sizeof d.sinks);
    if (d.mask.data) { /* rows of the rank's shard, columns of the whole sequence (u8) */
        const int64_t byte0 = c->k_pos0 / 8; /* the plan starts every call's keys at a byte */
        d.mask.byte_offset += c->q_row0 * d.mask.strides[2] + byte0 * d.mask.strides[3];
        d.mask.shape[2] = c->q_rows;
        d.mask.shape[3] -= byte0;
    }
    if (slopes && c->alibi_scale != 1) d.alibi_slopes = *slopes;
    return d;
}

/// The global mask the plan reproduces: the description's causal flag and window.
static fmsa_ring_mask ring_mask(const fmsa_attention_desc *desc) {
    fmsa_ring_mask m;
    m.causal = desc->causal != 0;
    m.window_left = desc->window_left < 0 ? -1 : desc->window_left;
    m.window_right = desc->window_right < 0 ? -1 : desc->window_right;
    m.alibi = desc->alibi_slopes.data != NULL;
    m.mask = desc->mask.data != NULL;
    return m;
}

/// Largest local workspace over every call of every step.
static fmsa_status ring_local_ws(fmsa_context *ctx, fmsa_ring_layout layout, fmsa_pass pass,
                                 const fmsa_attention_desc *desc, const ring_shape *sh,
                                 const fmsa_tensor *q, const fmsa_tensor *k, const fmsa_tensor *v,
                                 size_t *bytes) {
    fmsa_ring_call calls[FMSA_RING_MAX_CALLS];
    const fmsa_ring_mask m = ring_mask(desc);
    *bytes = 0;
    for (int s = 0; s < sh->P; ++s) {
        const int n = fmsa_ring_plan_step(layout, sh->P, sh->r, s, sh->c, &m, calls);
        if (n < 0) return fmsa_fail(FMSA_ERR_INTERNAL, "ring: no plan for step %d", s);
        for (int i = 0; i < n; ++i) {
            const fmsa_attention_desc d = ring_desc(desc, &calls[i], NULL);
            const fmsa_tensor qv = ring_rows4(q, calls[i].q_row0, calls[i].q_rows);
            const fmsa_tensor kv = ring_rows4(k, calls[i].k_row0, calls[i].k_rows);
            const fmsa_tensor vv = ring_rows4(v, calls[i].k_row0, calls[i].k_rows);
            size_t w = 0;
            FMSA_TRY(fmsa_workspace_size(ctx, pass, &d, &qv, &kv, &vv, &w));
            if (w > *bytes) *bytes = w;
        }
    }
    return FMSA_SUCCESS;
}

/// The pieces of the ring's workspace (base NULL: sizes only).
typedef struct ring_ws {
    fmsa_tensor k[2], v[2];   ///< the K/V double buffer, packed [B, c, Hkv, D|Dv] (input dtype)
    fmsa_tensor dk[2], dv[2]; ///< backward: fp32 dK/dV partials travelling with the block
    fmsa_tensor acc_o;        ///< forward: fp32 [B, c, Hq, Dv] state; backward: fp32 dQ
    fmsa_tensor acc_lse;      ///< forward: fp32 [B, Hq, c]
    fmsa_tensor ninf_lse;     ///< forward: -inf rows, for the final rounding through the merge
    fmsa_tensor part_o;       ///< forward: a call's O; backward: a call's dQ (input dtype)
    fmsa_tensor part_lse;     ///< forward: a call's lse
    fmsa_tensor part_dk, part_dv; ///< backward: a call's dK / dV (input dtype)
    fmsa_tensor dsink, part_dsink; ///< backward: [Hq] fp32
    fmsa_tensor slopes;       ///< striped ALiBi: desc.alibi_slopes times P, fp32, their shape
    fmsa_tensor lse_shift;    ///< striped ALiBi, backward: fp32 [B, Hq, c], the lse a call reads
    void *local;              ///< the local passes' workspace
    size_t local_bytes;
    size_t bytes;             ///< total
} ring_ws;

static void ring_ws_layout(char *base, fmsa_pass pass, const ring_shape *sh, size_t local,
                           ring_ws *w) {
    ring_arena a = {base, 0};
    const int64_t ks[4] = {sh->B, sh->c, sh->Hkv, sh->D}, vs[4] = {sh->B, sh->c, sh->Hkv, sh->Dv};
    const int64_t os[4] = {sh->B, sh->c, sh->Hq, sh->Dv}, qs[4] = {sh->B, sh->c, sh->Hq, sh->D};
    const int64_t ls[3] = {sh->B, sh->Hq, sh->c};
    memset(w, 0, sizeof *w);
    for (int i = 0; i < 2; ++i) {
        w->k[i] = ring_tensor(&a, sh->dt, 4, ks);
        w->v[i] = ring_tensor(&a, sh->dt, 4, vs);
    }
    if (pass == FMSA_PASS_FORWARD) {
        w->acc_o = ring_tensor(&a, FMSA_DTYPE_F32, 4, os);
        w->acc_lse = ring_tensor(&a, FMSA_DTYPE_F32, 3, ls);
        w->ninf_lse = ring_tensor(&a, FMSA_DTYPE_F32, 3, ls);
        w->part_o = ring_tensor(&a, sh->dt, 4, os);
        w->part_lse = ring_tensor(&a, FMSA_DTYPE_F32, 3, ls);
    } else {
        for (int i = 0; i < 2; ++i) {
            w->dk[i] = ring_tensor(&a, FMSA_DTYPE_F32, 4, ks);
            w->dv[i] = ring_tensor(&a, FMSA_DTYPE_F32, 4, vs);
        }
        w->acc_o = ring_tensor(&a, FMSA_DTYPE_F32, 4, qs);
        w->part_o = ring_tensor(&a, sh->dt, 4, qs);
        w->part_dk = ring_tensor(&a, sh->dt, 4, ks);
        w->part_dv = ring_tensor(&a, sh->dt, 4, vs);
        w->dsink = ring_tensor(&a, FMSA_DTYPE_F32, 1, &sh->Hq);
        w->part_dsink = ring_tensor(&a, FMSA_DTYPE_F32, 1, &sh->Hq);
        if (sh->striped_alibi) w->lse_shift = ring_tensor(&a, FMSA_DTYPE_F32, 3, ls);
    }
    if (sh->striped_alibi) w->slopes = ring_tensor(&a, FMSA_DTYPE_F32, sh->slopes_ndim,
                                                   sh->slopes_shape);
    w->local = ring_take(&a, local);
    w->local_bytes = local;
    w->bytes = a.used;
}

/// Packs this rank's k and v (any strides) into block buffer 0.
static fmsa_status ring_pack_kv(fmsa_context *ctx, const ring_ws *w, const fmsa_tensor *k,
                                const fmsa_tensor *v) {
    FMSA_TRY(ring_copy(ctx, &w->k[0], k));
    return ring_copy(ctx, &w->v[0], v);
}

/// Bytes of K and V of one block: they travel as one message (k then v, adjacent).
static size_t ring_kv_bytes(const ring_ws *w) {
    return (size_t)((char *)w->v[0].data - (char *)w->k[0].data) +
           ring_numel(&w->v[0]) * fmsa_dtype_size(w->v[0].dtype);
}

static size_t ring_dkv_bytes(const ring_ws *w) {
    return (size_t)((char *)w->dv[0].data - (char *)w->dk[0].data) +
           ring_numel(&w->dv[0]) * sizeof(float);
}

static fmsa_status ring_validate(fmsa_pass pass, const fmsa_attention_desc *desc,
                                 const fmsa_tensor *q, const fmsa_tensor *k, const fmsa_tensor *v,
                                 const fmsa_tensor *o, const fmsa_tensor *lse,
                                 const fmsa_backward_tensors *t);

/* ---------------------------------------------------------- entry points */

fmsa_status fmsa_ring_workspace_size(fmsa_context *ctx, const fmsa_dist_comm *comm,
                                     fmsa_ring_layout layout, fmsa_pass pass,
                                     const fmsa_attention_desc *desc, const fmsa_tensor *q,
                                     const fmsa_tensor *k, const fmsa_tensor *v, size_t *bytes) {
    ring_shape sh;
    ring_ws w;
    size_t local = 0;
    fmsa_clear_error();
    if (!bytes) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = 0;
    if (pass != FMSA_PASS_FORWARD && pass != FMSA_PASS_BACKWARD)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "pass = %d is not an fmsa_pass", (int)pass);
    FMSA_TRY(ring_check_local(ctx, comm, layout, desc, q, k, v, &sh));
    FMSA_TRY(ring_local_ws(ctx, layout, pass, desc, &sh, q, k, v, &local));
    ring_ws_layout(NULL, pass, &sh, local, &w);
    *bytes = w.bytes;
    return FMSA_SUCCESS;
}

/* Checks shared by both passes; fills the workspace layout. */
static fmsa_status ring_prepare(fmsa_context *ctx, fmsa_dist_comm *comm, fmsa_ring_layout layout,
                                fmsa_pass pass, const fmsa_attention_desc *desc,
                                const fmsa_tensor *q, const fmsa_tensor *k, const fmsa_tensor *v,
                                void *workspace, size_t workspace_bytes, ring_shape *sh,
                                ring_ws *w) {
    size_t local = 0;
    FMSA_TRY(ring_check_local(ctx, comm, layout, desc, q, k, v, sh));
    FMSA_TRY(ring_local_ws(ctx, layout, pass, desc, sh, q, k, v, &local));
    ring_ws_layout(NULL, pass, sh, local, w);
    if (workspace_bytes < w->bytes)
        return fmsa_fail(FMSA_ERR_INSUFFICIENT_WORKSPACE,
                         "workspace_bytes = %zu: this ring pass needs %zu "
                         "(fmsa_ring_workspace_size)",
                         workspace_bytes, w->bytes);
    if (!workspace) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "workspace is NULL");
    ring_ws_layout((char *)workspace, pass, sh, local, w);
    return FMSA_SUCCESS;
}

/* ------------------------------------------------ striped ALiBi */

/// desc.alibi_slopes ([Hq] or [B, Hq]) as a [B, Hq, rows] view that repeats
/// each slope over the rows (stride 0): the source of a call's lse shift.
static fmsa_tensor ring_slopes_rows(const fmsa_attention_desc *desc, int64_t B, int64_t Hq,
                                    int64_t rows) {
    const fmsa_tensor *a = &desc->alibi_slopes;
    fmsa_tensor v = *a;
    v.ndim = 3;
    v.shape[0] = B;
    v.shape[1] = Hq;
    v.shape[2] = rows;
    v.strides[0] = a->ndim == 2 ? a->strides[0] : 0;
    v.strides[1] = a->ndim == 2 ? a->strides[1] : a->strides[0];
    v.strides[2] = 0;
    return v;
}

/// lse (fp32 [B, Hq, rows]) += scale * slope of its (sequence, head).
static fmsa_status ring_shift_lse(fmsa_context *ctx, const fmsa_attention_desc *desc,
                                  const fmsa_tensor *lse, float scale) {
    const fmsa_tensor sr = ring_slopes_rows(desc, lse->shape[0], lse->shape[1], lse->shape[2]);
    return fmsa_accumulate(ctx, FMSA_ACC_ADD_SCALED, lse, &sr, scale, NULL);
}

/// The striped calls' slopes: desc.alibi_slopes times P, into the workspace.
static fmsa_status ring_scale_slopes(fmsa_context *ctx, const fmsa_attention_desc *desc,
                                     const ring_shape *sh, const ring_ws *w) {
    if (!sh->striped_alibi) return FMSA_SUCCESS;
    FMSA_TRY(ring_fill(ctx, &w->slopes, 0.0f));
    return fmsa_accumulate(ctx, FMSA_ACC_ADD_SCALED, &w->slopes, &desc->alibi_slopes,
                           (float)sh->P, NULL);
}

/* One forward step's calls on block buffer `cur`, merged into the state. */
static fmsa_status ring_forward_step(fmsa_context *ctx, fmsa_ring_layout layout,
                                     const fmsa_attention_desc *desc, const ring_shape *sh,
                                     int s, const fmsa_tensor *q, const ring_ws *w, int cur) {
    fmsa_ring_call calls[FMSA_RING_MAX_CALLS];
    const fmsa_ring_mask m = ring_mask(desc);
    const int n = fmsa_ring_plan_step(layout, sh->P, sh->r, s, sh->c, &m, calls);
    for (int i = 0; i < n; ++i) {
        const fmsa_ring_call *c = &calls[i];
        const fmsa_attention_desc d = ring_desc(desc, c, &w->slopes);
        const fmsa_tensor qv = ring_rows4(q, c->q_row0, c->q_rows);
        const fmsa_tensor kv = ring_rows4(&w->k[cur], c->k_row0, c->k_rows);
        const fmsa_tensor vv = ring_rows4(&w->v[cur], c->k_row0, c->k_rows);
        const fmsa_tensor po = ring_rows4(&w->part_o, c->q_row0, c->q_rows);
        const fmsa_tensor pl = ring_rows3(&w->part_lse, c->q_row0, c->q_rows);
        const fmsa_tensor ao = ring_rows4(&w->acc_o, c->q_row0, c->q_rows);
        const fmsa_tensor al = ring_rows3(&w->acc_lse, c->q_row0, c->q_rows);
        FMSA_TRY(fmsa_forward_offset(ctx, &d, c->alibi_offset, &qv, &kv, &vv, &po, &pl, w->local,
                                     w->local_bytes, NULL));
        /* striped ALiBi: the constant the call's scores lack joins its lse */
        if (c->alibi_add) FMSA_TRY(ring_shift_lse(ctx, desc, &pl, (float)c->alibi_add));
        FMSA_TRY(fmsa_merge_states(ctx, &ao, &al, &po, &pl, &ao, &al, NULL));
    }
    return FMSA_SUCCESS;
}

fmsa_status fmsa_ring_forward(fmsa_context *ctx, fmsa_dist_comm *comm, fmsa_ring_layout layout,
                              const fmsa_attention_desc *desc, const fmsa_tensor *q,
                              const fmsa_tensor *k, const fmsa_tensor *v, const fmsa_tensor *o,
                              const fmsa_tensor *lse, void *workspace, size_t workspace_bytes) {
    ring_shape sh;
    ring_ws w;
    fmsa_status st;
    fmsa_tensor lse_out;
    fmsa_clear_error();
    st = ring_prepare(ctx, comm, layout, FMSA_PASS_FORWARD, desc, q, k, v, workspace,
                      workspace_bytes, &sh, &w);
    if (st == FMSA_SUCCESS) st = ring_validate(FMSA_PASS_FORWARD, desc, q, k, v, o, lse, NULL);
    if (!comm) return st;
    comm->ctx = ctx; /* the loopback copies blocks with it */
    FMSA_TRY(ring_agree(comm, st));
    FMSA_TRY(ring_scale_slopes(ctx, desc, &sh, &w));
    FMSA_TRY(ring_pack_kv(ctx, &w, k, v));
    FMSA_TRY(ring_fill(ctx, &w.acc_o, 0.0f));
    FMSA_TRY(ring_fill(ctx, &w.acc_lse, -INFINITY));
    FMSA_TRY(ring_fill(ctx, &w.ninf_lse, -INFINITY));
    for (int s = 0; s < sh.P; ++s) {
        const int cur = s & 1;
        if (s + 1 < sh.P)
            FMSA_TRY(fmsa_dist_exchange_start(comm, w.k[cur].data, w.k[cur ^ 1].data,
                                              ring_kv_bytes(&w)));
        st = ring_forward_step(ctx, layout, desc, &sh, s, q, &w, cur);
        if (s + 1 < sh.P) {
            const fmsa_status ws = fmsa_dist_exchange_wait(comm);
            if (st == FMSA_SUCCESS) st = ws;
        }
        FMSA_TRY(st);
    }
    /* The one rounding to o's dtype, by the merge with an empty state (its
     * validation also checks o and lse against the state's shapes). */
    lse_out = lse && lse->data ? *lse : w.part_lse;
    return fmsa_merge_states(ctx, &w.acc_o, &w.acc_lse, &w.acc_o, &w.ninf_lse, o, &lse_out, NULL);
}

/* One backward step's calls on block buffer `cur`: dQ into the fp32 sum,
 * dK/dV into the block's travelling fp32 partials, dsink at step 0. */
static fmsa_status ring_backward_step(fmsa_context *ctx, fmsa_ring_layout layout,
                                      const fmsa_attention_desc *desc, const ring_shape *sh,
                                      int s, const fmsa_backward_tensors *t, const ring_ws *w,
                                      int cur) {
    fmsa_ring_call calls[FMSA_RING_MAX_CALLS];
    const fmsa_ring_mask m = ring_mask(desc);
    const int n = fmsa_ring_plan_step(layout, sh->P, sh->r, s, sh->c, &m, calls);
    for (int i = 0; i < n; ++i) {
        const fmsa_ring_call *c = &calls[i];
        const fmsa_attention_desc d = ring_desc(desc, c, &w->slopes);
        fmsa_backward_tensors bt;
        fmsa_tensor adq, adk, adv;
        memset(&bt, 0, sizeof bt);
        bt.q = ring_rows4(&t->q, c->q_row0, c->q_rows);
        bt.k = ring_rows4(&w->k[cur], c->k_row0, c->k_rows);
        bt.v = ring_rows4(&w->v[cur], c->k_row0, c->k_rows);
        bt.o = ring_rows4(&t->o, c->q_row0, c->q_rows);
        bt.dout = ring_rows4(&t->dout, c->q_row0, c->q_rows);
        bt.lse = ring_rows3(&t->lse, c->q_row0, c->q_rows);
        bt.dlse = ring_rows3(&t->dlse, c->q_row0, c->q_rows);
        bt.dq = ring_rows4(&w->part_o, c->q_row0, c->q_rows);
        bt.dk = ring_rows4(&w->part_dk, c->k_row0, c->k_rows);
        bt.dv = ring_rows4(&w->part_dv, c->k_row0, c->k_rows);
        if (c->sinks && desc->sinks.data) bt.dsink = w->part_dsink;
        if (c->alibi_add) { /* striped ALiBi: P = exp(s + add slope - lse), s the call's score */
            const fmsa_tensor ls = ring_rows3(&w->lse_shift, c->q_row0, c->q_rows);
            FMSA_TRY(ring_copy(ctx, &ls, &bt.lse));
            FMSA_TRY(ring_shift_lse(ctx, desc, &ls, -(float)c->alibi_add));
            bt.lse = ls;
        }
        FMSA_TRY(fmsa_backward_offset(ctx, &d, c->alibi_offset, &bt, w->local, w->local_bytes,
                                      NULL));
        adq = ring_rows4(&w->acc_o, c->q_row0, c->q_rows);
        adk = ring_rows4(&w->dk[cur], c->k_row0, c->k_rows);
        adv = ring_rows4(&w->dv[cur], c->k_row0, c->k_rows);
        FMSA_TRY(ring_add(ctx, &adq, &bt.dq));
        FMSA_TRY(ring_add(ctx, &adk, &bt.dk));
        FMSA_TRY(ring_add(ctx, &adv, &bt.dv));
        if (bt.dsink.data) FMSA_TRY(ring_add(ctx, &w->dsink, &w->part_dsink));
    }
    return FMSA_SUCCESS;
}

/* Every argument of the shard as one local pass over all its rows would
 * take them (the validator every pass uses), so a bad tensor is refused
 * before the ring starts rather than by one rank's local pass inside it. */
static fmsa_status ring_validate(fmsa_pass pass, const fmsa_attention_desc *desc,
                                 const fmsa_tensor *q, const fmsa_tensor *k, const fmsa_tensor *v,
                                 const fmsa_tensor *o, const fmsa_tensor *lse,
                                 const fmsa_backward_tensors *t) {
    fmsa_call_tensors ct;
    fmsa_problem p;
    if (t) ct = fmsa_call_tensors_of_backward(t);
    else memset(&ct, 0, sizeof ct);
    ct.q = q;
    ct.k = k;
    ct.v = v;
    ct.o = o;
    ct.lse = lse;
    return fmsa_problem_build(&p, pass, desc, &ct, 0, NULL, NULL);
}

/* dsink summed over the ranks: the transports all-reduce host floats, so the
 * rank's [Hq] sum comes to the host (the ring's one wait on the device),
 * is summed, goes back to the workspace and is written into dsink's view. */
static fmsa_status ring_dsink_allreduce(fmsa_context *ctx, fmsa_dist_comm *comm, const ring_ws *w,
                                        const fmsa_tensor *dsink) {
    enum { ON_STACK = 256 };
    float stack[ON_STACK], *h = stack;
    const size_t n = (size_t)w->dsink.shape[0];
    fmsa_status st;
    if (n > ON_STACK && !(h = (float *)malloc(n * sizeof *h)))
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "ring: dsink of %zu heads", n);
    st = fmsa_copy_to_host(ctx, h, w->dsink.data, 0, n * sizeof *h);
    if (st == FMSA_SUCCESS) st = fmsa_dist_allreduce(comm, h, n);
    if (st == FMSA_SUCCESS) st = fmsa_copy_to_device(ctx, w->dsink.data, 0, h, n * sizeof *h);
    if (st == FMSA_SUCCESS) st = ring_copy(ctx, dsink, &w->dsink);
    if (h != stack) free(h);
    return st;
}

fmsa_status fmsa_ring_backward(fmsa_context *ctx, fmsa_dist_comm *comm, fmsa_ring_layout layout,
                               const fmsa_attention_desc *desc, const fmsa_backward_tensors *t,
                               void *workspace, size_t workspace_bytes) {
    ring_shape sh;
    ring_ws w;
    fmsa_status st;
    fmsa_clear_error();
    if (!t) st = fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "t (the backward's tensors) is NULL");
    else st = ring_prepare(ctx, comm, layout, FMSA_PASS_BACKWARD, desc, &t->q, &t->k, &t->v,
                           workspace, workspace_bytes, &sh, &w);
    if (st == FMSA_SUCCESS)
        st = ring_validate(FMSA_PASS_BACKWARD, desc, &t->q, &t->k, &t->v, &t->o, &t->lse, t);
    if (!comm) return st;
    comm->ctx = ctx; /* the loopback copies blocks with it */
    FMSA_TRY(ring_agree(comm, st));
    FMSA_TRY(ring_scale_slopes(ctx, desc, &sh, &w));
    FMSA_TRY(ring_pack_kv(ctx, &w, &t->k, &t->v));
    FMSA_TRY(ring_fill(ctx, &w.dk[0], 0.0f));
    FMSA_TRY(ring_fill(ctx, &w.dv[0], 0.0f));
    FMSA_TRY(ring_fill(ctx, &w.acc_o, 0.0f));
    if (t->dsink.data) FMSA_TRY(ring_fill(ctx, &w.dsink, 0.0f));
    for (int s = 0; s < sh.P; ++s) {
        const int cur = s & 1;
        if (s + 1 < sh.P)
            FMSA_TRY(fmsa_dist_exchange_start(comm, w.k[cur].data, w.k[cur ^ 1].data,
                                              ring_kv_bytes(&w)));
        st = ring_backward_step(ctx, layout, desc, &sh, s, t, &w, cur);
        if (s + 1 < sh.P) {
            const fmsa_status ws = fmsa_dist_exchange_wait(comm);
            if (st == FMSA_SUCCESS) st = ws;
        }
        FMSA_TRY(st);
        /* the block's dK/dV partials follow it to the next rank; after the
         * last step they arrive back home, summed over every rank's queries */
        FMSA_TRY(fmsa_dist_exchange_start(comm, w.dk[cur].data, w.dk[cur ^ 1].data,
                                          ring_dkv_bytes(&w)));
        FMSA_TRY(fmsa_dist_exchange_wait(comm));
    }
    {
        const int home = sh.P & 1;
        FMSA_TRY(ring_copy(ctx, &t->dk, &w.dk[home]));
        FMSA_TRY(ring_copy(ctx, &t->dv, &w.dv[home]));
        FMSA_TRY(ring_copy(ctx, &t->dq, &w.acc_o));
    }
    if (t->dsink.data) return ring_dsink_allreduce(ctx, comm, &w, &t->dsink);
    return FMSA_SUCCESS;
}
