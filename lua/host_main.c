/* host_main.c - the `workbench` executable: a lua.c-shaped interpreter with `wb` built in.
 *
 *   workbench [options] [script [args]]
 *
 * Structure follows lua.c (Lua 5.4): main creates the state and runs pmain in protected mode;
 * collectargs validates options before anything runs; `arg` holds the script arguments with
 * negative indices for the interpreter and its options.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "lwb.h"

/* Set for the one re-exec that switches OpenBLAS's kernel, so it cannot loop. */
#define REEXEC_MARK "WB_HOST_REEXECED"

const char *host_progname = "workbench";

static lua_State *globalL = NULL;

void host_message(const char *msg) {
    if (host_progname) fprintf(stderr, "%s: ", host_progname);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
}

int host_report(lua_State *L, int status) {
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        host_message(msg ? msg : "(error object is not a string)");
        lua_pop(L, 1);
    }
    return status;
}

/* ---- Ctrl-C: lua.c's hook trick, plus the binding's flag for long C calls ------------------ */

/* SIGINTs that arrived while this docall ran, and ones not yet noticed by Lua or the core. */
static volatile sig_atomic_t sigint_seen = 0;
static volatile sig_atomic_t sigint_pending = 0;
int host_interrupted = 0;

/* The hook the handler sets: the first Lua instruction after a Ctrl-C raises "interrupted!",
 * unless the binding already raised its own "interrupted" for it (it clears the flag then), in
 * which case the hook just removes itself. So one Ctrl-C is one error, and it ends the whole chunk
 * however many generate calls or plain loops it is inside. */
static void lstop(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    sigint_pending = 0;
    if (!lwb_interrupted()) return;
    lwb_interrupt(0);
    luaL_error(L, "interrupted!");
}

/* A hook is the only thing a signal handler may safely set in a running Lua state; the core polls
 * the binding's flag between layers and tokens, so a long prefill or a generation stops too. The
 * handler stays installed (unlike lua.c's), so every Ctrl-C interrupts; only when three arrive
 * and nothing has noticed the first (a C call that does not poll) does the default action end
 * the process. */
static void laction(int i) {
    int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
    sigint_seen = 1;
    if (++sigint_pending >= 3) {
        signal(i, SIG_DFL);
        raise(i);
        return;
    }
    if (sigint_pending == 2) {
        static const char msg[] = "\n(interrupt pending; one more Ctrl-C ends the process)\n";
        if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing to do */ }
    }
    lwb_interrupt(1);
    lua_sethook(globalL, lstop, flag, 1);
}

static int msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* SIGINT ignored when the host started (a background job of a non-interactive shell, nohup):
 * leave it ignored, as shells expect. */
static int sigint_ignored(void) {
    static int known = 0, ignored = 0;
    if (!known) {
        struct sigaction cur;
        ignored = sigaction(SIGINT, NULL, &cur) == 0 && cur.sa_handler == SIG_IGN;
        known = 1;
    }
    return ignored;
}

int host_docall(lua_State *L, int narg, int nres) {
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    globalL = L;
    lwb_interrupt(0);
    sigint_seen = 0;
    sigint_pending = 0;
    struct sigaction sa, old;
    int armed = !sigint_ignored();
    if (armed) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = laction;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old);
    }
    int status = lua_pcall(L, narg, nres, base);
    if (armed) sigaction(SIGINT, &old, NULL);
    lua_sethook(L, NULL, 0, 0);
    lwb_interrupt(0);
    sigint_pending = 0;
    /* A call that failed after a Ctrl-C was interrupted (whatever the error text says). */
    host_interrupted = status != LUA_OK && sigint_seen;
    lua_remove(L, base);
    return status;
}

/* ---- arguments ------------------------------------------------------------------------------- */

static void print_usage(FILE *f) {
    fprintf(f,
            "usage: %s [options] [script [args]]\n"
            "Available options are:\n"
            "  -e stat     execute string 'stat'\n"
            "  -m dir      use the model in 'dir' (also: environment variable WB_MODEL)\n"
            "  -l mod      require library 'mod' into global 'mod'\n"
            "  -i          enter interactive mode after executing 'script'\n"
            "  --repl      run 'script', then the REPL with its globals (even if it failed)\n"
            "  -v          show version information (also --version)\n"
            "  -h          show this help (also --help)\n"
            "  --          stop handling options\n"
            "  -           execute stdin and stop handling options\n"
            "Without a script or -e: an interactive prompt where `model` and `tok` load the\n"
            "default model on first use.\n",
            host_progname);
}

static void print_version(void) {
    printf("workbench %s (%s)\n", wb_version(), LUA_RELEASE);
    fflush(stdout);
}

#define has_error 1 /* bad option */
#define has_i 2     /* -i */
#define has_v 4     /* -v */
#define has_e 8     /* -e */
#define has_h 16    /* -h */
#define has_repl 32 /* --repl: -i that also survives a failed script */

/* Traverse the options, checking them; *first is the index of the script (or argc). Like
 * lua.c, an option's value may be attached (-e'print(1)') or the next argument. */
static int collectargs(char **argv, int *first) {
    int args = 0;
    int i;
    if (argv[0] != NULL) {
        if (argv[0][0]) host_progname = argv[0];
    } else {
        *first = -1;
        return 0;
    }
    for (i = 1; argv[i] != NULL; i++) {
        *first = i;
        if (argv[i][0] != '-') return args;
        if (strcmp(argv[i], "--version") == 0) {
            args |= has_v;
            continue;
        }
        if (strcmp(argv[i], "--help") == 0) {
            args |= has_h;
            continue;
        }
        if (strcmp(argv[i], "--repl") == 0) {
            args |= has_i | has_repl;
            continue;
        }
        switch (argv[i][1]) {
        case '-':
            if (argv[i][2] != '\0') return has_error;
            *first = i + 1;
            return args;
        case '\0': return args; /* "-": stdin script */
        case 'i':
            if (argv[i][2] != '\0') return has_error;
            args |= has_i;
            break;
        case 'v':
            if (argv[i][2] != '\0') return has_error;
            args |= has_v;
            break;
        case 'h':
            if (argv[i][2] != '\0') return has_error;
            args |= has_h;
            break;
        case 'e': args |= has_e; /* FALLTHROUGH */
        case 'm':
        case 'l':
            if (argv[i][2] == '\0') {
                i++;
                if (argv[i] == NULL || argv[i][0] == '-') return has_error;
            }
            break;
        default: return has_error;
        }
    }
    *first = i;
    return args;
}

static void report_bad_option(char **argv, int first) {
    const char *opt = argv[first];
    if (opt == NULL) opt = "?";
    switch (opt[1]) {
    case 'e':
    case 'l':
    case 'm':
        fprintf(stderr, "%s: '%s' needs argument\n", host_progname, opt);
        break;
    default: fprintf(stderr, "%s: unrecognized option '%s'\n", host_progname, opt);
    }
    print_usage(stderr);
}

/* -m is applied before any Lua runs: it sets WB_MODEL, which wb.default_model_dir() and wb.load()
 * read, and which child processes inherit. */
static void apply_model_option(char **argv, int script) {
    for (int i = 1; i < script; i++) {
        if (argv[i][0] == '-' && argv[i][1] == 'm') {
            const char *dir = argv[i][2] ? argv[i] + 2 : argv[++i];
            setenv("WB_MODEL", dir, 1);
        } else if (argv[i][0] == '-' && (argv[i][1] == 'e' || argv[i][1] == 'l') &&
                   argv[i][2] == '\0') {
            i++;
        }
    }
}

static void createargtable(lua_State *L, char **argv, int argc, int script) {
    if (script == argc) script = 0; /* no script: arg[0] is the interpreter */
    int narg = argc - (script + 1);
    lua_createtable(L, narg, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int dochunk(lua_State *L, int status) {
    if (status == LUA_OK) status = host_docall(L, 0, 0);
    return host_report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name) {
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

static int dolibrary(lua_State *L, const char *name) {
    lua_getglobal(L, "require");
    lua_pushstring(L, name);
    int status = host_docall(L, 1, 1);
    if (status == LUA_OK) lua_setglobal(L, name);
    return host_report(L, status);
}

/* Run -e and -l in order. */
static int runargs(lua_State *L, char **argv, int n) {
    for (int i = 1; i < n; i++) {
        int option = argv[i][1];
        if (argv[i][0] != '-') continue;
        switch (option) {
        case 'e':
        case 'l': {
            const char *extra = argv[i] + 2;
            if (*extra == '\0') extra = argv[++i];
            int status = option == 'e' ? dostring(L, extra, "=(command line)")
                                       : dolibrary(L, extra);
            if (status != LUA_OK) return 0;
            break;
        }
        case 'm':
            if (argv[i][2] == '\0') i++;
            break;
        default: break;
        }
    }
    return 1;
}

static int pushargs(lua_State *L) {
    if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    int i;
    for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
    lua_remove(L, -i);
    return n;
}

static int handle_script(lua_State *L, char **argv) {
    const char *fname = argv[0];
    if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) fname = NULL; /* stdin */
    /* A bare word that is not a file here names a shipped script: `workbench serve` runs
     * scripts/serve.lua, `workbench generate -p ...` scripts/generate.lua. */
    char shipped[4096];
    if (fname && access(fname, F_OK) != 0 && lwb_script_path(fname, shipped, sizeof shipped)) {
        fname = shipped;
        lua_getglobal(L, "arg");
        if (lua_istable(L, -1)) {
            lua_pushstring(L, shipped);
            lua_rawseti(L, -2, 0);
        }
        lua_pop(L, 1);
    }
    int status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n = pushargs(L);
        status = host_docall(L, n, LUA_MULTRET);
    }
    return host_report(L, status);
}

/* `wb.presets`, `wb.cost`, ...: the pure-Lua modules under lua/wb/ appear as fields of `wb` on
 * first use, so the API reads as one namespace while the files stay editable without a rebuild. A
 * name with no lua/wb/<name>.lua stays nil. */
static const char lazy_wb[] =
    "local wb = ...\n"
    "if getmetatable(wb) ~= nil then return end\n"
    "setmetatable(wb, {__index = function(t, k)\n"
    "  if type(k) ~= 'string' or not k:match('^[%l_][%w_]*$') then return nil end\n"
    "  if not package.searchpath('wb.' .. k, package.path) then return nil end\n"
    "  local m = require('wb.' .. k)\n"
    "  rawset(t, k, m)\n"
    "  return m\n"
    "end})\n";

static void set_lazy_wb(lua_State *L) {
    if (luaL_loadbuffer(L, lazy_wb, sizeof lazy_wb - 1, "=lazy_wb") != LUA_OK) {
        lua_pop(L, 1);
        return;
    }
    lua_getglobal(L, "wb");
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) lua_pop(L, 1);
}

/* package.path gets the pure-Lua library first, from the source tree or the install prefix, so
 * editing the .lua files under lua/wb takes effect without a rebuild. */
static void set_paths(lua_State *L) {
    char dir[4096];
    if (!lwb_lua_dir(dir, sizeof dir)) return;
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

static int pmain(lua_State *L) {
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script = argc;
    int args = collectargs(argv, &script);
    luaL_checkversion(L);
    if (args == has_error) {
        report_bad_option(argv, script);
        return 0;
    }
    if (args & has_h) {
        print_usage(stdout);
        lua_pushboolean(L, 1);
        return 1;
    }
    if (args & has_v) print_version();
    apply_model_option(argv, script);
    luaL_openlibs(L);
    luaL_requiref(L, "wb", luaopen_wb, 1); /* package.loaded.wb and the global `wb` */
    lua_pop(L, 1);
    set_paths(L);
    set_lazy_wb(L);
    createargtable(L, argv, argc, script);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0);
    if (!runargs(L, argv, script)) return 0;
    int ok = 1;
    if (script < argc && handle_script(L, argv + script) != LUA_OK) {
        /* --repl is for inspecting a script's state, which matters most when it failed. */
        if (!(args & has_repl)) return 0;
        ok = 0;
    }
    /* Piped input whose chunks failed exits 1, as a script would (the REPL still runs them all). */
    if ((args & has_i) || (script == argc && !(args & (has_e | has_v)))) {
        if (host_repl(L) != LUA_OK) ok = 0;
    }
    lua_pushboolean(L, ok);
    return 1;
}

/* Debian's OpenBLAS may pick an SSE-era kernel on a newer CPU; OPENBLAS_CORETYPE only works when
 * set before the library initialises, i.e. before this process started: so set it and re-exec. */
static void maybe_reexec(char **argv) {
    if (getenv(REEXEC_MARK)) {
        unsetenv(REEXEC_MARK); /* children inherit OPENBLAS_CORETYPE, which already stops them */
        return;
    }
    const char *core = wb_blas_preferred_coretype();
    if (!core) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv(REEXEC_MARK, "1", 1);
    execv("/proc/self/exe", argv);
    unsetenv(REEXEC_MARK); /* exec failed: carry on with the slower kernel */
}

int main(int argc, char **argv) {
    maybe_reexec(argv);
    wb_threads_set(1); /* OpenBLAS would otherwise start one thread per core */
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        host_message("cannot create state: not enough memory");
        return EXIT_FAILURE;
    }
    lua_gc(L, LUA_GCSTOP);
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int result = lua_toboolean(L, -1);
    host_report(L, status);
    int interrupted = host_interrupted && !result;
    lua_close(L); /* finalizers run first: sessions, streams, helper processes */
    if (interrupted) {
        /* Ended by Ctrl-C: die of SIGINT, as the shell expects (status 130; a calling shell loop
         * stops too). */
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
        return 128 + SIGINT;
    }
    return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
