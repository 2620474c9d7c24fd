/* cpu.h - the one CPU-feature probe and the one kernel dispatch table (not a public API).
 *
 * core/cpu.c          probes the CPU once, builds one table per instruction-set level
 * core/kernels.c      F32 kernels (GEMV, LayerNorm, GELU, softmax): portable, AVX2, AVX-512
 * core/kernels_attention.c  causal attention (decode and prefill blocks): portable, AVX2, AVX-512
 * core/kernels_bf16.c BF16 GEMV / GEMM, RMSNorm, SwiGLU: portable, AVX2, AVX-512
 * core/kernels_gemm.c the prompt GEMM for F32 / BF16 weights (packed panels): portable, AVX2, AVX-512
 * core/kernels_amx.c  the BF16 prompt GEMM on AMX tiles (a route of the AVX-512 level)
 * core/quant.c        Q8_0 / Q4_0 / Q4_K / Q6_K / Q5_0 integer dot products: portable, AVX2,
 *                     AVX-512 VNNI
 *
 * Every kernel file registers its functions per level (wb_kernels_*_register); a level starts as
 * a copy of the level below, so a kernel without an AVX-512 version runs its AVX2 one there.
 * Callers go through wb_kt(), which is the table of the level in use: the best the CPU supports
 * unless a test capped it with wb_isa_limit (every path the CPU supports is then compared with
 * the portable one on the same inputs). The sampler asks wb_isa_current() too.
 */
#ifndef WB_CPU_H
#define WB_CPU_H

#include <stddef.h>
#include <stdint.h>

typedef enum wb_isa {
    WB_ISA_PORTABLE = 0, /* plain C, any machine */
    WB_ISA_AVX2 = 1,     /* AVX2 + FMA + F16C */
    WB_ISA_AVX512 = 2,   /* AVX-512 F/BW/DQ/VL (+ VNNI, BF16 when present) */
    WB_ISA_COUNT
} wb_isa;

typedef struct wb_cpu_features {
    int avx2, fma, f16c;
    int avx512f, avx512bw, avx512dq, avx512vl;
    int avx512vnni, avx512bf16, avx512fp16, avxvnni;
    int amx;       /* AMX-TILE reported by CPUID */
    /* AMX-TILE + AMX-BF16 usable: the CPU has them, the OS saves the tile state (XCR0 bits 17-18)
     * and granted this process the tile data (Linux arch_prctl ARCH_REQ_XCOMP_PERM, asked once) */
    int amx_bf16;
    int amd;    /* vendor AuthenticAMD (OpenBLAS core names differ) */
    int family; /* CPUID display family (base + extended): 0x19 Zen 3/4, 0x1a Zen 5 */
    /* The BF16 prompt GEMM's route at the AVX-512 level: 1 vdpbf16ps, 0 widening + FMA.
     * bf16_dot_faster: this CPU is one where vdpbf16ps is the faster route (AVX512_BF16 on AMD
     * family 0x19+, where it issues at the FMA rate and so does twice the FLOPs; not Intel, where
     * it issues at half that rate). bf16_dot is bf16_dot_faster unless WB_BF16_DOT says 1 or 0
     * (1 only with AVX512_BF16). The route rounds the activations to BF16, and then so does the
     * BF16 GEMV (wb_gemv_bf16_forward), so cached and uncached generation still multiply the
     * same values (docs/performance.md, Sessions 10 and 17) */
    int bf16_dot, bf16_dot_faster;
    /* 1: the BF16 prompt GEMM runs on AMX tiles (kernels_amx.c), the default where amx_bf16;
     * WB_AMX=0 turns it off (to measure the AVX-512 routes on such a CPU) */
    int bf16_amx;
    /* 1: the AVX-512 decode GEMV over the Q8_0 / Q4_0 / Q5_0 tile layout prefetches the next
     * 16-row group (15-82 KB ahead) as it goes; 0 (the default): it leaves its one linear stream
     * to the hardware prefetchers, which on Zen 4 decoded the aligned tiles faster (Q8_0 10-22%,
     * Q4_0 / Q5_0 2-10%), and every software distance from 1 block to a group ahead slower
     * (docs/performance.md Session 18; not measured on Intel). WB_QPREFETCH=1 turns it on */
    int qgemv_prefetch;
} wb_cpu_features;

/* What this CPU has (probed once, thread-safe). */
const wb_cpu_features *wb_cpu(void);
/* Sets qgemv_prefetch (above) for the process and returns the previous setting: for benchmarks
 * comparing both in one run, not for use while other threads decode. */
int wb_cpu_set_qgemv_prefetch(int on);
/* The best level the CPU supports, and the level in use (best, capped by wb_isa_limit). */
wb_isa wb_isa_best(void);
wb_isa wb_isa_current(void);
/* Cap the level (tests); returns the previous cap. WB_ISA_COUNT - 1 removes the cap. */
wb_isa wb_isa_limit(wb_isa max);
/* "portable", "avx2", "avx512" */
const char *wb_isa_name(wb_isa isa);
/* One line naming the CPU features and the kernels each operation runs with, for
 * wb.blas_info() and model:info(). Static storage. */
const char *wb_kernels_describe(void);

/* Widens values [k0, k0 + kn) of weight row r to F32 at dst (the tile GEMM's callback: BF16 rows,
 * quantized blocks). k0 is a multiple of WB_TILE_KC, kn <= WB_TILE_KC. */
typedef void (*wb_widen_fn)(const void *ctx, float *dst, int r, int k0, int kn);
#define WB_TILE_KC 1024

/* One route of the BF16 prompt GEMM: the gemm_xpack, gemm_bf16 and gemm_bf16_packed of the
 * table (below) as one set, since the packed inputs' layout belongs to the route. */
typedef struct wb_gemm_bf16_route {
    const char *name;
    /* 1: gives the portable chain's bits; 0: another order of the sums (AMX), or (rounds 1,
     * vdpbf16ps) the activations rounded to BF16, so only within the bound that rounding implies
     * (docs/performance.md) */
    int exact, rounds;
    /* floats a packed input row of `in` values takes in P (xpack's layout; F32 rows take in) */
    size_t (*xrow)(int in);
    void (*xpack)(float *P, const float *X, size_t ldx, int nb, int in, int i0, int i1, int bf16);
    void (*gemm)(float *Y, size_t ldy, const float *X, size_t ldx, int nb, const uint16_t *W,
                 const float *b, int in, int r0, int r1, int accumulate);
    void (*gemm_packed)(float *Y, size_t ldy, const float *P, int nb, const uint16_t *W,
                        const float *b, int in, int r0, int r1, int accumulate);
    /* rounds 1: nb rows of X rounded to BF16 as the route rounds them (same instruction), stored
     * as F32 rows of in values in D, so the BF16 GEMV can read the same activations
     * (wb_gemv_bf16_forward); NULL where the route does not round */
    void (*xround)(float *D, const float *X, size_t ldx, int nb, int in);
} wb_gemm_bf16_route;

typedef struct wb_kernel_table {
    wb_isa isa;
    const wb_cpu_features *cpu; /* for the registration functions: what this CPU has */
    /* F32 (kernels.c; attention: kernels_attention.c) */
    void (*gemv)(float *y, const float *x, const float *W, const float *b, int in, int r0, int r1,
                 int accumulate);
    void (*gemv_batch)(float *Y, size_t ldy, const float *X, size_t ldx, int nb, const float *W,
                       const float *b, int in, int r0, int r1, int accumulate);
    /* x += add (when add), then out = layernorm(x) */
    void (*layernorm)(float *out, float *x, const float *add, const float *w, const float *b,
                      int C, float eps);
    void (*gelu_tanh)(float *x, size_t n);
    void (*softmax)(float *x, int n);
    void (*attention)(float *out, const float *q, const float *k, const float *v, size_t stride,
                      int p, int hs, float *att);
    /* nq queries x ng heads sharing one KV head (wb_attention_block_forward); NULL where the
     * level has no block kernel (the wrapper then loops over queries and heads) */
    void (*attention_block)(float *out, size_t ldo, const float *q, size_t ldq, const float *k,
                            const float *v, size_t ldkv, int pos, int nq, int ng, int hs,
                            int window, float *scratch);
    /* BF16 (kernels_bf16.c) */
    void (*gemv_bf16)(float *Y, size_t ldy, const float *X, size_t ldx, int nb, const uint16_t *W,
                      const float *b, int in, int r0, int r1, int accumulate);
    void (*bf16_to_f32)(float *dst, const uint16_t *src, size_t n);
    void (*rmsnorm)(float *out, const float *x, const float *w, int C, float eps);
    /* g[i] = silu(g[i]) * u[i] */
    void (*swiglu)(float *g, const float *u, size_t n);
    /* Y[j, r] (+)= b[r] + widen(row r) . X[j] for r in [r0, r1), j < nb: a tile of 4 rows x
     * WB_TILE_KC columns is widened once and every input passes over it (prefill GEMM) */
    void (*gemm_tiled)(float *Y, size_t ldy, const float *X, size_t ldx, int nb, wb_widen_fn widen,
                       const void *ctx, const float *b, int in, int r0, int r1, int accumulate);
    /* Prompt rows (kernels_gemm.c), F32 and BF16 weights: Y[j, r] (+)= b[r] + W[r] . X[j] for r in
     * [r0, r1), j < nb, each sum one fused multiply-add chain over the columns in order, whatever
     * nb, the tile or the level (packed panels, outer-product register tiles); BF16 by the
     * vdpbf16ps route (bf16_route below) one chain of pair products over the columns in order,
     * the activations rounded to BF16, whatever nb or the tile */
    void (*gemm_f32)(float *Y, size_t ldy, const float *X, size_t ldx, int nb, const float *W,
                     const float *b, int in, int r0, int r1, int accumulate);
    void (*gemm_bf16)(float *Y, size_t ldy, const float *X, size_t ldx, int nb, const uint16_t *W,
                      const float *b, int in, int r0, int r1, int accumulate);
    /* The same products over inputs packed once by gemm_xpack and shared by every matrix and
     * thread that reads them (q/k/v, gate/up): P holds nb x in floats as at most
     * ceil(nb / gemm_mr) blocks (short prompts may take fewer, larger ones; the indices past
     * them pack nothing), gemm_xpack packs blocks [i0, i1) of them (threads may share the
     * blocks out) for weights of one type (bf16: BF16, else F32; the layout may differ), and
     * the *_packed calls of that type read P packed at the same level and give the unpacked
     * calls' bits. */
    int gemm_mr;
    void (*gemm_xpack)(float *P, const float *X, size_t ldx, int nb, int in, int i0, int i1,
                       int bf16);
    void (*gemm_f32_packed)(float *Y, size_t ldy, const float *P, int nb, const float *W,
                            const float *b, int in, int r0, int r1, int accumulate);
    void (*gemm_bf16_packed)(float *Y, size_t ldy, const float *P, int nb, const uint16_t *W,
                             const float *b, int in, int r0, int r1, int accumulate);
    /* F32 weights packed once (a model's load) into the level's panels of gemm_nr rows (0: the
     * level has none): gemm_f32_panels writes W [rows, in] as gemm_f32_panels_size floats, and
     * gemm_f32_prepacked is gemm_f32 reading them instead of packing W per call, to the bit
     * (it packs W as gemm_f32 does where r0 is not a panel's first row) */
    int gemm_nr;
    size_t (*gemm_f32_panels_size)(int rows, int in);
    void (*gemm_f32_panels)(float *dst, const float *W, int rows, int in);
    void (*gemm_f32_prepacked)(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                               const float *Wp, const float *W, const float *b, int in, int r0,
                               int r1, int accumulate);
    /* gemm_f32_prepacked over inputs P packed by gemm_xpack (as the *_packed calls), to the bit */
    void (*gemm_f32_prepacked_packed)(float *Y, size_t ldy, const float *P, int nb,
                                      const float *Wp, const float *W, const float *b, int in,
                                      int r0, int r1, int accumulate);
    const char *name_gemm;
    /* The BF16 prompt routes of this level: [0] widening + FMA (every level), [1] vdpbf16ps
     * (AVX-512 with AVX512_BF16, else NULL), [2] AMX tiles (AVX-512 with amx_bf16, else NULL).
     * gemm_bf16, gemm_bf16_packed and gemm_xpack are those of the route cpu->bf16_amx and
     * cpu->bf16_dot chose (bf16_prompt); the tests run every one the CPU has. */
    const wb_gemm_bf16_route *bf16_route[3];
    const wb_gemm_bf16_route *bf16_prompt; /* the route in use */
    /* floats a packed input row of `in` values takes in P, for F32 and BF16 weights alike (the
     * route in use: its xrow) */
    size_t (*gemm_xrow)(int in);
    const char *name_gemm_bf16_prompt;
    /* Quantized (quant.c): the dot products and GEMM of Q8_0 / Q4_0 / Q4_K / Q6_K / Q5_0 rows against
     * int8-quantized inputs, one variant per level (quant.h) */
    const struct wb_quant_kernels *quant;
    /* names of the variants registered last, for wb_kernels_describe */
    const char *name_gemv, *name_gemv_bf16, *name_gemm_bf16, *name_dot_q8, *name_attention;
} wb_kernel_table;

/* The table of the level in use. */
const wb_kernel_table *wb_kt(void);

/* Registration, called by cpu.c once per level in order (portable, then AVX2, then AVX-512),
 * each only for a level the CPU supports; t already holds the level below. */
void wb_kernels_f32_register(wb_kernel_table *t, wb_isa isa);
void wb_kernels_bf16_register(wb_kernel_table *t, wb_isa isa);
void wb_kernels_quant_register(wb_kernel_table *t, wb_isa isa);
void wb_kernels_attention_register(wb_kernel_table *t, wb_isa isa);
void wb_kernels_gemm_register(wb_kernel_table *t, wb_isa isa);

/* A 64-byte aligned buffer of n floats for the calling thread, slot < WB_KBUF_SLOTS, kept between
 * calls and freed when the thread ends; NULL when memory is short (callers then work without).
 * Slot 0: the GEMV kernels' packed inputs, the quantized products' int8 inputs; slot 1: the
 * prompt GEMM's panels, the quantized tile kernels' regrouped inputs (never held across a call
 * into another user of the same slot); slot 2: Q5_0 rows widened to Q8_0 for the AVX2 prompt
 * kernels, held while they run; slot 3: the Q4_1 / Q5_1 prompts' value chains (quant.c). */
#define WB_KBUF_SLOTS 4

/* x rounded to BF16 (kept as an F32) as vcvtne2ps2bf16 rounds it, the rounding of the routes
 * whose `rounds` is 1: to nearest even, denormals read as zero, NaN quieted */
float wb_bf16_round(float x);
float *wb_kernel_buf(int slot, size_t n);

/* The AMX route's parts (kernels_amx.c; kernels_gemm.c makes the route of them): packed rows of
 * wb_amx_xrow(in) floats, blocks of 16 rows; where its buffer cannot be had the packed product
 * runs the same products in scalar code, and the unpacked one returns -1 (the caller then runs
 * another route), else 0. */
size_t wb_amx_xrow(int in);
void wb_amx_xpack(float *P, const float *X, size_t ldx, int nb, int in, int i0, int i1);
void wb_amx_gemm_bf16_packed(float *Y, size_t ldy, const float *P, int nb, const uint16_t *W,
                            const float *b, int in, int r0, int r1, int accumulate);
int wb_amx_gemm_bf16(float *Y, size_t ldy, const float *X, size_t ldx, int nb, const uint16_t *W,
                     const float *b, int in, int r0, int r1, int accumulate);

#endif
