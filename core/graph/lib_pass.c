/*
 * Extension libraries. A library is opened with dlopen and initialized under
 * one lock, on the loading thread; what it registers is kept only if its
 * initialization succeeds. Libraries are never closed: symbols and passes in
 * use may point into them.
 */
#define _GNU_SOURCE
#include "core/graph/lib_pass.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/json.h"
#include "core/graph/pass.h"
#include "core/op/registry.h"

struct deft_lib_pass {
    char *name;
    deft_lib_pass_fn fn;
    void (*free_json)(void *);
    void *user;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static deft_lib_pass_t **passes; /* each entry allocated apart: found ones never move */
static const char **names;
static int num_passes, capacity;
static void **libraries; /* dlopen handles of loaded libraries */
static int num_libraries;
/* While a library initializes: the thread doing it, and where its passes begin. */
static pthread_t loading_thread;
static bool loading;

static bool taken(const char *name) {
    if (deft_pass_find(name)) return true;
    for (int i = 0; i < num_passes; i++)
        if (!strcmp(passes[i]->name, name)) return true;
    return false;
}

int deft_lib_register_pass(const char *name, deft_lib_pass_fn fn, void (*free_json)(void *),
                           void *user) {
    /* lock is held by the loading thread, which is the only caller allowed */
    if (!loading || !pthread_equal(loading_thread, pthread_self()))
        return deft_error(DEFT_ERR_VALUE, "passes are registered only from deft_lib_initialize");
    if (!name || !fn) return deft_error(DEFT_ERR_VALUE, "name and fn must not be NULL");
    if (taken(name)) return deft_error(DEFT_ERR_VALUE, "a pass named '%s' exists already", name);
    if (num_passes == capacity) {
        int cap = capacity ? 2 * capacity : 8;
        deft_lib_pass_t **grown = realloc(passes, (size_t)cap * sizeof *grown);
        const char **grown_names = grown ? realloc(names, (size_t)cap * sizeof *grown_names) : NULL;
        if (grown) passes = grown;
        if (!grown || !grown_names)
            return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot register pass '%s'", name);
        names = grown_names, capacity = cap;
    }
    deft_lib_pass_t *pass = malloc(sizeof *pass);
    char *copy = strdup(name);
    if (!pass || !copy) {
        free(pass), free(copy);
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot register pass '%s'", name);
    }
    *pass = (deft_lib_pass_t){copy, fn, free_json ? free_json : free, user};
    passes[num_passes] = pass;
    names[num_passes++] = copy;
    return 0;
}

/* Forget the passes registered from `first` on (a library that failed to load). */
static void drop_from(int first) {
    while (num_passes > first) {
        deft_lib_pass_t *pass = passes[--num_passes];
        free(pass->name);
        free(pass);
    }
}

static int initialize(void *handle, const char *path, int abi_version) {
    int (*init)(int) = (int (*)(int))(size_t)dlsym(handle, "deft_lib_initialize");
    if (!init) return deft_error(DEFT_ERR_VALUE, "'%s' does not export deft_lib_initialize", path);
    int first = num_passes;
    loading = true;
    loading_thread = pthread_self();
    /* what the library calls (DeftLibRegisterPass ...) names itself in the
     * thread's error state: a refusal below is the loading call's */
    const char *caller = deft_error_swap_function(NULL);
    deft_error_restore(DEFT_ERR_NONE, "");
    int status = init(abi_version);
    deft_error_swap_function(caller);
    loading = false;
    if (status != 0) {
        drop_from(first);
        char met[DEFT_ERROR_MAX] = "";
        if (deft_error_kind() != DEFT_ERR_NONE)
            snprintf(met, sizeof met, " (the last error it met: %s)", deft_error_message());
        return deft_error(DEFT_ERR_VALUE,
                          "'%s' refused to initialize (status %d): it was built for another "
                          "deft ABI version than %d, or its registration failed%s",
                          path, status, abi_version, met);
    }
    return 0;
}

int deft_lib_load(const char *path, bool verbose, int abi_version) {
    pthread_mutex_lock(&lock);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int status = 0;
    bool again = false;
    for (int i = 0; handle && i < num_libraries; i++) again |= libraries[i] == handle;
    if (!handle) {
        status = deft_error(DEFT_ERR_VALUE, "cannot load '%s': %s", path, dlerror());
    } else if (again) {
        dlclose(handle); /* drops the reference this dlopen added */
    } else {
        void **grown = realloc(libraries, (size_t)(num_libraries + 1) * sizeof *grown);
        int first = num_passes, first_op = deft_registry_count();
        status = grown ? initialize(handle, path, abi_version)
                       : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot load '%s'", path);
        if (grown) libraries = grown;
        if (status == 0) {
            libraries[num_libraries++] = handle;
            for (int i = first; verbose && i < num_passes; i++)
                printf("deft: %s registered pass '%s'\n", path, passes[i]->name);
            for (int i = first_op; verbose && i < deft_registry_count(); i++)
                printf("deft: %s registered operator '%s'\n", path, deft_registry_at(i)->op->name);
        } else if (deft_registry_count() == first_op) {
            dlclose(handle); /* operators it registered before failing still need its code */
        }
    }
    pthread_mutex_unlock(&lock);
    return status;
}

const deft_lib_pass_t *deft_lib_pass_find(const char *name) {
    pthread_mutex_lock(&lock);
    const deft_lib_pass_t *found = NULL;
    for (int i = 0; i < num_passes && !found; i++)
        if (!strcmp(passes[i]->name, name)) found = passes[i];
    pthread_mutex_unlock(&lock);
    return found; /* entries are never removed once a load succeeded */
}

int deft_lib_pass_run(const deft_lib_pass_t *pass, const deft_symbol_t *in, int num_options,
                      const char *const *keys, const char *const *vals, deft_symbol_t **out) {
    char *json = NULL, *result = NULL, message[512] = "";
    if (deft_symbol_to_json(in, &json)) return -1;
    int failed =
        pass->fn(json, num_options, keys, vals, &result, message, sizeof message, pass->user);
    free(json);
    /* a library may fill the whole buffer without a terminating NUL */
    message[sizeof message - 1] = '\0';
    if (failed || !result) {
        if (result) pass->free_json(result);
        return deft_error(DEFT_ERR_VALUE, "pass '%s' failed: %s", pass->name,
                          message[0] ? message : "(no message)");
    }
    /* parsed without naming the API function, which the message below names once */
    const char *caller = deft_error_swap_function(NULL);
    int status = deft_symbol_from_json(result, out);
    deft_error_swap_function(caller);
    pass->free_json(result);
    if (status) {
        char detail[DEFT_ERROR_MAX];
        snprintf(detail, sizeof detail, "%s", deft_error_message());
        return deft_error(DEFT_ERR_VALUE, "pass '%s' returned a malformed graph: %s", pass->name,
                          detail);
    }
    return 0;
}

void deft_lib_pass_names(int *count, const char *const **out) {
    pthread_mutex_lock(&lock);
    *count = num_passes;
    *out = names;
    pthread_mutex_unlock(&lock);
}
