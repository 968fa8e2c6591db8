//! Autograd's per-thread switches as scoped guards: recording off
//! (`no_grad`), and the training flag (`train_mode`, `predict_mode`). Each
//! guard puts back what it found when dropped; the switches are per thread,
//! so the guards cannot be sent to another.
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::ptr;

use crate::{check, Result};
use deft_sys as sys;

/// While alive, one autograd switch of this thread holds a value.
#[must_use = "the mode lasts as long as the guard"]
pub struct AutogradMode {
    set: unsafe fn(c_int, *mut c_int) -> c_int,
    previous: c_int,
    _not_send: PhantomData<*const ()>,
}

impl AutogradMode {
    fn enter(set: unsafe fn(c_int, *mut c_int) -> c_int, on: bool) -> Result<AutogradMode> {
        let mut previous = 0;
        check(unsafe { set(on as c_int, &mut previous) })?;
        Ok(AutogradMode {
            set,
            previous,
            _not_send: PhantomData,
        })
    }
}

impl Drop for AutogradMode {
    fn drop(&mut self) {
        unsafe { (self.set)(self.previous, ptr::null_mut()) };
    }
}

/// Calls on this thread are not recorded for autograd while the guard lives.
pub fn no_grad() -> Result<AutogradMode> {
    AutogradMode::enter(sys::DeftAutogradSetIsRecording, false)
}

/// Operators behave as in training (dropout drops, batch norm uses the batch).
pub fn train_mode() -> Result<AutogradMode> {
    AutogradMode::enter(sys::DeftAutogradSetIsTraining, true)
}

/// Operators behave as in inference.
pub fn predict_mode() -> Result<AutogradMode> {
    AutogradMode::enter(sys::DeftAutogradSetIsTraining, false)
}

/// Whether this thread records calls for autograd.
pub fn is_recording() -> Result<bool> {
    let mut on = 0;
    check(unsafe { sys::DeftAutogradIsRecording(&mut on) })?;
    Ok(on != 0)
}

/// Whether this thread's operators run in training mode.
pub fn is_training() -> Result<bool> {
    let mut on = 0;
    check(unsafe { sys::DeftAutogradIsTraining(&mut on) })?;
    Ok(on != 0)
}
