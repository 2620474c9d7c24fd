/* config.c - typed readers for config.json keys, shared by every family's parse_config.
 *
 * Each returns an error naming the file and the key (and the model_type when it explains why a
 * key is required), so a bad config is one clear message whatever family reads it.
 */
#include "model_family.h"

#include <math.h>

#include <cjson/cJSON.h>

wb_status wb_cfg_int(const cJSON *obj, const char *key, const char *name, const char *mt,
                     int required, int64_t lo, int64_t hi, int32_t *out, int *present,
                     wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *present = 0;
    if (!v || cJSON_IsNull(v)) {
        if (!required) return WB_OK;
        if (mt)
            return wb_err_set(err, WB_ERR_FORMAT,
                              "%s: required key \"%s\" is missing (model_type \"%s\")", name, key,
                              mt);
        return wb_err_set(err, WB_ERR_FORMAT, "%s: required key \"%s\" is missing", name, key);
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s\" must be an integer", name, key);
    double d = v->valuedouble;
    if (d < (double)lo || d > (double)hi)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s\" = %.17g is out of range [%lld, %lld]",
                          name, key, d, (long long)lo, (long long)hi);
    *out = (int32_t)d;
    *present = 1;
    return WB_OK;
}

wb_status wb_cfg_pos_num(const cJSON *obj, const char *key, const char *where, const char *name,
                         int required, double hi, float *out, wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s%s\" is missing", name, where, key);
        return WB_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0.0) || !(v->valuedouble <= hi))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s%s\" must be a number in (0, %g]",
                          name, where, key, hi);
    *out = (float)v->valuedouble;
    return WB_OK;
}

wb_status wb_cfg_bool(const cJSON *obj, const char *key, const char *name, int dflt,
                      int32_t *out, wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return WB_OK;
    }
    if (!cJSON_IsBool(v))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s\" must be true or false", name, key);
    *out = cJSON_IsTrue(v);
    return WB_OK;
}
