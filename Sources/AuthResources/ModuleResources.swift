import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A target's SwiftPM resources (`resources:` in Package.swift), found without `Bundle.main`.
///
/// SwiftPM's generated `Bundle.module` looks in `Bundle.main.bundleURL` (the executable's
/// directory) for `<package>_<target>.resources`. On Linux, `Bundle.main`'s first use asks
/// CoreFoundation for the main bundle, and once in a CI run an `identity` process crashed right
/// there at start (`one-time initialization function for _mainBundle`, SIGILL: the main bundle
/// came back nil). The services only need a directory next to their executable, so this finds
/// it from `/proc/self/exe` and reads it with `FileManager`: no CFBundle involved. The layout is
/// the same in `.build/<configuration>/`, in the test runner's directory and in the container
/// image (deploy/Dockerfile copies the `*.resources` folders next to the executables).
public struct ModuleResources: Sendable {
    /// The package's name in Package.swift: the prefix of every resource folder.
    public static let packageName = "auth-backend"

    /// The folder of this target's resources.
    public let directory: URL

    /// `target`'s resources next to the running executable.
    public init(target: String) {
        self.directory = Self.executableDirectory.appendingPathComponent(
            "\(Self.packageName)_\(target).resources", isDirectory: true)
    }

    /// The file or folder `name` (with `ext`) among the resources, when it exists.
    public func url(forResource name: String, withExtension ext: String? = nil) -> URL? {
        let file = ext.map { "\(name).\($0)" } ?? name
        let url = directory.appendingPathComponent(file)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    /// The directory of the running executable: `/proc/self/exe` resolved, else the first
    /// argument's.
    public static let executableDirectory: URL = {
        #if os(Linux)
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if count > 0 {
            let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return URL(fileURLWithPath: path).deletingLastPathComponent()
        }
        #endif
        return URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.deletingLastPathComponent()
    }()
}
