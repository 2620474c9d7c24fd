/* test_repl_pty.c - the REPL driven through a pseudo-terminal, as a person at a keyboard uses it:
 * readline, Tab, Ctrl-C (the terminal turns ^C into SIGINT for the foreground process), history.
 * Piped input cannot test these: without a terminal the REPL reads plain lines.
 *
 * Each session is a fresh `workbench` (WB_BUILD_DIR/workbench) with HOME in a temporary
 * directory and TERM=dumb (no bracketed-paste or colour escapes to wade through). Every wait is
 * bounded; a session that does not answer fails the test and is killed. */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define WAIT_MS 20000 /* generous: the machine is shared, and ASan builds are slow */

typedef struct Session {
    pid_t pid;
    int fd;
    char buf[1 << 18];
    size_t len;  /* bytes read so far */
    size_t mark; /* expect() searches from here */
} Session;

static char g_exe[4096];
static char g_home[256];

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void session_start(Session *s) {
    memset(s, 0, sizeof *s);
    struct winsize ws = {.ws_row = 40, .ws_col = 200};
    s->pid = forkpty(&s->fd, NULL, NULL, &ws);
    if (s->pid < 0) {
        perror("forkpty");
        exit(1);
    }
    if (s->pid == 0) {
        setenv("HOME", g_home, 1);
        setenv("TERM", "dumb", 1);
        unsetenv("WB_MODEL");
        execl(g_exe, g_exe, (char *)NULL);
        perror("exec workbench");
        _exit(127);
    }
}

/* Read whatever arrives within ms; returns 0 at EOF (the session ended). */
static int pump(Session *s, int ms) {
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    int r = poll(&p, 1, ms);
    if (r <= 0) return 1;
    if (s->len + 1 >= sizeof s->buf) { /* keep the last half */
        size_t half = sizeof s->buf / 2;
        memmove(s->buf, s->buf + s->len - half, half);
        s->mark = s->mark > s->len - half ? s->mark - (s->len - half) : 0;
        s->len = half;
    }
    ssize_t n = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
    if (n <= 0) return 0; /* EIO once the child has exited */
    s->len += (size_t)n;
    s->buf[s->len] = '\0';
    return 1;
}

/* Wait for text after the mark; on success the mark moves past it. */
static int expect(Session *s, const char *text) {
    double end = now_ms() + WAIT_MS;
    for (;;) {
        s->buf[s->len] = '\0';
        char *hit = strstr(s->buf + s->mark, text);
        if (hit) {
            s->mark = (size_t)(hit - s->buf) + strlen(text);
            return 1;
        }
        double left = end - now_ms();
        if (left <= 0 || !pump(s, (int)(left < 200 ? left : 200))) {
            if (left > 0 && strstr(s->buf + s->mark, text)) continue;
            fprintf(stderr, "  expected %s; the terminal showed after the mark:\n-----\n%s\n-----\n",
                    text, s->buf + s->mark);
            return 0;
        }
    }
}

static void press(Session *s, const char *keys) {
    size_t n = strlen(keys);
    while (n > 0) {
        ssize_t w = write(s->fd, keys, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        keys += w;
        n -= (size_t)w;
    }
}

/* Type a line and wait for the next prompt (first-line "> " or continuation ">> "). */
static int type_line(Session *s, const char *line) {
    press(s, line);
    press(s, "\r");
    return expect(s, "\n") && expect(s, "> ");
}

/* The session must end by itself (exit, os.exit); returns its exit status or -1. */
static int session_wait(Session *s) {
    double end = now_ms() + WAIT_MS;
    int status;
    while (now_ms() < end) {
        pid_t r = waitpid(s->pid, &status, WNOHANG);
        if (r == s->pid) {
            close(s->fd);
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        pump(s, 50);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    close(s->fd);
    return -1;
}

/* ---- the tests ------------------------------------------------------------------------------ */

static Session g_s;

static void ctrl_c_in_a_loop_of_generations_returns_to_the_prompt(void) {
    Session *s = &g_s;
    session_start(s);
    CHECK(expect(s, "> "));
    CHECK(type_line(s, "kept = 41"));
    for (int round = 0; round < 3; round++) { /* the REPL survives any number of them */
        CHECK(type_line(s, "n = 0"));
        press(s, "while true do model:generate('Customer (Ana): Hi', {max_tokens = 32, "
                "temperature = 0}, {ignore_eos = true}); n = n + 1 end\r");
        CHECK(expect(s, "\n"));
        usleep(700 * 1000); /* well inside the loop (the model loads on first use) */
        press(s, "\x03");
        CHECK(expect(s, "interrupted!"));
        CHECK(expect(s, "> "));
        CHECK(type_line(s, "print('kept', kept + 1, n > 0)"));
    }
    s->mark = 0;
    int rounds = 0;
    for (const char *p = s->buf; (p = strstr(p, "kept\t42\ttrue")) != NULL; p++) rounds++;
    CHECK_MSG((rounds) == 3, "got %d, want %d", rounds, 3);
    press(s, "exit\r");
    {
        int st = session_wait(s);
        CHECK_MSG(st == 0, "exit status %d, want 0", st);
    }
}

static void tab_completes_methods_of_model_and_tok(void) {
    Session *s = &g_s;
    session_start(s);
    CHECK(expect(s, "> "));
    /* One candidate: readline completes in place; the line then calls model:generate. */
    press(s, "model:gen\t");
    CHECK(expect(s, "erate"));
    press(s, "('Customer (Ana): Hi', {max_tokens = 3, temperature = 0}).stop_reason\r");
    CHECK(expect(s, "length"));
    CHECK(expect(s, "> "));
    /* Several candidates: a second Tab lists them. */
    press(s, "tok:\t\t");
    CHECK(expect(s, "tok:encode"));
    press(s, "\x15"); /* Ctrl-U: drop the line */
    press(s, "model.to\t");
    CHECK(expect(s, "kenizer"));
    press(s, "\x15");
    CHECK(type_line(s, "print('still here')"));
    press(s, ":q\r");
    {
        int st = session_wait(s);
        CHECK_MSG(st == 0, "exit status %d, want 0", st);
    }
}

static void help_of_a_function_value_prints(void) {
    Session *s = &g_s;
    session_start(s);
    CHECK(expect(s, "> "));
    press(s, "help(wb.load)\r");
    CHECK(expect(s, "wb.load([dir [, opts]]) -> Model"));
    CHECK(expect(s, "example:"));
    CHECK(expect(s, "> "));
    press(s, "help\r");
    CHECK(expect(s, "help topics"));
    CHECK(expect(s, "> "));
    press(s, ":help model:generate\r");
    CHECK(expect(s, "opts: cache"));
    CHECK(expect(s, "> "));
    press(s, "quit\r");
    {
        int st = session_wait(s);
        CHECK_MSG(st == 0, "exit status %d, want 0", st);
    }
}

/* The README's example, read from README.md so the test follows the README, typed line by line. */
static void readme_example_typed_line_by_line_works(void) {
    FILE *f = fopen("README.md", "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[1024];
    char lines[32][1024];
    int n = 0, in = 0;
    while (fgets(line, sizeof line, f) && n < 32) {
        if (!in && strncmp(line, "```lua", 6) == 0) {
            in = 1;
            continue;
        }
        if (in && strncmp(line, "```", 3) == 0) break;
        if (in) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(lines[n++], sizeof lines[0], "%s", line);
        }
    }
    fclose(f);
    CHECK(n >= 5);
    Session *s = &g_s;
    session_start(s);
    CHECK(expect(s, "> "));
    size_t start = s->mark;
    for (int i = 0; i < n; i++) CHECK(type_line(s, lines[i]));
    CHECK(type_line(s, "print('done', s:pos())"));
    s->buf[s->len] = '\0';
    const char *out = s->buf + start;
    CHECK(strstr(out, "entropy ") != NULL);
    CHECK(strstr(out, "bits") != NULL);
    CHECK(strstr(out, "done\t") != NULL);
    CHECK(strstr(out, "attempt to") == NULL);
    CHECK(strstr(out, "stack traceback") == NULL);
    if (strstr(out, "stack traceback")) fprintf(stderr, "%s\n", out);
    press(s, "exit\r");
    {
        int st = session_wait(s);
        CHECK_MSG(st == 0, "exit status %d, want 0", st);
    }
}

static void history_survives_os_exit(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/.workbench_history", g_home);
    unlink(path);
    Session *s = &g_s;
    session_start(s);
    CHECK(expect(s, "> "));
    CHECK(type_line(s, "history_marker_1 = 1"));
    CHECK(type_line(s, "for i = 1, 2 do\r  history_marker_2 = i\rend"));
    press(s, "os.exit(3)\r");
    {
        int st = session_wait(s);
        CHECK_MSG(st == 3, "exit status %d, want 3", st);
    }
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    char text[8192];
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = '\0';
    fclose(f);
    CHECK(strstr(text, "history_marker_1 = 1") != NULL);
    CHECK(strstr(text, "history_marker_2 = i") != NULL);
    CHECK(strstr(text, "os.exit(3)") != NULL);
    /* The next session sees it: Up recalls the last entry. */
    session_start(s);
    CHECK(expect(s, "> "));
    press(s, "\x1b[A");
    CHECK(expect(s, "os.exit(3)"));
    press(s, "\x15");
    press(s, "exit\r");
    {
        int st = session_wait(s);
        CHECK_MSG(st == 0, "exit status %d, want 0", st);
    }
}

int main(void) {
    const char *build = getenv("WB_BUILD_DIR");
    snprintf(g_exe, sizeof g_exe, "%s/workbench", build ? build : "build");
    if (access(g_exe, X_OK) != 0) {
        fprintf(stderr, "test_repl_pty: %s not found (set WB_BUILD_DIR)\n", g_exe);
        return 1;
    }
    snprintf(g_home, sizeof g_home, "/tmp/wb-pty-XXXXXX");
    if (!mkdtemp(g_home)) {
        perror("mkdtemp");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    RUN(ctrl_c_in_a_loop_of_generations_returns_to_the_prompt);
    RUN(tab_completes_methods_of_model_and_tok);
    RUN(help_of_a_function_value_prints);
    RUN(readme_example_typed_line_by_line_works);
    RUN(history_survives_os_exit);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_home);
    if (system(cmd) != 0) { /* a leftover temporary directory is harmless */ }
    return check_summary();
}
