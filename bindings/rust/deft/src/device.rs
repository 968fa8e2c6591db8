//! Devices: where an array lives (the CPU, or one of deft's GPUs).
use std::fmt;
use std::os::raw::c_int;
use std::ptr;

use crate::{check, Element, NDArray, Result};
use deft_sys as sys;

/// A device; `Gpu(i)` is the i-th of [`crate::gpu_count`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    Gpu(i32),
}

impl Device {
    fn raw(self) -> (c_int, c_int) {
        match self {
            Device::Cpu => (sys::DEFT_CPU, 0),
            Device::Gpu(id) => (sys::DEFT_GPU, id),
        }
    }
}

/// As operators' `ctx` parameter takes it: "cpu(0)", "gpu(1)".
impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu(0)"),
            Device::Gpu(id) => write!(f, "gpu({id})"),
        }
    }
}

impl NDArray {
    /// A new array of zeros on `device`; an error naming the device when
    /// there is no such GPU.
    pub fn zeros_on<T: Element>(shape: &[i64], device: Device) -> Result<NDArray> {
        let (dev_type, dev_id) = device.raw();
        let mut handle = ptr::null_mut();
        check(unsafe {
            sys::DeftNDArrayCreate(
                shape.as_ptr(),
                shape.len() as c_int,
                T::DTYPE,
                dev_type,
                dev_id,
                &mut handle,
            )
        })?;
        Ok(NDArray::from_handle(handle))
    }

    /// The device the array lives on.
    pub fn device(&self) -> Result<Device> {
        let (mut dev_type, mut dev_id) = (0, 0);
        check(unsafe { sys::DeftNDArrayGetDevice(self.handle, &mut dev_type, &mut dev_id) })?;
        Ok(if dev_type == sys::DEFT_GPU {
            Device::Gpu(dev_id)
        } else {
            Device::Cpu
        })
    }

    /// A copy of the array on `device`.
    pub fn copy_to(&self, device: Device) -> Result<NDArray> {
        let (dev_type, dev_id) = device.raw();
        let shape = self.shape()?;
        let mut handle = ptr::null_mut();
        check(unsafe {
            sys::DeftNDArrayCreate(
                shape.as_ptr(),
                shape.len() as c_int,
                self.dtype()?,
                dev_type,
                dev_id,
                &mut handle,
            )
        })?;
        let copy = NDArray::from_handle(handle);
        check(unsafe { sys::DeftNDArrayCopyTo(self.handle, copy.handle) })?;
        Ok(copy)
    }
}
