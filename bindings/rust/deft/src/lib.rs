//! deft from Rust: arrays, operators by name, deferred compute and export,
//! autograd and the executor, over the C library `libdeft`.
//!
//! Every fallible call returns `Result<_, Error>` carrying the C message;
//! dropping an [`NDArray`], [`Symbol`] or [`CachedOp`] frees its handle, and
//! the library keeps whatever the handle's data still feeds (pending work,
//! recorded graphs) alive on its own.
//!
//! ```no_run
//! let x = deft::NDArray::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
//! let y = x.call("_plus_scalar", &[], &[("scalar", "5")])?;
//! assert_eq!(y.to_vec::<f32>()?, vec![6.0, 7.0, 8.0]);
//! # Ok::<(), deft::Error>(())
//! ```
use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int};
use std::ptr;

use deft_sys as sys;

mod call;
mod device;
mod dlpack;
mod modes;
pub mod profiler;
pub use device::Device;
pub use dlpack::DLPack;
pub use modes::{is_recording, is_training, no_grad, predict_mode, train_mode, AutogradMode};
mod op_support;
mod opinfo;
#[rustfmt::skip] // generated (examples/gen_ops.rs), compared as is by tests/ops_current.rs
pub mod ops;
pub use opinfo::{operators, OpInfo, ParamInfo};

/// What kind of failure the C library reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Value,
    Type,
    Index,
    NotImplemented,
    OutOfMemory,
    Parse,
    Internal,
    /// A Rust-side argument that cannot cross into C (a string with a NUL byte).
    Argument,
}

/// A failed call: its kind and the library's message naming what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The status of the C call just made; its message is read at once, on the
/// same thread (it is thread-local in C).
fn check(status: c_int) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: both return the calling thread's error state, valid until its next failure.
    let (kind, message) = unsafe {
        (
            sys::DeftGetLastErrorKind(),
            CStr::from_ptr(sys::DeftGetLastError()),
        )
    };
    let kind = match kind {
        sys::DEFT_ERROR_VALUE => ErrorKind::Value,
        sys::DEFT_ERROR_TYPE => ErrorKind::Type,
        sys::DEFT_ERROR_INDEX => ErrorKind::Index,
        sys::DEFT_ERROR_NOT_IMPLEMENTED => ErrorKind::NotImplemented,
        sys::DEFT_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        sys::DEFT_ERROR_PARSE => ErrorKind::Parse,
        _ => ErrorKind::Internal,
    };
    Err(Error {
        kind,
        message: message.to_string_lossy().into_owned(),
    })
}

fn c_string(text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error {
        kind: ErrorKind::Argument,
        message: format!("{text:?} contains a NUL byte"),
    })
}

fn c_strings(texts: &[&str]) -> Result<(Vec<CString>, Vec<*const c_char>)> {
    let owned = texts
        .iter()
        .map(|t| c_string(t))
        .collect::<Result<Vec<_>>>()?;
    let pointers = owned.iter().map(|s| s.as_ptr()).collect();
    Ok((owned, pointers))
}

/// A list of strings the library owns (valid until the next call on the handle).
unsafe fn strings(count: c_int, names: *const *const c_char) -> Vec<String> {
    (0..count as usize)
        .map(|i| CStr::from_ptr(*names.add(i)).to_string_lossy().into_owned())
        .collect()
}

/// Element types an [`NDArray`] can be read into or made from: those whose
/// every bit pattern is a value (bool is read with [`NDArray::to_bools`], the
/// 16-bit floats as bits with [`NDArray::to_f16_bits`] / `to_bf16_bits`).
pub trait Element: Copy + Default {
    const DTYPE: i32;
}
impl Element for i8 {
    const DTYPE: i32 = sys::DEFT_INT8;
}
impl Element for f32 {
    const DTYPE: i32 = sys::DEFT_FLOAT32;
}
impl Element for f64 {
    const DTYPE: i32 = sys::DEFT_FLOAT64;
}
impl Element for i32 {
    const DTYPE: i32 = sys::DEFT_INT32;
}
impl Element for i64 {
    const DTYPE: i32 = sys::DEFT_INT64;
}
impl Element for u8 {
    const DTYPE: i32 = sys::DEFT_UINT8;
}

/// The most outputs an operator or a graph may have (C's DEFT_MAX_OUTPUTS):
/// [`Op::invoke`] always has room for all.
pub const MAX_OUTPUTS: usize = sys::DEFT_MAX_OUTPUTS;

/// The name of a DEFT_* dtype code ("float32"), or the code itself.
pub fn dtype_name(dtype: i32) -> String {
    let mut name = ptr::null();
    // SAFETY: on success the name is a static string.
    if unsafe { sys::DeftDTypeGetName(dtype, &mut name) } != 0 || name.is_null() {
        return format!("dtype {dtype}");
    }
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// An n-dimensional array on the CPU, computed asynchronously.
pub struct NDArray {
    handle: sys::DeftNDArrayHandle,
}

// SAFETY: the C library is thread-safe for arrays: any thread may use or free
// a handle, and the engine orders the work on its data.
unsafe impl Send for NDArray {}
unsafe impl Sync for NDArray {}

impl Drop for NDArray {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and freed once; freeing never blocks.
        unsafe { sys::DeftNDArrayFree(self.handle) };
    }
}

impl NDArray {
    fn from_handle(handle: sys::DeftNDArrayHandle) -> NDArray {
        NDArray { handle }
    }

    /// The raw handle, for calls deft-sys offers and this crate does not.
    pub fn as_raw(&self) -> sys::DeftNDArrayHandle {
        self.handle
    }

    /// An array holding a copy of `data`, in row-major order.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<NDArray> {
        let mut handle = ptr::null_mut();
        check(unsafe {
            sys::DeftNDArrayCreateFromData(
                shape.as_ptr(),
                shape.len() as c_int,
                T::DTYPE,
                sys::DEFT_CPU,
                0,
                data.as_ptr().cast(),
                std::mem::size_of_val(data),
                &mut handle,
            )
        })?;
        Ok(NDArray::from_handle(handle))
    }

    /// An array of zeros of type `T`.
    pub fn zeros<T: Element>(shape: &[i64]) -> Result<NDArray> {
        let mut handle = ptr::null_mut();
        check(unsafe {
            sys::DeftNDArrayCreate(
                shape.as_ptr(),
                shape.len() as c_int,
                T::DTYPE,
                sys::DEFT_CPU,
                0,
                &mut handle,
            )
        })?;
        Ok(NDArray::from_handle(handle))
    }

    pub fn shape(&self) -> Result<Vec<i64>> {
        let mut dims = [0i64; sys::DEFT_MAX_NDIM];
        let mut ndim = 0;
        check(unsafe {
            sys::DeftNDArrayGetShape(
                self.handle,
                dims.as_mut_ptr(),
                dims.len() as c_int,
                &mut ndim,
            )
        })?;
        Ok(dims[..ndim as usize].to_vec())
    }

    /// The element type, as a DEFT_* dtype code.
    pub fn dtype(&self) -> Result<i32> {
        let mut dtype = 0;
        check(unsafe { sys::DeftNDArrayGetDType(self.handle, &mut dtype) })?;
        Ok(dtype)
    }

    pub fn size(&self) -> Result<i64> {
        let mut size = 0;
        check(unsafe { sys::DeftNDArrayGetSize(self.handle, &mut size) })?;
        Ok(size)
    }

    /// The values, after pending work (and a lazy array's computation); a
    /// [`ErrorKind::Type`] error unless the array's dtype is `T`'s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.read::<T>(T::DTYPE, std::any::type_name::<T>())
    }

    /// The values of a bool array.
    pub fn to_bools(&self) -> Result<Vec<bool>> {
        // Read as bytes: a Rust bool must be 0 or 1, which C does not promise.
        let bytes = self.read::<u8>(sys::DEFT_BOOL, "bool")?;
        Ok(bytes.into_iter().map(|b| b != 0).collect())
    }

    /// The bits of a float16 array's values (IEEE binary16).
    pub fn to_f16_bits(&self) -> Result<Vec<u16>> {
        self.read::<u16>(sys::DEFT_FLOAT16, "f16 bits")
    }

    /// The bits of a bfloat16 array's values.
    pub fn to_bf16_bits(&self) -> Result<Vec<u16>> {
        self.read::<u16>(sys::DEFT_BFLOAT16, "bf16 bits")
    }

    /// Copies the values out as `T`, after checking the array is `dtype`.
    fn read<T: Copy + Default>(&self, dtype: i32, what: &str) -> Result<Vec<T>> {
        let actual = self.dtype()?;
        if actual != dtype {
            return Err(Error {
                kind: ErrorKind::Type,
                message: format!("the array is {}, not {what}", dtype_name(actual)),
            });
        }
        let mut out = vec![T::default(); self.size()? as usize];
        check(unsafe {
            sys::DeftNDArrayCopyToHost(
                self.handle,
                out.as_mut_ptr().cast(),
                std::mem::size_of_val(out.as_slice()),
            )
        })?;
        Ok(out)
    }

    /// Overwrite the values.
    pub fn copy_from<T: Element>(&self, data: &[T]) -> Result<()> {
        check(unsafe {
            sys::DeftNDArrayCopyFromHost(
                self.handle,
                data.as_ptr().cast(),
                std::mem::size_of_val(data),
            )
        })
    }

    pub fn wait_to_read(&self) -> Result<()> {
        check(unsafe { sys::DeftNDArrayWaitToRead(self.handle) })
    }

    /// True while the array waits for deferred compute.
    pub fn is_lazy(&self) -> Result<bool> {
        let mut status = 0;
        check(unsafe { sys::DeftNDArrayGetIsDeferredCompute(&self.handle, 1, &mut status) })?;
        Ok(status != 0)
    }

    /// Run operator `op` with this array as the first input; its first
    /// output (the others, if any, are freed).
    pub fn call(&self, op: &str, others: &[&NDArray], params: &[(&str, &str)]) -> Result<NDArray> {
        let op = Op::find(op)?;
        if others.len() < 8 {
            let mut inputs = [self; 8];
            inputs[1..=others.len()].copy_from_slice(others);
            op.invoke_one(&inputs[..=others.len()], params)
        } else {
            let mut inputs = vec![self];
            inputs.extend_from_slice(others);
            op.invoke_one(&inputs, params)
        }
    }

    /// Make this array a variable for autograd; backward writes its gradient
    /// into the returned array.
    pub fn attach_grad(&self) -> Result<NDArray> {
        let grad = NDArray::zeros_like(self)?;
        let req = sys::DEFT_GRAD_WRITE;
        check(unsafe { sys::DeftAutogradMarkVariables(1, &self.handle, &req, &grad.handle) })?;
        Ok(grad)
    }

    fn zeros_like(other: &NDArray) -> Result<NDArray> {
        invoke("zeros_like", &[other], &[]).map(|mut v| v.remove(0))
    }
}

/// An operator of the registry (static: nothing to free).
#[derive(Clone, Copy)]
pub struct Op {
    handle: sys::DeftOpHandle,
}

// SAFETY: operators are immutable, static registry entries.
unsafe impl Send for Op {}
unsafe impl Sync for Op {}

impl Op {
    pub fn find(name: &str) -> Result<Op> {
        let mut handle = ptr::null_mut();
        call::with_c_str(name, |name| {
            check(unsafe { sys::DeftGetOperator(name, &mut handle) })
        })?;
        Ok(Op { handle })
    }

    /// Run the operator; parameters are MXNet-style strings ("axis", "(0,1)").
    pub fn invoke(&self, inputs: &[&NDArray], params: &[(&str, &str)]) -> Result<Vec<NDArray>> {
        let mut outputs = [ptr::null_mut(); sys::DEFT_MAX_OUTPUTS];
        let count = self.call_new(inputs, &mut outputs, params)?;
        Ok(outputs[..count]
            .iter()
            .map(|&h| NDArray::from_handle(h))
            .collect())
    }

    /// Run the operator; its first output (the others, if any, are freed).
    pub fn invoke_one(&self, inputs: &[&NDArray], params: &[(&str, &str)]) -> Result<NDArray> {
        let mut outputs = [ptr::null_mut(); sys::DEFT_MAX_OUTPUTS];
        let count = self.call_new(inputs, &mut outputs, params)?;
        for &extra in &outputs[1..count] {
            drop(NDArray::from_handle(extra));
        }
        Ok(NDArray::from_handle(outputs[0]))
    }

    /// Run the operator writing into `outputs` (existing arrays of the right shape).
    pub fn invoke_into(
        &self,
        inputs: &[&NDArray],
        outputs: &[&NDArray],
        params: &[(&str, &str)],
    ) -> Result<()> {
        let mut outs: Vec<_> = outputs.iter().map(|a| a.handle).collect();
        self.call(inputs, &mut outs, params).map(|_| ())
    }

    /// The C call into new arrays. C's cost grows with the room it is given
    /// (about 0.5 ns an entry), so the first try has room for a few outputs,
    /// and only a failure (short room among the reasons) tries again with
    /// room for all, whose error is the one returned. A failed call creates
    /// and changes nothing, so trying twice is safe.
    fn call_new(
        &self,
        inputs: &[&NDArray],
        outputs: &mut [sys::DeftNDArrayHandle; sys::DEFT_MAX_OUTPUTS],
        params: &[(&str, &str)],
    ) -> Result<usize> {
        const FIRST_ROOM: usize = 4;
        match self.call(inputs, &mut outputs[..FIRST_ROOM], params) {
            Ok(count) => Ok(count),
            Err(_) => self.call(inputs, outputs, params),
        }
    }

    /// The C call: null entries of `outputs` receive new arrays; the count produced.
    fn call(
        &self,
        inputs: &[&NDArray],
        outputs: &mut [sys::DeftNDArrayHandle],
        params: &[(&str, &str)],
    ) -> Result<usize> {
        call::with_handles(inputs, |num_inputs, handles| {
            call::with_c_params(params, |num_params, keys, vals| {
                let mut count = outputs.len() as c_int;
                check(unsafe {
                    sys::DeftImperativeInvoke(
                        self.handle,
                        num_inputs,
                        handles,
                        &mut count,
                        outputs.as_mut_ptr(),
                        num_params,
                        keys,
                        vals,
                    )
                })?;
                Ok(count as usize)
            })
        })
    }

    /// Every registered operator's name.
    pub fn list() -> Result<Vec<String>> {
        let mut count = 0;
        let mut names = ptr::null();
        check(unsafe { sys::DeftListOperators(&mut count, &mut names) })?;
        Ok(unsafe { strings(count, names) })
    }
}

/// Run operator `name` (see [`Op::invoke`]).
pub fn invoke(name: &str, inputs: &[&NDArray], params: &[(&str, &str)]) -> Result<Vec<NDArray>> {
    Op::find(name)?.invoke(inputs, params)
}

/// While alive, operator calls on this thread record a graph and return lazy
/// arrays. Deferred mode is per thread, so the guard cannot leave it.
pub struct DeferredCompute {
    previous: c_int,
    _not_send: PhantomData<*const ()>,
}

impl DeferredCompute {
    pub fn enter() -> Result<DeferredCompute> {
        let mut previous = 0;
        check(unsafe { sys::DeftSetIsDeferredCompute(1, &mut previous) })?;
        Ok(DeferredCompute {
            previous,
            _not_send: PhantomData,
        })
    }
}

impl Drop for DeferredCompute {
    fn drop(&mut self) {
        unsafe { sys::DeftSetIsDeferredCompute(self.previous, ptr::null_mut()) };
    }
}

/// While alive, calls on this thread that read a variable are recorded for
/// autograd (with the training flag on).
pub struct Recording {
    previous: (c_int, c_int),
    _not_send: PhantomData<*const ()>,
}

impl Recording {
    pub fn enter() -> Result<Recording> {
        let (mut rec, mut train) = (0, 0);
        check(unsafe { sys::DeftAutogradSetIsRecording(1, &mut rec) })?;
        // The guard exists from here, so a failure below still restores recording.
        let mut guard = Recording {
            previous: (rec, 0),
            _not_send: PhantomData,
        };
        check(unsafe { sys::DeftAutogradSetIsTraining(1, &mut train) })?;
        guard.previous.1 = train;
        Ok(guard)
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        unsafe {
            sys::DeftAutogradSetIsRecording(self.previous.0, ptr::null_mut());
            sys::DeftAutogradSetIsTraining(self.previous.1, ptr::null_mut());
        }
    }
}

/// Gradients of `heads` into the arrays attached to each variable.
pub fn backward(heads: &[&NDArray]) -> Result<()> {
    let handles: Vec<_> = heads.iter().map(|a| a.handle).collect();
    check(unsafe {
        sys::DeftAutogradBackward(handles.len() as c_int, handles.as_ptr(), ptr::null(), 0, 0)
    })
}

/// Gradients of `heads` with respect to `variables`, as new arrays.
pub fn grad(heads: &[&NDArray], variables: &[&NDArray]) -> Result<Vec<NDArray>> {
    let h: Vec<_> = heads.iter().map(|a| a.handle).collect();
    let v: Vec<_> = variables.iter().map(|a| a.handle).collect();
    let mut out = vec![ptr::null_mut(); v.len()];
    check(unsafe {
        sys::DeftAutogradComputeGradient(
            h.len() as c_int,
            h.as_ptr(),
            ptr::null(),
            v.len() as c_int,
            v.as_ptr(),
            0,
            0,
            out.as_mut_ptr(),
        )
    })?;
    Ok(out.into_iter().map(NDArray::from_handle).collect())
}

/// A symbolic graph (exported from deferred compute, or loaded from JSON).
pub struct Symbol {
    handle: sys::DeftSymbolHandle,
}

// SAFETY: a symbol may be freed or used from another thread, but its handle
// keeps the strings it returns, so two threads must not share one (not Sync).
unsafe impl Send for Symbol {}

impl Drop for Symbol {
    fn drop(&mut self) {
        unsafe { sys::DeftSymbolFree(self.handle) };
    }
}

impl Symbol {
    pub fn from_json(json: &str) -> Result<Symbol> {
        let json = c_string(json)?;
        let mut handle = ptr::null_mut();
        check(unsafe { sys::DeftSymbolCreateFromJSON(json.as_ptr(), &mut handle) })?;
        Ok(Symbol { handle })
    }

    pub fn to_json(&self) -> Result<String> {
        let mut text = ptr::null();
        check(unsafe { sys::DeftSymbolSaveToJSON(self.handle, &mut text) })?;
        Ok(unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned())
    }

    pub fn list_inputs(&self) -> Result<Vec<String>> {
        let (mut count, mut names) = (0, ptr::null());
        check(unsafe { sys::DeftSymbolListArguments(self.handle, &mut count, &mut names) })?;
        Ok(unsafe { strings(count, names) })
    }

    pub fn list_outputs(&self) -> Result<Vec<String>> {
        let (mut count, mut names) = (0, ptr::null());
        check(unsafe { sys::DeftSymbolListOutputs(self.handle, &mut count, &mut names) })?;
        Ok(unsafe { strings(count, names) })
    }

    /// The states the graph updates in place (running statistics, optimizer states).
    pub fn list_auxiliary_states(&self) -> Result<Vec<String>> {
        let (mut count, mut names) = (0, ptr::null());
        check(unsafe { sys::DeftSymbolListAuxiliaryStates(self.handle, &mut count, &mut names) })?;
        Ok(unsafe { strings(count, names) })
    }

    /// The training step of this loss (its output 0): one [`CachedOp::call`]
    /// computes the loss, its gradient with respect to `params` and the
    /// optimizer's update of each parameter, in place. `optimizer` is "sgd",
    /// "sgd_mom", "adam" or "adamw".
    ///
    /// The step's inputs are this symbol's, then "step_hyper" (f64, 7 values:
    /// lr, wd, rescale_grad, clip_gradient (negative: none), momentum or
    /// beta1, beta2, epsilon); its auxiliary states are this symbol's, then
    /// each parameter's optimizer states "<param>_mom", or "<param>_mean" and
    /// "<param>_var", zeros before the first step. Its outputs are this
    /// symbol's, then one empty array. See `DeftSymbolTrainStep` in
    /// deft/symbol.h.
    pub fn train_step(&self, optimizer: &str, params: &[&str]) -> Result<Symbol> {
        let optimizer = c_string(optimizer)?;
        let (_params, param_ptrs) = c_strings(params)?;
        let mut handle = ptr::null_mut();
        check(unsafe {
            sys::DeftSymbolTrainStep(
                self.handle,
                param_ptrs.len() as c_int,
                param_ptrs.as_ptr(),
                optimizer.as_ptr(),
                &mut handle,
            )
        })?;
        Ok(Symbol { handle })
    }
}

/// The recorded graph from `inputs` to `outputs` (name, array), as a symbol
/// whose arguments are the input names in order.
pub fn export(inputs: &[(&str, &NDArray)], outputs: &[(&str, &NDArray)]) -> Result<Symbol> {
    let in_h: Vec<_> = inputs.iter().map(|p| p.1.handle).collect();
    let out_h: Vec<_> = outputs.iter().map(|p| p.1.handle).collect();
    let (_in_names, in_ptrs) = c_strings(&inputs.iter().map(|p| p.0).collect::<Vec<_>>())?;
    let (_out_names, out_ptrs) = c_strings(&outputs.iter().map(|p| p.0).collect::<Vec<_>>())?;
    let mut handle = ptr::null_mut();
    check(unsafe {
        sys::DeftNDArrayGetDeferredComputeSymbol(
            in_h.as_ptr(),
            out_h.as_ptr(),
            in_ptrs.as_ptr(),
            out_ptrs.as_ptr(),
            in_h.len() as c_int,
            out_h.len() as c_int,
            &mut handle,
        )
    })?;
    Ok(Symbol { handle })
}

/// A symbol compiled to a memory-planned executor.
pub struct CachedOp {
    handle: sys::DeftCachedOpHandle,
    num_outputs: usize,
}

// SAFETY: the executor may move between threads; runs are serialised inside.
unsafe impl Send for CachedOp {}

impl Drop for CachedOp {
    fn drop(&mut self) {
        unsafe { sys::DeftCachedOpFree(self.handle) };
    }
}

/// Options of [`CachedOp::with_flags`], combined with `|`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CachedOpFlags(i32);

impl CachedOpFlags {
    /// One buffer per entry (for comparison and debugging).
    pub const NO_MEMORY_PLAN: CachedOpFlags = CachedOpFlags(sys::DEFT_CACHED_OP_NO_MEMORY_PLAN);
    /// Forward and backward in one run: inputs are the arguments, a head
    /// gradient for each output whose gradient reads one, then the auxiliary
    /// states; outputs are the symbol's, then each argument's gradient.
    pub const BACKWARD: CachedOpFlags = CachedOpFlags(sys::DEFT_CACHED_OP_BACKWARD);
    /// Apply the "Fuse" pass before planning.
    pub const FUSE: CachedOpFlags = CachedOpFlags(sys::DEFT_CACHED_OP_FUSE);
}

impl std::ops::BitOr for CachedOpFlags {
    type Output = CachedOpFlags;
    fn bitor(self, other: CachedOpFlags) -> CachedOpFlags {
        CachedOpFlags(self.0 | other.0)
    }
}

impl CachedOp {
    pub fn new(symbol: &Symbol) -> Result<CachedOp> {
        CachedOp::with_flags(symbol, CachedOpFlags::default())
    }

    pub fn with_flags(symbol: &Symbol, flags: CachedOpFlags) -> Result<CachedOp> {
        let mut handle = ptr::null_mut();
        check(unsafe { sys::DeftCachedOpCreate(symbol.handle, flags.0, &mut handle) })?;
        // Owned from here: freed on an early return below.
        let mut op = CachedOp {
            handle,
            num_outputs: 0,
        };
        // Room for every output: with BACKWARD, a gradient per argument too.
        op.num_outputs = symbol.list_outputs()?.len();
        if flags.0 & sys::DEFT_CACHED_OP_BACKWARD != 0 {
            op.num_outputs += symbol.list_inputs()?.len();
        }
        Ok(op)
    }

    /// Run the graph on its arguments, in `list_inputs()` order.
    pub fn call(&self, inputs: &[&NDArray]) -> Result<Vec<NDArray>> {
        let handles: Vec<_> = inputs.iter().map(|a| a.handle).collect();
        let mut outputs = vec![ptr::null_mut(); self.num_outputs];
        let mut count = outputs.len() as c_int;
        check(unsafe {
            sys::DeftCachedOpInvoke(
                self.handle,
                handles.len() as c_int,
                handles.as_ptr(),
                &mut count,
                outputs.as_mut_ptr(),
            )
        })?;
        Ok(outputs[..count as usize]
            .iter()
            .map(|&h| NDArray::from_handle(h))
            .collect())
    }
}

/// Block until every pending operation is done.
pub fn wait_all() -> Result<()> {
    check(unsafe { sys::DeftWaitAll() })
}

/// NDArray handles alive in the process.
pub fn live_arrays() -> Result<i64> {
    let mut n = 0;
    check(unsafe { sys::DeftGetLiveNDArrayCount(&mut n) })?;
    Ok(n)
}

/// GPUs deft can use: 0 without CUDA, a driver or a GPU.
pub fn gpu_count() -> Result<i32> {
    let mut n = 0;
    check(unsafe { sys::DeftGetGPUCount(&mut n) })?;
    Ok(n)
}

/// Bytes of CPU array storage in use.
pub fn live_bytes() -> Result<i64> {
    let mut n = 0;
    check(unsafe { sys::DeftGetMemoryStat(sys::DEFT_CPU, 0, sys::DEFT_MEM_LIVE_BYTES, &mut n) })?;
    Ok(n)
}

/// The most bytes of CPU array storage in use at once since the process
/// started (DEFT_MEM_PEAK_BYTES).
pub fn peak_bytes() -> Result<i64> {
    let mut n = 0;
    check(unsafe { sys::DeftGetMemoryStat(sys::DEFT_CPU, 0, sys::DEFT_MEM_PEAK_BYTES, &mut n) })?;
    Ok(n)
}

/// A custom operator written in Rust: shape inference, forward and
/// (optionally) backward. Callbacks run on deft's callback threads; the
/// arrays they get are lent for the call.
pub trait CustomOp: Send + Sync + 'static {
    /// The output's shape and dtype (a DEFT_* code) from the inputs'.
    fn infer_shape(&self, in_shapes: &[Vec<i64>], in_dtypes: &[i32]) -> Result<(Vec<i64>, i32)>;
    /// Fill `output` from `inputs` (write it with an operator's `out`, e.g. `_copyto`).
    fn forward(&self, inputs: &[&NDArray], output: &NDArray, is_train: bool) -> Result<()>;
    /// Fill `in_grads` from the output's gradient; only called when `has_backward`.
    fn backward(
        &self,
        out_grad: &NDArray,
        inputs: &[&NDArray],
        output: &NDArray,
        in_grads: &[&NDArray],
    ) -> Result<()> {
        let _ = (out_grad, inputs, output, in_grads);
        Err(Error {
            kind: ErrorKind::NotImplemented,
            message: "no backward".into(),
        })
    }
    /// Whether backward is defined (autograd refuses the operator otherwise).
    fn has_backward(&self) -> bool {
        false
    }
}

/// Lent arrays: NDArrays that never free the handle deft gives a callback.
fn lend(handles: &[sys::DeftNDArrayHandle]) -> Vec<std::mem::ManuallyDrop<NDArray>> {
    handles
        .iter()
        .map(|&h| std::mem::ManuallyDrop::new(NDArray::from_handle(h)))
        .collect()
}

/// A C array as a slice; C may pass NULL for an empty one, which
/// `slice::from_raw_parts` does not allow.
unsafe fn c_slice<'a, T>(data: *const T, len: usize) -> &'a [T] {
    if len == 0 || data.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(data, len)
    }
}

/// Report a callback's failure (or panic) to deft; returns the C status.
fn callback_status(result: std::thread::Result<Result<()>>) -> c_int {
    let message = match result {
        Ok(Ok(())) => return 0,
        Ok(Err(e)) => e.message,
        Err(panic) => format!("the Rust callback panicked: {}", panic_message(&*panic)),
    };
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    unsafe { sys::DeftCustomOpSetError(text.as_ptr()) };
    1
}

/// The text a panic was raised with (`panic!("...")` gives a &str or a String).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "(a panic payload that is not a string)"
    }
}

type BoxedOp = Box<dyn CustomOp>;

unsafe extern "C" fn infer_trampoline(
    user: *mut std::os::raw::c_void,
    nin: c_int,
    in_ndims: *const c_int,
    in_shapes: *const i64,
    in_dtypes: *const c_int,
    out_ndim: *mut c_int,
    out_shape: *mut i64,
    out_dtype: *mut c_int,
) -> c_int {
    let op = &*(user as *const BoxedOp);
    let n = nin as usize;
    let shapes: Vec<Vec<i64>> = (0..n)
        .map(|i| {
            let dims = c_slice(
                in_shapes.add(i * sys::DEFT_MAX_NDIM),
                *in_ndims.add(i) as usize,
            );
            dims.to_vec()
        })
        .collect();
    let dtypes: Vec<i32> = c_slice(in_dtypes, n).to_vec();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let (shape, dtype) = op.infer_shape(&shapes, &dtypes)?;
        if shape.len() > sys::DEFT_MAX_NDIM {
            return Err(Error {
                kind: ErrorKind::Value,
                message: "too many dimensions".into(),
            });
        }
        *out_ndim = shape.len() as c_int;
        std::ptr::copy_nonoverlapping(shape.as_ptr(), out_shape, shape.len());
        *out_dtype = dtype;
        Ok(())
    }));
    callback_status(result)
}

unsafe extern "C" fn forward_trampoline(
    user: *mut std::os::raw::c_void,
    nin: c_int,
    inputs: *const sys::DeftNDArrayHandle,
    output: sys::DeftNDArrayHandle,
    is_train: c_int,
) -> c_int {
    let op = &*(user as *const BoxedOp);
    let lent = lend(c_slice(inputs, nin as usize));
    let out = lend(&[output]);
    let refs: Vec<&NDArray> = lent.iter().map(|a| &**a).collect();
    callback_status(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || op.forward(&refs, &out[0], is_train != 0),
    )))
}

unsafe extern "C" fn backward_trampoline(
    user: *mut std::os::raw::c_void,
    out_grad: sys::DeftNDArrayHandle,
    nin: c_int,
    inputs: *const sys::DeftNDArrayHandle,
    output: sys::DeftNDArrayHandle,
    in_grads: *const sys::DeftNDArrayHandle,
) -> c_int {
    let op = &*(user as *const BoxedOp);
    let lent = lend(c_slice(inputs, nin as usize));
    let grads = lend(c_slice(in_grads, nin as usize));
    let single = lend(&[out_grad, output]);
    let refs: Vec<&NDArray> = lent.iter().map(|a| &**a).collect();
    let grad_refs: Vec<&NDArray> = grads.iter().map(|a| &**a).collect();
    callback_status(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || op.backward(&single[0], &refs, &single[1], &grad_refs),
    )))
}

unsafe extern "C" fn release_trampoline(user: *mut std::os::raw::c_void) {
    // A panic must not unwind into C (Rust would abort): the op's Drop is
    // the user's code, so catch it; C has no status to report it with.
    let op = Box::from_raw(user as *mut BoxedOp);
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(op)));
}

/// Register a custom operator called `name` with `num_inputs` inputs and one
/// output; it is then an operator like any other ([`invoke`], export, autograd).
pub fn register_custom_op(name: &str, num_inputs: usize, op: impl CustomOp) -> Result<()> {
    let name = c_string(name)?;
    let has_backward = op.has_backward();
    // Operators live as long as the process: the box is never freed.
    let user = Box::into_raw(Box::new(Box::new(op) as BoxedOp));
    let callbacks = sys::DeftCustomOpCallbacks {
        num_inputs: num_inputs as c_int,
        infer_shape: Some(infer_trampoline),
        forward: Some(forward_trampoline),
        backward: if has_backward {
            Some(backward_trampoline)
        } else {
            None
        },
        user: user.cast(),
        release: Some(release_trampoline), // after a failed registration
    };
    check(unsafe { sys::DeftCustomOpRegister(name.as_ptr(), &callbacks) })
}
