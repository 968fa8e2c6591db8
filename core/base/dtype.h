/* Element types: names, sizes and validity, one table for the whole library. */
#ifndef DEFT_CORE_DTYPE_H
#define DEFT_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Same numbers as the public DeftDType (MXNet's type flags). */
typedef enum deft_dtype {
    DEFT_DT_FLOAT32 = 0,
    DEFT_DT_FLOAT64 = 1,
    DEFT_DT_FLOAT16 = 2,
    DEFT_DT_UINT8 = 3,
    DEFT_DT_INT32 = 4,
    DEFT_DT_INT8 = 5,
    DEFT_DT_INT64 = 6,
    DEFT_DT_BOOL = 7,
    DEFT_DT_BFLOAT16 = 12,
} deft_dtype_t;

#define DEFT_DT_COUNT 13 /* one past the largest code */

bool deft_dtype_valid(int code);
/* Size and name of a valid dtype; callers check validity first. */
size_t deft_dtype_size(deft_dtype_t dtype);
const char *deft_dtype_name(deft_dtype_t dtype);
/* -1 with an error naming `what` when `code` is not a dtype. */
int deft_dtype_check(int code, const char *what);
/* Look a dtype up by name; -1 with an error when unknown. */
int deft_dtype_from_name(const char *name, deft_dtype_t *out);

#ifdef __cplusplus
}
#endif

#endif
