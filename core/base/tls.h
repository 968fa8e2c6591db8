/*
 * Thread-local storage on hot paths.
 *
 * In a shared library, a plain _Thread_local variable is reached through
 * __tls_get_addr, a function call per access; the dispatch benchmark showed
 * a dozen of those per operator call. Small variables (a pointer each) use
 * the initial-exec model instead: one instruction per access. glibc keeps a
 * reserve of static TLS for libraries loaded with dlopen (Python extensions
 * load libdeft that way), ample for these few pointers. Larger per-thread
 * state lives on the heap behind such a pointer.
 */
#ifndef DEFT_CORE_TLS_H
#define DEFT_CORE_TLS_H

#define DEFT_TLS_FAST _Thread_local __attribute__((tls_model("initial-exec")))

#endif
