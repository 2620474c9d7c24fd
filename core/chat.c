/* chat.c - chat templates by recognition: the Jinja text of tokenizer_config.json is matched
 * against the fragments that define each known family's output, and the family is rendered in C
 * with the semantics of transformers' apply_chat_template (Jinja with trim_blocks and
 * lstrip_blocks). This avoids a Jinja interpreter while failing loudly on templates we do not
 * know, instead of rendering them wrongly. */
#include "wb_chat.h"
#include "json_strict.h"

#include "fileio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { FAM_CHATML, FAM_LLAMA3, FAM_LLAMA31, FAM_ZEPHYR };

struct wb_chat_template {
    int family;
    int qwen_tools;       /* ChatML with Qwen2.5's tool branch (<tool_response> wrapping) */
    char *default_system; /* ChatML */
    char *date;           /* Llama-3.1 */
    char *eos_token, *bos_token;
    int add_bos;
    int32_t *eos_ids;
    size_t n_eos;
};

static const char *const FAMILY_NAMES[] = {"chatml", "llama3", "llama3.1", "zephyr"};

/* ---- small helpers ------------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* Chat files are small; the cap keeps /dev/zero-like inputs from exhausting memory. */
#define CHAT_FILE_MAX_BYTES ((size_t)16 << 20)

/* Python's str.isspace(), which Jinja's trim uses: White_Space plus the separators U+001C..1F. */
static int py_space_at(const char *s, size_t n, size_t *len) {
    unsigned char c = (unsigned char)s[0];
    *len = 1;
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
    if (c < 0x80) return 0;
    uint32_t cp;
    if (c >= 0xC0 && c < 0xE0 && n >= 2) {
        cp = ((c & 0x1Fu) << 6) | ((unsigned char)s[1] & 0x3Fu);
        *len = 2;
    } else if (c >= 0xE0 && c < 0xF0 && n >= 3) {
        cp = ((c & 0x0Fu) << 12) | (((unsigned char)s[1] & 0x3Fu) << 6) | ((unsigned char)s[2] & 0x3Fu);
        *len = 3;
    } else {
        return 0;
    }
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static void sb_add_trimmed(sbuf *b, const char *s) {
    size_t n = strlen(s), a = 0, l;
    while (a < n && py_space_at(s + a, n - a, &l)) a += l;
    size_t e = a, i = a;
    while (i < n) {
        if (py_space_at(s + i, n - i, &l)) {
            i += l;
        } else {
            /* step one UTF-8 char */
            i++;
            while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
            e = i;
        }
    }
    sb_add(b, s + a, e - a);
}

/* The template without whitespace (newlines in literals included, real or escaped), with
 * Jinja's whitespace-control dashes dropped and double quotes made single, so that formatting
 * differences between releases do not matter. */
static char *compact(const char *t) {
    size_t n = strlen(t), k = 0;
    char *o = malloc(n + 1);
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
        /* an escaped newline in a literal counts as whitespace: templates write either form */
        if (c == '\\' && i + 1 < n && t[i + 1] == 'n') {
            i++;
            continue;
        }
        if (c == '-' && i > 0 && (t[i - 1] == '%' || t[i - 1] == '{') && k > 0 &&
            (o[k - 1] == '%' || o[k - 1] == '{'))
            continue;
        if (c == '-' && i + 1 < n && (t[i + 1] == '%' || t[i + 1] == '}')) continue;
        o[k++] = c == '"' ? '\'' : c;
    }
    o[k] = 0;
    return o;
}

/* A Jinja string literal body up to (not including) the terminator `end`, with escapes undone;
 * NULL if it contains a quote (then it is not one literal). */
static char *literal_until(const char *s, const char *end) {
    const char *e = strstr(s, end);
    if (!e) return NULL;
    sbuf b = {0};
    for (const char *p = s; p < e; p++) {
        if (*p == '\'' || *p == '"') {
            free(b.p);
            return NULL;
        }
        if (*p == '\\' && p + 1 < e) {
            p++;
            char c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
            sb_add(&b, &c, 1);
        } else {
            sb_add(&b, p, 1);
        }
    }
    if (!b.p) b.p = calloc(1, 1);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* A token field of tokenizer_config.json: a string or an AddedToken object with "content". */
static const char *token_field(const cJSON *cfg, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static char *dup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* ---- recognition --------------------------------------------------------------------------- */

static int has(const char *c, const char *frag) { return strstr(c, frag) != NULL; }

static wb_status recognise(wb_chat_template *t, const char *tpl, const char *name, wb_err *err) {
    char *c = compact(tpl);
    if (!c) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
    wb_status st = WB_OK;
    int chatml_msg = has(c, "'<|im_start|>'+message['role']+''+message['content']+'<|im_end|>'") ||
                     has(c, "'<|im_start|>'+message.role+''+message.content+'<|im_end|>'");
    int llama3_msg =
        has(c, "'<|start_header_id|>'+message['role']+'<|end_header_id|>'+message['content']|trim+'<|eot_id|>'");
    int zephyr_msg = has(c, "'<|user|>'+message['content']+eos_token");
    /* reasoning and tool-call formats render differently from what we model */
    int unmodelled = has(c, "<think>") || has(c, "reasoning_content");
    if (chatml_msg && has(c, "'<|im_start|>assistant'") && !unmodelled) {
        t->family = FAM_CHATML;
        t->qwen_tools = has(c, "<tool_response>");
        /* the default system prompt is the literal '<|im_start|>system\n...<|im_end|>\n' that
         * the template emits when the first message is not a system message */
        const char *keys[] = {"<|im_start|>system\\n", "<|im_start|>system\n"};
        for (int k = 0; k < 2 && !t->default_system; k++) {
            for (const char *p = strstr(tpl, keys[k]); p; p = strstr(p + 1, keys[k])) {
                char *lit = literal_until(p + strlen(keys[k]), "<|im_end|>");
                if (lit && *lit) {
                    t->default_system = lit;
                    break;
                }
                free(lit);
            }
        }
    } else if (llama3_msg && has(c, "'<|start_header_id|>assistant<|end_header_id|>'") && !unmodelled) {
        t->family = has(c, "CuttingKnowledgeDate") ? FAM_LLAMA31 : FAM_LLAMA3;
        if (t->family == FAM_LLAMA31) {
            if (has(c, "strftime_now")) {
                /* Llama-3.2 takes today's date, as transformers' strftime_now("%d %b %Y") */
                char d[32];
                time_t now = time(NULL);
                struct tm tmv;
                localtime_r(&now, &tmv);
                strftime(d, sizeof d, "%d %b %Y", &tmv);
                t->date = dup(d);
            } else {
                const char *p = strstr(tpl, "date_string = \"");
                if (!p) p = strstr(tpl, "date_string = '");
                t->date = p ? literal_until(p + 15, p[14] == '"' ? "\"" : "'") : NULL;
                if (!t->date) t->date = dup("26 Jul 2024");
            }
            if (!t->date) st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
        }
    } else if (zephyr_msg && has(c, "'<|assistant|>'") && !unmodelled) {
        t->family = FAM_ZEPHYR;
    } else {
        st = wb_err_set(err, WB_ERR_FORMAT,
                        "%s: chat_template is not one of the known templates (ChatML as in Qwen2/Qwen2.5/"
                        "SmolLM2, Llama-3, Llama-3.1, Zephyr/TinyLlama); see docs/chat.md",
                        name);
    }
    free(c);
    return st;
}

/* ---- loading ------------------------------------------------------------------------------- */

void wb_chat_template_free(wb_chat_template *t) {
    if (!t) return;
    free(t->default_system);
    free(t->date);
    free(t->eos_token);
    free(t->bos_token);
    free(t->eos_ids);
    free(t);
}

static wb_status load_impl(const char *cfg_text, size_t len, const char *gen_text, size_t gen_len,
                           const char *name, const char *gen_name, const char *jinja,
                           wb_chat_template **out, wb_err *err) {
    *out = NULL;
    wb_status st = WB_OK;
    cJSON *cfg = cJSON_ParseWithLength(cfg_text ? cfg_text : "", len), *gen = NULL;
    wb_chat_template *t = calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(cfg);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
    }
    t->add_bos = -1;
    if (cJSON_IsObject(cfg) && (st = wb_json_check_unique_keys(cfg, name, err))) goto done;
    if (!cJSON_IsObject(cfg)) {
        st = wb_err_set(err, WB_ERR_FORMAT, "%s: not a JSON object", name);
        goto done;
    }
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *tpl = NULL;
    if (cJSON_IsString(ct)) {
        tpl = ct->valuestring;
    } else if (cJSON_IsArray(ct)) {
        /* a list of named templates: the "default" one renders plain chats */
        const cJSON *e;
        cJSON_ArrayForEach(e, ct) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *tt = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (cJSON_IsString(nm) && strcmp(nm->valuestring, "default") == 0 && cJSON_IsString(tt))
                tpl = tt->valuestring;
        }
        if (!tpl) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: chat_template list has no \"default\" template", name);
            goto done;
        }
    } else if (ct && !cJSON_IsNull(ct)) {
        st = wb_err_set(err, WB_ERR_FORMAT, "%s: chat_template is neither a string nor a list", name);
        goto done;
    } else {
        tpl = jinja;
    }
    if (!tpl) {
        st = wb_err_set(err, WB_ERR_NOTFOUND, "%s: no chat_template (and no chat_template.jinja)", name);
        goto done;
    }
    if ((st = recognise(t, tpl, name, err)) != WB_OK) goto done;
    const char *eos = token_field(cfg, "eos_token"), *bos = token_field(cfg, "bos_token");
    if ((eos && !(t->eos_token = dup(eos))) || (bos && !(t->bos_token = dup(bos)))) {
        st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
    if (cJSON_IsBool(ab)) t->add_bos = cJSON_IsTrue(ab);
    else if (ab && !cJSON_IsNull(ab)) {
        st = wb_err_set(err, WB_ERR_FORMAT, "%s: add_bos_token is not a boolean", name);
        goto done;
    }
    if (gen_text) {
        gen = cJSON_ParseWithLength(gen_text, gen_len);
        if (!cJSON_IsObject(gen)) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: not a JSON object", gen_name);
            goto done;
        }
        if ((st = wb_json_check_unique_keys(gen, gen_name, err))) goto done;
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id");
        int n = cJSON_IsArray(e) ? cJSON_GetArraySize(e) : cJSON_IsNumber(e) ? 1 : 0;
        if (e && !cJSON_IsNull(e) && !cJSON_IsArray(e) && !cJSON_IsNumber(e)) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: eos_token_id is neither an integer nor a list", gen_name);
            goto done;
        }
        t->eos_ids = malloc(((size_t)n + 1) * sizeof *t->eos_ids);
        if (!t->eos_ids) {
            st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", gen_name);
            goto done;
        }
        for (int i = 0; i < n; i++) {
            const cJSON *v = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, i) : e;
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 2147483647.0) ||
                v->valuedouble != (double)(int32_t)v->valuedouble) {
                st = wb_err_set(err, WB_ERR_FORMAT, "%s: eos_token_id[%d] is not a token id", gen_name, i);
                goto done;
            }
            t->eos_ids[t->n_eos++] = (int32_t)v->valuedouble;
        }
    }
done:
    cJSON_Delete(cfg);
    cJSON_Delete(gen);
    if (st != WB_OK) {
        wb_chat_template_free(t);
        return st;
    }
    *out = t;
    return WB_OK;
}

wb_status wb_chat_template_load_json(const char *tokenizer_config, size_t len,
                                     const char *generation_config, size_t gen_len,
                                     const char *name, wb_chat_template **out, wb_err *err) {
    if (!out || (!tokenizer_config && len))
        return wb_err_set(err, WB_ERR_ARG, "wb_chat_template_load_json: NULL argument");
    if (!name) name = "tokenizer_config.json";
    return load_impl(tokenizer_config, len, generation_config, gen_len, name,
                     "generation_config.json", NULL, out, err);
}

wb_status wb_chat_template_load(const char *dir, wb_chat_template **out, wb_err *err) {
    if (!dir || !out) return wb_err_set(err, WB_ERR_ARG, "wb_chat_template_load: NULL argument");
    *out = NULL;
    size_t dl = strlen(dir);
    char *cfg_path = malloc(dl + 40), *gen_path = malloc(dl + 40), *jin_path = malloc(dl + 40);
    char *cfg = NULL, *gen = NULL, *jin = NULL;
    wb_status st = WB_OK;
    if (!cfg_path || !gen_path || !jin_path) {
        st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    snprintf(cfg_path, dl + 40, "%s/tokenizer_config.json", dir);
    snprintf(gen_path, dl + 40, "%s/generation_config.json", dir);
    snprintf(jin_path, dl + 40, "%s/chat_template.jinja", dir);
    size_t n = 0, gn = 0, jn = 0;
    if ((st = wb_read_file(cfg_path, CHAT_FILE_MAX_BYTES, &cfg, &n, err)) ||
        (st = wb_read_file_optional(gen_path, CHAT_FILE_MAX_BYTES, &gen, &gn, err)) ||
        (st = wb_read_file_optional(jin_path, CHAT_FILE_MAX_BYTES, &jin, &jn, err)))
        goto done;
    if (jin && strlen(jin) != jn) { /* an embedded NUL cannot be a template */
        free(jin);
        jin = NULL;
    }
    st = load_impl(cfg, n, gen, gn, cfg_path, gen_path, jin, out, err);
done:
    free(cfg);
    free(gen);
    free(jin);
    free(cfg_path);
    free(gen_path);
    free(jin_path);
    return st;
}

/* ---- rendering ----------------------------------------------------------------------------- */

static int role_is(const wb_chat_message *m, const char *r) { return strcmp(m->role, r) == 0; }

static void render_chatml(const wb_chat_template *t, const wb_chat_message *m, size_t n, sbuf *b) {
    if (!role_is(&m[0], "system") && t->default_system) {
        sb_puts(b, "<|im_start|>system\n");
        sb_puts(b, t->default_system);
        sb_puts(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        if (t->qwen_tools && role_is(&m[i], "tool")) {
            /* Qwen2.5: consecutive tool results share one user turn */
            if (i == 0 || !role_is(&m[i - 1], "tool")) sb_puts(b, "<|im_start|>user");
            sb_puts(b, "\n<tool_response>\n");
            sb_puts(b, m[i].content);
            sb_puts(b, "\n</tool_response>");
            if (i + 1 == n || !role_is(&m[i + 1], "tool")) sb_puts(b, "<|im_end|>\n");
            continue;
        }
        if (t->qwen_tools && !role_is(&m[i], "user") && !role_is(&m[i], "system") &&
            !role_is(&m[i], "assistant"))
            continue; /* Qwen2.5's template has no branch for other roles */
        sb_puts(b, "<|im_start|>");
        sb_puts(b, m[i].role);
        sb_puts(b, "\n");
        sb_puts(b, m[i].content);
        sb_puts(b, "<|im_end|>\n");
    }
}

static void header(sbuf *b, const char *role) {
    sb_puts(b, "<|start_header_id|>");
    sb_puts(b, role);
    sb_puts(b, "<|end_header_id|>\n\n");
}

static void render_llama3(const wb_chat_template *t, const wb_chat_message *m, size_t n, sbuf *b) {
    size_t i = 0;
    if (t->family == FAM_LLAMA31) {
        /* the system turn is always there, with the knowledge cutoff and the date */
        sb_puts(b, t->bos_token);
        header(b, "system");
        sb_puts(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
        sb_puts(b, t->date);
        sb_puts(b, "\n\n");
        if (role_is(&m[0], "system")) {
            sb_add_trimmed(b, m[0].content);
            i = 1;
        }
        sb_puts(b, "<|eot_id|>");
    }
    for (; i < n; i++) {
        if (i == 0 && t->family == FAM_LLAMA3) sb_puts(b, t->bos_token);
        header(b, m[i].role);
        sb_add_trimmed(b, m[i].content);
        sb_puts(b, "<|eot_id|>");
    }
}

static void render_zephyr(const wb_chat_template *t, const wb_chat_message *m, size_t n, int gen,
                          sbuf *b) {
    const char *eos = t->eos_token ? t->eos_token : "";
    for (size_t i = 0; i < n; i++) {
        const char *tag = role_is(&m[i], "user") ? "<|user|>\n"
                          : role_is(&m[i], "system") ? "<|system|>\n"
                          : role_is(&m[i], "assistant") ? "<|assistant|>\n" : NULL;
        if (tag) { /* other roles have no branch in the template */
            sb_puts(b, tag);
            sb_puts(b, m[i].content);
            sb_puts(b, eos);
            sb_puts(b, "\n");
        }
        if (i + 1 == n && gen) sb_puts(b, "<|assistant|>\n");
    }
}

wb_status wb_chat_render(const wb_chat_template *t, const wb_chat_message *messages, size_t n,
                         int add_generation_prompt, char **text, size_t *len, wb_err *err) {
    if (!t || !text || !len || (!messages && n))
        return wb_err_set(err, WB_ERR_ARG, "wb_chat_render: NULL argument");
    *text = NULL;
    *len = 0;
    if (n == 0) return wb_err_set(err, WB_ERR_ARG, "wb_chat_render: no messages");
    for (size_t i = 0; i < n; i++)
        if (!messages[i].role || !messages[i].content)
            return wb_err_set(err, WB_ERR_ARG, "wb_chat_render: messages[%zu] lacks a role or content", i);
    if ((t->family == FAM_LLAMA3 || t->family == FAM_LLAMA31) && !t->bos_token)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "wb_chat_render: the Llama-3 template needs bos_token in tokenizer_config.json");
    if (t->family == FAM_LLAMA31)
        for (size_t i = 0; i < n; i++)
            if (role_is(&messages[i], "tool") || role_is(&messages[i], "ipython"))
                return wb_err_set(err, WB_ERR_ARG,
                                  "wb_chat_render: messages[%zu]: role \"%s\" (tool results) is not "
                                  "supported for the Llama-3.1 template",
                                  i, messages[i].role);
    if (t->family == FAM_ZEPHYR && !t->eos_token)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "wb_chat_render: the Zephyr template needs eos_token in tokenizer_config.json");
    sbuf b = {0};
    switch (t->family) {
    case FAM_CHATML:
        render_chatml(t, messages, n, &b);
        if (add_generation_prompt) sb_puts(&b, "<|im_start|>assistant\n");
        break;
    case FAM_LLAMA3:
    case FAM_LLAMA31:
        render_llama3(t, messages, n, &b);
        if (add_generation_prompt) header(&b, "assistant");
        break;
    default:
        render_zephyr(t, messages, n, add_generation_prompt, &b);
        break;
    }
    if (!b.p && !b.oom) b.p = calloc(1, 1);
    if (b.oom || !b.p) {
        free(b.p);
        return wb_err_set(err, WB_ERR_NOMEM, "wb_chat_render: out of memory");
    }
    *text = b.p;
    *len = b.n;
    return WB_OK;
}

/* ---- accessors ----------------------------------------------------------------------------- */

const char *wb_chat_family(const wb_chat_template *t) { return t ? FAMILY_NAMES[t->family] : NULL; }

const int32_t *wb_chat_eos_ids(const wb_chat_template *t, size_t *n) {
    if (n) *n = t ? t->n_eos : 0;
    return t ? t->eos_ids : NULL;
}

const char *wb_chat_eos_token(const wb_chat_template *t) { return t ? t->eos_token : NULL; }
const char *wb_chat_bos_token(const wb_chat_template *t) { return t ? t->bos_token : NULL; }
int wb_chat_add_bos_token(const wb_chat_template *t) { return t ? t->add_bos : -1; }
const char *wb_chat_default_system(const wb_chat_template *t) { return t ? t->default_system : NULL; }
const char *wb_chat_date(const wb_chat_template *t) { return t ? t->date : NULL; }

wb_status wb_chat_set_date(wb_chat_template *t, const char *date, wb_err *err) {
    if (!t || !date) return wb_err_set(err, WB_ERR_ARG, "wb_chat_set_date: NULL argument");
    if (t->family != FAM_LLAMA31)
        return wb_err_set(err, WB_ERR_STATE, "wb_chat_set_date: the %s template has no date",
                          FAMILY_NAMES[t->family]);
    char *d = dup(date);
    if (!d) return wb_err_set(err, WB_ERR_NOMEM, "wb_chat_set_date: out of memory");
    free(t->date);
    t->date = d;
    return WB_OK;
}
