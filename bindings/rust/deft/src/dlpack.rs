//! DLPack: an array's memory lent to another library, and arrays over
//! memory another library lends, without copying.
use std::os::raw::c_int;
use std::ptr;

use crate::{check, Element, Error, ErrorKind, NDArray, Result};
use deft_sys as sys;

/// A DLPack tensor this side owns: dropping it calls its deleter (for an
/// exported array, that releases deft's reference to the memory).
pub struct DLPack {
    tensor: *mut sys::DLManagedTensor,
}

// SAFETY: the tensor is owned alone; DLPack deleters may run on any thread.
unsafe impl Send for DLPack {}

impl Drop for DLPack {
    fn drop(&mut self) {
        // SAFETY: the tensor is valid until its deleter runs, here, once.
        unsafe {
            if let Some(deleter) = (*self.tensor).deleter {
                deleter(self.tensor);
            }
        }
    }
}

/// DLPack's (code, bits) for an element type.
fn dl_type(dtype: c_int) -> (u8, u8) {
    match dtype {
        sys::DEFT_FLOAT32 => (2, 32),
        sys::DEFT_FLOAT64 => (2, 64),
        sys::DEFT_INT32 => (0, 32),
        sys::DEFT_INT64 => (0, 64),
        sys::DEFT_INT8 => (0, 8),
        sys::DEFT_UINT8 => (1, 8),
        _ => (255, 0),
    }
}

impl DLPack {
    /// Takes ownership of a tensor from another library.
    ///
    /// # Safety
    /// `tensor` must be a valid DLManagedTensor that nothing else deletes.
    pub unsafe fn from_raw(tensor: *mut sys::DLManagedTensor) -> DLPack {
        DLPack { tensor }
    }

    /// Gives up ownership: the caller (another library) must call the deleter.
    pub fn into_raw(self) -> *mut sys::DLManagedTensor {
        let tensor = self.tensor;
        std::mem::forget(self);
        tensor
    }

    fn tensor(&self) -> &sys::DLTensor {
        unsafe { &(*self.tensor).dl_tensor }
    }

    pub fn shape(&self) -> &[i64] {
        let t = self.tensor();
        if t.ndim <= 0 || t.shape.is_null() {
            return &[]; // a scalar
        }
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }
    }

    pub fn dtype(&self) -> sys::DLDataType {
        self.tensor().dtype
    }

    pub fn device(&self) -> sys::DLDevice {
        self.tensor().device
    }

    /// The memory's address (data + byte_offset).
    pub fn data_ptr(&self) -> *const u8 {
        let t = self.tensor();
        unsafe { (t.data as *const u8).add(t.byte_offset as usize) }
    }

    /// A copy of the values, checked to be compact CPU elements of type `T`.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let t = self.tensor();
        let (code, bits) = dl_type(T::DTYPE);
        let wrong = |what: String| Error {
            kind: ErrorKind::Type,
            message: what,
        };
        if t.dtype.code != code || t.dtype.bits != bits || t.dtype.lanes != 1 {
            return Err(wrong(format!(
                "the tensor's dtype is (code {}, {} bits), not {}",
                t.dtype.code,
                t.dtype.bits,
                std::any::type_name::<T>()
            )));
        }
        if t.device.device_type != sys::DEFT_CPU {
            return Err(wrong(format!(
                "the tensor is on device type {}, not the CPU",
                t.device.device_type
            )));
        }
        if !t.strides.is_null() {
            let mut expect = 1i64;
            for (i, &dim) in self.shape().iter().enumerate().rev() {
                if dim > 1 && unsafe { *t.strides.add(i) } != expect {
                    return Err(wrong("the tensor is not compact row-major".into()));
                }
                expect *= dim;
            }
        }
        let count: i64 = self.shape().iter().product();
        let data = self.data_ptr() as *const T;
        // SAFETY: checked above: count compact elements of T on the CPU,
        // alive while self is; read unaligned in case the producer did not align.
        Ok((0..count as usize)
            .map(|i| unsafe { data.add(i).read_unaligned() })
            .collect())
    }
}

impl NDArray {
    /// Lends the array's memory as a DLPack tensor (after pending writes, and
    /// a lazy array's computation). The tensor holds its own reference, so
    /// this array may be dropped first.
    pub fn to_dlpack(&self) -> Result<DLPack> {
        let mut tensor = ptr::null_mut();
        check(unsafe { sys::DeftNDArrayToDLPack(self.handle, &mut tensor) })?;
        Ok(DLPack { tensor })
    }

    /// An array over a DLPack tensor's memory, without a copy: the array
    /// owns the tensor from then on. On failure the tensor is dropped
    /// (its deleter runs).
    pub fn from_dlpack(tensor: DLPack) -> Result<NDArray> {
        let mut handle = ptr::null_mut();
        check(unsafe { sys::DeftNDArrayFromDLPack(tensor.tensor, &mut handle) })?;
        std::mem::forget(tensor);
        Ok(NDArray::from_handle(handle))
    }
}
