/* test_kernels.c - every kernel level this CPU supports against the portable one, same inputs.
 *
 * Tolerances: a dot product of n terms summed in another order differs by a few ulps of the sum
 * of |terms|, so outputs are compared to 2e-6 * n^0.5 * sum|w x| (plus a tiny absolute floor);
 * widening BF16 and Q8_0/Q4_0 block products are exact, so those compare the same way.
 */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"
#include "llama_internal.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frand() * scale;
}
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* each level above portable that the CPU has, in turn; the callback compares with portable */
#define FOR_EACH_LEVEL(lv)                                                                 \
    for (int lv = WB_ISA_AVX2; lv <= (int)wb_isa_best(); lv++)

static int close_enough(float got, float want, double mag, int n) {
    double tol = 2e-6 * sqrt((double)n) * mag + 1e-6;
    return fabs((double)got - want) <= tol;
}

static void the_probe_reports_a_consistent_level(void) {
    const wb_cpu_features *f = wb_cpu();
    wb_isa best = wb_isa_best();
    if (best >= WB_ISA_AVX2) CHECK(f->avx2 && f->fma);
    if (best >= WB_ISA_AVX512) CHECK(f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq);
    wb_isa old = wb_isa_limit(WB_ISA_PORTABLE);
    CHECK(wb_isa_current() == WB_ISA_PORTABLE);
    CHECK(wb_kt()->isa == WB_ISA_PORTABLE);
    wb_isa_limit(old);
    CHECK(wb_isa_current() == best || getenv("WB_KERNELS"));
    CHECK(strstr(wb_kernels_describe(), wb_isa_name(wb_isa_current())) != NULL);
    printf("     %s\n", wb_kernels_describe());
}

/* y = W x for the shapes a model has and the awkward ones (odd widths, ranges not a multiple of
 * the row blocks, bias, accumulate). */
static void f32_gemv_and_batch_match_portable(void) {
    static const int shapes[][3] = {{64, 64, 1}, {37, 29, 3}, {896, 133, 5}, {128, 72, 33},
                                    {100, 17, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int in = shapes[s][0], rows = shapes[s][1], nb = shapes[s][2];
        float *W = malloc(sizeof(float) * (size_t)in * rows), *X = malloc(sizeof(float) * (size_t)in * nb);
        float *b = malloc(sizeof(float) * rows), *Y0 = malloc(sizeof(float) * (size_t)rows * nb);
        float *Y1 = malloc(sizeof(float) * (size_t)rows * nb), *Y2 = malloc(sizeof(float) * (size_t)rows * nb);
        fill(W, (size_t)in * rows, 1.0f);
        fill(X, (size_t)in * nb, 1.0f);
        fill(b, rows, 1.0f);
        const int r0 = rows > 8 ? 3 : 0, r1 = rows;
        for (int acc = 0; acc < 2; acc++) {
            fill(Y0, (size_t)rows * nb, 1.0f);
            memcpy(Y1, Y0, sizeof(float) * (size_t)rows * nb);
            memcpy(Y2, Y0, sizeof(float) * (size_t)rows * nb);
            wb_isa old = wb_isa_limit(WB_ISA_PORTABLE);
            wb_gemv_batch_forward(Y0, rows, X, in, nb, W, acc ? NULL : b, in, r0, r1, acc);
            wb_isa_limit(old);
            FOR_EACH_LEVEL(lv) {
                float *Yb = malloc(sizeof(float) * (size_t)rows * nb);
                memcpy(Yb, Y1, sizeof(float) * (size_t)rows * nb);
                wb_isa o = wb_isa_limit((wb_isa)lv);
                wb_gemv_batch_forward(Yb, rows, X, in, nb, W, acc ? NULL : b, in, r0, r1, acc);
                memcpy(Y2, Y1, sizeof(float) * (size_t)rows * nb);
                for (int j = 0; j < nb; j++)
                    wb_gemv_forward(Y2 + (size_t)j * rows, X + (size_t)j * in, W, acc ? NULL : b,
                                    in, r0, r1, acc);
                wb_isa_limit(o);
                int bad = 0, nonident = 0;
                for (int j = 0; j < nb; j++)
                    for (int r = 0; r < rows; r++) {
                        double mag = fabs(Y1[(size_t)j * rows + r]) + (acc ? 0 : fabs(b[r]));
                        for (int i = 0; i < in; i++) mag += fabs(W[(size_t)r * in + i] * X[(size_t)j * in + i]);
                        size_t k = (size_t)j * rows + r;
                        bad += !close_enough(Yb[k], Y0[k], mag, in);
                        nonident += Yb[k] != Y2[k]; /* a batch row sums as that input alone */
                    }
                CHECK_MSG(!bad, "%s in=%d rows=%d nb=%d acc=%d: %d outputs off", wb_isa_name(lv), in,
                          rows, nb, acc, bad);
                CHECK_MSG(!nonident, "%s: %d batch outputs differ from the single GEMV", wb_isa_name(lv),
                          nonident);
                free(Yb);
            }
        }
        free(W), free(X), free(b), free(Y0), free(Y1), free(Y2);
    }
}

/* 1 where the level now in use has a BF16 route that rounds the activations (vdpbf16ps), and so
 * a BF16 GEMV that rounds them too (wb_gemv_bf16_forward) */
static int level_rounds(void) { return wb_kt()->bf16_prompt && wb_kt()->bf16_prompt->xround; }

static void round_all(float *d, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = wb_bf16_round(x[i]);
}

/* BF16: decode (nb = 1, the 4-stream kernels), prefill shapes (GEMM), tails everywhere; a level
 * whose route rounds the activations is compared with the portable GEMV over rounded inputs. */
static void bf16_gemv_and_gemm_match_portable(void) {
    static const int shapes[][3] = {{896, 136, 1}, {896, 130, 1}, {896, 64, 44}, {100, 9, 7},
                                    {1040, 13, 6}, {2100, 21, 13}, {48, 6, 1}, {32, 5, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int in = shapes[s][0], rows = shapes[s][1], nb = shapes[s][2];
        uint16_t *W = malloc(2 * (size_t)in * rows);
        float *X = malloc(sizeof(float) * (size_t)in * nb), *b = malloc(sizeof(float) * rows);
        float *Y0 = malloc(sizeof(float) * (size_t)rows * nb), *Yi = malloc(sizeof(float) * (size_t)rows * nb);
        float *Y1 = malloc(sizeof(float) * (size_t)rows * nb);
        float *Xr = malloc(sizeof(float) * (size_t)in * nb);
        for (size_t i = 0; i < (size_t)in * rows; i++) W[i] = to_bf16(frand());
        fill(X, (size_t)in * nb, 1.0f);
        round_all(Xr, X, (size_t)in * nb);
        fill(b, rows, 1.0f);
        fill(Yi, (size_t)rows * nb, 1.0f);
        const int r0 = rows > 8 ? 1 : 0;
        for (int acc = 0; acc < 2; acc++) {
            FOR_EACH_LEVEL(lv) {
                memcpy(Y1, Yi, sizeof(float) * (size_t)rows * nb);
                wb_isa o = wb_isa_limit((wb_isa)lv);
                const int rnd = level_rounds();
                wb_gemv_bf16_forward(Y1, rows, X, in, nb, W, acc ? b : NULL, in, r0, rows, acc);
                wb_isa_limit(WB_ISA_PORTABLE);
                memcpy(Y0, Yi, sizeof(float) * (size_t)rows * nb);
                wb_gemv_bf16_forward(Y0, rows, rnd ? Xr : X, in, nb, W, acc ? b : NULL, in, r0, rows, acc);
                wb_isa_limit(o);
                int bad = 0;
                for (int j = 0; j < nb; j++)
                    for (int r = 0; r < rows; r++) {
                        size_t k = (size_t)j * rows + r;
                        if (r < r0) { /* rows outside the range are untouched */
                            bad += Y1[k] != Yi[k];
                            continue;
                        }
                        double mag = fabs(Yi[k]) + fabs(b[r]);
                        for (int i = 0; i < in; i++)
                            mag += fabs(from_bf16(W[(size_t)r * in + i]) * X[(size_t)j * in + i]);
                        bad += !close_enough(Y1[k], Y0[k], mag, in);
                    }
                CHECK_MSG(!bad, "%s in=%d rows=%d nb=%d acc=%d: %d outputs off", wb_isa_name(lv), in,
                          rows, nb, acc, bad);
            }
        }
        free(W), free(X), free(b), free(Y0), free(Yi), free(Y1), free(Xr);
    }
}

/* Where the chosen BF16 route rounds the activations (vdpbf16ps), the GEMV rounds them the same
 * way: the route's xround gives wb_bf16_round's bits on values at every edge (ties both ways,
 * denormals, the largest finite values, infinities, NaN; row tails, a stride past in), and
 * wb_gemv_bf16_forward gives the level's kernel's bits over those rounded rows (over the raw
 * rows where the route does not round). */
static void bf16_gemv_rounds_where_the_route_does(void) {
    const wb_isa old = wb_isa_limit(WB_ISA_COUNT - 1);
    const wb_kernel_table *t = wb_kt();
    for (int v = 0; v < 3; v++)
        if (t->bf16_route[v]) CHECK((t->bf16_route[v]->xround != NULL) == t->bf16_route[v]->rounds);
    const wb_gemm_bf16_route *d = t->bf16_route[1];
    enum { IN = 37, NB = 5, LDX = 41, ROWS = 19 };
    static const uint32_t edge[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f80ffffu, 0x00000001u,
                                    0x807fffffu, 0x00800000u, 0x7f7fffffu, 0xff7f8000u, 0x7f7f7fffu,
                                    0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffa00000u,
                                    0x80000000u, 0x00000000u, 0x3effff80u};
    float *X = malloc(sizeof(float) * LDX * NB), *D = malloc(sizeof(float) * IN * NB);
    fill(X, (size_t)LDX * NB, 3.0f);
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) memcpy(&X[i * 7 % (LDX * NB)], &edge[i], 4);
    if (d) {
        d->xround(D, X, LDX, NB, IN);
        int bad = 0;
        for (int j = 0; j < NB; j++)
            for (int i = 0; i < IN; i++) {
                const float want = wb_bf16_round(X[(size_t)j * LDX + i]);
                bad += memcmp(&want, &D[(size_t)j * IN + i], 4) != 0;
            }
        CHECK_MSG(!bad, "%s: %d values rounded otherwise than wb_bf16_round", d->name, bad);
    } else {
        printf("     skip: vdpbf16ps rounding (the CPU has no AVX512_BF16 at the AVX-512 level)\n");
    }
    /* the GEMV's inputs: finite values only, so a Y compares by its bits */
    fill(X, (size_t)LDX * NB, 3.0f);
    uint16_t *W = malloc(2 * (size_t)IN * ROWS);
    for (size_t i = 0; i < (size_t)IN * ROWS; i++) W[i] = to_bf16(frand());
    float *Y = malloc(sizeof(float) * ROWS * NB), *Yk = malloc(sizeof(float) * ROWS * NB);
    for (int j = 0; j < NB; j++)
        for (int i = 0; i < IN; i++)
            D[(size_t)j * IN + i] = level_rounds() ? wb_bf16_round(X[(size_t)j * LDX + i]) : X[(size_t)j * LDX + i];
    for (int nb = 1; nb <= NB; nb += NB - 1) {
        wb_gemv_bf16_forward(Y, ROWS, X, LDX, nb, W, NULL, IN, 2, ROWS, 0);
        t->gemv_bf16(Yk, ROWS, D, IN, nb, W, NULL, IN, 2, ROWS, 0);
        int bad = 0;
        for (int j = 0; j < nb; j++) bad += memcmp(Y + (size_t)j * ROWS + 2, Yk + (size_t)j * ROWS + 2, 4 * (ROWS - 2)) != 0;
        CHECK_MSG(!bad, "nb=%d (%s): %d rows differ from the kernel over %s inputs", nb,
                  t->bf16_prompt->name, bad, level_rounds() ? "rounded" : "raw");
    }
    free(X), free(D), free(W), free(Y), free(Yk);
    wb_isa_limit(old);
}

/* A row of a batch or a prompt gets the bits it gets alone (batched decode's promise). The
 * AVX2 level's own batch kernel is covered by test_llama's batched-steps tests. */
static void bf16_batch_rows_equal_alone(void) {
    static const int shapes[][3] = {{896, 37, 13}, {2100, 9, 7}, {40, 6, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int in = shapes[s][0], rows = shapes[s][1], nb = shapes[s][2];
        uint16_t *W = malloc(2 * (size_t)in * rows);
        float *X = malloc(sizeof(float) * (size_t)in * nb), *b = malloc(sizeof(float) * rows);
        float *Yb = malloc(sizeof(float) * (size_t)rows * nb), *Y1 = malloc(sizeof(float) * rows);
        for (size_t i = 0; i < (size_t)in * rows; i++) W[i] = to_bf16(frand());
        fill(X, (size_t)in * nb, 1.0f);
        fill(b, rows, 1.0f);
        for (int lv = 0; lv <= (int)wb_isa_best(); lv++) {
            if (lv == WB_ISA_AVX2) continue;
            wb_isa o = wb_isa_limit((wb_isa)lv);
            for (int acc = 0; acc < 2; acc++) {
                for (int i = 0; i < rows * nb; i++) Yb[i] = (float)i;
                wb_gemv_bf16_forward(Yb, rows, X, in, nb, W, b, in, 2, rows, acc);
                int diff = 0;
                for (int j = 0; j < nb; j++) {
                    for (int r = 0; r < rows; r++) Y1[r] = (float)(j * rows + r);
                    wb_gemv_bf16_forward(Y1, rows, X + (size_t)j * in, in, 1, W, b, in, 2, rows, acc);
                    diff += memcmp(Y1, Yb + (size_t)j * rows, sizeof(float) * rows) != 0;
                }
                CHECK_MSG(!diff, "%s in=%d nb=%d acc=%d: %d inputs differ from alone", wb_isa_name(lv),
                          in, nb, acc, diff);
            }
            wb_isa_limit(o);
        }
        free(W), free(X), free(b), free(Yb), free(Y1);
    }
}

/* The vdpbf16ps route's Y (rows r0 .. rows - 1 of nb inputs, the rows before r0 untouched):
 * (a) against a double-precision sum of bf16(x) * w (the route rounds the activations to BF16;
 * the weights are BF16; the products are exact in FP32 and the sums FP32, so the dot-product
 * tolerance holds as for any other order), and (b) against the widening route's (portable's)
 * Y0: round to nearest even moves x by at most 2^-9 |x| (8 significant bits), so the two sums
 * differ by at most 2^-9 sum |w x| plus each one's FP32 rounding (the tolerance); 2^-8 bounds
 * the first with room, and a route computing anything else is far outside it. */
static int dot_route_off(const float *Y, const float *Y0, const float *Yi, const float *Wf,
                         const float *X, const float *bb, int acc, int in, int rows, int nb,
                         int r0) {
    int bad = 0;
    for (int j = 0; j < nb; j++)
        for (int r = 0; r < rows; r++) {
            const size_t k = (size_t)j * rows + r;
            if (r < r0) {
                bad += Y[k] != Yi[k];
                continue;
            }
            double s = (acc ? Yi[k] : 0.0) + (bb ? bb[r] : 0.0), mag = fabs(s), wx = 0.0;
            for (int i = 0; i < in; i++) {
                const double w = Wf[(size_t)r * in + i], x = X[(size_t)j * in + i];
                const double t = w * from_bf16(to_bf16((float)x));
                s += t, mag += fabs(t), wx += fabs(w * x);
            }
            bad += !close_enough(Y[k], (float)s, mag, in);
            bad += !(fabs((double)Y[k] - Y0[k]) <= 0x1p-8 * wx + 2e-6 * sqrt((double)in) * mag + 1e-6);
        }
    return bad;
}

/* The outputs of a route that sums exact products in another order (AMX: the inputs split into
 * three BF16 parts): within the dot-product tolerance of the double-precision sum, as portable's
 * chain is, and the rows outside [r0, rows) untouched. */
static int order_route_off(const float *Y, const float *Yi, const float *Wf, const float *X,
                           const float *bb, int acc, int in, int rows, int nb, int r0) {
    int bad = 0;
    for (int j = 0; j < nb; j++)
        for (int r = 0; r < rows; r++) {
            const size_t k = (size_t)j * rows + r;
            if (r < r0) {
                bad += Y[k] != Yi[k];
                continue;
            }
            double s = (acc ? Yi[k] : 0.0) + (bb ? bb[r] : 0.0), mag = fabs(s);
            for (int i = 0; i < in; i++) {
                const double t = (double)Wf[(size_t)r * in + i] * X[(size_t)j * in + i];
                s += t, mag += fabs(t);
            }
            bad += !close_enough(Y[k], (float)s, mag, in);
        }
    return bad;
}

/* floats of P that every route of every level may take for nb rows of in values */
static size_t xp_floats(int in, int nb) {
    size_t row = (size_t)in;
    const wb_isa old = wb_isa_limit(WB_ISA_COUNT - 1);
    for (int lv = WB_ISA_PORTABLE; lv <= (int)wb_isa_best(); lv++) {
        wb_isa_limit((wb_isa)lv);
        for (int v = 0; v < 3; v++) {
            const wb_gemm_bf16_route *rt = wb_kt()->bf16_route[v];
            if (rt && rt->xrow(in) > row) row = rt->xrow(in);
        }
    }
    wb_isa_limit(old);
    return row * (size_t)nb;
}

/* The prompt GEMM (kernels_gemm.c) over F32 and BF16 weights: every level gives the portable
 * chain's bits (each output is one fused multiply-add chain in column order on every level),
 * which is within the dot-product tolerance of a double-precision sum; a row's outputs do not
 * depend on how many rows share the call or where the row sits (edge tiles, K blocks); rows
 * outside [r0, r1) are untouched. Shapes of real models (Qwen2.5-0.5B's 896 / 4864 widths,
 * TinyLM's 128 / 512, a K-blocked 4864 x 60) and awkward ones, every nb from 1 to 50.
 * BF16 runs each route of a level (kernels_gemm.c: widening + FMA everywhere, vdpbf16ps where
 * the CPU has AVX512_BF16, AMX tiles where it has AMX-BF16, whichever the CPU's choice put in
 * gemm_bf16): the widening route to portable's bits, the vdpbf16ps one within dot_route_off's
 * bounds, the AMX one within order_route_off's, and each route's packed, split and single-row
 * calls to its own unpacked call's bits. */
static void gemm_case(int in, int rows, int nb, int r0, int bf16, int *bad_out) {
    const size_t nw = (size_t)in * rows, ny = (size_t)rows * nb;
    float *Wf = malloc(sizeof(float) * nw), *X = malloc(sizeof(float) * (size_t)in * nb);
    uint16_t *Wh = malloc(2 * nw);
    float *b = malloc(sizeof(float) * rows), *Yi = malloc(sizeof(float) * ny);
    float *Y0 = malloc(sizeof(float) * ny), *Y1 = malloc(sizeof(float) * ny);
    const size_t np = xp_floats(in, nb);
    float *Y2 = malloc(sizeof(float) * ny), *P = malloc(sizeof(float) * np);
    for (size_t i = 0; i < nw; i++) {
        Wh[i] = to_bf16(frand());
        Wf[i] = bf16 ? from_bf16(Wh[i]) : frand();
    }
    fill(X, (size_t)in * nb, 1.0f);
    fill(b, rows, 1.0f);
    fill(Yi, ny, 1.0f);
    const wb_isa old = wb_isa_limit(WB_ISA_COUNT - 1);
    for (int acc = 0; acc < 2; acc++) {
        const float *bb = acc ? NULL : b;
        memcpy(Y0, Yi, sizeof(float) * ny);
        wb_isa_limit(WB_ISA_PORTABLE);
        if (bf16) wb_kt()->gemm_bf16(Y0, rows, X, in, nb, Wh, bb, in, r0, rows, acc);
        else wb_kt()->gemm_f32(Y0, rows, X, in, nb, Wf, bb, in, r0, rows, acc);
        int bad = 0, off = 0, moved = 0, alone = 0, packed = 0, dot = 0;
        for (int j = 0; j < nb; j++) /* portable against a double-precision sum */
            for (int r = 0; r < rows; r++) {
                const size_t k = (size_t)j * rows + r;
                if (r < r0) {
                    off += Y0[k] != Yi[k];
                    continue;
                }
                double s = (acc ? Yi[k] : 0.0) + (bb ? bb[r] : 0.0), mag = fabs(s);
                for (int i = 0; i < in; i++) {
                    const double t = (double)Wf[(size_t)r * in + i] * X[(size_t)j * in + i];
                    s += t, mag += fabs(t);
                }
                bad += !close_enough(Y0[k], (float)s, mag, in);
            }
        for (int lv = WB_ISA_PORTABLE; lv <= (int)wb_isa_best(); lv++) {
            /* inputs packed once (in two pieces, as two threads share them out), then read by
             * the packed call: the unpacked call's bits */
            wb_isa_limit((wb_isa)lv);
            for (int v = 0; v < (bf16 ? 3 : 1); v++) {
                const wb_gemm_bf16_route *rt = bf16 ? wb_kt()->bf16_route[v] : NULL;
                if (bf16 && !rt) continue;
                const int nblk = (nb + wb_kt()->gemm_mr - 1) / wb_kt()->gemm_mr;
                for (size_t i = 0; i < np; i++) P[i] = NAN;
                if (bf16) {
                    rt->xpack(P, X, in, nb, in, nblk / 2, nblk + 3, 1);
                    rt->xpack(P, X, in, nb, in, 0, nblk / 2, 1);
                } else {
                    wb_kt()->gemm_xpack(P, X, in, nb, in, nblk / 2, nblk + 3, 0);
                    wb_kt()->gemm_xpack(P, X, in, nb, in, 0, nblk / 2, 0);
                }
                memcpy(Y1, Yi, sizeof(float) * ny);
                if (bf16) rt->gemm_packed(Y1, rows, P, nb, Wh, bb, in, r0, rows, acc);
                else wb_kt()->gemm_f32_packed(Y1, rows, P, nb, Wf, bb, in, r0, rows, acc);
                if (!bf16 || rt->exact) {
                    packed += memcmp(Y1, Y0, sizeof(float) * ny) != 0;
                } else {
                    memcpy(Y2, Yi, sizeof(float) * ny);
                    rt->gemm(Y2, rows, X, in, nb, Wh, bb, in, r0, rows, acc);
                    packed += memcmp(Y1, Y2, sizeof(float) * ny) != 0;
                }
                /* F32 weights packed once into panels (a small model's load): whole, and split at
                 * a panel edge or inside a panel (the part not starting a panel packs W itself) */
                if (!bf16 && wb_kt()->gemm_f32_panels) {
                    const int NR = wb_kt()->gemm_nr;
                    float *Wp = aligned_alloc(64, ((wb_kt()->gemm_f32_panels_size(rows, in) * 4 + 63) & ~(size_t)63));
                    CHECK(Wp != NULL);
                    if (!Wp) continue;
                    wb_kt()->gemm_f32_panels(Wp, Wf, rows, in);
                    const int sp = r0 % NR == 0 ? r0 + (rows - r0) / 2
                                                : ((r0 / NR + 1) * NR < rows ? (r0 / NR + 1) * NR : rows);
                    memcpy(Y1, Yi, sizeof(float) * ny);
                    wb_kt()->gemm_f32_prepacked(Y1, rows, X, in, nb, Wp, Wf, bb, in, r0, rows, acc);
                    memcpy(Y2, Yi, sizeof(float) * ny);
                    wb_kt()->gemm_f32_prepacked(Y2, rows, X, in, nb, Wp, Wf, bb, in, r0, sp, acc);
                    wb_kt()->gemm_f32_prepacked(Y2, rows, X, in, nb, Wp, Wf, bb, in, sp, rows, acc);
                    packed += (memcmp(Y1, Y0, sizeof(float) * ny) != 0) +
                              (memcmp(Y2, Y0, sizeof(float) * ny) != 0);
                    /* the panels over the inputs packed above, split the same way */
                    CHECK(wb_kt()->gemm_f32_prepacked_packed != NULL);
                    if (wb_kt()->gemm_f32_prepacked_packed) {
                        memcpy(Y2, Yi, sizeof(float) * ny);
                        wb_kt()->gemm_f32_prepacked_packed(Y2, rows, P, nb, Wp, Wf, bb, in, r0, sp, acc);
                        wb_kt()->gemm_f32_prepacked_packed(Y2, rows, P, nb, Wp, Wf, bb, in, sp, rows, acc);
                        packed += memcmp(Y2, Y0, sizeof(float) * ny) != 0;
                    }
                    free(Wp);
                }
            }
        }
        for (int lv = WB_ISA_AVX2; lv <= (int)wb_isa_best(); lv++) {
            wb_isa_limit((wb_isa)lv);
            for (int v = 0; v < (bf16 ? 3 : 1); v++) {
                const wb_gemm_bf16_route *rt = bf16 ? wb_kt()->bf16_route[v] : NULL;
                if (bf16 && !rt) continue;
                memcpy(Y1, Yi, sizeof(float) * ny);
                if (bf16) rt->gemm(Y1, rows, X, in, nb, Wh, bb, in, r0, rows, acc);
                else wb_kt()->gemm_f32(Y1, rows, X, in, nb, Wf, bb, in, r0, rows, acc);
                if (!bf16 || rt->exact) moved += memcmp(Y1, Y0, sizeof(float) * ny) != 0;
                else if (rt->rounds) dot += dot_route_off(Y1, Y0, Yi, Wf, X, bb, acc, in, rows, nb, r0);
                else dot += order_route_off(Y1, Yi, Wf, X, bb, acc, in, rows, nb, r0);
                /* the rows from 1 on as a call of their own, and row nb - 1 alone */
                if (nb > 1) {
                    memcpy(Y2, Yi, sizeof(float) * ny);
                    if (bf16) {
                        rt->gemm(Y2 + rows, rows, X + in, in, nb - 1, Wh, bb, in, r0, rows, acc);
                        rt->gemm(Y2, rows, X, in, 1, Wh, bb, in, r0, rows, acc);
                    } else {
                        wb_kt()->gemm_f32(Y2 + rows, rows, X + in, in, nb - 1, Wf, bb, in, r0, rows, acc);
                        wb_kt()->gemm_f32(Y2, rows, X, in, 1, Wf, bb, in, r0, rows, acc);
                    }
                    alone += memcmp(Y2, Y1, sizeof(float) * ny) != 0;
                }
            }
        }
        wb_isa_limit(old);
        CHECK_MSG(!bad && !off && !moved && !alone && !packed && !dot,
                  "%s in=%d rows=%d nb=%d r0=%d acc=%d: %d off the double sum, %d outside the "
                  "range touched, %d levels not bit-equal to portable, %d split calls differ, %d "
                  "packed-input or prepacked-weight calls differ, %d vdpbf16ps / AMX outputs "
                  "outside their bounds",
                  bf16 ? "BF16" : "F32", in, rows, nb, r0, acc, bad, off, moved, alone, packed, dot);
        *bad_out += bad + off + moved + alone + packed + dot;
    }
    free(Wf), free(X), free(Wh), free(b), free(Yi), free(Y0), free(Y1), free(Y2);
    free(P);
}

static void prompt_gemm_matches_portable_bit_for_bit(void) {
    static const int shapes[][4] = {
        /* in, rows, nb, r0 */
        {896, 136, 44, 8},  {896, 70, 17, 3},   {4864, 40, 60, 0}, {128, 384, 96, 0},
        {512, 129, 48, 1},  {37, 29, 1, 0},     {29, 50, 50, 5},   {100, 33, 15, 2},
        {1000, 47, 3, 9},   {17, 1, 14, 0},     {16, 31, 29, 0},   {24, 16, 6, 0},
        /* more than 4 row blocks without K blocks: AVX-512 BF16 panels widened in the pack
         * (up to 4, 56 rows, they stay BF16 pairs widened in the tiles) */
        {896, 40, 130, 0},  {65, 33, 140, 1},
        /* AMX: K chunks with a short last one (1100 = 1024 + 76), and row ranges past one packed
         * block of weights (2048 wide: 256 rows a block) */
        {1100, 70, 20, 0},  {2048, 300, 37, 7}};
    int bad = 0;
    for (int bf16 = 0; bf16 < 2; bf16++) {
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], bf16, &bad);
        for (int nb = 1; nb <= 50 && !bad; nb++) gemm_case(67, 45, nb, 3, bf16, &bad);
    }
}

/* Short prompts (AVX-512, F32: up to 48 rows, the inputs in 16-row blocks and the weights read
 * in place, 8 outputs a tile; BF16 through the pair panels): every row count, with widths
 * around the 16-lane blocks (1, 15, 16, odd, 64, 65, 130 and Qwen2.5-0.5B's 896), ranges ending
 * inside a tile, fewer than 8 rows in all (the scalar chain), and ranges not starting a tile. */
static void short_prompt_gemm_matches_portable_at_every_row_count(void) {
    static const int shapes[][3] = {
        /* in, rows, r0 */
        {1, 9, 0}, {15, 7, 2}, {16, 8, 0}, {33, 17, 1}, {64, 19, 5}, {65, 12, 0}};
    /* wider rows (130, Qwen2.5-0.5B's 896) at the block edges and the 44-token prompt (the
     * time is there) */
    static const int qnb[] = {1, 15, 16, 17, 31, 32, 33, 44, 47, 48, 49};
    int bad = 0;
    for (int bf16 = 0; bf16 < 2; bf16++) {
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int nb = 1; nb <= 49 && !bad; nb++)
                gemm_case(shapes[s][0], shapes[s][1], nb, shapes[s][2], bf16, &bad);
        for (size_t i = 0; i < sizeof qnb / sizeof *qnb && !bad; i++) {
            gemm_case(130, 23, qnb[i], 7, bf16, &bad);
            gemm_case(896, 26, qnb[i], 3, bf16, &bad);
        }
    }
}

static void bf16_widening_is_exact_on_every_level(void) {
    enum { N = 77 };
    uint16_t h[N];
    float want[N], got[N];
    for (int i = 0; i < N; i++) h[i] = (uint16_t)(rng_state = rng_state * 6364136223846793005ull + 1) ;
    h[0] = 0x7f80, h[1] = 0xff80, h[2] = 0x0001, h[3] = 0x8000; /* inf, -inf, subnormal, -0 */
    for (int i = 0; i < N; i++) want[i] = from_bf16(h[i]);
    for (int lv = 0; lv <= (int)wb_isa_best(); lv++) {
        wb_isa o = wb_isa_limit((wb_isa)lv);
        wb_bf16_to_f32_forward(got, h, N);
        wb_isa_limit(o);
        CHECK_MSG(memcmp(got, want, sizeof got) == 0, "%s", wb_isa_name(lv));
    }
}

static void norms_softmax_gelu_swiglu_attention_match_portable(void) {
    enum { C = 200, P = 45, HS = 64, NQ = 9 };
    float x[C], add[C], w[C], bb[C], o0[C], o1[C], x0[C], x1[C];
    fill(x, C, 3.0f), fill(add, C, 1.0f), fill(w, C, 1.0f), fill(bb, C, 1.0f);
    float sm0[P], sm1[P], g0[C], g1[C];
    float sg0[C], sgu[C], sg1[C];
    fill(sg0, C, 12.0f), fill(sgu, C, 2.0f);
    sg0[0] = -100.0f, sg0[1] = 100.0f; /* the clamped ends */
    fill(sm0, P, 20.0f);
    fill(g0, C, 8.0f);
    float *k = malloc(sizeof(float) * (P + NQ) * HS), *v = malloc(sizeof(float) * (P + NQ) * HS);
    float q[NQ * HS], a0[NQ * HS], a1[NQ * HS];
    fill(k, (size_t)(P + NQ) * HS, 1.0f), fill(v, (size_t)(P + NQ) * HS, 1.0f), fill(q, NQ * HS, 1.0f);
    float *scr = malloc(sizeof(float) * wb_attention_block_scratch(P, NQ, HS));
    wb_isa old = wb_isa_limit(WB_ISA_PORTABLE);
    float r0[C];
    wb_rmsnorm_forward(r0, x, w, C, 1e-6f);
    memcpy(x0, x, sizeof x);
    wb_layernorm_add_forward(o0, x0, add, w, bb, C, 1e-5f);
    memcpy(sm1, sm0, sizeof sm0);
    wb_softmax_forward(sm1, P);
    memcpy(g1, g0, sizeof g0);
    memcpy(sg1, sg0, sizeof sg0);
    wb_swiglu_forward(sg1, sgu, C);
    wb_gelu_forward(g1, C, WB_ACT_GELU_TANH);
    wb_attention_block_forward(a0, HS, q, HS, k, v, HS, P, NQ, 1, HS, 0, scr);
    wb_isa_limit(old);
    FOR_EACH_LEVEL(lv) {
        wb_isa o = wb_isa_limit((wb_isa)lv);
        float r1[C], s2[P], g2[C];
        float sg2[C];
        memcpy(sg2, sg0, sizeof sg0);
        wb_swiglu_forward(sg2, sgu, C);
        wb_rmsnorm_forward(r1, x, w, C, 1e-6f);
        memcpy(x1, x, sizeof x);
        wb_layernorm_add_forward(o1, x1, add, w, bb, C, 1e-5f);
        memcpy(s2, sm0, sizeof sm0);
        wb_softmax_forward(s2, P);
        memcpy(g2, g0, sizeof g0);
        wb_gelu_forward(g2, C, WB_ACT_GELU_TANH);
        wb_attention_block_forward(a1, HS, q, HS, k, v, HS, P, NQ, 1, HS, 0, scr);
        wb_isa_limit(o);
        int bad = 0;
        for (int i = 0; i < C; i++) {
            bad += fabsf(r1[i] - r0[i]) > 1e-5f * (1 + fabsf(r0[i]));
            bad += x1[i] != x0[i]; /* the residual add is exact */
            bad += fabsf(o1[i] - o0[i]) > 1e-5f * (1 + fabsf(o0[i]));
            bad += fabsf(g2[i] - g1[i]) > 1e-5f * (1 + fabsf(g1[i]));
            bad += fabsf(sg2[i] - sg1[i]) > 1e-5f * (1 + fabsf(sg1[i]));
        }
        for (int i = 0; i < P; i++) bad += fabsf(s2[i] - sm1[i]) > 1e-6f + 1e-5f * sm1[i];
        for (int i = 0; i < NQ * HS; i++) bad += fabsf(a1[i] - a0[i]) > 1e-5f;
        CHECK_MSG(!bad, "%s: %d values off", wb_isa_name(lv), bad);
    }
    free(k), free(v), free(scr);
}

/* The BF16 prompt routes: the AVX-512 level has the vdpbf16ps one exactly when the CPU has
 * AVX512_BF16 and the AMX one exactly when it has usable AMX-BF16, gemm_bf16 is the route cpu.c
 * chose (bf16_amx, then bf16_dot), and each of those two routes writes only its rows and columns
 * of a Y whose rows are longer than the matrix (ldy > rows: q/k/v column ranges), with the bits
 * it gives at ldy = rows. gemm_case runs the routes on every other shape whatever the choice. */
static void bf16_prompt_routes_follow_the_cpu(void) {
    const wb_cpu_features *f = wb_cpu();
    const wb_isa old = wb_isa_limit(WB_ISA_COUNT - 1);
    const wb_kernel_table *t = wb_kt();
    const wb_gemm_bf16_route *d = t->bf16_route[1], *a = t->bf16_route[2];
    CHECK(t->bf16_route[0] != NULL && t->bf16_route[0]->exact && !t->bf16_route[0]->rounds);
    CHECK((d != NULL) == (t->isa == WB_ISA_AVX512 && f->avx512bf16));
    CHECK((a != NULL) == (t->isa == WB_ISA_AVX512 && f->amx_bf16));
    CHECK(!f->bf16_dot || f->avx512bf16);
    CHECK(!f->bf16_dot_faster || f->avx512bf16);
    CHECK(!f->bf16_amx || (f->amx_bf16 && !f->bf16_dot));
    { /* vdpbf16ps is the default where it is the faster route; WB_BF16_DOT=0 / 1 overrides */
        const char *e = getenv("WB_BF16_DOT");
        const int said = e && (!strcmp(e, "0") || !strcmp(e, "1"));
        CHECK(f->bf16_dot == (f->avx512bf16 && (said ? e[0] == '1' : f->bf16_dot_faster)));
    }
    CHECK(!f->amx_bf16 || (f->amx && f->avx512bf16));
    const wb_gemm_bf16_route *chosen = f->bf16_amx && a ? a : f->bf16_dot && d ? d : t->bf16_route[0];
    CHECK(t->bf16_prompt == chosen);
    CHECK(t->gemm_bf16 == chosen->gemm && t->gemm_bf16_packed == chosen->gemm_packed &&
          t->gemm_xpack == chosen->xpack && t->gemm_xrow == chosen->xrow);
    CHECK(strstr(wb_kernels_describe(), chosen->name) != NULL);
    if (d) CHECK(!d->exact && d->rounds);
    if (a) CHECK(!a->exact && !a->rounds && a->xrow(131) >= 131);
    if (!d) printf("     skip: vdpbf16ps route (the CPU has no AVX512_BF16 at the AVX-512 level)\n");
    if (!a) printf("     skip: AMX route (no usable AMX-BF16 at the AVX-512 level)\n");
    enum { IN = 131, ROWS = 70, NB = 45, LDY = 83, R0 = 5 };
    uint16_t *W = malloc(2 * (size_t)IN * ROWS);
    float *X = malloc(sizeof(float) * IN * NB), *b = malloc(sizeof(float) * ROWS);
    float *Ya = malloc(sizeof(float) * ROWS * NB), *Yb = malloc(sizeof(float) * LDY * NB);
    for (size_t i = 0; i < (size_t)IN * ROWS; i++) W[i] = to_bf16(frand());
    fill(X, (size_t)IN * NB, 2.0f);
    fill(b, ROWS, 1.0f);
    for (int v = 1; v < 3; v++) {
        const wb_gemm_bf16_route *rt = t->bf16_route[v];
        if (!rt) continue;
        for (int acc = 0; acc < 2; acc++) {
            fill(Ya, (size_t)ROWS * NB, 1.0f);
            for (int j = 0; j < NB; j++)
                for (int c = 0; c < LDY; c++) Yb[(size_t)j * LDY + c] = c < ROWS ? Ya[(size_t)j * ROWS + c] : -7.0f;
            rt->gemm(Ya, ROWS, X, IN, NB, W, b, IN, R0, ROWS, acc);
            rt->gemm(Yb, LDY, X, IN, NB, W, b, IN, R0, ROWS, acc);
            int bad = 0;
            for (int j = 0; j < NB; j++)
                for (int c = 0; c < LDY; c++)
                    bad += c < ROWS ? memcmp(&Yb[(size_t)j * LDY + c], &Ya[(size_t)j * ROWS + c], 4) != 0
                                    : Yb[(size_t)j * LDY + c] != -7.0f;
            CHECK_MSG(!bad, "%s acc=%d: %d outputs differ at ldy %d", rt->name, acc, bad, (int)LDY);
        }
    }
    free(W), free(X), free(b), free(Ya), free(Yb);
    wb_isa_limit(old);
}

int main(void) {
    RUN(the_probe_reports_a_consistent_level);
    RUN(f32_gemv_and_batch_match_portable);
    RUN(bf16_gemv_and_gemm_match_portable);
    RUN(bf16_gemv_rounds_where_the_route_does);
    RUN(bf16_batch_rows_equal_alone);
    RUN(prompt_gemm_matches_portable_bit_for_bit);
    RUN(short_prompt_gemm_matches_portable_at_every_row_count);
    RUN(bf16_prompt_routes_follow_the_cpu);
    RUN(bf16_widening_is_exact_on_every_level);
    RUN(norms_softmax_gelu_swiglu_attention_match_portable);
    return check_summary();
}
