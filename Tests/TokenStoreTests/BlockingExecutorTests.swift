import Dispatch
import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

/// The package's one bounded executor for blocking work (`BlockingExecutor`): its bound, that
/// a caller waiting on it holds no cooperative thread, typed errors, and cancellation.
@Suite(.cooperativePool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct BlockingExecutorTests {
    /// Counts the bodies running at once and the most seen.
    final class Occupancy: Sendable {
        private let counts = Locked((now: 0, most: 0, ran: 0))
        func enter() { counts.mutate { $0.now += 1; $0.most = max($0.most, $0.now) } }
        func leave() { counts.mutate { $0.now -= 1; $0.ran += 1 } }
        var most: Int { counts.value.most }
        var ran: Int { counts.value.ran }
    }

    struct Marker: Error, Equatable { let value: Int }

    @Test func neverRunsMoreThanItsThreadsAtOnce() async throws {
        let executor = BlockingExecutor(threads: 2, name: "test-bound")
        let occupancy = Occupancy()
        // N + 1 = 3 blocking jobs of 200 ms each: two run together, the third after one of them.
        let clock = ContinuousClock()
        let started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<(executor.threadCount + 1) {
                group.addTask {
                    await executor.run { () throws(Never) in
                        occupancy.enter()
                        usleep(200_000)
                        occupancy.leave()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(occupancy.ran == executor.threadCount + 1)
        #expect(occupancy.most == executor.threadCount, "at most (and, here, exactly) N bodies at once")
        #expect(clock.now - started >= .milliseconds(400), "the N+1st job waited for a thread")
        #expect(BlockingExecutor.shared.threadCount == BlockingExecutor.sharedThreadCount)
        #expect((2...4).contains(BlockingExecutor.sharedThreadCount))
    }

    /// A caller suspended on a busy executor holds no cooperative thread: with every executor
    /// thread blocked and more tasks waiting on it than the machine has cores (the size of the
    /// cooperative pool), other async work still runs — before the executor is released.
    @Test func waitingCallersHoldNoCooperativeThread() async throws {
        let executor = BlockingExecutor(threads: 2, name: "test-busy")
        let gate = DispatchSemaphore(value: 0)
        let released = Locked(false)
        // Safety valve on a Dispatch thread (not the cooperative pool): if the pool were starved,
        // the probe below could not run until this opens the gate, and the check after it fails.
        DispatchQueue.global().asyncAfter(deadline: .now() + 30) {
            released.mutate { $0 = true }
            for _ in 0..<executor.threadCount { gate.signal() }
        }
        let waiters = ProcessInfo.processInfo.activeProcessorCount * 4 + 4
        let done = Locked(0)
        let entered = Locked(0)
        let blockers = (0..<executor.threadCount).map { _ in
            Task { await executor.run { () throws(Never) in entered.mutate { $0 += 1 }; gate.wait() } }
        }
        // Every executor thread blocked before a waiter queues: a Task starts when the pool runs
        // it, so a waiter made right after could otherwise reach a thread first (12 did, once).
        let blockedBy = ContinuousClock.now + .seconds(20)
        while entered.value < executor.threadCount, ContinuousClock.now < blockedBy { try await Task.sleep(for: .milliseconds(5)) }
        try #require(entered.value == executor.threadCount, "the blockers did not all start")
        let waiting = (0..<waiters).map { index in
            Task {
                let value = await executor.run { () throws(Never) in index }
                done.mutate { $0 += 1 }
                return value
            }
        }
        try await Task.sleep(for: .milliseconds(200))  // the waiters have queued
        // The probe: a task group of plain async work, which needs cooperative threads.
        let probe = await withTaskGroup(of: Int.self) { group in
            for value in 0..<waiters { group.addTask { await Task.yield(); return value } }
            return await group.reduce(0, +)
        }
        let probedWhileBusy = !released.value
        #expect(probe == (0..<waiters).reduce(0, +))
        #expect(probedWhileBusy, "async work ran while \(waiters) tasks waited on the busy executor")
        #expect(done.value == 0, "no waiter ran while every executor thread was blocked")
        for _ in 0..<executor.threadCount { gate.signal() }
        for task in blockers { await task.value }
        var values: [Int] = []
        for task in waiting { values.append(await task.value) }
        #expect(values == Array(0..<waiters), "every waiter completed, with its own result")
    }

    @Test func anErrorThrownInTheBodyReachesTheCallerTyped() async {
        let executor = BlockingExecutor(threads: 1, name: "test-error")
        do {
            _ = try await executor.run { () throws(Marker) -> Int in throw Marker(value: 7) }
            Issue.record("the body's error was not thrown")
        } catch {
            // `error` is a `Marker` here (typed throws): no cast.
            #expect(error == Marker(value: 7))
        }
        let value = await executor.run { () throws(Never) in 41 + 1 }
        #expect(value == 42, "the executor runs on after a body threw")
    }

    @Test func aCancelledCallerIsDroppedOnlyBeforeItsBodyStartsAndOnlyIfItAsks() async throws {
        let executor = BlockingExecutor(threads: 1, name: "test-cancel")
        let gate = DispatchSemaphore(value: 0)
        let ran = Locked<[String]>([])
        let blocker = Task { await executor.run { () throws(Never) in gate.wait(); ran.mutate { $0.append("blocker") } } }
        try await Task.sleep(for: .milliseconds(100))
        let droppable = Task {
            try await executor.run(droppingIfCancelled: { Marker(value: -1) }) { () throws(Marker) in
                ran.mutate { $0.append("droppable") }
            }
        }
        let kept = Task { await executor.run { () throws(Never) in ran.mutate { $0.append("kept") } } }
        try await Task.sleep(for: .milliseconds(100))
        droppable.cancel()
        kept.cancel()
        // The dropped caller resumes at once, while the executor's only thread is still blocked.
        let dropped = await droppable.result
        #expect(throws: Marker(value: -1)) { try dropped.get() }
        #expect(ran.value.isEmpty)
        gate.signal()
        await blocker.value
        await kept.value
        #expect(ran.value == ["blocker", "kept"], "a caller that did not ask to be dropped still runs")
    }
}
