/* Kernel arguments shared by both OpenCL kernel families (ocl_args.h). */
#include "backends/opencl/ocl_args.h"

void fmsa_ocl_arg(fmsa_ocl_args *a, size_t size, const void *value) {
    if (a->rc == CL_SUCCESS) a->rc = a->cl->clSetKernelArg(a->kernel, a->next, size, value);
    ++a->next;
}

void fmsa_ocl_arg_mem(fmsa_ocl_args *a, void *data) {
    cl_mem m = (cl_mem)data;
    fmsa_ocl_arg(a, sizeof m, &m);
}

void fmsa_ocl_arg_long4(fmsa_ocl_args *a, int64_t x, int64_t y, int64_t z, int64_t w) {
    cl_long4 v;
    v.s[0] = x;
    v.s[1] = y;
    v.s[2] = z;
    v.s[3] = w;
    fmsa_ocl_arg(a, sizeof v, &v);
}

void fmsa_ocl_arg_long(fmsa_ocl_args *a, int64_t x) {
    cl_long v = x;
    fmsa_ocl_arg(a, sizeof v, &v);
}

void fmsa_ocl_arg_view4(fmsa_ocl_args *a, const fmsa_view4 *v, size_t elem) {
    fmsa_ocl_arg_mem(a, v->data);
    fmsa_ocl_arg_long4(a, v->byte_offset / (int64_t)elem, v->sb, v->ss, v->sh);
}

void fmsa_ocl_arg_viewn(fmsa_ocl_args *a, const fmsa_viewn *v, size_t elem) {
    fmsa_ocl_arg_mem(a, v->data);
    fmsa_ocl_arg_long4(a, v->data ? v->byte_offset / (int64_t)elem : 0, v->s0, v->s1, v->s2);
}

void fmsa_ocl_arg_cu(fmsa_ocl_args *a, const fmsa_problem *p) {
    fmsa_ocl_arg_mem(a, p->cu_seqlens_q.data);
    fmsa_ocl_arg_mem(a, p->cu_seqlens_k.data);
    fmsa_ocl_arg_long4(a, p->cu_seqlens_q.data ? p->cu_seqlens_q.byte_offset / 4 : 0,
                       p->cu_seqlens_q.s0,
                       p->cu_seqlens_k.data ? p->cu_seqlens_k.byte_offset / 4 : 0,
                       p->cu_seqlens_k.s0);
}

void fmsa_ocl_arg_dims(fmsa_ocl_args *a, const fmsa_problem *p) {
    cl_long2 win;
    cl_float4 fp;
    fmsa_ocl_arg_long4(a, p->seqlen_q, p->seqlen_k, p->heads_q, p->heads_q / p->heads_kv);
    win.s[0] = p->window_left;
    win.s[1] = p->window_right;
    fmsa_ocl_arg(a, sizeof win, &win);
    fp.s[0] = p->softmax_scale;
    fp.s[1] = p->softmax_scale * 1.4426950408889634f;
    fp.s[2] = p->softcap;
    fp.s[3] = 0.0f;
    fmsa_ocl_arg(a, sizeof fp, &fp);
}

void fmsa_ocl_arg_paged(fmsa_ocl_args *a, const fmsa_problem *p) {
    cl_long2 uv;
    fmsa_ocl_arg_mem(a, p->block_table.data);
    fmsa_ocl_arg_long4(a, p->block_table.data ? p->block_table.byte_offset / 4 : 0,
                       p->block_table.s0, p->block_table.s1, p->page_size);
    fmsa_ocl_arg_mem(a, p->seqused_k.data);
    uv.s[0] = p->seqused_k.data ? p->seqused_k.byte_offset / 4 : 0;
    uv.s[1] = p->seqused_k.s0;
    fmsa_ocl_arg(a, sizeof uv, &uv);
}
