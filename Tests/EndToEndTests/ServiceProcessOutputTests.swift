import Foundation
import Synchronization
import Testing

@testable import AuthTestSupport

/// The output channel of a ``ServiceProcess``: only its own process may hold the write end; and
/// a test's own sockets (``closeOnExecTCPSocket()``) go to no program at all.
/// Foundation's `Process` closes in a new program the descriptors that were open when its start
/// began, not those another thread opens meanwhile; a `Pipe` made then went to the new program
/// as well (48 and 60 of 200 programs held one in two trials), a service's output then ended
/// only when that program exited, and `kill()`, which waits for the end of the output (up to
/// 10 s), took 6 s in the whole suite under load.
@Suite struct ServiceProcessOutputTests {
    @Test(.timeLimit(.minutes(2))) func programsStartedMeanwhileHoldNoOutputChannelOrSocket() async throws {
        // Another test thread starts programs (they sleep, so they still run when checked)...
        let programs = Mutex<[Process]>([])
        let starting = Atomic<Bool>(true)
        let starter = Thread {
            for _ in 0..<40 {
                let program = Process()
                program.executableURL = URL(fileURLWithPath: "/bin/sleep")
                program.arguments = ["60"]
                if (try? program.run()) != nil { programs.withLock { $0.append(program) } }
            }
            starting.store(false, ordering: .releasing)
        }
        starter.start()
        // ...while this one makes output channels, as starting services does, and sockets, as
        // tests that connect by hand do.
        var channels: [(read: FileHandle, write: FileHandle)] = []
        var sockets: [Int32] = []
        var links = Set<String>()
        while starting.load(ordering: .acquiring) {
            let channel = try ServiceProcess.outputSocketPair()
            channels.append(channel)
            let socket = closeOnExecTCPSocket()
            #expect(socket >= 0)
            sockets.append(socket)
            for descriptor in [channel.read.fileDescriptor, channel.write.fileDescriptor, socket] {
                links.insert(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"))
            }
            try await Task.sleep(for: .microseconds(200))
        }
        let started = programs.withLock { $0 }
        #expect(started.count == 40)
        #expect(!channels.isEmpty)
        var held: [String] = []
        for program in started {
            let folder = "/proc/\(program.processIdentifier)/fd"
            for descriptor in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
                if let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\(descriptor)"),
                    links.contains(link)
                {
                    held.append("\(program.processIdentifier): \(link)")
                }
            }
        }
        #expect(held.isEmpty, "programs holding an output channel or a socket: \(held)")
        for program in started {
            kill(program.processIdentifier, SIGKILL)
            _ = await eventually { ChildProcess.exitStatus(reaping: program) != nil }
        }
        for channel in channels {
            try channel.read.close()
            try channel.write.close()
        }
        for socket in sockets { close(socket) }
    }
}
