/* Parsing parameter strings into typed values, with errors that quote the input. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/op/registry.h"

static const char *skip_space(const char *s) {
    while (isspace((unsigned char)*s)) s++;
    return s;
}

static bool is_none(const char *s) {
    s = skip_space(s);
    if (strncmp(s, "None", 4) != 0) return false;
    return *skip_space(s + 4) == '\0';
}

/* Parse an integer that fills the text up to `*end` (leading/trailing spaces allowed). */
static bool parse_int(const char *s, const char **end, int64_t *out) {
    s = skip_space(s);
    char *stop;
    errno = 0;
    long long v = strtoll(s, &stop, 10);
    if (stop == s || errno == ERANGE) return false;
    *out = v;
    *end = skip_space(stop);
    return true;
}

static bool parse_whole_int(const char *s, int64_t *out) {
    const char *end;
    return parse_int(s, &end, out) && *end == '\0';
}

static bool parse_whole_float(const char *s, double *out) {
    s = skip_space(s);
    char *stop;
    double v = strtod(s, &stop);
    if (stop == s || *skip_space(stop) != '\0') return false;
    *out = v;
    return true;
}

static bool parse_bool(const char *s, int64_t *out) {
    s = skip_space(s);
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1])) len--;
    if ((len == 4 && strncasecmp(s, "true", 4) == 0) || (len == 1 && s[0] == '1')) {
        *out = 1;
        return true;
    }
    if ((len == 5 && strncasecmp(s, "false", 5) == 0) || (len == 1 && s[0] == '0')) {
        *out = 0;
        return true;
    }
    return false;
}

/* "(1,2)", "[1, 2]", "(1,)", "()", or a bare "3"; entries may be None when allowed. */
static bool parse_tuple(const char *s, bool allow_none, deft_tuple_t *out) {
    s = skip_space(s);
    char close = *s == '(' ? ')' : *s == '[' ? ']' : '\0';
    if (close) s = skip_space(s + 1);
    deft_tuple_t t = {0};
    while (*s && *s != close) {
        if (t.n == DEFT_SHAPE_MAX_NDIM) return false;
        const char *end;
        if (allow_none && strncmp(s, "None", 4) == 0) {
            t.v[t.n++] = DEFT_TUPLE_NONE;
            end = skip_space(s + 4);
        } else if (!parse_int(s, &end, &t.v[t.n++])) {
            return false;
        }
        s = end;
        if (*s == ',')
            s = skip_space(s + 1);
        else if (*s != close)
            return false;
        if (!close && *s == '\0') break;
    }
    if (close) {
        if (*s != close) return false;
        s = skip_space(s + 1);
    } else if (t.n == 0) {
        return false;
    }
    if (*s != '\0') return false;
    *out = t;
    return true;
}

/* "cpu(0)" or "gpu(2)" (ids up to 9999). */
static bool parse_device(const char *s, deft_tuple_t *out) {
    s = skip_space(s);
    int type = strncmp(s, "cpu(", 4) == 0   ? DEFT_DEV_CPU
               : strncmp(s, "gpu(", 4) == 0 ? DEFT_DEV_GPU
                                            : 0;
    if (!type) return false;
    const char *end;
    int64_t id;
    if (!parse_int(s + 4, &end, &id) || *end != ')' || id < 0 || id > 9999) return false;
    if (*skip_space(end + 1) != '\0') return false;
    *out = (deft_tuple_t){2, {type, id}};
    return true;
}

static const char *expectation(const deft_param_def_t *def) {
    switch (def->type) {
    case DEFT_PARAM_INT:
        return "an integer";
    case DEFT_PARAM_FLOAT:
        return "a number";
    case DEFT_PARAM_BOOL:
        return "true or false";
    case DEFT_PARAM_TUPLE:
        return "a tuple of integers such as (0,1)";
    case DEFT_PARAM_DTYPE:
        return "a dtype name such as float32";
    case DEFT_PARAM_ENUM:
        return "one of the listed words";
    case DEFT_PARAM_DEVICE:
        return "a device such as cpu(0) or gpu(1)";
    case DEFT_PARAM_STRING:
        return "text";
    }
    return "a value";
}

const char *deft_param_type_name(const deft_param_def_t *def) {
    switch (def->type) {
    case DEFT_PARAM_INT:
        return def->allow_none ? "int or None" : "int";
    case DEFT_PARAM_FLOAT:
        return def->allow_none ? "float or None" : "float";
    case DEFT_PARAM_BOOL:
        return "boolean";
    case DEFT_PARAM_TUPLE:
        return def->allow_none ? "tuple of int or None" : "tuple of int";
    case DEFT_PARAM_DTYPE:
        return "dtype";
    case DEFT_PARAM_ENUM:
        return "enum";
    case DEFT_PARAM_DEVICE:
        return "device";
    case DEFT_PARAM_STRING:
        return "string";
    }
    return "unknown";
}

static int enum_error(const deft_op_t *op, const deft_param_def_t *def, const char *text) {
    char words[256] = "";
    size_t used = 0;
    for (int i = 0; def->choices[i] && used < sizeof words; i++)
        used += (size_t)snprintf(words + used, sizeof words - used, "%s%s", i ? ", " : "",
                                 def->choices[i]);
    return deft_op_error(op, DEFT_ERR_PARSE, "parameter '%s' is '%s', expected one of: %s",
                         def->name, text, words);
}

int deft_param_parse(const deft_op_t *op, const deft_param_def_t *def, const char *text,
                     deft_param_value_t *out) {
    deft_param_value_t v = {0};
    bool ok = true;
    if (def->allow_none && is_none(text)) {
        v.none = true;
    } else {
        switch (def->type) {
        case DEFT_PARAM_INT:
            ok = parse_whole_int(text, &v.i);
            break;
        case DEFT_PARAM_DEVICE:
            ok = parse_device(text, &v.t);
            break;
        case DEFT_PARAM_STRING:
            v.s = text;
            break;
        case DEFT_PARAM_FLOAT:
            ok = parse_whole_float(text, &v.f);
            break;
        case DEFT_PARAM_BOOL:
            ok = parse_bool(text, &v.i);
            break;
        case DEFT_PARAM_TUPLE:
            ok = parse_tuple(text, def->allow_none, &v.t);
            break;
        case DEFT_PARAM_DTYPE: {
            /* The op's own message below replaces the lookup's generic one. */
            deft_dtype_t dtype = DEFT_DT_FLOAT32;
            ok = deft_dtype_from_name(skip_space(text), &dtype) == 0;
            v.i = dtype;
            break;
        }
        case DEFT_PARAM_ENUM: {
            ok = false;
            for (int i = 0; def->choices[i]; i++) {
                if (strcmp(def->choices[i], skip_space(text)) == 0) {
                    v.i = i;
                    ok = true;
                }
            }
            if (!ok) return enum_error(op, def, text);
            break;
        }
        }
    }
    if (!ok)
        return deft_op_error(op, DEFT_ERR_PARSE, "parameter '%s' is '%s', expected %s", def->name,
                             text, expectation(def));
    *out = v;
    return 0;
}
