/* generate.c - the generation loop over a session, the no-cache path or a custom logits source. */
#include "wb_generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *wb_stop_reason_name(wb_stop_reason r) {
    switch (r) {
    case WB_STOP_NONE: return "";
    case WB_STOP_STOP: return "stop";
    case WB_STOP_LENGTH: return "length";
    case WB_STOP_EOS: return "eos";
    case WB_STOP_CONTEXT: return "context";
    case WB_STOP_CONSTRAINT: return "constraint";
    case WB_STOP_CANCELLED: return "cancelled";
    }
    return "";
}

wb_gen_params wb_gen_default_params(void) {
    wb_gen_params p;
    memset(&p, 0, sizeof p);
    p.cache = 1;
    p.holdback = 1;
    return p;
}

enum { GEN_FRESH = 0, GEN_PENDING = 1, GEN_DONE = 2 };

struct wb_gen {
    /* logits source: exactly one of session (cache), model (no cache), fn (custom) */
    const wb_model *model;
    wb_session *sess;
    wb_logits_fn fn;
    void *fn_data;

    const wb_tokenizer *tok;
    int32_t V, n_ctx, eos;
    wb_sampler *smp;
    wb_gen_params gp;
    int32_t max_tokens;
    size_t cap; /* most tokens this request can generate: min(max_tokens, n_ctx - n_prompt) */

    char **stop;
    size_t *stop_len;
    int n_stop;
    size_t max_stop_len;
    int32_t *stop_ids;
    int n_stop_ids;

    int32_t *ids; /* prompt then generated; capacity n_prompt + cap */
    int32_t n_prompt;
    size_t n_gen;
    float *logits;
    wb_constraint_state *cst;
    const wb_constraint *constraint; /* retained */
    float *mass; /* [cap] constraint pressure per masked step */
    wb_detok *detok;

    char *text; /* decoded generated text so far (NUL-terminated) */
    size_t text_len, text_cap, released;
    char *piece; /* copy of the last released piece */
    size_t piece_len, piece_cap;

    double *itl;
    double t0, t_eval, t_prefill_end, t_last_token, t_end;
    int state;
    int logits_ready;  /* g->logits hold this step's logits (shared prefill, chunked prefill) */
    int prefill_timed;
    int32_t min_tokens;
    wb_token_logprob *lp;  /* [cap] when gp.logprobs */
    wb_token_logprob *top; /* [cap * top_logprobs] */
    float *probs;          /* [V] the sampled distribution, for top_logprobs */
    wb_gen_result res;
};

static wb_status buf_reserve(char **buf, size_t *cap, size_t need, wb_err *err) {
    if (need <= *cap) return WB_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    char *nb = realloc(*buf, nc);
    if (!nb) return wb_err_set(err, WB_ERR_NOMEM, "generation: out of memory for text");
    *buf = nb;
    *cap = nc;
    return WB_OK;
}

static wb_status text_append(wb_gen *g, const char *s, size_t n, wb_err *err) {
    wb_status st = buf_reserve(&g->text, &g->text_cap, g->text_len + n + 1, err);
    if (st != WB_OK) return st;
    if (n) memcpy(g->text + g->text_len, s, n);
    g->text_len += n;
    g->text[g->text_len] = '\0';
    return WB_OK;
}

void wb_gen_free(wb_gen *g) {
    if (!g) return;
    wb_session_free(g->sess);
    wb_sampler_free(g->smp);
    wb_detok_free(g->detok);
    for (int i = 0; i < g->n_stop; i++) free(g->stop[i]);
    free(g->stop);
    free(g->stop_len);
    free(g->stop_ids);
    free(g->ids);
    free(g->logits);
    wb_constraint_state_free(g->cst);
    wb_constraint_free((wb_constraint *)g->constraint);
    free(g->mass);
    free(g->text);
    free(g->piece);
    free(g->itl);
    free(g->lp);
    free(g->top);
    free(g->probs);
    free(g);
}

/* Everything but the logits source: params, stops, prompt trimming, buffers. Takes ownership of
 * prompt_ids (malloc'd). */
static wb_status gen_setup(wb_gen *g, int32_t *prompt_ids, size_t n_ids,
                           const wb_sampling_params *sp, const wb_gen_params *gp, wb_err *err) {
    wb_status st;
    g->gp = gp ? *gp : wb_gen_default_params();
    if (!sp) {
        free(prompt_ids);
        return wb_err_set(err, WB_ERR_ARG, "sampling params: NULL pointer");
    }
    if ((st = wb_sampler_new(sp, g->V, &g->smp, err)) != WB_OK) {
        free(prompt_ids);
        return st;
    }
    g->max_tokens = sp->max_tokens;
    g->eos = wb_tokenizer_eos_id(g->tok);

    if (sp->n_stop > 0) {
        g->stop = calloc((size_t)sp->n_stop, sizeof *g->stop);
        g->stop_len = calloc((size_t)sp->n_stop, sizeof *g->stop_len);
        if (!g->stop || !g->stop_len) goto nomem;
        g->n_stop = sp->n_stop;
        for (int i = 0; i < sp->n_stop; i++) {
            size_t n = strlen(sp->stop[i]);
            if (!(g->stop[i] = malloc(n + 1))) goto nomem;
            memcpy(g->stop[i], sp->stop[i], n + 1);
            g->stop_len[i] = n;
            if (n > g->max_stop_len) g->max_stop_len = n;
        }
    }
    if (sp->n_stop_token_ids > 0) {
        g->stop_ids = malloc((size_t)sp->n_stop_token_ids * sizeof *g->stop_ids);
        if (!g->stop_ids) goto nomem;
        memcpy(g->stop_ids, sp->stop_token_ids, (size_t)sp->n_stop_token_ids * sizeof *g->stop_ids);
        g->n_stop_ids = sp->n_stop_token_ids;
    }

    /* An empty prompt gives no logits to start from: begin at eos, as GPT-2 does. */
    if (n_ids == 0) {
        if (g->eos < 0) {
            free(prompt_ids);
            return wb_err_set(err, WB_ERR_ARG,
                              "prompt is empty and the tokenizer has no <|endoftext|> to start "
                              "from");
        }
        free(prompt_ids);
        prompt_ids = malloc(sizeof *prompt_ids);
        if (!prompt_ids) goto nomem;
        prompt_ids[0] = g->eos;
        n_ids = 1;
    }
    /* Keep the right end of the prompt so prompt + max_tokens fits, as the course's loop does;
     * always keep at least one token so there is something to predict from. */
    int64_t keep = (int64_t)g->n_ctx - g->max_tokens;
    if (keep < 1) keep = 1;
    size_t drop = (int64_t)n_ids > keep ? n_ids - (size_t)keep : 0;
    g->n_prompt = (int32_t)(n_ids - drop);
    g->res.prompt_tokens = g->n_prompt;
    g->res.prompt_tokens_dropped = (int32_t)drop;
    /* The context ends generation before max_tokens when it is smaller: size buffers for what
     * can actually be generated, so a huge max_tokens costs no memory. */
    g->cap = (size_t)g->max_tokens;
    if ((int64_t)g->cap > (int64_t)g->n_ctx - g->n_prompt) g->cap = (size_t)(g->n_ctx - g->n_prompt);
    if (g->cap < 1) g->cap = 1;

    g->ids = malloc(((size_t)g->n_prompt + g->cap) * sizeof *g->ids);
    if (!g->ids) goto nomem;
    memcpy(g->ids, prompt_ids + drop, (size_t)g->n_prompt * sizeof *g->ids);
    free(prompt_ids);
    prompt_ids = NULL;

    g->logits = malloc((size_t)g->V * sizeof *g->logits);
    g->itl = malloc(g->cap * sizeof *g->itl);
    if (!g->logits || !g->itl) goto nomem;
    if (g->gp.constraint) {
        int32_t cv = wb_constraint_vocab_size(g->gp.constraint);
        if (cv != g->V)
            return wb_err_set(err, WB_ERR_ARG, "constraint: compiled for a vocabulary of %d "
                              "tokens, but the model has %d", (int)cv, (int)g->V);
        if ((st = wb_constraint_state_new(g->gp.constraint, &g->cst, err)) != WB_OK) return st;
        g->constraint = wb_constraint_retain(g->gp.constraint);
    }
    if (g->gp.constraint) {
        g->mass = malloc(g->cap * sizeof *g->mass);
        if (!g->mass) goto nomem;
    }
    if ((st = wb_detok_new(g->tok, &g->detok, err)) != WB_OK) return st;
    if ((st = text_append(g, "", 0, err)) != WB_OK) return st;
    if ((st = buf_reserve(&g->piece, &g->piece_cap, 64, err)) != WB_OK) return st;
    g->piece[0] = '\0';
    if (g->gp.logprobs || g->gp.top_logprobs) {
        if (g->gp.top_logprobs < 0 || g->gp.top_logprobs > WB_MAX_TOP_LOGPROBS)
            return wb_err_set(err, WB_ERR_ARG, "top_logprobs = %d is outside [0, %d]",
                              g->gp.top_logprobs, WB_MAX_TOP_LOGPROBS);
        g->lp = malloc(g->cap * sizeof *g->lp);
        if (!g->lp) goto nomem;
        if (g->gp.top_logprobs > 0) {
            g->top = malloc(g->cap * (size_t)g->gp.top_logprobs * sizeof *g->top);
            g->probs = malloc((size_t)g->V * sizeof *g->probs);
            if (!g->top || !g->probs) goto nomem;
        }
    }
    /* min_tokens bans every id that would end the request: stop_token_ids and the eos ids */
    g->min_tokens = sp->min_tokens;
    if (g->min_tokens > 0) {
        size_t n_model = 0;
        const int32_t *model_eos = g->model ? wb_model_eos_ids(g->model, &n_model) : NULL;
        size_t n_end = (size_t)g->n_stop_ids + n_model + 1, k = 0;
        int32_t *ends = malloc(n_end * sizeof *ends);
        if (!ends) goto nomem;
        for (int i = 0; i < g->n_stop_ids; i++) ends[k++] = g->stop_ids[i];
        if (!g->gp.ignore_eos) {
            if (g->eos >= 0 && g->eos < g->V) ends[k++] = g->eos;
            for (size_t i = 0; i < n_model; i++)
                if (model_eos[i] >= 0 && model_eos[i] < g->V) ends[k++] = model_eos[i];
        }
        st = wb_sampler_set_end_ids(g->smp, ends, (int)k, err);
        free(ends);
        if (st != WB_OK) return st;
    }
    g->res.stop_index = -1;
    g->res.seed = wb_sampler_seed(g->smp);
    return WB_OK;
nomem:
    free(prompt_ids);
    return wb_err_set(err, WB_ERR_NOMEM, "generation: out of memory");
}

static wb_status gen_alloc(wb_gen **out, wb_err *err) {
    if (!out) return wb_err_set(err, WB_ERR_ARG, "generation: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return wb_err_set(err, WB_ERR_NOMEM, "generation: out of memory");
    (*out)->t0 = wb_clock_ms();
    return WB_OK;
}

static wb_status gen_new_model_ids(const wb_model *m, int32_t *ids, size_t n_ids,
                                   const wb_sampling_params *sp, const wb_gen_params *gp,
                                   wb_gen *g, wb_err *err) {
    const wb_config *cfg = wb_model_config(m);
    g->model = m;
    g->tok = wb_model_tokenizer(m);
    g->V = cfg->vocab_size;
    /* the one context rule (wb_model_check_ctx), as sessions and batches apply it */
    wb_status cs = wb_model_check_ctx(m, gp ? gp->n_ctx : 0, &g->n_ctx, err);
    if (cs) {
        free(ids);
        return cs;
    }
    if (gp && (gp->chunk_size < 0 || gp->cancel_after < 0)) {
        free(ids);
        return wb_err_set(err, WB_ERR_ARG, "%s = %d must be >= 0 (0 turns it off)",
                          gp->chunk_size < 0 ? "chunk_size" : "cancel_after",
                          gp->chunk_size < 0 ? gp->chunk_size : gp->cancel_after);
    }
    if (gp && gp->chunk_size > 0 && !gp->cache) {
        free(ids);
        return wb_err_set(err, WB_ERR_ARG, "chunk_size = %d needs the KV cache: chunks are "
                          "prefilled through it, so chunking without a cache (cache = 0) is an "
                          "error", gp->chunk_size);
    }
    wb_status st = gen_setup(g, ids, n_ids, sp, gp, err);
    if (st != WB_OK) return st;
    g->res.use_cache = g->gp.cache;
    g->res.chunk_size = g->gp.chunk_size;
    if (g->gp.cache) st = wb_session_new(m, g->n_ctx, &g->sess, err);
    return st;
}

wb_status wb_gen_new_ids(const wb_model *m, const int32_t *ids, size_t n_ids,
                         const wb_sampling_params *sp, const wb_gen_params *gp, wb_gen **out,
                         wb_err *err) {
    wb_status st = gen_alloc(out, err);
    if (st != WB_OK) return st;
    if (!m) {
        wb_gen_free(*out);
        *out = NULL;
        return wb_err_set(err, WB_ERR_ARG, "generation: model is NULL");
    }
    if (n_ids > 0 && !ids) {
        wb_gen_free(*out);
        *out = NULL;
        return wb_err_set(err, WB_ERR_ARG, "generation: prompt ids NULL");
    }
    int32_t V = wb_model_config(m)->vocab_size;
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            wb_gen_free(*out);
            *out = NULL;
            return wb_err_set(err, WB_ERR_RANGE, "prompt ids[%zu] = %d is outside [0, %d)", i,
                              (int)ids[i], (int)V);
        }
    int32_t *copy = malloc((n_ids ? n_ids : 1) * sizeof *copy);
    if (!copy) {
        wb_gen_free(*out);
        *out = NULL;
        return wb_err_set(err, WB_ERR_NOMEM, "generation: out of memory");
    }
    if (n_ids) memcpy(copy, ids, n_ids * sizeof *copy);
    st = gen_new_model_ids(m, copy, n_ids, sp, gp, *out, err);
    if (st != WB_OK) {
        wb_gen_free(*out);
        *out = NULL;
    }
    return st;
}

/* A prompt is model input: tokenizer.json's truncation and padding stay off, as in transformers
 * unless asked (a max_length would cut the prompt, pad ids would be fed to the model). */
static wb_status encode_prompt(const wb_tokenizer *tok, const char *prompt, size_t len, int32_t **ids,
                               size_t *n, wb_err *err) {
    wb_tokenizer_encode_params p = {.truncation = 0, .padding = 0};
    return wb_tokenizer_encode_with(tok, prompt ? prompt : "", len, &p, ids, n, NULL, err);
}

wb_status wb_gen_new(const wb_model *m, const char *prompt, size_t prompt_len,
                     const wb_sampling_params *sp, const wb_gen_params *gp, wb_gen **out,
                     wb_err *err) {
    wb_status st = gen_alloc(out, err);
    if (st != WB_OK) return st;
    wb_gen *g = *out;
    int32_t *ids = NULL;
    size_t n = 0;
    if (!m) st = wb_err_set(err, WB_ERR_ARG, "generation: model is NULL");
    else if (!prompt && prompt_len) st = wb_err_set(err, WB_ERR_ARG, "generation: prompt NULL");
    else st = encode_prompt(wb_model_tokenizer(m), prompt, prompt_len, &ids, &n, err);
    if (st == WB_OK) g->res.tokenization_ms = wb_clock_ms() - g->t0;
    if (st == WB_OK) st = gen_new_model_ids(m, ids, n, sp, gp, g, err);
    if (st != WB_OK) {
        wb_gen_free(g);
        *out = NULL;
    }
    return st;
}

wb_status wb_gen_new_custom(wb_logits_fn fn, void *user_data, int32_t vocab_size, int32_t n_ctx,
                            const wb_tokenizer *tok, const char *prompt, size_t prompt_len,
                            const wb_sampling_params *sp, const wb_gen_params *gp, wb_gen **out,
                            wb_err *err) {
    wb_status st = gen_alloc(out, err);
    if (st != WB_OK) return st;
    wb_gen *g = *out;
    int32_t *ids = NULL;
    size_t n = 0;
    if (!fn) st = wb_err_set(err, WB_ERR_ARG, "generation: logits function is NULL");
    else if (!tok) st = wb_err_set(err, WB_ERR_ARG, "generation: tokenizer is NULL");
    else if (vocab_size < 1) st = wb_err_set(err, WB_ERR_ARG, "vocab_size = %d must be >= 1",
                                             (int)vocab_size);
    else if (n_ctx < 2) st = wb_err_set(err, WB_ERR_ARG, "n_ctx = %d must be >= 2", (int)n_ctx);
    else if (!prompt && prompt_len) st = wb_err_set(err, WB_ERR_ARG, "generation: prompt NULL");
    else st = encode_prompt(tok, prompt, prompt_len, &ids, &n, err);
    if (st == WB_OK) {
        g->fn = fn;
        g->fn_data = user_data;
        g->tok = tok;
        g->V = vocab_size;
        g->n_ctx = n_ctx;
        for (size_t i = 0; i < n && st == WB_OK; i++)
            if (ids[i] >= vocab_size)
                st = wb_err_set(err, WB_ERR_RANGE, "prompt token %d is outside the vocabulary "
                                "of %d", (int)ids[i], (int)vocab_size);
        if (st == WB_OK) st = gen_setup(g, ids, n, sp, gp, err);
        else free(ids);
    }
    if (st != WB_OK) {
        wb_gen_free(g);
        *out = NULL;
    }
    return st;
}

/* Earliest complete stop string in the text, looking only where one could newly have appeared
 * since `prev_len`. Returns its start or (size_t)-1; *which receives its index. */
static size_t find_stop(const wb_gen *g, size_t prev_len, int *which) {
    size_t best = (size_t)-1;
    for (int k = 0; k < g->n_stop; k++) {
        size_t L = g->stop_len[k];
        if (L > g->text_len) continue;
        size_t from = prev_len + 1 > L ? prev_len + 1 - L : 0;
        const char *hit = memmem(g->text + from, g->text_len - from, g->stop[k], L);
        if (hit && (size_t)(hit - g->text) < best) {
            best = (size_t)(hit - g->text);
            *which = k;
        }
    }
    return best;
}

/* The first position at or after `released` from which the rest of the text is a proper prefix
 * of some stop string: everything before it can never become part of a stop. */
static size_t safe_release_point(const wb_gen *g) {
    size_t start = g->released;
    if (g->max_stop_len > 0 && g->text_len + 1 > g->max_stop_len &&
        g->text_len + 1 - g->max_stop_len > start)
        start = g->text_len + 1 - g->max_stop_len;
    for (size_t i = start; i < g->text_len; i++) {
        size_t tail = g->text_len - i;
        for (int k = 0; k < g->n_stop; k++)
            if (tail < g->stop_len[k] && memcmp(g->text + i, g->stop[k], tail) == 0) return i;
    }
    return g->text_len;
}

static wb_status set_piece(wb_gen *g, const char *s, size_t n, wb_err *err) {
    wb_status st = buf_reserve(&g->piece, &g->piece_cap, n + 1, err);
    if (st != WB_OK) return st;
    if (n) memcpy(g->piece, s, n);
    g->piece[n] = '\0';
    g->piece_len = n;
    return WB_OK;
}

/* Free the KV cache as the request ends, whatever ended it: a cancelled request must not keep
 * its cache alive until the caller gets round to freeing the generator. */
static void release_cache(wb_gen *g) {
    if (!g->sess) return;
    g->res.cache_tokens_before_release = wb_session_pos(g->sess);
    wb_session_free(g->sess);
    g->sess = NULL;
    g->res.cache_released = 1;
}

static void fill_result(wb_gen *g) {
    wb_gen_result *r = &g->res;
    r->text = g->text;
    r->text_len = g->text_len;
    r->token_ids = g->ids + g->n_prompt;
    r->n_tokens = g->n_gen;
    r->itl_ms = g->itl;
    r->n_itl = g->n_gen > 0 ? g->n_gen - 1 : 0;
    r->allowed_mass = g->mass;
    r->logprobs = g->lp;
    r->top_logprobs = g->top;
    r->n_top_logprobs = g->top ? g->gp.top_logprobs : 0;
    double end = g->state == GEN_DONE ? g->t_end : wb_clock_ms();
    r->e2e_ms = end - g->t0;
    r->last_token_ms = g->n_gen > 0 ? g->t_last_token - g->t0 : 0;
    if (g->t_prefill_end > 0 && g->n_gen > 0)
        r->decode_ms_per_token = (end - g->t_prefill_end) / (double)g->n_gen;
}

/* End generation for any reason but a stop string matched by the step itself: release what the
 * detokenizer still holds, check the stops once more over it, then release all held text. */
static wb_status finish(wb_gen *g, wb_stop_reason reason, int stop_index, wb_err *err) {
    wb_status st = WB_OK;
    size_t from = g->released;
    {
        const char *tail;
        size_t n;
        size_t prev = g->text_len;
        wb_detok_flush(g->detok, &tail, &n);
        if (n && (st = text_append(g, tail, n, err)) != WB_OK) return st;
        int which = -1;
        size_t pos = g->n_gen >= (size_t)g->min_tokens ? find_stop(g, prev, &which) : (size_t)-1;
        if (pos != (size_t)-1) {
            reason = WB_STOP_STOP;
            g->res.stop_index = which;
            g->text_len = pos;
            g->text[pos] = '\0';
        }
    }
    if (g->released > g->text_len) g->released = g->text_len;
    st = set_piece(g, g->text + from, g->text_len > from ? g->text_len - from : 0, err);
    g->released = g->text_len;
    g->res.stop_reason = reason;
    if (stop_index >= 0) g->res.stop_index = stop_index;
    g->t_end = wb_clock_ms();
    g->state = GEN_DONE;
    release_cache(g);
    fill_result(g);
    return st;
}

/* Constraint pressure for this step: the raw model's probability of the allowed set. Computed
 * in double from the logits as the model gave them, so penalties, bias and temperature (the
 * request's choices) do not count as the format's doing. */
static void record_pressure(wb_gen *g, const uint32_t *mask) {
    const float *z = g->logits;
    float zmax = -INFINITY;
    int32_t am = -1;
    for (int32_t i = 0; i < g->V; i++)
        if (z[i] > zmax) zmax = z[i], am = i;
    double tot = 0, in = 0;
    for (int32_t i = 0; i < g->V; i++) {
        double e = exp((double)z[i] - (double)zmax);
        tot += e;
        if (mask[i >> 5] >> (i & 31) & 1u) in += e;
    }
    double m = tot > 0 ? in / tot : 0;
    g->mass[g->res.n_masked++] = (float)m;
    g->res.constraint_logprob += m > 0 ? log(m) : -INFINITY;
    if (am >= 0 && !(mask[am >> 5] >> (am & 31) & 1u)) g->res.constraint_overruled++;
}

static wb_status evaluate_logits(wb_gen *g, wb_err *err);

/* Models pad their embedding past the tokenizer (Qwen2.5: 151,936 rows, 151,665 tokens). Those ids
 * have no text, so they are never sampled: masked here, before penalties, filters and
 * constraints, and so also absent from every distribution a lesson measures. */
static void mask_padded_vocab(wb_gen *g) {
    if (g->tok)
        for (int32_t id = wb_tokenizer_vocab_size(g->tok); id < g->V; id++)
            g->logits[id] = -INFINITY;
}

static wb_status evaluate_logits(wb_gen *g, wb_err *err) {
    int n = g->n_prompt + (int)g->n_gen;
    if (g->fn) return g->fn(g->fn_data, g->ids, n, g->logits, err);
    if (g->sess) {
        if (g->state == GEN_FRESH) {
            const int cs = g->gp.chunk_size > 0 ? g->gp.chunk_size : n;
            for (int off = 0; off < n; off += cs) {
                const int k = n - off < cs ? n - off : cs, last = off + k == n;
                wb_status st = wb_session_prefill(g->sess, g->ids + off, k,
                                                  last ? g->logits : NULL, 0, err);
                if (st != WB_OK) return st;
            }
            return WB_OK;
        }
        return wb_session_decode(g->sess, g->ids[n - 1], g->logits, err);
    }
    return wb_model_forward(g->model, g->ids, n, g->logits, 0, err);
}

/* The one error exit of a step: the generator ends (done, text so far kept, cache freed) and
 * the step returns the error, whose message is already in err. */
static wb_status fail(wb_gen *g, wb_status st, int *done) {
    g->t_end = wb_clock_ms();
    g->state = GEN_DONE;
    release_cache(g);
    fill_result(g);
    if (done) *done = 1;
    return st;
}

static void out_piece(const wb_gen *g, const char **piece, size_t *len, int *done) {
    if (piece) *piece = g->piece;
    if (len) *len = g->piece_len;
    if (done) *done = g->state == GEN_DONE;
}

/* Log-probabilities of this step (gp.logprobs / gp.top_logprobs). `p_drawn` is the drawn
 * token's probability under the sampler's distribution; the raw view is the log-softmax of the
 * logits as the model gave them (padded ids masked), in double. */
static wb_status record_logprobs(wb_gen *g, int32_t id, float p_drawn, const uint32_t *mask,
                                 wb_err *err) {
    const float *z = g->logits;
    double zmax = -INFINITY;
    for (int32_t i = 0; i < g->V; i++)
        if (z[i] > zmax) zmax = z[i];
    double tot = 0;
    for (int32_t i = 0; i < g->V; i++) tot += exp((double)z[i] - zmax);
    const double lse = zmax + log(tot);
    wb_token_logprob *lp = &g->lp[g->n_gen];
    lp->id = id;
    lp->logprob = p_drawn > 0 ? logf(p_drawn) : -INFINITY;
    lp->raw_logprob = (float)((double)z[id] - lse);
    const int k = g->gp.top_logprobs;
    if (k <= 0) return WB_OK;
    /* The distribution the draw used, over the whole vocabulary (the same code path). */
    wb_status st = wb_sampler_apply(g->smp, g->logits, g->ids + g->n_prompt, g->n_gen, mask,
                                    g->probs, err);
    if (st != WB_OK) return st;
    /* The k largest raw logits, lower id first on ties: a small insertion list. */
    wb_token_logprob *top = g->top + g->n_gen * (size_t)k;
    int have = 0;
    for (int32_t i = 0; i < g->V; i++) {
        if (z[i] == -INFINITY) continue;
        if (have == k && !(z[i] > z[top[k - 1].id])) continue;
        int j = have < k ? have++ : k - 1;
        while (j > 0 && z[i] > z[top[j - 1].id]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j].id = i;
    }
    for (int j = 0; j < have; j++) {
        int32_t t = top[j].id;
        top[j].raw_logprob = (float)((double)z[t] - lse);
        top[j].logprob = g->probs[t] > 0 ? logf(g->probs[t]) : -INFINITY;
    }
    for (int j = have; j < k; j++) top[j] = (wb_token_logprob){-1, -INFINITY, -INFINITY};
    return WB_OK;
}

wb_status wb_gen_step_begin(wb_gen *g, wb_gen_feed *feed, const char **piece, size_t *len,
                            int *done, wb_err *err) {
    if (!g) return wb_err_set(err, WB_ERR_ARG, "generation: generator is NULL");
    if (feed) *feed = (wb_gen_feed){NULL, NULL, 0};
    if (piece) *piece = "";
    if (len) *len = 0;
    if (done) *done = g->state == GEN_DONE;
    if (g->state == GEN_DONE) return WB_OK;
    wb_status st = WB_OK;
    g->piece_len = 0;
    g->piece[0] = '\0';
    if (g->gp.abort_fn && g->gp.abort_fn(g->gp.abort_data)) {
        st = finish(g, WB_STOP_CANCELLED, -1, err);
        out_piece(g, piece, len, done);
        return st;
    }
    if (g->cst && wb_constraint_state_complete(g->cst)) {
        /* A constraint whose only match is the empty string: nothing to generate. */
        st = finish(g, WB_STOP_CONSTRAINT, -1, err);
        out_piece(g, piece, len, done);
        return st;
    }
    g->t_eval = wb_clock_ms();
    if (g->logits_ready) return WB_OK; /* a shared prefill left them (wb_gen_share_prefill) */
    if (!feed || !g->sess || (g->state == GEN_FRESH && g->gp.chunk_size > 0)) {
        /* Evaluate here: no driver, no cache to batch over, or a chunked prefill (its own
         * passes, so the same logits as alone). */
        st = evaluate_logits(g, err);
        if (st != WB_OK) return wb_gen_step_end(g, NULL, st, piece, len, done, err);
        g->logits_ready = 1;
        return WB_OK;
    }
    feed->sess = g->sess;
    if (g->state == GEN_FRESH) {
        feed->ids = g->ids;
        feed->n = g->n_prompt;
    } else {
        feed->ids = g->ids + g->n_prompt + (int)g->n_gen - 1;
        feed->n = 1;
    }
    return WB_OK;
}

wb_status wb_gen_step_end(wb_gen *g, const float *logits, wb_status eval_status,
                          const char **piece, size_t *len, int *done, wb_err *err) {
    if (!g) return wb_err_set(err, WB_ERR_ARG, "generation: generator is NULL");
    if (piece) *piece = "";
    if (len) *len = 0;
    if (done) *done = g->state == GEN_DONE;
    if (g->state == GEN_DONE) return WB_OK;
    wb_status st = eval_status;
    if (g->state == GEN_FRESH && !g->prefill_timed) {
        g->t_prefill_end = wb_clock_ms();
        g->res.prefill_ms = g->t_prefill_end - g->t_eval;
        g->prefill_timed = 1;
    }
    g->logits_ready = 0;
    if (st == WB_ERR_CANCELLED) {
        st = finish(g, WB_STOP_CANCELLED, -1, err);
        out_piece(g, piece, len, done);
        return st;
    }
    if (st != WB_OK) return fail(g, st, done);
    if (logits && logits != g->logits) memcpy(g->logits, logits, (size_t)g->V * sizeof *logits);
    mask_padded_vocab(g);
    g->state = GEN_PENDING;

    const uint32_t *mask = NULL;
    if (g->cst) {
        int32_t n_allowed = 0;
        st = wb_constraint_state_allowed(g->cst, g->ids + g->n_prompt, g->n_gen, &mask,
                                         &n_allowed, err);
        if (st != WB_OK) return fail(g, st, done);
        if (n_allowed == 0) {
            if (wb_constraint_state_complete(g->cst)) {
                st = finish(g, WB_STOP_CONSTRAINT, -1, err);
                out_piece(g, piece, len, done);
                return st;
            }
            st = wb_err_set(err, WB_ERR_STATE, "constraint is unsatisfiable: no token is allowed "
                            "after %zu generated tokens and the constraint is not complete",
                            g->n_gen);
            return fail(g, st, done);
        }
        if (n_allowed < 0) mask = NULL;
    }
    if (mask) record_pressure(g, mask);

    int32_t id;
    float p_drawn = 1.0f;
    st = wb_sampler_sample(g->smp, g->logits, g->ids + g->n_prompt, g->n_gen, mask, &id, &p_drawn,
                           err);
    if (st != WB_OK) return fail(g, st, done);
    if (g->lp && (st = record_logprobs(g, id, p_drawn, mask, err)) != WB_OK) return fail(g, st, done);
    double now = wb_clock_ms();
    if (g->n_gen == 0) g->res.ttft_ms = now - g->t0;
    else g->itl[g->n_gen - 1] = now - g->t_last_token;
    g->t_last_token = now;
    g->ids[g->n_prompt + (int)g->n_gen] = id;
    g->n_gen++;
    /* min_tokens: until then the sampler bans the end ids, and stop strings are not looked for
     * (vLLM's rule), so the request cannot end early by either. */
    const int may_stop = g->n_gen >= (size_t)g->min_tokens;

    if (g->cst) {
        int ends = wb_constraint_state_is_end(g->cst, id);
        if ((st = wb_constraint_state_advance(g->cst, id, err)) != WB_OK) return fail(g, st, done);
        if (ends) {
            st = finish(g, WB_STOP_CONSTRAINT, -1, err);
            out_piece(g, piece, len, done);
            return st;
        }
    }
    /* generation_config.json may list more ends than the tokenizer's (Qwen: <|im_end|>) */
    if ((id == g->eos || (g->model && wb_model_is_eos(g->model, id))) && !g->gp.ignore_eos) {
        st = finish(g, WB_STOP_EOS, -1, err);
        out_piece(g, piece, len, done);
        return st;
    }
    for (int k = 0; k < g->n_stop_ids; k++)
        if (g->stop_ids[k] == id) {
            st = finish(g, WB_STOP_STOP, k, err);
            out_piece(g, piece, len, done);
            return st;
        }

    const char *txt;
    size_t tn, prev = g->text_len;
    if ((st = wb_detok_push(g->detok, id, &txt, &tn, err)) != WB_OK) return fail(g, st, done);
    if ((st = text_append(g, txt, tn, err)) != WB_OK) return fail(g, st, done);
    int which = -1;
    size_t pos = may_stop ? find_stop(g, prev, &which) : (size_t)-1;
    if (pos != (size_t)-1) {
        size_t from = g->released;
        if (!g->gp.holdback) {
            /* Leak mode: like a naive streamer, the step's whole text goes out first. */
            if ((st = set_piece(g, g->text + from, g->text_len - from, err)) != WB_OK)
                return fail(g, st, done);
        } else if ((st = set_piece(g, g->text + from, pos > from ? pos - from : 0, err)) != WB_OK)
            return fail(g, st, done);
        g->text_len = pos;
        g->text[pos] = '\0';
        g->released = pos;
        g->res.stop_reason = WB_STOP_STOP;
        g->res.stop_index = which;
        g->t_end = wb_clock_ms();
        g->state = GEN_DONE;
        release_cache(g);
        fill_result(g);
        out_piece(g, piece, len, done);
        return WB_OK;
    }
    wb_stop_reason end = WB_STOP_NONE;
    if (g->cst && wb_constraint_state_complete(g->cst)) end = WB_STOP_CONSTRAINT;
    else if (g->gp.cancel_after > 0 && g->n_gen >= (size_t)g->gp.cancel_after)
        end = WB_STOP_CANCELLED;
    else if (g->n_gen >= (size_t)g->max_tokens) end = WB_STOP_LENGTH;
    else if (g->n_prompt + (int64_t)g->n_gen >= g->n_ctx) end = WB_STOP_CONTEXT;
    if (end != WB_STOP_NONE) {
        st = finish(g, end, -1, err);
        out_piece(g, piece, len, done);
        return st;
    }
    size_t upto = g->gp.holdback ? safe_release_point(g) : g->text_len;
    st = set_piece(g, g->text + g->released, upto - g->released, err);
    g->released = upto;
    fill_result(g);
    out_piece(g, piece, len, done);
    return st;
}

wb_status wb_gen_next(wb_gen *g, const char **piece, size_t *len, int *done, wb_err *err) {
    int d = 0;
    wb_status st = wb_gen_step_begin(g, NULL, piece, len, &d, err);
    if (done) *done = d;
    if (st != WB_OK || d) return st;
    return wb_gen_step_end(g, NULL, WB_OK, piece, len, done, err);
}

wb_session *wb_gen_session(const wb_gen *g) { return g ? g->sess : NULL; }

wb_status wb_gen_share_prefill(wb_gen *const *gens, int n, wb_err *err) {
    if (!gens || n < 1) return wb_err_set(err, WB_ERR_ARG, "shared prefill: no generators");
    wb_gen *g0 = gens[0];
    for (int i = 0; i < n; i++) {
        wb_gen *g = gens[i];
        if (!g || g->state != GEN_FRESH || g->logits_ready || !g->sess || g->model != g0->model)
            return wb_err_set(err, WB_ERR_ARG, "shared prefill: generator %d is not a fresh "
                              "cached generator of the same model", i);
        if (g->n_prompt != g0->n_prompt || g->n_ctx != g0->n_ctx ||
            memcmp(g->ids, g0->ids, (size_t)g->n_prompt * sizeof *g->ids) != 0)
            return wb_err_set(err, WB_ERR_ARG, "shared prefill: generator %d has another prompt "
                              "or context", i);
    }
    g0->t_eval = wb_clock_ms();
    wb_status st = evaluate_logits(g0, err);
    if (st != WB_OK) return st;
    double t = wb_clock_ms();
    for (int i = 0; i < n; i++) {
        wb_gen *g = gens[i];
        if (i > 0) {
            wb_session *fork = NULL;
            if ((st = wb_session_fork(g0->sess, &fork, err)) != WB_OK) return st;
            wb_session_free(g->sess);
            g->sess = fork;
            memcpy(g->logits, g0->logits, (size_t)g->V * sizeof *g->logits);
        }
        g->t_eval = g0->t_eval;
        g->t_prefill_end = t;
        g->res.prefill_ms = t - g0->t_eval;
        g->prefill_timed = 1;
        g->logits_ready = 1;
    }
    return WB_OK;
}

const wb_gen_result *wb_gen_result_get(const wb_gen *g) {
    if (!g) return NULL;
    fill_result((wb_gen *)g);
    return &g->res;
}

double wb_gen_elapsed_ms(const wb_gen *g) { return g ? wb_clock_ms() - g->t0 : 0.0; }

wb_status wb_gen_run(wb_gen *g, wb_err *err) {
    if (!g) return wb_err_set(err, WB_ERR_ARG, "generation: generator is NULL");
    for (int done = 0; !done;) {
        const char *piece;
        size_t n;
        wb_status st = wb_gen_next(g, &piece, &n, &done, err);
        if (st != WB_OK) return st;
        if (n && g->gp.on_piece &&
            g->gp.on_piece(g->gp.piece_data, piece, n, wb_clock_ms() - g->t0) && !done) {
            /* Hand over what was held back too, so the pieces still add up to the text. */
            st = finish(g, WB_STOP_CANCELLED, -1, err);
            if (g->piece_len) g->gp.on_piece(g->gp.piece_data, g->piece, g->piece_len,
                                             wb_clock_ms() - g->t0);
            return st;
        }
    }
    return WB_OK;
}

wb_status wb_generate(const wb_model *m, const char *prompt, size_t prompt_len,
                      const wb_sampling_params *sp, const wb_gen_params *gp, wb_gen **out,
                      wb_err *err) {
    wb_status st = wb_gen_new(m, prompt, prompt_len, sp, gp, out, err);
    if (st != WB_OK) return st;
    return wb_gen_run(*out, err);
}

wb_status wb_gen_cancel(wb_gen *g, wb_err *err) {
    if (!g) return wb_err_set(err, WB_ERR_ARG, "generation: generator is NULL");
    if (g->state == GEN_DONE) return WB_OK;
    return finish(g, WB_STOP_CANCELLED, -1, err);
}
