/*
 * Validation of one attention call, once for every backend.
 *
 * Order matters: structural checks of each tensor (pointers, dtype, rank,
 * strides, addressable extent without int64 overflow), then agreement between
 * tensors (shapes, dtypes, heads), then the attention description, then the
 * metadata contents (cu_seqlens, block tables), which may need a device read.
 * Nothing is written to any output: a failure leaves every buffer untouched.
 * Every message names the field, so a user can fix the call from it alone.
 */
#include "common/validate.h"

#include "common/error.h"
#include "common/fmsa_limits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Largest element offset a view can reach, with overflow detection: a tensor
 * whose extent does not fit int64 bytes cannot be addressed by any kernel. */
static fmsa_status fmsa_check_extent(const char *name, const fmsa_tensor *t) {
    int64_t last = 0, bytes, count = 1;
    /* The element count must fit int64 too: with broadcast (stride 0)
     * dimensions the extent stays small while kernels still iterate over
     * (and index by) every element.  An empty dimension makes the count 0. */
    for (int32_t i = 0; i < t->ndim; ++i)
        if (__builtin_mul_overflow(count, t->shape[i], &count))
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "%s: shape product overflows int64 (dimension %d)", name, (int)i);
    /* An empty tensor addresses no element, but kernels still form the offsets
     * of its other dimensions (a row pointer per batch and head before a loop
     * over zero keys), so those must fit int64 as well. */
    for (int32_t i = 0; i < t->ndim; ++i) {
        int64_t step;
        if (t->shape[i] == 0) continue;
        if (__builtin_mul_overflow(t->shape[i] - 1, t->strides[i], &step) ||
            __builtin_add_overflow(last, step, &last))
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "%s: shape x strides overflows int64 (dimension %d)", name, (int)i);
    }
    if (__builtin_add_overflow(last, 1, &last) ||
        __builtin_mul_overflow(last, (int64_t)fmsa_dtype_size(t->dtype), &bytes) ||
        __builtin_add_overflow(bytes, t->byte_offset, &bytes))
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s: byte extent overflows int64", name);
    return FMSA_SUCCESS;
}

static int fmsa_tensor_is_empty(const fmsa_tensor *t) {
    for (int32_t i = 0; i < t->ndim && i < FMSA_MAX_DIMS; ++i)
        if (t->shape[i] == 0) return 1;
    return 0;
}

/* Structural checks shared by every tensor argument. */
static fmsa_status fmsa_check_tensor(const char *name, const fmsa_tensor *t, int32_t ndim,
                                     int last_contiguous) {
    size_t es;
    if (!t) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s: tensor pointer is NULL", name);
    es = fmsa_dtype_size(t->dtype);
    if (es == 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.dtype = %d is not a valid fmsa_dtype",
                         name, (int)t->dtype);
    if (t->ndim != ndim)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.ndim = %d: expected %d", name,
                         (int)t->ndim, (int)ndim);
    if (t->byte_offset < 0 || t->byte_offset % (int64_t)es != 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "%s.byte_offset = %lld: must be >= 0 and a multiple of %zu", name,
                         (long long)t->byte_offset, es);
    for (int32_t i = 0; i < ndim; ++i) {
        if (t->shape[i] < 0)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.shape[%d] = %lld is negative", name,
                             (int)i, (long long)t->shape[i]);
        if (t->strides[i] < 0)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "%s.strides[%d] = %lld: negative strides are not supported", name,
                             (int)i, (long long)t->strides[i]);
    }
    /* a tensor of zero elements addresses nothing, so it needs no data
     * (fmsa_malloc(0) gives NULL) */
    if (!t->data && !fmsa_tensor_is_empty(t))
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.data is NULL", name);
    if (last_contiguous && t->strides[ndim - 1] != 1)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "%s.strides[%d] = %lld: the head_dim stride must be 1", name,
                         (int)(ndim - 1), (long long)t->strides[ndim - 1]);
    return fmsa_check_extent(name, t);
}

/* t may not broadcast (a zero stride over an extent > 1); `what` says why in
 * the message.  Outputs: several results would land on one element, written
 * concurrently by different threads or work-groups (a race).  cu_seqlens:
 * every sequence would be empty while a tiny buffer claims any batch, which
 * validation would read entry by entry.  Only the documented inputs (mask,
 * alibi) may broadcast. */
static fmsa_status fmsa_check_not_broadcast(const char *name, const fmsa_tensor *t,
                                            const char *what) {
    for (int32_t i = 0; i < t->ndim; ++i)
        if (t->shape[i] == 0) return FMSA_SUCCESS; /* empty: nothing is read or written */
    for (int32_t i = 0; i < t->ndim; ++i)
        if (t->strides[i] == 0 && t->shape[i] > 1)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "%s.strides[%d] = 0 with shape[%d] = %lld: %s cannot broadcast",
                             name, (int)i, (int)i, (long long)t->shape[i], what);
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_check_dtype(const char *name, const fmsa_tensor *t, fmsa_dtype want) {
    if (t->dtype != want)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.dtype = %d: expected %d", name,
                         (int)t->dtype, (int)want);
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_check_shape(const char *name, const fmsa_tensor *t, const int64_t *want,
                                    const char *const *dim_names) {
    for (int32_t i = 0; i < t->ndim; ++i)
        if (t->shape[i] != want[i])
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.shape[%d] (%s) = %lld: expected %lld",
                             name, (int)i, dim_names[i], (long long)t->shape[i],
                             (long long)want[i]);
    return FMSA_SUCCESS;
}

static const char *const fmsa_qdims[4] = {"batch", "seqlen", "heads", "head_dim"};
static const char *const fmsa_lsedims[3] = {"batch", "heads_q", "seqlen_q"};

static fmsa_view4 fmsa_view4_of(const fmsa_tensor *t) {
    fmsa_view4 v;
    v.data = t->data;
    v.byte_offset = t->data ? t->byte_offset : 0; /* empty views may have no data */
    v.sb = t->strides[0];
    v.ss = t->strides[1];
    v.sh = t->strides[2];
    return v;
}

/* Broadcast dimensions (extent 1) get stride 0 so kernels need no special case. */
static fmsa_viewn fmsa_viewn_of(const fmsa_tensor *t) {
    fmsa_viewn v;
    int64_t s[3] = {0, 0, 0};
    for (int32_t i = 0; i < t->ndim && i < 3; ++i) s[i] = t->shape[i] == 1 ? 0 : t->strides[i];
    v.data = t->data;
    v.byte_offset = t->byte_offset;
    v.s0 = s[0];
    v.s1 = s[1];
    v.s2 = s[2];
    return v;
}

static int fmsa_present(const fmsa_tensor *t) { return t && t->data; }

/* Copies count int32 elements, `stride` apart, starting byte_offset bytes into
 * data, to a dense host array (malloc'ed; the caller frees it).  Metadata can
 * live in device memory, where every read is a synchronous copy, so the whole
 * span is read at once; only a span much sparser than the elements it holds
 * (a huge stride) is read element by element instead. */
static fmsa_status fmsa_read_i32_vec(const char *name, const void *data, int64_t byte_offset,
                                     int64_t count, int64_t stride, fmsa_meta_reader reader,
                                     void *state, int32_t **out) {
    const int64_t span = count > 0 ? (count - 1) * stride + 1 : 0;
    const int sparse = span > 16 * count;
    int32_t *dense = (int32_t *)malloc((size_t)(count > 0 ? count : 1) * sizeof *dense);
    int32_t *raw = dense;
    fmsa_status st = FMSA_SUCCESS;
    *out = NULL;
    if (!dense) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "%s: host copy of %lld entries", name,
                                 (long long)count);
    if (count > 0 && !sparse && stride != 1) {
        raw = (int32_t *)malloc((size_t)span * sizeof *raw);
        if (!raw) {
            free(dense);
            return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "%s: host copy of %lld entries", name,
                             (long long)span);
        }
    }
    for (int64_t i = 0; i < (sparse ? count : (count > 0 ? 1 : 0)) && st == FMSA_SUCCESS; ++i) {
        /* dense span: one read of everything; sparse: one read per element */
        const size_t off = (size_t)byte_offset + (size_t)(sparse ? i * stride : 0) * sizeof *raw;
        const size_t bytes = (size_t)(sparse ? 1 : span) * sizeof *raw;
        int32_t *dst = sparse ? dense + i : raw;
        if (!reader) memcpy(dst, (const char *)data + off, bytes);
        else if (reader(state, dst, data, off, bytes) != FMSA_SUCCESS)
            st = fmsa_fail(FMSA_ERR_DEVICE, "%s: reading it from device memory failed (%s)", name,
                           fmsa_last_error());
    }
    if (raw != dense) {
        for (int64_t i = 0; i < count; ++i) dense[i] = raw[i * stride];
        free(raw);
    }
    if (st != FMSA_SUCCESS) {
        free(dense);
        return st;
    }
    *out = dense;
    return FMSA_SUCCESS;
}

/* cu_seqlens must start at 0, never decrease and end at the packed total. */
static fmsa_status fmsa_check_cu_seqlens(const char *name, const fmsa_tensor *t, int64_t batch,
                                         int64_t total, fmsa_meta_reader reader, void *state,
                                         int64_t *max_len) {
    int32_t prev = 0, cur, *cu;
    fmsa_status st = FMSA_SUCCESS;
    *max_len = 0;
    FMSA_TRY(fmsa_read_i32_vec(name, t->data, t->byte_offset, batch + 1, t->strides[0], reader,
                               state, &cu));
    for (int64_t b = 0; b <= batch && st == FMSA_SUCCESS; ++b) {
        cur = cu[b];
        if (b == 0 && cur != 0)
            st = fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s[0] = %d: must be 0", name, (int)cur);
        else if (cur < prev)
            st = fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                           "%s[%lld] = %d < %s[%lld] = %d: must be non-decreasing", name,
                           (long long)b, (int)cur, name, (long long)(b - 1), (int)prev);
        if (cur - prev > *max_len) *max_len = cur - prev;
        prev = cur;
    }
    free(cu);
    if (st == FMSA_SUCCESS && prev != total)
        st = fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s[%lld] = %d: must equal the packed length %lld",
                       name, (long long)batch, (int)prev, (long long)total);
    return st;
}

/* Paged KV: every page a used key lives in must exist in the pool. */
static fmsa_status fmsa_check_paged(fmsa_problem *p, const fmsa_attention_desc *desc,
                                    fmsa_meta_reader reader, void *state, int defer) {
    const fmsa_tensor *bt = &desc->block_table;
    int32_t *used_k = NULL;
    fmsa_status st = FMSA_SUCCESS;
    int64_t cap;
    /* max_pages and page_size are each bounded only by their tensors' extents,
     * which broadcast strides leave unbounded: their product may not fit. */
    if (__builtin_mul_overflow(p->max_pages, p->page_size, &cap))
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "desc.block_table.shape[1] = %lld x desc.page_size = %lld overflows int64",
                         (long long)p->max_pages, (long long)p->page_size);
    p->seqlen_k = p->has_seqused_k && !defer ? 0 : cap;
    /* Deferred (CUDA): the table and seqused_k are checked on the device
     * (backends/cuda/kernels/fmsa_cuda_check.cu); cap bounds every sequence. */
    if (defer) return FMSA_SUCCESS;
    if (p->has_seqused_k)
        FMSA_TRY(fmsa_read_i32_vec("desc.seqused_k", desc->seqused_k.data,
                                   desc->seqused_k.byte_offset, p->batch,
                                   desc->seqused_k.strides[0], reader, state, &used_k));
    for (int64_t b = 0; b < p->batch && st == FMSA_SUCCESS; ++b) {
        int64_t used = cap, pages;
        int32_t *row;
        if (p->has_seqused_k) {
            if (used_k[b] < 0 || used_k[b] > cap) {
                st = fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                               "desc.seqused_k[%lld] = %d: must be in [0, max_pages * page_size "
                               "= %lld]",
                               (long long)b, (int)used_k[b], (long long)cap);
                break;
            }
            used = used_k[b];
            if (used > p->seqlen_k) p->seqlen_k = used;
        }
        /* only the pages this sequence's keys live in must be valid: one read per row */
        pages = (used + p->page_size - 1) / p->page_size;
        st = fmsa_read_i32_vec("desc.block_table", bt->data,
                               bt->byte_offset + b * bt->strides[0] * (int64_t)sizeof(int32_t),
                               pages, bt->strides[1], reader, state, &row);
        for (int64_t pg = 0; pg < pages && st == FMSA_SUCCESS; ++pg)
            if (row[pg] < 0 || row[pg] >= p->num_pages)
                st = fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                               "desc.block_table[%lld][%lld] = %d: must be a page index in "
                               "[0, %lld)",
                               (long long)b, (long long)pg, (int)row[pg], (long long)p->num_pages);
        free(row);
    }
    free(used_k);
    return st;
}

/* The scalar fields of the description. */
static fmsa_status fmsa_check_desc_scalars(fmsa_problem *p, const fmsa_attention_desc *desc) {
    if (!isfinite(desc->softmax_scale))
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "desc.softmax_scale = %g: must be finite",
                         (double)desc->softmax_scale);
    if (!isfinite(desc->softcap) || desc->softcap < 0.0f)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "desc.softcap = %g: must be finite and >= 0 (0 = off)",
                         (double)desc->softcap);
    if (desc->window_left < -1)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "desc.window_left = %lld: must be >= -1",
                         (long long)desc->window_left);
    if (desc->window_right < -1)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "desc.window_right = %lld: must be >= -1",
                         (long long)desc->window_right);
    if (desc->causal && desc->window_right > 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "desc.window_right = %lld contradicts desc.causal (which means 0)",
                         (long long)desc->window_right);
    p->softmax_scale = desc->softmax_scale;
    p->softcap = desc->softcap;
    p->causal = desc->causal != 0;
    p->window_left = desc->window_left;
    p->window_right = desc->causal ? 0 : desc->window_right;
    p->deterministic = desc->deterministic != 0;
    return FMSA_SUCCESS;
}

/* A head dim (D or Dv) within the API's limits (fmsa_limits.h). */
static fmsa_status fmsa_check_head_dim(const char *name, int64_t d) {
    if (d == 0) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s = 0: must be > 0", name);
    if (d % FMSA_HEAD_DIM_MULTIPLE != 0 || d > FMSA_HEAD_DIM_MAX)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "%s = %lld: supported head dims are the multiples of %d up to %d", name,
                         (long long)d, FMSA_HEAD_DIM_MULTIPLE, FMSA_HEAD_DIM_MAX);
    return FMSA_SUCCESS;
}

/* q, k, v: dtypes, ranks, heads and the head dims D (q, k) and Dv (v). */
static fmsa_status fmsa_check_qkv(fmsa_problem *p, const fmsa_call_tensors *t) {
    FMSA_TRY(fmsa_check_tensor("q", t->q, 4, 1));
    FMSA_TRY(fmsa_check_tensor("k", t->k, 4, 1));
    FMSA_TRY(fmsa_check_tensor("v", t->v, 4, 1));
    if (t->q->dtype != FMSA_DTYPE_F32 && t->q->dtype != FMSA_DTYPE_F16 &&
        t->q->dtype != FMSA_DTYPE_BF16)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "q.dtype = %d: must be f32, f16 or bf16",
                         (int)t->q->dtype);
    FMSA_TRY(fmsa_check_dtype("k", t->k, t->q->dtype));
    FMSA_TRY(fmsa_check_dtype("v", t->v, t->q->dtype));
    p->dtype = t->q->dtype;
    p->head_dim = t->q->shape[3];
    p->head_dim_v = t->v->shape[3];
    p->heads_q = t->q->shape[2];
    p->heads_kv = t->k->shape[2];
    FMSA_TRY(fmsa_check_head_dim("q.shape[3] (head_dim)", p->head_dim));
    FMSA_TRY(fmsa_check_head_dim("v.shape[3] (head_dim_v)", p->head_dim_v));
    if (t->k->shape[3] != p->head_dim)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "k.shape[3] = %lld: must equal q.shape[3] (head_dim) = %lld",
                         (long long)t->k->shape[3], (long long)p->head_dim);
    if (p->heads_q == 0 || p->heads_kv == 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "q.shape[2] (heads_q) = %lld, k.shape[2] (heads_kv) = %lld: must be > 0",
                         (long long)p->heads_q, (long long)p->heads_kv);
    if (p->heads_q % p->heads_kv != 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "q.shape[2] (heads_q) = %lld is not a multiple of k.shape[2] "
                         "(heads_kv) = %lld",
                         (long long)p->heads_q, (long long)p->heads_kv);
    if (t->v->shape[0] != t->k->shape[0] || t->v->shape[1] != t->k->shape[1] ||
        t->v->shape[2] != t->k->shape[2])
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "v.shape = [%lld, %lld, %lld, .]: must equal k.shape = [%lld, %lld, %lld, .]",
                         (long long)t->v->shape[0], (long long)t->v->shape[1],
                         (long long)t->v->shape[2], (long long)t->k->shape[0],
                         (long long)t->k->shape[1], (long long)t->k->shape[2]);
    p->q = fmsa_view4_of(t->q);
    p->k = fmsa_view4_of(t->k);
    p->v = fmsa_view4_of(t->v);
    p->total_q = t->q->shape[1];
    p->total_k = t->k->shape[1];
    return FMSA_SUCCESS;
}

/* Batch and sequence lengths: plain, varlen or paged. */
static fmsa_status fmsa_check_sequences(fmsa_problem *p, const fmsa_attention_desc *desc,
                                        const fmsa_call_tensors *t, fmsa_meta_reader reader,
                                        void *state, int defer) {
    int has_cq = fmsa_present(&desc->cu_seqlens_q), has_ck = fmsa_present(&desc->cu_seqlens_k);
    p->is_paged = fmsa_present(&desc->block_table);
    p->has_seqused_k = fmsa_present(&desc->seqused_k);
    if (has_cq != has_ck)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "desc.cu_seqlens_q and desc.cu_seqlens_k must be given together");
    p->is_varlen = has_cq;
    if (p->has_seqused_k && !p->is_paged)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "desc.seqused_k is only supported together with desc.block_table");
    if (p->is_varlen && p->is_paged)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "paged KV (desc.block_table) together with varlen (desc.cu_seqlens_q) "
                         "is not supported");
    if (p->is_paged && p->pass == FMSA_PASS_BACKWARD)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "paged KV (desc.block_table) is forward-only, as in every peer library");

    if (p->is_varlen) {
        int64_t maxq, maxk;
        FMSA_TRY(fmsa_check_tensor("desc.cu_seqlens_q", &desc->cu_seqlens_q, 1, 0));
        FMSA_TRY(fmsa_check_tensor("desc.cu_seqlens_k", &desc->cu_seqlens_k, 1, 0));
        FMSA_TRY(fmsa_check_dtype("desc.cu_seqlens_q", &desc->cu_seqlens_q, FMSA_DTYPE_I32));
        FMSA_TRY(fmsa_check_dtype("desc.cu_seqlens_k", &desc->cu_seqlens_k, FMSA_DTYPE_I32));
        if (desc->cu_seqlens_q.shape[0] < 1)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.cu_seqlens_q.shape[0] = 0: must be batch + 1 >= 1");
        FMSA_TRY(fmsa_check_not_broadcast("desc.cu_seqlens_q", &desc->cu_seqlens_q,
                                          "an offset vector"));
        FMSA_TRY(fmsa_check_not_broadcast("desc.cu_seqlens_k", &desc->cu_seqlens_k,
                                          "an offset vector"));
        if (desc->cu_seqlens_k.shape[0] != desc->cu_seqlens_q.shape[0])
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.cu_seqlens_k.shape[0] = %lld: must equal "
                             "desc.cu_seqlens_q.shape[0] = %lld",
                             (long long)desc->cu_seqlens_k.shape[0],
                             (long long)desc->cu_seqlens_q.shape[0]);
        if (t->q->shape[0] != 1 || t->k->shape[0] != 1)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "varlen: q.shape[0] = %lld and k.shape[0] = %lld must be 1 (packed)",
                             (long long)t->q->shape[0], (long long)t->k->shape[0]);
        p->batch = desc->cu_seqlens_q.shape[0] - 1;
        if (p->total_q > INT32_MAX || p->total_k > INT32_MAX)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "varlen: packed lengths %lld / %lld exceed int32 cu_seqlens",
                             (long long)p->total_q, (long long)p->total_k);
        if (defer && desc->max_seqlen_q > 0 && desc->max_seqlen_k > 0) {
            /* Deferred (CUDA) with both bounds given: no device read, so the
             * call can be captured into a graph; the contents are checked on
             * the device.  No sequence is longer than its packed total, which
             * keeps a generous bound from sizing the work (see below). */
            maxq = desc->max_seqlen_q < p->total_q ? desc->max_seqlen_q : p->total_q;
            maxk = desc->max_seqlen_k < p->total_k ? desc->max_seqlen_k : p->total_k;
        } else {
            FMSA_TRY(fmsa_check_cu_seqlens("desc.cu_seqlens_q", &desc->cu_seqlens_q, p->batch,
                                           p->total_q, reader, state, &maxq));
            FMSA_TRY(fmsa_check_cu_seqlens("desc.cu_seqlens_k", &desc->cu_seqlens_k, p->batch,
                                           p->total_k, reader, state, &maxk));
        }
        if (desc->max_seqlen_q < 0 || (desc->max_seqlen_q > 0 && desc->max_seqlen_q < maxq))
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.max_seqlen_q = %lld: the longest query sequence has %lld rows",
                             (long long)desc->max_seqlen_q, (long long)maxq);
        if (desc->max_seqlen_k < 0 || (desc->max_seqlen_k > 0 && desc->max_seqlen_k < maxk))
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.max_seqlen_k = %lld: the longest key sequence has %lld rows",
                             (long long)desc->max_seqlen_k, (long long)maxk);
        /* The measured maxima, not the caller's bounds: a generous bound
         * (say 2^40) would size tiles, items and split-KV workspace by it,
         * and overflow their int64 products; the measured ones are <= the
         * int32 packed totals. */
        p->seqlen_q = maxq;
        p->seqlen_k = maxk;
        p->cu_seqlens_q = fmsa_viewn_of(&desc->cu_seqlens_q);
        p->cu_seqlens_k = fmsa_viewn_of(&desc->cu_seqlens_k);
        p->cu_seqlens_q.s0 = desc->cu_seqlens_q.strides[0];
        p->cu_seqlens_k.s0 = desc->cu_seqlens_k.strides[0];
        return FMSA_SUCCESS;
    }

    p->batch = t->q->shape[0];
    p->seqlen_q = t->q->shape[1];
    if (p->is_paged) {
        const fmsa_tensor *bt = &desc->block_table;
        FMSA_TRY(fmsa_check_tensor("desc.block_table", bt, 2, 0));
        FMSA_TRY(fmsa_check_dtype("desc.block_table", bt, FMSA_DTYPE_I32));
        if (bt->shape[0] != p->batch)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.block_table.shape[0] = %lld: must equal q.shape[0] (batch) = "
                             "%lld",
                             (long long)bt->shape[0], (long long)p->batch);
        if (desc->page_size <= 0 || desc->page_size != t->k->shape[1])
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.page_size = %lld: must be > 0 and equal k.shape[1] = %lld",
                             (long long)desc->page_size, (long long)t->k->shape[1]);
        p->page_size = desc->page_size;
        p->max_pages = bt->shape[1];
        p->num_pages = t->k->shape[0];
        p->block_table = fmsa_viewn_of(bt);
        p->block_table.s0 = bt->strides[0];
        p->block_table.s1 = bt->strides[1];
        if (p->has_seqused_k) {
            FMSA_TRY(fmsa_check_tensor("desc.seqused_k", &desc->seqused_k, 1, 0));
            FMSA_TRY(fmsa_check_dtype("desc.seqused_k", &desc->seqused_k, FMSA_DTYPE_I32));
            if (desc->seqused_k.shape[0] != p->batch)
                return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                                 "desc.seqused_k.shape[0] = %lld: must equal batch = %lld",
                                 (long long)desc->seqused_k.shape[0], (long long)p->batch);
            p->seqused_k = fmsa_viewn_of(&desc->seqused_k);
            p->seqused_k.s0 = desc->seqused_k.strides[0];
        }
        return fmsa_check_paged(p, desc, reader, state, defer);
    }
    if (t->k->shape[0] != p->batch)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "k.shape[0] (batch) = %lld: must equal q.shape[0] = %lld",
                         (long long)t->k->shape[0], (long long)p->batch);
    p->seqlen_k = t->k->shape[1];
    return FMSA_SUCCESS;
}

/* A window at least as wide as every sequence limits nothing: it becomes -1
 * (unlimited), so that the window arithmetic of every kernel (diag - left,
 * diag + right + 1; common/fmsa_seq.h) stays within int64 for any value the
 * caller passes, INT64_MAX included.  Row i of a sequence of sq queries and sk
 * keys sits on diagonal i + sk - sq in [sk - sq, sk - 1], so left >= sk - 1
 * and right >= sq - 1 admit every key of every row. */
static void fmsa_fold_wide_windows(fmsa_problem *p) {
    if (p->window_left >= p->seqlen_k) p->window_left = -1;
    if (p->window_right >= p->seqlen_q) p->window_right = -1;
}

/* Optional ALiBi slopes and bit-packed mask. */
static fmsa_status fmsa_check_bias_and_mask(fmsa_problem *p, const fmsa_attention_desc *desc) {
    p->has_alibi = fmsa_present(&desc->alibi_slopes);
    p->has_mask = fmsa_present(&desc->mask);
    if (p->has_alibi) {
        const fmsa_tensor *a = &desc->alibi_slopes;
        int32_t nd = a->ndim == 2 ? 2 : 1;
        FMSA_TRY(fmsa_check_tensor("desc.alibi_slopes", a, nd, 0));
        FMSA_TRY(fmsa_check_dtype("desc.alibi_slopes", a, FMSA_DTYPE_F32));
        if (a->shape[nd - 1] != p->heads_q || (nd == 2 && a->shape[0] != p->batch))
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.alibi_slopes: shape must be [heads_q = %lld] or [batch = %lld, "
                             "heads_q]",
                             (long long)p->heads_q, (long long)p->batch);
        p->alibi.data = a->data;
        p->alibi.byte_offset = a->byte_offset;
        p->alibi.s0 = nd == 2 ? a->strides[0] : 0;
        p->alibi.s1 = a->strides[nd - 1];
        p->alibi.s2 = 0;
    }
    if (p->has_mask) {
        const fmsa_tensor *m = &desc->mask;
        int64_t row_bytes = (p->seqlen_k + 7) / 8;
        FMSA_TRY(fmsa_check_tensor("desc.mask", m, 4, 1));
        FMSA_TRY(fmsa_check_dtype("desc.mask", m, FMSA_DTYPE_U8));
        if (m->shape[0] != 1 && m->shape[0] != p->batch)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.mask.shape[0] = %lld: must be 1 or batch = %lld",
                             (long long)m->shape[0], (long long)p->batch);
        if (m->shape[1] != 1 && m->shape[1] != p->heads_q)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.mask.shape[1] = %lld: must be 1 or heads_q = %lld",
                             (long long)m->shape[1], (long long)p->heads_q);
        if (m->shape[2] < p->seqlen_q || m->shape[3] < row_bytes)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "desc.mask.shape = [., ., %lld, %lld]: needs at least [., ., seqlen_q "
                             "= %lld, ceil(seqlen_k / 8) = %lld]",
                             (long long)m->shape[2], (long long)m->shape[3],
                             (long long)p->seqlen_q, (long long)row_bytes);
        p->mask = fmsa_viewn_of(m);
    }
    return FMSA_SUCCESS;
}

/* A tensor shaped like q ([B, Sq, Hq, D]) or k, of the attention dtype. */
static fmsa_status fmsa_check_like(const char *name, const fmsa_tensor *t, const fmsa_tensor *like,
                                   const char *like_name) {
    FMSA_TRY(fmsa_check_tensor(name, t, 4, 1));
    if (t->dtype != like->dtype)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.dtype = %d: must equal %s.dtype = %d",
                         name, (int)t->dtype, like_name, (int)like->dtype);
    return fmsa_check_shape(name, t, like->shape, fmsa_qdims);
}

/* Shaped like `like` but with last dimension dim3 (o and dout: [B, Sq, Hq, Dv]). */
static fmsa_status fmsa_check_like_dv(const char *name, const fmsa_tensor *t,
                                      const fmsa_tensor *like, const char *like_name,
                                      int64_t dim3) {
    int64_t want[4];
    FMSA_TRY(fmsa_check_tensor(name, t, 4, 1));
    if (t->dtype != like->dtype)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.dtype = %d: must equal %s.dtype = %d",
                         name, (int)t->dtype, like_name, (int)like->dtype);
    memcpy(want, like->shape, sizeof want);
    want[3] = dim3;
    return fmsa_check_shape(name, t, want, fmsa_qdims);
}

static fmsa_status fmsa_check_output(const char *name, const fmsa_tensor *t) {
    return fmsa_check_not_broadcast(name, t, "an output");
}

/* An fp32 [B, Hq, Sq] tensor laid out like the lse (lse, dlse). */
static fmsa_status fmsa_check_rows(const char *name, const fmsa_problem *p, const fmsa_tensor *t,
                                   fmsa_viewn *out) {
    int64_t want[3];
    FMSA_TRY(fmsa_check_tensor(name, t, 3, 0));
    FMSA_TRY(fmsa_check_dtype(name, t, FMSA_DTYPE_F32));
    want[0] = p->is_varlen ? 1 : p->batch;
    want[1] = p->heads_q;
    want[2] = p->total_q;
    FMSA_TRY(fmsa_check_shape(name, t, want, fmsa_lsedims));
    out->data = t->data;
    out->byte_offset = t->byte_offset;
    out->s0 = t->strides[0];
    out->s1 = t->strides[1];
    out->s2 = t->strides[2];
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_check_lse(fmsa_problem *p, const fmsa_tensor *lse) {
    FMSA_TRY(fmsa_check_rows("lse", p, lse, &p->lse));
    p->has_lse = 1;
    return FMSA_SUCCESS;
}

/* An fp32 [Hq] per-head vector (desc.sinks, dsink). */
static fmsa_status fmsa_check_per_head(const char *name, const fmsa_problem *p,
                                       const fmsa_tensor *t, fmsa_viewn *out) {
    FMSA_TRY(fmsa_check_tensor(name, t, 1, 0));
    FMSA_TRY(fmsa_check_dtype(name, t, FMSA_DTYPE_F32));
    if (t->shape[0] != p->heads_q)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "%s.shape[0] = %lld: must equal heads_q = %lld (one per query head)",
                         name, (long long)t->shape[0], (long long)p->heads_q);
    memset(out, 0, sizeof *out);
    out->data = t->data;
    out->byte_offset = t->byte_offset;
    out->s0 = t->strides[0];
    return FMSA_SUCCESS;
}

/* Optional sink logits of the description. */
static fmsa_status fmsa_check_sinks(fmsa_problem *p, const fmsa_attention_desc *desc) {
    p->has_sinks = fmsa_present(&desc->sinks);
    if (p->has_sinks) FMSA_TRY(fmsa_check_per_head("desc.sinks", p, &desc->sinks, &p->sinks));
    return FMSA_SUCCESS;
}

/* Outputs and backward inputs. */
static fmsa_status fmsa_check_pass_tensors(fmsa_problem *p, const fmsa_call_tensors *t) {
    if (p->pass == FMSA_PASS_FORWARD) {
        FMSA_TRY(fmsa_check_like_dv("o", t->o, t->q, "q", p->head_dim_v));
        FMSA_TRY(fmsa_check_output("o", t->o));
        p->o = fmsa_view4_of(t->o);
        if (fmsa_present(t->lse)) {
            FMSA_TRY(fmsa_check_lse(p, t->lse));
            FMSA_TRY(fmsa_check_output("lse", t->lse));
        }
        return FMSA_SUCCESS;
    }
    FMSA_TRY(fmsa_check_like_dv("o", t->o, t->q, "q", p->head_dim_v));
    FMSA_TRY(fmsa_check_like_dv("dout", t->dout, t->q, "q", p->head_dim_v));
    FMSA_TRY(fmsa_check_like("dq", t->dq, t->q, "q"));
    FMSA_TRY(fmsa_check_like("dk", t->dk, t->k, "k"));
    FMSA_TRY(fmsa_check_like("dv", t->dv, t->v, "v"));
    FMSA_TRY(fmsa_check_output("dq", t->dq));
    FMSA_TRY(fmsa_check_output("dk", t->dk));
    FMSA_TRY(fmsa_check_output("dv", t->dv));
    if (!t->lse || (!t->lse->data && !fmsa_tensor_is_empty(t->lse)))
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "lse: the backward needs the forward's log-sum-exp (lse.data is NULL)");
    FMSA_TRY(fmsa_check_lse(p, t->lse));
    if (fmsa_present(t->dlse)) {
        FMSA_TRY(fmsa_check_rows("dlse", p, t->dlse, &p->dlse));
        p->has_dlse = 1;
    }
    if (fmsa_present(t->dsink)) {
        if (!p->has_sinks)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "dsink is given but desc.sinks is not: there is no sink to "
                             "differentiate");
        FMSA_TRY(fmsa_check_per_head("dsink", p, t->dsink, &p->dsink));
        FMSA_TRY(fmsa_check_output("dsink", t->dsink));
        p->has_dsink = 1;
    }
    p->o = fmsa_view4_of(t->o);
    p->dout = fmsa_view4_of(t->dout);
    p->dq = fmsa_view4_of(t->dq);
    p->dk = fmsa_view4_of(t->dk);
    p->dv = fmsa_view4_of(t->dv);
    return FMSA_SUCCESS;
}

fmsa_call_tensors fmsa_call_tensors_of_backward(const fmsa_backward_tensors *bt) {
    fmsa_call_tensors t;
    t.q = &bt->q;
    t.k = &bt->k;
    t.v = &bt->v;
    t.o = &bt->o;
    t.lse = &bt->lse;
    t.dout = &bt->dout;
    t.dq = &bt->dq;
    t.dk = &bt->dk;
    t.dv = &bt->dv;
    t.dlse = &bt->dlse;
    t.dsink = &bt->dsink;
    return t;
}

fmsa_status fmsa_problem_build(fmsa_problem *p, fmsa_pass pass, const fmsa_attention_desc *desc,
                               const fmsa_call_tensors *t, int shape_only,
                               fmsa_meta_reader reader, void *reader_state) {
    return fmsa_problem_build_meta(p, pass, desc, t, shape_only, reader, reader_state, 0);
}

fmsa_status fmsa_problem_build_meta(fmsa_problem *p, fmsa_pass pass,
                                    const fmsa_attention_desc *desc, const fmsa_call_tensors *t,
                                    int shape_only, fmsa_meta_reader reader, void *reader_state,
                                    int defer_metadata) {
    if (!p || !t) return fmsa_fail(FMSA_ERR_INTERNAL, "fmsa_problem_build: NULL problem/tensors");
    memset(p, 0, sizeof *p);
    if (!desc) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "desc is NULL");
    if (pass != FMSA_PASS_FORWARD && pass != FMSA_PASS_BACKWARD)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "pass = %d is not an fmsa_pass", (int)pass);
    p->pass = pass;
    FMSA_TRY(fmsa_check_desc_scalars(p, desc));
    FMSA_TRY(fmsa_check_qkv(p, t));
    FMSA_TRY(fmsa_check_sequences(p, desc, t, reader, reader_state, defer_metadata));
    fmsa_fold_wide_windows(p);
    FMSA_TRY(fmsa_check_bias_and_mask(p, desc));
    FMSA_TRY(fmsa_check_sinks(p, desc));
    if (!shape_only) FMSA_TRY(fmsa_check_pass_tensors(p, t));
    if (pass == FMSA_PASS_BACKWARD) p->has_lse = 1;
    return FMSA_SUCCESS;
}

/* One [B, S, H, Dv] partial of a merge, f32/f16/bf16, its dims equal to want
 * (NULL: it sets them). */
static fmsa_status fmsa_check_merge_o(const char *name, const fmsa_tensor *t, const int64_t *want) {
    static const char *const dims[4] = {"batch", "seqlen", "heads", "head_dim_v"};
    FMSA_TRY(fmsa_check_tensor(name, t, 4, 1));
    if (t->dtype != FMSA_DTYPE_F32 && t->dtype != FMSA_DTYPE_F16 && t->dtype != FMSA_DTYPE_BF16)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s.dtype = %d: must be f32, f16 or bf16",
                         name, (int)t->dtype);
    return want ? fmsa_check_shape(name, t, want, dims) : FMSA_SUCCESS;
}

static fmsa_status fmsa_check_merge_lse(const char *name, const fmsa_tensor *t,
                                        const int64_t *o_shape, fmsa_viewn *out) {
    int64_t want[3];
    want[0] = o_shape[0];
    want[1] = o_shape[2];
    want[2] = o_shape[1];
    FMSA_TRY(fmsa_check_tensor(name, t, 3, 0));
    FMSA_TRY(fmsa_check_dtype(name, t, FMSA_DTYPE_F32));
    FMSA_TRY(fmsa_check_shape(name, t, want, fmsa_lsedims));
    out->data = t->data;
    out->byte_offset = t->byte_offset;
    out->s0 = t->strides[0];
    out->s1 = t->strides[1];
    out->s2 = t->strides[2];
    return FMSA_SUCCESS;
}

fmsa_status fmsa_merge_problem_build(fmsa_merge_problem *mp, const fmsa_tensor *o_a,
                                     const fmsa_tensor *lse_a, const fmsa_tensor *o_b,
                                     const fmsa_tensor *lse_b, const fmsa_tensor *o,
                                     const fmsa_tensor *lse) {
    if (!mp) return fmsa_fail(FMSA_ERR_INTERNAL, "fmsa_merge_problem_build: NULL problem");
    memset(mp, 0, sizeof *mp);
    FMSA_TRY(fmsa_check_merge_o("o_a", o_a, NULL));
    FMSA_TRY(fmsa_check_head_dim("o_a.shape[3] (head_dim_v)", o_a->shape[3]));
    FMSA_TRY(fmsa_check_merge_o("o_b", o_b, o_a->shape));
    FMSA_TRY(fmsa_check_merge_o("o", o, o_a->shape));
    FMSA_TRY(fmsa_check_output("o", o));
    FMSA_TRY(fmsa_check_merge_lse("lse_a", lse_a, o_a->shape, &mp->lse_a));
    FMSA_TRY(fmsa_check_merge_lse("lse_b", lse_b, o_a->shape, &mp->lse_b));
    FMSA_TRY(fmsa_check_merge_lse("lse", lse, o_a->shape, &mp->lse));
    FMSA_TRY(fmsa_check_output("lse", lse));
    mp->batch = o_a->shape[0];
    mp->seqlen = o_a->shape[1];
    mp->heads = o_a->shape[2];
    mp->head_dim_v = o_a->shape[3];
    mp->dtype_a = o_a->dtype;
    mp->dtype_b = o_b->dtype;
    mp->dtype_o = o->dtype;
    mp->o_a = fmsa_view4_of(o_a);
    mp->o_b = fmsa_view4_of(o_b);
    mp->o = fmsa_view4_of(o);
    return FMSA_SUCCESS;
}
