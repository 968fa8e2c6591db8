/* NDArray list files in MXNet's `.params` format: load, load from memory, save. */
#include <stdlib.h>

#include "capi/src/api.h"
#include "core/imperative/ndarray_file.h"

/* Free the non-NULL handles of a list; -1 if one was not a live NDArray handle. */
static int free_handles(int count, DeftNDArrayHandle *handles) {
    int status = 0;
    for (int i = 0; handles && i < count; i++) {
        void *object;
        if (!handles[i]) continue;
        if (deft_handle_retire(handles[i], DEFT_HANDLE_NDARRAY, "an entry of arrays", &object))
            status = -1;
        else
            deft_ndarray_release(object);
    }
    return status;
}

/* Hand a loaded list to the caller as handles; the list is emptied either way. */
static int return_list(deft_ndarray_list_t *list, int *out_count, DeftNDArrayHandle **out_arrays,
                       const char ***out_names) {
    DeftNDArrayHandle *handles = calloc(list->count ? (size_t)list->count : 1, sizeof *handles);
    if (!handles) {
        deft_ndarray_list_clear(list);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate %d handles", list->count);
    }
    for (int i = 0; i < list->count; i++) {
        deft_ndarray_t *arr = list->arrays[i];
        list->arrays[i] = NULL; /* api_ndarray_wrap takes the reference, even on failure */
        if (api_ndarray_wrap(arr, &handles[i])) {
            free_handles(i, handles);
            free(handles);
            deft_ndarray_list_clear(list);
            return -1;
        }
    }
    *out_count = list->count;
    *out_arrays = handles;
    *out_names = (const char **)list->names;
    list->names = NULL; /* now the caller's, freed by DeftNDArrayListFree */
    deft_ndarray_list_clear(list);
    return 0;
}

static int check_outs(int *out_count, DeftNDArrayHandle **out_arrays, const char ***out_names) {
    return api_check_out(out_count, "out_count") || api_check_out(out_arrays, "out_arrays") ||
           api_check_out(out_names, "out_names");
}

int DeftNDArrayLoad(const char *path, int *out_count, DeftNDArrayHandle **out_arrays,
                    const char ***out_names) {
    API_BEGIN();
    deft_ndarray_list_t list;
    if (!path) return deft_error(DEFT_ERR_VALUE, "path is NULL, expected a file name");
    if (check_outs(out_count, out_arrays, out_names) || deft_ndarray_file_load(path, &list))
        return -1;
    return return_list(&list, out_count, out_arrays, out_names);
}

int DeftNDArrayLoadFromBuffer(const void *data, size_t nbytes, int *out_count,
                              DeftNDArrayHandle **out_arrays, const char ***out_names) {
    API_BEGIN();
    deft_ndarray_list_t list;
    if (check_outs(out_count, out_arrays, out_names) ||
        deft_ndarray_file_parse(data, nbytes, &list))
        return -1;
    return return_list(&list, out_count, out_arrays, out_names);
}

int DeftNDArrayListFree(int count, DeftNDArrayHandle *arrays, const char **names) {
    API_BEGIN();
    int status = free_handles(count, arrays);
    free(arrays);
    free(names);
    return status;
}

int DeftNDArraySave(const char *path, int count, const DeftNDArrayHandle *arrays,
                    const char *const *names) {
    API_BEGIN();
    if (!path) return deft_error(DEFT_ERR_VALUE, "path is NULL, expected a file name");
    deft_ndarray_t **list = NULL;
    int status = api_ndarray_list(arrays, count, "arrays", false, &list);
    if (status == 0) status = deft_ndarray_file_save(path, count, list, names);
    free(list);
    return status;
}
