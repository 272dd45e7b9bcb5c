/* Host side of the shared kernels (ocl_aux.h). */
#include "backends/opencl/ocl_aux.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_args.h"
#include "common/error.h"

/* Must equal FMSA_OCL_DSINK_ROWS of fmsa_ocl_aux.cl. */
#define FMSA_OCL_DSINK_ROWS 128

enum {
    FMSA_OCL_AUX_DSINK_PART = 0,
    FMSA_OCL_AUX_DSINK_SUM = 1,
    FMSA_OCL_AUX_MERGE = 2,
    FMSA_OCL_AUX_ACCUMULATE = 3
};
static const char *const fmsa_ocl_aux_names[4] = {"fmsa_ocl_dsink_partial", "fmsa_ocl_dsink_sum",
                                                  "fmsa_ocl_merge", "fmsa_ocl_accumulate"};

/* Kernel `which` of the shared program, cached per context under
 * "aux:<name>" (no -D string of the families starts so). */
static fmsa_status fmsa_ocl_aux_kernel(fmsa_ocl_state *st, int which, cl_kernel *out) {
    char key[64];
    snprintf(key, sizeof key, "aux:%s", fmsa_ocl_aux_names[which]);
    return fmsa_ocl_cached_kernel(st, key, fmsa_ocl_aux_source, "-cl-std=CL1.2",
                                  fmsa_ocl_aux_names[which], out);
}

static int64_t fmsa_ocl_dsink_chunks(const fmsa_problem *p) {
    return (p->seqlen_q + FMSA_OCL_DSINK_ROWS - 1) / FMSA_OCL_DSINK_ROWS;
}

size_t fmsa_ocl_dsink_floats(const fmsa_problem *p) {
    /* sized by desc.sinks, not by dsink: a workspace query has no outputs
     * and its size must hold with and without dsink (flashmsa.h) */
    if (!p->has_sinks || p->pass != FMSA_PASS_BACKWARD) return 0;
    return (size_t)(p->heads_q * p->batch * fmsa_ocl_dsink_chunks(p));
}

fmsa_status fmsa_ocl_run_dsink(fmsa_ocl_state *st, const fmsa_problem *p, cl_mem ws,
                               int64_t part_off, cl_command_queue queue) {
    const int64_t nchunk = fmsa_ocl_dsink_chunks(p);
    if (!p->has_dsink || p->heads_q == 0) return FMSA_SUCCESS;
    {
        fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_aux_kernel(st, FMSA_OCL_AUX_DSINK_PART, &a.kernel));
        fmsa_ocl_arg_viewn(&a, &p->lse, 4);
        fmsa_ocl_arg_mem(&a, ws);
        fmsa_ocl_arg_long(&a, p->total_q);
        fmsa_ocl_arg_cu(&a, p);
        fmsa_ocl_arg_viewn(&a, &p->sinks, 4);
        fmsa_ocl_arg_mem(&a, ws);
        fmsa_ocl_arg_long(&a, part_off);
        fmsa_ocl_arg_long4(&a, p->seqlen_q, p->seqlen_k, p->heads_q, p->is_varlen);
        FMSA_TRY(fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_aux_names[FMSA_OCL_AUX_DSINK_PART],
                                  (size_t)nchunk, (size_t)p->heads_q, (size_t)p->batch, 1));
    }
    {
        fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_aux_kernel(st, FMSA_OCL_AUX_DSINK_SUM, &a.kernel));
        fmsa_ocl_arg_mem(&a, ws);
        fmsa_ocl_arg_long(&a, part_off);
        fmsa_ocl_arg_long(&a, p->batch * nchunk);
        fmsa_ocl_arg_viewn(&a, &p->dsink, 4);
        /* a launch of 0 work-items would skip it: with no rows the sum is 0,
         * so the kernel runs over an empty range instead */
        return fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_aux_names[FMSA_OCL_AUX_DSINK_SUM],
                                (size_t)p->heads_q, 1, 1, 1);
    }
}

/* Kernels index typed pointers: a byte offset must be a whole number of
 * elements. */
static fmsa_status fmsa_ocl_merge_offset(const char *name, int64_t byte_offset, size_t elem) {
    if (byte_offset % (int64_t)elem != 0)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "opencl: %s.byte_offset %lld is not a multiple of its element size %zu",
                         name, (long long)byte_offset, elem);
    return FMSA_SUCCESS;
}

fmsa_status fmsa_ocl_merge(void *state, const fmsa_merge_problem *mp, void *stream) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    cl_command_queue queue = stream ? (cl_command_queue)stream : st->queue;
    const size_t ea = fmsa_dtype_size(mp->dtype_a), eb = fmsa_dtype_size(mp->dtype_b),
                 eo = fmsa_dtype_size(mp->dtype_o);
    fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
    cl_int4 dt;
    fmsa_status s;
    FMSA_TRY(fmsa_ocl_merge_offset("o_a", mp->o_a.byte_offset, ea));
    FMSA_TRY(fmsa_ocl_merge_offset("o_b", mp->o_b.byte_offset, eb));
    FMSA_TRY(fmsa_ocl_merge_offset("o", mp->o.byte_offset, eo));
    FMSA_TRY(fmsa_ocl_merge_offset("lse_a", mp->lse_a.byte_offset, 4));
    FMSA_TRY(fmsa_ocl_merge_offset("lse_b", mp->lse_b.byte_offset, 4));
    FMSA_TRY(fmsa_ocl_merge_offset("lse", mp->lse.byte_offset, 4));
    if (mp->batch == 0 || mp->seqlen == 0 || mp->heads == 0) return FMSA_SUCCESS;
    dt.s[0] = (cl_int)mp->dtype_a;
    dt.s[1] = (cl_int)mp->dtype_b;
    dt.s[2] = (cl_int)mp->dtype_o;
    dt.s[3] = (cl_int)mp->head_dim_v;
    pthread_mutex_lock(&st->lock);
    s = fmsa_ocl_aux_kernel(st, FMSA_OCL_AUX_MERGE, &a.kernel);
    if (s == FMSA_SUCCESS) {
        fmsa_ocl_arg_view4(&a, &mp->o_a, ea);
        fmsa_ocl_arg_view4(&a, &mp->o_b, eb);
        fmsa_ocl_arg_view4(&a, &mp->o, eo);
        fmsa_ocl_arg_viewn(&a, &mp->lse_a, 4);
        fmsa_ocl_arg_viewn(&a, &mp->lse_b, 4);
        fmsa_ocl_arg_viewn(&a, &mp->lse, 4);
        fmsa_ocl_arg(&a, sizeof dt, &dt);
        s = fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_aux_names[FMSA_OCL_AUX_MERGE],
                             (size_t)mp->seqlen, (size_t)mp->heads, (size_t)mp->batch, 1);
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}

/* The ring's elementwise op (common/accumulate.h): one work-item per element. */
fmsa_status fmsa_ocl_accumulate(void *state, const fmsa_accumulate_problem *ap, void *stream) {
    fmsa_ocl_state *st = (fmsa_ocl_state *)state;
    cl_command_queue queue = stream ? (cl_command_queue)stream : st->queue;
    const fmsa_acc_view *dv = &ap->dst, *sv = ap->src.data ? &ap->src : &ap->dst;
    const size_t ed = fmsa_dtype_size(dv->dtype), es = fmsa_dtype_size(sv->dtype);
    fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
    cl_int4 mt;
    cl_float fill = ap->fill;
    fmsa_status s;
    FMSA_TRY(fmsa_ocl_merge_offset("dst", dv->byte_offset, ed));
    FMSA_TRY(fmsa_ocl_merge_offset("src", sv->byte_offset, es));
    mt.s[0] = (cl_int)ap->mode;
    mt.s[1] = (cl_int)dv->dtype;
    mt.s[2] = (cl_int)sv->dtype;
    mt.s[3] = 0;
    pthread_mutex_lock(&st->lock);
    s = fmsa_ocl_aux_kernel(st, FMSA_OCL_AUX_ACCUMULATE, &a.kernel);
    if (s == FMSA_SUCCESS) {
        fmsa_ocl_arg_mem(&a, dv->data);
        fmsa_ocl_arg_long(&a, dv->byte_offset / (int64_t)ed);
        fmsa_ocl_arg_long4(&a, dv->strides[0], dv->strides[1], dv->strides[2], dv->strides[3]);
        fmsa_ocl_arg_mem(&a, sv->data);
        fmsa_ocl_arg_long(&a, sv->byte_offset / (int64_t)es);
        fmsa_ocl_arg_long4(&a, sv->strides[0], sv->strides[1], sv->strides[2], sv->strides[3]);
        fmsa_ocl_arg_long4(&a, ap->shape[0], ap->shape[1], ap->shape[2], ap->shape[3]);
        fmsa_ocl_arg(&a, sizeof mt, &mt);
        fmsa_ocl_arg(&a, sizeof fill, &fill);
        s = fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_aux_names[FMSA_OCL_AUX_ACCUMULATE],
                             (size_t)ap->count, 1, 1, 1);
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}
