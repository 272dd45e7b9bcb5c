/*
 * Long-option parsing for the flashmsa program (see cli_options.h).
 */
#include "apps/cli_options.h"

#include "common/registry.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cli_args cli_args_begin(int argc, char **argv, int first) {
    cli_args a;
    memset(&a, 0, sizeof a);
    a.argc = argc;
    a.argv = argv;
    a.next = first;
    return a;
}

int cli_args_next(cli_args *a) {
    if (a->error || a->next >= a->argc) return 0;
    a->arg = a->argv[a->next++];
    a->value = NULL;
    return 1;
}

int cli_flag(cli_args *a, const char *name) { return strcmp(a->arg, name) == 0; }

int cli_value(cli_args *a, const char *name) {
    size_t n = strlen(name);
    if (strncmp(a->arg, name, n) != 0) return 0;
    if (a->arg[n] == '=') {
        a->value = a->arg + n + 1;
        return 1;
    }
    if (a->arg[n] != '\0') return 0;
    if (a->next >= a->argc) {
        fprintf(stderr, "flashmsa: option %s needs a value\n", name);
        a->error = 1;
        return 1;
    }
    a->value = a->argv[a->next++];
    return 1;
}

int cli_unknown(const cli_args *a, const char *command) {
    fprintf(stderr, "flashmsa %s: unknown option '%s' (see flashmsa %s --help)\n", command,
            a->arg, command);
    return -1;
}

int cli_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "flashmsa: %s: '%s' is not an integer in [%lld, %lld]\n", opt, s,
                (long long)lo, (long long)hi);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int cli_parse_float(const char *opt, const char *s, float lo, float hi, float *out) {
    char *end = NULL;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "flashmsa: %s: '%s' is not a number in [%g, %g]\n", opt, s, lo, hi);
        return -1;
    }
    *out = (float)v;
    return 0;
}

int cli_parse_sinks(const char *opt, const char *s, int *mode, float *value) {
    char *end = NULL;
    double v;
    if (strcmp(s, "random") == 0) {
        *mode = 1;
        return 0;
    }
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || fabs(v) > 1e4) {
        fprintf(stderr,
                "flashmsa: %s: '%s' is neither 'random' nor a finite sink logit in [-1e4, 1e4]\n",
                opt, s);
        return -1;
    }
    *mode = 2;
    *value = (float)v;
    return 0;
}

int cli_parse_i64_list(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out,
                       int max, int *count) {
    char buf[256];
    char *tok, *save;
    int n = 0;
    if (strlen(s) >= sizeof buf) {
        fprintf(stderr, "flashmsa: %s: list too long\n", opt);
        return -1;
    }
    strcpy(buf, s);
    /* strtok_r is POSIX, not C11: split by hand. */
    for (tok = buf; tok != NULL; tok = save) {
        save = strchr(tok, ',');
        if (save != NULL) *save++ = '\0';
        if (n == max) {
            fprintf(stderr, "flashmsa: %s: at most %d values\n", opt, max);
            return -1;
        }
        if (cli_parse_i64(opt, tok, lo, hi, &out[n]) != 0) return -1;
        n++;
    }
    *count = n;
    return 0;
}

int cli_parse_dtype(const char *opt, const char *s, fmsa_dtype *out) {
    if (strcmp(s, "fp32") == 0 || strcmp(s, "f32") == 0 || strcmp(s, "float32") == 0) {
        *out = FMSA_DTYPE_F32;
    } else if (strcmp(s, "fp16") == 0 || strcmp(s, "f16") == 0 || strcmp(s, "float16") == 0) {
        *out = FMSA_DTYPE_F16;
    } else if (strcmp(s, "bf16") == 0 || strcmp(s, "bfloat16") == 0) {
        *out = FMSA_DTYPE_BF16;
    } else {
        fprintf(stderr, "flashmsa: %s: '%s' is not one of fp32, fp16, bf16\n", opt, s);
        return -1;
    }
    return 0;
}

int cli_parse_backend(const char *opt, const char *s, fmsa_backend *out) {
    if (fmsa_backend_parse(s, out) == 0) return 0;
    fprintf(stderr, "flashmsa: %s: '%s' is not one of %s\n", opt, s, FMSA_BACKEND_NAMES);
    return -1;
}

int cli_parse_window(const char *opt, const char *s, int64_t *left, int64_t *right) {
    int64_t v[2];
    int n = 0;
    if (cli_parse_i64_list(opt, s, -1, INT64_MAX / 4, v, 2, &n) != 0) return -1;
    if (n != 2) {
        fprintf(stderr, "flashmsa: %s: expected L,R (each -1 for unlimited)\n", opt);
        return -1;
    }
    *left = v[0];
    *right = v[1];
    return 0;
}

const char *cli_dtype_name(fmsa_dtype dtype) {
    switch (dtype) {
    case FMSA_DTYPE_F32: return "fp32";
    case FMSA_DTYPE_F16: return "fp16";
    case FMSA_DTYPE_BF16: return "bf16";
    default: return "?";
    }
}

int cli_device_option(cli_args *a, cli_device_opts *o) {
    int64_t v;
    if (cli_value(a, "--backend")) {
        if (a->error || cli_parse_backend("--backend", a->value, &o->backend) != 0) return -1;
        return 1;
    }
    if (cli_value(a, "--device")) {
        if (a->error || cli_parse_i64("--device", a->value, 0, 1 << 20, &v) != 0) return -1;
        o->device = (int)v;
        return 1;
    }
    if (cli_value(a, "--threads")) {
        /* 0 is refused, not read as "all": all is what omitting the option means */
        if (a->error || cli_parse_i64("--threads", a->value, 1, 1 << 16, &v) != 0) return -1;
        o->threads = (int)v;
        return 1;
    }
    return 0;
}
