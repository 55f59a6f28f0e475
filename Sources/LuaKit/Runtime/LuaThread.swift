import Foundation
internal import LuaStoreConcurrency
import Synchronization


/// A serial thread with an explicit 8 MiB stack, the home of one or more `LuaVM`s.
///
/// Lua's C recursion (nested calls, metamethods, the parser) needs a deep native stack, and a VM must be used
/// from one thread at a time; a `LuaThread` provides both. Jobs run one at a time, in the order submitted.
/// Out of jobs, the thread watches for the next one for `LuaThread.spinWindow` (yielding the processor to any
/// other thread that wants it) before it sleeps: a job submitted meanwhile — the next action of an interactive
/// burst, dispatched as the last one's props arrive — starts at once instead of after the operating system
/// wakes the thread (tens of microseconds usually, milliseconds now and then on a busy machine).
///
/// ```swift
/// let thread = LuaThread(name: "app")
/// let sum = try thread.sync {
///     let vm = try LuaVM()
///     return try vm.run("return 1 + 2", chunkName: "sum.lua")
/// }
/// ```
public final class LuaThread: Sendable {
    /// The stack size every `LuaThread` gets unless told otherwise: 8 MiB.
    public static let defaultStackSize = 8 << 20

    /// How long a thread out of jobs watches for the next before it sleeps: 50 µs.
    public static let spinWindow = Duration.microseconds(50)

    private let queue: JobQueue
    private let threadID: pthread_t

    /// Starts a thread named `name` with `stackSize` bytes of stack.
    public init(name: String = "LuaKit", stackSize: Int = LuaThread.defaultStackSize) {
        let queue = JobQueue(name: name, stackSize: stackSize)
        self.queue = queue
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, stackSize)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(queue).toOpaque()
        let status = pthread_create(&thread, &attributes, { context in
            let queue = Unmanaged<JobQueue>.fromOpaque(context!).takeRetainedValue()
            pthread_setspecific(stackSizeKey, UnsafeRawPointer(bitPattern: queue.stackSize))
            Thread.current.name = queue.name
            queue.runUntilStopped()
            return nil
        }, context)
        precondition(status == 0, "LuaThread: pthread_create failed with \(status)")
        pthread_detach(thread)
        threadID = thread
    }

    deinit {
        queue.stop()
    }

    /// The stack size of the calling thread if it is a `LuaThread`, 0 otherwise.
    public static var currentStackSize: Int {
        Int(bitPattern: pthread_getspecific(stackSizeKey))
    }

    /// Whether the caller is running on this thread.
    public var isCurrent: Bool { pthread_equal(pthread_self(), threadID) != 0 }

    /// Runs `job` on this thread after the jobs already submitted, without waiting for it.
    public func async(_ job: @escaping @Sendable () -> Void) {
        queue.submit(job)
    }

    /// Runs `body` on this thread and waits for its result. Called on this thread, it runs `body` in place.
    public func sync<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        if isCurrent { return try body() }
        var result: Result<T, E>?
        let done = DispatchSemaphore(value: 0)
        withoutActuallyEscaping(body) { escapable in
            let slot = SyncSlot<T, E>(body: escapable)
            queue.submit {
                let result = Result(catching: slot.body!)
                slot.body = nil // the body must be gone before the caller resumes
                slot.result = result
                done.signal()
            }
            done.wait()
            result = slot.result
        }
        return try result!.get()
    }

    /// Runs `body` on this thread and resumes the caller with its result. What `sync` is for async code: the
    /// caller's thread is given back while `body` runs, so a long job (loading an app, building its state)
    /// does not hold one of the few threads every task of the process shares. Called on this thread, it runs
    /// `body` in place.
    public func perform<T, E: Error>(_ body: () throws(E) -> T) async throws(E) -> T {
        if isCurrent { return try body() }
        let outcome: Result<T, E> = await withoutActuallyEscaping(body) { escapable async -> Result<T, E> in
            let slot = SyncSlot<T, E>(body: escapable)
            await withCheckedContinuation { (resumed: CheckedContinuation<Void, Never>) in
                queue.submit {
                    let result = Result(catching: slot.body!)
                    slot.body = nil // the body must be gone before the caller resumes
                    // (Under the lock: what the body wrote is then seen to happen before the caller goes on, by
                    // the thread sanitizer too, which cannot see the ordering a continuation's resumption gives.)
                    slot.handOver.withLock { _ in slot.result = result }
                    resumed.resume()
                }
            }
            return slot.handOver.withLock { _ in slot.result! }
        }
        return try outcome.get()
    }
}

/// What `sync` and `perform` hand to the thread: the caller's body, and where its result goes.
private final class SyncSlot<T, E: Error> {
    var body: (() throws(E) -> T)?
    var result: Result<T, E>?
    /// Taken to hand the result over in `perform` (a pthread mutex, which the thread sanitizer understands).
    let handOver = Protected(())

    init(body: @escaping () throws(E) -> T) { self.body = body }
}

// The submitting thread blocks in `sync` (its task waits in `perform`) until the job has run, so the slot is never
// used concurrently.
extension SyncSlot: @unchecked Sendable {}

/// Thread-specific slot holding a `LuaThread`'s stack size, on its own thread.
private let stackSizeKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}()

/// The FIFO of jobs a `LuaThread` runs.
private final class JobQueue: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var stopped = false
        /// The thread waits on `wakeup`, or is about to: the next submission (or `stop`) signals it.
        var sleeping = false

        /// Whether the thread sleeps (and must be signalled); from now on it does not.
        mutating func wake() -> Bool {
            defer { sleeping = false }
            return sleeping
        }
    }

    let name: String
    let stackSize: Int
    private let state = Protected(State())
    /// The jobs run, swapped out of `state` when the thread has run them all and released here, outside the lock
    /// (`next`). Only the queue's own thread touches it.
    private nonisolated(unsafe) var spent: [@Sendable () -> Void] = []
    private let wakeup = DispatchSemaphore(value: 0)
    /// Jobs submitted so far: what the thread, out of jobs, watches (see `LuaThread.spinWindow`).
    private let submitted = Atomic<Int>(0)

    init(name: String, stackSize: Int) {
        self.name = name
        self.stackSize = stackSize
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        let asleep = state.withLock { state in
            state.jobs.append(job)
            return state.wake()
        }
        submitted.add(1, ordering: .relaxed)
        if asleep { wakeup.signal() }
    }

    func stop() {
        let asleep = state.withLock { state in
            state.stopped = true
            return state.wake()
        }
        if asleep { wakeup.signal() }
    }

    func runUntilStopped() {
        while true {
            while let job = next() { job() }
            if anotherJobSubmitted() { continue }
            let sleep = state.withLock { state -> Bool? in
                guard state.head == state.jobs.count else { return false } // one came as the watch ended
                if state.stopped { return nil }
                state.sleeping = true
                return true
            }
            guard let sleep else { return }
            if sleep { wakeup.wait() }
        }
    }

    /// Whether a job is submitted within `LuaThread.spinWindow`. (Only a shortcut: a job this misses is found
    /// before the thread sleeps, or signals it awake.)
    private func anotherJobSubmitted() -> Bool {
        let seen = submitted.load(ordering: .relaxed)
        let clock = ContinuousClock()
        let deadline = clock.now + LuaThread.spinWindow
        repeat {
            if submitted.load(ordering: .relaxed) != seen { return true }
            sched_yield()
        } while clock.now < deadline
        return false
    }

    /// The next job, or nil when every one submitted ran. The jobs run are released outside the lock: the last
    /// reference to what owns this thread may be among them, and its deinit stops the queue, which takes the lock.
    private func next() -> (@Sendable () -> Void)? {
        let job = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.head < state.jobs.count else {
                swap(&state.jobs, &spent) // (`spent` was emptied the last time: the queue keeps its room)
                state.head = 0
                return nil
            }
            defer { state.head += 1 }
            return state.jobs[state.head]
        }
        if job == nil { spent.removeAll(keepingCapacity: true) }
        return job
    }
}

/// A `LuaThread` is a task executor: `withTaskExecutorPreference(thread) { … }` runs async code on it, in the
/// calling task (task-local values, cancellation and priority come along).
extension LuaThread: TaskExecutor {
    /// Runs `job` on this thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.submit { job.runSynchronously(on: executor) }
    }
}

/// A few `LuaThread`s that many VMs share, so that a host with thousands of VMs (a store per document, per
/// session, per match) does not start thousands of OS threads. Each VM is created on, and stays pinned to, the
/// thread `thread()` hands out (in turn); the VMs of one thread take turns, each job whole.
///
/// ```swift
/// let pool = LuaThreadPool(threads: 4)
/// let vms = try (0..<10_000).map { _ in
///     let thread = pool.thread()
///     return (thread, try thread.sync { try LuaVM() })
/// }
/// ```
public final class LuaThreadPool: Sendable {
    /// The pool's threads.
    public let threads: [LuaThread]
    private let turn = Protected(0)

    /// A pool of `threads` threads (at least one), named `name-1`, `name-2`, …
    public init(threads count: Int = ProcessInfo.processInfo.activeProcessorCount, name: String = "LuaKit.pool",
                stackSize: Int = LuaThread.defaultStackSize) {
        threads = (1...max(1, count)).map { LuaThread(name: "\(name)-\($0)", stackSize: stackSize) }
    }

    /// The thread for the next VM: each in turn.
    public func thread() -> LuaThread {
        threads[turn.withLock { turn in
            defer { turn = (turn + 1) % threads.count }
            return turn
        }]
    }
}
