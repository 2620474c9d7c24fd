/* host_repl.c - the interactive loop: lua.c's doREPL with readline, persistent history, lazy
 * `model`/`tok` globals and Ctrl-C that returns to the prompt.
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

static char history_path[4096];

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

/* History keeps whole chunks (multi-line ones included), as lua.c does. */
static void add_to_history(const char *chunk) {
    if (interactive && chunk && chunk[0]) add_history(chunk);
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
        size_t len;
        const char *line = lua_tolstring(L, 1, &len);
        int status = luaL_loadbuffer(L, line, len, "=stdin");
        if (!incomplete(L, status)) {
            add_to_history(line);
            return status;
        }
        prompt_cancelled = 0;
        if (!pushline(L, 0)) {
            /* End of input inside a chunk: compile again to report the "<eof>" error. */
            line = lua_tolstring(L, 1, &len);
            return luaL_loadbuffer(L, line, len, "=stdin");
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

static void setup(lua_State *L) {
    if (luaL_loadstring(L, lazy_globals) == LUA_OK) host_report(L, host_docall(L, 0, 0));
    else host_report(L, LUA_ERRSYNTAX);
    if (luaL_loadstring(L, printer) != LUA_OK || host_docall(L, 0, 1) != LUA_OK) {
        lua_pop(L, 1);
        lua_getglobal(L, "print");
    }
    lua_setfield(L, LUA_REGISTRYINDEX, "workbench.repl_print");
}

static void history_open(void) {
    const char *home = getenv("HOME");
    history_path[0] = '\0';
    if (!home || !home[0]) return;
    snprintf(history_path, sizeof history_path, "%s/%s", home, HISTORY_FILE);
    stifle_history(HISTORY_MAX);
    read_history(history_path); /* absent on first use: fine */
}

static void history_close(void) {
    if (!history_path[0]) return;
    if (write_history(history_path) == 0) history_truncate_file(history_path, HISTORY_MAX);
}

void host_repl(lua_State *L) {
    const char *oldprogname = host_progname;
    struct sigaction sa, old;
    int status;
    interactive = isatty(STDIN_FILENO);
    host_progname = NULL; /* errors in the REPL are not prefixed with the program name */
    setup(L);
    lua_settop(L, 0);
    if (interactive) {
        printf("workbench %s (%s)  `model` and `tok` load on first use; Ctrl-D exits\n",
               wb_version(), LUA_RELEASE);
        fflush(stdout);
        rl_readline_name = "workbench";
        history_open();
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = prompt_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old);
    }
    while ((status = loadline(L)) != -1) {
        if (status == LUA_OK) status = host_docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK) print_results(L);
        else host_report(L, status);
        lua_settop(L, 0);
    }
    lua_settop(L, 0);
    if (interactive) {
        sigaction(SIGINT, &old, NULL);
        history_close();
        fputc('\n', stdout);
        fflush(stdout);
    }
    host_progname = oldprogname;
}
