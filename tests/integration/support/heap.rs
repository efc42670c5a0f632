//! Per-thread heap accounting for the integration binary: the system
//! allocator, counting the bytes each thread has live and the most it has
//! had. A test on a current-thread runtime runs the client (its tasks, its
//! decoding, its buffers) on its own thread, so [`Peak`] measures what the
//! client holds while the other tests' threads run on.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // Const-initialised without a destructor: usable inside the allocator.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// The system allocator, counting per thread.
pub struct Counting;

fn add(bytes: isize) {
    // `try_with`: a thread being torn down has no counters left.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call forwards to `System` unchanged; the counting touches
// only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        add(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// The most this thread held above what it held when the `Peak` began.
pub struct Peak {
    start: isize,
}

impl Peak {
    /// Starts measuring on this thread.
    pub fn start() -> Peak {
        let start = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(start));
        Peak { start }
    }

    /// The high-water mark since the start, in bytes.
    pub fn bytes(&self) -> usize {
        (PEAK.with(Cell::get) - self.start).max(0) as usize
    }
}
