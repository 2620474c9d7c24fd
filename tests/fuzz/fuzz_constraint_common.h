/* fuzz_constraint_common.h - a byte vocabulary (one token per byte value, eos last) and the
 * checks every compiled constraint must pass, shared by the regex/choice/schema fuzzers. */
#ifndef FUZZ_CONSTRAINT_COMMON_H
#define FUZZ_CONSTRAINT_COMMON_H

#include "wb_constraint.h"

#include <stddef.h>
#include <stdint.h>

static const wb_constraint_vocab *fuzz_byte_vocab(void) {
    static char bytes[256][1];
    static const char *ptrs[257];
    static size_t lens[257];
    static wb_constraint_vocab v;
    if (!v.n_tokens) {
        for (int b = 0; b < 256; b++) bytes[b][0] = (char)b, ptrs[b] = bytes[b], lens[b] = 1;
        ptrs[256] = "<eos>";
        lens[256] = 5;
        v.n_tokens = 257;
        v.bytes = ptrs;
        v.lens = lens;
        v.eos_id = 256;
    }
    return &v;
}

/* A compiled constraint must walk: follow the first allowed token a few dozen times; every
 * allowed token must advance without error. */
static void fuzz_walk(const wb_constraint *c) {
    wb_constraint_state *s = NULL;
    wb_err err = {0};
    if (wb_constraint_state_new(c, &s, &err) != WB_OK) __builtin_trap();
    for (int step = 0; step < 64 && !wb_constraint_state_complete(s); step++) {
        const uint32_t *mask = NULL;
        int32_t n = 0;
        if (wb_constraint_state_allowed(s, NULL, 0, &mask, &n, &err) != WB_OK) break;
        int32_t pick = -1;
        for (int32_t id = 0; mask && id < 257 && pick < 0; id++)
            if (mask[id >> 5] >> (id & 31) & 1u) pick = id;
        if (pick < 0 || pick == 256) break;
        if (wb_constraint_state_advance(s, pick, &err) != WB_OK) __builtin_trap();
    }
    wb_constraint_state_free(s);
}

#endif
