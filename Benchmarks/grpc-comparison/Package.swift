// swift-tools-version:6.1
// The comparison a user would make: gRPC Swift 2 (HTTP/2, plaintext, unary, raw bytes) on the
// same machine as our RPC layer. A package of its own so the main build never carries gRPC.
// Run everything with ./run.sh (docs/benchmarks.md).
import PackageDescription

let package = Package(
    name: "grpc-comparison",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/grpc/grpc-swift-2.git", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport.git", from: "2.9.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
    ],
    targets: [
        .executableTarget(
            name: "grpc-comparison",
            dependencies: [
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        )
    ]
)
