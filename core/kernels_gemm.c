/* kernels_gemm.c - the prompt GEMM for F32 and BF16 weights: packed panels and an outer-product
 * register tile, one summation order per output whatever the number of rows in the call.
 *
 *   Y[t, r] = (accumulate ? Y[t, r] : 0) + (s + b[r]),   s = fma(W[r, in-1], X[t, in-1], ... fma(W[r, 0], X[t, 0], 0))
 *
 * Every output is one fused multiply-add chain over the columns in order, started at 0; the
 * bias, then the old Y, are added after it. Nothing in that order depends on nb, on where a row
 * or a column sits in a register tile (edge tiles compute the same lanes under a mask), on the
 * K blocking (a chain stopped at a block edge is stored and reloaded exactly), or on the thread
 * split, so a prompt row gets the same bits in any call, and the AVX2 and AVX-512 variants give
 * the same bits as each other. (The GEMV kernels, kernels.c and kernels_bf16.c, sum in 16-lane
 * partial sums and a tree: another order, kept for decode rows, batches and short prompts; the
 * families choose per sequence, core/weights.c wb_mm_runs.)
 *
 * Why not the GEMV's dot-product form for prompts: each of its accumulators is one output's
 * 16-lane partial sum, so a register tile of R rows x G inputs needs R + G full vectors per R x G
 * FMAs (the inputs came from L2 for every block of rows: about half the FMA peak). Here an
 * accumulator is 16 outputs (16 weight rows of one input), and per column step the tile loads
 * NR / 16 weight vectors and broadcasts MR input values: the AVX-512 tile of MR <= 14 inputs x 32
 * weight rows is 28 FMAs for 2 vector loads and 14 broadcasts (AVX2: 6 x 16, 12 FMAs for 2 + 6).
 *
 * Packing (the BLIS plan, our own code): the inputs once per call into blocks of MR rows,
 * column-major inside a block (a step broadcasts MR consecutive floats), or once by the caller
 * for several matrices and threads (gemm_xpack, then the *_packed calls: core/llama.c packs xn
 * once for q/k/v); the weights one panel of NR rows x KC columns at a time, transposed so a step
 * loads NR consecutive floats, BF16 widened on the way (exact; for BF16 pairs of columns are
 * transposed as one dword and split even/odd after; at AVX-512, for prompts of up to
 * HALF_BLOCKS row blocks, the pairs are stored as they are and the tiles split them, since each
 * panel then serves so few tiles that the pack's widening cost more). The tiles prefetch the next
 * panel's weight rows (into L2, spread over the panel's tiles), which the packing otherwise waited
 * on from memory (25% of a 44-token prefill); AVX2 only for short prompts (up to PF_BLOCKS row
 * blocks: Session 3 measured it 3-8% slower for longer ones there), AVX-512 for every prompt (a
 * few percent at 268 rows, not well resolved on the shared VM: docs/performance.md Session 7).
 * A finishing AVX-512 tile fetches its Y lines for writing as it starts (prefetchw). KC is the
 * whole row unless the inputs' block would not stay in L2: panels sized for L1 measured no
 * faster, and the tile reading a 115 KB panel and its inputs from L2 runs as fast as from L1
 * (bench_kernels' feed table).
 * At AVX-512, prompts of up to 48 rows (SHORT512) skip the weight panels: the tile is turned
 * around (the rows in the vector lanes, the inputs packed in 16-row blocks, the weights read in
 * place by broadcasts, gemm_short_512), since at 44 tokens a panel served only 4 row blocks.
 * Dispatch: cpu.c; the driver below is plain C over the level's pack and tile functions.
 * BF16 has a second route at AVX-512 with AVX512_BF16 (level512d; the default on AMD Zen 4/5,
 * where vdpbf16ps is the faster, else WB_BF16_DOT=1): the same driver over the pair panels and
 * inputs rounded to BF16 pairs, vdpbf16ps tiles; outside the chain above (the activations
 * rounded), one chain of pair products per output in column order all the same. With it the BF16
 * GEMV rounds its inputs the same way (route512d.xround, kernels_bf16.c).
 * And a third where the CPU has AMX-BF16 (route512a, the default there; WB_AMX=0 turns it off):
 * core/kernels_amx.c's tiles, the inputs split into three BF16 parts so the products stay exact;
 * F32 weights keep this file's kernels on every route.
 */
#include "cpu.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define WB_X86 1
#include <immintrin.h>
#include "kernels_simd.h"
#endif

static inline float bf16f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---------------------------------------------------------------- per-thread buffers */

/* WB_KBUF_SLOTS 64-byte aligned buffers per thread, kept between calls (freed when the thread
 * ends): the GEMV's packed inputs (kernels_bf16.c) and this file's packed panels. */
typedef struct kbuf {
    float *p[WB_KBUF_SLOTS];
    size_t cap[WB_KBUF_SLOTS];
} kbuf;
static pthread_key_t kbuf_key;
static pthread_once_t kbuf_once = PTHREAD_ONCE_INIT;
static int kbuf_key_ok;
static void kbuf_free(void *v) {
    kbuf *k = v;
    if (k)
        for (int i = 0; i < WB_KBUF_SLOTS; i++) free(k->p[i]);
    free(k);
}
static void kbuf_key_init(void) { kbuf_key_ok = pthread_key_create(&kbuf_key, kbuf_free) == 0; }

float *wb_kernel_buf(int slot, size_t n) {
    if (slot < 0 || slot >= WB_KBUF_SLOTS) return NULL;
    pthread_once(&kbuf_once, kbuf_key_init);
    if (!kbuf_key_ok) return NULL;
    kbuf *k = pthread_getspecific(kbuf_key);
    if (!k) {
        if (!(k = calloc(1, sizeof *k))) return NULL;
        if (pthread_setspecific(kbuf_key, k)) {
            free(k);
            return NULL;
        }
    }
    if (k->cap[slot] < n) {
        const size_t cap = (n + 4095) & ~(size_t)4095;
        float *p = aligned_alloc(64, cap * sizeof *p);
        if (!p) return NULL;
        free(k->p[slot]);
        k->p[slot] = p, k->cap[slot] = cap;
    }
    return k->p[slot];
}

/* ----------------------------------------------------------------------- the driver */

enum { MR_MAX = 14 }; /* the widest tile's input rows (AVX-512) */

/* One column block of one tile: acc[m][j] for m < mr inputs, j < NR weight rows, continued from
 * cin (NULL: from 0) over kc steps; then stored to cout (a chain that goes on in the next K
 * block) or, with cout NULL, finished into Y (bias, old Y; nr valid rows, columns of Y). */
typedef void (*tile_fn)(int kc, const float *xp, const float *wp, const float *cin, float *cout,
                        float *Y, size_t ldy, int nr, const float *b, int accumulate, const char *pf, int npf);
/* dst[k * NR + j] = W[r + j, k0 + k] for j < nr (0 for nr <= j < NR), k < kc; bf16: W is BF16 */
typedef void (*pack_fn)(float *dst, const void *W, int bf16, int in, int r, int nr, int k0,
                        int kc);

/* d[k * mr + m] = s[m * ldx + k], k < in, m < mr (one block of packed inputs) */
typedef void (*xpack_fn)(float *d, const float *s, size_t ldx, int mr, int in);

typedef struct gemm_level {
    int nr, mr_max;
    pack_fn pack;
    xpack_fn xpack;
    tile_fn tile[MR_MAX + 1];
    pack_fn packh;               /* NULL, or BF16 panels kept as pairs (short prompts) */
    tile_fn tileh[MR_MAX + 1];   /* the tiles over those panels, widening in registers */
    /* inputs of up to short_rows rows (0: none) packed in 16-row blocks and multiplied by
     * gshort, which reads the weights in place */
    int short_rows;
    /* the next panel is prefetched during a panel's tiles for prompts of up to pf_blocks row
     * blocks (0: PF_BLOCKS) */
    int pf_blocks;
    void (*gshort)(float *Y, size_t ldy, const float *P, int nb, const void *W, int bf16,
                   const float *b, int in, int r0, int r1, int accumulate);
    /* 1: the vdpbf16ps route (BF16 only): inputs packed as BF16 pairs, one dword per pair of
     * columns, block i still at m0(i) * in floats (the first half of its F32 place), dword
     * (p, m) at p * mr + m in it; panels of pairs (packh); tiles step over pairs */
    int pairs;
} gemm_level;

/* One row of the chain: x[k * xs] for k < in against weight row r. */
static inline float chain_one(const float *x, size_t xs, const void *W, int bf16, int in, int r) {
    float s = 0.0f;
    if (bf16) {
        const uint16_t *w = (const uint16_t *)W + (size_t)r * in;
        for (int i = 0; i < in; i++) s = fmaf(bf16f(w[i]), x[(size_t)i * xs], s);
    } else {
        const float *w = (const float *)W + (size_t)r * in;
        for (int i = 0; i < in; i++) s = fmaf(w[i], x[(size_t)i * xs], s);
    }
    return s;
}

static inline void chain_store(float *y, float s, const float *b, int r, int accumulate) {
    if (b) s += b[r];
    *y = accumulate ? *y + s : s;
}

/* The chain above in scalar code (fmaf), for when the buffers cannot be had: the same bits. */
static void gemm_chain_scalar(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                              const void *W, int bf16, const float *b, int in, int r0, int r1,
                              int accumulate) {
    for (int t = 0; t < nb; t++)
        for (int r = r0; r < r1; r++)
            chain_store(Y + (size_t)t * ldy + r, chain_one(X + (size_t)t * ldx, 1, W, bf16, in, r),
                        b, r, accumulate);
}

/* Bytes of packed inputs kept for one K block (about half of a 2 MB L2). */
#define XP_BYTES (1u << 20)

/* Packed inputs: nb rows cut into nmb = ceil(nb / mr_max) blocks of near-equal size (nb = 44 at
 * MR 14 is 4 x 11), block i rows m0(i) .. m0(i+1)-1, element (k, m) at m0(i) * in + k * mr + m:
 * the layout depends on nb, in and the level's mr_max only. */
static inline int xblocks(int nb, int mr_max) { return (nb + mr_max - 1) / mr_max; }
static inline int xblock0(int nb, int nmb, int i) { return (int)((int64_t)nb * i / nmb); }

static void xpack_scalar(float *d, const float *s, size_t ldx, int mr, int in) {
    for (int k = 0; k < in; k++)
        for (int m = 0; m < mr; m++) d[(size_t)k * mr + m] = s[(size_t)m * ldx + k];
}

/* The chain over inputs packed as BF16 pairs (gemm_level.pairs) in scalar code (buffers short):
 * the rounded activations, exact products, FP32 sums added odd column first as Intel documents
 * vdpbf16ps; within the tests' bound of the instruction, not claimed to its bits (AMD's order of
 * the pair's two additions is not documented). */
static void gemm_chain_pairs(float *Y, size_t ldy, const float *P, int mr_max, int nb,
                             const uint16_t *W, const float *b, int in, int r0, int r1,
                             int accumulate) {
    const int nmb = xblocks(nb, mr_max), np = (in + 1) / 2;
    for (int i = 0; i < nmb; i++) {
        const int a = xblock0(nb, nmb, i), mr = xblock0(nb, nmb, i + 1) - a;
        const float *x = P + (size_t)a * in;
        for (int m = 0; m < mr; m++)
            for (int r = r0; r < r1; r++) {
                const uint16_t *w = W + (size_t)r * in;
                float s = 0.0f;
                for (int p = 0; p < np; p++) {
                    uint32_t xv;
                    memcpy(&xv, x + (size_t)p * mr + m, 4);
                    const float w1 = 2 * p + 1 < in ? bf16f(w[2 * p + 1]) : 0.0f;
                    s += bf16f((uint16_t)(xv >> 16)) * w1;
                    s += bf16f((uint16_t)xv) * bf16f(w[2 * p]);
                }
                chain_store(Y + (size_t)(a + m) * ldy + r, s, b, r, accumulate);
            }
    }
}

/* Short prompts (nb <= sr, the level's short rows; 0: none) are packed in blocks of 16 rows
 * instead, the last one the rest (44 = 16 + 16 + 12), which the broadcast tiles read as whole
 * vectors of rows; never more blocks than ceil(nb / mr_max), so a caller counting blocks by
 * gemm_mr only hands out some empty ones. */
static inline int xb_count(int nb, int mr_max, int sr) {
    return nb <= sr ? (nb + 15) / 16 : xblocks(nb, mr_max);
}
static inline int xb_first(int nb, int nmb, int sr, int i) {
    return nb <= sr ? (16 * i < nb ? 16 * i : nb) : xblock0(nb, nmb, i);
}

static void xpack_blocks(xpack_fn f, int mr_max, int sr, float *P, const float *X, size_t ldx,
                         int nb, int in, int i0, int i1) {
    const int nmb = xb_count(nb, mr_max, sr);
    if (i1 > nmb) i1 = nmb;
    for (int i = i0; i < i1; i++) {
        const int a = xb_first(nb, nmb, sr, i), e = xb_first(nb, nmb, sr, i + 1);
        f(P + (size_t)a * in, X + (size_t)a * ldx, ldx, e - a, in);
    }
}

/* The chain over packed inputs in scalar code (buffers short): the same bits. */
static void gemm_chain_packed(float *Y, size_t ldy, const float *P, int mr_max, int nb,
                              const void *W, int bf16, const float *b, int in, int r0, int r1,
                              int accumulate) {
    const int nmb = xblocks(nb, mr_max);
    for (int i = 0; i < nmb; i++) {
        const int a = xblock0(nb, nmb, i), mr = xblock0(nb, nmb, i + 1) - a;
        for (int m = 0; m < mr; m++)
            for (int r = r0; r < r1; r++)
                chain_store(Y + (size_t)(a + m) * ldy + r,
                            chain_one(P + (size_t)a * in + m, (size_t)mr, W, bf16, in, r), b, r,
                            accumulate);
    }
}

/* The chain over inputs packed in short prompts' 16-row blocks (xb_count) in scalar code. */
static void gemm_chain_short(float *Y, size_t ldy, const float *P, int nb, const void *W,
                             int bf16, const float *b, int in, int r0, int r1, int accumulate) {
    for (int t = 0; t < nb; t++) {
        const int v = t / 16, w = nb - 16 * v < 16 ? nb - 16 * v : 16;
        const float *x = P + (size_t)16 * v * in + t % 16;
        for (int r = r0; r < r1; r++)
            chain_store(Y + (size_t)t * ldy + r, chain_one(x, (size_t)w, W, bf16, in, r), b, r,
                        accumulate);
    }
}

/* The K block: the whole row unless the inputs' block would not stay in L2 (a panel sized for
 * L1 instead measured no faster: kc 128-384 against 896 on Qwen2.5-0.5B's prefill). */
static int gemm_kc(int nb, int in) {
    int kc = in;
    if ((size_t)nb * in * 4 > XP_BYTES) {
        kc = (int)(XP_BYTES / (4u * (unsigned)nb)) & ~15;
        if (kc < 256) kc = 256;
        if (kc > in) kc = in;
    }
    return kc;
}

/* Y rows r0 .. r1 - 1 of every input from packed inputs P; wp: NR x kc floats, cb: nb x NR
 * floats when kc < in. */
/* PF_BLOCKS: the levels' default limit (AVX2); PF_ALL: no limit (AVX-512: at 268 rows the packing
 * waited on the weights, 6.3% of a prefill's samples, 3.8% with the prefetch; docs/performance.md
 * Session 7) */
enum { PF_BLOCKS = 8, HALF_BLOCKS = 4, PF_ALL = 1 << 20 };

static void gemm_tiles(const gemm_level *g, float *Y, size_t ldy, const float *P, int nb,
                       const void *W, int bf16, const float *b, int in, int r0, int r1,
                       int accumulate, int kc, float *wp, float *cb, const float *wpk) {
    const int NR = g->nr, nmb = xblocks(nb, g->mr_max);
    const size_t esz = bf16 ? 2 : 4;
    for (int r = r0; r < r1; r += NR) {
        const int nr = r1 - r < NR ? r1 - r : NR;
        /* the next panel's weights (contiguous rows; with wpk, the next prepacked panel),
         * spread over this panel's tiles, for prompts of up to the level's pf_blocks row blocks:
         * the packing otherwise waits on the weights from memory (its 32 rows are 32 short
         * streams the hardware prefetcher picks up late); in K-blocked products (kc < in) the
         * whole next panel, over the tiles of every K block */
        const int nn = r + NR < r1 ? (r1 - r - NR < NR ? r1 - r - NR : NR) : 0;
        const size_t pfn = wpk ? (nn ? (size_t)NR * in * 4 : 0) : (size_t)nn * in * esz;
        const int nkb = (in + kc - 1) / kc, nt = nkb * nmb;
        const int pfl = g->pf_blocks ? g->pf_blocks : PF_BLOCKS;
        const int lines = nmb <= pfl ? (int)((pfn + 63) / 64) : 0;
        const int per = (lines + nt - 1) / nt;
        const float *panel = wpk ? wpk + (size_t)(r / NR) * NR * in : NULL;
        const char *pfb = !nn ? NULL
                          : wpk ? (const char *)(panel + (size_t)NR * in)
                                : (const char *)W + (size_t)(r + NR) * in * esz;
        for (int k0 = 0; k0 < in; k0 += kc) {
            const int kn = in - k0 < kc ? in - k0 : kc;
            const int last = k0 + kn == in;
            /* BF16 panels of short prompts (up to 4 row blocks: 56 rows) stay pairs of BF16,
             * widened in the tiles: at 44 tokens each panel serves only 4 row blocks, so the
             * pack's widening and its twice-as-large stores cost more than the tiles' shift
             * and masked load (measured 3-6% less CPU time for the whole model); at 8 blocks
             * (100 tokens) the tiles' widening cost as much as it saved. Prepacked panels (F32)
             * are read as they are. */
            const int half = !panel && bf16 && g->packh && kc == in && nmb <= HALF_BLOCKS;
            const float *w = panel ? panel + (size_t)k0 * NR : wp;
            if (!panel) (half ? g->packh : g->pack)(wp, W, bf16, in, r, nr, k0, kn);
            for (int i = 0; i < nmb; i++) {
                const int a = xblock0(nb, nmb, i), mr = xblock0(nb, nmb, i + 1) - a;
                const int t = (k0 / kc) * nmb + i; /* this tile's share of the prefetch */
                float *c = cb + (size_t)a * NR;
                const size_t xo = (size_t)a * in + (size_t)(g->pairs ? k0 / 2 : k0) * mr;
                (half ? g->tileh : g->tile)[mr](kn, P + xo, w, k0 ? c : NULL,
                            last ? NULL : c, Y + (size_t)a * ldy + r, ldy, nr, b ? b + r : NULL,
                            accumulate, pfb ? pfb + (size_t)t * per * 64 : NULL,
                            lines - t * per < per ? lines - t * per : per);
            }
        }
    }
}

/* The GEMM over inputs packed by the caller (xpack_blocks at this level). */
static void gemm_drive_packed(const gemm_level *g, float *Y, size_t ldy, const float *P, int nb,
                              const void *W, int bf16, const float *b, int in, int r0, int r1,
                              int accumulate) {
    if (r1 <= r0 || nb < 1) return;
    if (!bf16 && nb <= g->short_rows) {
        g->gshort(Y, ldy, P, nb, W, bf16, b, in, r0, r1, accumulate);
        return;
    }
    const int kc = gemm_kc(nb, in);
    const size_t wn = (size_t)g->nr * kc, cn = kc < in ? (size_t)nb * g->nr : 0;
    float *wp = wb_kernel_buf(1, wn + cn);
    if (!wp) {
        if (g->pairs) gemm_chain_pairs(Y, ldy, P, g->mr_max, nb, W, b, in, r0, r1, accumulate);
        else gemm_chain_packed(Y, ldy, P, g->mr_max, nb, W, bf16, b, in, r0, r1, accumulate);
        return;
    }
    gemm_tiles(g, Y, ldy, P, nb, W, bf16, b, in, r0, r1, accumulate, kc, wp, wp + wn, NULL);
}

/* The GEMM from row-major inputs: packs them into this thread's buffer first. */
static void gemm_drive(const gemm_level *g, float *Y, size_t ldy, const float *X, size_t ldx,
                       int nb, const void *W, int bf16, const float *b, int in, int r0, int r1,
                       int accumulate) {
    if (r1 <= r0 || nb < 1) return;
    if (!bf16 && nb <= g->short_rows) {
        float *xp = wb_kernel_buf(1, (size_t)nb * in);
        if (!xp) {
            gemm_chain_scalar(Y, ldy, X, ldx, nb, W, bf16, b, in, r0, r1, accumulate);
            return;
        }
        xpack_blocks(g->xpack, g->mr_max, g->short_rows, xp, X, ldx, nb, in, 0, 3);
        g->gshort(Y, ldy, xp, nb, W, bf16, b, in, r0, r1, accumulate);
        return;
    }
    const int kc = gemm_kc(nb, in);
    const size_t xn = ((size_t)nb * in + 15) & ~(size_t)15, wn = (size_t)g->nr * kc,
                 cn = kc < in ? (size_t)nb * g->nr : 0;
    float *xp = wb_kernel_buf(1, xn + wn + cn);
    if (!xp) {
        gemm_chain_scalar(Y, ldy, X, ldx, nb, W, bf16, b, in, r0, r1, accumulate);
        return;
    }
    xpack_blocks(g->xpack, g->mr_max, 0, xp, X, ldx, nb, in, 0, xblocks(nb, g->mr_max));
    gemm_tiles(g, Y, ldy, xp, nb, W, bf16, b, in, r0, r1, accumulate, kc, xp + xn, xp + xn + wn,
               NULL);
}

/* Prepacked F32 weights: panel p (rows p * NR .. p * NR + NR - 1, zero past rows) at
 * Wp + p * NR * in, laid out as pack writes one for k0 = 0, kc = in, so a K block of it is
 * Wp + p * NR * in + k0 * NR. Small models keep them (core/gpt2.c): their panels were packed
 * again by every prompt, about a tenth of a 96-token prefill's time. */
static size_t panels_size(const gemm_level *g, int rows, int in) {
    return (size_t)((rows + g->nr - 1) / g->nr) * g->nr * in;
}
static void panels_pack(const gemm_level *g, float *dst, const float *W, int rows, int in) {
    for (int r = 0; r < rows; r += g->nr)
        g->pack(dst + (size_t)r * in, W, 0, in, r, rows - r < g->nr ? rows - r : g->nr, 0, in);
}

/* gemm_drive over prepacked weights (the same panels, so the same bits), packing W itself
 * where r0 does not start a panel. */
static void gemm_drive_prepacked(const gemm_level *g, float *Y, size_t ldy, const float *X,
                                 size_t ldx, int nb, const float *Wp, const float *W,
                                 const float *b, int in, int r0, int r1, int accumulate) {
    if (r1 <= r0 || nb < 1) return;
    if (r0 % g->nr) {
        gemm_drive(g, Y, ldy, X, ldx, nb, W, 0, b, in, r0, r1, accumulate);
        return;
    }
    const int kc = gemm_kc(nb, in);
    const size_t xn = ((size_t)nb * in + 15) & ~(size_t)15,
                 cn = kc < in ? (size_t)nb * g->nr : 0;
    float *xp = wb_kernel_buf(1, xn + cn);
    if (!xp) {
        gemm_chain_scalar(Y, ldy, X, ldx, nb, W, 0, b, in, r0, r1, accumulate);
        return;
    }
    xpack_blocks(g->xpack, g->mr_max, 0, xp, X, ldx, nb, in, 0, xblocks(nb, g->mr_max));
    gemm_tiles(g, Y, ldy, xp, nb, W, 0, b, in, r0, r1, accumulate, kc, NULL, xp + xn, Wp);
}

/* gemm_drive_prepacked over inputs packed by the caller (xpack_blocks at this level): the same
 * panels and packed inputs, so the same bits; core/gpt2.c packs a prompt's xn once for the q, k
 * and v column ranges it stores to different places. */
static void gemm_drive_prepacked_xp(const gemm_level *g, float *Y, size_t ldy, const float *P,
                                    int nb, const float *Wp, const float *W, const float *b,
                                    int in, int r0, int r1, int accumulate) {
    if (r1 <= r0 || nb < 1) return;
    /* a short prompt's inputs are packed for the tile reading W in place (the same bits) */
    if (r0 % g->nr || nb <= g->short_rows) {
        gemm_drive_packed(g, Y, ldy, P, nb, W, 0, b, in, r0, r1, accumulate);
        return;
    }
    const int kc = gemm_kc(nb, in);
    const size_t cn = kc < in ? (size_t)nb * g->nr : 16;
    float *cb = wb_kernel_buf(1, cn);
    if (!cb) {
        gemm_chain_packed(Y, ldy, P, g->mr_max, nb, W, 0, b, in, r0, r1, accumulate);
        return;
    }
    gemm_tiles(g, Y, ldy, P, nb, W, 0, b, in, r0, r1, accumulate, kc, NULL, cb, Wp);
}

/* ---------------------------------------------------------------------- portable */

/* The portable level runs the chain in scalar code: the reference the other levels are
 * compared with (to the bit, since both fuse every step). */
static void gemm_f32_portable(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                              const float *W, const float *b, int in, int r0, int r1,
                              int accumulate) {
    gemm_chain_scalar(Y, ldy, X, ldx, nb, W, 0, b, in, r0, r1, accumulate);
}
static void gemm_bf16_portable(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                               const uint16_t *W, const float *b, int in, int r0, int r1,
                               int accumulate) {
    gemm_chain_scalar(Y, ldy, X, ldx, nb, W, 1, b, in, r0, r1, accumulate);
}

/* Packed rows take in floats on every route but AMX's. */
static size_t xrow_plain(int in) { return (size_t)in; }

/* Packed inputs at this level are the rows themselves (blocks of one row). */
static void gemm_xpack_portable(float *P, const float *X, size_t ldx, int nb, int in, int i0,
                                int i1, int bf16) {
    (void)bf16;
    xpack_blocks(xpack_scalar, 1, 0, P, X, ldx, nb, in, i0, i1);
}
static void gemm_f32_packed_portable(float *Y, size_t ldy, const float *P, int nb,
                                     const float *W, const float *b, int in, int r0, int r1,
                                     int accumulate) {
    gemm_chain_scalar(Y, ldy, P, (size_t)in, nb, W, 0, b, in, r0, r1, accumulate);
}
static void gemm_bf16_packed_portable(float *Y, size_t ldy, const float *P, int nb,
                                      const uint16_t *W, const float *b, int in, int r0, int r1,
                                      int accumulate) {
    gemm_chain_scalar(Y, ldy, P, (size_t)in, nb, W, 1, b, in, r0, r1, accumulate);
}

#ifdef WB_X86
/* --------------------------------------------------------------------------- AVX-512 */

#define AVX2 __attribute__((target("avx2,fma")))

/* 8 x 8 transpose: r[j] row j in, r[c] column c out. */
AVX2 static inline void tr8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int q = 0; q < 2; q++) {
        u[4 * q + 0] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
        u[4 * q + 1] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
        u[4 * q + 2] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
        u[4 * q + 3] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,prfchw")))
enum { NR512 = 32 };


/* F32: 16 rows x 16 columns per 16 x 16 transpose. BF16: 16 rows x 32 columns, transposed as 16
 * x 16 pairs of BF16 (one dword each), then each pair widened by the even/odd split (a shift
 * for the even column, an AND for the odd one): half the shuffles per value of widening each
 * row first, and the shuffles (one port) are what the packing costs. */
AVX512 static void pack_512(float *dst, const void *W, int bf16, int in, int r, int nr, int k0,
                            int kc) {
    const __m512i hi16 = _mm512_set1_epi32((int)0xffff0000u);
    for (int h = 0; h < 2; h++) {
        const int nh = nr - 16 * h < 0 ? 0 : nr - 16 * h > 16 ? 16 : nr - 16 * h;
        float *d = dst + 16 * h;
        if (!nh) {
            for (int k = 0; k < kc; k++) _mm512_store_ps(d + (size_t)k * NR512, _mm512_setzero_ps());
            continue;
        }
        const int step = bf16 ? 32 : 16;
        for (int kk = 0; kk < kc; kk += step) {
            const int kw = kc - kk < step ? kc - kk : step;
            __m512 v[16];
            /* rows past nr load nothing (an all-zero mask) and give zeros */
            const __mmask32 m = kw == 32 ? 0xffffffffu : (1u << kw) - 1;
            const int last = r + 16 * h + nh - 1;
            if (bf16)
                for (int j = 0; j < 16; j++) {
                    const uint16_t *s = (const uint16_t *)W +
                                        (size_t)(j < nh ? r + 16 * h + j : last) * in + k0 + kk;
                    v[j] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(j < nh ? m : 0, s));
                }
            else
                for (int j = 0; j < 16; j++) {
                    const float *s = (const float *)W +
                                     (size_t)(j < nh ? r + 16 * h + j : last) * in + k0 + kk;
                    v[j] = _mm512_maskz_loadu_ps((__mmask16)(j < nh ? m : 0), s);
                }
            wb_tr16_512(v);
            if (bf16) {
                for (int c = 0; 2 * c < kw; c++) {
                    const __m512i p = _mm512_castps_si512(v[c]);
                    _mm512_store_ps(d + (size_t)(kk + 2 * c) * NR512,
                                    _mm512_castsi512_ps(_mm512_slli_epi32(p, 16)));
                    if (2 * c + 1 < kw)
                        _mm512_store_ps(d + (size_t)(kk + 2 * c + 1) * NR512,
                                        _mm512_castsi512_ps(_mm512_and_si512(p, hi16)));
                }
            } else {
                for (int i = 0; i < kw; i++) _mm512_store_ps(d + (size_t)(kk + i) * NR512, v[i]);
            }
        }
    }
}

/* BF16 only: the pack's pairs of columns kept as they are, dst[p * NR512 + j] (as a dword) =
 * W[r + j, k0 + 2p] | W[r + j, k0 + 2p + 1] << 16 (0 past kc), half the bytes and no widening;
 * the tiles widen in registers (tileh_512). */
AVX512 static void packh_512(float *dst, const void *W, int bf16, int in, int r, int nr, int k0,
                             int kc) {
    (void)bf16;
    for (int h = 0; h < 2; h++) {
        const int nh = nr - 16 * h < 0 ? 0 : nr - 16 * h > 16 ? 16 : nr - 16 * h;
        float *d = dst + 16 * h;
        if (!nh) {
            for (int p = 0; p < (kc + 1) / 2; p++) _mm512_store_ps(d + (size_t)p * NR512, _mm512_setzero_ps());
            continue;
        }
        for (int kk = 0; kk < kc; kk += 32) {
            const int kw = kc - kk < 32 ? kc - kk : 32;
            __m512 v[16];
            const __mmask32 m = kw == 32 ? 0xffffffffu : (1u << kw) - 1;
            const int last = r + 16 * h + nh - 1;
            for (int j = 0; j < 16; j++) {
                const uint16_t *s = (const uint16_t *)W +
                                    (size_t)(j < nh ? r + 16 * h + j : last) * in + k0 + kk;
                v[j] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(j < nh ? m : 0, s));
            }
            wb_tr16_512(v);
            for (int c = 0; 2 * c < kw; c++) _mm512_store_ps(d + (size_t)(kk / 2 + c) * NR512, v[c]);
        }
    }
}

/* One block of packed inputs: 16 columns of mr <= 16 rows per 16 x 16 transpose (rows past mr
 * load nothing), each column stored as mr floats. */
AVX512 static void xpack_512(float *d, const float *s, size_t ldx, int mr, int in) {
    const __mmask16 mm = (__mmask16)((1u << mr) - 1);
    for (int k = 0; k < in; k += 16) {
        const int kw = in - k < 16 ? in - k : 16;
        const __mmask16 km = (__mmask16)((1u << kw) - 1);
        __m512 v[16];
        for (int j = 0; j < 16; j++)
            v[j] = _mm512_maskz_loadu_ps(j < mr ? km : 0, s + (size_t)(j < mr ? j : 0) * ldx + k);
        wb_tr16_512(v);
        for (int c = 0; c < kw; c++) _mm512_mask_storeu_ps(d + (size_t)(k + c) * mr, mm, v[c]);
    }
}

/* A tile's accumulators: from the partial sums of an earlier K block (cin) or zero. */
AVX512 static inline __attribute__((always_inline)) void acc_start_512(const int MR, const float *cin,
                                                                       __m512 *a0, __m512 *a1) {
#pragma GCC unroll 14
    for (int m = 0; m < MR; m++) {
        a0[m] = cin ? _mm512_load_ps(cin + m * NR512) : _mm512_setzero_ps();
        a1[m] = cin ? _mm512_load_ps(cin + m * NR512 + 16) : _mm512_setzero_ps();
    }
}

/* A tile's accumulators out: to cout (partial sums for the next K block), or to Y's MR rows x nr
 * columns with the bias and, when accumulate, Y's old values added. */
AVX512 static inline __attribute__((always_inline)) void acc_finish_512(
    const int MR, const __m512 *a0, const __m512 *a1, float *cout, float *Y, size_t ldy, int nr,
    const float *b, int accumulate) {
    if (cout) {
#pragma GCC unroll 14
        for (int m = 0; m < MR; m++) {
            _mm512_store_ps(cout + m * NR512, a0[m]);
            _mm512_store_ps(cout + m * NR512 + 16, a1[m]);
        }
        return;
    }
    const __mmask16 k0 = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
    const __mmask16 k1 = (__mmask16)(nr >= 32 ? 0xffff : nr > 16 ? (1u << (nr - 16)) - 1 : 0);
    const __m512 b0 = b ? _mm512_maskz_loadu_ps(k0, b) : _mm512_setzero_ps();
    const __m512 b1 = b ? _mm512_maskz_loadu_ps(k1, b + 16) : _mm512_setzero_ps();
#pragma GCC unroll 14
    for (int m = 0; m < MR; m++) {
        float *y = Y + (size_t)m * ldy;
        __m512 v0 = a0[m], v1 = a1[m];
        if (b) v0 = _mm512_add_ps(v0, b0), v1 = _mm512_add_ps(v1, b1);
        if (accumulate) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(k0, y), v0);
            v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(k1, y + 16), v1);
        }
        _mm512_mask_storeu_ps(y, k0, v0);
        _mm512_mask_storeu_ps(y + 16, k1, v1);
    }
}

/* The Y lines a finishing tile stores to (MR rows x nr columns), fetched for writing as it
 * starts: Y (268 x 4864 floats) is far from the caches, and a tile storing to new columns
 * measured 3-5% slower than one storing to the same ones (docs/performance.md, Session 7).
 * A chain continued in the next K block (cout) stores nothing to Y. */
AVX512 static inline __attribute__((always_inline)) void y_prefetch_512(const int MR, float *Y,
                                                                        size_t ldy, int nr,
                                                                        const float *cout) {
    if (cout) return;
#pragma GCC unroll 14
    for (int m = 0; m < MR; m++) {
        __builtin_prefetch(Y + (size_t)m * ldy, 1, 3);
        if (nr > 16) __builtin_prefetch(Y + (size_t)m * ldy + 16, 1, 3);
    }
}

/* One step of K: the tile's two column vectors times each of its MR rows' broadcast inputs. */
AVX512 static inline __attribute__((always_inline)) void fma_rows_512(const int MR, __m512 w0,
                                                                      __m512 w1, const float *xp,
                                                                      __m512 *a0, __m512 *a1) {
#pragma GCC unroll 14
    for (int m = 0; m < MR; m++) {
        const __m512 x = _mm512_set1_ps(xp[m]);
        a0[m] = _mm512_fmadd_ps(w0, x, a0[m]);
        a1[m] = _mm512_fmadd_ps(w1, x, a1[m]);
    }
}

AVX512 static inline __attribute__((always_inline)) void tile_512(
    const int MR, int kc, const float *xp, const float *wp, const float *cin, float *cout,
    float *Y, size_t ldy, int nr, const float *b, int accumulate, const char *pf, int npf) {
    y_prefetch_512(MR, Y, ldy, nr, cout);
    __m512 a0[MR_MAX], a1[MR_MAX];
    acc_start_512(MR, cin, a0, a1);
    for (int k = 0; k < kc; k++, xp += MR, wp += NR512) {
        if (npf > 0 && (k & 1) == 0) _mm_prefetch(pf, _MM_HINT_T1), pf += 64, npf--;
        const __m512 w0 = _mm512_load_ps(wp), w1 = _mm512_load_ps(wp + 16);
        fma_rows_512(MR, w0, w1, xp, a0, a1);
    }
    acc_finish_512(MR, a0, a1, cout, Y, ldy, nr, b, accumulate);
}

/* tile_512 over a packh_512 panel: per pair of columns two dword loads, the even column by a
 * shift, the odd one by a load whose mask zeroes the low halves (exact), the same chain in the
 * same order. */
AVX512 static inline __attribute__((always_inline)) void tileh_512(
    const int MR, int kc, const float *xp, const float *wp, const float *cin, float *cout,
    float *Y, size_t ldy, int nr, const float *b, int accumulate, const char *pf, int npf) {
    /* no Y prefetch: these run for prompts of up to HALF_BLOCKS row blocks, where Y is small;
     * with it, 44-token BF16 prefills read 0.99-1.10x the start tree's CPU time (load 5.7,
     * within the noise, Session 7), so that path is kept as it was */
    __m512 a0[MR_MAX], a1[MR_MAX];
    acc_start_512(MR, cin, a0, a1);
    int k = 0;
    /* the prefetches spread over the whole k loop, one every ps pairs */
    const int ps = npf > 0 && kc / 2 > npf ? kc / 2 / npf : 1;
    for (int cd = 1; k + 1 < kc; k += 2, xp += 2 * MR, wp += NR512) {
        if (npf > 0 && --cd == 0) _mm_prefetch(pf, _MM_HINT_T1), pf += 64, npf--, cd = ps;
        __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(wp), 16));
        __m512 w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(wp + 16), 16));
        fma_rows_512(MR, w0, w1, xp, a0, a1);
        /* the pair loaded again (from L1) for the odd column, its low halves zeroed by the
         * load's mask: no register for a constant, and an opaque pointer keeps gcc from holding
         * both loads in registers (either spilled accumulators at 14 rows) */
        const float *wq = wp;
        __asm__("" : "+r"(wq));
        w0 = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(0xAAAAAAAAu, wq));
        w1 = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(0xAAAAAAAAu, wq + 16));
        fma_rows_512(MR, w0, w1, xp + MR, a0, a1);
    }
    if (k < kc) {
        const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(wp), 16));
        const __m512 w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(wp + 16), 16));
        fma_rows_512(MR, w0, w1, xp, a0, a1);
    }
    acc_finish_512(MR, a0, a1, cout, Y, ldy, nr, b, accumulate);
}

/* tile512_1 .. tile512_14 and tileh512_1 .. tileh512_14: each tile body at every row count, so
 * the row loops unroll into registers */
#define TILE512_AT(name, body, M_)                                                               \
    TILE512_ATTR static void name##_##M_(int kc, const float *xp, const float *wp,              \
                                         const float *cin, float *cout, float *Y, size_t ldy,    \
                                         int nr, const float *b, int accumulate, const char *pf, \
                                         int npf) {                                              \
        body(M_, kc, xp, wp, cin, cout, Y, ldy, nr, b, accumulate, pf, npf);                     \
    }
#define TILES512(name, body)                                                                     \
    TILE512_AT(name, body, 1) TILE512_AT(name, body, 2) TILE512_AT(name, body, 3)                \
    TILE512_AT(name, body, 4) TILE512_AT(name, body, 5) TILE512_AT(name, body, 6)                \
    TILE512_AT(name, body, 7) TILE512_AT(name, body, 8) TILE512_AT(name, body, 9)                \
    TILE512_AT(name, body, 10) TILE512_AT(name, body, 11) TILE512_AT(name, body, 12)             \
    TILE512_AT(name, body, 13) TILE512_AT(name, body, 14)
#define TILE512_ATTR AVX512
TILES512(tileh512, tileh_512)
TILES512(tile512, tile_512)
#undef TILE512_ATTR

/* ----------------------------------------------------- AVX-512: short prompts, weights in place */

/* For prompts of up to SHORT512 rows the tile is turned around: the prompt's rows sit in the
 * vector lanes (16-row blocks of the packed inputs, X^T), and the weights are read where they
 * are, row-major, one broadcast per weight shared by the NV row vectors. No weight panel is
 * packed: at 44 tokens each F32 panel served only 4 row blocks, and its packing (a transpose
 * read from memory and stored again) was 16-19% of the prefill. Each output is still one chain
 * over k in order from 0 (fma is exact in either operand order), so the bits are the packed
 * tile's and the portable chain's. A tile is SB_NO outputs x NV row vectors (24 accumulators at
 * 44 rows: 24 FMAs for NV vector loads and 8 broadcasts per k); its 8 weight rows are one
 * contiguous block, and the next tile's block is prefetched to L2 over this one's k loop.
 * F32 weights only: for BF16 a widening per weight in the loop (a dword broadcast, then a shift
 * or an AND) shares the FMA ports and measured 5-15% slower than the BF16-pair panels, and
 * widening 64 columns of the 8 rows at a time into an L1 buffer measured 0.91-1.16x their time
 * (docs/performance.md, Session 6), so BF16 short prompts keep the panels (and the packed
 * inputs' 14-row blocks: gemm_xpack's bf16 argument). */
enum { SHORT512 = 48, SB_NO = 8 };

/* acc[j][v] lane m = chain of output r + j (rows r .. r + 7 all exist) for input row 16 v + m;
 * T[j * 48 + 16 v + m] <- acc. */
AVX512 static inline __attribute__((always_inline)) void stile_512(
    const int NV, int in, const float *P, int nb, const float *W, int r, const char *pf, int npf,
    float *T) {
    __m512 acc[SB_NO][3];
    const int wl = nb - 16 * (NV - 1); /* rows of the last block, 1..16 */
    const __mmask16 ml = (__mmask16)(wl >= 16 ? 0xffff : (1u << wl) - 1);
    const float *xb[3];
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++) xb[v] = P + (size_t)16 * v * in;
#pragma GCC unroll 8
    for (int j = 0; j < SB_NO; j++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) acc[j][v] = _mm512_setzero_ps();
    {
        /* the 8 rows through two pointers and the row stride (rows 0-3 and 4-7 at 0, s, 2s,
         * 3s), so the loop's addresses need 4 registers, not 8 row pointers (gcc spilled those
         * and reloaded 6 of them per column) */
        const ptrdiff_t s = (ptrdiff_t)in * 4, s3 = 3 * s;
        const char *pa = (const char *)(W + (size_t)r * in), *pb = pa + 4 * s;
        for (int k = 0; k < in; k++, pa += 4, pb += 4) {
            if (npf > 0 && !(k & 1)) _mm_prefetch(pf, _MM_HINT_T1), pf += 64, npf--;
            __m512 x[3];
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++)
                x[v] = v + 1 < NV ? _mm512_loadu_ps(xb[v] + (size_t)16 * k)
                                  : _mm512_maskz_loadu_ps(ml, xb[v] + (size_t)wl * k);
            const char *q[SB_NO] = {pa, pa + s, pa + 2 * s, pa + s3, pb, pb + s, pb + 2 * s, pb + s3};
#pragma GCC unroll 8
            for (int j = 0; j < SB_NO; j++) {
                const __m512 w = _mm512_set1_ps(*(const float *)q[j]);
#pragma GCC unroll 3
                for (int v = 0; v < NV; v++) acc[j][v] = _mm512_fmadd_ps(w, x[v], acc[j][v]);
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < SB_NO; j++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) _mm512_store_ps(T + j * SHORT512 + 16 * v, acc[j][v]);
}

/* Y[t, r + j] for t < nb, c0 <= j < 8 from T (8 x 8 transposes), the bias and then, when
 * accumulate, the old Y added as chain_store does. */
AVX512 static void sfinish_512(const float *T, int nb, float *Y, size_t ldy, int r, int c0,
                               const float *b, int accumulate) {
    const __mmask8 mk = (__mmask8)(0xffu << c0);
    const __m256 bv = b ? _mm256_maskz_loadu_ps(mk, b + r) : _mm256_setzero_ps();
    for (int t0 = 0; t0 < nb; t0 += 8) {
        __m256 v[8];
        for (int j = 0; j < 8; j++) v[j] = _mm256_load_ps(T + j * SHORT512 + t0);
        tr8(v);
        const int n = nb - t0 < 8 ? nb - t0 : 8;
        for (int i = 0; i < n; i++) {
            float *y = Y + (size_t)(t0 + i) * ldy + r;
            __m256 s = v[i];
            if (b) s = _mm256_add_ps(s, bv);
            if (accumulate) s = _mm256_add_ps(_mm256_maskz_loadu_ps(mk, y), s);
            _mm256_mask_storeu_ps(y, mk, s);
        }
    }
}

#define STILE512(NV_)                                                                           \
    AVX512 static void stile512_##NV_(int in, const float *P, int nb, const float *W, int r,   \
                                      const char *pf, int npf, float *T) {                      \
        stile_512(NV_, in, P, nb, W, r, pf, npf, T);                                            \
    }
STILE512(1) STILE512(2) STILE512(3)
#undef STILE512

/* Y rows r0 .. r1 - 1 of nb <= SHORT512 inputs packed in 16-row blocks (xb_count). A last
 * tile of fewer than 8 rows is the 8 rows ending at r1 (rows before r0 exist in W), storing
 * only its own; a matrix range ending before row 8 runs the scalar chain. */
AVX512 static void gemm_short_512(float *Y, size_t ldy, const float *P, int nb, const void *W,
                                  int bf16, const float *b, int in, int r0, int r1,
                                  int accumulate) {
    typedef void (*stile_fn)(int, const float *, int, const float *, int, const char *, int,
                             float *);
    static const stile_fn tf[4] = {NULL, stile512_1, stile512_2, stile512_3};
    (void)bf16; /* F32 only: see SHORT512 */
    if (r1 < SB_NO) {
        gemm_chain_short(Y, ldy, P, nb, W, 0, b, in, r0, r1, accumulate);
        return;
    }
    const stile_fn f = tf[(nb + 15) / 16];
    const size_t esz = 4;
    _Alignas(64) float T[SB_NO * SHORT512];
    for (int r = r0; r < r1; r += SB_NO) {
        const int rt = r1 - r < SB_NO ? r1 - SB_NO : r;
        const int nn = r + SB_NO < r1 ? (r1 - r - SB_NO < SB_NO ? r1 - r - SB_NO : SB_NO) : 0;
        const char *pf = (const char *)W + (size_t)(r + SB_NO) * in * esz;
        f(in, P, nb, W, rt, pf, (int)(((size_t)nn * in * esz + 63) / 64), T);
        sfinish_512(T, nb, Y, ldy, rt, r - rt, b, accumulate);
    }
}

static const gemm_level level512 = {
    NR512, 14, pack_512, xpack_512,
    {NULL, tile512_1, tile512_2, tile512_3, tile512_4, tile512_5, tile512_6, tile512_7,
     tile512_8, tile512_9, tile512_10, tile512_11, tile512_12, tile512_13, tile512_14},
    packh_512,
    {NULL, tileh512_1, tileh512_2, tileh512_3, tileh512_4, tileh512_5, tileh512_6, tileh512_7,
     tileh512_8, tileh512_9, tileh512_10, tileh512_11, tileh512_12, tileh512_13, tileh512_14},
    SHORT512, PF_ALL, gemm_short_512, 0};

static void gemm_xpack_avx512(float *P, const float *X, size_t ldx, int nb, int in, int i0,
                              int i1, int bf16) {
    xpack_blocks(xpack_512, 14, bf16 ? 0 : SHORT512, P, X, ldx, nb, in, i0, i1);
}
AVX512 static void gemm_f32_packed_avx512(float *Y, size_t ldy, const float *P, int nb,
                                          const float *W, const float *b, int in, int r0, int r1,
                                          int accumulate) {
    gemm_drive_packed(&level512, Y, ldy, P, nb, W, 0, b, in, r0, r1, accumulate);
}
AVX512 static void gemm_bf16_packed_avx512(float *Y, size_t ldy, const float *P, int nb,
                                           const uint16_t *W, const float *b, int in, int r0,
                                           int r1, int accumulate) {
    gemm_drive_packed(&level512, Y, ldy, P, nb, W, 1, b, in, r0, r1, accumulate);
}

static size_t gemm_f32_panels_size_avx512(int rows, int in) {
    return panels_size(&level512, rows, in);
}
AVX512 static void gemm_f32_panels_avx512(float *dst, const float *W, int rows, int in) {
    panels_pack(&level512, dst, W, rows, in);
}
AVX512 static void gemm_f32_prepacked_avx512(float *Y, size_t ldy, const float *X, size_t ldx,
                                             int nb, const float *Wp, const float *W,
                                             const float *b, int in, int r0, int r1,
                                             int accumulate) {
    gemm_drive_prepacked(&level512, Y, ldy, X, ldx, nb, Wp, W, b, in, r0, r1, accumulate);
}

AVX512 static void gemm_f32_prepacked_packed_avx512(float *Y, size_t ldy, const float *P, int nb,
                                                    const float *Wp, const float *W,
                                                    const float *b, int in, int r0, int r1,
                                                    int accumulate) {
    gemm_drive_prepacked_xp(&level512, Y, ldy, P, nb, Wp, W, b, in, r0, r1, accumulate);
}

AVX512 static void gemm_f32_avx512(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                   const float *W, const float *b, int in, int r0, int r1,
                                   int accumulate) {
    gemm_drive(&level512, Y, ldy, X, ldx, nb, W, 0, b, in, r0, r1, accumulate);
}
AVX512 static void gemm_bf16_avx512(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                    const uint16_t *W, const float *b, int in, int r0, int r1,
                                    int accumulate) {
    gemm_drive(&level512, Y, ldy, X, ldx, nb, W, 1, b, in, r0, r1, accumulate);
}

/* ---------------------------------------------------------- AVX-512 BF16: the vdpbf16ps route */

/* The BF16 prompt GEMM with vdpbf16ps, for CPUs where it issues at the FMA's rate (Zen 5: 2 per
 * cycle each, and one vdpbf16ps is 32 multiply-adds against the FMA's 16; WB_BF16_DOT=1, cpu.c). The
 * same driver, panels and thread split as the widening route: the panels are packh_512's BF16
 * pairs (half the bytes of widened ones, no widening), the inputs are rounded to BF16 (round to
 * nearest even) and packed once per call as pairs, and the tile is MR inputs x 32 weight rows,
 * per pair of columns two weight loads and MR dword broadcasts for 2 MR vdpbf16ps. Each output is
 * one chain over the pairs in column order from 0 whatever nb, the tile or the K block, so a row
 * gets the same bits in any call; not the widening route's bits (the activations are rounded,
 * and the instruction adds a pair's two exact products in FP32 its own way). */
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,prfchw")))

/* One block of packed inputs as BF16 pairs: per 32 columns, each of the mr <= 16 rows rounded
 * to 16 dwords of pairs (a zero pad past in), then a 16 x 16 dword transpose, each pair column
 * stored as mr dwords. */
AVX512BF16 static void xpackd_512(float *d, const float *s, size_t ldx, int mr, int in) {
    const __mmask16 mm = (__mmask16)((1u << mr) - 1);
    for (int k = 0; k < in; k += 32) {
        const int kw = in - k < 32 ? in - k : 32;
        const __mmask16 m0 = (__mmask16)(kw >= 16 ? 0xffff : (1u << kw) - 1);
        const __mmask16 m1 = (__mmask16)(kw >= 32 ? 0xffff : kw > 16 ? (1u << (kw - 16)) - 1 : 0);
        __m512 v[16];
        for (int j = 0; j < 16; j++) {
            const float *x = s + (size_t)(j < mr ? j : 0) * ldx + k;
            const __m512 lo = _mm512_maskz_loadu_ps(j < mr ? m0 : 0, x);
            const __m512 hi = _mm512_maskz_loadu_ps(j < mr ? m1 : 0, x + 16);
            v[j] = _mm512_castsi512_ps((__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
        wb_tr16_512(v);
        for (int c = 0; 2 * c < kw; c++) _mm512_mask_storeu_ps(d + (size_t)(k / 2 + c) * mr, mm, v[c]);
    }
}

/* One step of a pair of columns: the tile's two pair vectors times each of its MR inputs' pair
 * (one dword broadcast each). */
AVX512BF16 static inline __attribute__((always_inline)) void dot_rows_512(const int MR, __m512i w0,
                                                                          __m512i w1, const float *xp,
                                                                          __m512 *a0, __m512 *a1) {
#pragma GCC unroll 14
    for (int m = 0; m < MR; m++) {
        const __m512bh x = (__m512bh)_mm512_castps_si512(_mm512_set1_ps(xp[m]));
        a0[m] = _mm512_dpbf16_ps(a0[m], x, (__m512bh)w0);
        a1[m] = _mm512_dpbf16_ps(a1[m], x, (__m512bh)w1);
    }
}

/* tile_512 over a packh_512 panel and pair-packed inputs: kc columns are (kc + 1) / 2 pairs (the
 * pad of an odd width is zero in both). */
AVX512BF16 static inline __attribute__((always_inline)) void tiled_512(
    const int MR, int kc, const float *xp, const float *wp, const float *cin, float *cout,
    float *Y, size_t ldy, int nr, const float *b, int accumulate, const char *pf, int npf) {
    y_prefetch_512(MR, Y, ldy, nr, cout);
    __m512 a0[MR_MAX], a1[MR_MAX];
    acc_start_512(MR, cin, a0, a1);
    const int np = (kc + 1) / 2;
    /* the prefetches spread over the whole loop, one every ps pairs */
    const int ps = npf > 0 && np > npf ? np / npf : 1;
    for (int p = 0, cd = 1; p < np; p++, xp += MR, wp += NR512) {
        if (npf > 0 && --cd == 0) _mm_prefetch(pf, _MM_HINT_T1), pf += 64, npf--, cd = ps;
        dot_rows_512(MR, _mm512_load_si512(wp), _mm512_load_si512(wp + 16), xp, a0, a1);
    }
    acc_finish_512(MR, a0, a1, cout, Y, ldy, nr, b, accumulate);
}

#define TILE512_ATTR AVX512BF16
TILES512(tiled512, tiled_512)
#undef TILE512_ATTR
#undef TILES512
#undef TILE512_AT

static const gemm_level level512d = {
    NR512, 14, packh_512, xpackd_512,
    {NULL, tiled512_1, tiled512_2, tiled512_3, tiled512_4, tiled512_5, tiled512_6, tiled512_7,
     tiled512_8, tiled512_9, tiled512_10, tiled512_11, tiled512_12, tiled512_13, tiled512_14},
    NULL, {NULL}, 0, PF_ALL, NULL, 1};

/* F32 weights keep the level's packing (SHORT512 blocks for short prompts); BF16 ones pairs */
AVX512BF16 static void gemm_xpack_avx512d(float *P, const float *X, size_t ldx, int nb, int in,
                                          int i0, int i1, int bf16) {
    if (bf16) xpack_blocks(xpackd_512, 14, 0, P, X, ldx, nb, in, i0, i1);
    else xpack_blocks(xpack_512, 14, SHORT512, P, X, ldx, nb, in, i0, i1);
}
AVX512BF16 static void gemm_bf16_packed_avx512d(float *Y, size_t ldy, const float *P, int nb,
                                                const uint16_t *W, const float *b, int in, int r0,
                                                int r1, int accumulate) {
    gemm_drive_packed(&level512d, Y, ldy, P, nb, W, 1, b, in, r0, r1, accumulate);
}
/* (where the buffers cannot be had, gemm_drive falls back to the widening chain: within the
 * same bound) */
AVX512BF16 static void gemm_bf16_avx512d(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                         const uint16_t *W, const float *b, int in, int r0, int r1,
                                         int accumulate) {
    gemm_drive(&level512d, Y, ldy, X, ldx, nb, W, 1, b, in, r0, r1, accumulate);
}

/* The rounding of xpackd_512 (vcvtne2ps2bf16) without the packing: for the GEMV, which then
 * multiplies the same BF16 activations as the prompt tiles (route512d.xround). */
AVX512BF16 static void xround_512d(float *D, const float *X, size_t ldx, int nb, int in) {
    for (int t = 0; t < nb; t++) {
        const float *x = X + (size_t)t * ldx;
        float *d = D + (size_t)t * in;
        for (int i = 0; i < in; i += 32) {
            const int n = in - i < 32 ? in - i : 32;
            const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
            const __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
            const __m512 lo = _mm512_maskz_loadu_ps(m0, x + i), hi = _mm512_maskz_loadu_ps(m1, x + i + 16);
            const __m512i r = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* lo's 16 BF16, then hi's */
            const __m512i wl = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(r)), 16);
            const __m512i wh = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(r, 1)), 16);
            _mm512_mask_storeu_ps(d + i, m0, _mm512_castsi512_ps(wl));
            _mm512_mask_storeu_ps(d + i + 16, m1, _mm512_castsi512_ps(wh));
        }
    }
}

static const wb_gemm_bf16_route route512 = {"avx512 widened 14x32 fma", 1, 0, xrow_plain,
                                            gemm_xpack_avx512, gemm_bf16_avx512,
                                            gemm_bf16_packed_avx512, NULL};
static const wb_gemm_bf16_route route512d = {"avx512-bf16 dpbf16 tile 14x32", 0, 1, xrow_plain,
                                             gemm_xpack_avx512d, gemm_bf16_avx512d,
                                             gemm_bf16_packed_avx512d, xround_512d};

/* The AMX route (kernels_amx.c): F32 weights keep the level's packing in the same rows (P's rows
 * are the AMX layout's size, which is larger); where the AMX buffers cannot be had, the
 * widening route runs (its exact chain is within the route's bound). */
static size_t xrow_amx(int in) {
    const size_t a = wb_amx_xrow(in);
    return a > (size_t)in ? a : (size_t)in;
}
static void gemm_xpack_amx(float *P, const float *X, size_t ldx, int nb, int in, int i0, int i1,
                           int bf16) {
    if (bf16) wb_amx_xpack(P, X, ldx, nb, in, i0, i1);
    else gemm_xpack_avx512(P, X, ldx, nb, in, i0, i1, 0);
}
static void gemm_bf16_packed_amx(float *Y, size_t ldy, const float *P, int nb, const uint16_t *W,
                                 const float *b, int in, int r0, int r1, int accumulate) {
    wb_amx_gemm_bf16_packed(Y, ldy, P, nb, W, b, in, r0, r1, accumulate);
}
static void gemm_bf16_amx(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                          const uint16_t *W, const float *b, int in, int r0, int r1,
                          int accumulate) {
    if (wb_amx_gemm_bf16(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate) == 0) return;
    gemm_bf16_avx512(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
}
static const wb_gemm_bf16_route route512a = {"amx bf16 tiles 32x32, inputs as 3 bf16 parts", 0, 0,
                                             xrow_amx, gemm_xpack_amx, gemm_bf16_amx,
                                             gemm_bf16_packed_amx, NULL};

/* ------------------------------------------------------------------------------ AVX2 */

enum { NR256 = 16, MR256 = 6 };

AVX2 static void pack_256(float *dst, const void *W, int bf16, int in, int r, int nr, int k0,
                          int kc) {
    const int kc8 = kc & ~7;
    for (int h = 0; h < 2; h++) {
        const int nh = nr - 8 * h < 0 ? 0 : nr - 8 * h > 8 ? 8 : nr - 8 * h;
        float *d = dst + 8 * h;
        for (int kk = 0; kk < kc8; kk += 8) {
            __m256 v[8];
            for (int j = 0; j < 8; j++) {
                if (j >= nh) {
                    v[j] = _mm256_setzero_ps();
                } else if (bf16) {
                    const uint16_t *s = (const uint16_t *)W + (size_t)(r + 8 * h + j) * in + k0 + kk;
                    v[j] = _mm256_castsi256_ps(_mm256_slli_epi32(
                        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)s)), 16));
                } else {
                    v[j] = _mm256_loadu_ps((const float *)W + (size_t)(r + 8 * h + j) * in + k0 + kk);
                }
            }
            tr8(v);
            for (int i = 0; i < 8; i++) _mm256_store_ps(d + (size_t)(kk + i) * NR256, v[i]);
        }
        for (int k = kc8; k < kc; k++) /* the last kc % 8 columns */
            for (int j = 0; j < 8; j++) {
                const size_t o = (size_t)(r + 8 * h + j) * in + k0 + k;
                d[(size_t)k * NR256 + j] = j >= nh ? 0.0f
                                           : bf16  ? bf16f(((const uint16_t *)W)[o])
                                                   : ((const float *)W)[o];
            }
    }
}

AVX2 static inline __m256i lanes_below(int n) { /* all-ones in lanes < n */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One block of packed inputs: 8 columns of mr <= 6 rows per 8 x 8 transpose, the last in % 8
 * columns in scalar code. */
AVX2 static void xpack_256(float *d, const float *s, size_t ldx, int mr, int in) {
    const __m256i mm = lanes_below(mr);
    const int in8 = in & ~7;
    for (int k = 0; k < in8; k += 8) {
        __m256 v[8];
        for (int j = 0; j < 8; j++)
            v[j] = j < mr ? _mm256_loadu_ps(s + (size_t)j * ldx + k) : _mm256_setzero_ps();
        tr8(v);
        for (int c = 0; c < 8; c++) _mm256_maskstore_ps(d + (size_t)(k + c) * mr, mm, v[c]);
    }
    for (int k = in8; k < in; k++)
        for (int m = 0; m < mr; m++) d[(size_t)k * mr + m] = s[(size_t)m * ldx + k];
}

AVX2 static inline __attribute__((always_inline)) void tile_256(
    const int MR, int kc, const float *xp, const float *wp, const float *cin, float *cout,
    float *Y, size_t ldy, int nr, const float *b, int accumulate, const char *pf, int npf) {
    __m256 a0[MR256], a1[MR256];
#pragma GCC unroll 6
    for (int m = 0; m < MR; m++) {
        a0[m] = cin ? _mm256_load_ps(cin + m * NR256) : _mm256_setzero_ps();
        a1[m] = cin ? _mm256_load_ps(cin + m * NR256 + 8) : _mm256_setzero_ps();
    }
    for (int k = 0; k < kc; k++, xp += MR, wp += NR256) {
        if (npf > 0 && (k & 1) == 0) _mm_prefetch(pf, _MM_HINT_T1), pf += 64, npf--;
        const __m256 w0 = _mm256_load_ps(wp), w1 = _mm256_load_ps(wp + 8);
#pragma GCC unroll 6
        for (int m = 0; m < MR; m++) {
            const __m256 x = _mm256_broadcast_ss(xp + m);
            a0[m] = _mm256_fmadd_ps(w0, x, a0[m]);
            a1[m] = _mm256_fmadd_ps(w1, x, a1[m]);
        }
    }
    if (cout) {
#pragma GCC unroll 6
        for (int m = 0; m < MR; m++) {
            _mm256_store_ps(cout + m * NR256, a0[m]);
            _mm256_store_ps(cout + m * NR256 + 8, a1[m]);
        }
        return;
    }
    const __m256i k0 = lanes_below(nr), k1 = lanes_below(nr - 8);
    const __m256 b0 = b ? _mm256_maskload_ps(b, k0) : _mm256_setzero_ps();
    const __m256 b1 = b ? _mm256_maskload_ps(b + 8, k1) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int m = 0; m < MR; m++) {
        float *y = Y + (size_t)m * ldy;
        __m256 v0 = a0[m], v1 = a1[m];
        if (b) v0 = _mm256_add_ps(v0, b0), v1 = _mm256_add_ps(v1, b1);
        if (accumulate) {
            v0 = _mm256_add_ps(_mm256_maskload_ps(y, k0), v0);
            v1 = _mm256_add_ps(_mm256_maskload_ps(y + 8, k1), v1);
        }
        _mm256_maskstore_ps(y, k0, v0);
        _mm256_maskstore_ps(y + 8, k1, v1);
    }
}

#define TILE256(M_)                                                                              \
    AVX2 static void tile256_##M_(int kc, const float *xp, const float *wp, const float *cin,    \
                                  float *cout, float *Y, size_t ldy, int nr, const float *b,     \
                                  int accumulate, const char *pf, int npf) {                     \
        tile_256(M_, kc, xp, wp, cin, cout, Y, ldy, nr, b, accumulate, pf, npf);       \
    }
TILE256(1) TILE256(2) TILE256(3) TILE256(4) TILE256(5) TILE256(6)
#undef TILE256

static const gemm_level level256 = {
    NR256, MR256, pack_256, xpack_256,
    {NULL, tile256_1, tile256_2, tile256_3, tile256_4, tile256_5, tile256_6},
    NULL, {NULL}, 0, 0, NULL, 0};

static void gemm_xpack_avx2(float *P, const float *X, size_t ldx, int nb, int in, int i0,
                            int i1, int bf16) {
    (void)bf16;
    xpack_blocks(xpack_256, MR256, 0, P, X, ldx, nb, in, i0, i1);
}
AVX2 static void gemm_f32_packed_avx2(float *Y, size_t ldy, const float *P, int nb,
                                      const float *W, const float *b, int in, int r0, int r1,
                                      int accumulate) {
    gemm_drive_packed(&level256, Y, ldy, P, nb, W, 0, b, in, r0, r1, accumulate);
}
AVX2 static void gemm_bf16_packed_avx2(float *Y, size_t ldy, const float *P, int nb,
                                       const uint16_t *W, const float *b, int in, int r0, int r1,
                                       int accumulate) {
    gemm_drive_packed(&level256, Y, ldy, P, nb, W, 1, b, in, r0, r1, accumulate);
}

static size_t gemm_f32_panels_size_avx2(int rows, int in) {
    return panels_size(&level256, rows, in);
}
AVX2 static void gemm_f32_panels_avx2(float *dst, const float *W, int rows, int in) {
    panels_pack(&level256, dst, W, rows, in);
}
AVX2 static void gemm_f32_prepacked_avx2(float *Y, size_t ldy, const float *X, size_t ldx,
                                         int nb, const float *Wp, const float *W, const float *b,
                                         int in, int r0, int r1, int accumulate) {
    gemm_drive_prepacked(&level256, Y, ldy, X, ldx, nb, Wp, W, b, in, r0, r1, accumulate);
}

AVX2 static void gemm_f32_prepacked_packed_avx2(float *Y, size_t ldy, const float *P, int nb,
                                                const float *Wp, const float *W, const float *b,
                                                int in, int r0, int r1, int accumulate) {
    gemm_drive_prepacked_xp(&level256, Y, ldy, P, nb, Wp, W, b, in, r0, r1, accumulate);
}

AVX2 static void gemm_f32_avx2(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                               const float *W, const float *b, int in, int r0, int r1,
                               int accumulate) {
    gemm_drive(&level256, Y, ldy, X, ldx, nb, W, 0, b, in, r0, r1, accumulate);
}
AVX2 static void gemm_bf16_avx2(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                const uint16_t *W, const float *b, int in, int r0, int r1,
                                int accumulate) {
    gemm_drive(&level256, Y, ldy, X, ldx, nb, W, 1, b, in, r0, r1, accumulate);
}
static const wb_gemm_bf16_route route256 = {"avx2 widened 6x16 fma", 1, 0, xrow_plain, gemm_xpack_avx2,
                                            gemm_bf16_avx2, gemm_bf16_packed_avx2, NULL};
#endif

static const wb_gemm_bf16_route route_portable = {"portable fused chain", 1, 0, xrow_plain, gemm_xpack_portable,
                                                  gemm_bf16_portable, gemm_bf16_packed_portable, NULL};

/* The level's BF16 route as the table's gemm_bf16 / gemm_bf16_packed / gemm_xpack. */
static void use_route(wb_kernel_table *t, const wb_gemm_bf16_route *r) {
    t->gemm_bf16 = r->gemm;
    t->gemm_bf16_packed = r->gemm_packed;
    t->gemm_xpack = r->xpack;
    t->gemm_xrow = r->xrow;
    t->bf16_prompt = r;
    t->name_gemm_bf16_prompt = r->name;
}

void wb_kernels_gemm_register(wb_kernel_table *t, wb_isa isa) {
    if (isa == WB_ISA_PORTABLE) {
        t->gemm_f32 = gemm_f32_portable;
        t->gemm_bf16 = gemm_bf16_portable;
        t->gemm_mr = 1;
        t->gemm_xpack = gemm_xpack_portable;
        t->gemm_f32_packed = gemm_f32_packed_portable;
        t->gemm_bf16_packed = gemm_bf16_packed_portable;
        t->gemm_nr = 0;
        t->gemm_f32_panels_size = NULL;
        t->gemm_f32_panels = NULL;
        t->gemm_f32_prepacked = NULL;
        t->gemm_f32_prepacked_packed = NULL;
        t->name_gemm = "portable fused chain";
        t->bf16_route[0] = &route_portable, t->bf16_route[1] = t->bf16_route[2] = NULL;
        use_route(t, &route_portable);
    }
#ifdef WB_X86
    if (isa == WB_ISA_AVX2) {
        t->gemm_f32 = gemm_f32_avx2;
        t->gemm_bf16 = gemm_bf16_avx2;
        t->gemm_mr = MR256;
        t->gemm_xpack = gemm_xpack_avx2;
        t->gemm_f32_packed = gemm_f32_packed_avx2;
        t->gemm_bf16_packed = gemm_bf16_packed_avx2;
        t->gemm_nr = NR256;
        t->gemm_f32_panels_size = gemm_f32_panels_size_avx2;
        t->gemm_f32_panels = gemm_f32_panels_avx2;
        t->gemm_f32_prepacked = gemm_f32_prepacked_avx2;
        t->gemm_f32_prepacked_packed = gemm_f32_prepacked_packed_avx2;
        t->name_gemm = "avx2 packed 6x16 outer product";
        t->bf16_route[0] = &route256, t->bf16_route[1] = t->bf16_route[2] = NULL;
        use_route(t, &route256);
    }
    if (isa == WB_ISA_AVX512) {
        t->gemm_f32 = gemm_f32_avx512;
        t->gemm_bf16 = gemm_bf16_avx512;
        t->gemm_mr = 14;
        t->gemm_xpack = gemm_xpack_avx512;
        t->gemm_f32_packed = gemm_f32_packed_avx512;
        t->gemm_bf16_packed = gemm_bf16_packed_avx512;
        t->gemm_nr = NR512;
        t->gemm_f32_panels_size = gemm_f32_panels_size_avx512;
        t->gemm_f32_panels = gemm_f32_panels_avx512;
        t->gemm_f32_prepacked = gemm_f32_prepacked_avx512;
        t->gemm_f32_prepacked_packed = gemm_f32_prepacked_packed_avx512;
        t->name_gemm = "avx512 packed 14x32 outer product, up to 48 rows 8x48 broadcast";
        t->bf16_route[0] = &route512;
        t->bf16_route[1] = t->cpu->avx512bf16 ? &route512d : NULL;
        t->bf16_route[2] = t->cpu->amx_bf16 ? &route512a : NULL;
        use_route(t, t->cpu->bf16_amx ? &route512a
                     : t->cpu->bf16_dot && t->bf16_route[1] ? &route512d
                                                             : &route512);
    }
#endif
}
