/*
 * The kernels both OpenCL kernel families share (kernels/fmsa_ocl_aux.cl):
 * the sink gradient's deterministic two-stage sum and fmsa_merge_states.
 * Their own program, built once per context.
 */
#ifndef FMSA_OCL_AUX_H
#define FMSA_OCL_AUX_H

#include "backends/opencl/ocl_internal.h"
#include "common/accumulate.h"

/// Floats of workspace the dsink partials need (backward with sinks, whether
/// or not dsink is asked for: the workspace query cannot know); a family's
/// backward workspace puts them after its own floats.
size_t fmsa_ocl_dsink_floats(const fmsa_problem *p);

/// Enqueues dsink = -sum exp(t - lse) (D - dlse) from ws, whose first floats
/// hold D - dlse per (query row, head) as the preprocess wrote them; the
/// partials go to ws at float offset part_off.  Nothing without dsink.
fmsa_status fmsa_ocl_run_dsink(fmsa_ocl_state *st, const fmsa_problem *p, cl_mem ws,
                               int64_t part_off, cl_command_queue queue);

/// The vtable's merge member (fmsa_merge_states).
fmsa_status fmsa_ocl_merge(void *state, const fmsa_merge_problem *mp, void *stream);
/// The vtable's accumulate member (the ring's elementwise op, common/accumulate.h).
fmsa_status fmsa_ocl_accumulate(void *state, const fmsa_accumulate_problem *ap, void *stream);

/// Embedded source of the shared program (generated at build time).
extern const char fmsa_ocl_aux_source[];

#endif /* FMSA_OCL_AUX_H */
