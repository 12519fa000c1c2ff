import Foundation

/// The three designs compared.
enum Backend: String, CaseIterable {
    case tokenStore = "TokenStore"
    case libsecret = "libsecret/item"
    case plaintext = "plaintext SQLite"
}

/// The operations measured at each store size.
enum Operation: String, CaseIterable {
    case get, put, delete, list
    /// Cold open in a new process, timed inside the child (open + key fetch + first get).
    case openChild = "open (cold, in child)"
    /// The same, timed from the parent: spawn → exit (exec, linking, runtime start-up too).
    case openSpawn = "open (cold, spawn→exit)"
}

/// Everything measured for one backend at one store size.
struct BackendFigures {
    var samples: [Operation: Samples] = [:]
    /// Database (or keyring file) bytes divided by the item count.
    var bytesPerItem: Double = .nan
    /// Peak RSS (VmHWM) during this backend's phase at this size, and its growth over the
    /// RSS at the start of the phase.
    var peakRSS: Int = 0
    var peakGrowth: Int = 0
    /// Peak RSS growth during the listings alone (shows whether `list` streams).
    var listPeakGrowth: Int = 0
    /// Seconds spent growing the store to this size (not part of any figure).
    var populateSeconds: Double = 0
}

struct SizeFigures {
    let size: Int
    var backends: [Backend: BackendFigures] = [:]
}

/// Logout and renewal against the local authorization server.
struct SessionFigures {
    var signIn = Samples()
    var logout = Samples()
    var revokeHTTP = Samples()
    var stepBegin = Samples()
    var stepRevoke = Samples()
    var stepRecord = Samples()
    var lastLogout = Samples()
    var renewal = Samples()
    var cacheHit = Samples()
    var note: String?
}

/// The whole run.
struct RunResults {
    var sizes: [SizeFigures] = []
    /// Only TokenStore's cold opens were measured (`--open-only`).
    var openOnly = false
    var session: SessionFigures?
    /// Warm, in-process single libsecret lookups at the smallest size (the unit for "cold open
    /// within 2× of a single libsecret lookup").
    var baselineRSS: Int = 0
    var peakResetWorks = false
    var loadBefore = ""
    var loadAfter = ""
    var startedAt = Date()
    var seconds: Double = 0
    var notes: [String] = []

    func figures(_ backend: Backend, size: Int) -> BackendFigures? {
        sizes.first { $0.size == size }?.backends[backend]
    }

    func p50(_ backend: Backend, _ operation: Operation, size: Int) -> Double {
        figures(backend, size: size)?.samples[operation]?.p50 ?? .nan
    }
}
