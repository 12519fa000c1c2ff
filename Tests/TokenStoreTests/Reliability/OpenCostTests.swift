import CFaultVFS
import Foundation
import Testing
import TestSupport
@testable import TokenStore

/// open_cost: what an open reads does not grow with the store's rows. The fault VFS of
/// ``IOFaultTests`` (in its serialized suite, as it shares the VFS's counters), armed for a
/// read fault it never reaches, counts every `xRead` of a fresh connection: an open that
/// scans a table (a `count(*)` over `items`, as the store-epoch check did to word an error it
/// throws only for a rolled-back file) reads every page of it.
extension IOFaultTests {
    @Test("an open reads as many pages at 2,000 items as at 10 (no scan of the rows); METRIC open_pages_read")
    func openReadsDoNotGrowWithRows() throws {
        #expect(tokenstore_faultvfs_register() == 0)
        let vfs = String(cString: tokenstore_faultvfs_name())
        var reads: [Int: Int32] = [:]
        for size in [10, 2_000] {
            let directory = try TemporaryDirectory()
            let path = directory.appending("store/tokens.sqlite").path
            let keys = MemoryKeyProvider()
            do {
                let store = try TokenStore(path: path, appID: testAppID, keyProvider: keys)
                let padding = String(repeating: "x", count: 900)  // about one row per quarter page
                for index in 0..<size {
                    try store.set(secret("rt-\(index)-\(padding)"), for: key("user\(index)"))
                }
                store.close()
            }
            tokenstore_faultvfs_arm(Int32(TOKENSTORE_FAULT_READ), Int32.max)
            let store = try TokenStore(
                path: path, appID: testAppID, keyProvider: keys, logger: .disabled, options: .init(), migrator: Migrator(), vfs: vfs)
            reads[size] = tokenstore_faultvfs_calls()
            tokenstore_faultvfs_disarm()
            #expect(try store.secret(for: key("user1"))?.count == "rt-1-".utf8.count + 900)
            store.close()
        }
        let small = reads[10] ?? 0, large = reads[2_000] ?? 0
        print("METRIC open_pages_read items=10 reads=\(small) items=2000 reads=\(large)")
        #expect(small > 0, "the VFS counted no read: the open did not go through it")
        // 2,000 rows of ~1 KB fill about 500 pages; a B-tree one level deeper is a few more.
        #expect(large <= small + 8, "an open at 2,000 items read \(large) times, at 10 items \(small)")
    }
}
