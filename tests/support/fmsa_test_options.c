#include "support/fmsa_test_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/registry.h"

/// Backend from its lower-case name (fmsa_backend_name), -1 if unknown.
static int opt_backend(const char *name) {
    fmsa_backend b;
    return fmsa_backend_parse(name, &b) == 0 ? (int)b : -1;
}

static int opt_usage(const char *prog, const char *why) {
    fprintf(stderr,
            "%s: %s\nusage: %s [--backend " FMSA_BACKEND_NAMES "] [--case N] "
            "[--shape 'pass=fwd dtype=f16 b=2 sq=113 ...'] [--list] [--verbose]\n",
            prog, why, prog);
    return -1;
}

int fmsa_test_options_parse(int argc, char **argv, fmsa_test_options *o) {
    const char *env = getenv("FLASHMSA_TEST_BACKEND");
    memset(o, 0, sizeof *o);
    o->prog = argc > 0 ? argv[0] : "test";
    o->backend_name = env && *env ? env : "cpu";
    o->case_index = -1;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!strcmp(a, "--list")) {
            o->list = 1;
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
        } else if (i + 1 >= argc) {
            return opt_usage(o->prog, "missing value or unknown option");
        } else if (!strcmp(a, "--backend")) {
            o->backend_name = argv[++i];
        } else if (!strcmp(a, "--case")) {
            char *end;
            o->case_index = strtol(argv[++i], &end, 10);
            if (*end || o->case_index < 0) return opt_usage(o->prog, "bad --case");
        } else if (!strcmp(a, "--shape")) {
            o->shape = argv[++i];
        } else {
            return opt_usage(o->prog, "unknown option");
        }
    }
    if (opt_backend(o->backend_name) < 0) return opt_usage(o->prog, "unknown backend");
    o->backend = (fmsa_backend)opt_backend(o->backend_name);
    return 0;
}

fmsa_status fmsa_test_context_create(const fmsa_test_options *o, fmsa_context **ctx) {
    return fmsa_context_create(o->backend, 0, ctx);
}
