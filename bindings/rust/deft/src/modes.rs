//! Autograd's per-thread switches as scoped guards: recording off, in
//! prediction mode (`no_grad`), and the training flag (`train_mode`, `predict_mode`). Each
//! guard puts back what it found when dropped; the switches are per thread,
//! so the guards cannot be sent to another.
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::ptr;

use crate::{check, Result};
use deft_sys as sys;

/// While alive, one or two autograd switches of this thread hold a value.
#[must_use = "the mode lasts as long as the guard"]
pub struct AutogradMode {
    restore: Vec<(Setter, c_int)>, // put back last first
    _not_send: PhantomData<*const ()>,
}

type Setter = unsafe fn(c_int, *mut c_int) -> c_int;

impl AutogradMode {
    fn enter(switches: &[(Setter, bool)]) -> Result<AutogradMode> {
        let mut guard = AutogradMode {
            restore: Vec::with_capacity(switches.len()),
            _not_send: PhantomData,
        };
        for &(set, on) in switches {
            let mut previous = 0;
            check(unsafe { set(on as c_int, &mut previous) })?; // the guard restores the rest
            guard.restore.push((set, previous));
        }
        Ok(guard)
    }
}

impl Drop for AutogradMode {
    fn drop(&mut self) {
        for &(set, previous) in self.restore.iter().rev() {
            unsafe { set(previous, ptr::null_mut()) };
        }
    }
}

/// Calls on this thread are not recorded for autograd, and operators behave
/// as in inference, while the guard lives: Python's `deft.autograd.pause()`
/// and MXNet's `autograd.pause()` (Go's `WithoutRecording`, Java's
/// `Autograd.pause()`).
pub fn no_grad() -> Result<AutogradMode> {
    AutogradMode::enter(&[
        (sys::DeftAutogradSetIsRecording, false),
        (sys::DeftAutogradSetIsTraining, false),
    ])
}

/// Operators behave as in training (dropout drops, batch norm uses the batch).
pub fn train_mode() -> Result<AutogradMode> {
    AutogradMode::enter(&[(sys::DeftAutogradSetIsTraining, true)])
}

/// Operators behave as in inference.
pub fn predict_mode() -> Result<AutogradMode> {
    AutogradMode::enter(&[(sys::DeftAutogradSetIsTraining, false)])
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
