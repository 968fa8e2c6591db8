//! Raw declarations of deft's C API, as in `capi/include/deft/*.h`.
//!
//! libdeft is opened on the first call (see `loader.rs`): from the folder
//! pkg-config named at build time, else the in-tree `build/`, else wherever
//! the system loader finds `libdeft.so.0`.
//!
//! Every function returns 0 on success and -1 on failure, with the reason in
//! `DeftGetLastError()` (thread-local: read it on the thread that failed).
//! The safe API is the `deft` crate. `tests/header_match.rs` compiles a C
//! file that assigns each function below to a pointer of the declared type,
//! against the real header, so these declarations cannot drift from it.
#![allow(non_camel_case_types, non_snake_case)]

use std::os::raw::{c_char, c_int, c_void};

#[macro_use]
mod loader;
pub use loader::LIBDIR;

/// Opaque array.
#[repr(C)]
pub struct DeftNDArray {
    _private: [u8; 0],
}
/// Opaque symbol (graph).
#[repr(C)]
pub struct DeftSymbol {
    _private: [u8; 0],
}
/// Opaque executor.
#[repr(C)]
pub struct DeftCachedOp {
    _private: [u8; 0],
}
/// Opaque operator (static: never freed).
#[repr(C)]
pub struct DeftOp {
    _private: [u8; 0],
}
/// Opaque profiling domain.
#[repr(C)]
pub struct DeftProfileDomain {
    _private: [u8; 0],
}
/// Opaque profiling task, frame, event or counter.
#[repr(C)]
pub struct DeftProfileObject {
    _private: [u8; 0],
}
/// A custom operator's callbacks (deft/custom_op.h).
#[repr(C)]
pub struct DeftCustomOpCallbacks {
    pub num_inputs: c_int,
    pub infer_shape: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            num_inputs: c_int,
            in_ndims: *const c_int,
            in_shapes: *const i64,
            in_dtypes: *const c_int,
            out_ndim: *mut c_int,
            out_shape: *mut i64,
            out_dtype: *mut c_int,
        ) -> c_int,
    >,
    pub forward: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            num_inputs: c_int,
            inputs: *const DeftNDArrayHandle,
            output: DeftNDArrayHandle,
            is_train: c_int,
        ) -> c_int,
    >,
    pub backward: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            out_grad: DeftNDArrayHandle,
            num_inputs: c_int,
            inputs: *const DeftNDArrayHandle,
            output: DeftNDArrayHandle,
            in_grads: *const DeftNDArrayHandle,
        ) -> c_int,
    >,
    pub user: *mut c_void,
    pub release: Option<unsafe extern "C" fn(user: *mut c_void)>,
}
/// Called before a thread sleeps waiting for the engine (DeftSetBlockingHooks).
pub type DeftBlockingReleaseFn = Option<unsafe extern "C" fn() -> *mut c_void>;
/// Called after that sleep with what the release function returned.
pub type DeftBlockingReacquireFn = Option<unsafe extern "C" fn(state: *mut c_void)>;
/// DLPack's device (dlpack/dlpack.h, v0.6+; tests/header_match.rs checks the layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLDevice {
    pub device_type: c_int,
    pub device_id: c_int,
}
/// DLPack's element type: code (0 int, 1 uint, 2 float, 4 bfloat), bits, lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}
/// DLPack's tensor view.
#[repr(C)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: c_int,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}
/// A DLPack tensor with its owner's deleter.
#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(tensor: *mut DLManagedTensor)>,
}

pub type DeftNDArrayHandle = *mut DeftNDArray;
pub type DeftSymbolHandle = *mut DeftSymbol;
pub type DeftCachedOpHandle = *mut DeftCachedOp;
pub type DeftOpHandle = *mut DeftOp;
pub type DeftProfileDomainHandle = *mut DeftProfileDomain;
pub type DeftProfileObjectHandle = *mut DeftProfileObject;

pub const DEFT_ERROR_NONE: c_int = 0;
pub const DEFT_ERROR_VALUE: c_int = 1;
pub const DEFT_ERROR_TYPE: c_int = 2;
pub const DEFT_ERROR_INDEX: c_int = 3;
pub const DEFT_ERROR_NOT_IMPLEMENTED: c_int = 4;
pub const DEFT_ERROR_OUT_OF_MEMORY: c_int = 5;
pub const DEFT_ERROR_PARSE: c_int = 6;
pub const DEFT_ERROR_INTERNAL: c_int = 7;

pub const DEFT_FLOAT32: c_int = 0;
pub const DEFT_FLOAT64: c_int = 1;
pub const DEFT_FLOAT16: c_int = 2;
pub const DEFT_UINT8: c_int = 3;
pub const DEFT_INT32: c_int = 4;
pub const DEFT_INT8: c_int = 5;
pub const DEFT_INT64: c_int = 6;
pub const DEFT_BOOL: c_int = 7;
pub const DEFT_BFLOAT16: c_int = 12;

pub const DEFT_CPU: c_int = 1;
pub const DEFT_GPU: c_int = 2;

pub const DEFT_MEM_LIVE_BYTES: c_int = 0;
pub const DEFT_MEM_LIVE_BUFFERS: c_int = 1;
pub const DEFT_MEM_PEAK_BYTES: c_int = 2;
pub const DEFT_MEM_CACHED_BYTES: c_int = 3;

pub const DEFT_GRAD_NULL: c_int = 0;
pub const DEFT_GRAD_WRITE: c_int = 1;
pub const DEFT_GRAD_ADD: c_int = 2;

pub const DEFT_CACHED_OP_NO_MEMORY_PLAN: c_int = 1;
pub const DEFT_CACHED_OP_BACKWARD: c_int = 2;
pub const DEFT_CACHED_OP_FUSE: c_int = 4;

pub const DEFT_PROFILER_TABLE: c_int = 0;
pub const DEFT_PROFILER_JSON: c_int = 1;
pub const DEFT_PROFILE_TASK: c_int = 0;
pub const DEFT_PROFILE_FRAME: c_int = 1;
pub const DEFT_PROFILE_EVENT: c_int = 2;
pub const DEFT_PROFILE_COUNTER: c_int = 3;

pub const DEFT_MAX_NDIM: usize = 8;
/// The most outputs one operator or graph may have.
pub const DEFT_MAX_OUTPUTS: usize = 64;

// Each function below becomes a Rust function that calls libdeft's through
// the address `load` resolved (see the loader at the end of this file).
deft_functions! {
    pub fn DeftGetVersion(out: *mut c_int) -> c_int;
    pub fn DeftGetLastError() -> *const c_char;
    pub fn DeftGetLastErrorKind() -> c_int;
    pub fn DeftDTypeGetName(dtype: c_int, out: *mut *const c_char) -> c_int;
    pub fn DeftDTypeGetSize(dtype: c_int, out: *mut usize) -> c_int;
    pub fn DeftDTypeFromName(name: *const c_char, out: *mut c_int) -> c_int;
    pub fn DeftGetMemoryStat(dev_type: c_int, dev_id: c_int, stat: c_int, out: *mut i64) -> c_int;
    pub fn DeftGetLiveNDArrayCount(out: *mut i64) -> c_int;
    pub fn DeftMemoryReleaseCached(dev_type: c_int, dev_id: c_int) -> c_int;
    pub fn DeftGetGPUCount(out: *mut c_int) -> c_int;
    pub fn DeftGetGPUName(dev_id: c_int, out: *mut *const c_char) -> c_int;
    pub fn DeftGetGPUMemoryInfo(
        dev_id: c_int,
        free_bytes: *mut usize,
        total_bytes: *mut usize,
    ) -> c_int;
    pub fn DeftNDArrayCreate(
        shape: *const i64,
        ndim: c_int,
        dtype: c_int,
        dev_type: c_int,
        dev_id: c_int,
        out: *mut DeftNDArrayHandle,
    ) -> c_int;
    pub fn DeftNDArrayView(
        handle: DeftNDArrayHandle,
        offset: i64,
        shape: *const i64,
        ndim: c_int,
        out: *mut DeftNDArrayHandle,
    ) -> c_int;
    pub fn DeftNDArrayStridedView(
        handle: DeftNDArrayHandle,
        offset: i64,
        shape: *const i64,
        strides: *const i64,
        ndim: c_int,
        out: *mut DeftNDArrayHandle,
    ) -> c_int;
    pub fn DeftNDArrayPinMemory(handle: DeftNDArrayHandle, out: *mut DeftNDArrayHandle) -> c_int;
    pub fn DeftNDArrayIsPinned(handle: DeftNDArrayHandle, out: *mut c_int) -> c_int;
    pub fn DeftNDArrayGetLayout(
        handle: DeftNDArrayHandle,
        strides: *mut i64,
        offset: *mut i64,
        is_view: *mut c_int,
    ) -> c_int;
    pub fn DeftNDArrayCreateFromData(
        shape: *const i64,
        ndim: c_int,
        dtype: c_int,
        dev_type: c_int,
        dev_id: c_int,
        data: *const c_void,
        nbytes: usize,
        out: *mut DeftNDArrayHandle,
    ) -> c_int;
    pub fn DeftNDArrayCopyToHost(
        handle: DeftNDArrayHandle,
        data: *mut c_void,
        nbytes: usize,
    ) -> c_int;
    pub fn DeftNDArrayCopyFromHost(
        handle: DeftNDArrayHandle,
        data: *const c_void,
        nbytes: usize,
    ) -> c_int;
    pub fn DeftNDArrayCopyTo(src: DeftNDArrayHandle, dst: DeftNDArrayHandle) -> c_int;
    pub fn DeftNDArrayGetNDim(handle: DeftNDArrayHandle, out: *mut c_int) -> c_int;
    pub fn DeftNDArrayGetShape(
        handle: DeftNDArrayHandle,
        out_shape: *mut i64,
        capacity: c_int,
        out_ndim: *mut c_int,
    ) -> c_int;
    pub fn DeftNDArrayGetSize(handle: DeftNDArrayHandle, out: *mut i64) -> c_int;
    pub fn DeftNDArrayGetNBytes(handle: DeftNDArrayHandle, out: *mut usize) -> c_int;
    pub fn DeftNDArrayGetDType(handle: DeftNDArrayHandle, out: *mut c_int) -> c_int;
    pub fn DeftNDArrayGetDevice(
        handle: DeftNDArrayHandle,
        out_type: *mut c_int,
        out_id: *mut c_int,
    ) -> c_int;
    pub fn DeftNDArrayWaitToRead(handle: DeftNDArrayHandle) -> c_int;
    pub fn DeftNDArrayWaitToWrite(handle: DeftNDArrayHandle) -> c_int;
    pub fn DeftWaitAll() -> c_int;
    pub fn DeftShutdown() -> c_int;
    pub fn DeftSetBlockingHooks(
        release: DeftBlockingReleaseFn,
        reacquire: DeftBlockingReacquireFn,
    ) -> c_int;
    pub fn DeftNDArrayFree(handle: DeftNDArrayHandle) -> c_int;
    pub fn DeftNDArrayLoad(
        path: *const c_char,
        out_count: *mut c_int,
        out_arrays: *mut *mut DeftNDArrayHandle,
        out_names: *mut *mut *const c_char,
    ) -> c_int;
    pub fn DeftNDArrayLoadFromBuffer(
        data: *const c_void,
        nbytes: usize,
        out_count: *mut c_int,
        out_arrays: *mut *mut DeftNDArrayHandle,
        out_names: *mut *mut *const c_char,
    ) -> c_int;
    pub fn DeftNDArrayListFree(
        count: c_int,
        arrays: *mut DeftNDArrayHandle,
        names: *mut *const c_char,
    ) -> c_int;
    pub fn DeftNDArraySave(
        path: *const c_char,
        count: c_int,
        arrays: *const DeftNDArrayHandle,
        names: *const *const c_char,
    ) -> c_int;
    pub fn DeftListOperators(out_count: *mut c_int, out_names: *mut *const *const c_char) -> c_int;
    pub fn DeftGetOperator(name: *const c_char, out: *mut DeftOpHandle) -> c_int;
    pub fn DeftOpGetInfo(
        op: DeftOpHandle,
        out_name: *mut *const c_char,
        out_description: *mut *const c_char,
    ) -> c_int;
    pub fn DeftOpGetInputs(
        op: DeftOpHandle,
        out_min: *mut c_int,
        out_max: *mut c_int,
        out_num_names: *mut c_int,
        out_names: *mut *const *const c_char,
    ) -> c_int;
    pub fn DeftOpGetNumParams(op: DeftOpHandle, out: *mut c_int) -> c_int;
    pub fn DeftOpGetParam(
        op: DeftOpHandle,
        index: c_int,
        out_name: *mut *const c_char,
        out_type: *mut *const c_char,
        out_default: *mut *const c_char,
        out_doc: *mut *const c_char,
    ) -> c_int;
    pub fn DeftOpGetParamChoices(
        op: DeftOpHandle,
        index: c_int,
        out_count: *mut c_int,
        out_words: *mut *const *const c_char,
    ) -> c_int;
    pub fn DeftRandomSeed(seed: u64) -> c_int;
    pub fn DeftSetMemoization(capacity: c_int, prev: *mut c_int) -> c_int;
    pub fn DeftGetMemoizationStats(hits: *mut i64, misses: *mut i64) -> c_int;
    pub fn DeftImperativeInvoke(
        op: DeftOpHandle,
        num_inputs: c_int,
        inputs: *const DeftNDArrayHandle,
        num_outputs: *mut c_int,
        outputs: *mut DeftNDArrayHandle,
        num_params: c_int,
        keys: *const *const c_char,
        vals: *const *const c_char,
    ) -> c_int;
    pub fn DeftSymbolCreateVariable(name: *const c_char, out: *mut DeftSymbolHandle) -> c_int;
    pub fn DeftSymbolCreateAtomic(
        op: DeftOpHandle,
        num_params: c_int,
        keys: *const *const c_char,
        vals: *const *const c_char,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftSymbolCompose(
        sym: DeftSymbolHandle,
        name: *const c_char,
        num_args: c_int,
        keys: *const *const c_char,
        args: *const DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftSymbolCreateGroup(
        num_symbols: c_int,
        symbols: *const DeftSymbolHandle,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftSymbolCopy(sym: DeftSymbolHandle, out: *mut DeftSymbolHandle) -> c_int;
    pub fn DeftSymbolFree(sym: DeftSymbolHandle) -> c_int;
    pub fn DeftSymbolGetNumOutputs(sym: DeftSymbolHandle, out: *mut c_int) -> c_int;
    pub fn DeftSymbolGetOutput(
        sym: DeftSymbolHandle,
        index: c_int,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftSymbolGetInternals(sym: DeftSymbolHandle, out: *mut DeftSymbolHandle) -> c_int;
    pub fn DeftSymbolGetChildren(sym: DeftSymbolHandle, out: *mut DeftSymbolHandle) -> c_int;
    pub fn DeftSymbolGetName(sym: DeftSymbolHandle, out: *mut *const c_char) -> c_int;
    pub fn DeftSymbolListArguments(
        sym: DeftSymbolHandle,
        out_count: *mut c_int,
        out_names: *mut *const *const c_char,
    ) -> c_int;
    pub fn DeftSymbolListOutputs(
        sym: DeftSymbolHandle,
        out_count: *mut c_int,
        out_names: *mut *const *const c_char,
    ) -> c_int;
    pub fn DeftSymbolListAuxiliaryStates(
        sym: DeftSymbolHandle,
        out_count: *mut c_int,
        out_names: *mut *const *const c_char,
    ) -> c_int;
    pub fn DeftSymbolGetAttr(
        sym: DeftSymbolHandle,
        key: *const c_char,
        out_value: *mut *const c_char,
        out_found: *mut c_int,
    ) -> c_int;
    pub fn DeftSymbolSetAttr(
        sym: DeftSymbolHandle,
        key: *const c_char,
        value: *const c_char,
    ) -> c_int;
    pub fn DeftSymbolSaveToJSON(sym: DeftSymbolHandle, out_json: *mut *const c_char) -> c_int;
    pub fn DeftSymbolCreateFromJSON(json: *const c_char, out: *mut DeftSymbolHandle) -> c_int;
    pub fn DeftSymbolSaveToFile(sym: DeftSymbolHandle, path: *const c_char) -> c_int;
    pub fn DeftSymbolCreateFromFile(path: *const c_char, out: *mut DeftSymbolHandle) -> c_int;
    pub fn DeftSymbolToDot(sym: DeftSymbolHandle, out_dot: *mut *const c_char) -> c_int;
    pub fn DeftSymbolInferShape(
        sym: DeftSymbolHandle,
        num_args: c_int,
        names: *const *const c_char,
        ndims: *const c_int,
        dims: *const i64,
        dtypes: *const c_int,
        out_complete: *mut c_int,
    ) -> c_int;
    pub fn DeftSymbolGetInferredShape(
        sym: DeftSymbolHandle,
        group: c_int,
        index: c_int,
        out_dims: *mut i64,
        capacity: c_int,
        out_ndim: *mut c_int,
        out_dtype: *mut c_int,
    ) -> c_int;
    pub fn DeftSymbolApplyPasses(
        sym: DeftSymbolHandle,
        passes: *const c_char,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftSymbolGradient(
        sym: DeftSymbolHandle,
        num_wrt: c_int,
        wrt: *const *const c_char,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftSymbolTrainStep(
        loss: DeftSymbolHandle,
        num_params: c_int,
        params: *const *const c_char,
        optimizer: *const c_char,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftSymbolPlaceDevice(
        sym: DeftSymbolHandle,
        default_type: c_int,
        default_id: c_int,
        num_groups: c_int,
        groups: *const *const c_char,
        types: *const c_int,
        ids: *const c_int,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftGetLiveSymbolCount(out: *mut i64) -> c_int;
    pub fn DeftCachedOpCreate(
        sym: DeftSymbolHandle,
        flags: c_int,
        out: *mut DeftCachedOpHandle,
    ) -> c_int;
    pub fn DeftCachedOpInvoke(
        op: DeftCachedOpHandle,
        num_inputs: c_int,
        inputs: *const DeftNDArrayHandle,
        num_outputs: *mut c_int,
        outputs: *mut DeftNDArrayHandle,
    ) -> c_int;
    pub fn DeftCachedOpGetPlanStat(op: DeftCachedOpHandle, stat: c_int, out: *mut i64) -> c_int;
    pub fn DeftCachedOpFree(op: DeftCachedOpHandle) -> c_int;
    pub fn DeftSetIsDeferredCompute(on: c_int, prev: *mut c_int) -> c_int;
    pub fn DeftIsDeferredCompute(out: *mut c_int) -> c_int;
    pub fn DeftImperativeDeferredInvoke(
        op: DeftOpHandle,
        num_inputs: c_int,
        inputs: *const DeftNDArrayHandle,
        num_outputs: *mut c_int,
        outputs: *mut DeftNDArrayHandle,
        num_params: c_int,
        keys: *const *const c_char,
        vals: *const *const c_char,
    ) -> c_int;
    pub fn DeftNDArrayGetIsDeferredCompute(
        handles: *const DeftNDArrayHandle,
        n: c_int,
        status: *mut c_int,
    ) -> c_int;
    pub fn DeftNDArrayTriggerDeferredCompute(handles: *const DeftNDArrayHandle, n: c_int) -> c_int;
    pub fn DeftNDArrayGetDeferredComputeSymbol(
        inputs: *const DeftNDArrayHandle,
        outputs: *const DeftNDArrayHandle,
        input_names: *const *const c_char,
        output_names: *const *const c_char,
        num_inputs: c_int,
        num_outputs: c_int,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftNDArraySetDeferredComputeVariable(
        arrays: *const DeftNDArrayHandle,
        variables: *const DeftSymbolHandle,
        n: c_int,
    ) -> c_int;
    pub fn DeftNDArrayClearDeferredCompute(arrays: *const DeftNDArrayHandle, n: c_int) -> c_int;
    pub fn DeftAutogradSetIsRecording(on: c_int, prev: *mut c_int) -> c_int;
    pub fn DeftAutogradIsRecording(out: *mut c_int) -> c_int;
    pub fn DeftAutogradSetIsTraining(on: c_int, prev: *mut c_int) -> c_int;
    pub fn DeftAutogradIsTraining(out: *mut c_int) -> c_int;
    pub fn DeftAutogradMarkVariables(
        num: c_int,
        variables: *const DeftNDArrayHandle,
        grad_reqs: *const c_int,
        grads: *const DeftNDArrayHandle,
    ) -> c_int;
    pub fn DeftAutogradBackward(
        num_heads: c_int,
        heads: *const DeftNDArrayHandle,
        head_grads: *const DeftNDArrayHandle,
        retain_graph: c_int,
        create_graph: c_int,
    ) -> c_int;
    pub fn DeftAutogradComputeGradient(
        num_heads: c_int,
        heads: *const DeftNDArrayHandle,
        head_grads: *const DeftNDArrayHandle,
        num_variables: c_int,
        variables: *const DeftNDArrayHandle,
        retain_graph: c_int,
        create_graph: c_int,
        out_grads: *mut DeftNDArrayHandle,
    ) -> c_int;
    pub fn DeftNDArrayToDLPack(handle: DeftNDArrayHandle, out: *mut *mut DLManagedTensor) -> c_int;
    pub fn DeftNDArrayFromDLPack(
        tensor: *mut DLManagedTensor,
        out: *mut DeftNDArrayHandle,
    ) -> c_int;
    pub fn DeftProfilerSetConfig(
        num_params: c_int,
        keys: *const *const c_char,
        vals: *const *const c_char,
    ) -> c_int;
    pub fn DeftProfilerSetState(running: c_int) -> c_int;
    pub fn DeftProfilerPause(paused: c_int) -> c_int;
    pub fn DeftProfilerDump(finished: c_int) -> c_int;
    pub fn DeftProfilerDumps(reset: c_int, format: c_int, out: *mut *const c_char) -> c_int;
    pub fn DeftProfilerReset() -> c_int;
    pub fn DeftProfileCreateDomain(name: *const c_char, out: *mut DeftProfileDomainHandle)
        -> c_int;
    pub fn DeftProfileCreateObject(
        domain: DeftProfileDomainHandle,
        kind: c_int,
        name: *const c_char,
        out: *mut DeftProfileObjectHandle,
    ) -> c_int;
    pub fn DeftProfileDurationStart(obj: DeftProfileObjectHandle) -> c_int;
    pub fn DeftProfileDurationStop(obj: DeftProfileObjectHandle) -> c_int;
    pub fn DeftProfileSetCounter(obj: DeftProfileObjectHandle, value: i64, add: c_int) -> c_int;
    pub fn DeftProfileSetMarker(
        domain: DeftProfileDomainHandle,
        name: *const c_char,
        scope: *const c_char,
    ) -> c_int;
    pub fn DeftProfileObjectFree(obj: DeftProfileObjectHandle) -> c_int;
    pub fn DeftProfileDomainFree(domain: DeftProfileDomainHandle) -> c_int;
    pub fn DeftLoadLib(path: *const c_char, verbose: c_int) -> c_int;
    pub fn DeftLibListPasses(out_count: *mut c_int, out_names: *mut *const *const c_char) -> c_int;
    pub fn DeftSymbolOptimizeFor(
        sym: DeftSymbolHandle,
        pass: *const c_char,
        num_options: c_int,
        keys: *const *const c_char,
        vals: *const *const c_char,
        out: *mut DeftSymbolHandle,
    ) -> c_int;
    pub fn DeftCustomOpRegister(
        name: *const c_char,
        callbacks: *const DeftCustomOpCallbacks,
    ) -> c_int;
    pub fn DeftCustomOpSetError(message: *const c_char) -> c_int;
    pub fn DeftCustomOpGetStream(device_id: c_int, out: *mut *mut c_void) -> c_int;
    pub fn DeftCustomOpGetData(handle: DeftNDArrayHandle, out: *mut *mut c_void) -> c_int;
}
