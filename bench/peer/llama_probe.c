/* llama_probe.c - asks llama.cpp (through its public C API, libllama) what it makes of a GGUF:
 * token ids of strings, the logits of a prompt's last position and of each greedy step. Built by
 * bench/peer/check.sh against a llama.cpp build outside the repository; never part of the
 * workbench build or its tests.
 *
 *   llama_probe MODEL.gguf tok FILE          one JSON array of ids per line of FILE (no BOS,
 *                                            special tokens parsed as HF's tokenizers does)
 *   llama_probe MODEL.gguf run IDS N [THREADS]  IDS "1,2,3": prefill them, then N greedy steps;
 *                                            prints {"steps":[{"logits":[...],"next":id},...]}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static bool no_progress(float p, void *ud) {
    (void)p, (void)ud;
    return true;
}

static int tok_mode(const struct llama_vocab *vocab, const char *file) {
    FILE *f = fopen(file, "rb");
    if (!f) return perror(file), 1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int32_t *ids = malloc(sizeof *ids * 65536);
    while ((n = getline(&line, &cap, f)) >= 0) {
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        /* lines carry \n \r \t and \\ escapes so strings with newlines fit */
        size_t k = 0;
        for (ssize_t i = 0; i < n; i++) {
            if (line[i] == '\\' && i + 1 < n) {
                i++;
                line[k++] = line[i] == 'n' ? '\n' : line[i] == 't' ? '\t' : line[i] == 'r' ? '\r' : line[i];
            } else line[k++] = line[i];
        }
        int32_t m = llama_tokenize(vocab, line, (int32_t)k, ids, 65536, false, true);
        if (m < 0) return fprintf(stderr, "tokenize failed\n"), 1;
        putchar('[');
        for (int32_t i = 0; i < m; i++) printf(i ? ",%d" : "%d", ids[i]);
        puts("]");
    }
    free(line), free(ids), fclose(f);
    return 0;
}

static int run_mode(struct llama_model *model, const char *ids_s, int steps, int threads) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int V = llama_vocab_n_tokens(vocab);
    int32_t ids[4096];
    int n = 0;
    for (const char *p = ids_s; *p && n < 4096;) {
        ids[n++] = (int32_t)strtol(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + steps + 8);
    cp.n_batch = cp.n_ubatch = (uint32_t)(n + 8);
    cp.n_threads = cp.n_threads_batch = threads;
    /* an F32 cache (llama.cpp's default is F16), so only the arithmetic differs */
    if (getenv("PROBE_F16_CACHE") == NULL) cp.type_k = cp.type_v = GGML_TYPE_F32;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return fprintf(stderr, "context failed\n"), 1;
    printf("{\"steps\":[");
    struct llama_batch b = llama_batch_get_one(ids, n);
    int32_t next = 0;
    for (int s = 0; s <= steps; s++) {
        if (llama_decode(ctx, b)) return fprintf(stderr, "decode failed\n"), 1;
        const float *lg = llama_get_logits_ith(ctx, -1);
        int best = 0;
        printf("%s{\"logits\":[", s ? "," : "");
        for (int i = 0; i < V; i++) {
            printf(i ? ",%.7g" : "%.7g", lg[i]);
            if (lg[i] > lg[best]) best = i;
        }
        printf("],\"next\":%d}", best);
        next = best;
        b = llama_batch_get_one(&next, 1);
    }
    puts("]}");
    llama_free(ctx);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.gguf tok FILE | run IDS N [THREADS]\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = !strcmp(argv[2], "tok");
    mp.progress_callback = no_progress;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return fprintf(stderr, "%s: llama.cpp could not load it\n", argv[1]), 1;
    int rc = !strcmp(argv[2], "tok") ? tok_mode(llama_model_get_vocab(model), argv[3])
             : argc >= 5 ? run_mode(model, argv[3], atoi(argv[4]), argc > 5 ? atoi(argv[5]) : 1)
                         : 2;
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
