/*
 * An extension library with one pass, "print_graph": it prints the graph's
 * JSON to standard error and returns it unchanged. Load it with
 * DeftLoadLib("libdeft_print_pass.so", 1) (or deft.load_lib in Python) and
 * run it with DeftSymbolOptimizeFor(sym, "print_graph", ...).
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deft/lib_api.h>

static int print_graph(const char *graph_json, int num_options, const char *const *keys,
                       const char *const *vals, char **out_json, char *error, size_t error_len,
                       void *user) {
    (void)error, (void)error_len, (void)user;
    fprintf(stderr, "print_graph:");
    for (int i = 0; i < num_options; i++) fprintf(stderr, " %s=%s", keys[i], vals[i]);
    fprintf(stderr, "\n%s\n", graph_json);
    *out_json = strdup(graph_json);
    return *out_json ? 0 : 1;
}

int deft_lib_initialize(int abi_version) {
    if (abi_version != DEFT_ABI_VERSION) return 1; /* built for another deft */
    return DeftLibRegisterPass("print_graph", print_graph, free, NULL);
}
