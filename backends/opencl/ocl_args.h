/*
 * Kernel arguments and launches of the OpenCL backend, shared by both kernel families
 * (ocl_launch.c: the generic kernels; cpu/ocl_cpu.c: the CPU-device variant).
 * Views travel as (cl_mem, (element offset, strides) long4); absent optional
 * tensors as NULL cl_mem, which OpenCL allows.  The first failing
 * clSetKernelArg is kept in rc and later calls are skipped, so a launch sets
 * every argument and checks once.
 */
#ifndef FMSA_OCL_ARGS_H
#define FMSA_OCL_ARGS_H

#include "backends/opencl/ocl_internal.h"

/// The next argument index of one kernel and the first error.
typedef struct fmsa_ocl_args {
    const fmsa_ocl_api *cl;
    cl_kernel kernel;
    cl_uint next;
    cl_int rc;
} fmsa_ocl_args;

void fmsa_ocl_arg(fmsa_ocl_args *a, size_t size, const void *value);
/// A buffer (a cl_mem stored in a tensor's data pointer; NULL allowed).
void fmsa_ocl_arg_mem(fmsa_ocl_args *a, void *data);
void fmsa_ocl_arg_long4(fmsa_ocl_args *a, int64_t x, int64_t y, int64_t z, int64_t w);
void fmsa_ocl_arg_long(fmsa_ocl_args *a, int64_t x);
/// A [batch, seq, head, dim] view: (buffer, (element offset, sb, ss, sh)).
void fmsa_ocl_arg_view4(fmsa_ocl_args *a, const fmsa_view4 *v, size_t elem);
/// A small tensor: (buffer, (element offset, s0, s1, s2)); absent = NULL, offset 0.
void fmsa_ocl_arg_viewn(fmsa_ocl_args *a, const fmsa_viewn *v, size_t elem);
/// The ALiBi slopes: (buffer, (element offset, s0, s1, alibi_offset)); the
/// slopes' third stride is always 0, so its slot carries the problem's offset.
void fmsa_ocl_arg_alibi(fmsa_ocl_args *a, const fmsa_problem *p);
/// cu_seqlens_q, cu_seqlens_k and (offset q, stride q, offset k, stride k).
void fmsa_ocl_arg_cu(fmsa_ocl_args *a, const fmsa_problem *p);

/// Paged KV: block_table, (offset, s0, s1, page_size), seqused_k, (offset, s0).
void fmsa_ocl_arg_paged(fmsa_ocl_args *a, const fmsa_problem *p);
/// dims = (seqlen_q, seqlen_k, Hq, group), window (left, right), and
/// (scale, scale * log2 e, softcap, 0).
void fmsa_ocl_arg_dims(fmsa_ocl_args *a, const fmsa_problem *p);

/// Enqueues a's kernel on groups0 x dim1 x dim2 work-groups of wg x 1 x 1
/// work-items (nothing when a dimension is 0), after reporting a failed
/// clSetKernelArg by the kernel's name `what`.  FLASHMSA_OCL_PROFILE set:
/// the queue is finished around the launch and its wall time logged at info
/// level (tuning only: it serialises everything).
fmsa_status fmsa_ocl_enqueue(fmsa_ocl_state *st, cl_command_queue queue, const fmsa_ocl_args *a,
                             const char *what, size_t groups0, size_t dim1, size_t dim2,
                             size_t wg);
/// ceil(n / rows) work-groups for n rows (0 for n <= 0).
size_t fmsa_ocl_groups(int64_t n, int64_t rows);
/// INSUFFICIENT_WORKSPACE, naming the pass, unless the caller's workspace
/// holds cfg->workspace_bytes.
fmsa_status fmsa_ocl_check_workspace(const fmsa_ocl_config *cfg, cl_mem workspace,
                                     size_t workspace_bytes, const char *pass);

#endif /* FMSA_OCL_ARGS_H */
