#include "core/base/dtype.h"

#include <string.h>

#include "core/base/error.h"

typedef struct dtype_info {
    const char *name; /* NULL for codes that are not dtypes */
    size_t size;
} dtype_info_t;

static const dtype_info_t dtype_table[DEFT_DT_COUNT] = {
    [DEFT_DT_FLOAT32] = {"float32", 4},   [DEFT_DT_FLOAT64] = {"float64", 8},
    [DEFT_DT_FLOAT16] = {"float16", 2},   [DEFT_DT_UINT8] = {"uint8", 1},
    [DEFT_DT_INT32] = {"int32", 4},       [DEFT_DT_INT8] = {"int8", 1},
    [DEFT_DT_INT64] = {"int64", 8},       [DEFT_DT_BOOL] = {"bool", 1},
    [DEFT_DT_BFLOAT16] = {"bfloat16", 2},
};

bool deft_dtype_valid(int code) {
    return code >= 0 && code < DEFT_DT_COUNT && dtype_table[code].name != NULL;
}

size_t deft_dtype_size(deft_dtype_t dtype) {
    return dtype_table[dtype].size;
}

const char *deft_dtype_name(deft_dtype_t dtype) {
    return dtype_table[dtype].name;
}

int deft_dtype_check(int code, const char *what) {
    if (deft_dtype_valid(code)) return 0;
    return deft_error(DEFT_ERR_TYPE,
                      "%s is %d, which is not a dtype (expected float32=0, float64=1, "
                      "float16=2, uint8=3, int32=4, int8=5, int64=6, bool=7 or bfloat16=12)",
                      what, code);
}

int deft_dtype_from_name(const char *name, deft_dtype_t *out) {
    for (int code = 0; code < DEFT_DT_COUNT; code++) {
        if (dtype_table[code].name && strcmp(dtype_table[code].name, name) == 0) {
            *out = (deft_dtype_t)code;
            return 0;
        }
    }
    return deft_error(DEFT_ERR_TYPE,
                      "unknown dtype name '%s' (expected float32, float64, float16, "
                      "bfloat16, uint8, int8, int32, int64 or bool)",
                      name);
}
