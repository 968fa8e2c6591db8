/*
 * DLPack: lending an array's memory to another library and borrowing
 * theirs, without copies (numpy.from_dlpack, torch.from_dlpack, ...).
 */
#ifndef DEFT_CORE_DLPACK_H
#define DEFT_CORE_DLPACK_H

#include <dlpack/dlpack.h>

#include "core/imperative/ndarray.h"

/* A DLPack view of `arr` (computed and with its pending writes done first)
 * that holds a reference to it until the consumer calls its deleter. */
int deft_dlpack_export(deft_ndarray_t *arr, DLManagedTensor **out);

/* An array over the memory of `tensor`, which it takes over (its deleter runs
 * when the array's storage goes) on success only. */
int deft_dlpack_import(DLManagedTensor *tensor, deft_ndarray_t **out);

/* Release a just-imported array without running the tensor's deleter: for
 * failures after the import, when the caller keeps the tensor. */
void deft_dlpack_abandon(deft_ndarray_t *arr);

#endif
