/* json_strict.h - internal: the JSON reading rules every file the core reads goes through.
 *
 * cJSON parses (nesting is limited by CJSON_NESTING_LIMIT, 1000 in Debian's build) but keeps every
 * member of an object, duplicates included, and cJSON_GetObjectItem returns the first while
 * Python's json and wb.json.decode keep the last: a file with a repeated key means two different
 * things to two readers. So a duplicate key is an error naming the key, where it is and the file. */
#ifndef WB_JSON_STRICT_H
#define WB_JSON_STRICT_H

#include "wb_base.h"

#include <cjson/cJSON.h>

/* Walks the whole tree (an explicit stack, no recursion): WB_ERR_FORMAT on the first object that
 * repeats a key, "NAME: duplicate key "k" in PATH". */
wb_status wb_json_check_unique_keys(const cJSON *root, const char *name, wb_err *err);

/* Parse text[0..len) as one JSON value followed only by whitespace, with unique keys.
 * *out is the tree (cJSON_Delete it); errors name `name`. */
wb_status wb_json_parse_strict(const char *text, size_t len, const char *name, cJSON **out,
                               wb_err *err);

/* Read a regular file of at most max_bytes (fileio) and parse it strictly. */
wb_status wb_json_parse_file(const char *path, size_t max_bytes, cJSON **out, wb_err *err);

#endif
