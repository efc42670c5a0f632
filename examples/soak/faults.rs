//! The fault thread: on a random schedule a server stalled (SIGSTOP), killed
//! (SIGKILL) and restarted, its stats reset, or a storm (a server of one
//! group stalled while a server of another is killed, both held at once).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memgroup_testkit::Memcached;
use parking_lot::Mutex;

use crate::measure::Rng;
use crate::{GROUPS, PER_GROUP};

/// How the fault thread hurts a server for a while.
#[derive(Debug, Clone, Copy)]
enum Hurt {
    /// SIGSTOP, then SIGCONT.
    Stall,
    /// SIGKILL, then a restart on the same port.
    Kill,
}

/// Faults injected, by kind.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Injected {
    pub(crate) stops: u64,
    pub(crate) kills: u64,
    pub(crate) resets: u64,
    pub(crate) storms: u64,
}

/// `stats reset` on a server, over a raw connection.
fn stats_reset(server: &Memcached) {
    use std::io::{Read, Write};
    if let Ok(mut s) = std::net::TcpStream::connect(server.addr()) {
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        let _ = s.write_all(b"stats reset\r\n");
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
    }
}

/// Starts the fault thread: signals and restarts block, and blocking
/// inside the runtime would make it start extra threads (whose allocator
/// arenas would count as the client's memory growth). It mends what it
/// hurt before it returns; `killed` records when each server was last
/// killed or restarted.
pub(crate) fn start(
    servers: Arc<Vec<Mutex<Memcached>>>,
    stop: Arc<AtomicBool>,
    faulting: Arc<AtomicBool>,
    killed: Arc<Mutex<Vec<Option<Instant>>>>,
) -> JoinHandle<Injected> {
    std::thread::spawn(move || {
        let mut rng = Rng(0xDEAD_BEEF);
        let mut injected = Injected::default();
        while !stop.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(500 + rng.below(1500)));
            if stop.load(Relaxed) {
                break;
            }
            let victim = rng.below(servers.len() as u64) as usize;
            let hold = Duration::from_millis(500 + rng.below(2500));
            // Servers hurt for `hold`, then mended in reverse order.
            let hurt: Vec<(usize, Hurt)> = match rng.below(4) {
                0 => {
                    injected.stops += 1;
                    vec![(victim, Hurt::Stall)]
                }
                1 => {
                    injected.kills += 1;
                    vec![(victim, Hurt::Kill)]
                }
                2 => {
                    injected.resets += 1;
                    stats_reset(&servers[victim].lock());
                    continue;
                }
                _ => {
                    // Two groups hurt at once: one stalled, one killed.
                    injected.storms += 1;
                    let group = victim / PER_GROUP;
                    let other = (group + 1 + rng.below(GROUPS as u64 - 1) as usize) % GROUPS;
                    let dead = other * PER_GROUP + rng.below(PER_GROUP as u64) as usize;
                    vec![(victim, Hurt::Stall), (dead, Hurt::Kill)]
                }
            };
            faulting.store(true, Relaxed);
            for &(i, how) in &hurt {
                match how {
                    Hurt::Stall => servers[i].lock().stop(),
                    Hurt::Kill => {
                        killed.lock()[i] = Some(Instant::now());
                        servers[i].lock().kill();
                    }
                }
            }
            std::thread::sleep(hold);
            for &(i, how) in hurt.iter().rev() {
                match how {
                    Hurt::Stall => servers[i].lock().resume(),
                    Hurt::Kill => {
                        servers[i].lock().restart();
                        killed.lock()[i] = Some(Instant::now());
                    }
                }
            }
            faulting.store(false, Relaxed);
        }
        injected
    })
}
