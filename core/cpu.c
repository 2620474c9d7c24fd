/* cpu.c - the one CPU-feature probe and the kernel dispatch tables (see cpu.h).
 *
 * The probe reads CPUID and XGETBV itself rather than __builtin_cpu_supports: the AVX-512 level
 * needs the OS to save the ZMM state (XCR0 bits 5-7), and one probe gives kernels, sampler and
 * the BLAS diagnosis the same answer. The environment variable WB_KERNELS=portable|avx2|avx512
 * caps the level for a whole process (benchmarks report the AVX2-only figures with it).
 * The BF16 prompt GEMM's vdpbf16ps route (cpu.h bf16_dot) is the default where it is the faster
 * one, which goes by vendor and family, since what decides it is vdpbf16ps's issue rate against
 * the FMA's, which no feature bit reports; WB_BF16_DOT=0 / 1 overrides. Where the CPU has AMX-BF16
 * and the OS grants the tiles, the BF16 prompt GEMM runs on them (kernels_amx.c) unless WB_AMX=0
 * (or WB_BF16_DOT=1). WB_QPREFETCH=1 turns on the software prefetch of the AVX-512 tile-layout
 * decode GEMV (cpu.h qgemv_prefetch), off by default.
 */
#include "cpu.h"
#include "wb_base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define WB_X86 1
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

static wb_cpu_features g_cpu;
static wb_isa g_best = WB_ISA_PORTABLE;
static wb_kernel_table g_tables[WB_ISA_COUNT];
static atomic_int g_limit = WB_ISA_COUNT - 1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#ifdef WB_X86
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

/* Linux hands the 8 KB of tile data to a process only when it asks (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, 18); a tile instruction without it faults. */
#ifdef WB_X86
static int amx_permit(void) {
#ifdef __linux__
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
    return 0;
#endif
}
#endif

static void probe(void) {
    memset(&g_cpu, 0, sizeof g_cpu);
#ifdef WB_X86
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) g_cpu.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    g_cpu.family = (int)((a >> 8) & 0xf) + ((a >> 8 & 0xf) == 0xf ? (int)((a >> 20) & 0xff) : 0);
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    const int fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return;
    const uint64_t xcr0 = xgetbv0();
    const int os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    if (!os_avx) return;
    g_cpu.fma = fma;
    g_cpu.f16c = f16c;
    unsigned max = __get_cpuid_max(0, NULL);
    if (max < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    g_cpu.avx2 = (b >> 5) & 1;
    if (os_avx512) {
        g_cpu.avx512f = (b >> 16) & 1;
        g_cpu.avx512dq = (b >> 17) & 1;
        g_cpu.avx512bw = (b >> 30) & 1;
        g_cpu.avx512vl = (b >> 31) & 1;
        g_cpu.avx512vnni = (c >> 11) & 1;
        g_cpu.avx512fp16 = (d >> 23) & 1;
    }
    g_cpu.amx = (d >> 24) & 1;
    const int amx_bf16 = g_cpu.amx && ((d >> 22) & 1);
    const unsigned sub = a;    /* leaf 7 subleaf count */
    if (sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        g_cpu.avxvnni = (a >> 4) & 1;
        if (os_avx512) g_cpu.avx512bf16 = (a >> 5) & 1;
    }
    /* the kernels use AVX-512 BF16 conversions beside the tiles */
    if (amx_bf16 && g_cpu.avx512bf16 && (xcr0 & 0x60000) == 0x60000) g_cpu.amx_bf16 = amx_permit();
#endif
}

static wb_isa parse_isa(const char *s, wb_isa dflt) {
    if (!s) return dflt;
    for (int i = 0; i < WB_ISA_COUNT; i++)
        if (strcmp(s, wb_isa_name((wb_isa)i)) == 0) return (wb_isa)i;
    return dflt; /* unknown names leave the level alone */
}

/* vdpbf16ps does 32 multiply-adds per instruction against the FMA's 16: measured on Zen 5
 * (family 0x1a) and Zen 4 (0x19) at the FMA's issue rate, twice the FLOPs, while on Sapphire
 * Rapids it issues at half the FMA rate, no gain for the rounding of the activations
 * (docs/performance.md, Sessions 10 and 17). The default where it is faster; WB_BF16_DOT=0 or 1
 * overrides (cpu.h). */
static void choose_bf16_route(wb_cpu_features *f) {
    f->bf16_dot_faster = f->avx512bf16 && f->amd && f->family >= 0x19;
    const char *e = getenv("WB_BF16_DOT");
    const int said = e && (e[0] == '0' || e[0] == '1') && !e[1];
    f->bf16_dot = f->avx512bf16 && (said ? e[0] == '1' : f->bf16_dot_faster);
    const char *a = getenv("WB_AMX");
    f->bf16_amx = f->amx_bf16 && !f->bf16_dot && !(a && a[0] == '0' && !a[1]);
}

/* The stream prefetch of the AVX-512 tile-layout decode GEMV (cpu.h qgemv_prefetch). */
static void choose_qgemv_prefetch(wb_cpu_features *f) {
    const char *e = getenv("WB_QPREFETCH");
    f->qgemv_prefetch = e && e[0] == '1' && !e[1];
}

static void init(void) {
    probe();
    choose_bf16_route(&g_cpu);
    choose_qgemv_prefetch(&g_cpu);
    const wb_cpu_features *f = &g_cpu;
    if (f->avx2 && f->fma && f->f16c) g_best = WB_ISA_AVX2;
    if (g_best == WB_ISA_AVX2 && f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl)
        g_best = WB_ISA_AVX512;
    wb_kernel_table t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i <= (int)g_best; i++) {
        t.isa = (wb_isa)i;
        t.cpu = &g_cpu;
        wb_kernels_f32_register(&t, (wb_isa)i);
        wb_kernels_bf16_register(&t, (wb_isa)i);
        wb_kernels_quant_register(&t, (wb_isa)i);
        wb_kernels_attention_register(&t, (wb_isa)i);
        wb_kernels_gemm_register(&t, (wb_isa)i);
        g_tables[i] = t;
    }
    for (int i = (int)g_best + 1; i < WB_ISA_COUNT; i++) g_tables[i] = g_tables[g_best];
    wb_isa env = parse_isa(getenv("WB_KERNELS"), WB_ISA_COUNT - 1);
    if ((int)env < atomic_load(&g_limit)) atomic_store(&g_limit, env);
}

const wb_cpu_features *wb_cpu(void) {
    pthread_once(&g_once, init);
    return &g_cpu;
}

int wb_cpu_set_qgemv_prefetch(int on) {
    pthread_once(&g_once, init);
    const int was = g_cpu.qgemv_prefetch;
    g_cpu.qgemv_prefetch = on != 0;
    return was;
}

wb_isa wb_isa_best(void) {
    pthread_once(&g_once, init);
    return g_best;
}

wb_isa wb_isa_current(void) {
    pthread_once(&g_once, init);
    int lim = atomic_load_explicit(&g_limit, memory_order_relaxed);
    return (int)g_best < lim ? g_best : (wb_isa)lim;
}

wb_isa wb_isa_limit(wb_isa max) {
    pthread_once(&g_once, init);
    if ((int)max < 0) max = WB_ISA_PORTABLE;
    if ((int)max >= WB_ISA_COUNT) max = WB_ISA_COUNT - 1;
    return (wb_isa)atomic_exchange(&g_limit, (int)max);
}

const char *wb_isa_name(wb_isa isa) {
    switch (isa) {
    case WB_ISA_PORTABLE: return "portable";
    case WB_ISA_AVX2: return "avx2";
    case WB_ISA_AVX512: return "avx512";
    default: return "unknown";
    }
}

const wb_kernel_table *wb_kt(void) { return &g_tables[wb_isa_current()]; }

const char *wb_kernels_describe(void) {
    static _Thread_local char buf[768];
    const wb_cpu_features *f = wb_cpu();
    const wb_kernel_table *t = wb_kt();
    snprintf(buf, sizeof buf,
             "kernels %s (cpu%s%s%s%s%s%s%s%s): gemv %s, bf16 gemv/gemm %s, prompt gemm %s, bf16 prompt gemm %s%s, tile gemm %s, q8 dot %s, attention %s",
             wb_isa_name(t->isa), f->avx2 ? " avx2" : "", f->fma ? " fma" : "",
             f->avx512f ? " avx512f" : "", f->avx512bw ? " bw" : "",
             f->avx512vnni ? " vnni" : "", f->avx512bf16 ? " bf16" : "",
             f->avx512fp16 ? " fp16" : "", f->amx_bf16 ? " amx-bf16" : f->amx ? " amx(unused)" : "", t->name_gemv,
             t->name_gemv_bf16, t->name_gemm, t->name_gemm_bf16_prompt,
             t->bf16_prompt && t->bf16_prompt->xround ? " (activations rounded to bf16, the gemv's too)"
             : t->isa == WB_ISA_AVX512 && f->bf16_dot_faster && !f->bf16_dot
                 ? " (vdpbf16ps faster here, off by WB_BF16_DOT=0)" : "",
             t->name_gemm_bf16, t->name_dot_q8, t->name_attention);
    return buf;
}

const char *wb_kernels_info(void) { return wb_kernels_describe(); }

int wb_kernels_bf16_input_bits(void) {
    const wb_gemm_bf16_route *r = wb_kt()->bf16_prompt;
    return r && r->xround ? 16 : 32;
}
