/* wb_sampler.h - sampling parameters, the distribution a sampler draws from, and a seeded draw.
 *
 * Order of operations (fixed; docs/sampling.md compares it with llama.cpp, Hugging Face, vLLM):
 *   1. repetition_penalty  on the raw logits of every distinct token already generated
 *                          (CTRL / Hugging Face rule: positive logits divided, negative multiplied)
 *   2. frequency_penalty   logit -= count * frequency_penalty      (OpenAI / vLLM rule)
 *      presence_penalty    logit -= presence_penalty if count > 0
 *   3. logit_bias          logit += bias (added in order; -INFINITY bans the token)
 *      min_tokens          while fewer than min_tokens ids are generated, the end ids are banned
 *                          (stop_token_ids, and the eos ids generation adds: vLLM's rule)
 *      allowed mask        tokens outside an optional bitset are banned (constraint hook)
 *   4. temperature         0: greedy, the distribution is one-hot on the argmax (ties: lowest id)
 *                          and steps 5-7 are skipped; else softmax(logit / temperature)
 *   5. top_k               keep the k most probable tokens (ties at the cut: lower id first)
 *   6. top_p               keep the smallest most-probable set whose mass, renormalised after
 *                          top_k, reaches top_p (the token that crosses the line is kept)
 *   7. min_p               keep tokens with p >= min_p * p_max
 *  7b. typical_p           over the survivors renormalised, entropy H = -sum p ln p; keep the
 *                          tokens whose surprise -ln p is closest to H until their mass reaches
 *                          typical_p, ties with the last kept included (Hugging Face and
 *                          llama.cpp semantics; 1 = off)
 *   8. renormalise         the survivors sum to 1: this is exactly what the draw uses.
 * The single most likely token (after steps 1-4) is never removed by steps 5-7, so under a mask
 * the most likely allowed token always survives and greedy is the argmax of the masked logits.
 * typical_p (7b) is the exception: it can remove the most likely token, by design.
 *
 * mask_stage moves the allowed mask after step 7 instead (the course's reference loop, kept for
 * the lesson that diagnoses it): the filters see the unmasked distribution, the survivors are
 * intersected with the mask and renormalised. When nothing allowed survives (at temperature 0,
 * whenever the argmax is disallowed) WB_MASK_AFTER_FILTERS falls back to the most likely allowed
 * token, and WB_MASK_AFTER_FILTERS_UNIFORM to a uniform distribution over the allowed set, as
 * the reference did - so its greedy pick is the lowest allowed id, not the most likely one.
 *
 * Random numbers: PCG32 (O'Neill's pcg32, XSH-RR output, 64-bit LCG state), one generator per
 * request; a draw takes one uniform double built from two 32-bit outputs and walks the survivors
 * in ascending id order. Greedy decoding consumes no random numbers.
 */
#ifndef WB_SAMPLER_H
#define WB_SAMPLER_H

#include "wb_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================== RNG ============================================ */

/* PCG32. Plain data so it can live inside other objects; seed it before use. */
typedef struct wb_rng {
    uint64_t state;
    uint64_t inc;
} wb_rng;

void wb_rng_seed(wb_rng *rng, uint64_t seed);
uint32_t wb_rng_u32(wb_rng *rng);
/* Uniform in [0, 1) with 53 random bits. */
double wb_rng_uniform(wb_rng *rng);
/* A fresh seed from /dev/urandom (falls back to the clock and an address if unreadable). */
uint64_t wb_rng_entropy_seed(void);

/* ======================================= parameters ======================================== */

typedef struct wb_logit_bias {
    int32_t id;
    float bias; /* finite, or -INFINITY to ban */
} wb_logit_bias;

typedef enum wb_mask_stage {
    WB_MASK_LOGITS = 0,               /* mask the logits before temperature (the default)      */
    WB_MASK_AFTER_FILTERS = 1,        /* mask after the filters, most likely allowed fallback   */
    WB_MASK_AFTER_FILTERS_UNIFORM = 2 /* mask after the filters, uniform fallback (the bug)     */
} wb_mask_stage;

typedef struct wb_sampling_params {
    float temperature;        /* >= 0; 0 = greedy (default 1)                                  */
    int32_t top_k;            /* >= 0; 0 = off (default 0)                                     */
    float top_p;              /* (0, 1]; 1 = off (default 1)                                   */
    float min_p;              /* [0, 1]; 0 = off (default 0)                                   */
    float typical_p;          /* (0, 1]; 1 = off (default 1)                                  */
    int32_t min_tokens;       /* >= 0: end ids banned (and stops not checked) until this many */
    float frequency_penalty;  /* finite (default 0)                                            */
    float presence_penalty;   /* finite (default 0)                                            */
    float repetition_penalty; /* > 0; 1 = off (default 1)                                      */
    const wb_logit_bias *logit_bias; /* n_logit_bias pairs; borrowed, copied by wb_sampler_new */
    int n_logit_bias;
    const char *const *stop;  /* stop strings (non-empty, NUL-terminated); used by generation  */
    int n_stop;
    const int32_t *stop_token_ids; /* ids that end generation; used by generation            */
    int n_stop_token_ids;
    int32_t max_tokens;       /* >= 1; tokens generated at most (default 64)                   */
    uint64_t seed;            /* used when has_seed; otherwise a fresh seed is drawn and       */
    int has_seed;             /*   reported (wb_sampler_seed, generation results)               */
    wb_mask_stage mask_stage; /* where an allowed mask applies (default WB_MASK_LOGITS)         */
} wb_sampling_params;

wb_sampling_params wb_sampling_default_params(void);

/* Validate every field. vocab_size > 0 also range-checks logit_bias and stop_token_ids ids.
 * WB_ERR_ARG / WB_ERR_RANGE with a message naming the field, e.g. "top_p = 1.5 is outside (0, 1]". */
wb_status wb_sampling_params_check(const wb_sampling_params *p, int32_t vocab_size, wb_err *err);

/* ======================================== sampler ========================================== */

/* A per-request sampler: a validated copy of the parameters, the RNG and scratch memory sized
 * for the vocabulary, so sampling a token allocates nothing. */
typedef struct wb_sampler wb_sampler;

wb_status wb_sampler_new(const wb_sampling_params *p, int32_t vocab_size, wb_sampler **out,
                         wb_err *err);
void wb_sampler_free(wb_sampler *s);

/* The seed in use (the given one, or the one drawn when has_seed was 0). */
uint64_t wb_sampler_seed(const wb_sampler *s);
/* The ids min_tokens bans while fewer than min_tokens are generated (copied; replaces the
 * default, which is the parameters' stop_token_ids). Generation passes stop_token_ids plus the
 * eos ids of the tokenizer and generation_config.json. */
wb_status wb_sampler_set_end_ids(wb_sampler *s, const int32_t *ids, int n, wb_err *err);

/* The distribution the next draw would use, written to probs_out[V] (zeros for removed tokens).
 * generated: ids produced so far in this request (for penalties), each in [0, V).
 * allowed: NULL, or a bitset of ceil(V/32) words; bit (id % 32) of word id / 32 set = allowed.
 * Errors: WB_ERR_ARG for NaN / +inf logits or when every token is banned, WB_ERR_RANGE for a
 * generated id out of range. */
wb_status wb_sampler_apply(wb_sampler *s, const float *logits, const int32_t *generated,
                           size_t n_generated, const uint32_t *allowed, float *probs_out,
                           wb_err *err);

/* Apply, then draw one id (greedy at temperature 0). Equivalent to wb_sampler_apply followed by
 * wb_sampling_draw(probs, V, rng) on the sampler's RNG, without touching all V probabilities when
 * filters leave few survivors. p_out (optional) receives the chosen token's probability. */
wb_status wb_sampler_sample(wb_sampler *s, const float *logits, const int32_t *generated,
                            size_t n_generated, const uint32_t *allowed, int32_t *id_out,
                            float *p_out, wb_err *err);

/* ===================================== one-shot helpers ==================================== */

/* wb_sampler_apply with a temporary sampler (the seed is irrelevant to the distribution). */
wb_status wb_sampling_apply(const float *logits, int32_t vocab_size, const wb_sampling_params *p,
                            const int32_t *generated, size_t n_generated, float *probs_out,
                            wb_err *err);

/* Draw from probs[V] (non-negative, need not sum to 1): one uniform, ids walked in ascending
 * order. Returns -1 if every probability is zero. */
int32_t wb_sampling_draw(const float *probs, int32_t vocab_size, wb_rng *rng);

/* Greedy pick: the highest value, lowest id among ties; -1 if V <= 0 or all are NaN/-inf. */
int32_t wb_sampling_argmax(const float *values, int32_t vocab_size);

/* ==================================== vector dispatch ====================================== */

/* 1 when the O(V) passes (max, exp, sums, the draw's total) use AVX2, chosen at run time; 0 for
 * the portable build. Both give the same bits: the AVX2 exp does the scalar one's operations
 * without FMA, and sums keep the scalar order. */
int wb_sampler_simd(void);
/* Force the portable build (on != 0) or allow AVX2 again (tests compare the two). Global. */
void wb_sampler_force_scalar(int on);

#ifdef __cplusplus
}
#endif
#endif
