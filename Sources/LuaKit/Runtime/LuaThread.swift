import Foundation
internal import LuaStoreConcurrency


/// A serial thread with an explicit 8 MiB stack, the home of one or more `LuaVM`s.
///
/// Lua's C recursion (nested calls, metamethods, the parser) needs a deep native stack, and a VM must be used
/// from one thread at a time; a `LuaThread` provides both. Jobs run one at a time, in the order submitted.
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
}

/// What `sync` hands to the thread: the caller's body, and where its result goes.
private final class SyncSlot<T, E: Error> {
    var body: (() throws(E) -> T)?
    var result: Result<T, E>?

    init(body: @escaping () throws(E) -> T) { self.body = body }
}

// The submitting thread blocks in `sync` until the job has run, so the slot is never used concurrently.
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
    }

    let name: String
    let stackSize: Int
    private let state = Protected(State())
    private let wakeup = DispatchSemaphore(value: 0)

    init(name: String, stackSize: Int) {
        self.name = name
        self.stackSize = stackSize
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        state.withLock { $0.jobs.append(job) }
        wakeup.signal()
    }

    func stop() {
        state.withLock { $0.stopped = true }
        wakeup.signal()
    }

    func runUntilStopped() {
        while true {
            wakeup.wait()
            while let job = next() { job() }
            if state.withLock({ $0.stopped && $0.head == $0.jobs.count }) { return }
        }
    }

    private func next() -> (@Sendable () -> Void)? {
        state.withLock { state in
            guard state.head < state.jobs.count else {
                state.jobs.removeAll(keepingCapacity: true)
                state.head = 0
                return nil
            }
            defer { state.head += 1 }
            return state.jobs[state.head]
        }
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
