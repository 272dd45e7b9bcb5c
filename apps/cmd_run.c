/*
 * `flashmsa run`: one attention problem on one device, timed, and checked
 * against the fp64 reference (cli_check.h).  Exit status 0 only on PASS, so
 * scripts and CI can use it as a smoke test of a build on a machine.
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

/* Above this many forward FLOPs the full fp64 check (O(N^2) per head on one
 * or two host cores) would take longer than the run itself; sample rows. */
#define CLI_RUN_FULL_CHECK_MAX_FLOPS 2e10
#define CLI_RUN_SAMPLED_ROWS 64
/* One timed run of a pass on a busy machine can be off by 2-3x (three runs of
 * the default problem read 120, 50 and 168 GFLOP/s); the median of five is
 * stable to a few percent and still well under a second at the default shape. */
#define CLI_RUN_DEFAULT_REPEAT 5

static void cli_run_help(void) {
    printf(
        "usage: flashmsa run [options]\n"
        "\n"
        "Runs one attention problem, times it, and checks O, LSE, dQ, dK, dV (and dsink\n"
        "with --sinks) against\n"
        "the fp64 reference: each must satisfy  max|out - ref| <= m * max|naive - ref|\n"
        "+ floor  with no NaN, where naive is a plain attention in the same\n"
        "precision, m = 2 for O/LSE and 3 for gradients, and floor =\n"
        "(2u + 2u32)*max|ref| + K*u32*(1 + max|LSE|) (times max|ref| except for the\n"
        "LSE; K = 3 forward, 6 backward), u the unit roundoff of the stored output\n"
        "(2^-24 fp32, 2^-11 fp16, 2^-8 bf16), u32 = 2^-24 (common/check_rule.h).\n"
        "Prints PASS and exits 0, or FAIL and exits 1.\n"
        "\n"
        "device:\n"
        "  --backend B       " FMSA_BACKEND_NAMES " (default auto: best usable device)\n"
        "  --device N        device index within the backend; with auto, the index in\n"
        "                    `flashmsa devices` (default 0)\n"
        "  --threads N       OpenMP threads for the CPU backend, N >= 1 (default: all)\n"
        "problem (defaults: fp32, batch 2, heads 8, seqlen 1024, dim 128, causal):\n"
        "  --dtype T         fp32|fp16|bf16\n"
        "  --batch N\n"
        "  --seqlen N        sets both --seqlen-q and --seqlen-k\n"
        "  --seqlen-q N, --seqlen-k N\n"
        "  --heads N         query heads\n"
        "  --heads-kv N      key/value heads, divides --heads (GQA/MQA; default = heads)\n"
        "  --dim N           head dim of q and k (D), multiple of 8 in [8, 576]\n"
        "  --dim-v N         head dim of v, o, dout, dv (Dv), multiple of 8 in [8, 576]\n"
        "                    (default = --dim; MLA uses 192/128 and 576/512)\n"
        "  --sinks S         attention sinks: 'random' (one logit per head, uniform in\n"
        "                    [-2, 4], from the seed) or one logit X for every head; the\n"
        "                    backward then also writes and checks dsink\n"
        "  --causal          causal mask, bottom-right aligned (default unless --window)\n"
        "  --no-causal       no causal mask\n"
        "  --window L,R      sliding window, -1 = unlimited on that side; replaces the\n"
        "                    default causal mask (with --causal too, R must be 0 or -1)\n"
        "  --softcap X       tanh soft-capping of scores (0 = off)\n"
        "  --no-backward     forward only\n"
        "  --seed N          input seed (default 1)\n"
        "timing and check:\n"
        "  --warmup N        untimed runs of each pass first (default 1: the first call\n"
        "                    may compile kernels, e.g. OpenCL)\n"
        "  --repeat N        time N runs of each pass and report the median (default %d)\n"
        "  --check-rows N    check N sampled rows instead of every element (dK/dV are\n"
        "                    then not checked); default: every element up to %.0e forward\n"
        "                    FLOPs, %d sampled rows above\n"
        "  --full-check      always check every element\n",
        CLI_RUN_DEFAULT_REPEAT, CLI_RUN_FULL_CHECK_MAX_FLOPS, CLI_RUN_SAMPLED_ROWS);
}

typedef struct cli_run_opts {
    cli_device_opts dev;
    cli_shape shape;
    uint64_t seed;
    int warmup;
    int repeat;
    int check_rows; /* 0 = automatic */
    int full_check;
} cli_run_opts;

/* The library's rules on the problem, checked here so that a bad option is
 * reported in the options' words before anything is printed or allocated
 * (the library would name desc/tensor fields, after the device line). */
static int cli_run_check_problem(const cli_shape *s, int window_given) {
    if (s->head_dim_v != 0 &&
        (s->head_dim_v < FMSA_HEAD_DIM_MIN || s->head_dim_v > FMSA_HEAD_DIM_MAX ||
         s->head_dim_v % FMSA_HEAD_DIM_MULTIPLE != 0)) {
        fprintf(stderr,
                "flashmsa run: --dim-v %lld: the value head dim must be a multiple of %d in "
                "[%d, %d]\n",
                (long long)s->head_dim_v, FMSA_HEAD_DIM_MULTIPLE, FMSA_HEAD_DIM_MIN,
                FMSA_HEAD_DIM_MAX);
        return -1;
    }
    if (s->head_dim < FMSA_HEAD_DIM_MIN || s->head_dim > FMSA_HEAD_DIM_MAX ||
        s->head_dim % FMSA_HEAD_DIM_MULTIPLE != 0) {
        fprintf(stderr, "flashmsa run: --dim %lld: the head dim must be a multiple of %d in [%d, %d]\n",
                (long long)s->head_dim, FMSA_HEAD_DIM_MULTIPLE, FMSA_HEAD_DIM_MIN,
                FMSA_HEAD_DIM_MAX);
        return -1;
    }
    if (s->heads_q % s->heads_kv != 0) {
        fprintf(stderr,
                "flashmsa run: --heads %lld is not a multiple of --heads-kv %lld (each key/value "
                "head serves the same number of query heads)\n",
                (long long)s->heads_q, (long long)s->heads_kv);
        return -1;
    }
    if (window_given && s->causal && s->window_right > 0) {
        fprintf(stderr,
                "flashmsa run: --window %lld,%lld contradicts --causal (which means a right "
                "window of 0): give R = 0 or -1, or --no-causal\n",
                (long long)s->window_left, (long long)s->window_right);
        return -1;
    }
    return 0;
}

/* Returns 1 to run, 0 after --help, -1 on a usage error. */
static int cli_run_parse(int argc, char **argv, cli_run_opts *o) {
    cli_args a = cli_args_begin(argc, argv, 2);
    int64_t v, sq = -1, sk = -1, hkv = -1;
    int causal_given = 0, window_given = 0;
    cli_shape *s = &o->shape;

    memset(o, 0, sizeof *o);
    o->dev.backend = FMSA_BACKEND_AUTO;
    s->dtype = FMSA_DTYPE_F32;
    s->batch = 2;
    s->heads_q = 8;
    s->head_dim = 128;
    s->causal = 1;
    s->window_left = s->window_right = -1;
    s->backward = 1;
    o->seed = 1;
    o->warmup = 1;
    o->repeat = CLI_RUN_DEFAULT_REPEAT;
    sq = sk = 1024;

    while (cli_args_next(&a)) {
        int r = cli_device_option(&a, &o->dev);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            cli_run_help();
            return 0;
        } else if (cli_flag(&a, "--causal")) {
            s->causal = 1;
            causal_given = 1;
        } else if (cli_flag(&a, "--no-causal")) {
            s->causal = 0;
            causal_given = 1;
        } else if (cli_flag(&a, "--no-backward")) {
            s->backward = 0;
        } else if (cli_flag(&a, "--full-check")) {
            o->full_check = 1;
        } else if (cli_value(&a, "--dtype")) {
            if (a.error || cli_parse_dtype("--dtype", a.value, &s->dtype)) return -1;
        } else if (cli_value(&a, "--batch")) {
            if (a.error || cli_parse_i64("--batch", a.value, 1, 1 << 20, &s->batch)) return -1;
        } else if (cli_value(&a, "--seqlen")) {
            if (a.error || cli_parse_i64("--seqlen", a.value, 1, 1 << 26, &sq)) return -1;
            sk = sq;
        } else if (cli_value(&a, "--seqlen-q")) {
            if (a.error || cli_parse_i64("--seqlen-q", a.value, 1, 1 << 26, &sq)) return -1;
        } else if (cli_value(&a, "--seqlen-k")) {
            if (a.error || cli_parse_i64("--seqlen-k", a.value, 1, 1 << 26, &sk)) return -1;
        } else if (cli_value(&a, "--heads")) {
            if (a.error || cli_parse_i64("--heads", a.value, 1, 1 << 16, &s->heads_q)) return -1;
        } else if (cli_value(&a, "--heads-kv")) {
            if (a.error || cli_parse_i64("--heads-kv", a.value, 1, 1 << 16, &hkv)) return -1;
        } else if (cli_value(&a, "--dim")) {
            if (a.error || cli_parse_i64("--dim", a.value, 1, 4096, &s->head_dim)) return -1;
        } else if (cli_value(&a, "--dim-v")) {
            if (a.error || cli_parse_i64("--dim-v", a.value, 1, 4096, &s->head_dim_v)) return -1;
        } else if (cli_value(&a, "--sinks")) {
            if (a.error || cli_parse_sinks("--sinks", a.value, &s->sinks, &s->sink_value))
                return -1;
        } else if (cli_value(&a, "--window")) {
            if (a.error ||
                cli_parse_window("--window", a.value, &s->window_left, &s->window_right))
                return -1;
            window_given = 1;
        } else if (cli_value(&a, "--softcap")) {
            if (a.error || cli_parse_float("--softcap", a.value, 0.0f, 1e6f, &s->softcap))
                return -1;
        } else if (cli_value(&a, "--seed")) {
            if (a.error || cli_parse_i64("--seed", a.value, 0, INT64_MAX, &v)) return -1;
            o->seed = (uint64_t)v;
        } else if (cli_value(&a, "--warmup")) {
            if (a.error || cli_parse_i64("--warmup", a.value, 0, 1000, &v)) return -1;
            o->warmup = (int)v;
        } else if (cli_value(&a, "--repeat")) {
            if (a.error || cli_parse_i64("--repeat", a.value, 1, 1000, &v)) return -1;
            o->repeat = (int)v;
        } else if (cli_value(&a, "--check-rows")) {
            if (a.error || cli_parse_i64("--check-rows", a.value, 1, 1 << 20, &v)) return -1;
            o->check_rows = (int)v;
        } else {
            cli_unknown(&a, "run");
            return -1;
        }
    }
    if (a.error) return -1;
    /* A window is a mask of its own: it replaces the default causal mask
     * unless --causal was asked for too (then window_right must be 0 or -1). */
    if (window_given && !causal_given) s->causal = 0;
    s->seqlen_q = sq;
    s->seqlen_k = sk;
    s->heads_kv = hkv > 0 ? hkv : s->heads_q;
    return cli_run_check_problem(s, window_given) ? -1 : 1;
}

static int cli_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs `warmup` untimed times, then poisons and runs `repeat` timed times;
 * returns the median seconds (< 0 on error). */
static double cli_run_timed(cli_workload *w, fmsa_pass pass, int warmup, int repeat) {
    double *t = malloc(sizeof(double) * (size_t)repeat), med;
    int r;
    if (t == NULL) return -1.0;
    for (r = 0; r < warmup; r++) {
        if (cli_workload_run(w, pass) != FMSA_SUCCESS) {
            free(t);
            return -1.0;
        }
    }
    for (r = 0; r < repeat; r++) {
        double t0;
        /* poison outside the timed region: an unwritten element stays NaN */
        if (cli_workload_poison(w, pass) != FMSA_SUCCESS) break;
        t0 = cli_now();
        if (cli_workload_run(w, pass) != FMSA_SUCCESS) break;
        t[r] = cli_now() - t0;
    }
    if (r < repeat) {
        free(t);
        return -1.0;
    }
    qsort(t, (size_t)repeat, sizeof(double), cli_cmp_double);
    med = repeat % 2 ? t[repeat / 2] : 0.5 * (t[repeat / 2 - 1] + t[repeat / 2]);
    free(t);
    return med;
}

static void cli_run_print_time(const char *pass, double sec, double flops) {
    printf("%-9s %10.3f ms  %9.2f GFLOP/s\n", pass, sec * 1e3, flops / sec * 1e-9);
}

int cmd_run(int argc, char **argv) {
    cli_run_opts o;
    fmsa_context *ctx = NULL;
    fmsa_device_info info;
    cli_workload w;
    fmsa_problem pf, pb;
    cli_err err[CLI_ERR_COUNT];
    double t_fwd, t_bwd = 0.0, t_check;
    char desc[160];
    int rc, i, rows;

    rc = cli_run_parse(argc, argv, &o);
    if (rc <= 0) return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
    if (cli_context_open(o.dev.backend, o.dev.device, o.dev.threads, &ctx, &info))
        return CLI_EXIT_ERROR;

    cli_shape_describe(&o.shape, desc, sizeof desc);
    printf("device    %s:%d  %s  (%s)\n", fmsa_backend_name(info.backend), info.index,
           info.name, info.arch);
    printf("problem   %s, %s\n", desc, o.shape.backward ? "forward + backward" : "forward");
    fflush(stdout);

    if (cli_workload_create(ctx, &o.shape, o.seed, &w) != FMSA_SUCCESS) {
        fmsa_context_destroy(ctx);
        return CLI_EXIT_ERROR;
    }
    rc = CLI_EXIT_ERROR;
    t_fwd = cli_run_timed(&w, FMSA_PASS_FORWARD, o.warmup, o.repeat);
    if (t_fwd < 0 || cli_workload_fetch(&w, FMSA_PASS_FORWARD)) goto out;
    cli_run_print_time("forward", t_fwd, cli_shape_flops(&o.shape, FMSA_PASS_FORWARD));
    if (o.shape.backward) {
        t_bwd = cli_run_timed(&w, FMSA_PASS_BACKWARD, o.warmup, o.repeat);
        if (t_bwd < 0 || cli_workload_fetch(&w, FMSA_PASS_BACKWARD)) goto out;
        cli_run_print_time("backward", t_bwd, cli_shape_flops(&o.shape, FMSA_PASS_BACKWARD));
    }
    printf("          (%s%d timed run%s after %d warm-up run%s)\n", o.repeat > 1 ? "median of " : "",
           o.repeat, o.repeat > 1 ? "s" : "", o.warmup, o.warmup == 1 ? "" : "s");
    fflush(stdout);

    if (cli_workload_host_problem(&w, FMSA_PASS_FORWARD, &pf)) goto out;
    if (o.shape.backward && cli_workload_host_problem(&w, FMSA_PASS_BACKWARD, &pb)) goto out;
    rows = o.check_rows;
    if (rows == 0 && !o.full_check &&
        cli_shape_flops(&o.shape, FMSA_PASS_FORWARD) > CLI_RUN_FULL_CHECK_MAX_FLOPS)
        rows = CLI_RUN_SAMPLED_ROWS;
    if (o.full_check) rows = 0;
    t_check = cli_now();
    if (rows > 0) {
        if (cli_check_rows(&pf, o.shape.backward ? &pb : NULL, rows, o.seed, err)) goto out;
        printf("check     %d sampled rows vs fp64 reference (dK/dV need every row: not checked)\n",
               rows);
    } else {
        if (cli_check_full(&pf, o.shape.backward ? &pb : NULL, err)) goto out;
        printf("check     every element vs fp64 reference\n");
    }
    printf("          %-5s %11s %11s %11s  %s\n", "", "max err", "naive err", "tolerance",
           "");
    for (i = 0; i < CLI_ERR_COUNT; i++) {
        if (err[i].checked == 0) continue;
        printf("          %-5s %11.3e %11.3e %11.3e  %s", err[i].name, err[i].err, err[i].naive,
               err[i].tol, err[i].ok ? "ok" : "FAIL");
        if (err[i].nan_count > 0) printf(" (%lld NaN or unwritten)", (long long)err[i].nan_count);
        printf("\n");
    }
    printf("          (check took %.1f s)\n", cli_now() - t_check);
    rc = cli_check_ok(err) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    printf("%s\n", rc == CLI_EXIT_OK ? "PASS" : "FAIL");

out:
    cli_workload_destroy(&w);
    fmsa_context_destroy(ctx);
    return rc;
}
