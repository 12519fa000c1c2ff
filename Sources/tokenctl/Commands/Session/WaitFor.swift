import FoundationEssentials
import Dispatch
import TokenStore

/// Runs `body` on the concurrency pool and blocks the calling (main) thread until it ends.
/// The main thread is not part of the cooperative pool, so waiting here cannot starve it.
/// It must block: tokenctl's commands are synchronous functions of its main thread.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.set(.success(try await body())) } catch { box.set(.failure(error)) }
        done.signal()
    }
    done.wait()
    return try box.get()
}

private final class ResultBox<T: Sendable>: Sendable {  // written once before the semaphore is signalled
    private let result = Locked<Result<T, any Error>?>(nil)

    func set(_ value: Result<T, any Error>) { result.withLock { $0 = value } }

    func get() throws -> T {
        guard let result = result.withLock({ $0 }) else { fatalError("waitFor: no result after the task ended") }
        return try result.get()
    }
}
