//! How a forward pass uses the thread pool: its matmuls run on a team of spinning threads.
//!
//! A decode step is ~200 small matmuls, each tens of microseconds. With plain rayon loops the
//! threads keep falling asleep between them, and a thread that waits for the other's half of a
//! loop soon sleeps too (rayon spins a few rounds, then blocks; in the browser, in
//! `Atomics.wait`): every matmul paid a wake-up, so 2 threads decoded barely faster than 1 in
//! wasm. llama.cpp spins its threads for the same reason. So during a pass ([`run_as_team`]) the
//! other workers of the pool spin, taking the pass's tasks as they are posted ([`for_each`]),
//! and the thread that posts them does tasks too and spins until the last one is done. When the
//! pass ends the helpers return to rayon.
//!
//! The board is one 64-bit word — generation, task count, next task — so that claiming a task is a
//! single compare-and-swap that fails if the loop it read about has ended.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Runs `pass` on a worker of the current thread pool as the leader of a team of all its
/// workers: [`for_each`] calls inside `pass` are shared with the team. Without a pool of more
/// than one thread it simply runs `pass`.
pub fn run_as_team<R: Send>(pass: impl FnOnce() -> R + Send) -> R {
    // A pass inside a pass (on a thread that leads or serves a team) uses the team there is.
    if IN_TEAM.get() {
        return pass();
    }
    let team = Team::default();
    // Called from outside the pool (the CLI's main thread, the page's engine Worker), `scope` runs
    // its body on a pool worker, so the pass's loops start in the pool too.
    rayon::scope(|s| {
        for _ in 1..rayon::current_num_threads() {
            let team = &team;
            // A thread that runs this while it leads or serves a team (a thread waiting inside
            // rayon runs other jobs, this one included) must return at once: serving there would
            // wait for itself.
            s.spawn(move |_| {
                if !IN_TEAM.get() {
                    team.serve();
                }
            });
        }
        let _lead = Lead::start(&team);
        pass()
    })
}

/// A pass of fewer multiply-adds than this runs alone ([`run_pass`]). A team's pass starts by
/// waking the pool's threads and ends by waking the caller; after a pause (a keystroke's pass,
/// 125 ms after the last) those threads sleep, and in the browser each wake-up through
/// `Atomics.notify` costs a fraction of a millisecond. On the page, a keystroke's pass (one token)
/// took the Worker 2.1 → 1.0 ms on gptlens-shakespeare (0.8 M multiply-adds a token) and 1.2 →
/// 0.4 ms on the tiny GPT-2 run alone; back to back, with the pool awake, a team already gains
/// from 2 tokens of the former (1.6 M: 0.29 against 0.36 ms).
pub const TEAM_WORTH_MULTIPLY_ADDS: usize = 1 << 22;

/// Runs `pass`, which does about `multiply_adds` multiply-adds, as a team ([`run_as_team`]), or
/// alone on the calling thread when it is too small to repay waking one. Its loops give the same
/// results either way: how a loop is cut into tasks never changes what a task computes.
pub fn run_pass<R: Send>(multiply_adds: usize, pass: impl FnOnce() -> R + Send) -> R {
    if multiply_adds >= TEAM_WORTH_MULTIPLY_ADDS {
        return run_as_team(pass);
    }
    // Restores the flag afterwards, also if the pass panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ALONE.set(self.0);
        }
    }
    let _restore = Restore(ALONE.replace(true));
    pass()
}

/// Runs `task(i)` for every `i < n`, on the team when the calling thread leads one (and is not
/// already inside one of its loops), in order on this thread inside a pass that runs alone, else
/// on rayon's pool. Returns when every task has run.
pub fn for_each(n: usize, task: impl Fn(usize) + Sync) {
    let threads = n.min(rayon::current_num_threads());
    // One item (a decode step's SwiGLU), one thread, or a pass run alone: no one to share with,
    // and handing the item to a helper would only add a round trip between cores.
    if threads <= 1 || ALONE.get() {
        return (0..n).for_each(task);
    }
    let team = LEADING.replace(std::ptr::null());
    if team.is_null() {
        LEADING.set(team);
        use rayon::prelude::*;
        return (0..n).into_par_iter().for_each(&task);
    }
    // Restores the team afterwards, also if a task panics.
    struct Restore(*const Team);
    impl Drop for Restore {
        fn drop(&mut self) {
            LEADING.set(self.0);
        }
    }
    let _restore = Restore(team);
    let runs = Runs::guided(n, threads);
    // SAFETY: `LEADING` is non-null only inside `run_as_team`'s body on the leader's thread, and
    // points at the team that outlives that body.
    unsafe { &*team }.run(runs.count, &|c| runs.items(c).for_each(&task));
}

/// How a loop's items are cut into tasks: runs of consecutive items, each a share of what is left
/// (half of it over the threads), so the runs shrink as the loop goes on — guided scheduling.
///
/// Why not one run per thread: in the page the engine's threads share the cores with the page's
/// own thread, and a thread that loses its core in the middle of a half-loop held the other, which
/// spins at the loop's end, for as long as it was off: a 15 ms busy spell of the page's thread
/// during a 2-thread pass made the pass 8–16 ms slower, and a 1-thread pass no slower. With runs
/// that shrink, the thread that keeps its core takes every run still unclaimed and waits at most
/// for one small run. Claiming a run moves the board's cache line between cores, which is why the
/// runs start large: a loop costs at most 32 claims, whatever its size (a decode matmul of 36
/// tiles on 2 threads: 9).
struct Runs {
    /// `bounds[c]..bounds[c + 1]` are task c's items.
    bounds: [usize; Runs::MAX + 1],
    count: usize,
}

impl Runs {
    /// Most runs one loop is cut into: no run is shorter than `n / MAX` items (but the last).
    const MAX: usize = 32;

    fn guided(n: usize, threads: usize) -> Self {
        let mut runs = Runs { bounds: [0; Runs::MAX + 1], count: 0 };
        let shortest = n.div_ceil(Runs::MAX);
        let mut start = 0;
        while start < n {
            let left = n - start;
            let size = left.div_ceil(2 * threads).max(shortest).min(left);
            start += size;
            runs.count += 1;
            runs.bounds[runs.count] = start;
        }
        runs
    }

    fn items(&self, c: usize) -> std::ops::Range<usize> {
        self.bounds[c]..self.bounds[c + 1]
    }
}

/// `task(i, chunk i of a)` for every `i < n`, where chunk `i` is `a[i·len..(i+1)·len]`; shared
/// like [`for_each`].
///
/// # Panics
/// If `a` is shorter than `n` chunks.
pub fn for_each_chunk<A: Send>(n: usize, (a, len): (&mut [A], usize), task: impl Fn(usize, &mut [A]) + Sync) {
    let a = Chunks::new(a, len, n);
    // SAFETY: `for_each` runs each `i` once, so each chunk is borrowed by one task at a time.
    for_each(n, |i| task(i, unsafe { a.chunk(i) }));
}

/// `task(i, chunk i of a, chunk i of b)` for every `i < n`, as [`for_each_chunk`].
pub fn for_each_chunk_pair<A: Send, B: Send>(
    n: usize,
    (a, a_len): (&mut [A], usize),
    (b, b_len): (&mut [B], usize),
    task: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    let (a, b) = (Chunks::new(a, a_len, n), Chunks::new(b, b_len, n));
    // SAFETY: `for_each` runs each `i` once, so each chunk is borrowed by one task at a time.
    for_each(n, |i| task(i, unsafe { a.chunk(i) }, unsafe { b.chunk(i) }));
}

/// A slice cut into `n` chunks that parallel tasks borrow mutably, one task per chunk.
struct Chunks<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: tasks on other threads get disjoint `&mut [T]` chunks, which is sound for `T: Send`.
unsafe impl<T: Send> Sync for Chunks<'_, T> {}

impl<'a, T> Chunks<'a, T> {
    fn new(slice: &'a mut [T], len: usize, n: usize) -> Self {
        assert!(
            len.checked_mul(n).is_some_and(|total| total <= slice.len()),
            "{n} chunks of {len} in a slice of {}",
            slice.len()
        );
        Chunks { ptr: slice.as_mut_ptr(), len, _borrow: std::marker::PhantomData }
    }

    /// Chunk `i`.
    ///
    /// # Safety
    /// `i` must be below the `n` given to `new`, and no other borrow of chunk `i` may be alive.
    #[allow(clippy::mut_from_ref)] // the caller guarantees exclusive use of chunk `i`
    unsafe fn chunk(&self, i: usize) -> &mut [T] {
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(i * self.len), self.len) }
    }
}

/// Most tasks one loop can have: the count and the next index share the board's low 32 bits.
/// A loop is cut into at most [`Runs::MAX`] tasks, whatever its size and the number of threads.
const MAX_TASKS: usize = u16::MAX as usize;
const _: () = assert!(Runs::MAX <= MAX_TASKS);

thread_local! {
    /// The team this thread leads, while it leads one (and is not inside one of its loops).
    static LEADING: Cell<*const Team> = const { Cell::new(std::ptr::null()) };
    /// Whether this thread leads or serves a team.
    static IN_TEAM: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread runs a pass alone ([`run_pass`]).
    static ALONE: Cell<bool> = const { Cell::new(false) };
}

/// Makes the current thread the team's leader until dropped, then sends the helpers home.
struct Lead<'a>(&'a Team);

impl<'a> Lead<'a> {
    fn start(team: &'a Team) -> Self {
        LEADING.set(team);
        IN_TEAM.set(true);
        Lead(team)
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        LEADING.set(std::ptr::null());
        IN_TEAM.set(false);
        self.0.done.store(true, Ordering::Release);
    }
}

/// A value alone on its cache line (128 bytes: some CPUs fetch lines in pairs).
#[derive(Default)]
#[repr(align(128))]
struct CacheLine<T>(T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Waiting without work: spin for a few microseconds (the next loop is usually that close), then
/// also offer the core to other threads at every turn. On a machine with more runnable threads
/// than cores, pure spinning kept a thread that holds a task off the core for whole time slices
/// (SmolLM2 2-thread decode with one core busy elsewhere: 40 tok/s spinning, against 70 with 1
/// thread). In wasm, `yield_now` does nothing; the browser's workers have no such call.
#[derive(Default)]
struct Backoff(u32);

impl Backoff {
    const SPINS: u32 = 1 << 10;

    fn wait(&mut self) {
        if self.0 < Self::SPINS {
            self.0 += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The loop being run: a pointer to the leader's closure, valid while the loop has unfinished
/// tasks (the leader does not return from [`Team::run`] before).
struct Job<'a> {
    task: &'a (dyn Fn(usize) + Sync),
}

#[derive(Default)]
struct Team {
    /// `generation << 32 | count << 16 | next`: the current loop and its next unclaimed task.
    board: CacheLine<AtomicU64>,
    /// The current loop's [`Job`].
    job: AtomicPtr<()>,
    /// Tasks of the current loop claimed but not yet finished, plus those not yet claimed. On a
    /// line of its own: threads finishing tasks must not slow down threads claiming them.
    unfinished: CacheLine<AtomicUsize>,
    /// A task panicked (the leader panics too, instead of waiting forever).
    panicked: AtomicBool,
    /// The pass is over: helpers return.
    done: AtomicBool,
}

impl Team {
    /// Posts a loop of `n` tasks, takes part in it, and waits for the helpers' tasks.
    fn run(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        let job = Job { task };
        self.job.store(&job as *const Job as *mut (), Ordering::Relaxed);
        self.unfinished.store(n, Ordering::Relaxed);
        let generation = (self.board.load(Ordering::Relaxed) >> 32) + 1;
        // Release: a helper that reads this board also sees the job and the count above.
        self.board.store(generation << 32 | (n as u64) << 16, Ordering::Release);
        // Waits for the helpers' tasks when dropped: at the end, and also when one of this thread's
        // own tasks panics, so that `job` never dies while a helper still runs it.
        struct WaitForAll<'a>(&'a Team);
        impl Drop for WaitForAll<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.cancel_unclaimed();
                }
                let mut backoff = Backoff::default();
                while self.0.unfinished.load(Ordering::Acquire) > 0 {
                    backoff.wait();
                }
                // The job's address is about to be reused: leave no dangling pointer behind.
                self.0.job.store(std::ptr::null_mut(), Ordering::Relaxed);
            }
        }
        let wait = WaitForAll(self);
        while self.claim_and_run() {}
        drop(wait);
        assert!(!self.panicked.load(Ordering::Relaxed), "a task of a parallel loop panicked");
    }

    /// After a panic in the leader's task: nobody is to start the loop's remaining tasks.
    fn cancel_unclaimed(&self) {
        let mut board = self.board.load(Ordering::Acquire);
        loop {
            let (count, next) = ((board >> 16) & 0xFFFF, board & 0xFFFF);
            if next >= count {
                return;
            }
            match self.board.compare_exchange_weak(board, board - next + count, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.unfinished.fetch_sub((count - next) as usize, Ordering::Release);
                    return;
                }
                Err(now) => board = now,
            }
        }
    }

    /// A helper's life during a pass: the tasks of the team's loops, spinning in between.
    fn serve(&self) {
        struct Serving;
        impl Drop for Serving {
            fn drop(&mut self) {
                IN_TEAM.set(false);
            }
        }
        IN_TEAM.set(true);
        let _serving = Serving;
        let mut backoff = Backoff::default();
        while !self.done.load(Ordering::Acquire) {
            if self.claim_and_run() {
                backoff = Backoff::default();
            } else {
                backoff.wait();
            }
        }
    }

    /// Claims the next task of the current loop and runs it; false when there is none.
    fn claim_and_run(&self) -> bool {
        let board = self.board.load(Ordering::Acquire);
        let (count, next) = ((board >> 16) & 0xFFFF, board & 0xFFFF);
        if next >= count {
            return false;
        }
        // Fails if another thread took task `next` first, or the loop ended and a new one began
        // (the generation changed): then this thread just looks again.
        if self.board.compare_exchange_weak(board, board + 1, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return true;
        }
        // Counts the task as finished even if it panics, so that the leader never waits forever.
        struct Finished<'a>(&'a Team);
        impl Drop for Finished<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.panicked.store(true, Ordering::Relaxed);
                }
                self.0.unfinished.fetch_sub(1, Ordering::Release);
            }
        }
        let _finished = Finished(self);
        // SAFETY: this thread holds an unfinished task of the loop whose board it claimed, so the
        // leader is still inside `run` for that loop, and `job` points at that loop's `Job` (it was
        // stored before the board this thread read, and is replaced only by a later loop, which
        // cannot start before this task finishes).
        let job = unsafe { &*(self.job.load(Ordering::Acquire) as *const Job) };
        (job.task)(next as usize);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every task of every loop runs exactly once, on a pool of three threads, with loops of many
    /// sizes back to back (as a forward pass posts them).
    #[test]
    fn every_task_runs_once() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let counts: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
        pool.install(|| {
            run_as_team(|| {
                for n in (0..1000).step_by(7).chain([1000]) {
                    for_each(n, |i| {
                        counts[i].fetch_add(1, Ordering::Relaxed);
                    });
                }
            })
        });
        let expected = |i: usize| (0..1000).step_by(7).chain([1000]).filter(|&n| i < n).count();
        for (i, c) in counts.iter().enumerate() {
            assert_eq!(c.load(Ordering::Relaxed), expected(i), "task {i}");
        }
    }

    /// A loop inside a task runs (on rayon), and so does a pass inside a task; the team is still
    /// there for the next loop. Three threads, many times: a helper that waits inside rayon in
    /// its task may pick up another helper's job to serve the team, which must not hang.
    #[test]
    fn nested_loops_and_passes_run() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let total = AtomicUsize::new(0);
        for _ in 0..200 {
            pool.install(|| {
                run_as_team(|| {
                    let count = |_| {
                        total.fetch_add(1, Ordering::Relaxed);
                    };
                    for_each(4, |_| for_each(5, count));
                    for_each(3, |_| run_as_team(|| for_each(2, count)));
                    for_each(3, count);
                })
            });
        }
        assert_eq!(total.load(Ordering::Relaxed), 200 * (20 + 6 + 3));
    }

    /// A pass too small for a team runs every loop on the calling thread, in order, even while a
    /// task waits and an idle worker could take the others; afterwards the flag is put back.
    #[test]
    fn a_small_pass_runs_alone() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (caller, ran) = pool.install(|| {
            let caller = std::thread::current().id();
            let started = AtomicUsize::new(0);
            let ran = std::sync::Mutex::new(Vec::new());
            run_pass(TEAM_WORTH_MULTIPLY_ADDS - 1, || {
                for_each(4, |i| {
                    // Task 0 waits for another to start: shared with the pool, one would.
                    let waiting = std::time::Instant::now();
                    while i == 0 && started.load(Ordering::SeqCst) == 0 && waiting.elapsed().as_millis() < 100 {
                        std::hint::spin_loop();
                    }
                    started.fetch_add(1, Ordering::SeqCst);
                    ran.lock().unwrap().push((std::thread::current().id(), i));
                })
            });
            assert!(!ALONE.get(), "the flag is put back");
            (caller, ran.into_inner().unwrap())
        });
        assert!(ran.iter().all(|&(thread, _)| thread == caller), "{ran:?}");
        assert_eq!(ran.iter().map(|&(_, i)| i).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    /// Runs cover every item once, in order, shrinking, within the most runs a loop may have.
    #[test]
    fn guided_runs_cover_every_item_once() {
        for threads in [2, 3, 8] {
            for n in [2, 3, 7, 36, 100, 1000, 100_000] {
                let runs = Runs::guided(n, threads);
                assert!(runs.count <= Runs::MAX && runs.bounds[0] == 0 && runs.bounds[runs.count] == n);
                let sizes: Vec<usize> = (0..runs.count).map(|c| runs.items(c).len()).collect();
                assert!(sizes.iter().all(|&s| s > 0), "{n} items, {threads} threads: {sizes:?}");
                let shrinking = sizes[..sizes.len() - 1].windows(2).all(|w| w[0] >= w[1]);
                assert!(shrinking, "{n} items, {threads} threads: {sizes:?}");
            }
        }
        let sizes = |runs: Runs| (0..runs.count).map(|c| runs.items(c).len()).collect::<Vec<_>>();
        assert_eq!(sizes(Runs::guided(36, 2)), [9, 7, 5, 4, 3, 2, 2, 2, 2], "a decode matmul of 36 tiles, 2 threads");
    }

    /// Items split over the tasks, whatever the count (checked through the chunks).
    #[test]
    fn chunks_cover_every_item_once() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        for n in [0, 1, 2, 3, 4, 7, 100] {
            let mut items = vec![0u8; n];
            pool.install(|| run_as_team(|| for_each_chunk(n, (&mut items, 1), |_, item| item[0] += 1)));
            assert!(items.iter().all(|&i| i == 1), "{n} items: {items:?}");
        }
    }

    /// A task that panics, on whichever thread, makes the pass panic instead of hanging.
    #[test]
    fn a_panicking_task_panics_the_pass() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for bad in 0..2 {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.install(|| run_as_team(|| for_each(2, |i| assert_ne!(i, bad, "task {i} fails"))));
            }));
            assert!(result.is_err(), "task {bad} panicked, the pass returned");
        }
    }
}
