/* The ring's elementwise op and device copy on host memory (common/accumulate.h). */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "common/fmsa_half.h"

fmsa_status fmsa_cpu_accumulate(void *state, const fmsa_accumulate_problem *ap, void *stream) {
    const fmsa_acc_view *dv = &ap->dst, *sv = &ap->src;
    char *d = (char *)dv->data + dv->byte_offset;
    const char *s = sv->data ? (const char *)sv->data + sv->byte_offset : NULL;
    const int same = s && dv->dtype == sv->dtype && ap->mode == FMSA_ACC_COPY;
    const size_t es = fmsa_dtype_size(dv->dtype);
    (void)state;
    (void)stream;
    for (int64_t a = 0; a < ap->shape[0]; ++a)
        for (int64_t b = 0; b < ap->shape[1]; ++b)
            for (int64_t c = 0; c < ap->shape[2]; ++c)
                for (int64_t e = 0; e < ap->shape[3]; ++e) {
                    const int64_t di = a * dv->strides[0] + b * dv->strides[1] +
                                       c * dv->strides[2] + e * dv->strides[3];
                    const int64_t si = a * sv->strides[0] + b * sv->strides[1] +
                                       c * sv->strides[2] + e * sv->strides[3];
                    float x;
                    if (same) { /* a copy between equal dtypes keeps the bits */
                        memcpy(d + di * (int64_t)es, s + si * (int64_t)es, es);
                        continue;
                    }
                    if (ap->mode == FMSA_ACC_FILL) x = ap->fill;
                    else x = fmsa_load_f32(s, sv->dtype, si);
                    /* one rounding (fmaf), as the CUDA and OpenCL ops do */
                    if (ap->mode == FMSA_ACC_ADD_SCALED)
                        x = fmaf(x, ap->fill, fmsa_load_f32(d, dv->dtype, di));
                    if (ap->mode == FMSA_ACC_ADD) x += fmsa_load_f32(d, dv->dtype, di);
                    fmsa_store_f32(d, dv->dtype, di, x);
                }
    return FMSA_SUCCESS;
}

fmsa_status fmsa_cpu_copy_device(void *state, void *dst, size_t dst_offset, const void *src,
                                 size_t src_offset, size_t bytes, void *stream) {
    (void)state;
    (void)stream;
    memcpy((char *)dst + dst_offset, (const char *)src + src_offset, bytes);
    return FMSA_SUCCESS;
}
