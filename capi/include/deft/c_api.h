/**
 * @file c_api.h
 * @brief The whole public C API of deft: include this one header.
 *
 * The API is flat and handle based. base.h states the conventions every
 * function keeps (status codes, thread-local error text, ownership);
 * each other header covers one concern.
 */
#ifndef DEFT_C_API_H
#define DEFT_C_API_H

#include "deft/base.h"
#include "deft/ndarray.h"
#include "deft/op.h"
#include "deft/symbol.h"
#include "deft/executor.h"
#include "deft/deferred.h"
#include "deft/autograd.h"
#include "deft/dlpack.h"
#include "deft/profiler.h"
#include "deft/extension.h"
#include "deft/custom_op.h"

#endif /* DEFT_C_API_H */
