/* wb.h - the workbench core: one include for everything public.
 *
 *   text --tokenizer--> ids --session--> logits --sampler--> id --detok--> text
 */
#ifndef WB_H
#define WB_H
#include "wb_base.h"
#include "wb_tokenizer.h"
#include "wb_model.h"
#include "wb_train.h"
#include "wb_sampler.h"
#include "wb_generate.h"
#include "wb_chat.h"
#include "wb_jinja.h"
#include "wb_generation_config.h"
#include "wb_constraint.h"
#include "wb_batch.h"
#endif
