#include "support/fmsa_test_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fmsa_test_spec fmsa_test_spec_make(fmsa_pass pass, fmsa_dtype dtype, int64_t batch, int64_t sq,
                                   int64_t sk, int64_t hq, int64_t hkv, int64_t d) {
    fmsa_test_spec s;
    memset(&s, 0, sizeof s);
    s.pass = pass;
    s.dtype = dtype;
    s.batch = batch;
    s.sq = sq;
    s.sk = sk;
    s.hq = hq;
    s.hkv = hkv;
    s.d = d;
    s.wl = -1;
    s.wr = -1;
    s.lse = 1;
    s.seed = 1;
    return s;
}

const char *fmsa_test_dtype_name(fmsa_dtype dtype) {
    switch (dtype) {
    case FMSA_DTYPE_F32: return "f32";
    case FMSA_DTYPE_F16: return "f16";
    case FMSA_DTYPE_BF16: return "bf16";
    default: return "?";
    }
}

void fmsa_test_spec_format(const fmsa_test_spec *s, char *buf, size_t len) {
    /* %.9g round-trips every float exactly. */
    snprintf(buf, len,
             "pass=%s dtype=%s b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld causal=%d wl=%lld "
             "wr=%lld softcap=%.9g alibi=%d mask=%d varlen=%d page=%lld seqused=%d strided=%d "
             "lse=%d det=%d scale=%.9g amp=%.9g nan=%d seed=%llu dv=%lld sinks=%d dlse=%d "
             "dsink=%d climb=%.9g",
             s->pass == FMSA_PASS_BACKWARD ? "bwd" : "fwd", fmsa_test_dtype_name(s->dtype),
             (long long)s->batch, (long long)s->sq, (long long)s->sk, (long long)s->hq,
             (long long)s->hkv, (long long)s->d, s->causal, (long long)s->wl, (long long)s->wr,
             (double)s->softcap, s->alibi, s->mask, s->varlen, (long long)s->page, s->seqused,
             s->strided, s->lse, s->det, (double)s->scale, (double)s->amp, s->nan,
             (unsigned long long)s->seed, (long long)s->dv, s->sinks, s->dlse, s->dsink,
             (double)s->climb);
}

/// Applies one "key=value" token; -1 for an unknown key or bad value.
static int spec_set(fmsa_test_spec *s, const char *key, const char *val) {
    char *end = NULL;
    long long iv;
    if (!strcmp(key, "pass")) {
        if (!strcmp(val, "fwd")) s->pass = FMSA_PASS_FORWARD;
        else if (!strcmp(val, "bwd")) s->pass = FMSA_PASS_BACKWARD;
        else return -1;
        return 0;
    }
    if (!strcmp(key, "dtype")) {
        if (!strcmp(val, "f32")) s->dtype = FMSA_DTYPE_F32;
        else if (!strcmp(val, "f16")) s->dtype = FMSA_DTYPE_F16;
        else if (!strcmp(val, "bf16")) s->dtype = FMSA_DTYPE_BF16;
        else return -1;
        return 0;
    }
    if (!strcmp(key, "softcap") || !strcmp(key, "scale") || !strcmp(key, "amp") ||
        !strcmp(key, "climb")) {
        float f = strtof(val, &end);
        if (end == val || *end) return -1;
        if (key[0] == 'c') s->climb = f;
        else if (key[1] == 'o') s->softcap = f;
        else if (key[0] == 'a') s->amp = f;
        else s->scale = f;
        return 0;
    }
    if (!strcmp(key, "seed")) {
        unsigned long long u = strtoull(val, &end, 10);
        if (end == val || *end) return -1;
        s->seed = u;
        return 0;
    }
    iv = strtoll(val, &end, 10);
    if (end == val || *end) return -1;
    if (!strcmp(key, "b")) s->batch = iv;
    else if (!strcmp(key, "sq")) s->sq = iv;
    else if (!strcmp(key, "sk")) s->sk = iv;
    else if (!strcmp(key, "hq")) s->hq = iv;
    else if (!strcmp(key, "hkv")) s->hkv = iv;
    else if (!strcmp(key, "d")) s->d = iv;
    else if (!strcmp(key, "causal")) s->causal = (int)iv;
    else if (!strcmp(key, "wl")) s->wl = iv;
    else if (!strcmp(key, "wr")) s->wr = iv;
    else if (!strcmp(key, "alibi")) s->alibi = (int)iv;
    else if (!strcmp(key, "mask")) s->mask = (int)iv;
    else if (!strcmp(key, "varlen")) s->varlen = (int)iv;
    else if (!strcmp(key, "page")) s->page = iv;
    else if (!strcmp(key, "seqused")) s->seqused = (int)iv;
    else if (!strcmp(key, "strided")) s->strided = (int)iv;
    else if (!strcmp(key, "lse")) s->lse = (int)iv;
    else if (!strcmp(key, "det")) s->det = (int)iv;
    else if (!strcmp(key, "dv")) s->dv = iv;
    else if (!strcmp(key, "sinks")) s->sinks = (int)iv;
    else if (!strcmp(key, "dlse")) s->dlse = (int)iv;
    else if (!strcmp(key, "dsink")) s->dsink = (int)iv;
    else if (!strcmp(key, "nan")) s->nan = (int)iv;
    else return -1;
    return 0;
}

int fmsa_test_spec_parse(const char *str, fmsa_test_spec *s) {
    char tok[64];
    *s = fmsa_test_spec_make(FMSA_PASS_FORWARD, FMSA_DTYPE_F32, 1, 1, 1, 1, 1, 8);
    while (*str) {
        size_t n = strcspn(str, " \t,");
        char *eq;
        if (n == 0) {
            ++str;
            continue;
        }
        if (n >= sizeof tok) return -1;
        memcpy(tok, str, n);
        tok[n] = '\0';
        str += n;
        eq = strchr(tok, '=');
        if (!eq) return -1;
        *eq = '\0';
        if (spec_set(s, tok, eq + 1) != 0) return -1;
    }
    return 0;
}
