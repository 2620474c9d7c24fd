/* lwb_http.c - wb.http: an HTTP client over libcurl, with responses read piece by piece.
 *
 *   local r = wb.http.request{url = "http://127.0.0.1:8080/v1/models"}      -- whole body
 *   print(r.status, r.headers["content-type"], r.body)
 *
 *   local s <close> = wb.http.request{url = u, method = "POST", body = json, stream = true}
 *   for piece in s:chunks() do io.write(piece) end                        -- as it arrives
 *
 * One easy handle driven by a private multi handle: request() returns once the status line and
 * headers are in (stream = true) or the body is complete, and every read() runs the transfer only
 * until some bytes arrive, in slices of at most 50 ms. Control is back in Lua between pieces, so
 * a coroutine can yield there, and Ctrl-C (the binding's interrupt flag) is seen within a slice.
 *
 * Transport failures (refused, timeout, TLS, DNS, a dropped connection) are not misuse: they
 * return nil, message, kind like io.open, where kind is one of "connect", "timeout", "resolve",
 * "tls", "closed", "too_large", "error". Bad arguments raise. Proxies come from the environment
 * as libcurl reads them (http_proxy, https_proxy, no_proxy; the `proxy` option overrides). TLS
 * peers are verified with the system CA store (or `cainfo`). */
#include "lwb.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RESPONSE "wb.HttpResponse"

typedef struct Response {
    CURLM *multi;          /* NULL once closed */
    CURL *easy;
    struct curl_slist *req_headers;
    char *body;            /* request body copy (curl reads it during the transfer) */
    char *buf;             /* received, not yet handed to Lua */
    size_t len, cap;
    size_t total;          /* bytes received so far */
    size_t max_bytes;      /* 0 = unlimited */
    int headers_done;      /* the blank line after the final header block was seen */
    int done;              /* the transfer ended (ok or not) */
    CURLcode result;
    int too_large;
    int follow;            /* redirects are followed: a 3xx header block is not the final one */
    int block_location;    /* the current header block has a Location header */
    double idle_ms;        /* fail when no byte arrives for this long (0 = off) */
    double last_data;      /* clock of the last byte (or of the start) */
    int idle_expired;
    char errbuf[CURL_ERROR_SIZE];
    /* response headers: "name\0value\0" pairs of the final block, names lower-cased */
    char *hdr;
    size_t hdr_len, hdr_cap;
    char url[512];         /* for messages (truncated; never holds request headers) */
    long code;             /* the last status seen (kept after the transfer is freed) */
} Response;

static Response *check_response(lua_State *L, int idx) {
    Response *r = luaL_checkudata(L, idx, RESPONSE);
    return r;
}

static long status_of(Response *r);

static void response_free(Response *r) {
    status_of(r); /* keep the status for r.status after the end */
    if (r->multi) {
        if (r->easy) curl_multi_remove_handle(r->multi, r->easy);
        curl_multi_cleanup(r->multi);
        r->multi = NULL;
    }
    if (r->easy) curl_easy_cleanup(r->easy);
    r->easy = NULL;
    curl_slist_free_all(r->req_headers);
    r->req_headers = NULL;
    free(r->body);
    r->body = NULL;
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
    free(r->hdr);
    r->hdr = NULL;
    r->hdr_len = r->hdr_cap = 0;
}

static int grow(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    char *q = realloc(*p, c);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
    Response *r = ud;
    size_t n = size * nmemb;
    r->headers_done = 1;
    if (r->max_bytes && r->total + n > r->max_bytes) {
        r->too_large = 1;
        return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
    }
    if (!grow(&r->buf, &r->cap, r->len + n)) return 0;
    memcpy(r->buf + r->len, data, n);
    r->len += n;
    r->total += n;
    r->last_data = wb_clock_ms();
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud) {
    Response *r = ud;
    size_t n = size * nmemb;
    r->last_data = wb_clock_ms();
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        r->hdr_len = 0; /* a new block (after 100 Continue or a redirect) replaces the last */
        r->block_location = 0;
        r->headers_done = 0;
        return n;
    }
    if (n <= 2 && (data[0] == '\r' || data[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
        /* 1xx blocks are followed by another, and so is a redirect that curl will follow */
        int redirect = r->follow && (code == 301 || code == 302 || code == 303 || code == 307 || code == 308);
        redirect = redirect && r->block_location;
        if (code >= 200 && !redirect) r->headers_done = 1;
        return n;
    }
    const char *colon = memchr(data, ':', n);
    if (!colon) return n;
    size_t nl = (size_t)(colon - data);
    if (nl == 8 && strncasecmp(data, "location", 8) == 0) r->block_location = 1;
    const char *v = colon + 1, *end = data + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
    size_t vl = (size_t)(end - v);
    if (!grow(&r->hdr, &r->hdr_cap, r->hdr_len + nl + vl + 2)) return 0;
    for (size_t i = 0; i < nl; i++) {
        char c = data[i];
        r->hdr[r->hdr_len++] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
    }
    r->hdr[r->hdr_len++] = '\0';
    memcpy(r->hdr + r->hdr_len, v, vl);
    r->hdr_len += vl;
    r->hdr[r->hdr_len++] = '\0';
    return n;
}

/* Classify a failed transfer for the caller ("connect", "timeout", ...). */
static const char *failure_kind(const Response *r) {
    if (r->too_large) return "too_large";
    if (r->idle_expired) return "timeout";
    switch (r->result) {
    case CURLE_COULDNT_CONNECT: return "connect";
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return "resolve";
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE: return "tls";
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE: return "closed";
    default: return "error";
    }
}

/* Push nil, message, kind for a failed transfer; returns 3. */
static int push_failure(lua_State *L, Response *r) {
    const char *kind = failure_kind(r);
    lua_pushnil(L);
    if (r->too_large)
        lua_pushfstring(L, "%s: response larger than max_bytes = %d", r->url, (int)r->max_bytes);
    else if (r->idle_expired)
        lua_pushfstring(L, "%s: no data for %d ms (idle_timeout_ms)", r->url, (int)r->idle_ms);
    else
        lua_pushfstring(L, "%s: %s", r->url, r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->result));
    lua_pushstring(L, kind);
    return 3;
}

/* Drive the transfer for at most wait_ms (or until bytes are buffered, or the end). */
static void pump(lua_State *L, Response *r, double wait_ms, int until_headers) {
    double start = wb_clock_ms();
    for (;;) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(r->multi, &running);
        if (mc != CURLM_OK) {
            r->done = 1;
            r->result = CURLE_FAILED_INIT;
            snprintf(r->errbuf, sizeof r->errbuf, "%s", curl_multi_strerror(mc));
            return;
        }
        int msgs;
        CURLMsg *m;
        while ((m = curl_multi_info_read(r->multi, &msgs))) {
            if (m->msg == CURLMSG_DONE) {
                r->done = 1;
                r->result = m->data.result;
            }
        }
        if (!running) r->done = 1;
        if (r->done) return;
        if (until_headers ? r->headers_done : r->len > 0) return;
        double now = wb_clock_ms();
        if (r->idle_ms > 0 && now - r->last_data > r->idle_ms) {
            r->idle_expired = 1;
            r->done = 1;
            r->result = CURLE_OPERATION_TIMEDOUT;
            return;
        }
        if (lwb_interrupted()) {
            lwb_interrupt(0);
            response_free(r);
            luaL_error(L, "interrupted");
        }
        double left = wait_ms < 0 ? 50 : wait_ms - (now - start);
        if (left <= 0) return;
        int slice = left > 50 ? 50 : (int)left + 1;
        curl_multi_poll(r->multi, NULL, 0, slice, NULL);
    }
}

static void push_headers(lua_State *L, const Response *r) {
    lua_newtable(L);
    size_t i = 0;
    while (i < r->hdr_len) {
        const char *name = r->hdr + i;
        size_t nl = strlen(name);
        const char *val = name + nl + 1;
        size_t vl = strlen(val);
        /* repeated headers join with ", " as HTTP allows */
        if (lua_getfield(L, -1, name) == LUA_TSTRING) {
            lua_pushliteral(L, ", ");
            lua_pushlstring(L, val, vl);
            lua_concat(L, 3);
        } else {
            lua_pop(L, 1);
            lua_pushlstring(L, val, vl);
        }
        lua_setfield(L, -2, name);
        i += nl + vl + 2;
    }
}

static long status_of(Response *r) {
    long code = 0;
    if (r->easy && curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code) r->code = code;
    return r->code;
}

static const char *const k_request_opts[] = {
    "url", "method", "headers", "body", "stream", "timeout_ms", "connect_timeout_ms",
    "idle_timeout_ms", "max_bytes", "proxy", "cainfo", "follow_redirects", "resume_from", NULL};

/* Read opts.headers: a table {name = value} or a list of "Name: value" strings. */
static int add_headers(lua_State *L, int idx, Response *r) {
    if (lua_getfield(L, idx, "headers") == LUA_TNIL) {
        lua_pop(L, 1);
        return 1;
    }
    if (!lua_istable(L, -1)) luaL_argerror(L, 1, "option 'headers' must be a table");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        const char *line;
        if (lua_type(L, -2) == LUA_TSTRING) {
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_argerror(L, 1, lua_pushfstring(L, "header '%s' must be a string",
                                                    lua_tostring(L, -2)));
            line = lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), lua_tostring(L, -1));
        } else {
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_argerror(L, 1, "header list entries must be \"Name: value\" strings");
            lua_pushvalue(L, -1);
            line = lua_tostring(L, -1);
        }
        if (strpbrk(line, "\r\n")) luaL_argerror(L, 1, "a header must not contain CR or LF");
        struct curl_slist *n = curl_slist_append(r->req_headers, line);
        if (!n) luaL_error(L, "wb.http: out of memory");
        r->req_headers = n;
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    return 1;
}

static long opt_ms(lua_State *L, const char *key) {
    lua_Integer v = lwb_opt_integer(L, 1, key, 0);
    if (v < 0 || v > 86400000) luaL_argerror(L, 1, lua_pushfstring(L, "option '%s' must be in [0, 86400000]", key));
    return (long)v;
}

/* wb.http.request(opts) -> {status, headers, body} | Response (stream) | nil, msg, kind */
static int l_request(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lwb_check_options(L, 1, k_request_opts);
    lua_settop(L, 1);
    if (lua_getfield(L, 1, "url") != LUA_TSTRING) luaL_argerror(L, 1, "option 'url' (a string) is required");
    const char *url = lua_tostring(L, -1);
    lua_pop(L, 1);
    const char *method = "GET";
    if (lua_getfield(L, 1, "method") != LUA_TNIL) {
        method = luaL_checkstring(L, -1);
        for (const char *p = method; *p; p++)
            if (!(*p >= 'A' && *p <= 'Z')) luaL_argerror(L, 1, "option 'method' must be upper-case letters");
    }
    lua_pop(L, 1);
    size_t body_len = 0;
    const char *body = NULL;
    if (lua_getfield(L, 1, "body") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING) luaL_argerror(L, 1, "option 'body' must be a string");
        body = lua_tolstring(L, -1, &body_len);
    }
    lua_pop(L, 1);
    int stream = lwb_opt_bool(L, 1, "stream", 0);
    int follow = lwb_opt_bool(L, 1, "follow_redirects", 1);
    long timeout = opt_ms(L, "timeout_ms"), ctimeout = opt_ms(L, "connect_timeout_ms");
    long idle = opt_ms(L, "idle_timeout_ms");
    lua_Integer max_bytes = lwb_opt_integer(L, 1, "max_bytes", 0);
    lua_Integer resume = lwb_opt_integer(L, 1, "resume_from", 0);
    if (max_bytes < 0) luaL_argerror(L, 1, "option 'max_bytes' must be >= 0");
    if (resume < 0) luaL_argerror(L, 1, "option 'resume_from' must be >= 0");

    /* userdata first, so every resource below is owned by something the GC can collect */
    Response *r = lua_newuserdatauv(L, sizeof *r, 0);
    memset(r, 0, sizeof *r);
    luaL_setmetatable(L, RESPONSE);
    snprintf(r->url, sizeof r->url, "%s", url);
    r->max_bytes = (size_t)max_bytes;
    r->idle_ms = (double)idle;
    r->follow = follow;
    r->easy = curl_easy_init();
    r->multi = curl_multi_init();
    if (!r->easy || !r->multi) {
        response_free(r);
        return luaL_error(L, "wb.http: cannot initialise libcurl");
    }
    add_headers(L, 1, r);
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    char ua[64];
    snprintf(ua, sizeof ua, "workbench/%s", wb_version());
    curl_easy_setopt(e, CURLOPT_USERAGENT, ua); /* libcurl copies option strings */
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* what libcurl can decode */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    if (timeout) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
    if (ctimeout) curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ctimeout);
    if (resume) curl_easy_setopt(e, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)resume);
    if (lua_getfield(L, 1, "proxy") == LUA_TSTRING) curl_easy_setopt(e, CURLOPT_PROXY, lua_tostring(L, -1));
    lua_pop(L, 1);
    if (lua_getfield(L, 1, "cainfo") == LUA_TSTRING) curl_easy_setopt(e, CURLOPT_CAINFO, lua_tostring(L, -1));
    lua_pop(L, 1);
    if (strcmp(method, "GET") == 0 && !body) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
        if (strcmp(method, "POST") != 0) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        r->body = malloc(body_len ? body_len : 1);
        if (!r->body) {
            response_free(r);
            return luaL_error(L, "wb.http: out of memory");
        }
        if (body_len) memcpy(r->body, body, body_len);
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        /* no "Expect: 100-continue" round trip for large bodies */
        struct curl_slist *n = curl_slist_append(r->req_headers, "Expect:");
        if (n) r->req_headers = n;
    }
    if (r->req_headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->req_headers);
    curl_multi_add_handle(r->multi, e);
    r->last_data = wb_clock_ms();

    if (stream) {
        while (!r->done && !r->headers_done) pump(L, r, -1, 1);
        if (r->done && r->result != CURLE_OK) {
            int n = push_failure(L, r);
            response_free(r);
            return n;
        }
        return 1; /* the Response */
    }
    while (!r->done) pump(L, r, -1, 0);
    if (r->result != CURLE_OK) {
        int n = push_failure(L, r);
        response_free(r);
        return n;
    }
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, status_of(r));
    lua_setfield(L, -2, "status");
    push_headers(L, r);
    lua_setfield(L, -2, "headers");
    lua_pushlstring(L, r->buf ? r->buf : "", r->len);
    lua_setfield(L, -2, "body");
    lua_pushstring(L, r->url);
    lua_setfield(L, -2, "url");
    response_free(r);
    return 1;
}

/* r:read([wait_ms]) -> piece | "" (nothing within wait_ms) | nil (end) | nil, msg, kind */
static int resp_read(lua_State *L) {
    Response *r = check_response(L, 1);
    double wait = luaL_optnumber(L, 2, -1);
    if (!r->multi && !r->buf) {
        lua_pushnil(L);
        return 1;
    }
    if (r->len == 0 && !r->done) pump(L, r, wait, 0);
    if (r->len > 0) {
        lua_pushlstring(L, r->buf, r->len);
        r->len = 0;
        return 1;
    }
    if (r->done) {
        if (r->result != CURLE_OK) {
            int n = push_failure(L, r);
            response_free(r);
            return n;
        }
        response_free(r);
        lua_pushnil(L);
        return 1;
    }
    lua_pushliteral(L, "");
    return 1;
}

/* r:chunks() -> iterator over pieces that raises on a transport failure */
static int chunks_next(lua_State *L) {
    lua_settop(L, 0);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushinteger(L, -1);
    int n = resp_read(L);
    if (n == 3) return luaL_error(L, "%s", lua_tostring(L, -2));
    return 1;
}

static int resp_chunks(lua_State *L) {
    check_response(L, 1);
    lua_pushvalue(L, 1);
    lua_pushcclosure(L, chunks_next, 1);
    return 1;
}

static int resp_close(lua_State *L) {
    response_free(check_response(L, 1));
    return 0;
}

static int resp_index(lua_State *L) {
    Response *r = check_response(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "status") == 0) {
        lua_pushinteger(L, status_of(r));
        return 1;
    }
    if (strcmp(k, "headers") == 0) {
        push_headers(L, r);
        return 1;
    }
    if (strcmp(k, "url") == 0) {
        lua_pushstring(L, r->url);
        return 1;
    }
    if (strcmp(k, "bytes") == 0) {
        lua_pushinteger(L, (lua_Integer)r->total);
        return 1;
    }
    luaL_getmetatable(L, RESPONSE);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, k);
    return 1;
}

static int resp_tostring(lua_State *L) {
    Response *r = check_response(L, 1);
    lua_pushfstring(L, "HttpResponse(%d %s%s)", (int)status_of(r), r->url, r->multi ? "" : ", closed");
    return 1;
}

static const luaL_Reg resp_methods[] = {
    {"read", resp_read},
    {"chunks", resp_chunks},
    {"close", resp_close},
    {NULL, NULL},
};

static const luaL_Reg resp_meta[] = {
    {"__index", resp_index},
    {"__gc", resp_close},
    {"__close", resp_close},
    {"__tostring", resp_tostring},
    {NULL, NULL},
};

/* wb.http.escape(s) -> percent-encoded s (RFC 3986 unreserved characters kept) */
static int l_escape(lua_State *L) {
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
            c == '.' || c == '_' || c == '~') {
            luaL_addchar(&b, (char)c);
        } else {
            char hex[4];
            snprintf(hex, sizeof hex, "%%%02X", c);
            luaL_addstring(&b, hex);
        }
    }
    luaL_pushresult(&b);
    return 1;
}

static int l_version(lua_State *L) {
    lua_pushstring(L, curl_version());
    return 1;
}

static const luaL_Reg http_funcs[] = {
    {"request", l_request},
    {"escape", l_escape},
    {"version", l_version},
    {NULL, NULL},
};

void lwb_open_http(lua_State *L) {
    static int inited = 0;
    if (!inited) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        inited = 1;
    }
    luaL_newmetatable(L, RESPONSE);
    luaL_setfuncs(L, resp_meta, 0);
    luaL_newlib(L, resp_methods);
    lua_setfield(L, -2, "methods");
    lua_pop(L, 1);
    luaL_newlib(L, http_funcs);
    lua_setfield(L, -2, "http");
}
