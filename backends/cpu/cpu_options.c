/*
 * The CPU backend's developer variables, read once per context (at
 * context_create) into fmsa_cpu_options, so the plan made three times per
 * call (supports, workspace_size, the pass) is a pure function and a pass
 * never reads the environment.  FLASHMSA_CPU_KERNEL is the dispatcher's
 * (cpu_dispatch.c, once per process); its answer is copied here.  A malformed
 * value fails the context's creation with a message naming the variable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "common/error.h"

/// A set flag variable: present, non-empty and not "0".
static int cpu_flag(const char *name) {
    const char *env = getenv(name);
    return env && *env && *env != '0';
}

/// FLASHMSA_CPU_TILES="fwd=BMxBN,bwd=BMxBN" (either part optional): a
/// developer override of the planner's tiles for tuning runs.  Only the
/// syntax is checked here; whether a tile suits the kernel path the planner
/// picks is the plan's check (cpu_plan.c).
static fmsa_status cpu_tiles_read(int tiles[2][2]) {
    static const char *const keys[2] = {"fwd=", "bwd="};
    const char *env = getenv("FLASHMSA_CPU_TILES");
    memset(tiles, 0, 2 * sizeof tiles[0]);
    if (!env || !*env) return FMSA_SUCCESS;
    for (int pass = 0; pass < 2; ++pass) {
        const char *at = strstr(env, keys[pass]);
        int m, n, used = 0;
        if (!at) continue;
        if (sscanf(at + 4, "%dx%d%n", &m, &n, &used) != 2 || m < 1 || n < 1 ||
            (at[4 + used] != '\0' && at[4 + used] != ','))
            return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                             "FLASHMSA_CPU_TILES=\"%s\": expected fwd=BMxBN and/or bwd=BMxBN",
                             env);
        tiles[pass][0] = m;
        tiles[pass][1] = n;
    }
    return FMSA_SUCCESS;
}

/// FLASHMSA_CPU_BWD=parts|ordered|recompute forces the backward's dQ owner
/// (developers, and the test suites, which run the backward grids under each).
static fmsa_status cpu_dq_owner_read(fmsa_cpu_dq_owner *owner) {
    const char *env = getenv("FLASHMSA_CPU_BWD");
    *owner = FMSA_CPU_DQ_AUTO;
    if (!env || !*env) return FMSA_SUCCESS;
    if (strcmp(env, "parts") == 0) *owner = FMSA_CPU_DQ_PARTS;
    else if (strcmp(env, "ordered") == 0) *owner = FMSA_CPU_DQ_ORDERED;
    else if (strcmp(env, "recompute") == 0) *owner = FMSA_CPU_DQ_RECOMPUTE;
    else
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "FLASHMSA_CPU_BWD=\"%s\": expected parts, ordered or recompute", env);
    return FMSA_SUCCESS;
}

fmsa_status fmsa_cpu_options_read(fmsa_cpu_options *o) {
    memset(o, 0, sizeof *o);
    FMSA_TRY(fmsa_cpu_kernels_get(&o->kern));
    FMSA_TRY(cpu_tiles_read(o->tiles));
    FMSA_TRY(cpu_dq_owner_read(&o->dq_owner));
    o->trace = cpu_flag("FLASHMSA_CPU_TRACE");
    o->poison = cpu_flag("FLASHMSA_CPU_POISON");
    fmsa_log(FMSA_LOG_DEBUG, "cpu: options: kernels %s, tiles fwd %dx%d bwd %dx%d (0: planner), "
             "dQ owner %d (0: by shape), trace %d, poison %d", o->kern->name, o->tiles[0][0],
             o->tiles[0][1], o->tiles[1][0], o->tiles[1][1], (int)o->dq_owner, o->trace,
             o->poison);
    return FMSA_SUCCESS;
}
