/* lwb_module.c - luaopen_wb: the list of openers (the shared helpers live in lwb_aux.c). */
#include "lwb.h"

int luaopen_wb(lua_State *L) {
    /* OpenBLAS starts with one thread per core; align it with the core's setting (default 1). */
    wb_threads_set(wb_threads_get());
    lua_newtable(L);
    lwb_open_core(L);
    lwb_open_vec(L);
    lwb_open_tokenizer(L);
    lwb_open_model(L);
    lwb_open_tensor(L);
    lwb_open_sampling(L);
    lwb_open_constraint(L);
    lwb_open_safetensors(L);
    lwb_open_train(L);
    lwb_open_chat(L);
    lwb_open_batch(L);
    lwb_open_http(L);
    lwb_open_httpd(L);
    lwb_open_hash(L);
    return 1;
}
