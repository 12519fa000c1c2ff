import Foundation

/// Invariant checks of the fuzz targets: a violation aborts the process, which libFuzzer
/// records as a crash (and saves the input); the replay tool names the corpus file.
enum FuzzCheck {
    /// The corpus file being replayed (replay mode only; for the message).
    nonisolated(unsafe) static var currentInput = ""  // single-threaded: set and read on the main thread only

    static func require(
        _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID,
        line: UInt = #line
    ) {
        guard !condition() else { return }
        let input = currentInput.isEmpty ? "" : " (input \(currentInput))"
        FileHandle.standardError.write(Data("FUZZ INVARIANT VIOLATED at \(file):\(line)\(input): \(message())\n".utf8))
        abort()
    }
}
