/* host_repl.c - the interactive loop: lua.c's doREPL with readline, persistent history, lazy
 * `model`/`tok` globals, Ctrl-C that returns to the prompt, Tab completion of names, methods and
 * preset names, and `:help` (both answered by lua/wb/help.lua, so they change without a rebuild).
 *
 * With stdin not a terminal the same loop reads plain lines without prompts, so
 *     echo '1+1' | workbench
 * prints 2: the REPL is scriptable for tests.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "host.h"
#include "lwb.h"

#define PROMPT "> "
#define PROMPT2 ">> "
#define EOFMARK "<eof>"
#define MARKLEN (sizeof(EOFMARK) / sizeof(char) - 1)
#define HISTORY_FILE ".workbench_history"
#define HISTORY_MAX 1000
#define RESTART (-2) /* multiline: Ctrl-C dropped the chunk; the new line starts over */

static char history_path[4096];

static int interactive = 0;
/* Set by Ctrl-C at the prompt: the pending (multi-line) chunk is dropped. */
static volatile sig_atomic_t prompt_cancelled = 0;

/* `model` and `tok` exist on first use: loading is not free, and a REPL that only computes
 * statistics should not need a model directory at all. */
static const char lazy_globals[] =
    "local wb = require 'wb'\n"
    "local mt = getmetatable(_G) or {}\n"
    "if mt.__index ~= nil then return end\n"
    "mt.__index = function(t, k)\n"
    "  if k == 'model' then\n"
    "    local m = wb.load()\n"
    "    rawset(t, 'model', m)\n"
    "    return m\n"
    "  elseif k == 'tok' then\n"
    "    local m = t.model\n"
    "    rawset(t, 'tok', m.tokenizer)\n"
    "    return m.tokenizer\n"
    "  end\n"
    "end\n"
    "setmetatable(_G, mt)\n";

/* The REPL prints results with wb.util.repl_print when the library is found (tables shown as
 * tables), else with the global print as lua.c does. */
static const char printer[] =
    "local ok, util = pcall(require, 'wb.util')\n"
    "if ok and type(util) == 'table' and util.repl_print then return util.repl_print end\n"
    "return print\n";


/* ---- Tab completion ------------------------------------------------------------------------ */

/* Readline calls back without a Lua state of its own; the REPL's state is idle while it waits. */
static lua_State *complete_L = NULL;
static char **candidates = NULL;
static size_t n_candidates = 0;

static void free_candidates(void) {
    for (size_t i = 0; i < n_candidates; i++) free(candidates[i]);
    free(candidates);
    candidates = NULL;
    n_candidates = 0;
}

static int collect_candidates(lua_State *L) {
    const char *text = lua_tostring(L, 1);
    const char *line = lua_tostring(L, 2);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "wb.help");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "complete");
    lua_pushstring(L, text);
    lua_pushstring(L, line);
    lua_call(L, 2, 1);
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, -1);
    candidates = calloc((size_t)n + 1, sizeof *candidates);
    if (!candidates) return 0;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        const char *c = lua_tostring(L, -1);
        if (c && (candidates[n_candidates] = strdup(c)) != NULL) n_candidates++;
        lua_pop(L, 1);
    }
    return 0;
}

static char *candidate_generator(const char *text, int state) {
    static size_t next;
    (void)text;
    if (state == 0) next = 0;
    if (next < n_candidates) return strdup(candidates[next++]);
    return NULL;
}

static char **repl_complete(const char *text, int start, int end) {
    (void)start;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    rl_completion_suppress_append = 1;
    free_candidates();
    if (!complete_L) return NULL;
    lua_State *L = complete_L;
    int top = lua_gettop(L);
    lua_pushcfunction(L, collect_candidates);
    lua_pushstring(L, text);
    lua_pushlstring(L, rl_line_buffer, (size_t)end);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) { /* a broken help.lua must not break the prompt */ }
    lua_settop(L, top);
    if (n_candidates == 0) return NULL;
    return rl_completion_matches(text, candidate_generator);
}

/* ---- :help --------------------------------------------------------------------------------- */

/* Lines starting with ':' are REPL commands (Lua code never starts with ':'). */
static void colon_command(lua_State *L, const char *line) {
    lua_getglobal(L, "require");
    lua_pushliteral(L, "wb.help");
    int status = host_docall(L, 1, 1);
    if (status == LUA_OK) {
        lua_getfield(L, -1, "command");
        lua_remove(L, -2);
        lua_pushstring(L, line);
        status = host_docall(L, 1, 1);
    }
    if (status == LUA_OK) {
        const char *out = lua_tostring(L, -1);
        if (out) printf("%s\n", out);
        fflush(stdout);
        lua_pop(L, 1);
    } else {
        host_report(L, status);
    }
}

static const char *get_prompt(lua_State *L, int firstline) {
    if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
        lua_pop(L, 1);
        return firstline ? PROMPT : PROMPT2;
    }
    const char *p = luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    /* The string stays on the stack until the caller pops it. */
    return p;
}

/* Ctrl-C at the prompt: clear the line and start over, as shells do. Readline (8.x) handles
 * signals synchronously and calls this handler from its own code after restoring the terminal,
 * so calling readline functions here is safe. */
static void prompt_sigint(int sig) {
    (void)sig;
    prompt_cancelled = 1;
    if (write(STDOUT_FILENO, "\n", 1) < 0) { /* nothing useful to do */ }
    rl_replace_line("", 0);
    rl_set_prompt(PROMPT);
    rl_on_new_line();
    rl_redisplay();
}

/* Read one line into a Lua string on the stack; 0 at end of input. */
static int readline_push(lua_State *L, int firstline) {
    if (interactive) {
        int pushed_prompt = lua_gettop(L);
        const char *prmt = get_prompt(L, firstline);
        pushed_prompt = lua_gettop(L) > pushed_prompt;
        char *line = readline(prmt);
        if (pushed_prompt) lua_pop(L, 1);
        if (!line) return 0;
        lua_pushstring(L, line);
        free(line);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return 0;
    }
    if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
    lua_pushlstring(L, line, (size_t)n);
    free(line);
    return 1;
}

/* lua.c: is the syntax error at the top of the stack "more input needed"? */
static int incomplete(lua_State *L, int status) {
    if (status == LUA_ERRSYNTAX) {
        size_t lmsg;
        const char *msg = lua_tolstring(L, -1, &lmsg);
        if (lmsg >= MARKLEN && strcmp(msg + lmsg - MARKLEN, EOFMARK) == 0) {
            lua_pop(L, 1);
            return 1;
        }
    }
    return 0;
}

/* "=expr" on a first line is the old spelling of "return expr". */
static void fix_equals(lua_State *L) {
    if (lua_tostring(L, -1)[0] == '=') {
        lua_pushfstring(L, "return %s", lua_tostring(L, -1) + 1);
        lua_remove(L, -2);
    }
}

static int pushline(lua_State *L, int firstline) {
    if (!readline_push(L, firstline)) return 0;
    if (firstline) fix_equals(L);
    return 1;
}

/* History keeps whole chunks (multi-line ones included), as lua.c does, and each entry is
 * appended to the file as it is entered, so os.exit or a closed terminal loses nothing. */
static void add_to_history(const char *chunk) {
    if (!interactive || !chunk || !chunk[0]) return;
    add_history(chunk);
    if (history_path[0]) append_history(1, history_path);
}

/* A line that leaves the REPL (exit, quit, :q; wb.repl.is_exit decides). */
static int is_exit(lua_State *L) {
    int top = lua_gettop(L), yes = 0;
    if (lua_getfield(L, LUA_REGISTRYINDEX, "workbench.repl_is_exit") == LUA_TFUNCTION) {
        lua_pushvalue(L, 1);
        if (lua_pcall(L, 1, 1, 0) == LUA_OK) yes = lua_toboolean(L, -1);
    } else {
        const char *s = lua_tostring(L, 1);
        yes = strcmp(s, "exit") == 0 || strcmp(s, "quit") == 0 || strcmp(s, ":q") == 0;
    }
    if (yes) add_to_history(lua_tostring(L, 1));
    lua_settop(L, top);
    return yes;
}

/* Compile the chunk at index 1 after wb.repl's rewrite (top-level locals become REPL variables);
 * without the library, as typed. Pushes the function or the error message. */
static int load_chunk(lua_State *L) {
    size_t len;
    const char *src = lua_tolstring(L, 1, &len);
    int top = lua_gettop(L);
    if (lua_getfield(L, LUA_REGISTRYINDEX, "workbench.repl_rewrite") == LUA_TFUNCTION) {
        lua_pushvalue(L, 1);
        if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING)
            src = lua_tolstring(L, -1, &len);
    }
    int status = luaL_loadbuffer(L, src, len, "=stdin");
    lua_replace(L, top + 1); /* the function or message replaces what was pushed above */
    lua_settop(L, top + 1);
    return status;
}

/* Try the line as an expression: "return " .. line. */
static int addreturn(lua_State *L) {
    const char *line = lua_tostring(L, -1);
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
    if (status == LUA_OK) {
        lua_remove(L, -2);
        add_to_history(line);
    } else {
        lua_pop(L, 2);
    }
    return status;
}

/* Stack on entry: [source]; on return: [source, function or error message], or [new line]
 * with RESTART. */
static int multiline(lua_State *L) {
    for (;;) {
        const char *line = lua_tostring(L, 1);
        int status = load_chunk(L);
        if (!incomplete(L, status)) {
            add_to_history(line);
            return status;
        }
        prompt_cancelled = 0;
        if (!pushline(L, 0)) {
            /* End of input inside a chunk: compile again to report the "<eof>" error. */
            return load_chunk(L);
        }
        if (prompt_cancelled) {
            /* Ctrl-C while continuing: drop what was typed so far; the new line is a first line. */
            prompt_cancelled = 0;
            lua_remove(L, 1);
            fix_equals(L);
            return RESTART;
        }
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* Leaves a compiled chunk (or an error message) at index 1; -1 at end of input. */
static int loadline(lua_State *L) {
    lua_settop(L, 0);
    prompt_cancelled = 0;
    if (!pushline(L, 1)) return -1;
    if (is_exit(L)) return -1;
    while (lua_tostring(L, 1)[0] == ':') {
        char *line = strdup(lua_tostring(L, 1));
        lua_settop(L, 0);
        if (line) {
            if (interactive) add_history(line);
            colon_command(L, line);
            free(line);
        }
        lua_settop(L, 0);
        prompt_cancelled = 0;
        if (!pushline(L, 1)) return -1;
    if (is_exit(L)) return -1;
    }
    int status;
    do {
        status = addreturn(L);
        if (status != LUA_OK) status = multiline(L);
    } while (status == RESTART);
    lua_remove(L, 1);
    return status;
}

static void print_results(lua_State *L) {
    int n = lua_gettop(L);
    if (n > 0) {
        luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
        lua_getfield(L, LUA_REGISTRYINDEX, "workbench.repl_print");
        lua_insert(L, 1);
        if (lua_pcall(L, n, 0, 0) != LUA_OK) {
            host_message(lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
        }
    }
}

/* `help`, `help(x)` and `help "name"` in the REPL, for those who type Lua rather than ':help';
 * wb.help.value is a callable table whose printed form is the topic list. */
static const char help_global[] =
    "if rawget(_G, 'help') == nil then\n"
    "  local ok, h = pcall(require, 'wb.help')\n"
    "  if ok then _G.help = h.value end\n"
    "end\n";

/* wb.repl's rewrite and exit words, kept in the registry; without the library the REPL still
 * runs (chunks as typed, exit/quit/:q by name). */
static const char repl_hooks[] =
    "local ok, r = pcall(require, 'wb.repl')\n"
    "if ok and type(r) == 'table' then return r.rewrite, r.is_exit end\n";

static void setup(lua_State *L) {
    if (luaL_loadstring(L, help_global) == LUA_OK) host_report(L, host_docall(L, 0, 0));
    else host_report(L, LUA_ERRSYNTAX);
    if (luaL_loadstring(L, lazy_globals) == LUA_OK) host_report(L, host_docall(L, 0, 0));
    else host_report(L, LUA_ERRSYNTAX);
    if (luaL_loadstring(L, printer) != LUA_OK || host_docall(L, 0, 1) != LUA_OK) {
        lua_pop(L, 1);
        lua_getglobal(L, "print");
    }
    lua_setfield(L, LUA_REGISTRYINDEX, "workbench.repl_print");
    if (luaL_loadstring(L, repl_hooks) == LUA_OK && host_docall(L, 0, 2) == LUA_OK) {
        lua_setfield(L, LUA_REGISTRYINDEX, "workbench.repl_is_exit");
        lua_setfield(L, LUA_REGISTRYINDEX, "workbench.repl_rewrite");
    } else {
        lua_pop(L, 1);
    }
}

/* The history file is read at start (trimmed to HISTORY_MAX entries) and then appended to per
 * entry; it is created on first use so appending has a file to append to. */
static void history_open(void) {
    const char *home = getenv("HOME");
    history_path[0] = '\0';
    if (!home || !home[0]) return;
    snprintf(history_path, sizeof history_path, "%s/%s", home, HISTORY_FILE);
    stifle_history(HISTORY_MAX);
    if (access(history_path, F_OK) != 0) {
        if (write_history(history_path) != 0) history_path[0] = '\0'; /* unwritable: memory only */
        return;
    }
    history_truncate_file(history_path, HISTORY_MAX);
    read_history(history_path);
}

int host_repl(lua_State *L) {
    const char *oldprogname = host_progname;
    struct sigaction sa, old;
    int status, failed = 0;
    interactive = isatty(STDIN_FILENO);
    host_progname = NULL; /* errors in the REPL are not prefixed with the program name */
    setup(L);
    lua_settop(L, 0);
    if (interactive) {
        printf("workbench %s (%s)  `model` and `tok` load on first use; Tab completes; "
               "help; exit or Ctrl-D leaves\n",
               wb_version(), LUA_RELEASE);
        fflush(stdout);
        rl_readline_name = "workbench";
        /* '.' and ':' stay inside a word so "wb.sampling.ap" and "v:top" complete as a whole. */
        rl_basic_word_break_characters = " \t\n\"'`@$><=;|&{([,+-*/%^#~";
        rl_completer_word_break_characters = rl_basic_word_break_characters;
        rl_attempted_completion_function = repl_complete;
        complete_L = L;
        history_open();
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = prompt_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old);
    }
    while ((status = loadline(L)) != -1) {
        if (status == LUA_OK) status = host_docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK) print_results(L);
        else {
            host_report(L, status);
            failed = 1;
        }
        lua_settop(L, 0);
    }
    lua_settop(L, 0);
    host_interrupted = 0; /* an interrupted chunk was reported; the REPL ended normally */
    if (interactive) {
        sigaction(SIGINT, &old, NULL);
        rl_attempted_completion_function = NULL;
        complete_L = NULL;
        free_candidates();
        fputc('\n', stdout);
        fflush(stdout);
    }
    host_progname = oldprogname;
    /* At a terminal an error is part of the conversation; piped chunks that fail make the run
     * fail, as the same lines in a script would. */
    return (!interactive && failed) ? LUA_ERRRUN : LUA_OK;
}
