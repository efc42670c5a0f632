//! A counting global allocator for tests that check what code allocates.
//!
//! [`Counting`] is the system allocator, counting per thread how many
//! allocations are made and how many bytes are live. Counting per thread
//! keeps the test harness's other threads (other tests, their runtimes) out
//! of the figures: what a test measures is what ran on its own thread.
//!
//! A test binary installs it once, itself (the attribute cannot come from a
//! library):
//!
//! ```
//! use memgroup_testkit::alloc::{Counting, allocations_during};
//!
//! #[global_allocator]
//! static ALLOCATOR: Counting = Counting;
//!
//! # fn main() {
//! assert_eq!(allocations_during(|| 1 + 1), 0);
//! assert_eq!(allocations_during(|| drop(Box::new(1u64))), 1);
//! # }
//! ```
//!
//! Without the attribute nothing is counted and every figure stays 0, so a
//! test that asserts "nothing allocated" should also assert that a known
//! allocation is seen (as above).

// The one unsafe item of the crate: `GlobalAlloc` is an unsafe trait.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // Const-initialised and without a destructor: the allocator can touch
    // them without allocating, and while the thread is being torn down.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// The system allocator, counting per thread: allocations (`alloc`,
/// `alloc_zeroed` and `realloc` each count one) and live bytes with their
/// high-water mark. Install it with `#[global_allocator]` in the test
/// binary; read it with [`allocations`], [`allocations_during`] and
/// [`Peak`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

fn counted(bytes: isize) {
    // `try_with`: a thread being torn down has no counters left.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    moved(bytes);
}

fn moved(bytes: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

/// `Layout` sizes never exceed `isize::MAX`.
fn signed(size: usize) -> isize {
    size as isize
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged and returns what it returned; the counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            counted(signed(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            counted(signed(layout.size()));
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` and `layout` come from this allocator, that is from `System`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            counted(signed(new_size) - signed(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, that is from `System`.
        unsafe { System.dealloc(ptr, layout) };
        moved(-signed(layout.size()));
    }
}

/// Allocations this thread has made so far (0 unless [`Counting`] is the
/// global allocator).
pub fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// How many allocations `f` made on this thread.
pub fn allocations_during<R>(f: impl FnOnce() -> R) -> usize {
    let before = allocations();
    let result = f();
    let made = allocations() - before;
    // Dropped after the count: freeing what `f` returned is not `f`'s work.
    drop(result);
    made
}

/// The most this thread held above what it held when the `Peak` began.
#[derive(Debug)]
pub struct Peak {
    start: isize,
}

impl Peak {
    /// Starts measuring on this thread (one `Peak` at a time per thread:
    /// starting one resets the high-water mark).
    pub fn start() -> Peak {
        let start = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(start));
        Peak { start }
    }

    /// The high-water mark since the start, in bytes.
    pub fn bytes(&self) -> usize {
        usize::try_from(PEAK.with(Cell::get) - self.start).unwrap_or(0)
    }
}
