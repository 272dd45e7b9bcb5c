/*
 * The opaque context behind fmsa_context *: one device of one backend.
 */
#ifndef FMSA_COMMON_CONTEXT_H
#define FMSA_COMMON_CONTEXT_H

#include "common/backend.h"

struct fmsa_context {
    const fmsa_backend_vtable *vt; ///< the backend driving this context
    void *state;                   ///< what vt->context_create returned
    fmsa_device_info info;         ///< the device, as enumerated
};

#endif /* FMSA_COMMON_CONTEXT_H */
