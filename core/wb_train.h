/* wb_train.h - GPT-2 training in C: forward and backward passes, AdamW, schedule, checkpoints. */
#ifndef WB_TRAIN_H
#define WB_TRAIN_H

#include "wb_base.h"
#include "wb_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wb_train_params {
    wb_config config;     /* model shape (vocab, context, width, layers, heads, MLP width)     */
    uint64_t seed;        /* initialisation and batch sampling; same seed = same run           */
    int batch_size;       /* B random windows per step                                        */
    int seq_len;          /* T tokens per window (<= config.n_ctx)                            */
    int max_steps;        /* length of the schedule                                           */
    int warmup_steps;     /* linear warm-up, then cosine decay to min_lr at max_steps         */
    float lr;             /* peak learning rate                                               */
    float min_lr;
    float weight_decay;   /* AdamW decoupled decay on 2-D matrices (wte, wpe included), not on
                           * biases or LayerNorm parameters                               */
    float beta1, beta2, eps;
    float grad_clip;      /* clip the global gradient norm to this; 0 disables                */
    float init_std;       /* normal init std for weights (GPT-2: 0.02)                        */
} wb_train_params;

wb_train_params wb_train_default_params(void);

typedef struct wb_trainer wb_trainer;

wb_status wb_trainer_new(const wb_train_params *p, wb_trainer **out, wb_err *err);
void wb_trainer_free(wb_trainer *t);

/* Token streams to sample windows from (copied). Ids must be < vocab_size. */
wb_status wb_trainer_set_data(wb_trainer *t, const int32_t *train, size_t n_train,
                              const int32_t *val, size_t n_val, wb_err *err);

void wb_trainer_set_abort(wb_trainer *t, wb_abort_fn fn, void *user_data);

/* One optimizer step on a random batch. Outputs may be NULL; grad_norm is before clipping.
 * With wb_threads_get() = W > 1, min(W, B) threads each run part of the batch (OpenBLAS is set
 * to one thread meanwhile). A cancelled step (WB_ERR_CANCELLED) leaves the trainer unchanged. */
wb_status wb_trainer_step(wb_trainer *t, float *train_loss, float *grad_norm, wb_err *err);

/* Mean loss over n_batches fixed (deterministic) validation windows. */
wb_status wb_trainer_eval(wb_trainer *t, int n_batches, float *val_loss, wb_err *err);

int wb_trainer_step_index(const wb_trainer *t); /* steps done so far                          */
float wb_trainer_lr(const wb_trainer *t);       /* learning rate the next step will use       */
const wb_train_params *wb_trainer_params(const wb_trainer *t);

/* Weights only, GPT2LMHeadModel names and layout, F32 (atomic write). */
wb_status wb_trainer_save_model(const wb_trainer *t, const char *path, wb_err *err);
/* Weights + AdamW moments + step + RNG state (atomic write); load resumes exactly. */
wb_status wb_trainer_save_checkpoint(const wb_trainer *t, const char *path, wb_err *err);
wb_status wb_trainer_load_checkpoint(wb_trainer *t, const char *path, wb_err *err);

/* ---- for tests: the flat parameter and gradient buffers and a loss/gradient on given data ---- */
/* Layout of both buffers (each per-layer tensor stacked over the L layers, Conv1D [in, out]):
 *   wte [V,C] | wpe [n_ctx,C] | ln_1.w [L,C] | ln_1.b [L,C] | c_attn.w [L,C,3C] | c_attn.b [L,3C] |
 *   attn.c_proj.w [L,C,C] | attn.c_proj.b [L,C] | ln_2.w [L,C] | ln_2.b [L,C] |
 *   c_fc.w [L,C,F] | c_fc.b [L,F] | mlp.c_proj.w [L,F,C] | mlp.c_proj.b [L,C] | ln_f.w [C] | ln_f.b [C]
 * (F = n_inner). wb_trainer_num_params equals the model's parameter count (1,071,872 for TinyLM). */
size_t wb_trainer_num_params(const wb_trainer *t);
float *wb_trainer_param_data(wb_trainer *t);
float *wb_trainer_grad_data(wb_trainer *t);
/* inputs/targets: [B, T]; fills the gradient buffer; no optimizer update. */
wb_status wb_trainer_loss_and_grad(wb_trainer *t, const int32_t *inputs, const int32_t *targets,
                                   int B, int T, float *loss, wb_err *err);

#ifdef __cplusplus
}
#endif
#endif
