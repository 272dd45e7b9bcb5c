/*
 * Alignment, allocation extent and overlap checks of one call's views
 * (validate_memory.h says what and why).  Runs after validate.c, so shapes
 * and strides are non-negative and every extent fits int64 bytes.
 */
#include "common/validate_memory.h"

#include "common/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Terms of the overlap equation  sum_i c_i * stride_i = delta  (bytes), with
 * c_i in [lo_i, hi_i]: a's dimensions enter with [0, n - 1], b's with
 * [-(n - 1), 0], the byte within an element as one more dimension. */
enum { FMSA_MEM_TERMS = 2 * (FMSA_MAX_DIMS + 1), FMSA_MEM_BUDGET = 1 << 14 };

typedef struct fmsa_mem_term {
    int64_t stride, lo, hi;
} fmsa_mem_term;

typedef struct fmsa_mem_search {
    fmsa_mem_term t[FMSA_MEM_TERMS];
    int64_t reach_lo[FMSA_MEM_TERMS + 1], reach_hi[FMSA_MEM_TERMS + 1]; /* of terms i.. */
    int n;
    long budget;
    int self; /* a against itself: the all-zero solution does not count */
} fmsa_mem_search;

/* Adds c in [lo, hi] at stride (bytes); equal strides merge into one term,
 * which keeps the search to a few branches for views of one packed buffer. */
static void fmsa_mem_add_term(fmsa_mem_search *s, int64_t stride, int64_t lo, int64_t hi) {
    if (stride == 0 || lo == hi) return; /* broadcast or extent 1: no freedom */
    for (int i = 0; i < s->n; ++i)
        if (s->t[i].stride == stride) {
            s->t[i].lo += lo;
            s->t[i].hi += hi;
            return;
        }
    s->t[s->n].stride = stride;
    s->t[s->n].lo = lo;
    s->t[s->n].hi = hi;
    s->n++;
}

/* 1 when two dimensions of v step by the same stride (or one by 0): then two index vectors
 * reach one element (or the view is not injective), which merging their terms
 * would hide from the self-overlap test. */
static int fmsa_mem_repeats_stride(const fmsa_mem_view *v) {
    for (int32_t i = 0; i < v->ndim; ++i) {
        if (v->shape[i] > 1 && v->strides[i] == 0) return 1; /* broadcast */
        for (int32_t j = i + 1; j < v->ndim; ++j)
            if (v->shape[i] > 1 && v->shape[j] > 1 && v->strides[i] == v->strides[j])
                return 1;
    }
    return 0;
}

static void fmsa_mem_add_view(fmsa_mem_search *s, const fmsa_mem_view *v, int negative) {
    for (int32_t i = 0; i < v->ndim; ++i) {
        const int64_t m = v->shape[i] - 1;
        /* extent 1: any stride (INT64_MAX included) reaches nothing; above it,
         * validate.c made m * stride * elem fit int64 */
        if (m <= 0) continue;
        fmsa_mem_add_term(s, v->strides[i] * v->elem, negative ? -m : 0, negative ? 0 : m);
    }
    fmsa_mem_add_term(s, 1, negative ? -(v->elem - 1) : 0, negative ? 0 : v->elem - 1);
}

static int64_t fmsa_floor_div(int64_t a, int64_t b) { /* b > 0 */
    return a / b - (a % b != 0 && a < 0);
}

/* Depth-first over the terms, largest stride first: c_i is confined to the
 * values the smaller strides can still make up for.  Returns 1 on a solution
 * (or an exhausted budget: "may overlap"), 0 when none exists. */
static int fmsa_mem_solve(fmsa_mem_search *s, int i, int64_t r, int nonzero) {
    int64_t c0, c1, d0, d1;
    if (--s->budget < 0) return 1;
    if (i == s->n) return r == 0 && (nonzero || !s->self);
    /* extents near 2^63 bytes: give up (the caller reports "may overlap") */
    if (__builtin_sub_overflow(s->reach_hi[i + 1], r, &d0) ||
        __builtin_sub_overflow(r, s->reach_lo[i + 1], &d1))
        return 1;
    c0 = -fmsa_floor_div(d0, s->t[i].stride); /* ceil((r - reach_hi) / stride) */
    c1 = fmsa_floor_div(d1, s->t[i].stride);
    if (c0 < s->t[i].lo) c0 = s->t[i].lo;
    if (c1 > s->t[i].hi) c1 = s->t[i].hi;
    for (int64_t c = c0; c <= c1; ++c) {
        int64_t rest;
        if (__builtin_sub_overflow(r, c * s->t[i].stride, &rest)) return 1;
        if (fmsa_mem_solve(s, i + 1, rest, nonzero || c != 0)) return 1;
    }
    return 0;
}

static int fmsa_mem_term_cmp(const void *x, const void *y) {
    const int64_t a = ((const fmsa_mem_term *)x)->stride, b = ((const fmsa_mem_term *)y)->stride;
    return a < b ? 1 : (a > b ? -1 : 0);
}

int fmsa_mem_views_overlap(const fmsa_mem_view *a, const fmsa_mem_view *b, int64_t delta) {
    fmsa_mem_search s;
    s.n = 0;
    s.budget = FMSA_MEM_BUDGET;
    s.self = a == b;
    if (s.self && fmsa_mem_repeats_stride(a)) return 1;
    /* a's bytes minus b's bytes equal their origins' distance:
     * sum ia * sa - sum ib * sb = delta */
    fmsa_mem_add_view(&s, a, 0);
    fmsa_mem_add_view(&s, b, 1);
    qsort(s.t, (size_t)s.n, sizeof s.t[0], fmsa_mem_term_cmp);
    s.reach_lo[s.n] = s.reach_hi[s.n] = 0;
    for (int i = s.n - 1; i >= 0; --i) { /* fits: each term is within one view's extent */
        s.reach_lo[i] = s.reach_lo[i + 1] + s.t[i].lo * s.t[i].stride;
        s.reach_hi[i] = s.reach_hi[i + 1] + s.t[i].hi * s.t[i].stride;
    }
    return fmsa_mem_solve(&s, 0, delta, 0);
}

/* Bytes from the view's origin to one past its last byte; 0 when empty, -1
 * when it does not fit int64 (validate.c refuses such a view: only tensors
 * the call does not use can get here with one, and they are skipped). */
static int64_t fmsa_mem_span(const fmsa_mem_view *v) {
    int64_t last = 0, step, bytes;
    for (int32_t i = 0; i < v->ndim; ++i)
        if (v->shape[i] == 0) return 0;
    for (int32_t i = 0; i < v->ndim; ++i)
        if (__builtin_mul_overflow(v->shape[i] - 1, v->strides[i], &step) ||
            __builtin_add_overflow(last, step, &last))
            return -1;
    if (__builtin_add_overflow(last, 1, &last) || __builtin_mul_overflow(last, v->elem, &bytes))
        return -1;
    return bytes;
}

/* Origin of a view in the space where views are compared: the absolute
 * address for address backends, the offset within its handle otherwise. */
static uintptr_t fmsa_mem_origin(const fmsa_mem_view *v, const fmsa_mem_policy *pol) {
    return (pol->handles ? 0 : (uintptr_t)v->data) + (uintptr_t)v->byte_offset;
}

static fmsa_status fmsa_check_one_view(const fmsa_mem_view *v, const fmsa_mem_policy *pol) {
    const int64_t span = fmsa_mem_span(v);
    if (!pol->handles && fmsa_mem_origin(v, pol) % (uintptr_t)v->elem != 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "%s.data + %s.byte_offset = %p + %lld is not aligned to its %lld-byte "
                         "element size",
                         v->name, v->name, v->data, (long long)v->byte_offset,
                         (long long)v->elem);
    if (pol->handles && pol->mem_size) {
        size_t size = 0;
        FMSA_TRY(pol->mem_size(pol->state, v->data, &size));
        if ((uint64_t)v->byte_offset + (uint64_t)span > (uint64_t)size)
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "%s: the view reaches byte %lld (byte_offset %lld + extent %lld) but "
                             "its buffer holds %zu bytes",
                             v->name, (long long)(v->byte_offset + span),
                             (long long)v->byte_offset, (long long)span, size);
    }
    if (!pol->handles && pol->mem_range) {
        const uintptr_t first = fmsa_mem_origin(v, pol);
        uintptr_t base = 0;
        size_t size = 0;
        if (pol->mem_range(pol->state, first, &base, &size) != FMSA_SUCCESS) {
            char why[256];
            snprintf(why, sizeof why, "%s", fmsa_last_error());
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "%s.data + byte_offset = %p + %lld lies in no allocation of this "
                             "context's device (%s)",
                             v->name, v->data, (long long)v->byte_offset, why);
        }
        /* first >= base: the range holds first */
        if ((uint64_t)span > (uint64_t)(base + size - first))
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "%s: the view reaches byte %lld past data + byte_offset, but the "
                             "allocation holding it ends %llu bytes after that point",
                             v->name, (long long)span, (unsigned long long)(base + size - first));
    }
    if (v->is_output && fmsa_mem_views_overlap(v, v, 0))
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "%s: its strides make elements share memory (an output must not "
                         "overlap itself)",
                         v->name);
    return FMSA_SUCCESS;
}

/* a and b may share a byte: same allocation, intersecting ranges, and a
 * common byte through their strides. */
static int fmsa_mem_pair_overlaps(const fmsa_mem_view *a, const fmsa_mem_view *b,
                                  const fmsa_mem_policy *pol) {
    uintptr_t oa, ob;
    int64_t sa = fmsa_mem_span(a), sb = fmsa_mem_span(b);
    if (pol->handles && a->data != b->data) return 0;
    oa = fmsa_mem_origin(a, pol);
    ob = fmsa_mem_origin(b, pol);
    if (ob >= oa + (uintptr_t)sa || oa >= ob + (uintptr_t)sb) return 0;
    /* the ranges intersect, so |ob - oa| < max(sa, sb) fits int64 */
    return fmsa_mem_views_overlap(a, b, ob >= oa ? (int64_t)(ob - oa) : -(int64_t)(oa - ob));
}

fmsa_status fmsa_check_views_memory(const fmsa_mem_view *views, int count,
                                    const fmsa_mem_policy *policy) {
    for (int i = 0; i < count; ++i)
        if (views[i].data) FMSA_TRY(fmsa_check_one_view(&views[i], policy));
    for (int i = 0; i < count; ++i) {
        if (!views[i].data || !views[i].is_output) continue;
        for (int j = 0; j < count; ++j) {
            /* each output against every input and every later output */
            if (j == i || !views[j].data || (views[j].is_output && j < i)) continue;
            if (fmsa_mem_pair_overlaps(&views[i], &views[j], policy))
                return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                                 "%s and %s overlap in memory: an output may share no byte "
                                 "with an input, another output or the workspace",
                                 views[i].name, views[j].name);
        }
    }
    return FMSA_SUCCESS;
}

/* A view of tensor t, NULL data when absent or empty (nothing is touched). */
static void fmsa_mem_view_of(fmsa_mem_view *v, const char *name, const fmsa_tensor *t,
                             int is_output) {
    v->name = name;
    v->data = NULL;
    v->is_output = is_output;
    if (!t || !t->data || t->ndim < 0 || t->ndim > FMSA_MAX_DIMS) return;
    v->byte_offset = t->byte_offset;
    v->elem = (int64_t)fmsa_dtype_size(t->dtype);
    v->ndim = t->ndim;
    for (int32_t i = 0; i < t->ndim; ++i) {
        v->shape[i] = t->shape[i];
        v->strides[i] = t->strides[i];
    }
    if (fmsa_mem_span(v) > 0) v->data = t->data;
}

enum { FMSA_CALL_VIEWS = 19 };

/* The views of one call's tensors (inputs, outputs, the description's), into v. */
static int fmsa_call_views(fmsa_pass pass, const fmsa_attention_desc *desc,
                           const fmsa_call_tensors *t, fmsa_mem_view *v) {
    const int fwd = pass == FMSA_PASS_FORWARD;
    int n = 0;
    fmsa_mem_view_of(&v[n++], "q", t->q, 0);
    fmsa_mem_view_of(&v[n++], "k", t->k, 0);
    fmsa_mem_view_of(&v[n++], "v", t->v, 0);
    fmsa_mem_view_of(&v[n++], "o", t->o, fwd);
    fmsa_mem_view_of(&v[n++], "lse", t->lse, fwd);
    fmsa_mem_view_of(&v[n++], "dout", t->dout, 0);
    fmsa_mem_view_of(&v[n++], "dq", t->dq, 0);
    fmsa_mem_view_of(&v[n++], "dk", t->dk, 0);
    fmsa_mem_view_of(&v[n++], "dv", t->dv, 0);
    if (!fwd) v[n - 3].is_output = v[n - 2].is_output = v[n - 1].is_output = 1;
    else v[n - 4].data = v[n - 3].data = v[n - 2].data = v[n - 1].data = NULL; /* not used */
    if (!fwd) {
        fmsa_mem_view_of(&v[n++], "dlse", t->dlse, 0);
        fmsa_mem_view_of(&v[n++], "dsink", t->dsink, 1);
    }
    fmsa_mem_view_of(&v[n++], "desc.sinks", &desc->sinks, 0);
    fmsa_mem_view_of(&v[n++], "desc.mask", &desc->mask, 0);
    fmsa_mem_view_of(&v[n++], "desc.alibi_slopes", &desc->alibi_slopes, 0);
    fmsa_mem_view_of(&v[n++], "desc.cu_seqlens_q", &desc->cu_seqlens_q, 0);
    fmsa_mem_view_of(&v[n++], "desc.cu_seqlens_k", &desc->cu_seqlens_k, 0);
    fmsa_mem_view_of(&v[n++], "desc.block_table", &desc->block_table, 0);
    fmsa_mem_view_of(&v[n++], "desc.seqused_k", &desc->seqused_k, 0);
    return n;
}

fmsa_status fmsa_check_call_memory(fmsa_pass pass, const fmsa_attention_desc *desc,
                                   const fmsa_call_tensors *t, const fmsa_mem_policy *policy) {
    fmsa_mem_view v[FMSA_CALL_VIEWS];
    return fmsa_check_views_memory(v, fmsa_call_views(pass, desc, t, v), policy);
}

fmsa_status fmsa_check_workspace_memory(fmsa_pass pass, const fmsa_attention_desc *desc,
                                        const fmsa_call_tensors *t, const void *workspace,
                                        size_t workspace_need, const fmsa_mem_policy *policy) {
    fmsa_mem_view v[FMSA_CALL_VIEWS], *ws;
    const int n = fmsa_call_views(pass, desc, t, v);
    if (workspace_need == 0 || !workspace) return FMSA_SUCCESS;
    /* the bytes the backend may write */
    ws = &v[n];
    ws->name = "workspace";
    ws->data = workspace;
    ws->byte_offset = 0;
    ws->elem = 1;
    ws->ndim = 1;
    ws->shape[0] = (int64_t)workspace_need;
    ws->strides[0] = 1;
    ws->is_output = 1;
    FMSA_TRY(fmsa_check_one_view(ws, policy));
    for (int j = 0; j < n; ++j)
        if (v[j].data && fmsa_mem_pair_overlaps(ws, &v[j], policy))
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "%s and %s overlap in memory: an output may share no byte "
                             "with an input, another output or the workspace",
                             v[j].is_output ? v[j].name : "workspace",
                             v[j].is_output ? "workspace" : v[j].name);
    return FMSA_SUCCESS;
}

/* Identical views (same allocation, offset, dtype, shape and strides): the
 * one case of sharing a merge allows, an output computed in place. */
static int fmsa_same_view(const fmsa_tensor *a, const fmsa_tensor *b) {
    if (a->data != b->data || a->byte_offset != b->byte_offset || a->dtype != b->dtype ||
        a->ndim != b->ndim)
        return 0;
    for (int32_t i = 0; i < a->ndim; ++i)
        if (a->shape[i] != b->shape[i] || a->strides[i] != b->strides[i]) return 0;
    return 1;
}

fmsa_status fmsa_check_merge_memory(const fmsa_tensor *o_a, const fmsa_tensor *lse_a,
                                    const fmsa_tensor *o_b, const fmsa_tensor *lse_b,
                                    const fmsa_tensor *o, const fmsa_tensor *lse,
                                    const fmsa_mem_policy *policy) {
    fmsa_mem_view v[6];
    int n = 0;
    /* an input the output is computed over in place is the output's own bytes */
    if (!fmsa_same_view(o, o_a)) fmsa_mem_view_of(&v[n++], "o_a", o_a, 0);
    if (!fmsa_same_view(lse, lse_a)) fmsa_mem_view_of(&v[n++], "lse_a", lse_a, 0);
    if (!fmsa_same_view(o, o_b)) fmsa_mem_view_of(&v[n++], "o_b", o_b, 0);
    if (!fmsa_same_view(lse, lse_b)) fmsa_mem_view_of(&v[n++], "lse_b", lse_b, 0);
    fmsa_mem_view_of(&v[n++], "o", o, 1);
    fmsa_mem_view_of(&v[n++], "lse", lse, 1);
    return fmsa_check_views_memory(v, n, policy);
}
