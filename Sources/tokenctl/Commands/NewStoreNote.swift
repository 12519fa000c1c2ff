import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import TokenStore

/// What `put` and `login` say when their open made a new store: a mistyped `--store` (or app
/// id) must not send a secret into a new store silently. The lines go to stderr whatever
/// `--quiet` and `--json` say, as `clear`'s warning does; the command still exits 0.
struct NewStoreNote {
    /// Whether a store (a non-empty file) was at the path before the open, whether any file was,
    /// and whether its folder existed.
    let fileExisted: Bool
    let anyFileExisted: Bool
    let folderExisted: Bool
    /// The folders on the way to the store that did not exist before the open, deepest first.
    let missingFolders: [String]

    /// Looks at `path` before the open.
    init(path: String) {
        var info = stat()
        anyFileExisted = lstat(path, &info) == 0
        fileExisted = anyFileExisted && info.st_size > 0
        var missing: [String] = []
        var folder = PathNames.directory(of: path)
        while !folder.isEmpty, folder != "/", folder != ".", lstat(folder, &info) != 0, errno == ENOENT, missing.count < 64 {
            missing.append(folder)
            folder = PathNames.directory(of: folder)
        }
        missingFolders = missing
        folderExisted = missing.isEmpty
    }

    /// After a failed first write into the store the open made (no file was at the path before):
    /// destroys it — its data key, its files — and removes the folders made for it while they
    /// are empty, so that a failed first `put` (a full disk) leaves nothing behind.
    /// - Returns: whether the store was removed.
    func removeCreatedStore(_ store: TokenStore) -> Bool {
        guard !anyFileExisted else { return false }
        do {
            try store.destroyStore(confirm: .yesDestroyEverything)
        } catch {
            return false
        }
        for folder in missingFolders where rmdir(folder) != 0 { break }
        return true
    }

    /// After an open that was making the store at `path` (no file was there before) failed part
    /// way, on a full disk (its migrations need more room than the first put): destroys what it
    /// made — its files and the data key it may have stored — and the folders made for it while
    /// they are empty.
    /// - Returns: whether a store was removed.
    func removeStoreOfFailedOpen(path: String, appID: String) -> Bool {
        var info = stat()
        guard !anyFileExisted, lstat(path, &info) == 0 else { return false }
        do {
            try TokenStore.destroyStore(path: path, appID: appID, confirm: .yesDestroyEverything)
        } catch {
            return false
        }
        for folder in missingFolders where rmdir(folder) != 0 { break }
        return true
    }

    /// The lines to print after a successful open of `path`, or nil when it was a store already.
    func lines(path: String) -> [String]? {
        guard !fileExisted else { return nil }
        var lines = [
            "note: no store was at \(path), so a new one was made" + (folderExisted ? "" : ", with its folder")
                + " (only put and login create a store)"
        ]
        if let meant = Self.likelyMeant(path: path, folderExisted: folderExisted) {
            lines.append("note: a store exists at \(meant): if that is the one you meant, give it with --store and delete this one with 'tokenctl --store \(path) destroy --yes'")
        }
        return lines
    }

    /// An existing store whose path differs from `path` by a likely typo: another database file
    /// in the same folder with a close name, or, when the folder is new, a close sibling folder
    /// that holds a store of the same file name (a mistyped app id).
    static func likelyMeant(path: String, folderExisted: Bool) -> String? {
        let folder = PathNames.directory(of: path)
        let name = PathNames.lastComponent(of: path)
        if folderExisted {
            let base = folder.isEmpty ? "." : folder
            let candidates = entries(of: base).filter { $0 != name && isSQLiteDatabase(base + "/" + $0) }
            return closestMatch(to: name, among: candidates, maximumDistance: 3).map { base + "/" + $0 }
        }
        let parent = PathNames.directory(of: folder)
        let base = parent.isEmpty ? "." : parent
        let folderName = PathNames.lastComponent(of: folder)
        let candidates = entries(of: base).filter { $0 != folderName && isSQLiteDatabase(base + "/" + $0 + "/" + name) }
        return closestMatch(to: folderName, among: candidates, maximumDistance: 3).map { base + "/" + $0 + "/" + name }
    }

    /// The names in `directory` (none when it cannot be read), at most the first 1,000.
    private static func entries(of directory: String) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while names.count < 1_000, let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// Whether `path` is a regular file that starts with SQLite's header (not followed through a link).
    private static func isSQLiteDatabase(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size >= 100 else { return false }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 16)
        guard read(fd, &header, 16) == 16 else { return false }
        return header == Array("SQLite format 3\0".utf8)
    }
}
