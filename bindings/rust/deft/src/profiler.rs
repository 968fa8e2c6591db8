//! The profiler: options, start and stop, the trace file and statistics, and
//! user domains with tasks, frames, events, counters and markers.
use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use crate::call::{with_c_params, with_c_str};
use crate::{check, Result};
use deft_sys as sys;

/// Set options (`profile_all`, `aggregate_stats`, `filename`, ...: see
/// deft/profiler.h); options not given keep their values.
pub fn set_config(options: &[(&str, &str)]) -> Result<()> {
    with_c_params(options, |n, keys, vals| {
        check(unsafe { sys::DeftProfilerSetConfig(n, keys, vals) })
    })
}

/// Start recording.
pub fn start() -> Result<()> {
    check(unsafe { sys::DeftProfilerSetState(1) })
}

/// Stop recording.
pub fn stop() -> Result<()> {
    check(unsafe { sys::DeftProfilerSetState(0) })
}

/// Pause (true) or resume (false) without stopping.
pub fn pause(paused: bool) -> Result<()> {
    check(unsafe { sys::DeftProfilerPause(paused as c_int) })
}

/// Write the events recorded since the last dump to the trace file;
/// `finished` ends the file.
pub fn dump(finished: bool) -> Result<()> {
    check(unsafe { sys::DeftProfilerDump(finished as c_int) })
}

/// The aggregate statistics as a text table, or JSON when `json`.
pub fn dumps(reset: bool, json: bool) -> Result<String> {
    let format = if json {
        sys::DEFT_PROFILER_JSON
    } else {
        sys::DEFT_PROFILER_TABLE
    };
    let mut text = ptr::null();
    check(unsafe { sys::DeftProfilerDumps(reset as c_int, format, &mut text) })?;
    // Copied at once: the text is valid until the next call on any thread.
    Ok(unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned())
}

/// Drop the recorded events and the statistics.
pub fn reset() -> Result<()> {
    check(unsafe { sys::DeftProfilerReset() })
}

/// A category that user objects appear under.
pub struct Domain {
    handle: sys::DeftProfileDomainHandle,
}

// SAFETY: a domain is an immutable name in C; any thread may use or free it.
unsafe impl Send for Domain {}
unsafe impl Sync for Domain {}

impl Drop for Domain {
    fn drop(&mut self) {
        unsafe { sys::DeftProfileDomainFree(self.handle) };
    }
}

/// What a profiling object records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A span that may start and stop on different threads.
    Task = sys::DEFT_PROFILE_TASK as isize,
    /// A span, shown like a task (one per iteration, say).
    Frame = sys::DEFT_PROFILE_FRAME as isize,
    /// A span on the thread that starts and stops it.
    Event = sys::DEFT_PROFILE_EVENT as isize,
    /// A value over time.
    Counter = sys::DEFT_PROFILE_COUNTER as isize,
}

impl Domain {
    pub fn new(name: &str) -> Result<Domain> {
        let mut handle = ptr::null_mut();
        with_c_str(name, |name| {
            check(unsafe { sys::DeftProfileCreateDomain(name, &mut handle) })
        })?;
        Ok(Domain { handle })
    }

    /// A task, frame, event or counter in this domain.
    pub fn object(&self, kind: Kind, name: &str) -> Result<Object<'_>> {
        let mut handle = ptr::null_mut();
        with_c_str(name, |name| {
            check(unsafe {
                sys::DeftProfileCreateObject(self.handle, kind as c_int, name, &mut handle)
            })
        })?;
        Ok(Object {
            handle,
            _domain: self,
        })
    }

    /// An instant marker; `scope` is "global", "process" or "thread".
    pub fn marker(&self, name: &str, scope: &str) -> Result<()> {
        with_c_str(name, |name| {
            with_c_str(scope, |scope| {
                check(unsafe { sys::DeftProfileSetMarker(self.handle, name, scope) })
            })
        })
    }
}

/// A profiling object; it borrows its domain, which must outlive it.
pub struct Object<'d> {
    handle: sys::DeftProfileObjectHandle,
    _domain: &'d Domain,
}

// SAFETY: a task may start on one thread and stop on another (profiler.h);
// not Sync: two threads driving one object at once is not promised.
unsafe impl Send for Object<'_> {}

impl Drop for Object<'_> {
    fn drop(&mut self) {
        unsafe { sys::DeftProfileObjectFree(self.handle) };
    }
}

impl Object<'_> {
    /// Start a span (task, frame or event).
    pub fn start(&self) -> Result<()> {
        check(unsafe { sys::DeftProfileDurationStart(self.handle) })
    }

    /// Stop a span.
    pub fn stop(&self) -> Result<()> {
        check(unsafe { sys::DeftProfileDurationStop(self.handle) })
    }

    /// Set a counter (or add to it, when `add`).
    pub fn set_counter(&self, value: i64, add: bool) -> Result<()> {
        check(unsafe { sys::DeftProfileSetCounter(self.handle, value, add as c_int) })
    }
}
