/* lwb_hash.c - wb.sha256(): a streaming SHA-256 over OpenSSL's libcrypto (EVP interface).
 *
 *   local h <close> = wb.sha256()
 *   for piece in pieces do h:update(piece) end
 *   print(h:hex())                 -- 64 lowercase hex digits; the object is then finished
 *
 * Used by scripts/download.lua to check files against the Hub's LFS metadata. libcrypto is the
 * library libcurl is built on here, so hashing adds no new dependency and no hand-written digest.
 */
#include "lwb.h"

#include <openssl/evp.h>

#define SHA256_MT "wb.Sha256"

typedef struct Sha256 {
    EVP_MD_CTX *ctx; /* NULL once finished or closed */
} Sha256;

static Sha256 *check_sha(lua_State *L, int idx) { return luaL_checkudata(L, idx, SHA256_MT); }

static Sha256 *check_open(lua_State *L, int idx) {
    Sha256 *h = check_sha(L, idx);
    if (!h->ctx) luaL_error(L, "wb.sha256: the digest is already finished (hex() was called)");
    return h;
}

/* wb.sha256([data]) -> digest object */
static int l_sha256(lua_State *L) {
    size_t n = 0;
    const char *data = luaL_optlstring(L, 1, NULL, &n);
    Sha256 *h = lua_newuserdatauv(L, sizeof *h, 0); /* userdata before the context */
    h->ctx = NULL;
    luaL_setmetatable(L, SHA256_MT);
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx) return luaL_error(L, "wb.sha256: out of memory");
    if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) return luaL_error(L, "wb.sha256: cannot initialise");
    if (data && n && EVP_DigestUpdate(h->ctx, data, n) != 1) return luaL_error(L, "wb.sha256: update failed");
    return 1;
}

/* h:update(data) -> h */
static int sha_update(lua_State *L) {
    Sha256 *h = check_open(L, 1);
    size_t n;
    const char *data = luaL_checklstring(L, 2, &n);
    if (n && EVP_DigestUpdate(h->ctx, data, n) != 1) return luaL_error(L, "wb.sha256: update failed");
    lua_settop(L, 1);
    return 1;
}

/* h:hex() -> lowercase hex digest; finishes the object */
static int sha_hex(lua_State *L) {
    Sha256 *h = check_open(L, 1);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    int ok = EVP_DigestFinal_ex(h->ctx, md, &len) == 1;
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
    if (!ok) return luaL_error(L, "wb.sha256: final failed");
    static const char digits[] = "0123456789abcdef";
    char out[2 * EVP_MAX_MD_SIZE];
    for (unsigned i = 0; i < len; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    lua_pushlstring(L, out, 2 * (size_t)len);
    return 1;
}

/* __gc and __close: free the context (idempotent) */
static int sha_close(lua_State *L) {
    Sha256 *h = check_sha(L, 1);
    if (h->ctx) EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
    return 0;
}

static int sha_tostring(lua_State *L) {
    Sha256 *h = check_sha(L, 1);
    lua_pushstring(L, h->ctx ? "Sha256 (open)" : "Sha256 (finished)");
    return 1;
}

static const luaL_Reg sha_methods[] = {
    {"update", sha_update},
    {"hex", sha_hex},
    {"close", sha_close},
    {NULL, NULL},
};

static const luaL_Reg sha_meta[] = {
    {"__gc", sha_close},
    {"__close", sha_close},
    {"__tostring", sha_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

void lwb_open_hash(lua_State *L) {
    luaL_newmetatable(L, SHA256_MT);
    luaL_setfuncs(L, sha_meta, 0);
    luaL_newlib(L, sha_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_sha256);
    lua_setfield(L, -2, "sha256");
}
