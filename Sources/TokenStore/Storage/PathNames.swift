import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The path arithmetic and the home directory the store needs, without full Foundation
/// (`NSString`'s path helpers and `NSHomeDirectory` live there, next to ICU).
package enum PathNames {
    /// The directory part of `path`, as `NSString.deletingLastPathComponent` gives it:
    /// trailing slashes ignored, `""` for a bare name, `"/"` for an entry of the root.
    package static func directory(of path: String) -> String {
        let trimmed = trimmingTrailingSlashes(path)
        guard trimmed != "/", let slash = trimmed.lastIndex(of: "/") else { return trimmed == "/" ? "/" : "" }
        let head = trimmingTrailingSlashes(String(trimmed[..<slash]))
        return head.isEmpty ? "/" : head
    }

    /// The last component of `path`, as `NSString.lastPathComponent` gives it: trailing
    /// slashes ignored, `"/"` for the root, the whole string for a bare name.
    package static func lastComponent(of path: String) -> String {
        let trimmed = trimmingTrailingSlashes(path)
        guard trimmed != "/", let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// The home directory of the user running this process from the password database
    /// (`getpwuid_r`), for when `HOME` is unset or unusable; `"/"` when there is no entry.
    package static func passwordDatabaseHome() -> String {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var capacity = max(Int(sysconf(Int32(_SC_GETPW_R_SIZE_MAX))), 1024)
        while capacity <= 1 << 20 {
            let home: String?? = withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer in
                let status = getpwuid_r(geteuid(), &entry, buffer.baseAddress!, capacity, &result)
                if status == ERANGE { return .none }
                guard status == 0, result != nil, let directory = entry.pw_dir, directory.pointee != 0 else {
                    return .some(nil)
                }
                return .some(String(cString: directory))
            }
            if let home { return home ?? "/" }
            capacity *= 2
        }
        return "/"
    }

    private static func trimmingTrailingSlashes(_ path: String) -> String {
        var end = path.endIndex
        while end > path.startIndex, path[path.index(before: end)] == "/" { end = path.index(before: end) }
        return end == path.startIndex ? (path.isEmpty ? "" : "/") : String(path[..<end])
    }
}
