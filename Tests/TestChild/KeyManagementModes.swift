// Child modes of the key-management tests (Tests/TokenStoreTests/KeyManagementTests.swift).
//
//   tokenstore-testchild km-rotate STORE BATCH     rotate the data key in batches of BATCH rows;
//                                                  print "ROTATED <old> <new> <rows>" (crash points
//                                                  rotate.* are armed with TOKENSTORE_CRASH_POINT)
//   tokenstore-testchild km-open-default STORE     open with the default key provider; print
//                                                  "OPENED <key>" or "ERROR <code>" and "HINT <hint>"
import Foundation
import TokenStore

func runKeyManagementMode(_ mode: String, _ args: [String]) throws {
    let storePath = args[1]
    switch mode {
    case "km-rotate":
        guard args.count >= 3, let batch = Int(args[2]) else { fail("km-rotate STORE BATCH") }
        let store = try TokenStore(path: storePath, appID: "dev.tokenstore.tests")
        let report = try store.rotateDataKey(batchSize: batch)
        say("ROTATED \(report.previousKeyIdentifier) \(report.newKeyIdentifier) \(report.rowsResealed)")
    case "km-open-default":
        do {
            let store = try TokenStore(path: storePath, appID: "dev.tokenstore.tests")
            say("OPENED \(store.keyIdentifier)")
        } catch let error as TokenStoreError {
            say("ERROR \(error.code.rawValue)")
            say("HINT \(error.hint ?? "")")
        }
    default:
        fail("unknown key-management mode")
    }
}
