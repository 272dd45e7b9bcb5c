/*
 * `flashmsa bench`: the standard flash-attention sweep (../shared/BENCHMARKING.md,
 * FlashAttention's): b*s = 16384 tokens, h = 2048 / d, d in {64, 128, 256},
 * s in {512 ... 16384}, causal and not, forward and backward.  Every timed
 * shape's outputs are spot-checked against the fp64 reference on sampled
 * rows (a speed figure only counts next to a check of the same run).
 *
 * The full sweep is ~70 TFLOP of work: minutes on a GPU, hours on a small
 * CPU.  So when the device is not a GPU the defaults are a reduced sweep
 * (announced in the header line); --full restores the standard one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cli.h"
#include "apps/cli_util.h"
#include "apps/cli_check.h"
#include "apps/cli_options.h"
#include "apps/cli_workload.h"
#include "common/fmsa_limits.h"
#include "common/error.h"

#define CLI_BENCH_MAX_LIST 16

/* A run longer than this is not repeated: on a CPU the large shapes take
 * minutes, and their first run is as good a measurement as any. */
#define CLI_BENCH_NO_REPEAT_S 10.0

typedef struct cli_bench_opts {
    cli_device_opts dev;
    fmsa_dtype dtype;
    int64_t dims[CLI_BENCH_MAX_LIST];
    int n_dims;
    int64_t seqlens[CLI_BENCH_MAX_LIST];
    int n_seqlens;
    int64_t tokens;
    int64_t hidden;
    int causal_modes; /* bit 0: non-causal, bit 1: causal */
    int64_t dim_v;    /* value head dim of every shape; 0 = each shape's dim */
    int sinks;        /* cli_shape.sinks */
    float sink_value;
    int fwd_only;
    int json;
    int full;
    int check_rows;
    double min_time;
    uint64_t seed;
    int set_dims, set_seqlens, set_tokens; /* explicit flags win over --full / reduced */
    double fp32_peak, bf16_peak; /* CPU: the selected path's measured peaks (0: none) */
} cli_bench_opts;

static const int64_t cli_std_dims[] = {64, 128, 256};
static const int64_t cli_std_seqlens[] = {512, 1024, 2048, 4096, 8192, 16384};
#define CLI_STD_TOKENS 16384
/* The reduced sweep: the same shapes family at a quarter of the tokens and
 * s <= 2048, about 2 TFLOP in all (a few minutes on two cores). */
static const int64_t cli_reduced_seqlens[] = {512, 1024, 2048};
#define CLI_REDUCED_TOKENS 4096

static void cli_bench_help(void) {
    printf(
        "usage: flashmsa bench [options]\n"
        "\n"
        "Sweeps the standard flash-attention benchmark (bench/RESULTS.md, BENCHMARKING.md):\n"
        "batch*seqlen = 16384 tokens, heads = 2048/dim, dim in {64,128,256}, seqlen in\n"
        "{512,...,16384}, causal and not, forward and backward.  FLOPs: forward\n"
        "4*b*h*s*s*d (2*b*h*s*s*(d + dim-v) with --dim-v; halved for causal), backward\n"
        "2.5x forward.  Each shape is checked\n"
        "on sampled rows against the fp64 reference (O and LSE forward, dQ backward).\n"
        "\n"
        "On a device that is not a GPU (the CPU backend, OpenCL on a CPU) the default is\n"
        "a REDUCED sweep: 4096 tokens, seqlen in {512,1024,2048}; --full runs the\n"
        "standard sweep (hours on a small CPU).  On the CPU backend the kernel path's\n"
        "fp32 FMA peak is measured first (as `flashmsa peak`) and every row shows its\n"
        "GFLOP/s as a %% of it; FLASHMSA_CPU_KERNEL=scalar runs the scalar baseline.\n"
        "\n"
        "  --backend B       " FMSA_BACKEND_NAMES " (default auto)\n"
        "  --device N        device index within the backend; with auto, the index in\n"
        "                    `flashmsa devices` (default 0)\n"
        "  --threads N       OpenMP threads for the CPU backend, N >= 1 (default: all)\n"
        "  --dtype T         fp32|fp16|bf16 (default bf16, as the standard sweep)\n"
        "  --dims LIST       comma-separated head dims (default 64,128,256)\n"
        "  --dim-v N         value head dim of every shape, multiple of 8 in [8, 576]\n"
        "                    (default: each shape's dim; FLOPs 2*b*h*s*s*(dim + dim-v))\n"
        "  --sinks S         attention sinks: 'random' (a logit per head) or one logit X\n"
        "  --seqlens LIST    comma-separated sequence lengths\n"
        "  --tokens N        batch*seqlen (batch = tokens/seqlen; seqlens above are skipped)\n"
        "  --hidden N        heads*dim (default 2048)\n"
        "  --masks LIST      none,causal (default both)\n"
        "  --fwd-only        forward only\n"
        "  --full            the standard sweep even on a CPU\n"
        "  --check-rows N    sampled rows checked per shape (default 8)\n"
        "  --min-time S      repeat each pass until S seconds of timed runs (default 1;\n"
        "                    at most 9 timed runs, after one warm-up run)\n"
        "  --seed N          input seed (default 1)\n"
        "  --json            one JSON object per line on stdout instead of the table\n"
        "\n"
        "Progress goes to stderr.  Exit status: 0 all ran and passed, 1 a check failed,\n"
        "2 an error (shapes the backend reports as not supported are skipped, noted).\n");
}

static void cli_bench_set_list(int64_t *dst, int *n, const int64_t *src, int count) {
    int i;
    for (i = 0; i < count; i++) dst[i] = src[i];
    *n = count;
}

static int cli_bench_parse_masks(const char *s, int *modes) {
    char buf[64];
    char *tok, *next;
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    *modes = 0;
    for (tok = buf; tok != NULL; tok = next) {
        next = strchr(tok, ',');
        if (next != NULL) *next++ = '\0';
        if (strcmp(tok, "none") == 0) *modes |= 1;
        else if (strcmp(tok, "causal") == 0) *modes |= 2;
        else {
            fprintf(stderr, "flashmsa: --masks: '%s' is not none or causal\n", tok);
            return -1;
        }
    }
    return 0;
}

static int cli_bench_parse(int argc, char **argv, cli_bench_opts *o) {
    cli_args a = cli_args_begin(argc, argv, 2);
    int64_t v;

    memset(o, 0, sizeof *o);
    o->dev.backend = FMSA_BACKEND_AUTO;
    o->dtype = FMSA_DTYPE_BF16;
    o->hidden = 2048;
    o->causal_modes = 3;
    o->check_rows = 8;
    o->min_time = 1.0;
    o->seed = 1;
    cli_bench_set_list(o->dims, &o->n_dims, cli_std_dims, 3);

    while (cli_args_next(&a)) {
        int r = cli_device_option(&a, &o->dev);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            cli_bench_help();
            return 0;
        } else if (cli_flag(&a, "--fwd-only")) {
            o->fwd_only = 1;
        } else if (cli_flag(&a, "--json")) {
            o->json = 1;
        } else if (cli_flag(&a, "--full")) {
            o->full = 1;
        } else if (cli_value(&a, "--dtype")) {
            if (a.error || cli_parse_dtype("--dtype", a.value, &o->dtype)) return -1;
        } else if (cli_value(&a, "--dims")) {
            if (a.error || cli_parse_i64_list("--dims", a.value, 1, 4096, o->dims,
                                              CLI_BENCH_MAX_LIST, &o->n_dims))
                return -1;
            o->set_dims = 1;
        } else if (cli_value(&a, "--dim-v")) {
            if (a.error || cli_parse_i64("--dim-v", a.value, 1, 4096, &o->dim_v)) return -1;
            if (o->dim_v < FMSA_HEAD_DIM_MIN || o->dim_v > FMSA_HEAD_DIM_MAX ||
                o->dim_v % FMSA_HEAD_DIM_MULTIPLE != 0) {
                fprintf(stderr,
                        "flashmsa bench: --dim-v %lld: the value head dim must be a multiple of "
                        "%d in [%d, %d]\n",
                        (long long)o->dim_v, FMSA_HEAD_DIM_MULTIPLE, FMSA_HEAD_DIM_MIN,
                        FMSA_HEAD_DIM_MAX);
                return -1;
            }
        } else if (cli_value(&a, "--sinks")) {
            if (a.error || cli_parse_sinks("--sinks", a.value, &o->sinks, &o->sink_value))
                return -1;
        } else if (cli_value(&a, "--seqlens")) {
            if (a.error || cli_parse_i64_list("--seqlens", a.value, 1, 1 << 26, o->seqlens,
                                              CLI_BENCH_MAX_LIST, &o->n_seqlens))
                return -1;
            o->set_seqlens = 1;
        } else if (cli_value(&a, "--tokens")) {
            if (a.error || cli_parse_i64("--tokens", a.value, 1, 1 << 30, &o->tokens)) return -1;
            o->set_tokens = 1;
        } else if (cli_value(&a, "--hidden")) {
            if (a.error || cli_parse_i64("--hidden", a.value, 8, 1 << 20, &o->hidden)) return -1;
        } else if (cli_value(&a, "--masks")) {
            if (a.error || cli_bench_parse_masks(a.value, &o->causal_modes)) return -1;
        } else if (cli_value(&a, "--check-rows")) {
            if (a.error || cli_parse_i64("--check-rows", a.value, 1, 1 << 16, &v)) return -1;
            o->check_rows = (int)v;
        } else if (cli_value(&a, "--min-time")) {
            float t;
            if (a.error || cli_parse_float("--min-time", a.value, 0.0f, 3600.0f, &t)) return -1;
            o->min_time = t;
        } else if (cli_value(&a, "--seed")) {
            if (a.error || cli_parse_i64("--seed", a.value, 0, INT64_MAX, &v)) return -1;
            o->seed = (uint64_t)v;
        } else {
            cli_unknown(&a, "bench");
            return -1;
        }
    }
    return a.error ? -1 : 1;
}

/* Applies the standard or reduced defaults for whatever was not given. */
static int cli_bench_defaults(cli_bench_opts *o, const fmsa_device_info *info) {
    int reduced = info->kind != FMSA_DEVICE_KIND_GPU && !o->full;
    if (!o->set_seqlens) {
        if (reduced) cli_bench_set_list(o->seqlens, &o->n_seqlens, cli_reduced_seqlens, 3);
        else cli_bench_set_list(o->seqlens, &o->n_seqlens, cli_std_seqlens, 6);
    }
    if (!o->set_tokens) o->tokens = reduced ? CLI_REDUCED_TOKENS : CLI_STD_TOKENS;
    return reduced && !(o->set_seqlens && o->set_tokens);
}

/* Device names come from vendors; escape what JSON requires. */
static void cli_json_string(const char *s) {
    putchar('"');
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static int cli_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One warm-up run (also timed: the only run of very long shapes), then timed
 * runs until min_time; every run is poisoned first so the checked outputs are
 * the last run's.  Returns median seconds and the number of timed runs. */
static fmsa_status cli_bench_time(cli_workload *w, fmsa_pass pass, double min_time,
                                  double *sec, int *runs) {
    double t[9], t0, total = 0.0;
    int n = 0;
    FMSA_TRY(cli_workload_poison(w, pass));
    t0 = cli_now();
    FMSA_TRY(cli_workload_run(w, pass));
    t0 = cli_now() - t0;
    if (t0 > CLI_BENCH_NO_REPEAT_S) {
        *sec = t0;
        *runs = 1;
        return FMSA_SUCCESS;
    }
    do {
        double s;
        FMSA_TRY(cli_workload_poison(w, pass));
        s = cli_now();
        FMSA_TRY(cli_workload_run(w, pass));
        t[n] = cli_now() - s;
        total += t[n++];
    } while (n < 9 && total < min_time);
    qsort(t, (size_t)n, sizeof(double), cli_cmp_double);
    *sec = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    *runs = n;
    return FMSA_SUCCESS;
}

/* The err/tol of the tensor closest to failing, for the one-column summary. */
/* The peak a row is measured against: bf16 inputs run on the path's bf16
 * dot products where it has them (then the fp32 FMA peak would read 170%),
 * everything else on fp32 FMAs.  0 where no peak was measured. */
static double cli_bench_peak(const cli_bench_opts *o, fmsa_dtype dtype, const char **kind) {
    if (dtype == FMSA_DTYPE_BF16 && o->bf16_peak > 0.0) {
        *kind = "bf16";
        return o->bf16_peak;
    }
    *kind = "fp32";
    return o->fp32_peak;
}

static const cli_err *cli_bench_worst(const cli_err err[CLI_ERR_COUNT]) {
    const cli_err *worst = NULL;
    double wr = -1.0;
    int i;
    for (i = 0; i < CLI_ERR_COUNT; i++) {
        double r;
        if (err[i].checked == 0) continue;
        r = err[i].nan_count > 0 ? INFINITY : err[i].err / err[i].tol;
        if (r > wr) wr = r, worst = &err[i];
    }
    return worst;
}

static void cli_bench_print(const cli_bench_opts *o, const fmsa_device_info *info,
                            const cli_shape *s, fmsa_pass pass, double sec, int runs,
                            const cli_err err[CLI_ERR_COUNT]) {
    const double flops = cli_shape_flops(s, pass);
    const int ok = cli_check_ok(err);
    const cli_err *worst = cli_bench_worst(err);
    const char *peak_kind;
    const double peak = cli_bench_peak(o, s->dtype, &peak_kind);
    int i, first;
    if (o->json) {
        printf("{\"backend\":\"%s\",\"device\":", fmsa_backend_name(info->backend));
        cli_json_string(info->name);
        printf(",\"arch\":");
        cli_json_string(info->arch);
        printf(",\"kernel\":\"%s\"", cli_cpu_kernel_name(info));
        printf(",\"dtype\":\"%s\",\"pass\":\"%s\",\"causal\":%s,\"batch\":%lld,\"seqlen\":%lld,"
               "\"heads\":%lld,\"dim\":%lld,\"flops\":%.6e,\"time_ms\":%.6g,\"gflops\":%.6g,"
               "\"runs\":%d,\"check_rows\":%d,",
               cli_dtype_name(s->dtype), pass == FMSA_PASS_FORWARD ? "fwd" : "bwd",
               s->causal ? "true" : "false", (long long)s->batch, (long long)s->seqlen_q,
               (long long)s->heads_q, (long long)s->head_dim, flops, sec * 1e3,
               flops / sec * 1e-9, runs, o->check_rows);
        if (o->fp32_peak > 0.0)
            printf("\"fp32_peak_gflops\":%.6g,\"fp32_peak_frac\":%.4g,", o->fp32_peak,
                   flops / sec * 1e-9 / o->fp32_peak);
        if (peak > 0.0)
            printf("\"peak_kind\":\"%s\",\"peak_gflops\":%.6g,\"peak_frac\":%.4g,", peak_kind,
                   peak, flops / sec * 1e-9 / peak);
        printf("\"check\":{");
        for (i = 0, first = 1; i < CLI_ERR_COUNT; i++) {
            if (err[i].checked == 0) continue;
            printf("%s\"%s\":{\"err\":%.4e,\"naive\":%.4e,\"tol\":%.4e,\"nan\":%lld}",
                   first ? "" : ",", err[i].name, err[i].err, err[i].naive, err[i].tol,
                   (long long)err[i].nan_count);
            first = 0;
        }
        printf("},\"ok\":%s}\n", ok ? "true" : "false");
    } else {
        char pk[16] = "-";
        if (peak > 0.0)
            snprintf(pk, sizeof pk, "%.1f%%%s", 100.0 * flops / sec * 1e-9 / peak,
                     peak_kind[0] == 'b' ? "b" : "");
        printf("%-7s %5lld %6lld %5lld %4lld %-6s %-4s %11.3f %10.2f %7s %5d  %-3s %9.2e %9.2e  "
               "%s\n",
               cli_cpu_kernel_name(info), (long long)s->head_dim, (long long)s->seqlen_q, (long long)s->batch,
               (long long)s->heads_q, s->causal ? "yes" : "no",
               pass == FMSA_PASS_FORWARD ? "fwd" : "bwd", sec * 1e3, flops / sec * 1e-9, pk, runs,
               worst != NULL ? worst->name : "-", worst != NULL ? worst->err : 0.0,
               worst != NULL ? worst->tol : 0.0, ok ? "ok" : "FAIL");
    }
    fflush(stdout);
}

static void cli_bench_skip(const cli_bench_opts *o, const cli_shape *s, const char *why) {
    if (o->json) {
        printf("{\"dtype\":\"%s\",\"causal\":%s,\"batch\":%lld,\"seqlen\":%lld,\"heads\":%lld,"
               "\"dim\":%lld,\"skipped\":",
               cli_dtype_name(s->dtype), s->causal ? "true" : "false", (long long)s->batch,
               (long long)s->seqlen_q, (long long)s->heads_q, (long long)s->head_dim);
        cli_json_string(why);
        printf("}\n");
    } else {
        printf("%-7s %5lld %6lld %5lld %4lld %-6s skipped: %s\n", "-", (long long)s->head_dim,
               (long long)s->seqlen_q, (long long)s->batch, (long long)s->heads_q,
               s->causal ? "yes" : "no", why);
    }
    fflush(stdout);
}

/* Runs one shape (both passes); returns the exit code it contributes. */
static int cli_bench_shape(const cli_bench_opts *o, fmsa_context *ctx,
                           const fmsa_device_info *info, const cli_shape *s) {
    cli_workload w;
    fmsa_problem pf, pb;
    cli_err err[CLI_ERR_COUNT];
    fmsa_status st;
    double sec;
    int runs, rc = CLI_EXIT_OK, pass;

    st = cli_workload_create(ctx, s, o->seed, &w);
    if (st != FMSA_SUCCESS) return CLI_EXIT_ERROR;
    for (pass = 0; pass < (s->backward ? 2 : 1); pass++) {
        const fmsa_pass ps = pass == 0 ? FMSA_PASS_FORWARD : FMSA_PASS_BACKWARD;
        st = cli_bench_time(&w, ps, o->min_time, &sec, &runs);
        if (st == FMSA_ERR_NOT_SUPPORTED) {
            cli_bench_skip(o, s, fmsa_last_error());
            break;
        }
        if (st != FMSA_SUCCESS || cli_workload_fetch(&w, ps) != FMSA_SUCCESS ||
            cli_workload_host_problem(&w, FMSA_PASS_FORWARD, &pf) != FMSA_SUCCESS ||
            (ps == FMSA_PASS_BACKWARD &&
             cli_workload_host_problem(&w, FMSA_PASS_BACKWARD, &pb) != FMSA_SUCCESS) ||
            cli_check_rows(&pf, ps == FMSA_PASS_BACKWARD ? &pb : NULL, o->check_rows, o->seed,
                           err) != FMSA_SUCCESS) {
            rc = CLI_EXIT_ERROR;
            break;
        }
        /* the forward check reads O/LSE; the backward row check reads dQ only */
        if (ps == FMSA_PASS_BACKWARD) err[CLI_ERR_O].checked = err[CLI_ERR_LSE].checked = 0;
        cli_bench_print(o, info, s, ps, sec, runs, err);
        if (!cli_check_ok(err) && rc == CLI_EXIT_OK) rc = CLI_EXIT_FAIL;
    }
    cli_workload_destroy(&w);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    cli_bench_opts o;
    fmsa_context *ctx = NULL;
    fmsa_device_info info;
    int rc, di, si, ci, reduced, total = 0, done = 0;
    double t_start;

    rc = cli_bench_parse(argc, argv, &o);
    if (rc <= 0) return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
    if (cli_context_open(o.dev.backend, o.dev.device, o.dev.threads, &ctx, &info))
        return CLI_EXIT_ERROR;
    reduced = cli_bench_defaults(&o, &info);
    /* on the CPU, the yardstick of this run: the selected kernel path's
     * multiply-add peak on the same threads, measured here (0.3 s each) */
    cli_cpu_selected_peak(&info, o.dev.threads, 0.3, &o.fp32_peak, &o.bf16_peak);

    for (di = 0; di < o.n_dims; di++)
        for (si = 0; si < o.n_seqlens; si++)
            if (o.seqlens[si] <= o.tokens) total += ((o.causal_modes & 1) + (o.causal_modes >> 1));

    if (!o.json) {
        printf("# flashmsa bench: %s:%d %s (%s), %s, %lld tokens, hidden %lld%s\n",
               fmsa_backend_name(info.backend), info.index, info.name, info.arch,
               cli_dtype_name(o.dtype), (long long)o.tokens, (long long)o.hidden,
               reduced ? ", REDUCED sweep for a non-GPU device (--full for the standard one)"
                       : "");
        printf("# GFLOP/s: fwd 4*b*h*s*s*d (causal /2), bwd 2.5x; check: %d sampled rows vs "
               "fp64 (err/tol of the worst tensor)\n",
               o.check_rows);
        if (o.fp32_peak > 0.0) {
            printf("# peak of kernel path %s measured before the sweep (flashmsa peak): fp32 FMA "
                   "%.1f GFLOP/s", cli_cpu_kernel_name(&info), o.fp32_peak);
            if (o.bf16_peak > 0.0) printf(", bf16 dot products %.1f", o.bf16_peak);
            printf("; %%peak = GFLOP/s over the peak of what the row multiplies: %s\n",
                   o.dtype == FMSA_DTYPE_BF16 && o.bf16_peak > 0.0
                       ? "bf16 inputs on this path's bf16 products, over the bf16 peak (marked b)"
                       : "fp32 products, over the fp32 FMA peak");
        }
        printf("%-7s %5s %6s %5s %4s %-6s %-4s %11s %10s %7s %5s  %-3s %9s %9s  %s\n", "kernel",
               "dim", "seqlen",
               "batch", "head", "causal", "pass", "time_ms", "GFLOP/s", "%peak", "runs", "chk",
               "err", "tol", "check");
        fflush(stdout);
    }
    rc = CLI_EXIT_OK;
    t_start = cli_now();
    for (di = 0; di < o.n_dims; di++) {
        for (si = 0; si < o.n_seqlens; si++) {
            for (ci = 0; ci < 2; ci++) {
                cli_shape s;
                int r;
                if (!(o.causal_modes & (1 << ci)) || o.seqlens[si] > o.tokens) continue;
                memset(&s, 0, sizeof s);
                s.dtype = o.dtype;
                s.head_dim = o.dims[di];
                s.head_dim_v = o.dim_v;
                s.sinks = o.sinks;
                s.sink_value = o.sink_value;
                s.seqlen_q = s.seqlen_k = o.seqlens[si];
                s.batch = o.tokens / o.seqlens[si];
                s.heads_q = s.heads_kv = o.hidden / o.dims[di] > 0 ? o.hidden / o.dims[di] : 1;
                s.causal = ci;
                s.window_left = s.window_right = -1;
                s.backward = !o.fwd_only;
                done++;
                fprintf(stderr, "flashmsa bench [%d/%d %.0fs] dim %lld seqlen %lld batch %lld "
                                "heads %lld%s %s\n",
                        done, total, cli_now() - t_start, (long long)s.head_dim,
                        (long long)s.seqlen_q, (long long)s.batch, (long long)s.heads_q,
                        s.causal ? " causal" : "", s.backward ? "fwd+bwd" : "fwd");
                r = cli_bench_shape(&o, ctx, &info, &s);
                if (r > rc) rc = r;
            }
        }
    }
    fprintf(stderr, "flashmsa bench: %d shapes in %.0f s: %s\n", done, cli_now() - t_start,
            rc == CLI_EXIT_OK ? "all checks passed" : rc == CLI_EXIT_FAIL ? "CHECK FAILED" : "ERRORS");
    fmsa_context_destroy(ctx);
    return rc;
}
