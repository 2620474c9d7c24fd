/* lwb_httpd.c - wb.httpd: an HTTP server over libmicrohttpd for a Lua main loop.
 *
 *   local srv <close> = wb.httpd.new{host = "127.0.0.1", port = 8080}
 *   while true do
 *     for _, req in ipairs(srv:poll(100)) do         -- complete requests, bodies read
 *       if req.path == "/hello" then req:respond(200, {["Content-Type"] = "text/plain"}, "hi\n")
 *       else req:start(200, {["Content-Type"] = "text/event-stream"}); req:write("data: 1\n\n")
 *            ... later: req:write(...), req:finish() end
 *     end
 *   end
 *
 * Threads. libmicrohttpd's own polling thread accepts connections, parses requests, enforces the
 * connection cap, the idle timeout (slow clients) and the per-connection memory limit (header
 * size), and reads bodies up to max_body (larger ones get 413 at once, without reading them). A
 * complete request is queued for Lua and its connection suspended, so nothing runs in Lua off the
 * main thread and a slow model never blocks the network thread. Lua answers whenever it likes:
 * respond() sends a whole body; start() then write() stream one (chunked transfer encoding): the
 * content-reader callback hands over what Lua wrote and suspends the connection when it has
 * nothing yet; write() resumes it.
 *
 * A request is shared by the two threads (one mutex per server) and reference-counted: one
 * reference for libmicrohttpd until its completion callback, one for the Lua userdata. A client
 * that goes away is seen by req:closed(): libmicrohttpd reports it for a connection it is
 * serving; for a suspended one (which libmicrohttpd does not watch) closed() peeks at the socket.
 */
#include "lwb.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SERVER "wb.HttpServer"
#define REQUEST "wb.HttpRequest"

/* Bytes Lua may queue on a streaming response that the client is not reading. */
#define MAX_PENDING_OUT (16u << 20)

typedef struct Server Server;
typedef struct Req Req;

typedef enum { R_RECV, R_QUEUED, R_ANSWERED, R_SENDING, R_DONE } req_state;

struct Req {
    Server *srv;
    struct MHD_Connection *conn; /* NULL once libmicrohttpd is done with it */
    int refs;                    /* libmicrohttpd + Lua */
    req_state state;
    int suspended;
    int gone;           /* the connection ended before the response was complete */
    int too_large;
    uint64_t id;
    char *method, *url, *version;
    char *hdrs; size_t hdrs_len, hdrs_cap;   /* "name\0value\0" ..., names lower-cased */
    char *args; size_t args_len, args_cap;   /* query arguments, decoded */
    char *body; size_t body_len, body_cap;
    char peer[64];
    unsigned status;
    struct MHD_Response *resp;   /* made by Lua, queued by the network thread */
    char *out; size_t out_len, out_off, out_cap; /* streaming: written by Lua, not yet sent */
    int out_end;
    int out_abort;      /* abort(): close the connection once what was written is handed over */
    Req *next_ready;
    Req *prev, *next;            /* the server's list of live requests */
};

struct Server {
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;          /* the Lua userdata + every Req */
    int stopping;
    Req *ready_head, *ready_tail;
    Req *live;
    size_t max_body;
    uint64_t next_id;
    unsigned events;   /* bumped on completions so poll() wakes for cancellations too */
    int port;
};

typedef struct ServerUD { Server *s; } ServerUD;
typedef struct ReqUD { Req *r; } ReqUD;

static int grow(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *q = realloc(*p, c);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

static void server_unref_locked(Server *s, int *freed) {
    *freed = 0;
    if (--s->refs == 0) *freed = 1;
}

static void server_destroy(Server *s) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* Drop one reference to r; the server mutex is held and released here. */
static void req_unref_unlock(Req *r) {
    Server *s = r->srv;
    int sfree = 0;
    if (--r->refs == 0) {
        if (r->resp) MHD_destroy_response(r->resp);
        free(r->method); free(r->url); free(r->version);
        free(r->hdrs); free(r->args); free(r->body); free(r->out);
        free(r);
        server_unref_locked(s, &sfree);
    }
    pthread_mutex_unlock(&s->mu);
    if (sfree) server_destroy(s);
}

static int add_pair(char **buf, size_t *len, size_t *cap, const char *k, const char *v, int lower) {
    size_t kl = strlen(k), vl = v ? strlen(v) : 0;
    if (!grow(buf, cap, *len + kl + vl + 2)) return 0;
    for (size_t i = 0; i < kl; i++) {
        char c = k[i];
        (*buf)[(*len)++] = (lower && c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
    }
    (*buf)[(*len)++] = '\0';
    if (vl) memcpy(*buf + *len, v, vl);
    *len += vl;
    (*buf)[(*len)++] = '\0';
    return 1;
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    Req *r = cls;
    (void)kind;
    return add_pair(&r->hdrs, &r->hdrs_len, &r->hdrs_cap, k, v, 1) ? MHD_YES : MHD_NO;
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    Req *r = cls;
    (void)kind;
    return add_pair(&r->args, &r->args_len, &r->args_cap, k, v, 0) ? MHD_YES : MHD_NO;
}

static struct MHD_Response *json_error(const char *msg, const char *type, const char *code) {
    char buf[512];
    int n = snprintf(buf, sizeof buf,
                     "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,\"code\":\"%s\"}}",
                     msg, type, code);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer((size_t)n, buf, MHD_RESPMEM_MUST_COPY);
    if (resp) MHD_add_response_header(resp, "Content-Type", "application/json");
    return resp;
}

static enum MHD_Result queue_error(struct MHD_Connection *c, unsigned status, const char *msg,
                                   const char *type, const char *code) {
    struct MHD_Response *resp = json_error(msg, type, code);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    Server *s = cls;
    Req *r = *con_cls;
    if (!r) {
        pthread_mutex_lock(&s->mu);
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stopping) return MHD_NO;
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->method = dupstr(method);
        r->url = dupstr(url);
        r->version = dupstr(version);
        if (!r->method || !r->url || !r->version ||
            MHD_get_connection_values(c, MHD_HEADER_KIND, collect_header, r) < 0 ||
            MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, r) < 0) {
            free(r->method); free(r->url); free(r->version); free(r->hdrs); free(r->args);
            free(r);
            return MHD_NO;
        }
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, r->peer, sizeof r->peer);
            else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, r->peer, sizeof r->peer);
        }
        r->srv = s;
        r->conn = c;
        r->refs = 1;
        r->state = R_RECV;
        pthread_mutex_lock(&s->mu);
        s->refs++;
        r->id = ++s->next_id;
        r->next = s->live;
        if (s->live) s->live->prev = r;
        s->live = r;
        pthread_mutex_unlock(&s->mu);
        *con_cls = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || *end || n > s->max_body) {
                r->too_large = 1;
                r->state = R_DONE;
                char msg[160];
                snprintf(msg, sizeof msg, "request body of %s bytes is larger than the limit of %zu bytes",
                         cl, s->max_body);
                return queue_error(c, 413, msg, "invalid_request_error",
                                   "request_too_large");
            }
        }
        return MHD_YES;
    }
    if (r->state == R_DONE) { /* rejected early: discard whatever the client still sends */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->too_large || r->body_len + n > s->max_body) {
            /* A chunked body past the limit: libmicrohttpd takes a response only once the upload
             * is complete, so the rest is read and dropped (up to 16 times the limit, then the
             * connection is closed) and the 413 follows. */
            if (!r->too_large) {
                free(r->body);
                r->body = NULL;
                r->body_cap = 0;
            }
            r->too_large = 1;
            r->body_len += n;
            return r->body_len / 16 > s->max_body ? MHD_NO : MHD_YES;
        }
        if (!grow(&r->body, &r->body_cap, r->body_len + n + 1)) return MHD_NO;
        memcpy(r->body + r->body_len, upload, n);
        r->body_len += n;
        return MHD_YES;
    }
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return MHD_NO;
    }
    if (r->state == R_RECV && r->too_large) {
        r->state = R_DONE;
        pthread_mutex_unlock(&s->mu);
        char msg[160];
        snprintf(msg, sizeof msg, "request body is larger than the limit of %zu bytes", s->max_body);
        return queue_error(c, 413, msg, "invalid_request_error", "request_too_large");
    }
    if (r->state == R_RECV) {
        /* Complete: hand it to Lua and wait (suspended) for the answer. */
        r->state = R_QUEUED;
        r->refs++; /* the ready queue's reference becomes the Lua userdata's */
        r->next_ready = NULL;
        if (s->ready_tail) s->ready_tail->next_ready = r;
        else s->ready_head = r;
        s->ready_tail = r;
        r->suspended = 1;
        MHD_suspend_connection(c);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    if (r->state == R_ANSWERED && r->resp) {
        struct MHD_Response *resp = r->resp;
        unsigned status = r->status;
        r->resp = NULL;
        r->state = R_SENDING;
        pthread_mutex_unlock(&s->mu);
        enum MHD_Result ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    if (r->state == R_QUEUED) { /* woken without an answer: wait again */
        r->suspended = 1;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&s->mu);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    Server *s = cls;
    Req *r = *con_cls;
    (void)c;
    if (!r) return;
    *con_cls = NULL;
    pthread_mutex_lock(&s->mu);
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK || r->state != R_SENDING) r->gone = 1;
    r->conn = NULL;
    r->suspended = 0;
    if (r->state == R_RECV) r->state = R_DONE;
    if (r->prev) r->prev->next = r->next;
    else if (s->live == r) s->live = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    /* Answered but never queued (the client left, or the server stopped, before the connection
     * was resumed): nobody will queue it now. A streamed response holds a reference to r, so
     * r's count cannot reach 0 while it exists: destroy it here, after the unlock (its free
     * callback takes the lock). */
    struct MHD_Response *unsent = r->resp;
    r->resp = NULL;
    s->events++;
    pthread_cond_broadcast(&s->cv);
    req_unref_unlock(r);
    if (unsent) MHD_destroy_response(unsent);
}

/* Streaming body: what Lua wrote; suspend when there is nothing yet. */
static ssize_t read_out(void *cls, uint64_t pos, char *buf, size_t max) {
    Req *r = cls;
    Server *s = r->srv;
    (void)pos;
    pthread_mutex_lock(&s->mu);
    if (s->stopping || r->gone) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t avail = r->out_len - r->out_off;
    if (avail) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, r->out + r->out_off, n);
        r->out_off += n;
        if (r->out_off == r->out_len) r->out_off = r->out_len = 0;
        pthread_mutex_unlock(&s->mu);
        return (ssize_t)n;
    }
    if (r->out_abort) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR; /* no last chunk: the client sees a cut */
    }
    if (r->out_end) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (r->conn) {
        r->suspended = 1;
        MHD_suspend_connection(r->conn);
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* The streaming response holds a reference to its Req until libmicrohttpd destroys it. */
static void read_out_free(void *cls) {
    Req *r = cls;
    pthread_mutex_lock(&r->srv->mu);
    req_unref_unlock(r);
}

static void wake_locked(Req *r) {
    if (r->suspended && r->conn) {
        r->suspended = 0;
        MHD_resume_connection(r->conn);
    }
}

static void silent_log(void *cls, const char *fmt, va_list ap) {
    (void)cls; (void)fmt; (void)ap;
}

/* ---- Lua: server ---------------------------------------------------------------------------- */

static Server *check_server(lua_State *L, int idx) {
    ServerUD *u = luaL_checkudata(L, idx, SERVER);
    if (!u->s) luaL_error(L, "attempt to use a closed HttpServer");
    return u->s;
}

static const char *const k_server_opts[] = {"host", "port", "max_body", "max_connections",
                                            "idle_timeout_s", "memory_limit", NULL};

static int l_new(lua_State *L) {
    lwb_check_options(L, 1, k_server_opts);
    const char *host = "127.0.0.1";
    if (lua_type(L, 1) == LUA_TTABLE && lua_getfield(L, 1, "host") != LUA_TNIL) {
        host = luaL_checkstring(L, -1);
    }
    lua_Integer port = lwb_opt_integer(L, 1, "port", 8080);
    lua_Integer max_body = lwb_opt_integer(L, 1, "max_body", 4 << 20);
    lua_Integer max_conn = lwb_opt_integer(L, 1, "max_connections", 1000);
    lua_Integer idle = lwb_opt_integer(L, 1, "idle_timeout_s", 15);
    lua_Integer memlim = lwb_opt_integer(L, 1, "memory_limit", 64 << 10);
    luaL_argcheck(L, port >= 0 && port <= 65535, 1, "port must be in [0, 65535] (0 picks a free port)");
    luaL_argcheck(L, max_body >= 0 && max_body <= (1 << 30), 1, "max_body must be in [0, 1 GiB]");
    luaL_argcheck(L, max_conn >= 1 && max_conn <= 100000, 1, "max_connections must be in [1, 100000]");
    luaL_argcheck(L, idle >= 1 && idle <= 3600, 1, "idle_timeout_s must be in [1, 3600]");
    luaL_argcheck(L, memlim >= 8192 && memlim <= (16 << 20), 1, "memory_limit must be in [8 KiB, 16 MiB]");

    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        flags |= MHD_USE_IPv6;
    } else {
        return luaL_argerror(L, 1, lua_pushfstring(L, "host '%s' is not a numeric IPv4 or IPv6 address", host));
    }

    ServerUD *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->s = NULL;
    luaL_setmetatable(L, SERVER);
    Server *s = calloc(1, sizeof *s);
    if (!s) return luaL_error(L, "wb.httpd: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->refs = 1;
    s->max_body = (size_t)max_body;
    /* The network thread inherits this thread's signal mask: block SIGINT and SIGTERM while it is
     * created, so Ctrl-C always reaches the Lua thread (whose handler sets the interrupt hook). */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_access, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)max_conn,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)idle,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)memlim,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_EXTERNAL_LOGGER, silent_log, NULL,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
                            MHD_OPTION_END);
    int start_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = start_errno;
    if (!s->d) {
        int e = errno;
        server_destroy(s);
        return luaL_error(L, "wb.httpd: cannot listen on %s:%d (%s)", host, (int)port,
                          e ? strerror(e) : "libmicrohttpd refused the options");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : (int)port;
    u->s = s;
    return 1;
}

static void push_pairs(lua_State *L, const char *p, size_t len) {
    lua_newtable(L);
    size_t i = 0;
    while (i < len) {
        const char *k = p + i;
        size_t kl = strlen(k);
        const char *v = k + kl + 1;
        size_t vl = strlen(v);
        if (lua_getfield(L, -1, k) == LUA_TSTRING) {
            lua_pushliteral(L, ", ");
            lua_pushlstring(L, v, vl);
            lua_concat(L, 3);
        } else {
            lua_pop(L, 1);
            lua_pushlstring(L, v, vl);
        }
        lua_setfield(L, -2, k);
        i += kl + vl + 2;
    }
}

/* srv:poll([timeout_ms=0]) -> {Request, ...} (possibly empty). Waits at most timeout_ms for a
 * request (or a completion, so a cancelled client is noticed promptly). */
static int srv_poll(lua_State *L) {
    Server *s = check_server(L, 1);
    lua_Number wait = luaL_optnumber(L, 2, 0);
    luaL_argcheck(L, wait >= 0 && wait <= 3600000, 2, "timeout_ms must be in [0, 3600000]");
    lua_newtable(L);
    double end = wb_clock_ms() + wait;
    pthread_mutex_lock(&s->mu);
    unsigned events = s->events;
    while (!s->ready_head && s->events == events) {
        double left = end - wb_clock_ms();
        if (left <= 0 || lwb_interrupted()) break;
        if (left > 50) left = 50; /* so Ctrl-C is seen */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(left * 1e6);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    Req *list = s->ready_head;
    s->ready_head = s->ready_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    int i = 0;
    while (list) {
        Req *r = list;
        list = r->next_ready;
        ReqUD *u = lua_newuserdatauv(L, sizeof *u, 1);
        u->r = r; /* takes the ready queue's reference */
        luaL_setmetatable(L, REQUEST);
        lua_createtable(L, 0, 8); /* the plain fields, as a user value */
        lua_pushstring(L, r->method);
        lua_setfield(L, -2, "method");
        const char *q = strchr(r->url, '?');
        lua_pushlstring(L, r->url, q ? (size_t)(q - r->url) : strlen(r->url));
        lua_setfield(L, -2, "path");
        lua_pushstring(L, r->version);
        lua_setfield(L, -2, "version");
        push_pairs(L, r->hdrs, r->hdrs_len);
        lua_setfield(L, -2, "headers");
        push_pairs(L, r->args, r->args_len);
        lua_setfield(L, -2, "query");
        lua_pushlstring(L, r->body ? r->body : "", r->body_len);
        lua_setfield(L, -2, "body");
        lua_pushstring(L, r->peer);
        lua_setfield(L, -2, "peer");
        lua_pushinteger(L, (lua_Integer)r->id);
        lua_setfield(L, -2, "id");
        lua_setiuservalue(L, -2, 1);
        lua_rawseti(L, -2, ++i);
    }
    return 1;
}

static int srv_port(lua_State *L) {
    lua_pushinteger(L, check_server(L, 1)->port);
    return 1;
}

/* Connections libmicrohttpd holds now (idle ones included). */
static int srv_connections(lua_State *L) {
    Server *s = check_server(L, 1);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    lua_pushinteger(L, di ? (lua_Integer)di->num_connections : -1);
    return 1;
}

static int srv_close(lua_State *L) {
    ServerUD *u = luaL_checkudata(L, 1, SERVER);
    Server *s = u->s;
    if (!s) return 0;
    u->s = NULL;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    /* libmicrohttpd must not be stopped with suspended connections: wake them all; they see
     * `stopping` and close. */
    for (Req *r = s->live; r; r = r->next) {
        r->gone = 1;
        wake_locked(r);
    }
    /* requests queued but never polled: their queue reference goes */
    Req *list = s->ready_head;
    s->ready_head = s->ready_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        Req *r = list;
        list = r->next_ready;
        pthread_mutex_lock(&s->mu);
        req_unref_unlock(r);
    }
    MHD_stop_daemon(s->d);
    s->d = NULL;
    pthread_mutex_lock(&s->mu);
    int freed;
    server_unref_locked(s, &freed);
    pthread_mutex_unlock(&s->mu);
    if (freed) server_destroy(s);
    return 0;
}

static int srv_tostring(lua_State *L) {
    ServerUD *u = luaL_checkudata(L, 1, SERVER);
    if (!u->s) lua_pushliteral(L, "HttpServer (closed)");
    else lua_pushfstring(L, "HttpServer (port %d)", u->s->port);
    return 1;
}

/* ---- Lua: request --------------------------------------------------------------------------- */

static Req *check_req(lua_State *L, int idx) {
    ReqUD *u = luaL_checkudata(L, idx, REQUEST);
    if (!u->r) luaL_error(L, "attempt to use a released HttpRequest");
    return u->r;
}

/* Build a response's header list from the table at idx. */
static void add_resp_headers(lua_State *L, int idx, struct MHD_Response *resp) {
    if (lua_isnoneornil(L, idx)) return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING) {
            MHD_destroy_response(resp);
            luaL_argerror(L, idx, "headers must map names to strings");
        }
        const char *k = lua_tostring(L, -2), *v = lua_tostring(L, -1);
        if (strpbrk(k, "\r\n:") || strpbrk(v, "\r\n")) {
            MHD_destroy_response(resp);
            luaL_argerror(L, idx, "a header must not contain CR or LF");
        }
        MHD_add_response_header(resp, k, v);
        lua_pop(L, 1);
    }
}

static void check_status(lua_State *L, lua_Integer status) {
    luaL_argcheck(L, status >= 100 && status <= 599, 2, "status must be in [100, 599]");
}

/* Hand the response to the network thread (under the lock). Returns 0 if the client is gone. */
static int answer(lua_State *L, Req *r, unsigned status, struct MHD_Response *resp) {
    Server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    if (r->state != R_QUEUED) {
        pthread_mutex_unlock(&s->mu);
        MHD_destroy_response(resp);
        luaL_error(L, "request %d was already answered", (int)r->id);
    }
    if (r->gone || !r->conn) {
        r->state = R_DONE;
        pthread_mutex_unlock(&s->mu);
        MHD_destroy_response(resp);
        return 0;
    }
    r->status = status;
    r->resp = resp;
    r->state = R_ANSWERED;
    wake_locked(r);
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* req:respond(status, headers, body) -> true, or false if the client has gone */
static int req_respond(lua_State *L) {
    Req *r = check_req(L, 1);
    lua_Integer status = luaL_checkinteger(L, 2);
    check_status(L, status);
    size_t n = 0;
    const char *body = luaL_optlstring(L, 4, "", &n);
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return luaL_error(L, "wb.httpd: out of memory");
    add_resp_headers(L, 3, resp);
    lua_pushboolean(L, answer(L, r, (unsigned)status, resp));
    return 1;
}

/* req:start(status, headers) -> true/false: a streamed (chunked) response follows via write() */
static int req_start(lua_State *L) {
    Req *r = check_req(L, 1);
    lua_Integer status = luaL_checkinteger(L, 2);
    check_status(L, status);
    pthread_mutex_lock(&r->srv->mu);
    r->refs++; /* for the response's content reader */
    pthread_mutex_unlock(&r->srv->mu);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read_out, r,
                                                                  read_out_free);
    if (!resp) {
        pthread_mutex_lock(&r->srv->mu);
        req_unref_unlock(r);
        return luaL_error(L, "wb.httpd: out of memory");
    }
    add_resp_headers(L, 3, resp);
    lua_pushboolean(L, answer(L, r, (unsigned)status, resp));
    return 1;
}

/* req:write(data) -> true, or false if the client has gone (the caller should cancel). */
static int req_write(lua_State *L) {
    Req *r = check_req(L, 1);
    size_t n;
    const char *data = luaL_checklstring(L, 2, &n);
    Server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    if (r->state != R_ANSWERED && r->state != R_SENDING) {
        pthread_mutex_unlock(&s->mu);
        return luaL_error(L, "request %d: write() before start()", (int)r->id);
    }
    int ok = !r->gone && r->conn && !r->out_end;
    if (ok && r->out_len + n > MAX_PENDING_OUT) {
        r->gone = 1; /* a client that does not read is treated as gone */
        ok = 0;
    }
    if (ok && n) {
        if (!grow(&r->out, &r->out_cap, r->out_len + n)) {
            pthread_mutex_unlock(&s->mu);
            return luaL_error(L, "wb.httpd: out of memory");
        }
        memcpy(r->out + r->out_len, data, n);
        r->out_len += n;
        if (r->state == R_SENDING) wake_locked(r);
    }
    pthread_mutex_unlock(&s->mu);
    lua_pushboolean(L, ok);
    return 1;
}

/* req:finish(): end a streamed response */
static int req_finish(lua_State *L) {
    Req *r = check_req(L, 1);
    Server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    r->out_end = 1;
    if (r->state == R_SENDING) wake_locked(r);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* req:abort(): end a streamed response by closing the connection without its last chunk, once
 * what was written is handed over: the client sees a dropped connection (tests use this). */
static int req_abort(lua_State *L) {
    Req *r = check_req(L, 1);
    Server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    r->out_abort = 1;
    r->out_end = 1;
    if (r->state == R_SENDING) wake_locked(r);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* req:closed() -> true when the client has gone away (or the response was fully sent). */
static int req_closed(lua_State *L) {
    Req *r = check_req(L, 1);
    Server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    int gone = r->gone || !r->conn;
    if (!gone && r->suspended) {
        /* libmicrohttpd does not watch a suspended socket: look for EOF or an error ourselves.
         * The connection cannot be closed while it is suspended, so the fd is still its own. */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) {
            char b;
            ssize_t k = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                r->gone = 1;
                gone = 1;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    lua_pushboolean(L, gone);
    return 1;
}

/* Drop the Lua side. An unanswered request gets a 500 so its client is not left waiting; an
 * unfinished stream is ended. */
static int req_release(lua_State *L) {
    ReqUD *u = luaL_checkudata(L, 1, REQUEST);
    Req *r = u->r;
    if (!r) return 0;
    u->r = NULL;
    Server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    if (r->state == R_QUEUED && r->conn && !r->gone && !s->stopping) {
        struct MHD_Response *resp = json_error("the server dropped this request without answering",
                                               "server_error", "internal_error");
        if (resp) {
            r->status = 500;
            r->resp = resp;
            r->state = R_ANSWERED;
            wake_locked(r);
        }
    } else if (r->state == R_ANSWERED || r->state == R_SENDING) {
        r->out_end = 1;
        if (r->state == R_SENDING) wake_locked(r);
    }
    req_unref_unlock(r);
    return 0;
}

static int req_index(lua_State *L) {
    luaL_checkudata(L, 1, REQUEST);
    const char *k = luaL_checkstring(L, 2);
    lua_getiuservalue(L, 1, 1);
    if (lua_getfield(L, -1, k) != LUA_TNIL) return 1;
    luaL_getmetatable(L, REQUEST);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, k);
    return 1;
}

static int req_tostring(lua_State *L) {
    ReqUD *u = luaL_checkudata(L, 1, REQUEST);
    if (!u->r) lua_pushliteral(L, "HttpRequest (released)");
    else lua_pushfstring(L, "HttpRequest %d (%s %s)", (int)u->r->id, u->r->method, u->r->url);
    return 1;
}

static const luaL_Reg srv_methods[] = {
    {"poll", srv_poll},
    {"port", srv_port},
    {"connections", srv_connections},
    {"close", srv_close},
    {NULL, NULL},
};

static const luaL_Reg srv_meta[] = {
    {"__gc", srv_close},
    {"__close", srv_close},
    {"__tostring", srv_tostring},
    {NULL, NULL},
};

static const luaL_Reg req_methods[] = {
    {"respond", req_respond},
    {"start", req_start},
    {"write", req_write},
    {"finish", req_finish},
    {"abort", req_abort},
    {"closed", req_closed},
    {"release", req_release},
    {NULL, NULL},
};

static const luaL_Reg req_meta[] = {
    {"__index", req_index},
    {"__gc", req_release},
    {"__close", req_release},
    {"__tostring", req_tostring},
    {NULL, NULL},
};

static const luaL_Reg httpd_funcs[] = {
    {"new", l_new},
    {NULL, NULL},
};

void lwb_open_httpd(lua_State *L) {
    luaL_newmetatable(L, SERVER);
    luaL_setfuncs(L, srv_meta, 0);
    luaL_newlib(L, srv_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_newmetatable(L, REQUEST);
    luaL_setfuncs(L, req_meta, 0);
    luaL_newlib(L, req_methods);
    lua_setfield(L, -2, "methods");
    lua_pop(L, 1);
    luaL_newlib(L, httpd_funcs);
    lua_setfield(L, -2, "httpd");
}
